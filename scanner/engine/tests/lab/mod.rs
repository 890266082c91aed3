//! A lab web server for the default template pack.
//!
//! Every template of the pack has one case, named after the template id, and
//! the server exposes it three ways:
//! - `/vuln/<id>/...`: the problem the template looks for;
//! - `/hardened/<id>/...`: what a correctly configured server answers instead
//!   (404 or 403 for files, a 200 page with every security header at the root,
//!   no reflection, cookies with `Secure; HttpOnly`, ...);
//! - `/catchall/<id>/...`: a soft-404 site answering 200 with the same HTML
//!   page for every method and path, so templates that trust the status alone
//!   are caught.
//!
//! Templates use `{{BaseURL}}/...` and the engine keeps the input path, so a
//! scan of `http://127.0.0.1:PORT/vuln/<id>` only ever reaches that case.
//!
//! Plain tokio rather than a framework: the cases need exact control over
//! header lines (repeated `Set-Cookie`, missing headers, raw binary bodies).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Largest request head the lab accepts; the pack's requests are tiny.
const MAX_HEAD: usize = 64 * 1024;

/// A running lab server; stops accepting when dropped.
pub struct Lab {
    addr: SocketAddr,
    /// The accept loop; aborted on drop, which also ends the connection tasks
    /// it spawned once their peers close.
    accept_task: JoinHandle<()>,
}

impl Lab {
    /// Binds 127.0.0.1 on a free port and serves until dropped.
    pub async fn start() -> io::Result<Lab> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accept_task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_connection(stream));
            }
        });
        Ok(Lab { addr, accept_task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL of the vulnerable version of `case`.
    pub fn vulnerable_url(&self, case: &str) -> String {
        format!("http://{}/vuln/{case}", self.addr)
    }

    /// Base URL of the hardened version of `case`.
    pub fn hardened_url(&self, case: &str) -> String {
        format!("http://{}/hardened/{case}", self.addr)
    }

    /// Base URL of the soft-404 site (same page for every path).
    pub fn catchall_url(&self, case: &str) -> String {
        format!("http://{}/catchall/{case}", self.addr)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

/// Every case the lab serves; the pack tests check this equals the set of
/// pack template ids.
pub const CASES: &[&str] = &[
    // exposures
    "git-config-exposure",
    "git-head-exposure",
    "env-file-exposure",
    "svn-wc-db-exposure",
    "svn-entries-exposure",
    "hg-repository-exposure",
    "ds-store-exposure",
    "backup-zip-archive",
    "backup-targz-archive",
    "sql-dump-exposure",
    "sqlite-database-exposure",
    "index-source-backup",
    "config-backup-exposure",
    "htpasswd-exposure",
    "web-config-exposure",
    "docker-compose-exposure",
    "aws-credentials-exposure",
    "ssh-private-key-exposure",
    "git-credentials-exposure",
    "npmrc-token-exposure",
    "sftp-config-exposure",
    "composer-json-exposure",
    "package-json-exposure",
    "yarn-lock-exposure",
    // misconfiguration
    "phpinfo-exposure",
    "apache-server-status",
    "apache-server-info",
    "nginx-stub-status",
    "directory-listing-apache",
    "directory-listing-nginx",
    "directory-listing-iis",
    "cors-credentials-reflection",
    "open-redirect-parameter",
    "crossdomain-xml-permissive",
    "clientaccesspolicy-permissive",
    "verbose-error-stack-trace",
    "aspnet-detailed-errors",
    // discovery
    "robots-txt",
    "security-txt",
    // debug
    "spring-actuator-env",
    "spring-actuator-heapdump",
    "spring-actuator-health",
    "django-debug-mode",
    "laravel-ignition-exposure",
    "rails-info-properties",
    "werkzeug-debug-console",
    "symfony-profiler-exposure",
    "go-pprof-exposure",
    "prometheus-metrics-exposure",
    "elmah-log-exposure",
    // api
    "swagger-ui-exposure",
    "openapi-spec-exposure",
    "springdoc-api-docs",
    "graphql-introspection",
    // default pages
    "apache-default-page",
    "nginx-default-page",
    "iis-default-page",
    "tomcat-default-page",
    // panels
    "phpmyadmin-panel",
    "adminer-panel",
    "tomcat-manager-panel",
    "jenkins-panel",
    "grafana-panel",
    "kibana-panel",
    "wordpress-login-panel",
    // headers
    "missing-hsts-header",
    "missing-csp-header",
    "missing-x-frame-options-header",
    "missing-x-content-type-options-header",
    "missing-referrer-policy-header",
    "server-version-disclosure",
    "x-powered-by-disclosure",
    "aspnet-version-header",
    "cookie-without-secure",
    "cookie-without-httponly",
    // technologies
    "wordpress-detect",
    "drupal-detect",
    "joomla-detect",
    "nginx-detect",
    "apache-detect",
    "iis-detect",
    "php-detect",
    "express-detect",
    "nextjs-detect",
    "react-detect",
    "jquery-detect",
];

/// One parsed request, as much as the cases need.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The raw (still percent-encoded) value of a query parameter.
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == name).then_some(value)
        })
    }
}

/// A response; `Content-Length` is added when it is written.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".to_string(), content_type.to_string())],
            body: body.into(),
        }
    }

    pub fn with(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn without(mut self, name: &str) -> Response {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    fn to_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

async fn serve_connection(stream: TcpStream) {
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader).await {
            Ok(Some(request)) => request,
            // Peer closed, or sent something unparseable: end the connection.
            Ok(None) | Err(_) => return,
        };
        let keep_alive = !request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let response = route(&request);
        if reader
            .get_mut()
            .write_all(&response.to_bytes(keep_alive))
            .await
            .is_err()
            || !keep_alive
        {
            return;
        }
    }
}

