//! Issue 12, edge hardening: forged JWTs (algorithm confusion, key
//! selection headers), per-account throttling of password guesses, and the
//! request body cap.

use std::time::Duration;

use base64::Engine as _;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use scanfleet_tests::{spawn_app, spawn_app_with, TestApp, JWT_SECRET, PASSWORD};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("payload");
    serde_json::from_slice(&B64.decode(payload).expect("base64")).expect("claims")
}

async fn me_with(app: &TestApp, token: &str) -> u16 {
    app.get("/api/v1/auth/me", token).await.status.as_u16()
}

#[tokio::test]
async fn forged_tokens_with_another_algorithm_or_a_key_selector_are_401() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let claims = claims_of(&u.access_token);
    let secret = EncodingKey::from_secret(JWT_SECRET.as_bytes());
    // Control: the same claims signed the way the service signs are accepted,
    // so the refusals below are about the header alone.
    let genuine = encode(&Header::new(Algorithm::HS256), &claims, &secret).unwrap();
    assert_eq!(me_with(&app, &genuine).await, 200);

    let mut forged = Vec::new();
    for alg in [Algorithm::HS384, Algorithm::HS512] {
        forged.push((
            format!("{alg:?}"),
            encode(&Header::new(alg), &claims, &secret).unwrap(),
        ));
    }
    for (name, value) in [
        ("kid", json!("../../../../dev/null")),
        ("jku", json!("https://attacker.invalid/jwks.json")),
        ("x5u", json!("https://attacker.invalid/cert.pem")),
    ] {
        let mut header = serde_json::to_value(Header::new(Algorithm::HS256)).unwrap();
        header[name] = value;
        let signing_input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let signature =
            jsonwebtoken::crypto::sign(signing_input.as_bytes(), &secret, Algorithm::HS256)
                .unwrap();
        forged.push((name.to_string(), format!("{signing_input}.{signature}")));
    }
    let body = B64.encode(claims.to_string());
    for header in [
        r#"{"alg":"none","typ":"JWT"}"#,
        r#"{"alg":"None"}"#,
        r#"{"alg":"RS256"}"#,
    ] {
        forged.push((
            header.to_string(),
            format!("{}.{body}.", B64.encode(header)),
        ));
    }
    for (what, token) in forged {
        let r = app.get("/api/v1/auth/me", &token).await;
        assert_eq!(r.status, 401, "{what}: {}", r.text);
        r.assert_problem(401);
    }
}

async fn throttled_app() -> TestApp {
    spawn_app_with(&[
        ("SCANFLEET_RATE__ACCOUNT_FAILURES", "3"),
        ("SCANFLEET_RATE__ACCOUNT_WINDOW_SECS", "600"),
    ])
    .await
}

#[tokio::test]
async fn wrong_passwords_throttle_the_account_whatever_the_address() {
    // Per-IP limiting is off in test apps: what stops the guesses here is
    // the per-account count alone.
    let app = throttled_app().await;
    assert!(!app.state.settings.rate.enabled);
    let u = app.new_user().await;
    let bystander = app.new_user().await;

    // A correct login clears earlier failures.
    for _ in 0..2 {
        assert_eq!(app.login(&u.email, "wrong-password").await.status, 401);
    }
    assert_eq!(app.login(&u.email, PASSWORD).await.status, 200);
    for _ in 0..3 {
        assert_eq!(app.login(&u.email, "wrong-password").await.status, 401);
    }
    // Now even the right password waits: the guesser cannot tell.
    let r = app.login(&u.email, PASSWORD).await;
    let body = r.assert_problem(429);
    assert_eq!(body["code"], "account_throttled");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=600).contains(&retry), "{retry}");
    // The email's case does not open a second budget.
    let r = app.login(&u.email.to_uppercase(), PASSWORD).await;
    r.assert_problem(429);
    // Other accounts are not affected.
    assert_eq!(app.login(&bystander.email, PASSWORD).await.status, 200);

    // Unknown emails are throttled the same way, so 429 reveals nothing.
    let ghost = "nobody-here@example.com";
    for _ in 0..3 {
        assert_eq!(app.login(ghost, "wrong-password").await.status, 401);
    }
    app.login(ghost, "wrong-password").await.assert_problem(429);
}

#[tokio::test]
async fn wrong_current_passwords_throttle_password_changes() {
    let app = throttled_app().await;
    let u = app.new_user().await;
    let change = |current: &'static str| {
        let token = u.access_token.clone();
        let app = &app;
        async move {
            app.call(
                reqwest::Method::PUT,
                "/api/v1/auth/me/password",
                Some(&token),
                Some(json!({"current_password": current, "new_password": "another-long-password"})),
            )
            .await
        }
    };
    for _ in 0..3 {
        change("not-my-password").await.assert_problem(422);
    }
    let r = change(PASSWORD).await;
    assert_eq!(r.assert_problem(429)["code"], "account_throttled");
}

/// Sends `head` and then up to `body_bytes` of body, stopping at the first
/// answer; returns the answer's status line and body.
async fn raw_exchange(
    app: &TestApp,
    head: &str,
    chunked: bool,
    body_bytes: usize,
) -> (String, String) {
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 8192];
    while sent < body_bytes {
        let write = async {
            if chunked {
                stream
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
                stream.write_all(&chunk).await?;
                stream.write_all(b"\r\n").await
            } else {
                stream.write_all(&chunk).await
            }
        };
        if write.await.is_err() {
            break;
        }
        sent += chunk.len();
        // Stop sending as soon as the server has answered.
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(1), stream.read(&mut buf)).await
        {
            answer.extend_from_slice(&buf[..n]);
            break;
        }
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&answer);
                if let Some((_, body)) = text.split_once("\r\n\r\n") {
                    if body.trim_end().ends_with('}') {
                        break;
                    }
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.lines().next().unwrap_or("").to_string();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn a_50_mb_body_is_refused_with_413_before_it_is_read() {
    let app = spawn_app().await;
    let head =
        "POST /api/v1/auth/login HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n\
                Content-Length: 52428800\r\n\r\n";
    // Only 256 KiB of the declared 50 MB are ever sent: the answer comes
    // first, so the server never held the body.
    let (status, body) = raw_exchange(&app, head, false, 256 * 1024).await;
    assert!(status.contains(" 413 "), "{status}");
    let problem: Value = serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("{body}"));
    assert_eq!(problem["code"], "payload_too_large");
    assert_eq!(problem["status"], 413);
}

#[tokio::test]
async fn a_chunked_body_past_the_cap_is_413() {
    let app = spawn_app_with(&[("SCANFLEET_API__MAX_BODY_BYTES", "100000")]).await;
    let head =
        "POST /api/v1/auth/register HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n\
                Transfer-Encoding: chunked\r\n\r\n";
    let (status, body) = raw_exchange(&app, head, true, 4 * 64 * 1024).await;
    assert!(status.contains(" 413 "), "{status}");
    assert!(body.contains("payload_too_large"), "{body}");
}

#[tokio::test]
async fn a_chunked_body_under_the_cap_is_served() {
    let app = spawn_app().await;
    let body =
        json!({"email": "chunked@example.com", "password": PASSWORD, "full_name": "C"}).to_string();
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let (first, second) = body.split_at(body.len() / 2);
    let request = format!(
        "POST /api/v1/auth/register HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{first}\r\n{:x}\r\n{second}\r\n0\r\n\r\n",
        first.len(),
        second.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(app.login("chunked@example.com", PASSWORD).await.status, 200);
}
