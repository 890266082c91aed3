//! Issue 12: every operation that takes an id answers 404 to a user who
//! does not own it. The operations come from the committed contract
//! (`openapi/openapi.json`), so a new operation with a path id is walked
//! without anyone remembering to add it here; a path parameter this walk
//! has no resource for fails the test until one is added.

use std::collections::HashMap;

use reqwest::Method;
use scanfleet_common::events::FindingEvent;
use scanfleet_common::Severity;
use scanfleet_core::store::{findings, notifications};
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Map, Value};
use uuid::Uuid;

/// Operations under these prefixes are not owned by users: administrators
/// act on everyone's resources, and everyone else gets 403 there whatever
/// the id (tested in `admin` and `verification`).
const NOT_OWNED: &[&str] = &["/api/v1/admin/"];

fn contract() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("openapi.json")).expect("json")
}

/// One operation with a path id.
#[derive(Debug)]
struct Operation {
    method: Method,
    path: String,
    params: Vec<String>,
    body_schema: Option<Value>,
    /// The contract lets an API key call it.
    accepts_api_key: bool,
}

fn operations(doc: &Value) -> Vec<Operation> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            let params: Vec<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect();
            if params.is_empty() || NOT_OWNED.iter().any(|p| path.starts_with(p)) {
                continue;
            }
            let body_schema = op["requestBody"]["content"]
                .as_object()
                .and_then(|c| c.iter().find(|(t, _)| t.starts_with("application/json")))
                .map(|(_, media)| media["schema"].clone());
            let accepts_api_key = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s.get("ApiKeyAuth").is_some());
            ops.push(Operation {
                method,
                path: path.clone(),
                params,
                body_schema,
                accepts_api_key,
            });
        }
    }
    ops
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// A valid value for a property, so that the answer is about ownership and
/// not about the body.
fn sample(name: &str, schema: &Value) -> Value {
    match name {
        "status" => json!("confirmed"),
        "engine" => json!("quick"),
        "cron_expression" => json!("0 3 * * *"),
        "until" => json!("2030-01-01"),
        _ => match schema["type"].as_str() {
            Some("boolean") => json!(false),
            Some("integer") | Some("number") => json!(1),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("walk"),
        },
    }
}

/// A body with every property of the operation's schema set.
fn body_for(doc: &Value, schema: &Value) -> Value {
    let schema = resolve(doc, schema);
    let mut body = Map::new();
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        body.insert(name.clone(), sample(name, resolve(doc, prop)));
    }
    Value::Object(body)
}

/// User A's resources, one per path parameter name of the contract.
async fn owners_resources(app: &TestApp, a: &TestUser) -> HashMap<&'static str, String> {
    let token = Some(a.access_token.as_str());
    let target = app
        .new_target(a, &format!("w{}.example.com", Uuid::new_v4().simple()))
        .await;
    let scan = app
        .post("/api/v1/scans", token, json!({"target_id": target}))
        .await;
    assert_eq!(scan.status, 201, "{}", scan.text);
    let scan_id: Uuid = scan.body["id"].as_str().unwrap().parse().unwrap();
    let schedule = app
        .post(
            "/api/v1/schedules",
            token,
            json!({"target_id": target, "engine": "quick", "cron_expression": "0 3 * * *"}),
        )
        .await;
    assert_eq!(schedule.status, 201, "{}", schedule.text);
    let schedule_id: Uuid = schedule.body["id"].as_str().unwrap().parse().unwrap();
    let key = app
        .post(
            "/api/v1/api-keys",
            token,
            json!({"name": "a", "permissions": ["read"]}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.text);

    let db = app.state.db.get().await.unwrap();
    let event = FindingEvent {
        template_id: "walk-template".into(),
        name: "walk".into(),
        severity: Severity::High,
        host: "example.com".into(),
        matched_at: "https://example.com/".into(),
        description: String::new(),
        remediation: String::new(),
        extracted_results: vec![],
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    };
    findings::insert_findings(&db, scan_id, a.id, &[event])
        .await
        .unwrap();
    let finding: Uuid = db
        .query_one("SELECT id FROM findings WHERE scan_id = $1", &[&scan_id])
        .await
        .unwrap()
        .get(0);
    notifications::create_schedule_skipped(&**db, a.id, schedule_id, "walk")
        .await
        .unwrap();
    let notification: Uuid = db
        .query_one("SELECT id FROM notifications WHERE user_id = $1", &[&a.id])
        .await
        .unwrap()
        .get(0);
    // A webhook with one delivery (its URL is never reached: the guard of
    // this app refuses loopback).
    let hook = scanfleet_core::store::webhooks::create(
        &**db,
        a.id,
        &scanfleet_core::store::webhooks::WebhookValues {
            url: "http://127.0.0.1:9/",
            kind: "generic",
            events: &["scan.completed".to_string()],
            min_severity: scanfleet_common::Severity::Info,
            description: "walk",
            enabled: true,
        },
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    )
    .await
    .unwrap();
    assert!(scanfleet_core::outbox::ping(&db, a.id, hook.id)
        .await
        .unwrap());
    let delivery: Uuid = db
        .query_one(
            "SELECT id FROM webhook_deliveries WHERE webhook_id = $1",
            &[&hook.id],
        )
        .await
        .unwrap()
        .get("id");

    HashMap::from([
        ("webhook_id", hook.id.to_string()),
        ("delivery_id", delivery.to_string()),
        ("target_id", target.to_string()),
        ("scan_id", scan_id.to_string()),
        ("schedule_id", schedule_id.to_string()),
        ("finding_id", finding.to_string()),
        ("notification_id", notification.to_string()),
        ("key_id", key.body["id"].as_str().unwrap().to_string()),
    ])
}

