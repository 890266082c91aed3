//! Scan reports (issue 11) against the real app and Postgres: every format
//! of a finished scan with findings of every severity, checked the way its
//! reader would: the SARIF against the official 2.1.0 schema, the CSV by
//! parsing it back, the PDF by extracting its text with poppler's
//! `pdftotext`/`pdfinfo`, the HTML by parsing it. Findings go in through
//! the storage layer the ingester uses, so no scanner runs.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use chrono::Utc;
use scanfleet_common::events::{FindingEvent, ScanStatus};
use scanfleet_common::Severity;
use scanfleet_core::store::{findings, fingerprints, notifications, scans};
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

async fn new_scan(app: &TestApp, user: &TestUser, target_id: Uuid) -> Uuid {
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({ "target_id": target_id }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_str().unwrap().parse().unwrap()
}

fn finding(template: &str, severity: Severity, host: &str, path: &str) -> FindingEvent {
    FindingEvent {
        template_id: template.into(),
        name: format!("{template} name"),
        severity,
        host: host.into(),
        matched_at: format!("https://{host}{path}"),
        description: format!("{template} description"),
        remediation: format!("{template} remediation"),
        extracted_results: vec![],
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    }
}

async fn add_findings(app: &TestApp, scan_id: Uuid, user: &TestUser, list: &[FindingEvent]) {
    let db = app.state.db.get().await.unwrap();
    findings::insert_findings(&db, scan_id, user.id, list)
        .await
        .unwrap();
}

/// Moves the scan to `status` through the ingester's own transition.
async fn set_status(app: &TestApp, scan_id: Uuid, status: ScanStatus) {
    let db = app.state.db.get().await.unwrap();
    for step in [ScanStatus::Pending, ScanStatus::Running, status] {
        scans::set_scan_status(&db, scan_id, step, None)
            .await
            .unwrap();
    }
    // A scan that took a few minutes, so the duration reads like one.
    db.execute(
        "UPDATE scans SET started_at = COALESCE(completed_at, now()) - interval '4 minutes 7 seconds'
         WHERE id = $1",
        &[&scan_id],
    )
    .await
    .unwrap();
}

const HOSTILE_NAME: &str = "Reflected <script>alert(1)</script> in q";
const HOSTILE_DESCRIPTION: &str = "Input \"><img src=x onerror=alert(document.cookie)> echoed";
const CYRILLIC: &str = "Панель администратора доступна без пароля";
const GREEK: &str = "Ευπάθεια στο πρόγραμμα";

/// Findings of every severity on three hosts (one an IDN), with hostile
/// text, a formula, line breaks, non-Latin text and extracted values.
fn fixture_findings() -> Vec<FindingEvent> {
    let mut xss = finding("xss-reflected", Severity::Medium, "example.com", "/search");
    xss.name = HOSTILE_NAME.into();
    xss.description = format!("{HOSTILE_DESCRIPTION}\nsecond line, with a comma");
    xss.extracted_results = vec!["<svg onload=alert(1)>".into(), "q".into()];
    let mut formula = finding("csv-formula", Severity::Low, "example.com", "/export");
    formula.name = "=HYPERLINK(\"http://evil.example\",\"click\")".into();
    formula.remediation = "-2+3 and @SUM(A1)".into();
    let mut admin = finding(
        "exposed-admin",
        Severity::Critical,
        "xn--e1afmkfd.xn--p1ai",
        "/admin",
    );
    admin.description = format!("{CYRILLIC}. {GREEK}.");
    admin.matcher_name = Some("status".into());
    vec![
        finding("tech-nginx", Severity::Info, "example.com", "/"),
        xss,
        finding("git-config", Severity::High, "example.com", "/.git/config"),
        formula,
        finding(
            "git-config",
            Severity::High,
            "www.example.com",
            "/.git/config",
        ),
        admin,
        finding("weak-tls", Severity::Low, "www.example.com", ":443"),
        finding("cve-2099-0001", Severity::Critical, "example.com", "/api"),
    ]
}

struct Fixture {
    app: TestApp,
    user: TestUser,
    scan_id: Uuid,
    findings: Vec<FindingEvent>,
}

async fn finished_scan() -> Fixture {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let scan_id = new_scan(&app, &user, target).await;
    let findings = fixture_findings();
    add_findings(&app, scan_id, &user, &findings).await;
    set_status(&app, scan_id, ScanStatus::Completed).await;
    Fixture {
        app,
        user,
        scan_id,
        findings,
    }
}

async fn report(app: &TestApp, user: &TestUser, scan_id: Uuid, query: &str) -> (Reply, Vec<u8>) {
    let resp = app
        .client
        .get(app.url(&format!("/api/v1/scans/{scan_id}/report{query}")))
        .bearer_auth(&user.access_token)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.unwrap().to_vec();
    let text = String::from_utf8_lossy(&bytes).to_string();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if let Ok(dir) = std::env::var("SCANFLEET_REPORT_SAMPLES") {
        // Opt-in: keep the documents to look at them.
        let ext = query.rsplit('=').next().filter(|e| !e.is_empty());
        let name = format!("{scan_id}.{}", ext.unwrap_or("html"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(PathBuf::from(dir).join(name), &bytes).unwrap();
    }
    (
        Reply {
            status,
            headers,
            body,
            text,
        },
        bytes,
    )
}

#[tokio::test]
async fn every_format_comes_with_its_media_type_and_a_file_name_with_domain_and_date() {
    let f = finished_scan().await;
    let today = Utc::now().format("%Y-%m-%d");
    for (query, media, ext) in [
        ("", "text/html; charset=utf-8", "html"),
        ("?format=html", "text/html; charset=utf-8", "html"),
        ("?format=pdf", "application/pdf", "pdf"),
        ("?format=json", "application/json", "json"),
        ("?format=sarif", "application/sarif+json", "sarif"),
        ("?format=csv", "text/csv; charset=utf-8", "csv"),
    ] {
        let (r, _) = report(&f.app, &f.user, f.scan_id, query).await;
        assert_eq!(r.status, 200, "{query}: {}", r.text);
        assert_eq!(r.header("content-type"), Some(media), "{query}");
        assert_eq!(
            r.header("content-disposition"),
            Some(format!("attachment; filename=\"scanfleet-example.com-{today}.{ext}\"").as_str()),
            "{query}"
        );
        assert_eq!(r.header("x-report-partial"), Some("false"), "{query}");
    }
}

#[tokio::test]
async fn an_unknown_format_is_a_422_naming_format_and_another_users_scan_is_a_404() {
    let f = finished_scan().await;
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=xml").await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["format"]);
    let bob = f.app.new_user().await;
    f.app.set_tier(bob.id, "yearly").await;
    let (r, _) = report(&f.app, &bob, f.scan_id, "?format=csv").await;
    r.assert_problem(404);
}

#[tokio::test]
async fn reports_are_a_paid_feature_and_demo_gets_403_with_an_upgrade_prompt() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    let s = new_scan(&app, &user, t).await;
    let (r, _) = report(&app, &user, s, "").await;
    let body = r.assert_problem(403);
    assert_eq!(body["code"], "feature_not_in_tier");
    assert_eq!(body["upgrade"]["tier_slug"], "monthly");
}

fn text_of(doc: &scraper::Html, selector: &str) -> Vec<String> {
    let sel = scraper::Selector::parse(selector).unwrap();
    doc.select(&sel)
        .map(|e| e.text().collect::<String>().trim().to_string())
        .collect()
}

#[tokio::test]
async fn the_html_report_is_self_contained_groups_by_host_and_shows_hostile_text_as_text() {
    let f = finished_scan().await;
    let (r, _) = report(&f.app, &f.user, f.scan_id, "").await;
    let html = &r.text;
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Nothing is fetched: no script, no external sheet, image or font.
    for needle in ["<script", "<img", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "{needle} in the HTML");
    }
    let doc = scraper::Html::parse_document(html);
    for selector in [
        "script",
        "img",
        "iframe",
        "link",
        "object",
        "[src]",
        "[href]",
        "[onerror]",
    ] {
        let sel = scraper::Selector::parse(selector).unwrap();
        assert_eq!(doc.select(&sel).count(), 0, "{selector} in the HTML");
    }
    assert_eq!(text_of(&doc, "style").len(), 1);
    assert_eq!(text_of(&doc, "svg.chart").len(), 1, "the severity chart");
    assert!(
        text_of(&doc, "svg.chart title")[0].contains("Critical 2, High 2, Medium 1, Low 2, Info 1")
    );
    assert!(html.contains("@media print"));

    // The summary, from the scan's counters.
    let totals = text_of(&doc, ".totals .total");
    assert_eq!(
        totals,
        [
            "8findings in total",
            "2Critical",
            "2High",
            "1Medium",
            "2Low",
            "1Info"
        ]
    );
    let meta = text_of(&doc, "dl.meta div");
    assert!(meta.contains(&"Enginefull".to_string()), "{meta:?}");
    assert!(meta.contains(&"Statuscompleted".to_string()), "{meta:?}");
    assert!(meta.contains(&"Duration4 min 7 s".to_string()), "{meta:?}");

    // Hosts with the worst findings first; critical first within a host.
    let hosts = text_of(&doc, "section.host > h2");
    assert_eq!(
        hosts,
        [
            "example.com",
            "пример.рф (xn--e1afmkfd.xn--p1ai)",
            "www.example.com"
        ]
    );
    let first_host = doc
        .select(&scraper::Selector::parse("section.host").unwrap())
        .next()
        .unwrap();
    let badges: Vec<String> = first_host
        .select(&scraper::Selector::parse(".badge").unwrap())
        .map(|e| e.text().collect())
        .collect();
    assert_eq!(badges, ["Critical", "High", "Medium", "Low", "Info"]);

    // Hostile text is text.
    let names = text_of(&doc, "article.finding h3");
    assert!(names.iter().any(|n| n.ends_with(HOSTILE_NAME)), "{names:?}");
    let fields = text_of(&doc, "dl.fields dd");
    assert!(fields.iter().any(|d| d.starts_with(HOSTILE_DESCRIPTION)));
    assert!(fields.iter().any(|d| d.contains("<svg onload=alert(1)>")));
    assert!(fields.iter().any(|d| d.contains(CYRILLIC)));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(document.cookie)&gt;"));
    // Every finding with its template, URL, status.
    assert_eq!(text_of(&doc, "article.finding").len(), f.findings.len());
    for e in &f.findings {
        assert!(fields.contains(&e.template_id), "{}", e.template_id);
        assert!(fields.contains(&e.matched_at), "{}", e.matched_at);
    }
    assert!(fields.contains(&"open".to_string()));
    assert!(text_of(&doc, ".partial").is_empty());
}

/// The OASIS SARIF 2.1.0 schema, as shipped in the `serde-sarif` crate
/// (see `tests/data/README.md`).
///
/// The official file's pattern for `run.language` and
/// `toolComponent.language`, `^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$`,
/// has a stray `]`, and a schema whose `pattern` is not a valid regex is
/// refused once formats are checked; it is read here as meant, `ll` or
/// `ll-CC`. Reports set no `language`, so this loosens nothing they use.
fn sarif_schema() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/sarif-schema-2.1.0.json");
    let text = std::fs::read_to_string(path).unwrap();
    let broken = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
    assert_eq!(text.matches(broken).count(), 2, "the known erratum");
    let text = text.replace(broken, "^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
    serde_json::from_str(&text).unwrap()
}

fn assert_valid_sarif(doc: &Value) {
    let schema = sarif_schema();
    // Formats are checked too: `uri` of every location above all.
    let validator = jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "SARIF schema errors: {errors:#?}");
}

