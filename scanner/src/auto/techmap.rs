//! Technology -> templates, built from the loaded templates themselves.
//!
//! Every template is indexed under its *keys*: its tags, the product of
//! `metadata.product` and of `info.classification.cpe`, and vendor plus
//! product run together (`apache` + `tomcat` = `apachetomcat`), all
//! normalised to lower-case letters and digits (`Node.js`, `node-js` and
//! `nodejs` are one key). A technology's templates are those under its own
//! normalised name and under the names [`ALIASES`] gives it: the small
//! maintained table for the names detectors and templates spell
//! differently. Category tags (`cve`, `panel`, `exposure`...) are never
//! keys ([`CATEGORY_TAGS`]), and vendor names that cover many products
//! (`apache`, `microsoft`...) only reach templates that name no product of
//! their own ([`VENDOR_KEYS`]): a `Server: Apache` header must not pull in
//! Struts, Solr and OFBiz (the broad-tag problem of nuclei's `-as`).
//!
//! The map also knows which templates *detect* (those under
//! `technologies/` or tagged `tech`), which technologies each can report,
//! and which templates make the baseline every host gets whatever it runs
//! ([`TechMap::is_baseline`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path};
use std::sync::Arc;

use scanfleet_engine::engine::CompiledTemplate;

/// Names the probe's own markers and cookies can report in `detect`
/// (besides any `Server` or `X-Powered-By` product, which names itself);
/// kept here, with the map that must know them, so `detect` depends on the
/// map and not the other way round.
pub const PROBE_NAMES: &[&str] = &[
    "wordpress",
    "next.js",
    "react",
    "jquery",
    "drupal",
    "php",
    "java",
    "asp.net",
    "laravel",
    "grafana",
    "jenkins",
    "gitlab",
    "django",
];

/// Tags that say what kind of check a template is, not what it checks:
/// never a technology key.
pub const CATEGORY_TAGS: &[&str] = &[
    "tech",
    "detect",
    "detection",
    "discovery",
    "panel",
    "login",
    "exposure",
    "exposures",
    "misconfig",
    "vuln",
    "cve",
    "cms",
    "api",
    "config",
    "files",
    "file",
    "backup",
    "logs",
    "log",
    "default-login",
    "intrusive",
    "unauth",
    "xss",
    "sqli",
    "rce",
    "lfi",
    "ssrf",
    "redirect",
    "oast",
    "edb",
    "wpscan",
    "packetstorm",
    "kev",
    "vkev",
    "top-200",
    "top-100",
    "iot",
    "router",
    "devops",
    "install",
    "installer",
    "disclosure",
    "token",
    "tokens",
    "osint",
    "auth-bypass",
    "authenticated",
    "fpd",
    "file-upload",
    "ssti",
    "injection",
    "traversal",
    "camera",
    "seclists",
    "huntr",
    "cnvd",
    "cisa",
    "fuzz",
    "fuzzing",
    "generic",
    "takeover",
    "dns",
    "ssl",
    "debug",
    "webserver",
    "favicon",
    "waf",
    "cloud",
    "database",
    "network",
    "proxy",
    "admin",
    "dashboard",
    "default",
    "page",
    "misc",
    "miscellaneous",
    "exposed",
    "listing",
    "leak",
    "keys",
    "secret",
    "headers",
    "header",
    "status",
    "info",
    "information",
    "version",
    "error",
    "takeovers",
    "theme",
    "plugin",
    "wp-plugin",
    "wp-theme",
    "oss",
    "phishing",
    "xxe",
    "csrf",
    "crlf",
    "deserialization",
    "upload",
    "bypass",
    "dos",
    "default-page",
    "monitoring",
    "storage",
    "mail",
    "email",
    "vpn",
    "firewall",
    "service",
    "server",
    "web",
    "portal",
    "manager",
    "console",
    "jwt",
    "oauth",
    "sso",
    "auth",
    "ldap",
    "ftp",
    "ssh",
    "smtp",
    "http",
    "https",
    "tls",
    "backdoor",
    "malware",
    "honeypot",
    "credential-stuffing",
    "token-spray",
    "self-hosted",
    "js",
    "go",
    "time-based-sqli",
    "blind",
    "idor",
    "open-redirect",
    "cors",
    "cache",
    "sensitive",
];

