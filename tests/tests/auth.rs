//! Auth rules of the contract against the real app, Postgres and Redis.

use chrono::Utc;
use reqwest::Method;
use scanfleet_api::auth::tokens::{Claims, JwtKeys};
use scanfleet_tests::{spawn_app, spawn_app_with, JWT_SECRET, PASSWORD};
use serde_json::json;
use uuid::Uuid;

#[tokio::test]
async fn register_creates_a_demo_user_with_a_lower_cased_email() {
    let app = spawn_app().await;
    let r = app.register("  Alice@Example.COM ", PASSWORD).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["email"], "alice@example.com");
    assert_eq!(r.body["role"], "user");
    assert_eq!(r.body["tier_slug"], "demo");
    assert_eq!(r.body["full_name"], "Test User");
    assert!(r.body["id"].as_str().unwrap().parse::<Uuid>().is_ok());
    assert!(r.body.get("password_hash").is_none());
    let db = app.state.db.get().await.unwrap();
    let hash: String = db
        .query_one(
            "SELECT password_hash FROM users WHERE email = 'alice@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(hash.starts_with("$argon2id$"), "{hash}");
}

#[tokio::test]
async fn registering_a_taken_email_is_a_409_whatever_its_case() {
    let app = spawn_app().await;
    assert_eq!(app.register("bob@example.com", PASSWORD).await.status, 201);
    let r = app.register("BOB@example.com", PASSWORD).await;
    assert_eq!(r.assert_problem(409)["code"], "email_taken");
}

#[tokio::test]
async fn malformed_emails_are_422_naming_the_email_field() {
    let app = spawn_app().await;
    for email in ["not-an-email", "a@b", "@example.com", "a b@example.com", ""] {
        let r = app.register(email, PASSWORD).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["email"], "{email}");
    }
}

#[tokio::test]
async fn passwords_outside_8_to_128_characters_are_422_naming_the_field() {
    let app = spawn_app().await;
    for pw in ["short", "1234567", &"x".repeat(129)] {
        let r = app.register("carol@example.com", pw).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["password"]);
    }
    assert_eq!(
        app.register("carol@example.com", "12345678").await.status,
        201
    );
}

#[tokio::test]
async fn login_returns_tokens_and_the_user() {
    let app = spawn_app().await;
    app.register("dan@example.com", PASSWORD).await;
    let r = app.login("DAN@example.com", PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["token_type"], "bearer");
    assert!(r.body["access_token"].as_str().unwrap().split('.').count() == 3);
    assert!(r.body["refresh_token"]
        .as_str()
        .unwrap()
        .starts_with("sfr_"));
    assert_eq!(r.body["user"]["email"], "dan@example.com");
    assert_eq!(r.body["user"]["tier_slug"], "demo");
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_401() {
    let app = spawn_app().await;
    app.register("erin@example.com", PASSWORD).await;
    let wrong = app.login("erin@example.com", "not-the-password").await;
    let unknown = app.login("nobody@example.com", PASSWORD).await;
    wrong.assert_problem(401);
    unknown.assert_problem(401);
    assert_eq!(wrong.body["detail"], unknown.body["detail"]);
    assert_eq!(wrong.body["code"], unknown.body["code"]);
    assert!(wrong.header("www-authenticate").is_some());
    // Both paths verify an argon2 hash, so neither answers much faster. The
    // fastest of several interleaved tries of each is compared: the machine's
    // noise only ever adds time.
    let mut known = std::time::Duration::MAX;
    let mut missing = std::time::Duration::MAX;
    for _ in 0..3 {
        for (email, best) in [
            ("erin@example.com", &mut known),
            ("nobody@example.com", &mut missing),
        ] {
            let start = std::time::Instant::now();
            app.login(email, "not-the-password").await;
            *best = (*best).min(start.elapsed());
        }
    }
    let ratio = known.as_secs_f64() / missing.as_secs_f64();
    assert!(
        (0.33..3.0).contains(&ratio),
        "known {known:?} vs unknown {missing:?}"
    );
}

#[tokio::test]
async fn me_returns_the_profile_and_put_me_changes_the_name() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app.get("/api/v1/auth/me", &u.access_token).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["id"], u.id.to_string());
    for key in [
        "id",
        "email",
        "full_name",
        "role",
        "tier_slug",
        "created_at",
    ] {
        assert!(r.body.get(key).is_some(), "{key}");
    }
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me?full_name=Grace%20Hopper",
            Some(&u.access_token),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["full_name"], "Grace Hopper");
    let long = "x".repeat(201);
    let r = app
        .call(
            Method::PUT,
            &format!("/api/v1/auth/me?full_name={long}"),
            Some(&u.access_token),
            None,
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["full_name"]);
}