#[tokio::test]
async fn the_sarif_report_validates_against_the_2_1_0_schema_with_one_rule_per_template() {
    let f = finished_scan().await;
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=sarif").await;
    let doc = &r.body;
    assert_valid_sarif(doc);
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let templates: BTreeSet<&str> = f.findings.iter().map(|e| e.template_id.as_str()).collect();
    let rule_ids: BTreeSet<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(rule_ids, templates);
    assert_eq!(rules.len(), templates.len(), "one rule per template");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), f.findings.len(), "one result per finding");
    let expected_level = |s: &str| match s {
        "critical" | "high" => "error",
        "medium" => "warning",
        _ => "note",
    };
    for result in results {
        let rule = &rules[result["ruleIndex"].as_u64().unwrap() as usize];
        assert_eq!(rule["id"], result["ruleId"]);
        let severity = result["properties"]["severity"].as_str().unwrap();
        assert_eq!(result["level"], expected_level(severity));
        assert_eq!(rule["defaultConfiguration"]["level"], result["level"]);
        assert_eq!(rule["properties"]["severity"], severity);
        assert!(rule["properties"]["security-severity"].is_string());
        let uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap();
        let event = f
            .findings
            .iter()
            .find(|e| e.matched_at == uri && result["ruleId"] == e.template_id.as_str())
            .unwrap_or_else(|| panic!("no finding at {uri}"));
        assert_eq!(severity, event.severity.as_str());
        assert_eq!(rule["fullDescription"]["text"], event.description.as_str());
    }
    assert_eq!(results[0]["properties"]["severity"], "critical");
    assert_eq!(results[7]["properties"]["severity"], "info");
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);
    assert_eq!(run["properties"]["partial"], false);
}

