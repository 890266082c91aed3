//! What the core's operations fail with, in general kinds a caller can act
//! on. The kinds know no feature and no protocol: the api maps each to an
//! HTTP status and problem `code` in one table, and a feature (payments,
//! reports) maps its own errors onto these kinds.

/// A boxed cause, kept for the log.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request could not be read as it was sent.
    #[error("{detail}")]
    BadRequest { code: &'static str, detail: String },
    /// Missing, invalid or expired credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// A Bearer access token that was sent and is no good (malformed,
    /// tampered, expired, or its session ended): the caller needs a new
    /// one, which the api says in `WWW-Authenticate` (RFC 6750,
    /// `invalid_token`).
    #[error("{0}")]
    InvalidToken(String),
    /// Authenticated, but not allowed (key permission, role, tier feature).
    #[error("{detail}")]
    Forbidden { code: &'static str, detail: String },
    /// A tier limit or feature; carries the upgrade prompt.
    #[error("{detail}")]
    UpgradeRequired {
        code: &'static str,
        detail: String,
        /// Boxed: the prompt is the largest payload of any kind, and every
        /// `Result` of the core carries the size of its largest error.
        upgrade: Box<Upgrade>,
    },
    /// A scan of a target whose ownership is not proven (when proof is
    /// required); carries how to prove it.
    #[error("{detail}")]
    TargetUnverified {
        detail: String,
        help: Box<VerificationHelp>,
    },
    /// An ownership check found no proof; `errors` says, per method
    /// (`dns_txt`, `http_file`), what it found instead.
    #[error("{detail}")]
    VerificationFailed {
        detail: String,
        errors: Vec<FieldError>,
        help: Box<VerificationHelp>,
    },
    /// Missing, or owned by someone else: the two are never told apart.
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{detail}")]
    Conflict { code: &'static str, detail: String },
    /// Well-formed but invalid values, each naming its field.
    #[error("invalid input: {}", .0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "))]
    Validation(Vec<FieldError>),
    #[error("rate limit exceeded, retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// Too many wrong passwords for one account, from wherever they came.
    #[error("too many failed attempts for this account, retry in {retry_after_secs} s")]
    AccountThrottled { retry_after_secs: u64 },
    /// Something we depend on cannot be used now: Postgres or Redis
    /// unreachable, an outside provider down or not configured. `detail` is
    /// what the caller may read; the cause is for the log.
    #[error("{detail}")]
    Unavailable {
        code: &'static str,
        detail: String,
        #[source]
        source: Option<Cause>,
    },
    /// An outside party answered, wrongly (refused, garbled).
    #[error("{detail}")]
    BadGateway {
        code: &'static str,
        detail: String,
        #[source]
        source: Option<Cause>,
    },
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field at fault, as named in the request (`email`, `domains[3]`).
    pub field: String,
    pub message: String,
}

/// Where to go to lift a tier limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Upgrade {
    /// The tier that lifts the limit.
    pub tier_slug: String,
    /// Where the client upgrades: the checkout (`POST` with the tier).
    pub url: String,
    /// The tiers and what they allow.
    pub tiers_url: String,
    pub message: String,
}

/// How to prove ownership of a target: sent with a refused scan of an
/// unverified target and with a failed verification.
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationHelp {
    /// The value to publish: `scanfleet-verification=<token>`.
    pub value: String,
    /// Names on which a TXT record with the value is accepted.
    pub dns_txt_names: Vec<String>,
    /// Where a file with the value as one of its lines is accepted (HTTP
    /// is tried after HTTPS).
    pub file_url: String,
    /// POST here once the value is published.
    pub verify_url: String,
    /// The above, for a human.
    pub instructions: String,
}

/// What the caller of an unavailable service is told.
const UNAVAILABLE: &str = "a backing service is unavailable";

impl Error {
    pub fn bad_request(detail: impl Into<String>) -> Error {
        Error::BadRequest {
            code: "bad_request",
            detail: detail.into(),
        }
    }

    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Error {
        Error::Conflict {
            code,
            detail: detail.into(),
        }
    }

    pub fn forbidden(code: &'static str, detail: impl Into<String>) -> Error {
        Error::Forbidden {
            code,
            detail: detail.into(),
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Error {
        Error::Validation(vec![FieldError {
            field: field.to_string(),
            message: message.into(),
        }])
    }

    /// Postgres, Redis or another backing service failed with `cause`.
    pub fn unavailable(cause: impl Into<Cause>) -> Error {
        Error::Unavailable {
            code: "unavailable",
            detail: UNAVAILABLE.to_string(),
            source: Some(cause.into()),
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Unexpected(anyhow::Error::new(e).context("postgres query failed"))
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Error::unavailable(e)
    }
}

impl From<fred::error::Error> for Error {
    fn from(e: fred::error::Error) -> Self {
        Error::unavailable(e)
    }
}

impl From<scanfleet_bus::BusError> for Error {
    fn from(e: scanfleet_bus::BusError) -> Self {
        match e {
            scanfleet_bus::BusError::Redis(e) => e.into(),
            bad @ (scanfleet_bus::BusError::BadJob { .. }
            | scanfleet_bus::BusError::Encode(_)
            | scanfleet_bus::BusError::Claiming { .. }) => {
                Error::Unexpected(anyhow::Error::new(bad))
            }
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
