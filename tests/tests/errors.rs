//! Every error leaves the service as problem+json, including the ones raised
//! before our handlers run.

use reqwest::Method;
use scanfleet_tests::spawn_app;
use serde_json::json;

#[tokio::test]
async fn unknown_routes_are_404_problems() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/api/v1/nothing-here", None, None)
        .await;
    assert_eq!(r.assert_problem(404)["code"], "not_found");
}

#[tokio::test]
async fn wrong_methods_are_405_problems() {
    let app = spawn_app().await;
    let r = app
        .call(Method::DELETE, "/api/v1/auth/login", None, None)
        .await;
    assert_eq!(r.assert_problem(405)["code"], "method_not_allowed");
}

#[tokio::test]
async fn malformed_json_is_a_400_problem() {
    let app = spawn_app().await;
    let r = TestAppExt::raw(
        &app,
        "/api/v1/auth/login",
        "application/json",
        "{\"email\":",
    )
    .await;
    assert_eq!(r.assert_problem(400)["code"], "bad_request");
}

#[tokio::test]
async fn a_wrong_content_type_is_a_415_problem() {
    let app = spawn_app().await;
    let r = TestAppExt::raw(&app, "/api/v1/auth/login", "text/plain", "hello").await;
    assert_eq!(r.assert_problem(415)["code"], "unsupported_media_type");
    // Issue 37, item 6: a form body is told what to send instead.
    let r = TestAppExt::raw(
        &app,
        "/api/v1/auth/login",
        "application/x-www-form-urlencoded",
        "email=a%40example.com&password=x",
    )
    .await;
    assert_eq!(
        r.assert_problem(415)["detail"],
        "the request body must be JSON: send `Content-Type: application/json` \
         (not `application/x-www-form-urlencoded`)"
    );
}

#[tokio::test]
async fn an_unparseable_query_parameter_is_a_400_naming_it() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .get("/api/v1/admin/users?limit=many", &u.access_token)
        .await;
    r.assert_problem(400);
    assert_eq!(r.error_fields(), vec!["limit"]);
}

/// The detail and the field errors of a parse error speak the contract's
/// language, never poem-openapi's names for its types and path parameters
/// (issue: layers, item 8).
fn assert_no_framework_names(r: &scanfleet_tests::Reply) {
    for internal in [
        "param0",
        "string_uuid",
        "integer_int64",
        "optional_",
        "ScanCreate",
    ] {
        assert!(!r.text.contains(internal), "{internal} in {}", r.text);
    }
}

#[tokio::test]
async fn a_path_parameter_that_is_not_a_uuid_is_a_400_naming_it() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    for path in [
        "/api/v1/scans/not-a-uuid",
        "/api/v1/scans/not-a-uuid/report/pdf",
    ] {
        let r = app.get(path, &u.access_token).await;
        r.assert_problem(400);
        assert_eq!(r.error_fields(), vec!["scan_id"], "{path}");
        assert_eq!(r.body["errors"][0]["message"], "must be a UUID");
        assert_no_framework_names(&r);
    }
}

#[tokio::test]
async fn a_query_parameter_that_does_not_parse_says_what_it_must_be() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app.get("/api/v1/scans?limit=abc", &u.access_token).await;
    r.assert_problem(400);
    assert_eq!(r.error_fields(), vec!["limit"]);
    assert_eq!(
        r.body["errors"][0]["message"],
        "must be an integer from 1 to 500"
    );
    assert_no_framework_names(&r);
    let r = app
        .get("/api/v1/scans?target_id=abc", &u.access_token)
        .await;
    assert_eq!(r.error_fields(), vec!["target_id"]);
    assert_no_framework_names(&r);
}

#[tokio::test]
async fn a_body_property_that_does_not_parse_is_a_400_naming_it() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let token = Some(u.access_token.as_str());
    for (body, field, message) in [
        (
            json!({ "target_id": "nope" }),
            "target_id",
            "must be a UUID",
        ),
        (json!({ "target_id": 5 }), "target_id", "must be a UUID"),
        (json!({}), "target_id", "is required"),
        (
            json!({ "target_id": uuid::Uuid::nil(), "engine": 5 }),
            "engine",
            "must be a string",
        ),
    ] {
        let r = app.post("/api/v1/scans", token, body.clone()).await;
        assert_eq!(r.assert_problem(400)["code"], "bad_request", "{body}");
        assert_eq!(r.error_fields(), vec![field], "{body}");
        assert_eq!(r.body["errors"][0]["message"], message, "{body}");
        assert_no_framework_names(&r);
    }
    let r = app
        .post(
            "/api/v1/targets/import",
            token,
            json!({ "domains": ["a.example", 3] }),
        )
        .await;
    r.assert_problem(400);
    assert_eq!(r.error_fields(), vec!["domains[1]"]);
    let r = app.post("/api/v1/scans", token, json!([])).await;
    r.assert_problem(400);
    assert!(r.body["errors"].is_null(), "{}", r.text);
    assert_no_framework_names(&r);
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    let r = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(r.status, 200);
    let r = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["postgres"], "ok");
    assert_eq!(r.body["redis"], "ok");
}

#[tokio::test]
async fn the_contract_and_its_docs_are_served() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(r.status, 200);
    assert!(r.body["paths"]["/api/v1/auth/login"].is_object());
    let docs = app
        .client
        .get(app.url("/api/v1/docs"))
        .send()
        .await
        .unwrap();
    assert_eq!(docs.status(), 200);
}

struct TestAppExt;

impl TestAppExt {
    async fn raw(
        app: &scanfleet_tests::TestApp,
        path: &str,
        content_type: &str,
        body: &'static str,
    ) -> scanfleet_tests::Reply {
        let resp = app
            .client
            .post(app.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        scanfleet_tests::TestApp::read(resp).await
    }
}

#[tokio::test]
async fn metrics_are_served_in_prometheus_text_with_route_templates_not_raw_paths() {
    let app = scanfleet_tests::spawn_app().await;
    let u = app.new_user().await;
    let missing = uuid::Uuid::now_v7();
    let r = app
        .get(&format!("/api/v1/scans/{missing}"), &u.access_token)
        .await;
    assert_eq!(r.status, 404);
    let resp = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .starts_with("text/plain"));
    let text = resp.text().await.unwrap();
    for name in [
        "scanfleet_http_requests_total",
        "scanfleet_http_request_duration_seconds_bucket",
        "scanfleet_scans{status=\"queued\"}",
        "scanfleet_queue_depth",
        "scanfleet_ingest_backlog_entries",
        "scanfleet_ingest_lag_seconds",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(
        text.contains("route=\"/api/v1/scans/:param0\""),
        "the route template labels the request:\n{text}"
    );
    assert!(
        !text.contains(&missing.to_string()),
        "a raw id leaked into a label"
    );
}