#[tokio::test]
async fn the_csv_report_parses_back_to_one_row_per_finding_with_formulas_neutralised() {
    let f = finished_scan().await;
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=csv").await;
    assert!(r.text.ends_with("\r\n"));
    let mut reader = csv::ReaderBuilder::new().from_reader(r.text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "id",
            "scan_id",
            "domain",
            "template_id",
            "name",
            "severity",
            "status",
            "host",
            "matched_at",
            "description",
            "remediation",
            "extracted_results",
            "created_at",
            "scan_status",
            "partial",
            "change",
            "host_technologies",
            "host_templates_run",
            "host_templates_total",
            "host_templates_skipped",
            "host_requests"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), f.findings.len());
    /// What a spreadsheet shows: the text, after a `'` for formula starts.
    fn shown(v: &str) -> String {
        if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{v}")
        } else {
            v.to_string()
        }
    }
    let severities: Vec<&str> = rows.iter().map(|r| &r[5]).collect();
    assert_eq!(
        severities,
        ["critical", "critical", "high", "high", "medium", "low", "low", "info"]
    );
    for row in &rows {
        let e = f
            .findings
            .iter()
            .find(|e| e.template_id == row[3] && e.matched_at == row[8])
            .unwrap_or_else(|| panic!("unexpected row {row:?}"));
        assert_eq!(&row[1], f.scan_id.to_string());
        assert_eq!(&row[2], "example.com");
        assert_eq!(row[4], shown(&e.name));
        assert_eq!(&row[5], e.severity.as_str());
        assert_eq!(&row[6], "open");
        assert_eq!(&row[7], e.host);
        assert_eq!(row[9], shown(&e.description));
        assert_eq!(row[10], shown(&e.remediation));
        assert_eq!(row[11], e.extracted_results.join("; "));
        assert_eq!(&row[13], "completed");
        assert_eq!(&row[14], "no");
        assert_eq!(&row[15], "new", "the target's first scan");
    }
    assert!(rows
        .iter()
        .any(|r| &r[4] == "'=HYPERLINK(\"http://evil.example\",\"click\")"));
    assert!(rows.iter().any(|r| &r[10] == "'-2+3 and @SUM(A1)"));
}

#[tokio::test]
async fn the_json_report_is_one_document_sorted_by_severity_with_the_summary() {
    let f = finished_scan().await;
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=json").await;
    let doc = &r.body;
    assert_eq!(doc["scan_id"], f.scan_id.to_string());
    assert_eq!(doc["domain"], "example.com");
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["partial"], false);
    assert!(doc.get("partial_note").is_none());
    assert_eq!(doc["duration_seconds"], 247);
    assert_eq!(
        doc["summary"],
        json!({"total_findings": 8, "critical": 2, "high": 2, "medium": 1, "low": 2, "info": 1})
    );
    let v = doc["vulnerabilities"].as_array().unwrap();
    let severities: Vec<&str> = v.iter().map(|x| x["severity"].as_str().unwrap()).collect();
    assert_eq!(
        severities,
        ["critical", "critical", "high", "high", "medium", "low", "low", "info"]
    );
    let xss = v
        .iter()
        .find(|x| x["template_id"] == "xss-reflected")
        .unwrap();
    assert_eq!(xss["name"], HOSTILE_NAME);
    assert_eq!(
        xss["extracted_results"],
        json!(["<svg onload=alert(1)>", "q"])
    );
    let admin = v
        .iter()
        .find(|x| x["template_id"] == "exposed-admin")
        .unwrap();
    assert_eq!(admin["matcher_name"], "status");
    // The contract declares the document.
    let spec: Value = serde_json::from_str(&scanfleet_api::openapi_json()).unwrap();
    let op = &spec["paths"]["/api/v1/scans/{scan_id}/report/json"]["get"];
    assert_eq!(
        op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/JsonReport"
    );
    let props = spec["components"]["schemas"]["JsonReport"]["properties"]
        .as_object()
        .unwrap();
    for key in doc.as_object().unwrap().keys() {
        assert!(props.contains_key(key), "{key} is not in the schema");
    }
}

fn poppler(tool: &str, args: &[&str], pdf: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("scanfleet-report-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report.pdf");
    std::fs::write(&path, pdf).unwrap();
    let mut command = Command::new(tool);
    command.args(args).arg(&path);
    if tool == "pdftotext" {
        command.arg("-");
    }
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{tool} (poppler-utils) is needed: {e}"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn pdf_pages(pdf: &[u8]) -> usize {
    let info = poppler("pdfinfo", &[], pdf);
    let line = info.lines().find(|l| l.starts_with("Pages:")).unwrap();
    line["Pages:".len()..].trim().parse().unwrap()
}

/// The text of each page (pdftotext separates pages with a form feed).
fn pdf_page_texts(pdf: &[u8]) -> Vec<String> {
    let text = poppler("pdftotext", &["-layout", "-enc", "UTF-8"], pdf);
    let mut pages: Vec<String> = text.split('\u{c}').map(String::from).collect();
    if pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    pages
}

/// Words of `text` with runs of whitespace made one space (line breaks
/// and layout columns differ from the source text).
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn the_pdf_report_has_a_cover_then_the_findings_by_host_with_page_numbers_and_non_latin_text()
{
    let f = finished_scan().await;
    let (r, bytes) = report(&f.app, &f.user, f.scan_id, "?format=pdf").await;
    assert_eq!(r.status, 200);
    assert!(bytes.starts_with(b"%PDF-"));
    // The cover, then 97 pt per finding and 32 per host heading on pages
    // of 700 pt: two pages of findings.
    assert_eq!(pdf_pages(&bytes), 3);
    let info = poppler("pdfinfo", &[], &bytes);
    let info = squash(&info);
    assert!(
        info.contains("Title: Security scan report: example.com"),
        "{info}"
    );
    assert!(
        info.contains("Page size: 595.28 x 841.89 pts (A4)"),
        "{info}"
    );
    let fonts = poppler("pdffonts", &[], &bytes);
    assert!(fonts.contains("DejaVuSans"), "{fonts}");
    assert!(
        fonts.lines().skip(2).all(|l| l
            .split_whitespace()
            .rev()
            .skip(2)
            .take(3)
            .all(|c| c == "yes")),
        "every font embedded: {fonts}"
    );

    let pages = pdf_page_texts(&bytes);
    assert_eq!(pages.len(), 3);
    let cover = squash(&pages[0]);
    for needle in [
        "SECURITY SCAN REPORT",
        "example.com",
        "Engine full",
        "Status completed",
        "Duration 4 min 7 s",
        "Executive summary",
        "8 findings in total",
        "Critical 2",
        "High 2",
        "Medium 1",
        "Low 2",
        "Info 1",
        "Page 1",
    ] {
        assert!(
            cover.contains(needle),
            "{needle:?} not on the cover: {cover}"
        );
    }
    assert!(!cover.contains("PARTIAL"));
    assert!(squash(&pages[1]).contains("Page 2"));
    assert!(squash(&pages[2]).contains("Page 3"));
    let body = squash(&pages[1..].join(" "));
    for needle in [
        "пример.рф (xn--e1afmkfd.xn--p1ai)",
        CYRILLIC,
        GREEK,
        HOSTILE_NAME,
        "Input \"><img src=x onerror=alert(document.cookie)> echoed",
        "<svg onload=alert(1)>",
        "Matched at https://example.com/.git/config",
        "Template cve-2099-0001",
        "Status open",
    ] {
        assert!(
            body.contains(needle),
            "{needle:?} not in the findings: {body}"
        );
    }
    // Hosts worst first, critical first within a host.
    let at = |s: &str| body.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("cve-2099-0001 name") < at("git-config name"));
    assert!(at("git-config name") < at("tech-nginx name"));
    assert!(at("tech-nginx name") < at("пример.рф"));
    assert!(at("пример.рф") < at("www.example.com"));
}