async fn read_request(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Request>> {
    let mut head_len = 0;
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Ok(None);
        }
        head_len += n;
        if head_len > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if text.is_empty() {
            if lines.is_empty() {
                continue;
            }
            break;
        }
        lines.push(text);
    }
    let mut request_line = lines[0].split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };
    let headers: Vec<(String, String)> = lines[1..]
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length.min(MAX_HEAD)];
    reader.read_exact(&mut body).await?;
    Ok(Some(Request {
        method,
        path,
        query,
        headers,
        body,
    }))
}

/// Splits `/<mode>/<case><rest>` and dispatches; `rest` keeps its leading
/// slash (`""` for the bare base URL).
pub fn route(request: &Request) -> Response {
    let path = request.path.strip_prefix('/').unwrap_or(&request.path);
    let (mode, after_mode) = path.split_once('/').unwrap_or((path, ""));
    let (case, rest) = match after_mode.find('/') {
        Some(i) => after_mode.split_at(i),
        None => (after_mode, ""),
    };
    match mode {
        "vuln" => vulnerable(case, rest, request).unwrap_or_else(plain_not_found),
        "hardened" => hardened(case, rest, request).unwrap_or_else(hardened_not_found),
        "catchall" => catchall_page(),
        _ => plain_not_found(),
    }
}

// ---------------------------------------------------------------------------
// Shared pages

const HTML: &str = "text/html; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const BINARY: &str = "application/octet-stream";

const NEUTRAL_PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Northwind Storefront</title><link rel=\"stylesheet\" href=\"/assets/site.css\"></head>\n\
<body><header><h1>Northwind Storefront</h1></header><main><p>Fresh coffee, delivered.</p>\
<a href=\"/shop\">Shop now</a></main><script src=\"/assets/site.js\"></script></body></html>\n";

/// Every security header the pack checks for, with correct values.
fn security_headers(response: Response) -> Response {
    response
        .with(
            "Strict-Transport-Security",
            "max-age=63072000; includeSubDomains",
        )
        .with(
            "Content-Security-Policy",
            "default-src 'self'; frame-ancestors 'none'",
        )
        .with("X-Frame-Options", "DENY")
        .with("X-Content-Type-Options", "nosniff")
        .with("Referrer-Policy", "strict-origin-when-cross-origin")
}

/// The hardened 200 page: full security headers, no product or version.
fn secure_page() -> Response {
    security_headers(Response::new(200, HTML, NEUTRAL_PAGE))
}

/// A page without any security header, as a careless server sends it.
fn bare_page(body: &str) -> Response {
    Response::new(200, HTML, body)
}

fn catchall_page() -> Response {
    secure_page()
}

fn plain_not_found() -> Response {
    Response::new(404, HTML, "<html><body><h1>Not Found</h1></body></html>\n")
}

fn hardened_not_found() -> Response {
    security_headers(Response::new(
        404,
        HTML,
        "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\
<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>\n",
    ))
}

fn hardened_forbidden() -> Response {
    security_headers(Response::new(
        403,
        HTML,
        "<!DOCTYPE html>\n<html><head><title>403 Forbidden</title></head>\
<body><h1>Forbidden</h1><p>You don't have permission to access this resource.</p></body></html>\n",
    ))
}

// ---------------------------------------------------------------------------
// Hardened behaviour

fn hardened(case: &str, rest: &str, request: &Request) -> Option<Response> {
    let response = match (case, rest) {
        ("cookie-without-secure" | "cookie-without-httponly", "" | "/") => secure_page()
            .with(
                "Set-Cookie",
                "session=4f2a9c81; Path=/; Secure; HttpOnly; SameSite=Lax",
            )
            .with(
                "Set-Cookie",
                "prefs=compact; Path=/; Max-Age=31536000; HttpOnly; Secure",
            ),
        // Only the configured front-end origin is trusted; the probe origin is
        // not echoed back.
        ("cors-credentials-reflection", "" | "/") => secure_page()
            .with(
                "Access-Control-Allow-Origin",
                "https://shop.northwind.example",
            )
            .with("Access-Control-Allow-Credentials", "true")
            .with("Vary", "Origin"),
        // External targets are ignored: the redirect stays on this site.
        ("open-redirect-parameter", "" | "/")
            if ["next", "url", "redirect", "return_to"]
                .iter()
                .any(|p| request.query_param(p).is_some()) =>
        {
            security_headers(Response::new(302, HTML, "")).with("Location", "/account")
        }
        ("verbose-error-stack-trace", "" | "/") if !request.query.is_empty() => {
            security_headers(Response::new(
                400,
                HTML,
                "<!DOCTYPE html>\n<html><body><h1>Bad Request</h1>\
<p>Something was wrong with your request. Reference: 7f3a.</p></body></html>\n",
            ))
        }
        (_, "" | "/") => secure_page(),
        ("graphql-introspection", "/graphql" | "/api/graphql") => security_headers(Response::new(
            400,
            JSON,
            r#"{"errors":[{"message":"GraphQL introspection is not allowed, but the query contained __schema or __type.","extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}"#,
        )),
        ("tomcat-manager-panel", "/manager/html") => hardened_forbidden(),
        // Dotfiles and VCS metadata are denied outright, as Apache's default
        // `.ht*` rule and common nginx snippets do.
        (_, rest) if rest.starts_with("/.") => hardened_forbidden(),
        _ => return None,
    };
    Some(response)
}

