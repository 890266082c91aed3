//! The async client: one [`Session`] is one registration with an
//! interactsh-compatible server (ours or projectdiscovery's).
//!
//! ```no_run
//! # async fn demo() -> Result<(), scanfleet_interactsh::ClientError> {
//! use scanfleet_interactsh::Session;
//! let session = Session::register("https://oob.example.com", None).await?;
//! let host = session.payload_host(); // <20-char id><13-char nonce>.oob.example.com
//! // ... send requests that make the target contact `host` ...
//! for interaction in session.poll().await? {
//!     println!("{} from {}", interaction.protocol, interaction.remote_address);
//! }
//! session.deregister().await?;
//! # Ok(()) }
//! ```

use std::sync::Mutex;
use std::time::Duration;

use reqwest::{StatusCode, Url};

use crate::crypto::{self, AesKey, CryptoError, KeyPair};
use crate::id::{new_correlation_id, new_nonce};
use crate::wire::{
    DeregisterRequest, Interaction, PollResponse, RegisterRequest, StatusBody, EVICTED_MESSAGE,
};

/// The timeout of each API call when the caller brings no client.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a session call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the server URL {url:?} is not a valid http(s) URL with a host")]
    ServerUrl { url: String },
    #[error("building the HTTP client")]
    HttpClient(#[source] reqwest::Error),
    #[error("generating the session's keys")]
    Keys(#[source] CryptoError),
    #[error("the key generation task failed")]
    KeyTask(#[source] tokio::task::JoinError),
    #[error("{action} request to the interactsh server failed")]
    Request {
        action: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("the interactsh server refused the token (401)")]
    Unauthorized,
    /// The server no longer knows the correlation id (evicted, restarted
    /// without shared storage, or never registered): register anew.
    #[error("the interactsh server no longer knows this session: {body}")]
    Evicted { body: String },
    #[error("{action} answered {status}: {body}")]
    Status {
        action: &'static str,
        status: StatusCode,
        body: String,
    },
    #[error("the poll answer is not the expected JSON")]
    PollBody(#[source] reqwest::Error),
    #[error("unwrapping the poll answer's AES key")]
    AesKey(#[source] CryptoError),
}

/// Why one data item of a poll answer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    #[error("decrypting the item")]
    Decrypt(#[source] CryptoError),
    #[error("the item is not an interaction")]
    Json(#[source] serde_json::Error),
}

/// How to register: the server, its token, and the domain payload hosts
/// are built on (the server URL's host when not given).
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    pub server_url: String,
    pub token: Option<String>,
    pub payload_domain: Option<String>,
    /// A client to share with the caller; a new one with a 10 s timeout
    /// when `None`.
    pub http: Option<reqwest::Client>,
}

/// One registration. Share it behind an `Arc`; every method takes `&self`.
pub struct Session {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    payload_domain: String,
    correlation_id: String,
    secret_key: String,
    keys: KeyPair,
    /// The last `aes_key` seen and its unwrapped value: the server keeps one
    /// key per registration, so the RSA work is done once, not per poll.
    aes_key: Mutex<Option<(String, AesKey)>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("server", &self.base)
            .field("correlation_id", &self.correlation_id)
            .field("payload_domain", &self.payload_domain)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Registers a new session with `server_url` (for example
    /// `https://oob.example.com`), sending `token` as the raw
    /// `Authorization` header when the server needs one.
    pub async fn register(server_url: &str, token: Option<&str>) -> Result<Session, ClientError> {
        Session::register_with(SessionConfig {
            server_url: server_url.to_string(),
            token: token.map(str::to_string),
            ..SessionConfig::default()
        })
        .await
    }

    /// [`Session::register`] with every option.
    pub async fn register_with(config: SessionConfig) -> Result<Session, ClientError> {
        let url_error = || ClientError::ServerUrl {
            url: config.server_url.clone(),
        };
        let url = Url::parse(&config.server_url).map_err(|_| url_error())?;
        let host = url
            .host_str()
            .filter(|_| matches!(url.scheme(), "http" | "https"));
        let host = host.ok_or_else(url_error)?.to_string();
        let http = match config.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(DEFAULT_TIMEOUT)
                .build()
                .map_err(ClientError::HttpClient)?,
        };
        // RSA key generation is CPU work: keep it off the async workers.
        let keys = tokio::task::spawn_blocking(KeyPair::generate)
            .await
            .map_err(ClientError::KeyTask)?
            .map_err(ClientError::Keys)?;
        let session = Session {
            http,
            base: config.server_url.trim_end_matches('/').to_string(),
            token: config.token,
            payload_domain: config.payload_domain.unwrap_or(host),
            correlation_id: new_correlation_id(),
            secret_key: uuid::Uuid::new_v4().to_string(),
            keys,
            aes_key: Mutex::new(None),
        };
        session.send_register().await?;
        Ok(session)
    }

    async fn send_register(&self) -> Result<(), ClientError> {
        let body = RegisterRequest {
            public_key: self.keys.public_key_field().map_err(ClientError::Keys)?,
            secret_key: self.secret_key.clone(),
            correlation_id: self.correlation_id.clone(),
        };
        let request = self
            .http
            .post(format!("{}/register", self.base))
            .json(&body);
        self.send("register", request).await.map(drop)
    }

    /// The 20-character correlation id of this session.
    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    /// The domain payload hosts are built on.
    pub fn payload_domain(&self) -> &str {
        &self.payload_domain
    }

    /// A fresh payload host, `<correlation-id><nonce>.<domain>`: every
    /// call gives a new nonce, so each use can be told apart by its
    /// `unique-id`.
    pub fn payload_host(&self) -> String {
        format!(
            "{}{}.{}",
            self.correlation_id,
            new_nonce(),
            self.payload_domain
        )
    }

    /// Takes the interactions recorded since the last poll (the server
    /// forgets them once answered). Items that cannot be decrypted or
    /// parsed are skipped with a warning rather than failing the poll,
    /// since the server has already let go of the rest.
    pub async fn poll(&self) -> Result<Vec<Interaction>, ClientError> {
        let request = self.http.get(format!("{}/poll", self.base)).query(&[
            ("id", self.correlation_id.as_str()),
            ("secret", self.secret_key.as_str()),
        ]);
        let response = self.send("poll", request).await?;
        let body: PollResponse = response.json().await.map_err(ClientError::PollBody)?;
        let mut interactions = Vec::with_capacity(body.data.len());
        if !body.data.is_empty() {
            let key = self.aes_key(&body.aes_key)?;
            for item in &body.data {
                match decrypt_interaction(&key, item) {
                    Ok(interaction) => interactions.push(interaction),
                    Err(e) => tracing::warn!(error = %e, "skipping an unreadable interaction"),
                }
            }
        }
        for plain in body.extra.iter().chain(&body.tlddata) {
            match serde_json::from_str(plain) {
                Ok(interaction) => interactions.push(interaction),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable plain interaction"),
            }
        }
        Ok(interactions)
    }

    /// The unwrapped key for `wrapped`, from the cache when it is the one
    /// seen before.
    fn aes_key(&self, wrapped: &str) -> Result<AesKey, ClientError> {
        let mut cached = self.aes_key.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, key)) = cached.as_ref() {
            if seen == wrapped {
                return Ok(*key);
            }
        }
        let key = self
            .keys
            .unwrap_aes_key(wrapped)
            .map_err(ClientError::AesKey)?;
        *cached = Some((wrapped.to_string(), key));
        Ok(key)
    }

    /// Ends the registration; the server drops what it still holds. Takes
    /// `&self` so a session shared behind an `Arc` can be ended too; calls
    /// after it fail with [`ClientError::Evicted`].
    pub async fn deregister(&self) -> Result<(), ClientError> {
        let body = DeregisterRequest {
            correlation_id: self.correlation_id.clone(),
            secret_key: self.secret_key.clone(),
        };
        let request = self
            .http
            .post(format!("{}/deregister", self.base))
            .json(&body);
        self.send("deregister", request).await.map(drop)
    }

    /// Sends one API call with the token and maps the protocol's failures.
    async fn send(
        &self,
        action: &'static str,
        mut request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        if let Some(token) = &self.token {
            request = request.header(reqwest::header::AUTHORIZATION, token);
        }
        let response = request
            .send()
            .await
            .map_err(|source| ClientError::Request { action, source })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status == StatusCode::UNAUTHORIZED {
            return Err(ClientError::Unauthorized);
        }
        let body = response.text().await.unwrap_or_default();
        if body.contains(EVICTED_MESSAGE) {
            return Err(ClientError::Evicted { body });
        }
        let body = serde_json::from_str::<StatusBody>(&body)
            .ok()
            .and_then(|b| b.error)
            .unwrap_or(body);
        Err(ClientError::Status {
            action,
            status,
            body,
        })
    }
}

/// Decrypts and parses one `data` item of a poll answer (CTR, with the CFB
/// fallback of [`crypto::decrypt_item`]).
pub fn decrypt_interaction(key: &AesKey, item: &str) -> Result<Interaction, ItemError> {
    let plain = crypto::decrypt_item(key, item).map_err(ItemError::Decrypt)?;
    serde_json::from_slice(&plain).map_err(ItemError::Json)
}