#[tokio::test]
async fn missing_credentials_are_a_401_problem_with_www_authenticate() {
    let app = spawn_app().await;
    let r = app.call(Method::GET, "/api/v1/auth/me", None, None).await;
    r.assert_problem(401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer realm=\"scanfleet\"")
    );
}

#[tokio::test]
async fn an_expired_access_token_is_401() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let keys = JwtKeys::new(JWT_SECRET.as_bytes(), 900);
    let real = keys.verify(&u.access_token).unwrap();
    let now = Utc::now().timestamp();
    let expired = keys.sign(&Claims {
        iat: now - 1000,
        exp: now - 1,
        ..real
    });
    let r = app.get("/api/v1/auth/me", &expired).await;
    assert!(r.assert_problem(401)["detail"]
        .as_str()
        .unwrap()
        .contains("expired"));
}

#[tokio::test]
async fn a_tampered_or_foreign_token_is_401() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let mut tampered = u.access_token.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    app.get("/api/v1/auth/me", &tampered)
        .await
        .assert_problem(401);
    let foreign =
        JwtKeys::new(b"some-other-secret-some-other-secret", 900).issue(u.id, Uuid::now_v7());
    app.get("/api/v1/auth/me", &foreign)
        .await
        .assert_problem(401);
    app.get("/api/v1/auth/me", "garbage")
        .await
        .assert_problem(401);
}

