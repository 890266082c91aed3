//! End-to-end test harness: boots the real api in-process on port 0 against
//! real Postgres and Redis, with a fresh database (created from the running
//! server) and a unique Redis key prefix per test, and typed helpers for the
//! calls tests make most.
//!
//! Postgres and Redis come from `DATABASE_URL` / `REDIS_URL` (the server of
//! `DATABASE_URL` is used to create the per-test databases), defaulting to the
//! local ports; `make test` makes sure they are running.
//!
//! [`stripe::FakeStripe`] is a local server speaking the payment provider's
//! protocol, for the payment tests; [`dns::DnsLab`] a local DNS server for
//! the ownership-proof tests; [`oob::OobServer`] our out-of-band server
//! started from its binary.
//!
//! # Imports
//! The top of the tree: it may import every library crate the tests drive
//! (`scanfleet-api`, `scanfleet-scheduler`, `scanfleet-core`,
//! `scanfleet-bus`, `scanfleet-http`, `scanfleet-common`) and starts the
//! `scanfleet-scanner` and `scanfleet-scheduler` binaries as real processes
//! for the pipeline tests. No crate may import it: it is a dev-side crate,
//! never a dependency of a binary.

pub mod stripe;

pub mod dns;
pub mod fleet;
pub mod history;
pub mod http1;
pub mod lab;
pub mod oob;
pub mod pgcount;
pub mod receiver;
pub mod redis;
pub mod site;
pub mod stacks;

use std::collections::HashMap;

use reqwest::{Method, StatusCode};
use scanfleet_api::state::AppState;
use scanfleet_api::Application;
use scanfleet_common::Settings;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use uuid::Uuid;

/// The signing secret of test apps, so tests can forge tokens on purpose.
pub const JWT_SECRET: &str = "test-signing-secret-test-signing-secret";
pub const PASSWORD: &str = "correct-horse-battery";

pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub client: reqwest::Client,
    pub state: AppState,
    pub db_name: String,
    pub redis_prefix: String,
    admin_url: String,
    /// Dropping it (with the app) stops the server.
    _shutdown: oneshot::Sender<()>,
}

/// A response with its body read.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an RFC 9457 problem with this status, returning its body.
    pub fn assert_problem(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "body: {}",
            self.text
        );
        assert_eq!(self.body["status"], status);
        assert!(self.body["title"].is_string() && self.body["code"].is_string());
        assert!(self.body["detail"].is_string() && self.body["type"].is_string());
        &self.body
    }

    /// The `field` of each entry of a 422's `errors`.
    pub fn error_fields(&self) -> Vec<String> {
        self.body["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["field"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A logged-in user.
#[derive(Debug, Clone)]
pub struct TestUser {
    pub id: Uuid,
    pub email: String,
    pub access_token: String,
    pub refresh_token: String,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// A connection string to database `db` on the server of `DATABASE_URL`.
pub fn database_url(db: &str) -> String {
    let base = env_or(
        "DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/postgres",
    );
    // Replace the path (database name), keep any query string.
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h.to_string(), format!("?{q}")),
        None => (base.clone(), String::new()),
    };
    let scheme_end = head.find("://").map(|i| i + 3).unwrap_or(0);
    let host_part = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => &head[..],
    };
    format!("{host_part}/{db}{query}")
}

/// Creates an empty database of its own on the server of `DATABASE_URL`
/// (for tests that apply migrations themselves) and returns its name; drop
/// it with [`drop_database`].
pub async fn create_database() -> String {
    let name = format!("scanfleet_test_{}", Uuid::new_v4().simple());
    admin_client(&database_url("postgres"))
        .await
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .expect("creating a test database");
    name
}

async fn admin_client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot reach Postgres for tests ({url}): {e}"));
    tokio::spawn(conn);
    client
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// Boots an app with extra settings (environment-variable names and values).
pub async fn spawn_app_with(extra: &[(&str, &str)]) -> TestApp {
    let id = Uuid::new_v4().simple().to_string();
    let db_name = format!("scanfleet_test_{id}");
    let redis_prefix = format!("test-{id}");
    let admin_url = database_url("postgres");
    admin_client(&admin_url)
        .await
        .batch_execute(&format!("CREATE DATABASE \"{db_name}\""))
        .await
        .expect("creating the test database");

    let mut vars: HashMap<String, String> = HashMap::new();
    vars.insert("DATABASE_URL".into(), database_url(&db_name));
    vars.insert(
        "REDIS_URL".into(),
        env_or("REDIS_URL", "redis://127.0.0.1:6379"),
    );
    vars.insert("SCANFLEET_REDIS_PREFIX".into(), redis_prefix.clone());
    vars.insert("SCANFLEET_API__BIND".into(), "127.0.0.1:0".into());
    vars.insert("SCANFLEET_JWT_SECRET".into(), JWT_SECRET.into());
    // Most tests make more requests than the demo tier's 10 per minute; the
    // rate-limit tests turn limiting back on.
    vars.insert("SCANFLEET_RATE__ENABLED".into(), "false".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    let settings = Settings::from_vars(&vars).expect("test settings");
    let app = Application::build(settings)
        .await
        .expect("building the app");
    let port = app.port();
    let state = app.state().clone();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async move {
        let _ = rx.await;
    }));
    TestApp {
        base: format!("http://127.0.0.1:{port}"),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client"),
        state,
        db_name,
        redis_prefix,
        admin_url,
        _shutdown: tx,
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Best effort: drop the per-test database so runs do not pile them up.
        drop_database(&self.admin_url, &self.db_name);
    }
}