// ---------------------------------------------------------------------------
// Vulnerable behaviour

// Long because it is the table of cases: one arm per pack template.
#[allow(clippy::too_many_lines)]
fn vulnerable(case: &str, rest: &str, request: &Request) -> Option<Response> {
    let root = rest.is_empty() || rest == "/";
    if root {
        if let Some(page) = vulnerable_root(case, request) {
            return Some(page);
        }
    }
    let response = match (case, rest) {
        ("git-config-exposure", "/.git/config") => Response::new(200, TEXT, GIT_CONFIG),
        ("git-head-exposure", "/.git/HEAD") => Response::new(200, TEXT, "ref: refs/heads/main\n"),
        ("env-file-exposure", "/.env") => Response::new(200, TEXT, DOTENV),
        ("svn-wc-db-exposure", "/.svn/wc.db") => Response::new(200, BINARY, sqlite_file("WCROOT")),
        ("svn-entries-exposure", "/.svn/entries") => Response::new(200, TEXT, SVN_ENTRIES),
        ("hg-repository-exposure", "/.hg/requires") => Response::new(
            200,
            TEXT,
            "dotencode\nfncache\ngeneraldelta\nrevlogv1\nsparserevlog\nstore\n",
        ),
        ("ds-store-exposure", "/.DS_Store") => Response::new(200, BINARY, ds_store_file()),
        ("backup-zip-archive", "/www.zip") => Response::new(200, "application/zip", zip_file()),
        ("backup-targz-archive", "/site.tar.gz") => {
            Response::new(200, "application/gzip", gzip_file())
        }
        ("sql-dump-exposure", "/db.sql") => Response::new(200, TEXT, SQL_DUMP),
        ("sqlite-database-exposure", "/database.sqlite") => {
            Response::new(200, BINARY, sqlite_file("users"))
        }
        ("index-source-backup", "/index.php.bak") => Response::new(200, TEXT, INDEX_PHP),
        ("config-backup-exposure", "/config.php~") => Response::new(200, TEXT, CONFIG_PHP),
        ("htpasswd-exposure", "/.htpasswd") => Response::new(
            200,
            TEXT,
            "admin:$apr1$x9Qd2kLm$ZqLq7oV1c0nXbW3yR5tU8.\nops:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n",
        ),
        ("web-config-exposure", "/web.config") => Response::new(200, "text/xml", WEB_CONFIG),
        ("docker-compose-exposure", "/docker-compose.yaml") => {
            Response::new(200, TEXT, DOCKER_COMPOSE)
        }
        ("aws-credentials-exposure", "/.aws/credentials") => Response::new(
            200,
            TEXT,
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = eu-west-1\n",
        ),
        ("ssh-private-key-exposure", "/.ssh/id_ed25519") => Response::new(
            200,
            TEXT,
            "-----BEGIN OPENSSH PRIVATE KEY-----\nbGFiLWZpeHR1cmUtbm90LWEtcmVhbC1rZXk=\n\
-----END OPENSSH PRIVATE KEY-----\n",
        ),
        ("git-credentials-exposure", "/.git-credentials") => Response::new(
            200,
            TEXT,
            "https://deploy:labfixture-token-0000@git.northwind.example\n",
        ),
        ("npmrc-token-exposure", "/.npmrc") => Response::new(
            200,
            TEXT,
            "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_labfixture0000\n",
        ),
        ("sftp-config-exposure", "/.vscode/sftp.json") => Response::new(200, JSON, SFTP_JSON),
        ("composer-json-exposure", "/composer.json") => Response::new(200, JSON, COMPOSER_JSON),
        ("package-json-exposure", "/package.json") => Response::new(200, JSON, PACKAGE_JSON),
        ("yarn-lock-exposure", "/yarn.lock") => Response::new(200, TEXT, YARN_LOCK),
        ("phpinfo-exposure", "/info.php") => bare_page(PHPINFO),
        ("apache-server-status", "/server-status") => bare_page(SERVER_STATUS),
        ("apache-server-info", "/server-info") => bare_page(SERVER_INFO),
        ("nginx-stub-status", "/stub_status") => Response::new(
            200,
            TEXT,
            "Active connections: 3 \nserver accepts handled requests\n 1204 1204 5511 \n\
Reading: 0 Writing: 1 Waiting: 2 \n",
        ),
        ("crossdomain-xml-permissive", "/crossdomain.xml") => {
            Response::new(200, "text/xml", CROSSDOMAIN_XML)
        }
        ("clientaccesspolicy-permissive", "/clientaccesspolicy.xml") => {
            Response::new(200, "text/xml", CLIENTACCESSPOLICY_XML)
        }
        ("aspnet-detailed-errors", "/scanfleet-missing-page.aspx") => {
            Response::new(404, HTML, ASPNET_ERROR)
        }
        ("robots-txt", "/robots.txt") => Response::new(
            200,
            TEXT,
            "User-agent: *\nDisallow: /admin/\nDisallow: /staging/\nSitemap: /sitemap.xml\n",
        ),
        ("security-txt", "/.well-known/security.txt") => Response::new(
            200,
            TEXT,
            "Contact: mailto:security@northwind.example\nExpires: 2030-01-01T00:00:00Z\n",
        ),
        ("spring-actuator-env", "/actuator/env") => Response::new(
            200,
            "application/vnd.spring-boot.actuator.v3+json",
            ACTUATOR_ENV,
        ),
        ("spring-actuator-heapdump", "/actuator/heapdump") => {
            let mut dump = b"JAVA PROFILE 1.0.2\0".to_vec();
            dump.extend_from_slice(&[0, 0, 0, 8, 0, 0, 1, 0x8c, 0x2f, 0x11, 0x20, 0x00]);
            Response::new(200, BINARY, dump)
        }
        ("spring-actuator-health", "/actuator/health") => Response::new(
            200,
            "application/vnd.spring-boot.actuator.v3+json",
            r#"{"status":"UP","groups":["liveness","readiness"]}"#,
        ),
        ("django-debug-mode", "/scanfleet-debug-probe/") => Response::new(404, HTML, DJANGO_404),
        ("laravel-ignition-exposure", "/_ignition/health-check") => {
            Response::new(200, JSON, r#"{"can_execute_commands":true}"#)
        }
        ("rails-info-properties", "/rails/info/properties") => bare_page(RAILS_INFO),
        ("werkzeug-debug-console", "/console") => bare_page(WERKZEUG_CONSOLE),
        ("symfony-profiler-exposure", "/_profiler/empty/search/results")
            if request.query_param("limit").is_some() =>
        {
            bare_page(SYMFONY_PROFILER)
        }
        ("go-pprof-exposure", "/debug/pprof/") => bare_page(PPROF_INDEX),
        ("prometheus-metrics-exposure", "/metrics") => Response::new(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            PROMETHEUS_METRICS,
        ),
        ("elmah-log-exposure", "/elmah.axd") => bare_page(ELMAH_PAGE),
        ("swagger-ui-exposure", "/swagger-ui/index.html") => bare_page(SWAGGER_UI),
        ("openapi-spec-exposure", "/openapi.json") => Response::new(200, JSON, OPENAPI_JSON),
        ("springdoc-api-docs", "/v3/api-docs") => Response::new(200, JSON, OPENAPI_JSON),
        ("graphql-introspection", "/graphql")
            if request.method == "POST"
                && String::from_utf8_lossy(&request.body).contains("__schema") =>
        {
            Response::new(200, JSON, GRAPHQL_SCHEMA)
        }
        ("phpmyadmin-panel", "/phpmyadmin/") => bare_page(PHPMYADMIN_LOGIN),
        ("adminer-panel", "/adminer.php") => bare_page(ADMINER_LOGIN),
        ("tomcat-manager-panel", "/manager/html") => Response::new(401, HTML, TOMCAT_401)
            .with("WWW-Authenticate", "Basic realm=\"Tomcat Manager Application\""),
        ("jenkins-panel", "/login") => bare_page(JENKINS_LOGIN)
            .with("X-Jenkins", "2.426.1")
            .with("X-Hudson", "1.395"),
        ("grafana-panel", "/login") => bare_page(GRAFANA_LOGIN),
        ("kibana-panel", "/app/kibana") => bare_page(KIBANA_PAGE)
            .with("kbn-name", "kibana")
            .with("kbn-version", "7.17.9"),
        ("wordpress-login-panel", "/wp-login.php") => bare_page(WP_LOGIN),
        _ => return None,
    };
    Some(response)
}

/// Root pages of the cases that look at `{{BaseURL}}/`.
fn vulnerable_root(case: &str, request: &Request) -> Option<Response> {
    let response = match case {
        "directory-listing-apache" => bare_page(APACHE_LISTING),
        "directory-listing-nginx" => bare_page(NGINX_LISTING),
        "directory-listing-iis" => bare_page(IIS_LISTING),
        "apache-default-page" => bare_page(APACHE_DEFAULT),
        "nginx-default-page" => bare_page(NGINX_DEFAULT),
        "iis-default-page" => bare_page(IIS_DEFAULT),
        "tomcat-default-page" => bare_page(TOMCAT_DEFAULT),
        "missing-hsts-header" => secure_page().without("Strict-Transport-Security"),
        "missing-csp-header" => secure_page().without("Content-Security-Policy"),
        // Neither header nor CSP directive: keep a CSP without frame-ancestors.
        "missing-x-frame-options-header" => secure_page()
            .without("X-Frame-Options")
            .without("Content-Security-Policy")
            .with("Content-Security-Policy", "default-src 'self'"),
        "missing-x-content-type-options-header" => secure_page().without("X-Content-Type-Options"),
        "missing-referrer-policy-header" => secure_page().without("Referrer-Policy"),
        "server-version-disclosure" => secure_page().with("Server", "Apache/2.4.57 (Debian)"),
        "x-powered-by-disclosure" => secure_page().with("X-Powered-By", "PHP/8.1.2-1ubuntu2.14"),
        "aspnet-version-header" => secure_page()
            .with("X-AspNet-Version", "4.0.30319")
            .with("X-AspNetMvc-Version", "5.2"),
        // One cookie is correct, the other lacks Secure although its value and
        // path mention "secure": the check must look at attributes only.
        "cookie-without-secure" => secure_page()
            .with("Set-Cookie", "prefs=compact; Path=/; Secure; HttpOnly")
            .with(
                "Set-Cookie",
                "session=secure-4f2a9c81; Path=/secure; HttpOnly; SameSite=Lax",
            ),
        "cookie-without-httponly" => secure_page()
            .with("Set-Cookie", "prefs=compact; Path=/; Secure; HttpOnly")
            .with("Set-Cookie", "sid=9d8e77; Path=/; Secure; SameSite=Strict"),
        // Otherwise well configured: each vulnerable route has one problem only.
        "cors-credentials-reflection" => match request.header("origin") {
            Some(origin) => secure_page()
                .with("Access-Control-Allow-Origin", origin)
                .with("Access-Control-Allow-Credentials", "true"),
            None => secure_page(),
        },
        // Only `redirect` is honoured, so the template must try its list.
        "open-redirect-parameter" => match request.query_param("redirect") {
            Some(target) => Response::new(302, HTML, "").with("Location", &percent_decode(target)),
            None => secure_page(),
        },
        "verbose-error-stack-trace" if !request.query.is_empty() => {
            Response::new(500, HTML, JAVA_STACK_TRACE)
        }
        "wordpress-detect" => bare_page(WORDPRESS_HOME),
        "drupal-detect" => {
            bare_page(NEUTRAL_PAGE).with("X-Generator", "Drupal 10 (https://www.drupal.org)")
        }
        "joomla-detect" => bare_page(JOOMLA_HOME),
        "nginx-detect" => bare_page(NEUTRAL_PAGE).with("Server", "nginx/1.24.0"),
        "apache-detect" => bare_page(NEUTRAL_PAGE).with("Server", "Apache/2.4.57 (Debian)"),
        "iis-detect" => bare_page(NEUTRAL_PAGE).with("Server", "Microsoft-IIS/10.0"),
        "php-detect" => bare_page(NEUTRAL_PAGE).with("X-Powered-By", "PHP/8.2.7"),
        "express-detect" => bare_page(NEUTRAL_PAGE).with("X-Powered-By", "Express"),
        "nextjs-detect" => bare_page(NEXTJS_HOME).with("X-Powered-By", "Next.js"),
        "react-detect" => bare_page(REACT_HOME),
        "jquery-detect" => bare_page(JQUERY_HOME),
        _ => return None,
    };
    Some(response)
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------
// Binary fixtures

/// The 100-byte SQLite header followed by a schema mentioning `table`.
fn sqlite_file(table: &str) -> Vec<u8> {
    let mut file = b"SQLite format 3\0".to_vec();
    file.extend_from_slice(&[0x10, 0x00, 0x01, 0x01, 0x00, 0x40, 0x20, 0x20]);
    file.resize(100, 0);
    file.extend_from_slice(
        format!("CREATE TABLE {table} (id INTEGER PRIMARY KEY, local_abspath TEXT)").as_bytes(),
    );
    file
}

fn ds_store_file() -> Vec<u8> {
    let mut file = vec![0x00, 0x00, 0x00, 0x01];
    file.extend_from_slice(b"Bud1");
    file.extend_from_slice(&[0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x08, 0x00]);
    file.extend_from_slice(b"\0\0\0\x0b\0b\0a\0c\0k\0u\0p\0.\0z\0i\0pIlocblob");
    file
}

fn zip_file() -> Vec<u8> {
    let mut file = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    file.extend_from_slice(&[0x21, 0x4c, 0x59, 0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&[0x0a, 0x00, 0x00, 0x00]);
    file.extend_from_slice(b"config.php");
    file
}

fn gzip_file() -> Vec<u8> {
    vec![
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xed, 0xc1, 0x01, 0x0d, 0x00,
        0x00, 0x00, 0xc2, 0xa0, 0xf7, 0x4f, 0x6d, 0x0e, 0x37, 0xa0, 0x00, 0x00, 0x00, 0x00,
    ]
}

// ---------------------------------------------------------------------------
// Text fixtures

const GIT_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://git.northwind.example/shop/web.git\n\
\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";

const DOTENV: &str =
    "APP_NAME=Northwind\nAPP_ENV=production\nAPP_KEY=base64:bGFiLWZpeHR1cmUta2V5LW5vdC1yZWFs\n\
DB_HOST=10.0.3.12\nDB_DATABASE=shop\nDB_USERNAME=shop\nDB_PASSWORD=lab-fixture-password\n";

const SVN_ENTRIES: &str = "10\n\ndir\n1432\nsvn://svn.northwind.example/shop/trunk\nsvn://svn.northwind.example/shop\n\n\n\
2023-11-02T10:15:00.000000Z\n1431\nalice\n";

const SQL_DUMP: &str = "-- MySQL dump 10.13  Distrib 8.0.35, for Linux (x86_64)\n--\n-- Host: localhost    Database: shop\n\
CREATE TABLE `users` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  `email` varchar(255) NOT NULL,\n  `password` char(60) NOT NULL,\n  PRIMARY KEY (`id`)\n);\n\
INSERT INTO `users` VALUES (1,'admin@northwind.example','$2y$10$labfixturelabfixturelabfixturelabfixturelabfixtur');\n";

const INDEX_PHP: &str =
    "<?php\nrequire __DIR__ . '/bootstrap.php';\n$app = App::create();\n$app->run();\n";

const CONFIG_PHP: &str = "<?php\n$db_host = '10.0.3.12';\n$db_user = 'shop';\n$db_password = 'lab-fixture-password';\n$db_name = 'shop';\n";

const WEB_CONFIG: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<configuration>\n  <connectionStrings>\n\
    <add name=\"Shop\" connectionString=\"Server=db;Database=shop;User Id=shop;Password=lab-fixture;\" />\n\
  </connectionStrings>\n  <system.web>\n    <compilation debug=\"false\" targetFramework=\"4.8\" />\n  </system.web>\n</configuration>\n";

const DOCKER_COMPOSE: &str = "version: \"3.8\"\nservices:\n  web:\n    image: northwind/shop:2.3.1\n    ports:\n      - \"80:8080\"\n\
    environment:\n      DB_PASSWORD: lab-fixture-password\n  db:\n    image: postgres:15\n";

const SFTP_JSON: &str = r#"{
    "name": "production",
    "host": "ftp.northwind.example",
    "protocol": "sftp",
    "port": 22,
    "username": "deploy",
    "password": "lab-fixture-password",
    "remotePath": "/var/www/shop"
}
"#;

const COMPOSER_JSON: &str = r#"{
    "name": "northwind/shop",
    "type": "project",
    "require": {
        "php": "^8.1",
        "laravel/framework": "^10.10"
    }
}
"#;

const PACKAGE_JSON: &str = r#"{
  "name": "northwind-storefront",
  "version": "2.3.1",
  "private": true,
  "dependencies": {
    "express": "4.18.2",
    "lodash": "4.17.20"
  }
}
"#;