#[tokio::test]
async fn a_long_pdf_report_numbers_every_page() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "yearly").await;
    let t = app.new_target(&user, "example.com").await;
    let s = new_scan(&app, &user, t).await;
    let many: Vec<FindingEvent> = (0..120)
        .map(|i| {
            finding(
                &format!("t{i:03}"),
                Severity::Low,
                "example.com",
                &format!("/{i}"),
            )
        })
        .collect();
    add_findings(&app, s, &user, &many).await;
    set_status(&app, s, ScanStatus::Completed).await;
    let (_, bytes) = report(&app, &user, s, "?format=pdf").await;
    let count = pdf_pages(&bytes);
    // A finding of five one-line fields takes 97 pt, so a page of 700 pt
    // holds seven: the cover, then 120 / 7 pages (the host heading pushes
    // one more finding over).
    assert_eq!(count, 19);
    let pages = pdf_page_texts(&bytes);
    assert_eq!(pages.len(), count);
    for (i, page) in pages.iter().enumerate() {
        assert!(
            squash(page).contains(&format!("Page {}", i + 1)),
            "page {} has no number",
            i + 1
        );
    }
    let all = squash(&pages.join(" "));
    for i in 0..120 {
        assert!(
            all.contains(&format!("t{i:03} name")),
            "finding {i} missing"
        );
    }
}

#[tokio::test]
async fn a_running_scan_gets_a_partial_report_marked_so_in_every_format() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let t = app.new_target(&user, "example.com").await;
    let s = new_scan(&app, &user, t).await;
    {
        let db = app.state.db.get().await.unwrap();
        for step in [ScanStatus::Pending, ScanStatus::Running] {
            scans::set_scan_status(&db, s, step, None).await.unwrap();
        }
    }
    add_findings(
        &app,
        s,
        &user,
        &[finding(
            "git-config",
            Severity::High,
            "example.com",
            "/.git/config",
        )],
    )
    .await;
    let today = Utc::now().format("%Y-%m-%d");

    let (r, _) = report(&app, &user, s, "").await;
    assert_eq!(r.header("x-report-partial"), Some("true"));
    assert_eq!(
        r.header("content-disposition"),
        Some(
            format!("attachment; filename=\"scanfleet-example.com-{today}-partial.html\"").as_str()
        )
    );
    let doc = scraper::Html::parse_document(&r.text);
    let note = text_of(&doc, ".partial");
    assert_eq!(note.len(), 1);
    assert!(
        note[0].starts_with("Partial report: the scan is still running"),
        "{note:?}"
    );
    assert!(text_of(&doc, "title")[0].ends_with("(partial)"));
    assert_eq!(text_of(&doc, "article.finding").len(), 1);

    let (r, bytes) = report(&app, &user, s, "?format=pdf").await;
    assert_eq!(r.status, 200);
    let cover = squash(&pdf_page_texts(&bytes)[0]);
    assert!(cover.contains("PARTIAL"), "{cover}");
    assert!(
        cover.contains("Partial report: the scan is still running"),
        "{cover}"
    );

    let (r, _) = report(&app, &user, s, "?format=json").await;
    assert_eq!(r.body["partial"], true);
    assert_eq!(r.body["status"], "running");
    assert!(r.body["partial_note"]
        .as_str()
        .unwrap()
        .starts_with("Partial report"));
    assert_eq!(r.body["vulnerabilities"].as_array().unwrap().len(), 1);

    let (r, _) = report(&app, &user, s, "?format=sarif").await;
    assert_valid_sarif(&r.body);
    let run = &r.body["runs"][0];
    assert_eq!(run["properties"]["partial"], true);
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    assert!(
        run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Partial report")
    );

    let (r, _) = report(&app, &user, s, "?format=csv").await;
    let mut reader = csv::Reader::from_reader(r.text.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(&rows[0][13], "running");
    assert_eq!(&rows[0][14], "yes");
}

#[tokio::test]
async fn a_scan_without_findings_reports_none_in_every_format() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let t = app.new_target(&user, "example.com").await;
    let s = new_scan(&app, &user, t).await;
    set_status(&app, s, ScanStatus::Completed).await;
    let (r, _) = report(&app, &user, s, "").await;
    assert!(r.text.contains("No findings."));
    let (_, bytes) = report(&app, &user, s, "?format=pdf").await;
    assert_eq!(pdf_pages(&bytes), 2);
    let (r, _) = report(&app, &user, s, "?format=sarif").await;
    assert_valid_sarif(&r.body);
    assert_eq!(r.body["runs"][0]["results"], json!([]));
    let (r, _) = report(&app, &user, s, "?format=csv").await;
    assert_eq!(r.text.lines().count(), 1, "the header only");
    let (r, _) = report(&app, &user, s, "?format=json").await;
    assert_eq!(r.body["vulnerabilities"], json!([]));
}

async fn report_of_format(f: &Fixture, format: &str, accept: Option<&str>) -> (Reply, Vec<u8>) {
    let mut req = f
        .app
        .client
        .get(
            f.app
                .url(&format!("/api/v1/scans/{}/report/{format}", f.scan_id)),
        )
        .bearer_auth(&f.user.access_token);
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.unwrap().to_vec();
    let reply = Reply {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text: String::from_utf8_lossy(&bytes).to_string(),
    };
    (reply, bytes)
}

/// Checks `doc` against component `name` of the served contract.
async fn assert_fits_contract(app: &TestApp, name: &str, doc: &Value) {
    let spec = app
        .call(reqwest::Method::GET, "/api/v1/openapi.json", None, None)
        .await
        .body;
    let schema = json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": spec["components"],
    });
    let validator = jsonschema::draft4::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