/// Vendors whose names cover many products: as a key they reach only the
/// templates that name no product (else every Apache Foundation product
/// would run on any `Server: Apache`).
pub const VENDOR_KEYS: &[&str] = &[
    "apache",
    "microsoft",
    "oracle",
    "ibm",
    "adobe",
    "cisco",
    "google",
    "amazon",
    "aws",
    "atlassian",
    "vmware",
    "sap",
];

/// Names detectors use that templates spell otherwise: technology (as
/// detected, normalised) -> the keys its templates carry.
pub const ALIASES: &[(&str, &[&str])] = &[
    // The web server, not the foundation.
    ("apache", &["apachehttpserver", "httpd", "apachehttpd"]),
    ("apachehttpserver", &["apache", "httpd"]),
    ("apachetomcat", &["tomcat"]),
    // Spelled otherwise in the corpus's tags.
    ("tongdaoa", &["tongda"]),
    ("pinpoint", &["pippoint"]),
    ("apachecoyote", &["tomcat"]),
    ("microsoftiis", &["iis", "internetinformationservices"]),
    ("iis", &["internetinformationservices", "microsoftiis"]),
    ("nodejs", &["node", "nodejs"]),
    ("express", &["expressjs"]),
    ("expressjs", &["express"]),
    ("wordpress", &["wp"]),
    ("wp", &["wordpress"]),
    ("jenkins", &["jenkinsci"]),
    ("grafana", &["grafanalabs"]),
    ("gitlab", &["gitlabce", "gitlabee"]),
    ("atlassianjira", &["jira"]),
    ("atlassianconfluence", &["confluence"]),
    ("phpmyadmin", &["phpmyadmin"]),
    ("nextjs", &["next", "nextjs", "vercel"]),
    ("springboot", &["spring", "springboot", "springframework"]),
    ("laravel", &["laravelframework"]),
    ("drupal", &["drupalcms"]),
    ("joomla", &["joomlacms"]),
    ("kibana", &["elastic", "kibana"]),
    ("elasticsearch", &["elastic"]),
];

/// Templates that send more requests than this (`metadata.max-request`)
/// are left to the `full` engine: lists of names or payloads tried one by
/// one (1,500 backup file names, 89 database file names, 93 open-redirect
/// payloads, 85 defacement pages). At 80 the baseline keeps the shorter
/// lists of the exposure checks (59 Swagger paths, 50 `config.json`
/// paths); at 100 it sent about 260 requests a host more, for findings
/// `full` still has.
pub const BRUTE_FORCE_ABOVE: u32 = 80;

/// Top-level template directories of technology-independent checks, the
/// baseline every host of an `auto` scan gets: exposed files and secrets,
/// misconfigurations, subdomain takeovers, the generic vulnerability
/// checks (open redirect, CRLF, CORS, generic LFI/XSS), and the built-in
/// pack's header, debug-endpoint, API-description and default-page checks.
/// Not the baseline: `cves/`, `vulnerabilities/<product>`, `exposed-panels/`,
/// `default-logins/`, `iot/` (each names a product, so it runs when the
/// product is detected), `osint/`, `token-spray/` and `fuzzing/` (never
/// about the host itself, or a fuzzing run of its own).
pub const BASELINE_DIRS: &[&str] = &[
    "exposures",
    "misconfiguration",
    "miscellaneous",
    "takeovers",
    "vulnerabilities/generic",
    "headers",
    "debug",
    "api",
    "discovery",
    "default-pages",
];