const YARN_LOCK: &str = "# THIS IS AN AUTOGENERATED FILE. DO NOT EDIT THIS FILE DIRECTLY.\n# yarn lockfile v1\n\n\n\
express@4.18.2:\n  version \"4.18.2\"\n  resolved \"https://registry.yarnpkg.com/express/-/express-4.18.2.tgz\"\n";

const PHPINFO: &str =
    "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\">\n<html><head>\
<title>PHP 8.2.7 - phpinfo()</title></head><body><div class=\"center\"><table><tr class=\"h\"><td>\
<h1 class=\"p\">PHP Version 8.2.7</h1></td></tr></table></div></body></html>\n";

const SERVER_STATUS: &str = "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n<html><head>\n\
<title>Apache Status</title>\n</head><body>\n<h1>Apache Server Status for shop.northwind.example (via 10.0.3.5)</h1>\n\n\
<dl><dt>Server Version: Apache/2.4.57 (Debian) OpenSSL/3.0.11</dt>\n<dt>Server MPM: event</dt>\n</dl><hr /><dl>\n\
<dt>Server uptime:  12 days 3 hours 7 minutes</dt>\n</dl></body></html>\n";

const SERVER_INFO: &str = "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\">\n<html><head>\
<title>Server Information</title></head><body><h1 style=\"text-align: center\">Apache Server Information</h1>\n\
<h2><a name=\"server\">Server Settings</a></h2><dl><dt><strong>Server Version:</strong> Apache/2.4.57 (Debian)</dt></dl></body></html>\n";