/// One operation per format, each declaring only its own media type, so
/// that generated clients return text, a model or bytes (issue: layers,
/// item 8).
#[tokio::test]
async fn each_format_has_its_own_operation_answering_its_media_type() {
    let f = finished_scan().await;
    let today = Utc::now().format("%Y-%m-%d");
    for (format, media) in [
        ("html", "text/html; charset=utf-8"),
        ("pdf", "application/pdf"),
        ("json", "application/json"),
        ("sarif", "application/sarif+json"),
        ("csv", "text/csv; charset=utf-8"),
    ] {
        let (r, bytes) = report_of_format(&f, format, None).await;
        assert_eq!(r.status, 200, "{format}: {}", r.text);
        assert_eq!(r.header("content-type"), Some(media), "{format}");
        assert_eq!(
            r.header("content-disposition"),
            Some(
                format!("attachment; filename=\"scanfleet-example.com-{today}.{format}\"").as_str()
            ),
        );
        assert_eq!(r.header("x-report-partial"), Some("false"));
        let (same, _) = report(&f.app, &f.user, f.scan_id, &format!("?format={format}")).await;
        match format {
            "pdf" => assert!(bytes.starts_with(b"%PDF-")),
            "json" => {
                let found = r.body["vulnerabilities"].as_array().unwrap();
                assert_eq!(found.len(), f.findings.len());
                assert_eq!(r.body["vulnerabilities"], same.body["vulnerabilities"]);
            }
            "sarif" => assert_eq!(
                r.body["runs"][0]["results"],
                same.body["runs"][0]["results"]
            ),
            "csv" => assert_eq!(r.text, same.text),
            _ => assert!(r.text.starts_with("<!DOCTYPE html>"), "{}", &r.text[..40]),
        }
    }
    let (r, bytes) = report_of_format(&f, "pdf", Some("application/octet-stream")).await;
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert!(bytes.starts_with(b"%PDF-"));
    let (r, _) = report_of_format(&f, "pdf", Some("application/pdf, */*")).await;
    assert_eq!(r.header("content-type"), Some("application/pdf"));
}

#[tokio::test]
async fn the_json_and_sarif_reports_fit_their_schemas_in_the_contract() {
    let f = finished_scan().await;
    let (r, _) = report_of_format(&f, "json", None).await;
    assert_fits_contract(&f.app, "JsonReport", &r.body).await;
    let (r, _) = report_of_format(&f, "sarif", None).await;
    assert_fits_contract(&f.app, "SarifLog", &r.body).await;
    assert_valid_sarif(&r.body);
    // A partial report leaves the end time out and adds a note.
    let running = new_scan(
        &f.app,
        &f.user,
        f.app.new_target(&f.user, "b.example.com").await,
    )
    .await;
    set_status(&f.app, running, ScanStatus::Running).await;
    let partial = Fixture {
        app: f.app,
        user: f.user,
        scan_id: running,
        findings: vec![],
    };
    let (r, _) = report_of_format(&partial, "sarif", None).await;
    assert_eq!(r.body["runs"][0]["properties"]["partial"], true);
    assert_fits_contract(&partial.app, "SarifLog", &r.body).await;
}

#[tokio::test]
async fn every_format_operation_is_a_paid_feature() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    let scan_id = new_scan(&app, &user, t).await;
    let f = Fixture {
        app,
        user,
        scan_id,
        findings: vec![],
    };
    for format in ["html", "json", "sarif", "csv", "pdf"] {
        let (r, _) = report_of_format(&f, format, None).await;
        assert_eq!(
            r.assert_problem(403)["code"],
            "feature_not_in_tier",
            "{format}"
        );
    }
}

/// Completes the scan as the ingester does: the status, the fixed rule and
/// the counts of its changes, then the notification.
async fn complete(app: &TestApp, scan_id: Uuid) {
    set_status(app, scan_id, ScanStatus::Completed).await;
    let db = app.state.db.get().await.unwrap();
    fingerprints::complete(&db, scan_id).await.unwrap();
    scanfleet_core::store::findings::keep_worst(&db, scan_id)
        .await
        .unwrap();
    notifications::create_scan_complete(&db, scan_id)
        .await
        .unwrap();
}

/// The finding of each change in the history of [`scans_with_every_change`].
struct History {
    app: TestApp,
    user: TestUser,
    first: Uuid,
    second: Uuid,
    third: Uuid,
    recurring: FindingEvent,
    regressed: FindingEvent,
    fixed: FindingEvent,
    new: FindingEvent,
}

/// Three completed scans of one target, so that the third has one finding
/// of every change: `recurring` is found by all three; `regressed` by the
/// first, fixed by the second and found again by the third; `fixed` found
/// by the first two and fixed by the third; `new` found by the third only.
/// (A regressed finding needs a fix before it, so two scans cannot show
/// every change.)
async fn scans_with_every_change() -> History {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let recurring = finding("tech-nginx", Severity::Low, "example.com", "/");
    let mut regressed = finding("git-config", Severity::High, "example.com", "/.git/config");
    regressed.name = "Exposed `.git/config` file".into();
    let fixed = finding("exposed-admin", Severity::Medium, "example.com", "/admin");
    let new = finding("cve-2099-0001", Severity::Critical, "example.com", "/api");
    let first = new_scan(&app, &user, target).await;
    let found = [recurring.clone(), regressed.clone(), fixed.clone()];
    add_findings(&app, first, &user, &found).await;
    complete(&app, first).await;
    let second = new_scan(&app, &user, target).await;
    add_findings(&app, second, &user, &[recurring.clone(), fixed.clone()]).await;
    complete(&app, second).await;
    let third = new_scan(&app, &user, target).await;
    let found = [recurring.clone(), regressed.clone(), new.clone()];
    add_findings(&app, third, &user, &found).await;
    complete(&app, third).await;
    History {
        app,
        user,
        first,
        second,
        third,
        recurring,
        regressed,
        fixed,
        new,
    }
}

