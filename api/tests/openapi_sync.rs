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

/// Issue 37, item 8: the endpoint table of `docs/api.md` lists every
/// operation of the contract, once, and no other; its auth column agrees
/// with each operation's security (`none`, Bearer only, or Bearer or key).
#[test]
fn the_endpoint_table_in_the_docs_lists_every_operation_of_the_contract() {
    let contract_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
    let contract: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(contract_path).unwrap()).unwrap();
    let docs_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
    let docs = std::fs::read_to_string(docs_path).expect("docs/api.md");
    let table = docs
        .split("\n## Endpoints\n")
        .nth(1)
        .and_then(|rest| rest.split("\nOutside the contract").next())
        .expect("an `## Endpoints` section before `Outside the contract`");
    let row =
        regex::Regex::new(r"^\| (GET|POST|PUT|PATCH|DELETE) \| `(/[^`]*)` \| [^|]+ \| (.+) \|$")
            .unwrap();
    let mut listed = std::collections::BTreeMap::new();
    for line in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| method"))
    {
        let caps = row
            .captures(line)
            .unwrap_or_else(|| panic!("not a row of method, path, what, auth: {line}"));
        let key = (caps[1].to_lowercase(), format!("/api/v1{}", &caps[2]));
        let auth = caps[3].to_string();
        assert!(
            listed.insert(key.clone(), auth).is_none(),
            "listed twice: {key:?}"
        );
    }
    let mut operations = std::collections::BTreeMap::new();
    for (path, item) in contract["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let schemes: Vec<String> = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_object())
                .flat_map(|s| s.keys().cloned())
                .collect();
            operations.insert((method.clone(), path.clone()), schemes);
        }
    }
    let missing: Vec<_> = operations
        .keys()
        .filter(|k| !listed.contains_key(*k))
        .collect();
    let unknown: Vec<_> = listed
        .keys()
        .filter(|k| !operations.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/api.md misses {missing:?} and lists {unknown:?}, which the contract has not"
    );
    for (key, schemes) in &operations {
        let auth = &listed[key];
        let keys = schemes.iter().any(|s| s == "ApiKeyAuth");
        let bearer = schemes.iter().any(|s| s == "BearerAuth");
        let says_key = auth.contains("key (");
        let says_none = auth.starts_with("none");
        assert_eq!(
            says_key, keys,
            "{key:?}: auth `{auth}`, schemes {schemes:?}"
        );
        assert_eq!(says_none, !bearer && !keys, "{key:?}: auth `{auth}`");
    }
}