const CROSSDOMAIN_XML: &str = "<?xml version=\"1.0\"?>\n<!DOCTYPE cross-domain-policy SYSTEM \
\"http://www.adobe.com/xml/dtds/cross-domain-policy.dtd\">\n<cross-domain-policy>\n\
  <allow-access-from domain=\"*\" secure=\"false\"/>\n</cross-domain-policy>\n";

const CLIENTACCESSPOLICY_XML: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<access-policy>\n  <cross-domain-access>\n\
    <policy>\n      <allow-from http-request-headers=\"*\">\n        <domain uri=\"*\"/>\n      </allow-from>\n\
      <grant-to>\n        <resource path=\"/\" include-subpaths=\"true\"/>\n      </grant-to>\n    </policy>\n\
  </cross-domain-access>\n</access-policy>\n";

const ASPNET_ERROR: &str = "<!DOCTYPE html>\n<html><head><title>The resource cannot be found.</title></head><body bgcolor=\"white\">\n\
<span><H1>Server Error in '/' Application.<hr width=100% size=1 color=silver></H1>\n\
<h2> <i>The resource cannot be found.</i> </h2></span>\n\
<b>Version Information:</b>&nbsp;Microsoft .NET Framework Version:4.0.30319; ASP.NET Version:4.8.4669.0\n</body></html>\n";