async fn completed_at(app: &TestApp, scan_id: Uuid) -> String {
    let db = app.state.db.get().await.unwrap();
    let at: chrono::DateTime<Utc> = db
        .query_one("SELECT completed_at FROM scans WHERE id = $1", &[&scan_id])
        .await
        .unwrap()
        .get("completed_at");
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Issue 26, item 7: the HTML report's changes section.
#[tokio::test]
async fn the_html_report_shows_the_changes_since_the_previous_scan() {
    let h = scans_with_every_change().await;
    let (r, _) = report(&h.app, &h.user, h.third, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    assert_eq!(
        text_of(&doc, "section.changes h2"),
        ["Changes since the previous scan"]
    );
    let previous = text_of(&doc, "section.changes p.previous");
    let second_done = completed_at(&h.app, h.second).await;
    assert_eq!(
        previous,
        [format!(
            "Compared with the target's previous completed scan, a full scan completed at {second_done}."
        )]
    );
    assert_eq!(
        text_of(&doc, ".change-counts .change"),
        ["1new", "1regressed", "1fixed", "1recurring"]
    );
    assert!(text_of(&doc, "p.change-note").is_empty(), "completed");
    for (class, e) in [
        ("new", &h.new),
        ("regressed", &h.regressed),
        ("fixed", &h.fixed),
    ] {
        let items = text_of(&doc, &format!("ul.change-list.{class} li"));
        assert_eq!(items.len(), 1, "{class}: {items:?}");
        let shown = e.name.replace('`', "");
        assert!(items[0].contains(&shown), "{class}: {items:?}");
        assert!(items[0].contains(&e.matched_at), "{class}: {items:?}");
        assert!(items[0].contains(&e.host), "{class}: {items:?}");
    }
    // The regressed finding's name shows its inline code as code.
    let code = text_of(&doc, "ul.change-list.regressed li .name code");
    assert_eq!(code, [".git/config"]);
    let listed = text_of(&doc, "ul.change-list li");
    assert!(
        listed.iter().all(|i| !i.contains(&h.recurring.name)),
        "a recurring finding is no change: {listed:?}"
    );
    let severities = text_of(&doc, "ul.change-list li .badge");
    assert_eq!(severities, ["Critical", "High", "Medium"]);

    // The first scan compares with nothing and lists nothing.
    let (r, _) = report(&h.app, &h.user, h.first, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    assert!(
        text_of(&doc, "section.changes p.previous")[0].starts_with("First scan of this target"),
        "{:?}",
        text_of(&doc, "section.changes")
    );
    assert_eq!(
        text_of(&doc, ".change-counts .change"),
        ["3new", "0regressed", "0fixed", "0recurring"]
    );
    assert!(text_of(&doc, "ul.change-list").is_empty());
}

/// Issue 26, item 7: the PDF report's changes, counts on the cover and
/// lists before the findings.
#[tokio::test]
async fn the_pdf_report_shows_the_changes_since_the_previous_scan() {
    let h = scans_with_every_change().await;
    let (r, bytes) = report(&h.app, &h.user, h.third, "?format=pdf").await;
    assert_eq!(r.status, 200);
    let pages = pdf_page_texts(&bytes);
    let cover = squash(&pages[0]);
    let second_done = completed_at(&h.app, h.second).await;
    for needle in [
        "Changes since the previous scan".to_string(),
        format!("Compared with the target's previous completed scan, a full scan completed at {second_done}."),
        "1 new".into(),
        "1 regressed".into(),
        "1 fixed".into(),
        "1 recurring".into(),
    ] {
        assert!(
            cover.contains(&needle),
            "{needle:?} not on the cover: {cover}"
        );
    }
    let body = squash(&pages[1..].join(" "));
    let at = |s: &str| {
        body.find(s)
            .unwrap_or_else(|| panic!("{s:?} missing: {body}"))
    };
    let lists = at("Changes since the previous scan");
    let new = at("New (1)");
    let regressed = at("Regressed (1)");
    let fixed = at("Fixed (1)");
    assert!(lists < new && new < regressed && regressed < fixed);
    assert!(at("cve-2099-0001 name") > new && at("cve-2099-0001 name") < regressed);
    assert!(at("Exposed .git/config file") > regressed);
    assert!(at("exposed-admin name") > fixed);
    assert!(at("example.com · https://example.com/admin") > fixed);
    // The findings follow the lists; the fixed one is not among them.
    assert!(at("Template cve-2099-0001") > fixed);
    assert!(!body.contains("Template exposed-admin"));
    assert!(!body.contains('`'), "inline code without its backticks");
}

/// Issue 26, item 7: the CSV's `change` column and SARIF's `absent`.
#[tokio::test]
async fn the_csv_carries_each_findings_change_and_the_sarif_the_fixed_ones_as_absent() {
    let h = scans_with_every_change().await;
    let (r, _) = report(&h.app, &h.user, h.third, "?format=csv").await;
    let mut reader = csv::Reader::from_reader(r.text.as_bytes());
    assert_eq!(&reader.headers().unwrap()[15], "change");
    let changes: BTreeSet<(String, String)> = reader
        .records()
        .map(|r| r.unwrap())
        .map(|r| (r[3].to_string(), r[15].to_string()))
        .collect();
    let expected: BTreeSet<(String, String)> = [
        (&h.recurring, "recurring"),
        (&h.regressed, "regressed"),
        (&h.new, "new"),
    ]
    .into_iter()
    .map(|(e, c)| (e.template_id.clone(), c.to_string()))
    .collect();
    assert_eq!(changes, expected);

    let (r, _) = report_of_format(
        &Fixture {
            app: h.app,
            user: h.user,
            scan_id: h.third,
            findings: vec![],
        },
        "sarif",
        None,
    )
    .await;
    let doc = &r.body;
    assert_valid_sarif(doc);
    let run = &doc["runs"][0];
    let results = run["results"].as_array().unwrap();
    let states: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap(),
                r["baselineState"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("cve-2099-0001", "new"),
            ("git-config", "updated"),
            ("tech-nginx", "unchanged"),
            ("exposed-admin", "absent"),
        ]
    );
    let absent = &results[3];
    assert_eq!(absent["level"], "warning", "medium");
    assert_eq!(
        absent["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        h.fixed.matched_at
    );
    assert_eq!(
        absent["locations"][0]["logicalLocations"][0]["name"],
        "example.com"
    );
    assert_eq!(absent["properties"]["severity"], "medium");
    assert!(absent["properties"]["fixedAt"].is_string());
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let rule = &rules[absent["ruleIndex"].as_u64().unwrap() as usize];
    assert_eq!(rule["id"], "exposed-admin");
    assert_eq!(rule["fullDescription"]["text"], h.fixed.description);
    assert_eq!(rule["help"]["text"], h.fixed.remediation);
    assert_eq!(rule["defaultConfiguration"]["level"], "warning");
}

#[tokio::test]
async fn the_absent_results_fit_the_contracts_sarif_log() {
    let h = scans_with_every_change().await;
    let f = Fixture {
        app: h.app,
        user: h.user,
        scan_id: h.third,
        findings: vec![],
    };
    let (r, _) = report_of_format(&f, "sarif", None).await;
    assert_eq!(r.body["runs"][0]["results"][3]["baselineState"], "absent");
    assert_fits_contract(&f.app, "SarifLog", &r.body).await;
}

/// Issue 26, item 7: the `scan_complete` notification counts what is new
/// and what was fixed.
#[tokio::test]
async fn the_scan_complete_notification_says_how_many_are_new_and_fixed() {
    let h = scans_with_every_change().await;
    let db = h.app.state.db.get().await.unwrap();
    let row = db
        .query_one(
            "SELECT message, data FROM notifications
             WHERE scan_id = $1 AND type = 'scan_complete'",
            &[&h.third],
        )
        .await
        .unwrap();
    let message: String = row.get("message");
    let data: Value = row.get("data");
    assert!(message.contains("1 new, 1 fixed"), "{message}");
    assert_eq!((&data["new"], &data["fixed"]), (&json!(1), &json!(1)));
}

/// While a scan runs, its new findings are known but not what it fixes:
/// the changes section says so instead of counting 0 fixed.
#[tokio::test]
async fn a_running_scans_changes_count_what_is_known_and_say_fixed_comes_at_completion() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let old = finding("tech-nginx", Severity::Info, "example.com", "/");
    let first = new_scan(&app, &user, target).await;
    add_findings(&app, first, &user, std::slice::from_ref(&old)).await;
    complete(&app, first).await;
    let running = new_scan(&app, &user, target).await;
    set_status(&app, running, ScanStatus::Running).await;
    let new = finding("git-config", Severity::High, "example.com", "/.git/config");
    add_findings(&app, running, &user, std::slice::from_ref(&new)).await;

    let (r, _) = report(&app, &user, running, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    assert_eq!(
        text_of(&doc, ".change-counts .change"),
        ["1new", "0regressed", "–fixed", "0recurring"]
    );
    assert_eq!(
        text_of(&doc, "p.change-note"),
        ["Fixed findings are counted when the scan completes; new and regressed ones are those found so far."]
    );
    let listed = text_of(&doc, "ul.change-list.new li");
    assert!(
        listed.len() == 1 && listed[0].contains(&new.name),
        "{listed:?}"
    );
    assert!(text_of(&doc, "ul.change-list.fixed").is_empty());

    let (_, bytes) = report(&app, &user, running, "?format=pdf").await;
    let cover = squash(&pdf_page_texts(&bytes)[0]);
    assert!(cover.contains("– fixed"), "{cover}");
    assert!(
        cover.contains("Fixed findings are counted when the scan completes"),
        "{cover}"
    );
}

const CODE_NAME: &str = "Missing `X-Frame-Options` header";
const CODE_DESCRIPTION: &str =
    "Send `X-Frame-Options: DENY`; hostile `</code><script>alert(1)</script>` stays text, a lone ` stays.";
const CODE_REMEDIATION: &str = "Set `Content-Security-Policy: frame-ancestors 'none'`.";

async fn scan_with_inline_code() -> (TestApp, TestUser, Uuid) {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let scan = new_scan(&app, &user, target).await;
    let mut f = finding("missing-xfo", Severity::Low, "example.com", "/");
    f.name = CODE_NAME.into();
    f.description = CODE_DESCRIPTION.into();
    f.remediation = CODE_REMEDIATION.into();
    add_findings(&app, scan, &user, &[f]).await;
    complete(&app, scan).await;
    (app, user, scan)
}

#[tokio::test]
async fn inline_code_in_template_texts_is_a_code_element_in_html_and_hostile_text_stays_text() {
    let (app, user, scan) = scan_with_inline_code().await;
    let (r, _) = report(&app, &user, scan, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    assert_eq!(
        text_of(&doc, "article.finding h3 code"),
        ["X-Frame-Options"]
    );
    assert_eq!(
        text_of(&doc, "article.finding dd code"),
        [
            "missing-xfo",
            "https://example.com/",
            "X-Frame-Options: DENY",
            "</code><script>alert(1)</script>",
            "Content-Security-Policy: frame-ancestors 'none'",
        ]
    );
    let sel = scraper::Selector::parse("script").unwrap();
    assert_eq!(doc.select(&sel).count(), 0);
    assert!(r
        .text
        .contains("<code>&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;</code>"));
    let fields = text_of(&doc, "dl.fields dd");
    assert!(
        fields.contains(
            &"Send X-Frame-Options: DENY; hostile </code><script>alert(1)</script> stays text, a lone ` stays."
                .to_string()
        ),
        "{fields:?}"
    );
    assert!(!r.text.contains("`X-Frame-Options`"));
}

#[tokio::test]
async fn inline_code_in_the_pdf_is_set_in_the_monospace_font_without_backticks() {
    let (app, user, scan) = scan_with_inline_code().await;
    let (_, bytes) = report(&app, &user, scan, "?format=pdf").await;
    let text = squash(&pdf_page_texts(&bytes).join(" "));
    for needle in [
        "Missing X-Frame-Options header",
        "Send X-Frame-Options: DENY; hostile </code><script>alert(1)</script> stays text",
        "Set Content-Security-Policy: frame-ancestors 'none'.",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    assert_eq!(text.matches('`').count(), 1, "only the lone one: {text}");
    let fonts = poppler("pdffonts", &[], &bytes);
    assert!(fonts.contains("DejaVuSansMono"), "{fonts}");
    // A report without inline code does not embed the monospace font.
    let h = finished_scan().await;
    let (_, bytes) = report(&h.app, &h.user, h.scan_id, "?format=pdf").await;
    assert!(!poppler("pdffonts", &[], &bytes).contains("DejaVuSansMono"));
}

/// The id of `scan`'s finding of `template`.
async fn finding_id_of(app: &TestApp, user: &TestUser, scan: Uuid, template: &str) -> String {
    let detail = app
        .get(&format!("/api/v1/scans/{scan}"), &user.access_token)
        .await;
    detail.body["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["template_id"] == template)
        .unwrap_or_else(|| panic!("no {template} in {}", detail.text))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Issue 37, item 3: a false positive and an accepted risk (with its last
/// day) are SARIF suppressions, external and accepted, so code scanning
/// hides them; the fixed one's absent result too; every other result says
/// it is not suppressed. The official 2.1.0 schema and the contract's
/// SarifLog both take the log.
#[tokio::test]
async fn triaged_findings_carry_sarif_suppressions_that_fit_the_2_1_0_schema() {
    let h = scans_with_every_change().await;
    let until = (Utc::now() + chrono::Duration::days(30)).date_naive();
    for (scan, template, body) in [
        (
            h.third,
            &h.recurring.template_id,
            json!({"status": "false_positive"}),
        ),
        (
            h.third,
            &h.regressed.template_id,
            json!({"status": "accepted_risk", "until": until.to_string()}),
        ),
        (
            h.first,
            &h.fixed.template_id,
            json!({"status": "false_positive"}),
        ),
    ] {
        let id = finding_id_of(&h.app, &h.user, scan, template).await;
        let r = h
            .app
            .call(
                reqwest::Method::PATCH,
                &format!("/api/v1/findings/{id}"),
                Some(&h.user.access_token),
                Some(body),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let f = Fixture {
        app: h.app,
        user: h.user,
        scan_id: h.third,
        findings: vec![],
    };
    let (r, _) = report_of_format(&f, "sarif", None).await;
    let doc = &r.body;
    assert_valid_sarif(doc);
    assert_fits_contract(&f.app, "SarifLog", doc).await;
    let results = doc["runs"][0]["results"].as_array().unwrap();
    let of = |rule: &str| -> &Value {
        &results
            .iter()
            .find(|r| r["ruleId"] == rule)
            .unwrap_or_else(|| panic!("no result of {rule}"))["suppressions"]
    };
    let false_positive = json!([{
        "kind": "external",
        "status": "accepted",
        "justification": "Triaged as a false positive.",
        "properties": {"triageStatus": "false_positive"},
    }]);
    assert_eq!(of(&h.recurring.template_id), &false_positive);
    assert_eq!(
        of(&h.regressed.template_id),
        &json!([{
            "kind": "external",
            "status": "accepted",
            "justification": format!("Risk accepted until {until}."),
            "properties": {"triageStatus": "accepted_risk", "acceptedUntil": until.to_string()},
        }])
    );
    assert_eq!(of(&h.fixed.template_id), &false_positive, "the absent one");
    assert_eq!(of(&h.new.template_id), &json!([]), "not suppressed");
}

/// Issue 37, item 10: a severity with no findings draws no bar in the
/// HTML chart (it drew a sliver that read as "a few"); the others do.
#[tokio::test]
async fn a_zero_count_draws_no_bar_in_the_html_chart() {
    let h = scans_with_every_change().await;
    let (r, _) = report(&h.app, &h.user, h.third, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    let title = text_of(&doc, "svg.chart title");
    assert!(
        title[0].contains("Critical 1, High 1, Medium 0, Low 1, Info 0"),
        "{title:?}"
    );
    let bars = scraper::Selector::parse("svg.chart rect.bar").unwrap();
    let fills: Vec<&str> = doc
        .select(&bars)
        .map(|b| b.value().attr("fill").unwrap())
        .collect();
    assert_eq!(fills.len(), 3, "one bar per severity found: {fills:?}");
}

/// Issue 35: a scan with per-host coverage shows it in every format: the
/// technologies, templates run of the total, skipped by reason and the
/// requests of each live host.
#[tokio::test]
async fn every_format_shows_the_per_host_coverage_of_a_scan_that_has_it() {
    use scanfleet_common::events::{CoverageEvent, TechnologyEvent};
    let f = finished_scan().await;
    // Before any coverage: no section, empty lists.
    let (r, _) = report(&f.app, &f.user, f.scan_id, "").await;
    assert!(!r.text.contains("id=\"coverage\""), "no coverage section");
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=json").await;
    assert_eq!(r.body["coverage"], json!([]));

    let skipped = |pairs: &[(&str, u64)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let hosts = vec![
        CoverageEvent {
            host: "example.com".into(),
            technologies: vec![
                TechnologyEvent {
                    name: "nginx".into(),
                    version: Some("1.18.0".into()),
                    evidence: vec!["header:server: nginx/1.18.0".into()],
                },
                TechnologyEvent {
                    name: "php".into(),
                    version: None,
                    evidence: vec!["cookie:PHPSESSID".into()],
                },
            ],
            total: 10224,
            run: 2296,
            skipped: skipped(&[
                ("technology_absent", 6010),
                ("needs_oob", 467),
                ("needs_wordlist", 292),
                ("unsupported_protocol", 952),
                ("unsupported_feature", 3),
                ("brute_force", 204),
            ]),
            requests: 2471,
        },
        CoverageEvent {
            host: "www.example.com".into(),
            technologies: vec![],
            total: 10224,
            run: 1746,
            skipped: skipped(&[("technology_absent", 8478)]),
            requests: 2446,
        },
    ];
    {
        let db = f.app.state.db.get().await.unwrap();
        scanfleet_core::store::coverage::save(&db, f.scan_id, &hosts)
            .await
            .unwrap();
    }

    // HTML: a coverage table, one row per host.
    let (r, _) = report(&f.app, &f.user, f.scan_id, "").await;
    let doc = scraper::Html::parse_document(&r.text);
    let rows = text_of(&doc, "table.coverage tbody tr");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let squashed: Vec<String> = rows.iter().map(|r| squash(r)).collect();
    assert!(
        squashed[0].contains("example.com")
            && squashed[0].contains("nginx 1.18.0, php")
            && squashed[0].contains("2296 of 10224")
            && squashed[0]
                .contains("technology_absent 6010, unsupported_protocol 952, needs_oob 467")
            && squashed[0].contains("brute_force 204")
            && squashed[0].ends_with("2471"),
        "{squashed:?}"
    );
    assert!(
        squashed[1].contains("www.example.com")
            && squashed[1].contains("none detected")
            && squashed[1].contains("1746 of 10224")
            && squashed[1].contains("technology_absent 8478"),
        "{squashed:?}"
    );

    // PDF: the section before the findings, read back with pdftotext.
    let (_, bytes) = report(&f.app, &f.user, f.scan_id, "?format=pdf").await;
    let text = squash(&pdf_page_texts(&bytes).join(" "));
    for needle in [
        "Coverage",
        "Technologies nginx 1.18.0, php",
        "Templates run 2296 of 10224",
        "Skipped technology_absent 6010, unsupported_protocol 952, needs_oob 467",
        "Requests 2471",
        "Technologies none detected",
        "Templates run 1746 of 10224",
        "Skipped technology_absent 8478",
        "Requests 2446",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    let at = |needle: &str| text.find(needle).unwrap_or(usize::MAX);
    assert!(
        at("Templates run 2296") < at("cve-2099-0001 name"),
        "coverage before the findings"
    );

    // JSON: the coverage endpoint's hosts, in the contract's shape.
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=json").await;
    let endpoint = f
        .app
        .get(
            &format!("/api/v1/scans/{}/coverage", f.scan_id),
            &f.user.access_token,
        )
        .await;
    assert_eq!(endpoint.status, 200, "{}", endpoint.text);
    assert_eq!(r.body["coverage"], endpoint.body["hosts"]);
    assert_eq!(r.body["coverage"][0]["templates"]["run"], 2296);
    assert_eq!(
        r.body["coverage"][0]["technologies"][0]["version"],
        "1.18.0"
    );
    assert_fits_contract(&f.app, "JsonReport", &r.body).await;

    // SARIF: the run's properties, still valid SARIF 2.1.0.
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=sarif").await;
    assert_valid_sarif(&r.body);
    assert_fits_contract(&f.app, "SarifLog", &r.body).await;
    assert_eq!(
        r.body["runs"][0]["properties"]["coverage"],
        endpoint.body["hosts"]
    );

    // CSV: each finding's row ends with its host's coverage.
    let (r, _) = report(&f.app, &f.user, f.scan_id, "?format=csv").await;
    let mut reader = csv::Reader::from_reader(r.text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(
        header[16..],
        [
            "host_technologies",
            "host_templates_run",
            "host_templates_total",
            "host_templates_skipped",
            "host_requests"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), f.findings.len());
    for row in &rows {
        match &row[7] {
            "example.com" => {
                assert_eq!(&row[16], "nginx 1.18.0, php");
                assert_eq!(&row[17], "2296");
                assert_eq!(&row[18], "10224");
                assert!(row[19].starts_with("technology_absent 6010; "), "{row:?}");
                assert_eq!(&row[20], "2471");
            }
            "www.example.com" => {
                assert_eq!(&row[16], "none detected");
                assert_eq!(&row[19], "technology_absent 8478");
                assert_eq!(&row[20], "2446");
            }
            // The IDN host has no coverage: empty cells.
            _ => assert!((16..21).all(|i| row[i].is_empty()), "{row:?}"),
        }
    }
}
