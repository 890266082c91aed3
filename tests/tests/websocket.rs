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

/// Issue 37, item 2: a real api process, a real WebSocket session, then its
/// log: the access token that went in the URI (`?token=`), an API key sent
/// as a header and as a query parameter, and the Bearer header appear
/// nowhere, while the requests themselves are logged (headers too, at
/// debug).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_runs_log_holds_no_credential_after_a_websocket_session() {
    let fleet = scanfleet_tests::fleet::Fleet::new(&[(
        "RUST_LOG".to_string(),
        "info,scanfleet_api::access_log=debug".to_string(),
    )])
    .await;
    let mut api = fleet.api(&[]).await;
    let token = fleet.user().await;
    let target = fleet.target(&token, "example.com").await;
    let scan = fleet.scan(&token, &target, "quick").await;
    let mut ws = fleet.websocket(&token, &scan).await;
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
        .await
        .expect("a message within 10 s")
        .expect("a message")
        .expect("not an error");
    let snapshot: serde_json::Value = match first {
        Message::Text(t) => serde_json::from_str(&t).expect("json"),
        other => panic!("expected the snapshot, got {other:?}"),
    };
    assert_eq!(snapshot["scan_id"], scan, "{snapshot}");
    ws.close(None).await.expect("close");
    drop(ws);

    let (status, key) = fleet
        .call(
            reqwest::Method::POST,
            "/api-keys",
            &token,
            Some(json!({"name": "log", "permissions": ["read"]})),
        )
        .await;
    assert_eq!(status, 201, "{key}");
    let key = key["key"].as_str().expect("raw key").to_string();
    let base = fleet.base();
    let r = fleet
        .http
        .get(format!("{base}/api/v1/scans/{scan}"))
        .header("X-API-Key", &key)
        .send()
        .await
        .expect("GET with a key");
    assert_eq!(r.status(), 200);
    let _ = fleet
        .http
        .get(format!("{base}/api/v1/scans?api_key={key}&limit=1"))
        .send()
        .await
        .expect("GET with a key in the query");
    assert!(
        api.terminate(std::time::Duration::from_secs(20)),
        "api stops"
    );
    // Issue 37, item 10: started again on the migrated database, the api
    // logs no `schema_migrations already exists` notice (same log file).
    let mut again = fleet.api(&[]).await;
    assert!(
        again.terminate(std::time::Duration::from_secs(20)),
        "api stops"
    );

    let log = api.log_text();
    assert_eq!(log.matches("api listening").count(), 2, "{log}");
    assert!(!log.contains("already exists"), "{log}");
    assert!(
        log.contains(&format!("/api/v1/ws/scans/{scan}?token=[redacted]")),
        "the WebSocket request is logged, its token redacted:\n{log}"
    );
    assert!(log.contains("api_key=[redacted]"), "{log}");
    assert!(log.contains("x-api-key: [redacted]"), "{log}");
    assert!(log.contains("authorization: [redacted]"), "{log}");
    // Not the token, nor its signature alone; not the key.
    let signature = token.rsplit('.').next().expect("a JWT");
    for secret in [token.as_str(), signature, key.as_str()] {
        assert!(!log.contains(secret), "{secret:?} in the log:\n{log}");
    }
}

/// The next text message as JSON; None once the server closed.
async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Option<serde_json::Value> {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(240), ws.next())
            .await
            .expect("a message within 240 s")?
            .ok()?;
        match message {
            Message::Text(t) => return Some(serde_json::from_str(&t).expect("json")),
            Message::Close(_) => return None,
            _ => {}
        }
    }
}

/// Issue 35: once the node reported the coverage, the stage (`progress`)
/// and `status` messages carry its counts, equal to the coverage endpoint's
/// summed over the hosts; before that, and on `finding` messages, there is
/// none; a listener of the finished scan gets them in its snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_and_status_messages_carry_the_coverage_counts_once_known() {
    use scanfleet_tests::stacks::{stack_hosts, StackLab, BLANK};
    let lab = StackLab::start().await;
    let fleet = scanfleet_tests::fleet::Fleet::new(&lab.node_env(&stack_hosts())).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, BLANK).await;
    let scan = fleet.scan(&token, &target, "auto").await;
    let mut ws = fleet.websocket(&token, &scan).await;
    let mut messages = Vec::new();
    while let Some(m) = next_json(&mut ws).await {
        messages.push(m);
    }
    let last = messages.last().expect("messages").clone();
    assert_eq!(last["type"], "status", "{last}");
    assert_eq!(last["status"], "completed", "{last}");

    // The stored coverage, summed (one host here); the ingester may write
    // it a moment after the stream's terminal status.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let coverage = loop {
        let c = fleet.get(&format!("/scans/{scan}/coverage"), &token).await;
        if c["hosts"].as_array().is_some_and(|h| !h.is_empty())
            || tokio::time::Instant::now() > deadline
        {
            break c;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let host = &coverage["hosts"][0];
    assert_eq!(host["host"], BLANK, "{coverage}");
    let expected = json!({
        "hosts": 1,
        "templates": {
            "total": host["templates"]["total"],
            "run": host["templates"]["run"],
            "skipped": host["templates"]["skipped"],
        },
        "requests": host["requests"],
    });
    assert!(expected["templates"]["run"].as_u64().unwrap() > 0);

    // DETECT and VALIDATE messages come before the counts are known; the
    // REPORT stage message and the terminal status carry them.
    let stage = |s: &'static str| messages.iter().filter(move |m| m["stage"] == s);
    assert!(messages[0].get("coverage").is_none(), "{}", messages[0]);
    for m in stage("DETECT").chain(stage("VALIDATE")) {
        assert!(m.get("coverage").is_none(), "{m}");
        // The existing fields are all there.
        for field in scanfleet_tests::PROGRESS_MESSAGE_FIELDS {
            assert!(m.get(field).is_some(), "{field} in {m}");
        }
    }
    let report = messages
        .iter()
        .find(|m| m["type"] == "progress" && m["stage"] == "REPORT")
        .expect("a REPORT stage message");
    assert_eq!(report["coverage"], expected, "{report}");
    assert_eq!(last["coverage"], expected, "{last}");
    for m in messages.iter().filter(|m| m["type"] == "finding") {
        assert!(m.get("coverage").is_none(), "{m}");
    }

    // A listener of the finished scan: the snapshot, with the counts.
    let mut ws = fleet.websocket(&token, &scan).await;
    let snapshot = next_json(&mut ws).await.expect("snapshot");
    assert_eq!(snapshot["status"], "completed", "{snapshot}");
    assert_eq!(snapshot["coverage"], expected, "{snapshot}");
}