const ACTUATOR_ENV: &str = r#"{"activeProfiles":["prod"],"propertySources":[{"name":"server.ports","properties":{"local.server.port":{"value":8080}}},{"name":"applicationConfig: [classpath:/application.properties]","properties":{"spring.datasource.url":{"value":"jdbc:postgresql://10.0.3.12/shop"},"spring.datasource.password":{"value":"******"}}}]}"#;

const DJANGO_404: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><title>Page not found at /scanfleet-debug-probe/</title></head><body>\n\
<div id=\"summary\"><h1>Page not found <span>(404)</span></h1></div>\n<div id=\"info\"><p>Using the URLconf defined in \
<code>shop.urls</code>, Django tried these URL patterns, in this order:</p><ol><li>admin/</li><li>api/</li></ol></div>\n\
<div id=\"explanation\"><p>You're seeing this error because you have <code>DEBUG = True</code> in your Django settings file.</p></div>\n</body></html>\n";

const RAILS_INFO: &str = "<!DOCTYPE html><html><head><title>Routes</title></head><body><table>\n\
<tr><td class=\"name\">Rails version</td><td class=\"value\">7.1.2</td></tr>\n\
<tr><td class=\"name\">Ruby version</td><td class=\"value\">ruby 3.2.2 (2023-03-30 revision e51014f9c0) [x86_64-linux]</td></tr>\n\
<tr><td class=\"name\">Environment</td><td class=\"value\">development</td></tr></table></body></html>\n";

const WERKZEUG_CONSOLE: &str = "<!doctype html>\n<html lang=en><head><title>Console // Werkzeug Debugger</title>\n\
<link rel=\"stylesheet\" href=\"?__debugger__=yes&amp;cmd=resource&amp;f=style.css\">\n\
<script>var CONSOLE_MODE = true, EVALEX = true, EVALEX_TRUSTED = false, SECRET = \"labfixture\";</script></head>\n\
<body><div class=\"debugger\"><h1>Interactive Console</h1><div class=\"explanation\">In this console you can execute Python expressions \
in the context of the application.</div></div></body></html>\n";