#[tokio::test]
async fn refresh_rotates_the_refresh_token() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .post(
            "/api/v1/auth/refresh",
            Some(&u.access_token),
            json!({"refresh_token": u.refresh_token}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let new_refresh = r.body["refresh_token"].as_str().unwrap().to_string();
    let new_access = r.body["access_token"].as_str().unwrap().to_string();
    assert_ne!(new_refresh, u.refresh_token);
    assert_eq!(app.get("/api/v1/auth/me", &new_access).await.status, 200);
    // The new token works in turn.
    let r = app
        .post(
            "/api/v1/auth/refresh",
            Some(&new_access),
            json!({"refresh_token": new_refresh}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn reusing_a_rotated_refresh_token_is_401_and_kills_the_session() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let first = app
        .post(
            "/api/v1/auth/refresh",
            Some(&u.access_token),
            json!({"refresh_token": u.refresh_token}),
        )
        .await;
    assert_eq!(first.status, 200);
    let rotated_access = first.body["access_token"].as_str().unwrap().to_string();
    let rotated_refresh = first.body["refresh_token"].as_str().unwrap().to_string();

    let reuse = app
        .post(
            "/api/v1/auth/refresh",
            Some(&u.access_token),
            json!({"refresh_token": u.refresh_token}),
        )
        .await;
    reuse.assert_problem(401);
    // The whole session is gone: its newest tokens no longer work either.
    app.get("/api/v1/auth/me", &rotated_access)
        .await
        .assert_problem(401);
    app.post(
        "/api/v1/auth/refresh",
        Some(&rotated_access),
        json!({"refresh_token": rotated_refresh}),
    )
    .await
    .assert_problem(401);
}

#[tokio::test]
async fn refresh_accepts_an_expired_access_token_of_the_same_session_only() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let other = app.login_user(&u.email, PASSWORD).await;
    let keys = JwtKeys::new(JWT_SECRET.as_bytes(), 900);
    let now = Utc::now().timestamp();
    let claims = keys.verify(&u.access_token).unwrap();
    let expired = keys.sign(&Claims {
        iat: now - 2000,
        exp: now - 1000,
        ..claims
    });
    // An access token of another session does not go with this refresh token.
    app.post(
        "/api/v1/auth/refresh",
        Some(&other.access_token),
        json!({"refresh_token": u.refresh_token}),
    )
    .await
    .assert_problem(401);
    let r = app
        .post(
            "/api/v1/auth/refresh",
            Some(&expired),
            json!({"refresh_token": u.refresh_token}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn logout_revokes_the_session_so_refresh_fails() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .post(
            "/api/v1/auth/logout",
            Some(&u.access_token),
            json!({"refresh_token": u.refresh_token}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].is_string());
    app.post(
        "/api/v1/auth/refresh",
        Some(&u.access_token),
        json!({"refresh_token": u.refresh_token}),
    )
    .await
    .assert_problem(401);
    app.get("/api/v1/auth/me", &u.access_token)
        .await
        .assert_problem(401);
}

#[tokio::test]
async fn logout_with_someone_elses_refresh_token_is_refused() {
    let app = spawn_app().await;
    let a = app.new_user().await;
    let b = app.new_user().await;
    app.post(
        "/api/v1/auth/logout",
        Some(&a.access_token),
        json!({"refresh_token": b.refresh_token}),
    )
    .await
    .assert_problem(401);
    assert_eq!(
        app.get("/api/v1/auth/me", &b.access_token).await.status,
        200
    );
}

#[tokio::test]
async fn changing_the_password_revokes_every_other_session() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let other = app.login_user(&u.email, PASSWORD).await;
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me/password",
            Some(&u.access_token),
            Some(json!({"current_password": PASSWORD, "new_password": "a-brand-new-password"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        app.get("/api/v1/auth/me", &u.access_token).await.status,
        200
    );
    app.get("/api/v1/auth/me", &other.access_token)
        .await
        .assert_problem(401);
    app.login(&u.email, PASSWORD).await.assert_problem(401);
    assert_eq!(
        app.login(&u.email, "a-brand-new-password").await.status,
        200
    );
}

#[tokio::test]
async fn changing_the_password_checks_the_current_one_and_the_new_length() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me/password",
            Some(&u.access_token),
            Some(json!({"current_password": "wrong-password", "new_password": "another-password"})),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["current_password"]);
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me/password",
            Some(&u.access_token),
            Some(json!({"current_password": PASSWORD, "new_password": "short"})),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["new_password"]);
}

#[tokio::test]
async fn the_first_admin_is_created_once_from_settings() {
    let app = spawn_app_with(&[
        ("SCANFLEET_ADMIN_EMAIL", "root@example.com"),
        ("SCANFLEET_ADMIN_PASSWORD", "admin-password-1"),
    ])
    .await;
    let r = app.login("root@example.com", "admin-password-1").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["role"], "admin");
    assert_eq!(r.body["user"]["tier_slug"], "admin");
    // A later start with another password does not overwrite the account.
    let created =
        scanfleet_api::app::create_admin(&app.state, "root@example.com", "different-pass-2")
            .await
            .unwrap();
    assert!(!created);
    assert_eq!(
        app.login("root@example.com", "admin-password-1")
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn admins_list_and_change_users_and_others_get_403() {
    let app = spawn_app().await;
    let admin = app.new_user().await;
    app.make_admin(admin.id).await;
    let u = app.new_user().await;

    app.get("/api/v1/admin/users", &u.access_token)
        .await
        .assert_problem(403);
    let r = app
        .get("/api/v1/admin/users?limit=1", &admin.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("2"));
    assert_eq!(r.body.as_array().unwrap().len(), 1);

    let path = format!("/api/v1/admin/users/{}", u.id);
    let r = app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"tier_slug": "monthly"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tier_slug"], "monthly");
    assert_eq!(
        app.get("/api/v1/auth/me", &u.access_token).await.body["tier_slug"],
        "monthly"
    );

    let r = app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"tier_slug": "platinum"})),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["tier_slug"]);
    let r = app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"role": "root"})),
        )
        .await;
    assert_eq!(r.error_fields(), vec!["role"]);

    // Disabling ends the user's sessions and blocks login.
    let r = app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    app.get("/api/v1/auth/me", &u.access_token)
        .await
        .assert_problem(401);
    app.login(&u.email, PASSWORD).await.assert_problem(403);

    let missing = format!("/api/v1/admin/users/{}", Uuid::now_v7());
    app.call(
        Method::PATCH,
        &missing,
        Some(&admin.access_token),
        Some(json!({"disabled": true})),
    )
    .await
    .assert_problem(404);
}

