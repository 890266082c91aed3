//! Building and running one api process: connect, migrate, seed, bind, serve
//! until told to stop. Tests boot the same [`Application`] on port 0.

use std::future::Future;
use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;
use std::time::Duration;

use poem::endpoint::make_sync;
use poem::listener::{Acceptor, TcpAcceptor};
use poem::{get, Endpoint, EndpointExt, IntoResponse, Response, Route, Server};
use scanfleet_common::settings::Mode;
use scanfleet_common::Settings;
use scanfleet_core::store::fingerprint_search;
use scanfleet_core::{Core, Links};

use crate::auth::cache::AuthCache;
use crate::auth::password;
use crate::auth::tokens::{random_token, JwtKeys};
use crate::error::Error;
use crate::guard::problem_guard;
use crate::hub::Hub;
use crate::payments::Payments;
use crate::routes::{self, health};
use crate::state::AppState;
use crate::webhooks::guard::Guard;
use scanfleet_core::ingest::Ingester;
use scanfleet_core::startup;
use scanfleet_core::store::users;
use tokio_util::sync::CancellationToken;

pub struct Application {
    listener: StdTcpListener,
    port: u16,
    state: AppState,
}

impl Application {
    /// Binds the listen address (port 0 picks one), connects to Postgres
    /// and Redis, applies migrations and creates the first admin when
    /// configured. The address comes first, so a port in use is reported
    /// before anything is changed in the database.
    pub async fn build(settings: Settings) -> anyhow::Result<Application> {
        let settings = settings.for_api()?;
        let bind = settings.api.bind;
        // Installed before anything is counted.
        crate::metrics::handle();
        let listener = StdTcpListener::bind(bind).map_err(|cause| startup::StartupError::Bind {
            addr: bind.to_string(),
            cause,
        })?;
        let state = AppState::connect(settings).await?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        seed_admin(&state).await?;
        Ok(Application {
            listener,
            port,
            state,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves, ingests scan events and relays them to WebSocket listeners
    /// until `shutdown` resolves, then drains in-flight requests for up to
    /// 10 seconds.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let acceptor = TcpAcceptor::from_std(self.listener)?;
        tracing::info!(addr = ?acceptor.local_addr(), "api listening");
        // Cancelled when the server has stopped: ends the ingester and hub.
        let background = CancellationToken::new();
        let ingester = match ingester(&self.state).await {
            Ok(i) => i,
            Err(e) => return Err(std::io::Error::other(format!("{e:#}"))),
        };
        let ingesting = tokio::spawn(ingester.run(background.clone()));
        let relaying = tokio::spawn(self.state.hub.clone().run(background.clone()));
        let listening = tokio::spawn(crate::auth::cache::listen(
            self.state.auth_cache.clone(),
            self.state.settings.database_url.expose().to_string(),
            background.clone(),
        ));
        let indexing = tokio::spawn(fingerprint_search::keep_indexed(
            self.state.db.clone(),
            background.clone(),
        ));
        let webhooks = crate::webhooks::spawn(&self.state, background.clone());
        let app = endpoint(self.state);
        let served = Server::new_with_acceptor(acceptor)
            .run_with_graceful_shutdown(app, shutdown, Some(Duration::from_secs(10)))
            .await;
        background.cancel();
        let _ = ingesting.await;
        let _ = relaying.await;
        let _ = listening.await;
        let _ = indexing.await;
        for task in webhooks {
            let _ = task.await;
        }
        served
    }
}

impl AppState {
    /// Connects the core (checking Postgres and Redis, applying migrations)
    /// and builds the api's own state on it.
    pub async fn connect(settings: Settings) -> anyhow::Result<AppState> {
        let api_url = format!("{}/api/v1", settings.api.public_url);
        let links = Links { api_url };
        let core = Core::connect(&settings, links, "api").await?;
        let hub = Arc::new(Hub::new(
            core.redis_client(&settings, "hub").await?,
            core.redis.clone(),
            core.keys.clone(),
        ));
        let secret = match &settings.jwt_secret {
            Some(s) => s.expose().to_string(),
            None => {
                // Production refuses to start without a secret (see Settings);
                // in dev a random one means tokens do not survive a restart.
                debug_assert_eq!(settings.mode, Mode::Dev);
                tracing::warn!(
                    "SCANFLEET_JWT_SECRET is not set: using a random signing secret (dev mode)"
                );
                random_token("")
            }
        };
        let jwt = JwtKeys::new(secret.as_bytes(), settings.api.access_token_ttl_secs);
        let dummy_password_hash: Arc<str> = password::hash(random_token("")).await?.into();
        Ok(AppState {
            core,
            hub,
            jwt,
            dummy_password_hash,
            auth_cache: Arc::new(AuthCache::default()),
            detail_cache: Arc::default(),
            payments: Arc::new(Payments::from_settings(&settings)),
            webhook_guard: Arc::new(Guard::from_settings(&settings)),
            settings: Arc::new(settings),
        })
    }
}

/// The process's ingester, with its own blocking connection and a consumer
/// name unique to the process.
async fn ingester(state: &AppState) -> anyhow::Result<Ingester> {
    Ok(Ingester {
        db: state.db.clone(),
        index: scanfleet_bus::events::IngestIndex::new(
            state.redis_client(&state.settings, "ingester").await?,
            &state.keys,
            format!("api-{}", uuid::Uuid::new_v4().simple()),
        ),
        redis: state.redis.clone(),
        keys: state.keys.clone(),
    })
}

/// The whole HTTP surface of one api process.
pub(crate) fn endpoint(state: AppState) -> impl Endpoint {
    let api = routes::openapi_service();
    let allow = Arc::new(crate::allow::AllowTable::from_spec(
        &serde_json::from_str(&api.spec()).unwrap_or_default(),
    ));
    let spec = routes::openapi_json();
    crate::parse_errors::know_contract(&spec);
    let docs = api.swagger_ui();
    // The versioned API: problem+json errors, `Allow` on 405s.
    let api = Route::new()
        .nest("/", api)
        .at(
            "/api/v1/openapi.json",
            get(make_sync(move |_| {
                Response::builder()
                    .content_type("application/json; charset=utf-8")
                    .body(spec.clone())
            })),
        )
        .nest("/api/v1/docs", docs)
        .at("/api/v1/ws/scans/:scan_id", get(crate::ws::scan_websocket))
        .at("/metrics", get(crate::metrics::metrics_endpoint))
        .at("/healthz", get(health::healthz))
        .at("/readyz", get(health::readyz))
        .with(crate::body_limit::BodyLimit::new(
            state.settings.api.max_body_bytes,
        ))
        .around(problem_guard)
        .around(move |ep, req| crate::allow::allow_header(ep, allow.clone(), req));
    // Everything else is the web console, unknown paths included (its 404
    // page has the navigation).
    let console = crate::console::endpoint().with(crate::body_limit::BodyLimit::new(
        state.settings.api.max_body_bytes,
    ));
    Split { api, console }
        .data(state.clone())
        .with(crate::ratelimit::RateLimit::new(state))
        .around(crate::metrics::count_requests)
        .with(crate::access_log::AccessLog)
}

/// Sends the API's paths (`/api/...`, the service endpoints) to the API
/// and the rest to the console.
struct Split<A, C> {
    api: A,
    console: C,
}

impl<A: Endpoint, C: Endpoint> Endpoint for Split<A, C> {
    type Output = Response;

    async fn call(&self, req: poem::Request) -> poem::Result<Response> {
        let path = req.uri().path();
        let api = path == "/api"
            || path.starts_with("/api/")
            || matches!(path, "/metrics" | "/healthz" | "/readyz");
        if api {
            self.api.call(req).await.map(IntoResponse::into_response)
        } else {
            self.console
                .call(req)
                .await
                .map(IntoResponse::into_response)
        }
    }
}

/// Creates the first admin from `SCANFLEET_ADMIN_EMAIL`/`_PASSWORD` once; an
/// existing account with that email is never overwritten.
async fn seed_admin(state: &AppState) -> anyhow::Result<()> {
    let (Some(email), Some(pass)) = (&state.settings.admin_email, &state.settings.admin_password)
    else {
        return Ok(());
    };
    match create_admin(state, email, pass.expose()).await {
        Ok(true) => tracing::info!(%email, "created the first admin"),
        Ok(false) => tracing::debug!(%email, "admin account already exists"),
        Err(e) => return Err(anyhow::anyhow!("creating the admin {email}: {e}")),
    }
    Ok(())
}

/// Creates an admin account unless the email is taken; true when created.
pub async fn create_admin(state: &AppState, email: &str, pass: &str) -> Result<bool, Error> {
    let email = crate::validate::normalize_email(email)?;
    password::validate("password", pass)?;
    let db = state.db.get().await?;
    if users::find_by_email(&**db, &email).await?.is_some() {
        return Ok(false);
    }
    let hash = password::hash(pass.to_string()).await?;
    match users::create(
        &**db,
        users::NewUser {
            email: &email,
            password_hash: &hash,
            full_name: "Administrator",
            role: "admin",
            tier_slug: "admin",
        },
    )
    .await
    {
        Ok(_) => Ok(true),
        // Another process created it between the check and the insert.
        Err(Error::Conflict { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