/// Drops database `db` on the server of `admin_url`, from a thread of its
/// own (drop handlers may run inside or outside a runtime).
pub fn drop_database(admin_url: &str, db: &str) {
    let url = admin_url.to_string();
    let db = db.to_string();
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        if let Ok(rt) = rt {
            rt.block_on(async {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    let _ = client
                        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
                        .await;
                }
            });
        }
    })
    .join();
}

impl TestApp {
    /// A scheduler on the app's core and settings (clock and passes are the
    /// test's to drive).
    pub fn scheduler(&self) -> scanfleet_scheduler::Scheduler {
        scanfleet_scheduler::Scheduler::new(
            self.state.core.clone(),
            self.state.settings.scheduler.clone(),
            self.state.settings.database_url.clone(),
        )
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends a request; `token` as Bearer, `body` as JSON.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut req = self.client.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Self::read(req.send().await.expect("request failed")).await
    }

    pub async fn read(resp: reqwest::Response) -> Reply {
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> Reply {
        self.call(Method::POST, path, token, Some(body)).await
    }

    pub async fn register(&self, email: &str, password: &str) -> Reply {
        self.post(
            "/api/v1/auth/register",
            None,
            json!({"email": email, "password": password, "full_name": "Test User"}),
        )
        .await
    }

    pub async fn login(&self, email: &str, password: &str) -> Reply {
        self.post(
            "/api/v1/auth/login",
            None,
            json!({"email": email, "password": password}),
        )
        .await
    }

    /// Registers a fresh user with [`PASSWORD`] and logs in.
    pub async fn new_user(&self) -> TestUser {
        let email = format!("u{}@example.com", Uuid::new_v4().simple());
        let r = self.register(&email, PASSWORD).await;
        assert_eq!(r.status, 201, "{}", r.text);
        self.login_user(&email, PASSWORD).await
    }

    pub async fn login_user(&self, email: &str, password: &str) -> TestUser {
        let r = self.login(email, password).await;
        assert_eq!(r.status, 200, "{}", r.text);
        TestUser {
            id: r.body["user"]["id"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("user id"),
            email: email.to_string(),
            access_token: r.body["access_token"].as_str().expect("token").to_string(),
            refresh_token: r.body["refresh_token"]
                .as_str()
                .expect("refresh")
                .to_string(),
        }
    }

    /// Adds a target for `user` through the API and returns its id.
    pub async fn new_target(&self, user: &TestUser, domain: &str) -> Uuid {
        self.create_target(user, domain).await["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("target id")
    }

    /// Adds a target for `user` through the API and returns it as shown.
    pub async fn create_target(&self, user: &TestUser, domain: &str) -> Value {
        let r = self
            .post(
                "/api/v1/targets",
                Some(&user.access_token),
                json!({ "domain": domain }),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.body
    }

    /// Sets a user's tier (and role) directly, as an administrator would.
    pub async fn set_tier(&self, user_id: Uuid, tier: &str) {
        let db = self.state.db.get().await.expect("db");
        db.execute(
            "UPDATE users SET tier_slug = $2 WHERE id = $1",
            &[&user_id, &tier],
        )
        .await
        .expect("set tier");
        // The api's own admin operations record a change in-process at once
        // (other processes learn it from the database's notification); so
        // does this stand-in for them.
        scanfleet_core::store::changes::note_change(user_id);
    }

    pub async fn make_admin(&self, user_id: Uuid) {
        let db = self.state.db.get().await.expect("db");
        db.execute(
            "UPDATE users SET role = 'admin', tier_slug = 'admin' WHERE id = $1",
            &[&user_id],
        )
        .await
        .expect("make admin");
        scanfleet_core::store::changes::note_change(user_id);
    }
}

/// The fields every progress and status message of the WebSocket carries.
pub const PROGRESS_MESSAGE_FIELDS: [&str; 8] = [
    "type",
    "scan_id",
    "status",
    "stage",
    "progress",
    "current_tool",
    "findings_count",
    "at",
];