/// Waits until the app's auth cache listens for changes (it starts with the
/// server, on its own connection).
async fn until_the_auth_cache_listens(app: &scanfleet_tests::TestApp) {
    for _ in 0..200 {
        if app.state.auth_cache.is_live() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the auth cache never started listening");
}

#[tokio::test]
async fn a_known_session_is_served_from_the_cache_without_reading_the_database() {
    let app = spawn_app().await;
    until_the_auth_cache_listens(&app).await;
    let u = app.new_user().await;
    app.get("/api/v1/auth/me", &u.access_token).await;
    // A change the database does not announce (triggers off for this
    // connection) is not seen: the identity came from the cache.
    let db = app.state.db.get().await.unwrap();
    db.batch_execute(&format!(
        "SET session_replication_role = replica;
         UPDATE sessions SET revoked_at = now() WHERE user_id = '{}';
         SET session_replication_role = origin;",
        u.id
    ))
    .await
    .unwrap();
    let r = app.get("/api/v1/auth/me", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn a_change_made_in_the_database_by_someone_else_reaches_the_cache_at_once() {
    let app = spawn_app().await;
    until_the_auth_cache_listens(&app).await;
    let u = app.new_user().await;
    let r = app.get("/api/v1/auth/me", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // As another api process (or an operator with psql) would: the trigger
    // announces it and the listener drops the cached identity.
    let db = app.state.db.get().await.unwrap();
    db.execute("UPDATE users SET disabled = true WHERE id = $1", &[&u.id])
        .await
        .unwrap();
    let mut status = 0;
    for _ in 0..100 {
        status = app
            .get("/api/v1/auth/me", &u.access_token)
            .await
            .status
            .as_u16();
        if status == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        status, 401,
        "the disabled account was still served after 2 s"
    );
}

/// `Authorization` with the given value only.
async fn with_authorization(
    app: &scanfleet_tests::TestApp,
    path: &str,
    value: &str,
) -> scanfleet_tests::Reply {
    let resp = app
        .client
        .get(app.url(path))
        .header("authorization", value)
        .send()
        .await
        .unwrap();
    scanfleet_tests::TestApp::read(resp).await
}

/// Issue 37, item 4: an `Authorization` header without the `Bearer`
/// scheme is told so (a key put there is pointed at `X-API-Key`), without
/// echoing the credential; a bad or expired token's 401 says
/// `invalid_token` in `WWW-Authenticate`, missing credentials do not.
#[tokio::test]
async fn authorization_without_bearer_says_so_and_a_bad_token_is_invalid_token() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    for path in ["/api/v1/auth/me", "/api/v1/targets"] {
        let r = with_authorization(&app, path, &u.access_token).await;
        let problem = r.assert_problem(401);
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("no `Bearer` scheme"), "{path}: {detail}");
        assert!(!r.text.contains(&u.access_token), "{}", r.text);
        let r = with_authorization(&app, path, &format!("Token {}", u.access_token)).await;
        let detail = r.assert_problem(401)["detail"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            detail.contains("scheme `Token` is not accepted"),
            "{detail}"
        );
        let r = with_authorization(&app, path, "sfk_0123456789abcdef").await;
        let detail = r.assert_problem(401)["detail"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(detail.contains("`X-API-Key`"), "{detail}");
        assert!(!r.text.contains("sfk_0123456789abcdef"), "{}", r.text);
    }
    let r = with_authorization(&app, "/api/v1/auth/me", "Bearer not-a-token").await;
    r.assert_problem(401);
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="scanfleet", error="invalid_token""#)
    );
    let keys = JwtKeys::new(JWT_SECRET.as_bytes(), 900);
    let real = keys.verify(&u.access_token).unwrap();
    let now = Utc::now().timestamp();
    let expired = keys.sign(&Claims {
        iat: now - 1000,
        exp: now - 1,
        ..real
    });
    let r = with_authorization(&app, "/api/v1/targets", &format!("Bearer {expired}")).await;
    assert_eq!(
        r.assert_problem(401)["detail"],
        "the access token has expired"
    );
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="scanfleet", error="invalid_token""#)
    );
    let r = app.call(Method::GET, "/api/v1/targets", None, None).await;
    r.assert_problem(401);
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="scanfleet""#)
    );
}

/// Issue 37, item 5: `PUT /auth/me` takes the JSON body clients try
/// first; with no name anywhere the 400 says it is missing.
#[tokio::test]
async fn put_me_takes_a_json_body_and_says_when_the_name_is_missing() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me",
            Some(&u.access_token),
            Some(json!({"full_name": "Ada Lovelace"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["full_name"], "Ada Lovelace");
    let me = app.get("/api/v1/auth/me", &u.access_token).await;
    assert_eq!(me.body["full_name"], "Ada Lovelace");
    // The body wins over the query parameter.
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me?full_name=Query",
            Some(&u.access_token),
            Some(json!({"full_name": "Body"})),
        )
        .await;
    assert_eq!(r.body["full_name"], "Body", "{}", r.text);
    // A bad query value is refused even beside a good body.
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me?full_name=%C2%84",
            Some(&u.access_token),
            Some(json!({"full_name": "Body"})),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["full_name"]);
    let r = app
        .call(Method::PUT, "/api/v1/auth/me", Some(&u.access_token), None)
        .await;
    let problem = r.assert_problem(400);
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.starts_with("`full_name` is missing"), "{detail}");
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me",
            Some(&u.access_token),
            Some(json!({"name": "Ada"})),
        )
        .await;
    r.assert_problem(400);
    assert_eq!(r.error_fields(), vec!["full_name"], "{}", r.text);
    let r = app
        .call(
            Method::PUT,
            "/api/v1/auth/me",
            Some(&u.access_token),
            Some(json!({"full_name": "x".repeat(201)})),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["full_name"]);
}