const SYMFONY_PROFILER: &str = "<!DOCTYPE html>\n<html><head><title>Symfony Profiler</title></head>\n\
<body><div class=\"sf-toolbar\"></div><div id=\"summary\"><h2>Profile Search</h2><table><tr><td>GET</td><td>/checkout</td><td>200</td></tr></table></div></body></html>\n";

const PPROF_INDEX: &str = "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/<br>\n<br>\n\
<p>Set debug=1 as a query parameter to export in legacy text format</p>\n<br>\nTypes of profiles available:\n<table>\n\
<tr><td>12</td><td><a href='goroutine?debug=1'>goroutine</a></td></tr>\n<tr><td>3</td><td><a href='heap?debug=1'>heap</a></td></tr>\n</table>\n</body>\n</html>\n";

const PROMETHEUS_METRICS: &str = "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 12\n\
# HELP http_requests_total Total HTTP requests.\n# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\",handler=\"/checkout\"} 5531\n";

const ELMAH_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Error log for Shop on WEB01 (Page #1)</title></head><body>\n\
<h1 id=\"PageTitle\">Error Log for <span id=\"ApplicationName\">Shop on WEB01</span></h1>\n\
<p id=\"Footer\">Powered by <a href=\"https://elmah.github.io/\">ELMAH</a>, version 1.2.14706.</p></body></html>\n";

const SWAGGER_UI: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"UTF-8\"><title>Swagger UI</title>\n\
<link rel=\"stylesheet\" type=\"text/css\" href=\"./swagger-ui.css\" /></head>\n<body><div id=\"swagger-ui\"></div>\n\
<script src=\"./swagger-ui-bundle.js\" charset=\"UTF-8\"></script></body></html>\n";

const OPENAPI_JSON: &str = r#"{"openapi":"3.0.1","info":{"title":"Northwind Shop API","version":"2.3.1"},"paths":{"/orders":{"get":{"responses":{"200":{"description":"OK"}}}}}}"#;

const GRAPHQL_SCHEMA: &str = r#"{"data":{"__schema":{"queryType":{"name":"Query"},"types":[{"name":"Query"},{"name":"Order"},{"name":"AdminUser"}]}}}"#;

const PHPMYADMIN_LOGIN: &str = "<!DOCTYPE HTML>\n<html lang='en' dir='ltr'><head><meta charset=\"utf-8\"><title>phpMyAdmin</title>\n\
<script>var PMA_commonParams = {};</script></head><body><form method=\"post\" action=\"index.php?route=/\" name=\"login_form\">\n\
<input type=\"text\" name=\"pma_username\" id=\"input_username\"><input type=\"password\" name=\"pma_password\" id=\"input_password\">\n</form></body></html>\n";

const ADMINER_LOGIN: &str = "<!DOCTYPE html>\n<html lang=\"en\" dir=\"ltr\"><head><title>Login - Adminer</title></head>\n\
<body class=\"ltr nojs\"><h1><a href='https://www.adminer.org/' target=\"_blank\" rel=\"noreferrer noopener\" id='h1'>Adminer</a> \
<span class=\"version\">4.8.1</span></h1>\n<form action='' method='post'><select name='auth[driver]'><option value=\"server\" selected>MySQL</select>\n\
<input name=\"auth[server]\" value=\"\"></form></body></html>\n";

const TOMCAT_401: &str = "<!doctype html><html lang=\"en\"><head><title>401 Unauthorized</title></head><body><h1>401 Unauthorized</h1>\n\
<p>You are not authorized to view this page.</p></body></html>\n";

const JENKINS_LOGIN: &str = "<!DOCTYPE html><html><head resURL=\"/static/e1c5b7e5\"><title>Sign in [Jenkins]</title></head>\n\
<body><div class=\"simple-page\"><h1>Welcome to Jenkins!</h1><form method=\"post\" name=\"login\" action=\"j_spring_security_check\">\n\
<input name=\"j_username\" id=\"j_username\"></form></div></body></html>\n";

const GRAFANA_LOGIN: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Grafana</title><base href=\"/\" /></head>\n\
<body class=\"theme-dark app-grafana\"><div id=\"reactRoot\"></div><script nonce=\"\">window.grafanaBootData = {\"settings\":\
{\"buildInfo\":{\"version\":\"10.2.3\",\"commit\":\"1e84fede54\"}}};</script></body></html>\n";

const KIBANA_PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Elastic</title></head>\n\
<body><kbn-csp data=\"{&quot;strictCsp&quot;:false}\"></kbn-csp><div class=\"kbnWelcomeView\" id=\"kbn_loading_message\"></div></body></html>\n";

const WP_LOGIN: &str = "<!DOCTYPE html>\n<html lang=\"en-US\"><head><title>Log In &lsaquo; Northwind &#8212; WordPress</title></head>\n\
<body class=\"login wp-core-ui\"><form name=\"loginform\" id=\"loginform\" action=\"/wp-login.php\" method=\"post\">\n\
<input type=\"text\" name=\"log\" id=\"user_login\"><input type=\"password\" name=\"pwd\" id=\"user_pass\">\n\
<input type=\"submit\" name=\"wp-submit\" id=\"wp-submit\" value=\"Log In\"></form></body></html>\n";

const APACHE_LISTING: &str = "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n<html>\n <head>\n  <title>Index of /uploads</title>\n </head>\n <body>\n\
<h1>Index of /uploads</h1>\n  <table>\n   <tr><th valign=\"top\"><img src=\"/icons/blank.gif\" alt=\"[ICO]\"></th>\
<th><a href=\"?C=N;O=D\">Name</a></th><th><a href=\"?C=M;O=A\">Last modified</a></th><th><a href=\"?C=S;O=A\">Size</a></th></tr>\n\
   <tr><td valign=\"top\"><img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"></td><td><a href=\"/\">Parent Directory</a></td><td>&nbsp;</td><td align=\"right\">  - </td></tr>\n\
   <tr><td valign=\"top\"><img src=\"/icons/compressed.gif\" alt=\"[   ]\"></td><td><a href=\"backup-2023.zip\">backup-2023.zip</a></td><td align=\"right\">2023-11-02 10:15  </td><td align=\"right\"> 12M</td></tr>\n\
  </table>\n<address>Apache/2.4.57 (Debian) Server at shop.northwind.example Port 80</address>\n</body></html>\n";

const NGINX_LISTING: &str = "<html>\r\n<head><title>Index of /uploads/</title></head>\r\n<body>\r\n<h1>Index of /uploads/</h1><hr><pre><a href=\"../\">../</a>\r\n\
<a href=\"backup-2023.zip\">backup-2023.zip</a>                                    02-Nov-2023 10:15            12582912\r\n</pre><hr></body>\r\n</html>\r\n";

const IIS_LISTING: &str = "<html><head><title>shop.northwind.example - /uploads/</title></head><body><H1>shop.northwind.example - /uploads/</H1><hr>\r\n\r\n\
<pre><A HREF=\"/\">[To Parent Directory]</A><br><br> 11/2/2023 10:15 AM     12582912 <A HREF=\"/uploads/backup-2023.zip\">backup-2023.zip</A><br></pre><hr></body></html>\r\n";

const APACHE_DEFAULT: &str = "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n\
<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\" />\n<title>Apache2 Debian Default Page: It works</title>\n</head>\n\
<body><div class=\"main_page\"><div class=\"page_header floating_element\"><span class=\"floating_element\">Apache2 Debian Default Page</span></div>\n\
<p>This is the default welcome page used to test the correct operation of the Apache2 server after installation on Debian systems.</p></div></body></html>\n";

const NGINX_DEFAULT: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n\
<p>If you see this page, the nginx web server is successfully installed and working. Further configuration is required.</p>\n\
<p>For online documentation and support please refer to <a href=\"http://nginx.org/\">nginx.org</a>.</p>\n</body>\n</html>\n";

const IIS_DEFAULT: &str = "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n\
<title>IIS Windows Server</title>\n</head>\n<body>\n<div id=\"container\">\n<a href=\"http://go.microsoft.com/fwlink/?linkid=66138&amp;clcid=0x409\">\
<img src=\"iisstart.png\" alt=\"IIS\" width=\"960\" height=\"600\" /></a>\n</div>\n</body>\n</html>\n";

const TOMCAT_DEFAULT: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<title>Apache Tomcat/9.0.83</title>\n</head>\n<body>\n\
<div id=\"congrats\" class=\"curved container\"><h2>If you're seeing this, you've successfully installed Tomcat. Congratulations!</h2></div>\n</body>\n</html>\n";

const JAVA_STACK_TRACE: &str = "<!doctype html><html><head><title>HTTP Status 500 – Internal Server Error</title></head><body>\
<h1>HTTP Status 500 – Internal Server Error</h1><h3>Exception</h3><pre>java.lang.NumberFormatException: For input string: &quot;&#39;&quot;\n\
\tat java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)\n\
\tat java.base/java.lang.Integer.parseInt(Integer.java:668)\n\
\tat com.northwind.shop.web.ProductController.show(ProductController.java:42)\n</pre></body></html>\n";

const WORDPRESS_HOME: &str = "<!DOCTYPE html>\n<html lang=\"en-US\"><head><meta charset=\"UTF-8\" />\n\
<meta name=\"generator\" content=\"WordPress 6.4.2\" />\n<link rel='stylesheet' href='/wp-content/themes/twentytwentyfour/style.css?ver=1.0' />\n\
<title>Northwind</title></head><body class=\"home blog\"></body></html>\n";

const JOOMLA_HOME: &str = "<!DOCTYPE html>\n<html lang=\"en-gb\"><head><meta charset=\"utf-8\">\n\
<meta name=\"generator\" content=\"Joomla! 1.5 - Open Source Content Management\">\n<title>Home</title>\n\
<script src=\"/media/system/js/core.min.js?ee06c8994b37d13d4ad21c573bbffeeb9465c0e8\"></script></head><body></body></html>\n";

const NEXTJS_HOME: &str = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"/><title>Northwind</title>\
<script src=\"/_next/static/chunks/main-3f2a.js\" defer=\"\"></script></head><body><div id=\"__next\"></div>\
<script id=\"__NEXT_DATA__\" type=\"application/json\">{\"props\":{\"pageProps\":{}},\"page\":\"/\",\"buildId\":\"kX3v9Zq1Lw\"}</script></body></html>\n";

const REACT_HOME: &str = "<!DOCTYPE html><html><head><title>Northwind</title>\
<script crossorigin src=\"https://unpkg.com/react@18.2.0/umd/react.production.min.js\"></script>\
<script crossorigin src=\"https://unpkg.com/react-dom@18.2.0/umd/react-dom.production.min.js\"></script></head>\
<body><div id=\"root\"></div><script src=\"/static/js/app.js\"></script></body></html>\n";

const JQUERY_HOME: &str = "<!DOCTYPE html><html><head><title>Northwind</title>\
<script src=\"/assets/js/jquery-1.12.4.min.js\"></script></head><body><div id=\"shop\"></div></body></html>\n";
