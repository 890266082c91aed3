//! The web console's routes (issue 33), in-process against real Postgres
//! and Redis: sessions, CSRF, the security headers, fragments, isolation
//! between users, and scanned text rendered as text.

use scanfleet_common::events::{Classification, Evidence, FindingEvent};
use scanfleet_common::Severity;
use scanfleet_core::store::findings;
use scanfleet_tests::{spawn_app, TestApp, TestUser};
use uuid::Uuid;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// A browser: its cookies, kept by hand (the client follows no redirects).
struct Browser {
    cookies: Vec<(String, String)>,
    csrf: String,
}

struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Page {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

impl Browser {
    fn new() -> Browser {
        Browser {
            cookies: Vec::new(),
            csrf: String::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, resp: &reqwest::Response) {
        for v in resp.headers().get_all("set-cookie") {
            let v = v.to_str().unwrap_or_default();
            let (kv, _) = v.split_once(';').unwrap_or((v, ""));
            let (k, val) = kv.split_once('=').unwrap_or((kv, ""));
            self.cookies.retain(|(name, _)| name != k);
            if !val.is_empty() {
                self.cookies.push((k.to_string(), val.to_string()));
            }
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let resp = req
            .header("cookie", self.cookie_header())
            .send()
            .await
            .expect("request");
        self.keep(&resp);
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap_or_default();
        if let Some(token) = hidden_csrf(&body) {
            self.csrf = token;
        }
        Page {
            status,
            headers,
            body,
        }
    }

    async fn get(&mut self, app: &TestApp, path: &str) -> Page {
        self.send(app.client.get(app.url(path))).await
    }

    async fn post(&mut self, app: &TestApp, path: &str, fields: &[(&str, &str)]) -> Page {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        let csrf = self.csrf.clone();
        all.push(("csrf", &csrf));
        self.send(app.client.post(app.url(path)).form(&all)).await
    }

    /// Registers a new account through the console; signed in after.
    async fn register(app: &TestApp) -> (Browser, String) {
        let mut b = Browser::new();
        let page = b.get(app, "/register").await;
        assert_eq!(page.status, 200);
        let email = format!("{}@example.com", Uuid::new_v4().simple());
        let page = b
            .post(
                app,
                "/register",
                &[
                    ("email", &email),
                    ("password", "a long password"),
                    ("full_name", "Console User"),
                ],
            )
            .await;
        assert_eq!(page.status, 303, "{}", page.body);
        assert!(b.cookies.iter().any(|(k, _)| k == "sf_session"));
        // The session's own token, from the next page.
        let page = b.get(app, "/").await;
        assert_eq!(page.status, 200);
        (b, email)
    }
}

/// HTML text back to plain text (the entities askama writes).
fn unescape(html: &str) -> String {
    html.replace("&#60;", "<")
        .replace("&lt;", "<")
        .replace("&#62;", ">")
        .replace("&gt;", ">")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

fn hidden_csrf(body: &str) -> Option<String> {
    let at = body.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    let end = body[at..].find('"')?;
    Some(body[at..at + end].to_string())
}

#[tokio::test]
async fn every_console_response_carries_the_security_headers() {
    let app = spawn_app().await;
    let mut b = Browser::new();
    for path in ["/signin", "/register", "/no/such/page"] {
        let page = b.get(&app, path).await;
        assert_eq!(page.header("content-security-policy"), CSP, "{path}");
        assert_eq!(page.header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(page.header("referrer-policy"), "same-origin", "{path}");
        assert!(
            page.header("permissions-policy").contains("camera=()"),
            "{path}"
        );
        assert!(
            page.header("content-type").starts_with("text/html"),
            "{path}"
        );
    }
    // Neither inline script nor inline style in what the pages send.
    let page = b.get(&app, "/signin").await;
    assert!(!page.body.contains("<script>"), "inline script");
    assert!(!page.body.contains("style="), "inline style");
    assert!(!page.body.contains("<style"), "inline style");
}

#[tokio::test]
async fn a_stranger_is_sent_to_sign_in_and_brought_back_after() {
    let app = spawn_app().await;
    let mut b = Browser::new();
    let page = b.get(&app, "/targets?q=shop").await;
    assert_eq!(page.status, 303);
    assert_eq!(
        page.header("location"),
        "/signin?next=%2Ftargets%3Fq%3Dshop"
    );
    let user = app.new_user().await;
    let page = b.get(&app, "/signin?next=%2Ftargets%3Fq%3Dshop").await;
    assert!(
        page.body.contains("href=\"/register\""),
        "the Register link"
    );
    let page = b
        .post(
            &app,
            "/signin",
            &[
                ("email", &user.email),
                ("password", scanfleet_tests::PASSWORD),
                ("next", "/targets?q=shop"),
            ],
        )
        .await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(page.header("location"), "/targets?q=shop");
    let cookie = page
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("sf_session="))
        .expect("the session cookie")
        .to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert_eq!(b.get(&app, "/targets").await.status, 200);
    // Somewhere else than our own site is never a place to go back to.
    let page = b.get(&app, "/signin?next=//evil.example/").await;
    assert_eq!(page.header("location"), "/");
}

#[tokio::test]
async fn a_wrong_password_keeps_the_email_and_says_why() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let mut b = Browser::new();
    b.get(&app, "/signin").await;
    let page = b
        .post(
            &app,
            "/signin",
            &[("email", &user.email), ("password", "not the password")],
        )
        .await;
    assert_eq!(page.status, 422);
    assert!(page.body.contains("invalid email or password"));
    assert!(page.body.contains(&format!("value=\"{}\"", user.email)));
}

#[tokio::test]
async fn writes_without_the_csrf_token_or_from_another_site_are_refused() {
    let app = spawn_app().await;
    let (mut b, _) = Browser::register(&app).await;
    // No token.
    let page = b
        .send(
            app.client
                .post(app.url("/targets"))
                .form(&[("domain", "shop.example.com")]),
        )
        .await;
    assert_eq!(page.status, 403);
    // A wrong token in the header htmx uses.
    let page = b
        .send(
            app.client
                .post(app.url("/targets"))
                .header("x-csrf-token", "forged")
                .form(&[("domain", "shop.example.com")]),
        )
        .await;
    assert_eq!(page.status, 403);
    // The right token, sent from another site.
    let csrf = b.csrf.clone();
    let page = b
        .send(
            app.client
                .post(app.url("/targets"))
                .header("sec-fetch-site", "cross-site")
                .form(&[("domain", "shop.example.com"), ("csrf", &csrf)]),
        )
        .await;
    assert_eq!(page.status, 403);
    // Nothing was added.
    let page = b.get(&app, "/targets").await;
    assert!(!page.body.contains("shop.example.com"));
    // The right token from our own page works.
    let page = b
        .post(&app, "/targets", &[("domain", "shop.example.com")])
        .await;
    assert_eq!(page.status, 303, "{}", page.body);
}

#[tokio::test]
async fn a_bad_domain_is_shown_beside_the_field_with_what_was_typed() {
    let app = spawn_app().await;
    let (mut b, _) = Browser::register(&app).await;
    let page = b
        .post(
            &app,
            "/targets",
            &[("domain", "https://shop.example.com/x")],
        )
        .await;
    assert_eq!(page.status, 422);
    assert!(page.body.contains("id=\"domain-error\""), "{}", page.body);
    assert!(page.body.contains("value=\"https://shop.example.com/x\""));
    assert!(page.body.contains("aria-invalid=\"true\""));
}

#[tokio::test]
async fn the_session_cookie_is_not_a_credential_of_the_api() {
    let app = spawn_app().await;
    let (mut b, _) = Browser::register(&app).await;
    let page = b.get(&app, "/api/v1/auth/me").await;
    assert_eq!(page.status, 401);
}

#[tokio::test]
async fn sign_out_ends_the_session() {
    let app = spawn_app().await;
    let (mut b, _) = Browser::register(&app).await;
    let old = b.cookies.clone();
    let page = b.post(&app, "/signout", &[]).await;
    assert_eq!(page.status, 303);
    b.cookies = old;
    assert_eq!(b.get(&app, "/").await.status, 303);
}

async fn seeded_finding(app: &TestApp, user: &TestUser, response_text: &str) -> (Uuid, Uuid) {
    let target = app.new_target(user, "shop.example.com").await;
    let reply = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            serde_json::json!({"target_id": target, "engine": "quick"}),
        )
        .await;
    let scan: Uuid = reply.body["id"]
        .as_str()
        .expect("scan id")
        .parse()
        .expect("uuid");
    let db = app.state.db.get().await.expect("db");
    let event = FindingEvent {
        template_id: "exposed-page".into(),
        name: "Exposed <b>page</b>".into(),
        severity: Severity::High,
        host: "shop.example.com".into(),
        matched_at: "http://shop.example.com/debug".into(),
        description: "Serves `debug.php` to anyone".into(),
        remediation: String::new(),
        extracted_results: vec![response_text.into()],
        matcher_name: None,
        classification: Box::new(Classification {
            references: vec![
                "https://advisories.example.org/debug-page".into(),
                "javascript:alert(2)".into(),
            ],
            cve_ids: vec!["CVE-2024-0001".into()],
            cwe_ids: vec!["CWE-200".into()],
            cvss_score: Some(7.5),
            cvss_metrics: Some("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N".into()),
        }),
        evidence: Some(Box::new(Evidence::of(
            b"GET /debug HTTP/1.1\r\nHost: shop.example.com\r\n\r\n",
            format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>{response_text}</p>")
                .as_bytes(),
        ))),
    };
    findings::insert_findings(&db, scan, user.id, &[event])
        .await
        .expect("inserting");
    let row = db
        .query_one("SELECT id FROM findings WHERE scan_id = $1", &[&scan])
        .await
        .expect("the finding");
    (target, row.get("id"))
}

#[tokio::test]
async fn scanned_text_is_rendered_as_text_never_as_markup() {
    let app = spawn_app().await;
    let (mut b, email) = Browser::register(&app).await;
    let user = app.login_user(&email, "a long password").await;
    let (target, finding) = seeded_finding(&app, &user, "<script>alert(1)</script>").await;
    let page = b.get(&app, &format!("/findings/{finding}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    // Escaped in the page, and the text itself when read back.
    assert!(!page.body.contains("<script>alert(1)"));
    assert!(
        unescape(&page.body).contains("<pre class=\"evidence\"><script>alert(1)</script></pre>")
    );
    assert!(!page.body.contains("<b>page</b>"));
    assert!(unescape(&page.body).contains("<h1>Exposed <b>page</b></h1>"));
    // Inline code of the template's text is code.
    assert!(page.body.contains("<code>debug.php</code>"));
    // The exchange the match was judged on, escaped too.
    let text = unescape(&page.body);
    assert!(
        text.contains("GET /debug HTTP/1.1\r\nHost: shop.example.com"),
        "{text}"
    );
    assert!(text.contains("<p><script>alert(1)</script></p>"), "{text}");
    assert!(!page.body.contains("<p><script>"));
    // References link only when they are web addresses; the classification.
    assert!(page
        .body
        .contains("<a href=\"https://advisories.example.org/debug-page\""));
    assert!(!page.body.contains("href=\"javascript:"));
    assert!(page.body.contains("<code>CVE-2024-0001</code>"));
    assert!(page.body.contains("<code>CWE-200</code>"));
    assert!(page.body.contains("7.5"));
    let page = b.get(&app, &format!("/targets/{target}")).await;
    assert!(!page.body.contains("<b>page</b>"));
}

#[tokio::test]
async fn another_users_objects_are_a_404_page_with_the_navigation() {
    let app = spawn_app().await;
    let owner = app.new_user().await;
    let (target, finding) = seeded_finding(&app, &owner, "x").await;
    let (mut stranger, _) = Browser::register(&app).await;
    for path in [
        format!("/targets/{target}"),
        format!("/findings/{finding}"),
        format!("/targets/{target}/export?format=csv"),
        format!("/targets/{}", Uuid::new_v4()),
        "/no/such/page".to_string(),
    ] {
        let page = stranger.get(&app, &path).await;
        assert_eq!(page.status, 404, "{path}");
        assert!(
            page.body.contains(">Dashboard</a>"),
            "{path}: the navigation"
        );
        assert!(!page.body.contains("shop.example.com"), "{path}");
    }
    let page = stranger
        .post(
            &app,
            &format!("/targets/{target}/triage"),
            &[
                ("finding", &finding.to_string()),
                ("action", "false_positive"),
            ],
        )
        .await;
    assert_eq!(page.status, 404);
    let status: String = app
        .state
        .db
        .get()
        .await
        .expect("db")
        .query_one("SELECT status FROM findings WHERE id = $1", &[&finding])
        .await
        .expect("finding")
        .get("status");
    assert_eq!(status, "open");
}

#[tokio::test]
async fn bulk_triage_answers_the_fragment_and_records_the_history() {
    let app = spawn_app().await;
    let (mut b, email) = Browser::register(&app).await;
    let user = app.login_user(&email, "a long password").await;
    let (target, finding) = seeded_finding(&app, &user, "x").await;
    // The filter form, as htmx sends it: just the findings block.
    let page = b
        .send(
            app.client
                .get(app.url(&format!("/targets/{target}?severity=high")))
                .header("hx-request", "true"),
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.starts_with("<div id=\"findings\">"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<html"));
    let label = "aria-label=\"Exposed <b>page</b> on shop.example.com\"";
    assert!(!page.body.contains(label));
    assert!(
        unescape(&page.body).contains(label),
        "the row checkbox's name"
    );
    let csrf = b.csrf.clone();
    let page = b
        .send(
            app.client
                .post(app.url(&format!("/targets/{target}/triage?severity=high")))
                .header("hx-request", "true")
                .header("x-csrf-token", &csrf)
                .form(&[
                    ("finding", finding.to_string().as_str()),
                    ("action", "false_positive"),
                    ("reason", "a test page"),
                ]),
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("1 finding marked false positive."));
    // The API reads the change and its history.
    let reply = app
        .get(
            &format!("/api/v1/targets/{target}/findings?status=false_positive"),
            &user.access_token,
        )
        .await;
    assert_eq!(reply.body.as_array().map(Vec::len), Some(1));
    let reply = app
        .get(
            &format!("/api/v1/findings/{finding}/history"),
            &user.access_token,
        )
        .await;
    assert_eq!(reply.status, 200);
    let history = reply.body.as_array().expect("a list");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["from_status"], "open");
    assert_eq!(history[0]["to_status"], "false_positive");
    assert_eq!(history[0]["reason"], "a test page");
    assert_eq!(history[0]["actor"], email.as_str());
    // A search with a control character is refused beside the list, not
    // sent to Postgres (which refuses NUL in text).
    let reply = app
        .get(
            &format!("/api/v1/targets/{target}/findings?q=a%00b"),
            &user.access_token,
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(reply.error_fields(), vec!["q"]);
    // Exactly the filtered list, exported.
    let page = b
        .get(
            &app,
            &format!("/targets/{target}/export?format=csv&status=false_positive"),
        )
        .await;
    assert_eq!(page.status, 200);
    assert_eq!(page.body.lines().count(), 2, "{}", page.body);
    let page = b
        .get(
            &app,
            &format!("/targets/{target}/export?format=json&status=open"),
        )
        .await;
    assert_eq!(page.body, "[]");
}

#[tokio::test]
async fn console_pages_do_not_spend_the_tiers_api_requests() {
    let app = scanfleet_tests::spawn_app_with(&[("SCANFLEET_RATE__ENABLED", "true")]).await;
    let (mut b, _) = Browser::register(&app).await;
    // The demo tier allows 10 API requests a minute.
    for _ in 0..15 {
        let page = b.get(&app, "/targets").await;
        assert_eq!(page.status, 200);
        assert!(page.header("x-ratelimit-limit").is_empty());
    }
}

#[tokio::test]
async fn assets_are_served_under_hashed_paths_with_a_years_cache() {
    let app = spawn_app().await;
    let mut b = Browser::new();
    let page = b.get(&app, "/signin").await;
    let at = page.body.find("href=\"/assets/").expect("the style sheet") + 6;
    let end = page.body[at..].find('"').expect("end") + at;
    let css = page.body[at..end].to_string();
    let resp = app.client.get(app.url(&css)).send().await.expect("css");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .starts_with("text/css"));
}

#[tokio::test]
async fn the_admin_page_lists_the_fleet_and_is_a_404_for_others() {
    let app = spawn_app().await;
    let (mut b, email) = Browser::register(&app).await;
    assert_eq!(b.get(&app, "/admin").await.status, 404);
    let user = app.login_user(&email, "a long password").await;
    app.make_admin(user.id).await;
    let now = chrono::Utc::now().timestamp_millis() as u64;
    let record = |id: &str, heartbeat_at_ms: u64| scanfleet_bus::nodes::NodeRecord {
        id: id.into(),
        host: "rack-7".into(),
        version: "0.1.0".into(),
        slots_total: 4,
        running: vec![Uuid::nil()],
        started_at_ms: now - 60_000,
        heartbeat_at_ms,
        lease_ms: 10_000,
        draining: false,
    };
    for r in [
        record("scanner-rack-7-a", now),
        record("scanner-rack-7-b", now - 30_000),
    ] {
        scanfleet_bus::nodes::announce(&app.state.redis, &app.state.keys, &r)
            .await
            .expect("announce");
    }
    let page = b.get(&app, "/admin").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("scanner-rack-7-a"));
    assert!(page.body.contains("1 of 4"));
    let row_b = page
        .body
        .split("scanner-rack-7-b")
        .nth(1)
        .expect("b listed");
    assert!(row_b.contains(">lost<"), "{row_b}");
}
