//! Every error leaves the service as problem+json, including the ones raised
//! before our handlers run.

use reqwest::Method;
use scanfleet_tests::spawn_app;

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
