//! The committed contract `openapi/openapi.json` must be exactly what the code
//! generates. Regenerate with `make openapi` after changing a route.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

#[test]
fn committed_openapi_document_matches_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
    let committed = std::fs::read_to_string(path).expect("openapi/openapi.json is missing");
    let generated = scanfleet_api::openapi_json();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date: run `make openapi` and commit the result"
    );
}

#[test]
fn every_path_of_the_contract_is_in_the_document() {
    let doc: serde_json::Value = serde_json::from_str(&scanfleet_api::openapi_json()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let expected = [
        ("post", "/api/v1/auth/register"),
        ("post", "/api/v1/auth/login"),
        ("post", "/api/v1/auth/refresh"),
        ("post", "/api/v1/auth/logout"),
        ("get", "/api/v1/auth/me"),
        ("put", "/api/v1/auth/me"),
        ("put", "/api/v1/auth/me/password"),
        ("get", "/api/v1/targets"),
        ("post", "/api/v1/targets"),
        ("delete", "/api/v1/targets/{target_id}"),
        ("post", "/api/v1/targets/import"),
        ("get", "/api/v1/scans"),
        ("post", "/api/v1/scans"),
        ("get", "/api/v1/scans/{scan_id}"),
        ("post", "/api/v1/scans/{scan_id}/stop"),
        ("get", "/api/v1/scans/{scan_id}/intel"),
        ("get", "/api/v1/scans/{scan_id}/report"),
        ("get", "/api/v1/dashboard/summary"),
        ("get", "/api/v1/dashboard/charts"),
        ("get", "/api/v1/schedules"),
        ("post", "/api/v1/schedules"),
        ("put", "/api/v1/schedules/{schedule_id}"),
        ("delete", "/api/v1/schedules/{schedule_id}"),
        ("post", "/api/v1/schedules/{schedule_id}/run-now"),
        ("get", "/api/v1/notifications"),
        ("put", "/api/v1/notifications/{notification_id}/read"),
        ("post", "/api/v1/notifications/read-all"),
        ("get", "/api/v1/notifications/unread-count"),
        ("post", "/api/v1/api-keys"),
        ("get", "/api/v1/api-keys"),
        ("delete", "/api/v1/api-keys/{key_id}"),
        ("get", "/api/v1/subscriptions/tiers"),
        ("get", "/api/v1/subscriptions/current"),
        ("post", "/api/v1/subscriptions/checkout"),
        ("post", "/api/v1/subscriptions/upgrade"),
        ("post", "/api/v1/subscriptions/cancel"),
        ("get", "/api/v1/subscriptions/usage"),
        ("post", "/api/v1/subscriptions/webhook"),
        ("get", "/api/v1/admin/users"),
        ("patch", "/api/v1/admin/users/{user_id}"),
        ("patch", "/api/v1/findings/{finding_id}"),
    ];
    for (method, path) in expected {
        let op = &paths.get(path).unwrap_or_else(|| panic!("{path} missing"))[method];
        assert!(op.is_object(), "{method} {path} missing");
        assert!(
            op["operationId"].is_string(),
            "{method} {path}: no operationId"
        );
        assert!(op["summary"].is_string(), "{method} {path}: no summary");
        assert!(
            op["tags"].as_array().is_some_and(|t| !t.is_empty()),
            "{method} {path}: no tags"
        );
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|s| s.starts_with('4')),
            "{method} {path}: no error responses declared"
        );
    }
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert!(schemes.values().any(|s| s["scheme"] == "bearer"));
    assert!(schemes
        .values()
        .any(|s| s["in"] == "header" && s["name"] == "X-API-Key"));
}