/// Directory names a template path is read from: the corpus's `http/`
/// top level and the built-in pack's.
const KNOWN_DIRS: &[&str] = &[
    "technologies",
    "exposures",
    "misconfiguration",
    "miscellaneous",
    "takeovers",
    "vulnerabilities",
    "cves",
    "cnvd",
    "exposed-panels",
    "default-logins",
    "iot",
    "osint",
    "token-spray",
    "fuzzing",
    "credential-stuffing",
    "honeypot",
    "global-matchers",
    "headers",
    "debug",
    "api",
    "discovery",
    "default-pages",
    "panels",
];

/// A template that names this many technologies in its matcher names
/// (`tech-detect`, `waf-detect`, `favicon-detect`) reports the matcher's
/// name as the technology.
const MULTI_TECH_MATCHERS: usize = 20;

/// Lower-case letters and digits only: the form names are compared in.
pub fn norm(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A technology's display name: lower-case, words joined by `-`.
pub fn canonical(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

fn is_category(tag: &str) -> bool {
    let t = tag.to_ascii_lowercase();
    CATEGORY_TAGS.contains(&t.as_str())
        || (t.starts_with("cve") && t[3..].chars().all(|c| c.is_ascii_digit()))
        || (t.starts_with("cnvd") && t[4..].chars().all(|c| c.is_ascii_digit()))
}

/// What the map keeps of one template.
#[derive(Debug, Clone)]
pub struct Facts {
    pub id: String,
    /// Its directory under the template root, `/`-joined
    /// (`exposures/configs`), empty when unknown.
    pub dir: String,
    pub keys: BTreeSet<String>,
    /// Names a product (metadata or CPE).
    pub has_product: bool,
    /// Product names, normalised (metadata and CPE).
    pub products: BTreeSet<String>,
    pub detector: bool,
    /// A detector run in the `DETECT` stage (not one that only makes
    /// sense once its parent is known: WordPress plugins and themes).
    pub detect_stage: bool,
    /// Reports its matchers' names as technologies.
    pub multi_tech: bool,
    /// The technologies a single-technology detector reports.
    pub names: Vec<String>,
    pub max_request: u32,
}

fn dir_of(path: Option<&Path>) -> String {
    let Some(path) = path else {
        return String::new();
    };
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let start = parts
        .iter()
        .rposition(|p| p == "http")
        .map(|i| i + 1)
        .or_else(|| parts.iter().position(|p| KNOWN_DIRS.contains(&p.as_str())));
    match start {
        Some(i) if i < parts.len() => parts[i..parts.len() - 1].join("/"),
        _ => String::new(),
    }
}

/// Whether a detector names its technologies by matcher, and the names a
/// single-technology detector reports (its product, else its tags).
fn names_of(
    tpl: &scanfleet_engine::template::Template,
    detector: bool,
    tags: &[String],
    products: &BTreeSet<String>,
) -> (bool, Vec<String>) {
    let info = &tpl.info;
    let named_matchers: BTreeSet<&str> = tpl
        .http
        .iter()
        .flat_map(|b| b.matchers.iter().filter_map(|m| m.name.as_deref()))
        .collect();
    let multi_tech = detector && named_matchers.len() >= MULTI_TECH_MATCHERS;
    let names = if !detector || multi_tech {
        Vec::new()
    } else if let Some(p) = info
        .metadata
        .iter()
        .find(|(k, _)| k == "product")
        .and_then(|(_, v)| v.as_str())
    {
        vec![canonical(p)]
    } else if let Some(p) = products.iter().next() {
        vec![p.clone()]
    } else {
        tags.iter()
            .filter(|t| !is_category(t) && !VENDOR_KEYS.contains(&norm(t).as_str()))
            .map(|t| canonical(t))
            .collect()
    };
    (multi_tech, names)
}

fn facts_of(t: &CompiledTemplate) -> Facts {
    let tpl = &t.template;
    let info = &tpl.info;
    let dir = dir_of(tpl.path.as_deref());
    let tags: Vec<String> = info.tags.iter().map(|t| t.to_ascii_lowercase()).collect();
    let mut keys = BTreeSet::new();
    for tag in &tags {
        if !is_category(tag) {
            keys.insert(norm(tag));
        }
    }
    let mut products = BTreeSet::new();
    let mut vendors = BTreeSet::new();
    for (k, v) in &info.metadata {
        let Some(v) = v.as_str() else { continue };
        match k.as_str() {
            "product" => {
                products.insert(norm(v));
            }
            "vendor" => {
                vendors.insert(norm(v));
            }
            _ => {}
        }
    }
    if let Some(cpe) = info.classification.as_ref().and_then(|c| c.cpe.as_deref()) {
        // cpe:2.3:a:VENDOR:PRODUCT:...
        let parts: Vec<&str> = cpe.split(':').collect();
        if parts.len() > 4 && parts[4] != "*" {
            vendors.insert(norm(parts[3]));
            products.insert(norm(parts[4]));
        }
    }
    products.retain(|p| !p.is_empty());
    vendors.retain(|v| !v.is_empty());
    for p in &products {
        keys.insert(p.clone());
        for v in &vendors {
            if !p.starts_with(v.as_str()) {
                keys.insert(format!("{v}{p}"));
            }
        }
    }
    keys.retain(|k| !k.is_empty());
    let detector = dir.starts_with("technologies") || tags.iter().any(|t| t == "tech");
    let (multi_tech, names) = names_of(tpl, detector, &tags, &products);
    let dependent = tags.iter().any(|t| t == "wp-plugin" || t == "wp-theme");
    let max_request = info
        .metadata
        .iter()
        .find(|(k, _)| k == "max-request")
        .and_then(|(_, v)| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
        .map_or(1, |n| n.min(u64::from(u32::MAX)) as u32);
    Facts {
        id: tpl.id.clone(),
        dir,
        has_product: !products.is_empty(),
        products,
        keys,
        detector,
        detect_stage: detector && !dependent,
        multi_tech,
        names,
        max_request,
    }
}

/// The map of one template set (a node's, or a directory's).
pub struct TechMap {
    pub templates: Vec<Arc<CompiledTemplate>>,
    pub facts: Vec<Facts>,
    /// Normalised key -> template indexes.
    index: HashMap<String, Vec<usize>>,
    by_id: HashMap<String, usize>,
    /// Normalised names of every technology a detector can report.
    reportable: BTreeSet<String>,
}

impl TechMap {
    pub fn build(templates: &[Arc<CompiledTemplate>]) -> TechMap {
        let facts: Vec<Facts> = templates.iter().map(|t| facts_of(t)).collect();
        let mut index: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_id = HashMap::new();
        let mut reportable = BTreeSet::new();
        for (i, f) in facts.iter().enumerate() {
            by_id.entry(f.id.clone()).or_insert(i);
            for k in &f.keys {
                index.entry(k.clone()).or_default().push(i);
            }
            for n in &f.names {
                reportable.insert(norm(n));
            }
        }
        for (i, t) in templates.iter().enumerate() {
            if facts[i].multi_tech {
                for b in &t.template.http {
                    for m in &b.matchers {
                        if let Some(n) = &m.name {
                            reportable.insert(norm(n));
                        }
                    }
                }
            }
        }
        // The probe's own names (headers, cookies, markers).
        for n in PROBE_NAMES {
            reportable.insert(norm(n));
        }
        reportable.retain(|n| !n.is_empty());
        TechMap {
            templates: templates.to_vec(),
            facts,
            index,
            by_id,
            reportable,
        }
    }

    pub fn len(&self) -> usize {
        self.templates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    pub fn facts_by_id(&self, id: &str) -> Option<&Facts> {
        self.by_id.get(id).map(|i| &self.facts[*i])
    }

    /// Every technology (normalised) some detector of the set can report.
    pub fn reportable(&self) -> &BTreeSet<String> {
        &self.reportable
    }

    /// The keys a technology's templates are found under.
    pub fn keys_of(name: &str) -> Vec<String> {
        let n = norm(name);
        let mut keys = vec![n.clone()];
        if let Some((_, more)) = ALIASES.iter().find(|(k, _)| *k == n) {
            keys.extend(more.iter().map(|k| norm(k)));
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// Indexes of the templates of technology `name`, sorted.
    pub fn templates_of(&self, name: &str) -> Vec<usize> {
        let mut out = BTreeSet::new();
        for key in Self::keys_of(name) {
            let vendor = VENDOR_KEYS.contains(&key.as_str());
            for &i in self.index.get(&key).into_iter().flatten() {
                let f = &self.facts[i];
                // A vendor key reaches a template that names no product
                // (or the vendor itself as one) and no other product name
                // among its keys (`apache` + `struts` is Struts).
                if vendor
                    && ((f.has_product && !f.products.contains(&key))
                        || f.keys
                            .iter()
                            .any(|k| k != &key && !VENDOR_KEYS.contains(&k.as_str())))
                {
                    continue;
                }
                out.insert(i);
            }
        }
        out.into_iter().collect()
    }

    /// A technology-independent check every host gets: in one of the
    /// [`BASELINE_DIRS`], naming no product, and not in a sub-directory
    /// named after a technology (`misconfiguration/gitlab/`).
    pub fn is_baseline(&self, i: usize) -> bool {
        let f = &self.facts[i];
        if f.detector || f.has_product {
            return false;
        }
        let dir = f.dir.as_str();
        let Some(top) = BASELINE_DIRS
            .iter()
            .find(|d| dir == **d || dir.starts_with(&format!("{d}/")))
        else {
            return false;
        };
        let rest = dir[top.len()..].trim_start_matches('/');
        match rest.split('/').next() {
            Some(sub) if !sub.is_empty() => !self.reportable.contains(&norm(sub)),
            _ => true,
        }
    }

    pub fn is_brute_force(&self, i: usize) -> bool {
        self.facts[i].max_request > BRUTE_FORCE_ABOVE
    }

    /// Indexes of the templates the `DETECT` stage runs.
    pub fn detect_stage(&self) -> Vec<usize> {
        (0..self.facts.len())
            .filter(|i| self.facts[*i].detect_stage && !self.is_brute_force(*i))
            .collect()
    }

    /// Indexes of the baseline templates.
    pub fn baseline(&self) -> Vec<usize> {
        (0..self.facts.len())
            .filter(|i| self.is_baseline(*i) && !self.is_brute_force(*i))
            .collect()
    }

    /// Technology -> number of its templates, for every reportable
    /// technology (what `templates map` prints).
    pub fn summary(&self) -> BTreeMap<String, usize> {
        self.reportable
            .iter()
            .map(|n| (n.clone(), self.templates_of(n).len()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_in_one_form() {
        assert_eq!(norm("Node.js"), "nodejs");
        assert_eq!(norm("apache-tomcat"), "apachetomcat");
        assert_eq!(canonical("Apache Tomcat"), "apache-tomcat");
        assert_eq!(canonical("nginx"), "nginx");
        assert!(is_category("cve2021"));
        assert!(is_category("panel"));
        assert!(!is_category("jenkins"));
    }

    #[test]
    fn directories_are_read_below_the_template_root() {
        let p = Path::new("/x/corpus/nuclei-templates/http/exposures/configs/a.yaml");
        assert_eq!(dir_of(Some(p)), "exposures/configs");
        assert_eq!(dir_of(Some(Path::new("headers/a.yaml"))), "headers");
        assert_eq!(
            dir_of(Some(Path::new("/tmp/lab/technologies/a.yaml"))),
            "technologies"
        );
        assert_eq!(dir_of(None), "");
    }

    #[test]
    fn aliases_add_keys() {
        assert!(TechMap::keys_of("Apache Tomcat").contains(&"tomcat".to_string()));
        assert!(TechMap::keys_of("Microsoft IIS").contains(&"iis".to_string()));
    }
}
