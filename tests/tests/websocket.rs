//! The progress WebSocket's handshake: who may follow which scan (issue 8).

use chrono::Utc;
use futures::StreamExt;
use scanfleet_api::auth::tokens::{Claims, JwtKeys};
use scanfleet_tests::{spawn_app, TestApp, JWT_SECRET};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;

async fn scan_of(app: &TestApp, token: &str) -> String {
    let user_target = app
        .post(
            "/api/v1/targets",
            Some(token),
            json!({"domain": format!("ws{}.example.com", uuid::Uuid::new_v4().simple())}),
        )
        .await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(token),
            json!({"target_id": user_target.body["id"], "engine": "quick"}),
        )
        .await;
    r.body["id"].as_str().unwrap().to_string()
}

/// The HTTP status the handshake was refused with (None: accepted).
async fn handshake(app: &TestApp, scan: &str, token: Option<&str>) -> Option<u16> {
    let ws_base = app.base.replacen("http://", "ws://", 1);
    let url = match token {
        Some(t) => format!("{ws_base}/api/v1/ws/scans/{scan}?token={t}"),
        None => format!("{ws_base}/api/v1/ws/scans/{scan}"),
    };
    match tokio_tungstenite::connect_async(url.into_client_request().unwrap()).await {
        Ok(_) => None,
        Err(WsError::Http(resp)) => Some(resp.status().as_u16()),
        Err(e) => panic!("unexpected handshake error: {e}"),
    }
}

#[tokio::test]
async fn the_handshake_is_refused_with_401_for_missing_expired_or_tampered_tokens() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let scan = scan_of(&app, &u.access_token).await;
    assert_eq!(handshake(&app, &scan, None).await, Some(401));
    assert_eq!(handshake(&app, &scan, Some("not-a-token")).await, Some(401));
    let keys = JwtKeys::new(JWT_SECRET.as_bytes(), 900);
    let real = keys.verify(&u.access_token).unwrap();
    let now = Utc::now().timestamp();
    let expired = keys.sign(&Claims {
        iat: now - 1000,
        exp: now - 1,
        ..real.clone()
    });
    assert_eq!(handshake(&app, &scan, Some(&expired)).await, Some(401));
    let foreign = JwtKeys::new(b"another-secret-another-secret-another", 900).sign(&real);
    assert_eq!(handshake(&app, &scan, Some(&foreign)).await, Some(401));
}

#[tokio::test]
async fn the_handshake_is_refused_with_403_for_a_missing_scan_or_someone_elses() {
    let app = spawn_app().await;
    let owner = app.new_user().await;
    let other = app.new_user().await;
    let scan = scan_of(&app, &owner.access_token).await;
    assert_eq!(
        handshake(&app, &scan, Some(&other.access_token)).await,
        Some(403)
    );
    let missing = uuid::Uuid::now_v7().to_string();
    assert_eq!(
        handshake(&app, &missing, Some(&owner.access_token)).await,
        Some(403)
    );
    assert_eq!(
        handshake(&app, "not-a-uuid", Some(&owner.access_token)).await,
        Some(403)
    );
}

#[tokio::test]
async fn the_owner_gets_the_snapshot_first_with_all_eight_fields() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let scan = scan_of(&app, &u.access_token).await;
    let ws_base = app.base.replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(format!(
        "{ws_base}/api/v1/ws/scans/{scan}?token={}",
        u.access_token
    ))
    .await
    .expect("owner may follow the scan");
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next())
        .await
        .expect("snapshot")
        .unwrap()
        .unwrap();
    let Message::Text(text) = first else {
        panic!("not text: {first:?}")
    };
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(m["type"], "status");
    assert_eq!(m["scan_id"], scan.as_str());
    assert_eq!(m["status"], "queued");
    assert_eq!(m["progress"], 0);
    assert_eq!(m["findings_count"], 0);
    for field in ["stage", "current_tool", "at"] {
        assert!(m.get(field).is_some(), "{field}");
    }
    // A plain GET (no upgrade) with a good token is a clear 400.
    let r = app
        .client
        .get(app.url(&format!("/api/v1/ws/scans/{scan}?token={}", u.access_token)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}