/// Calls `op` on `ids` as the holder of `auth` (a header name and value).
async fn call(
    app: &TestApp,
    doc: &Value,
    op: &Operation,
    ids: &HashMap<&str, String>,
    auth: (&str, &str),
) -> Reply {
    let mut path = op.path.clone();
    for p in &op.params {
        let id = ids.get(p.as_str()).unwrap_or_else(|| {
            panic!(
                "{} {}: the walk has no resource for `{p}`; add one",
                op.method, op.path
            )
        });
        path = path.replace(&format!("{{{p}}}"), id);
    }
    let mut req = app
        .client
        .request(op.method.clone(), app.url(&path))
        .header(auth.0, auth.1);
    if let Some(schema) = &op.body_schema {
        req = req.json(&body_for(doc, schema));
    }
    TestApp::read(req.send().await.expect("request")).await
}

#[tokio::test]
async fn every_operation_with_an_id_answers_404_to_a_non_owner() {
    let app = spawn_app().await;
    let doc = contract();
    let ops = operations(&doc);
    assert!(
        ops.len() >= 12,
        "the walk found only {} operations",
        ops.len()
    );
    let a = app.new_user().await;
    let b = app.new_user().await;
    // Tiers that allow every feature, so no answer is a tier refusal.
    app.set_tier(a.id, "yearly").await;
    app.set_tier(b.id, "yearly").await;
    let ids = owners_resources(&app, &a).await;
    let b_key = app
        .post(
            "/api/v1/api-keys",
            Some(&b.access_token),
            json!({"name": "b", "permissions": ["read", "scan", "write"]}),
        )
        .await;
    assert_eq!(b_key.status, 201, "{}", b_key.text);
    let b_key = b_key.body["key"].as_str().unwrap().to_string();
    let bearer = format!("Bearer {}", b.access_token);

    let mut failures = Vec::new();
    for op in &ops {
        let mut ways = vec![("authorization", bearer.as_str())];
        if op.accepts_api_key {
            ways.push(("x-api-key", b_key.as_str()));
        }
        for auth in ways {
            let r = call(&app, &doc, op, &ids, auth).await;
            if r.status != 404 || r.body["code"] != "not_found" {
                failures.push(format!(
                    "{} {} with {}: {} {}",
                    op.method, op.path, auth.0, r.status, r.text
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "non-owner answers that are not 404:\n{}",
        failures.join("\n")
    );

    // And nothing of A's was touched.
    let token = a.access_token.as_str();
    for path in [
        format!("/api/v1/targets/{}", ids["target_id"]),
        format!("/api/v1/scans/{}", ids["scan_id"]),
    ] {
        assert_eq!(app.get(&path, token).await.status, 200, "{path}");
    }
    let schedules = app.get("/api/v1/schedules", token).await;
    assert_eq!(schedules.body.as_array().unwrap().len(), 1);
    assert_eq!(schedules.body[0]["enabled"], true);
    let keys = app.get("/api/v1/api-keys", token).await;
    assert_eq!(keys.body.as_array().unwrap().len(), 1);
    let unread = app.get("/api/v1/notifications/unread-count", token).await;
    assert_eq!(unread.body["unread_count"], 1);
    let scan = app
        .get(&format!("/api/v1/scans/{}", ids["scan_id"]), token)
        .await;
    assert_eq!(scan.body["status"], "queued", "not stopped by B");
    assert_eq!(
        scan.body["vulnerabilities"][0]["status"], "open",
        "not triaged by B"
    );
}
