//! Typed settings, loaded once at start-up: defaults for local use, then an
//! optional file named by `SCANFLEET_CONFIG_FILE` (lines of `NAME=value`), then
//! environment variables, which win. Names follow `SCANFLEET_SECTION__KEY`;
//! `DATABASE_URL` and `REDIS_URL` keep their conventional names.
//!
//! Each process reads its own settings: the api and the scheduler load
//! [`Settings`] (the api adds its own checks with [`Settings::for_api`]), a
//! scanner node loads [`NodeSettings`] (Redis and `SCANFLEET_SCANNER__*`
//! only, so it needs no JWT secret and no database). Nothing else in the
//! code base reads the environment: binaries load their settings and pass
//! them down, and tests build them directly.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;

use crate::Secret;

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    #[error("SCANFLEET_JWT_SECRET is required in production mode")]
    MissingJwtSecret,
    #[error("cannot read the settings file {path}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("the `dev` payment provider is refused in production mode")]
    DevPaymentsInProduction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dev,
    Production,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentProvider {
    Stripe,
    Dev,
}

#[derive(Debug, Clone)]
pub struct ApiSettings {
    pub bind: SocketAddr,
    /// Base URL clients reach the service at; used in upgrade prompts.
    pub public_url: String,
    pub access_token_ttl_secs: i64,
    pub refresh_token_ttl_secs: i64,
    /// Largest request body accepted; a larger one is refused with 413
    /// before it is read into memory.
    pub max_body_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct ScannerSettings {
    /// Scans a node runs at once.
    pub concurrency: usize,
    pub allow_private: bool,
    /// Raw `HOST:PORT:ADDR:PORT` list; the scanner parses it.
    pub connect_to: String,
    /// Raw `name=ip` list; the scanner parses it.
    pub hosts: String,
    pub hosts_only: bool,
    /// DNS server (`ip:port`) asked instead of the system resolver, for
    /// addresses and for the TXT records of ownership proof.
    pub dns_server: Option<SocketAddr>,
    /// Directory of templates replacing the built-in pack, when set.
    pub templates_dir: Option<String>,
    /// The longest an idle node waits on the queue's wake-up list before
    /// it asks the queue anyway (a wake-up lost with Redis's data costs at
    /// most this); a push wakes a waiting node at once.
    pub idle_wait_secs: u64,
    /// How often a node renews the lease of each job it holds; a job's
    /// lease lasts `orphan_after_secs`, after which the other nodes put it
    /// back in the queue.
    pub heartbeat_secs: u64,
    pub orphan_after_secs: u64,
    /// Whole-scan deadlines per engine, enforced by the node itself.
    pub deadline_full_secs: u64,
    pub deadline_quick_secs: u64,
    pub deadline_recon_secs: u64,
    /// One DNS question's timeout, and how many are asked at once.
    pub dns_timeout_ms: u64,
    pub dns_concurrency: usize,
    /// Requests per second per host during service scans (politeness);
    /// 0 turns the ceiling off.
    pub per_host_rps: u32,
    /// On SIGTERM, how long running scans may go on before the node leaves
    /// them to the other nodes and exits.
    pub drain_secs: u64,
    /// Where the node serves its Prometheus metrics; none when unset.
    pub metrics_bind: Option<SocketAddr>,
    /// Interactsh server for out-of-band templates (`scanfleet-oob` or any
    /// interactsh v1.x server); without one they are not run.
    pub interactsh_server: Option<String>,
    /// That server's token, sent as the Authorization header.
    pub interactsh_token: Option<Secret>,
    /// The zone payload hosts are made under, when it is not the server
    /// URL's host (a server reached on loopback or an internal name).
    pub interactsh_domain: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SchedulerSettings {
    /// A `pending` or `running` scan whose node sent nothing for this long
    /// (and that no node took up again) is failed.
    pub stuck_after_secs: u64,
    /// A `queued` scan older than this whose job is not in the queue is
    /// enqueued again once, then failed.
    pub queued_after_secs: u64,
    /// How often the reaper looks.
    pub reap_interval_secs: u64,
}

#[derive(Debug, Clone)]
pub struct RateSettings {
    pub enabled: bool,
    pub anon_rpm: u32,
    /// Failed logins (or password changes) per account in
    /// `account_window_secs` before that account is throttled, whatever
    /// the client address: brute force spread over many IPs stops too.
    pub account_failures: u32,
    pub account_window_secs: u64,
}

/// Ownership proof of targets.
#[derive(Debug, Clone)]
pub struct TargetSettings {
    /// Refuse scans of targets whose ownership is not proven (default: on in
    /// production mode, off in dev mode so local labs scan at once).
    pub require_verification: bool,
    /// How long a proof lasts before it is checked again.
    pub verification_ttl_days: u32,
}

#[derive(Debug, Clone)]
pub struct PaymentSettings {
    pub provider: PaymentProvider,
    pub api_base: String,
    pub secret_key: Option<Secret>,
    pub webhook_secret: Option<Secret>,
    pub price_monthly: Option<String>,
    pub price_yearly: Option<String>,
    /// Seconds a provider call may take before it is abandoned (503).
    pub timeout_secs: u64,
}

/// Outbound webhooks (`SCANFLEET_WEBHOOKS__*`), parsed by
/// `WebhookSettings::read`.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Allow receivers on loopback and private addresses, and plain
    /// `http://` URLs (dev mode only: production always requires https).
    pub allow_private: bool,
    /// Multiplies every retry delay and the 5-day disabling window (tests).
    pub retry_scale: f64,
    /// How long one delivery may take before it counts as failed.
    pub timeout_secs: u64,
    /// Dispatcher tasks in this api process; 0 leaves delivery to others.
    pub dispatchers: usize,
    /// How often an idle dispatcher looks for due deliveries (it is also
    /// woken at once by the outbox's commit notification).
    pub poll_interval_ms: u64,
}

impl WebhookSettings {
    fn read(v: &Vars) -> Result<WebhookSettings, SettingsError> {
        let settings = WebhookSettings {
            allow_private: v.flag("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE", false)?,
            retry_scale: v.parse("SCANFLEET_WEBHOOKS__RETRY_SCALE", "1")?,
            timeout_secs: v.positive("SCANFLEET_WEBHOOKS__TIMEOUT_SECS", "15")?,
            dispatchers: v.parse("SCANFLEET_WEBHOOKS__DISPATCHERS", "1")?,
            poll_interval_ms: v.positive("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS", "1000")?,
        };
        if !(settings.retry_scale.is_finite() && settings.retry_scale > 0.0) {
            return Err(invalid(
                "SCANFLEET_WEBHOOKS__RETRY_SCALE",
                &settings.retry_scale.to_string(),
                "a positive number",
            ));
        }
        Ok(settings)
    }
}

/// Where the deployment's Redis is: every process reads this section.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `REDIS_URL`; with sentinels, only its credentials and database count.
    pub url: Secret,
    /// Sentinels asked for the current master (`REDIS_SENTINELS`, a list of
    /// `host:port`); when set, the clients follow a promoted replica.
    pub sentinels: Vec<(String, u16)>,
    /// The master's name among the sentinels (`REDIS_SENTINEL_MASTER`).
    pub sentinel_master: String,
    /// Seed nodes of a Redis Cluster (`SCANFLEET_REDIS__CLUSTER_NODES`, a
    /// list of `host:port`); when set it wins over the URL's server and the
    /// sentinels, and the URL gives only the credentials.
    pub cluster_nodes: Vec<(String, u16)>,
    /// Prefix of every key (`SCANFLEET_REDIS_PREFIX`); no braces, which
    /// would change the keys' cluster hash tags (`scanfleet_common::keys`).
    pub prefix: String,
}

/// The settings of the api and the scheduler: the service over Postgres
/// and Redis. A scanner node reads [`NodeSettings`] instead.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub database_url: Secret,
    pub redis: RedisSettings,
    /// Signs access tokens; the api requires it in production
    /// ([`Settings::for_api`]), the scheduler never reads it.
    pub jwt_secret: Option<Secret>,
    pub admin_email: Option<String>,
    pub admin_password: Option<Secret>,
    pub api: ApiSettings,
    /// The fleet's network settings, for the api's ownership checks (DNS
    /// server, host overrides, private addresses).
    pub scanner: ScannerSettings,
    pub scheduler: SchedulerSettings,
    pub rate: RateSettings,
    pub targets: TargetSettings,
    pub payments: PaymentSettings,
    pub webhooks: WebhookSettings,
    pub log_format: LogFormat,
}

/// A scanner node's settings: Redis and its own section, nothing of the
/// api's (no database, no JWT secret, no payment keys).
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub mode: Mode,
    pub redis: RedisSettings,
    pub scanner: ScannerSettings,
    pub log_format: LogFormat,
}

/// The merged name -> value map: defaults are applied by each reader.
struct Vars<'a>(&'a HashMap<String, String>);

impl<'a> Vars<'a> {
    /// The environment's map, after `SCANFLEET_CONFIG_FILE` if set.
    fn load() -> Result<HashMap<String, String>, SettingsError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        let mut vars = HashMap::new();
        if let Some(path) = env.get("SCANFLEET_CONFIG_FILE") {
            vars.extend(read_env_file(Path::new(path))?);
        }
        vars.extend(env);
        Ok(vars)
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn parse<T: FromStr>(&self, name: &'static str, default: &str) -> Result<T, SettingsError>
    where
        T::Err: std::fmt::Display,
    {
        let raw = self.get(name).unwrap_or(default);
        raw.parse().map_err(|e: T::Err| SettingsError::Invalid {
            name,
            message: format!("`{raw}`: {e}"),
        })
    }

    /// A number that must be at least 1.
    fn positive<T: FromStr + PartialEq + Default>(
        &self,
        name: &'static str,
        default: &str,
    ) -> Result<T, SettingsError>
    where
        T::Err: std::fmt::Display,
    {
        let value: T = self.parse(name, default)?;
        if value == T::default() {
            return Err(invalid(name, "0", "at least 1"));
        }
        Ok(value)
    }

    /// None when unset; otherwise the parsed value, or an error naming `name`.
    fn optional<T: FromStr>(&self, name: &'static str) -> Result<Option<T>, SettingsError>
    where
        T::Err: std::fmt::Display,
    {
        self.get(name)
            .map(|raw| {
                raw.parse().map_err(|e: T::Err| SettingsError::Invalid {
                    name,
                    message: format!("`{raw}`: {e}"),
                })
            })
            .transpose()
    }

    fn flag(&self, name: &'static str, default: bool) -> Result<bool, SettingsError> {
        match self.get(name) {
            None => Ok(default),
            Some("1" | "true" | "yes" | "on") => Ok(true),
            Some("0" | "false" | "no" | "off") => Ok(false),
            Some(other) => Err(invalid(name, other, "true or false")),
        }
    }

    fn text(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_string()
    }

    fn mode(&self) -> Result<Mode, SettingsError> {
        match self.get("SCANFLEET_MODE").unwrap_or("dev") {
            "dev" | "development" => Ok(Mode::Dev),
            "production" | "prod" => Ok(Mode::Production),
            other => Err(invalid("SCANFLEET_MODE", other, "dev or production")),
        }
    }

    fn log_format(&self) -> Result<LogFormat, SettingsError> {
        match self.get("SCANFLEET_LOG_FORMAT").unwrap_or("text") {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(invalid("SCANFLEET_LOG_FORMAT", other, "text or json")),
        }
    }
}

impl RedisSettings {
    fn read(v: &Vars) -> Result<RedisSettings, SettingsError> {
        Ok(RedisSettings {
            url: Secret::new(v.get("REDIS_URL").unwrap_or("redis://127.0.0.1:6379")),
            sentinels: v
                .get("REDIS_SENTINELS")
                .map(|raw| parse_hosts("REDIS_SENTINELS", raw, 26379))
                .transpose()?
                .unwrap_or_default(),
            sentinel_master: v.text("REDIS_SENTINEL_MASTER", "mymaster"),
            cluster_nodes: v
                .get("SCANFLEET_REDIS__CLUSTER_NODES")
                .map(|raw| parse_hosts("SCANFLEET_REDIS__CLUSTER_NODES", raw, 6379))
                .transpose()?
                .unwrap_or_default(),
            prefix: redis_prefix(v.text("SCANFLEET_REDIS_PREFIX", "scanfleet"))?,
        })
    }
}

impl ApiSettings {
    fn read(v: &Vars) -> Result<ApiSettings, SettingsError> {
        let bind: SocketAddr = v.parse("SCANFLEET_API__BIND", "127.0.0.1:8080")?;
        let public_url = v
            .get("SCANFLEET_API__PUBLIC_URL")
            .map(|s| s.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("http://{bind}"));
        let access_token_ttl_secs: i64 = v.parse("SCANFLEET_API__ACCESS_TOKEN_TTL_SECS", "900")?;
        let refresh_token_ttl_secs: i64 =
            v.parse("SCANFLEET_API__REFRESH_TOKEN_TTL_SECS", "2592000")?;
        if access_token_ttl_secs <= 0 || refresh_token_ttl_secs <= 0 {
            return Err(SettingsError::Invalid {
                name: "SCANFLEET_API__ACCESS_TOKEN_TTL_SECS",
                message: "token lifetimes must be positive".into(),
            });
        }
        Ok(ApiSettings {
            bind,
            public_url,
            access_token_ttl_secs,
            refresh_token_ttl_secs,
            max_body_bytes: v.positive("SCANFLEET_API__MAX_BODY_BYTES", "1048576")?,
        })
    }
}

impl ScannerSettings {
    fn read(v: &Vars) -> Result<ScannerSettings, SettingsError> {
        let s = ScannerSettings {
            concurrency: v.positive("SCANFLEET_SCANNER__CONCURRENCY", "2")?,
            allow_private: v.flag("SCANFLEET_SCANNER__ALLOW_PRIVATE", false)?,
            connect_to: v.text("SCANFLEET_SCANNER__CONNECT_TO", ""),
            hosts: v.text("SCANFLEET_SCANNER__HOSTS", ""),
            hosts_only: v.flag("SCANFLEET_SCANNER__HOSTS_ONLY", false)?,
            dns_server: v.optional("SCANFLEET_SCANNER__DNS_SERVER")?,
            templates_dir: v
                .get("SCANFLEET_SCANNER__TEMPLATES_DIR")
                .map(str::to_string),
            idle_wait_secs: v.positive("SCANFLEET_SCANNER__IDLE_WAIT_SECS", "20")?,
            heartbeat_secs: v.positive("SCANFLEET_SCANNER__HEARTBEAT_SECS", "2")?,
            orphan_after_secs: v.parse("SCANFLEET_SCANNER__ORPHAN_AFTER_SECS", "10")?,
            deadline_full_secs: v.positive("SCANFLEET_SCANNER__DEADLINE_FULL_SECS", "3600")?,
            deadline_quick_secs: v.positive("SCANFLEET_SCANNER__DEADLINE_QUICK_SECS", "900")?,
            deadline_recon_secs: v.positive("SCANFLEET_SCANNER__DEADLINE_RECON_SECS", "1800")?,
            dns_timeout_ms: v.positive("SCANFLEET_SCANNER__DNS_TIMEOUT_MS", "2000")?,
            dns_concurrency: v.positive("SCANFLEET_SCANNER__DNS_CONCURRENCY", "32")?,
            per_host_rps: v.parse("SCANFLEET_SCANNER__PER_HOST_RPS", "50")?,
            drain_secs: v.parse("SCANFLEET_SCANNER__DRAIN_SECS", "10")?,
            metrics_bind: v.optional("SCANFLEET_SCANNER__METRICS_BIND")?,
            interactsh_server: v
                .get("SCANFLEET_SCANNER__INTERACTSH_SERVER")
                .map(str::to_string),
            interactsh_token: v
                .get("SCANFLEET_SCANNER__INTERACTSH_TOKEN")
                .map(Secret::new),
            interactsh_domain: v
                .get("SCANFLEET_SCANNER__INTERACTSH_DOMAIN")
                .map(str::to_string),
        };
        if s.orphan_after_secs < 2 * s.heartbeat_secs {
            return Err(SettingsError::Invalid {
                name: "SCANFLEET_SCANNER__ORPHAN_AFTER_SECS",
                message: "must be at least twice SCANFLEET_SCANNER__HEARTBEAT_SECS, or a live \
                          node's jobs would be taken from it"
                    .into(),
            });
        }
        Ok(s)
    }
}

impl SchedulerSettings {
    fn read(v: &Vars) -> Result<SchedulerSettings, SettingsError> {
        Ok(SchedulerSettings {
            stuck_after_secs: v.positive("SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "120")?,
            queued_after_secs: v.positive("SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS", "600")?,
            reap_interval_secs: v.positive("SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS", "5")?,
        })
    }
}

impl RateSettings {
    fn read(v: &Vars) -> Result<RateSettings, SettingsError> {
        Ok(RateSettings {
            enabled: v.flag("SCANFLEET_RATE__ENABLED", true)?,
            anon_rpm: v.parse("SCANFLEET_RATE__ANON_RPM", "60")?,
            account_failures: v.positive("SCANFLEET_RATE__ACCOUNT_FAILURES", "10")?,
            account_window_secs: v.positive("SCANFLEET_RATE__ACCOUNT_WINDOW_SECS", "900")?,
        })
    }
}

impl TargetSettings {
    fn read(v: &Vars, mode: Mode) -> Result<TargetSettings, SettingsError> {
        Ok(TargetSettings {
            require_verification: v.flag(
                "SCANFLEET_TARGETS__REQUIRE_VERIFICATION",
                mode == Mode::Production,
            )?,
            verification_ttl_days: v.positive("SCANFLEET_TARGETS__VERIFICATION_TTL_DAYS", "30")?,
        })
    }
}

impl PaymentSettings {
    fn read(v: &Vars, mode: Mode) -> Result<PaymentSettings, SettingsError> {
        // Dev mode without a provider key: the local stand-in.
        let secret_key = v.get("SCANFLEET_PAYMENTS__SECRET_KEY").map(Secret::new);
        let provider = match v.get("SCANFLEET_PAYMENTS__PROVIDER") {
            None if mode == Mode::Dev && secret_key.is_none() => PaymentProvider::Dev,
            None | Some("stripe") => PaymentProvider::Stripe,
            Some("dev") => PaymentProvider::Dev,
            Some(other) => {
                return Err(invalid(
                    "SCANFLEET_PAYMENTS__PROVIDER",
                    other,
                    "stripe or dev",
                ))
            }
        };
        Ok(PaymentSettings {
            provider,
            api_base: v
                .get("SCANFLEET_PAYMENTS__API_BASE")
                .unwrap_or("https://api.stripe.com")
                .trim_end_matches('/')
                .to_string(),
            secret_key,
            webhook_secret: v.get("SCANFLEET_PAYMENTS__WEBHOOK_SECRET").map(Secret::new),
            price_monthly: v
                .get("SCANFLEET_PAYMENTS__PRICE_MONTHLY")
                .map(str::to_string),
            price_yearly: v
                .get("SCANFLEET_PAYMENTS__PRICE_YEARLY")
                .map(str::to_string),
            timeout_secs: v.positive("SCANFLEET_PAYMENTS__TIMEOUT_SECS", "10")?,
        })
    }
}

impl Settings {
    /// Defaults, then `SCANFLEET_CONFIG_FILE` if set, then the process environment.
    pub fn load() -> Result<Settings, SettingsError> {
        Settings::from_vars(&Vars::load()?)
    }

    /// Builds settings from a name -> value map (the environment, in production).
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, SettingsError> {
        let v = Vars(vars);
        let mode = v.mode()?;
        Ok(Settings {
            mode,
            database_url: Secret::new(
                v.get("DATABASE_URL")
                    .unwrap_or("postgres://postgres@127.0.0.1:5432/scanfleet"),
            ),
            redis: RedisSettings::read(&v)?,
            jwt_secret: v.get("SCANFLEET_JWT_SECRET").map(Secret::new),
            admin_email: v.get("SCANFLEET_ADMIN_EMAIL").map(str::to_string),
            admin_password: v.get("SCANFLEET_ADMIN_PASSWORD").map(Secret::new),
            api: ApiSettings::read(&v)?,
            scanner: ScannerSettings::read(&v)?,
            scheduler: SchedulerSettings::read(&v)?,
            rate: RateSettings::read(&v)?,
            targets: TargetSettings::read(&v, mode)?,
            payments: PaymentSettings::read(&v, mode)?,
            webhooks: WebhookSettings::read(&v)?,
            log_format: v.log_format()?,
        })
    }

    /// The api's own checks: production needs a JWT secret and a real
    /// payment provider. The scheduler skips them (it signs nothing and
    /// takes no payments).
    pub fn for_api(self) -> Result<Settings, SettingsError> {
        if self.mode == Mode::Production && self.jwt_secret.is_none() {
            return Err(SettingsError::MissingJwtSecret);
        }
        if self.mode == Mode::Production && self.payments.provider == PaymentProvider::Dev {
            return Err(SettingsError::DevPaymentsInProduction);
        }
        Ok(self)
    }
}

impl NodeSettings {
    /// Defaults, then `SCANFLEET_CONFIG_FILE` if set, then the process environment.
    pub fn load() -> Result<NodeSettings, SettingsError> {
        NodeSettings::from_vars(&Vars::load()?)
    }

    /// Builds a node's settings from a name -> value map: Redis and the
    /// `SCANFLEET_SCANNER__*` section only.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<NodeSettings, SettingsError> {
        let v = Vars(vars);
        Ok(NodeSettings {
            mode: v.mode()?,
            redis: RedisSettings::read(&v)?,
            scanner: ScannerSettings::read(&v)?,
            log_format: v.log_format()?,
        })
    }
}

fn invalid(name: &'static str, value: &str, expected: &str) -> SettingsError {
    SettingsError::Invalid {
        name,
        message: format!("`{value}` is not valid: expected {expected}"),
    }
}

/// The key prefix, refused when it holds a brace: every key's cluster hash
/// tag is the first `{...}` in it, so a brace in the prefix would put all
/// keys in one slot, or split a queue's keys over several.
pub fn redis_prefix(prefix: String) -> Result<String, SettingsError> {
    if prefix.contains(['{', '}']) {
        return Err(invalid(
            "SCANFLEET_REDIS_PREFIX",
            &prefix,
            "a prefix without braces (the keys carry their own cluster hash tags)",
        ));
    }
    Ok(prefix)
}

/// `host:port` entries separated by commas (`name`'s value); the port
/// defaults to `default_port` (Sentinel's 26379, Redis's 6379).
fn parse_hosts(
    name: &'static str,
    raw: &str,
    default_port: u16,
) -> Result<Vec<(String, u16)>, SettingsError> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            host_port(entry, default_port).ok_or_else(|| invalid(name, entry, "host:port entries"))
        })
        .collect()
}

/// One `host:port` (`[v6]:port` too); the port defaults to
/// `default_port`. None when the host is empty or the port not a number.
pub fn host_port(entry: &str, default_port: u16) -> Option<(String, u16)> {
    let entry = entry.trim();
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h, p.parse().ok()),
        _ => (entry, Some(default_port)),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match port {
        Some(port) if !host.is_empty() => Some((host.to_string(), port)),
        _ => None,
    }
}

fn read_env_file(path: &Path) -> Result<HashMap<String, String>, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::File {
        path: path.display().to_string(),
        source,
    })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_for_local_use() {
        let s = Settings::from_vars(&HashMap::new()).unwrap();
        assert_eq!(s.mode, Mode::Dev);
        assert_eq!(s.api.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(
            s.database_url.expose(),
            "postgres://postgres@127.0.0.1:5432/scanfleet"
        );
        assert_eq!(s.redis.url.expose(), "redis://127.0.0.1:6379");
        assert_eq!(s.redis.prefix, "scanfleet");
        assert_eq!(s.scanner.concurrency, 2);
        assert!(!s.scanner.allow_private);
        assert!(s.rate.enabled);
        assert_eq!(s.rate.anon_rpm, 60);
        assert_eq!(s.payments.provider, PaymentProvider::Dev);
        assert_eq!(s.api.access_token_ttl_secs, 900);
        assert!(s.jwt_secret.is_none());
        assert!(!s.targets.require_verification);
        assert_eq!(s.targets.verification_ttl_days, 30);
    }

    #[test]
    fn production_mode_requires_ownership_proof_unless_told_otherwise() {
        let secret = ("SCANFLEET_JWT_SECRET", "s3cret-s3cret-s3cret-s3cret-s3cret");
        let prod = ("SCANFLEET_MODE", "production");
        let s = Settings::from_vars(&vars(&[prod, secret])).unwrap();
        assert!(s.targets.require_verification);
        let s = Settings::from_vars(&vars(&[
            prod,
            secret,
            ("SCANFLEET_TARGETS__REQUIRE_VERIFICATION", "false"),
        ]))
        .unwrap();
        assert!(!s.targets.require_verification);
        let s = Settings::from_vars(&vars(&[(
            "SCANFLEET_TARGETS__REQUIRE_VERIFICATION",
            "true",
        )]))
        .unwrap();
        assert!(s.targets.require_verification);
    }

    #[test]
    fn the_interactsh_server_is_off_by_default_and_its_token_stays_secret() {
        let s = Settings::from_vars(&HashMap::new()).unwrap();
        assert!(s.scanner.interactsh_server.is_none() && s.scanner.interactsh_token.is_none());
        let s = Settings::from_vars(&vars(&[
            (
                "SCANFLEET_SCANNER__INTERACTSH_SERVER",
                " https://oob.example.com ",
            ),
            ("SCANFLEET_SCANNER__INTERACTSH_TOKEN", "oob-token"),
            ("SCANFLEET_SCANNER__INTERACTSH_DOMAIN", "oob.example.com"),
        ]))
        .unwrap();
        let scanner = &s.scanner;
        assert_eq!(
            scanner.interactsh_server.as_deref(),
            Some("https://oob.example.com")
        );
        assert_eq!(
            scanner.interactsh_token.as_ref().unwrap().expose(),
            "oob-token"
        );
        assert_eq!(
            scanner.interactsh_domain.as_deref(),
            Some("oob.example.com")
        );
        assert!(!format!("{scanner:?}").contains("oob-token"));
    }

    #[test]
    fn production_without_a_jwt_secret_is_an_error() {
        let err = Settings::from_vars(&vars(&[("SCANFLEET_MODE", "production")]))
            .and_then(Settings::for_api)
            .unwrap_err();
        assert!(matches!(err, SettingsError::MissingJwtSecret));
        // The scheduler reads the same settings and needs no secret.
        assert!(Settings::from_vars(&vars(&[("SCANFLEET_MODE", "production")])).is_ok());
        let ok = Settings::from_vars(&vars(&[
            ("SCANFLEET_MODE", "production"),
            ("SCANFLEET_JWT_SECRET", "s3cret-s3cret-s3cret-s3cret-s3cret"),
        ]))
        .unwrap();
        assert_eq!(ok.payments.provider, PaymentProvider::Stripe);
    }

    #[test]
    fn environment_names_set_their_fields() {
        let s = Settings::from_vars(&vars(&[
            ("SCANFLEET_API__BIND", "0.0.0.0:9000"),
            ("SCANFLEET_SCANNER__CONCURRENCY", "8"),
            ("SCANFLEET_SCANNER__ALLOW_PRIVATE", "true"),
            ("SCANFLEET_RATE__ENABLED", "false"),
            ("SCANFLEET_REDIS_PREFIX", "t-123"),
            ("SCANFLEET_LOG_FORMAT", "json"),
        ]))
        .unwrap();
        assert_eq!(s.api.bind.port(), 9000);
        assert_eq!(s.scanner.concurrency, 8);
        assert!(s.scanner.allow_private);
        assert!(!s.rate.enabled);
        assert_eq!(s.redis.prefix, "t-123");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn dev_mode_uses_the_payment_stand_in_only_without_a_provider_key() {
        let s =
            Settings::from_vars(&vars(&[("SCANFLEET_PAYMENTS__SECRET_KEY", "sk_test_1")])).unwrap();
        assert_eq!(s.payments.provider, PaymentProvider::Stripe);
        let err = Settings::from_vars(&vars(&[
            ("SCANFLEET_MODE", "production"),
            ("SCANFLEET_JWT_SECRET", "s3cret-s3cret-s3cret-s3cret-s3cret"),
            ("SCANFLEET_PAYMENTS__PROVIDER", "dev"),
        ]))
        .and_then(Settings::for_api)
        .unwrap_err();
        assert!(matches!(err, SettingsError::DevPaymentsInProduction));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = Settings::from_vars(&vars(&[("SCANFLEET_SCANNER__CONCURRENCY", "many")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SCANFLEET_SCANNER__CONCURRENCY"), "{err}");
        let err = Settings::from_vars(&vars(&[("SCANFLEET_RATE__ENABLED", "maybe")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SCANFLEET_RATE__ENABLED"), "{err}");
    }

    #[test]
    fn webhook_settings_have_their_defaults_and_refuse_a_zero_scale() {
        let s = Settings::from_vars(&vars(&[])).unwrap().webhooks;
        assert!(!s.allow_private);
        assert_eq!(s.retry_scale, 1.0);
        assert_eq!(s.timeout_secs, 15);
        assert_eq!(s.dispatchers, 1);
        let s = Settings::from_vars(&vars(&[
            ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE", "true"),
            ("SCANFLEET_WEBHOOKS__RETRY_SCALE", "0.001"),
        ]))
        .unwrap()
        .webhooks;
        assert!(s.allow_private);
        assert_eq!(s.retry_scale, 0.001);
        for bad in ["0", "-1", "NaN", "fast"] {
            let err = Settings::from_vars(&vars(&[("SCANFLEET_WEBHOOKS__RETRY_SCALE", bad)]))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("SCANFLEET_WEBHOOKS__RETRY_SCALE"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn sentinels_are_host_port_pairs_with_sentinels_own_default_port() {
        let s = Settings::from_vars(&vars(&[
            ("REDIS_SENTINELS", "10.0.0.1:26380, sentinel-b ,[::1]:5000"),
            ("REDIS_SENTINEL_MASTER", "queue"),
        ]))
        .unwrap();
        assert_eq!(
            s.redis.sentinels,
            vec![
                ("10.0.0.1".to_string(), 26380),
                ("sentinel-b".to_string(), 26379),
                ("::1".to_string(), 5000)
            ]
        );
        assert_eq!(s.redis.sentinel_master, "queue");
        let err = Settings::from_vars(&vars(&[("REDIS_SENTINELS", "a:port")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("REDIS_SENTINELS"), "{err}");
        let s = Settings::from_vars(&HashMap::new()).unwrap();
        assert!(s.redis.sentinels.is_empty());
    }

    #[test]
    fn cluster_nodes_are_host_port_pairs_with_redis_own_default_port() {
        let s = Settings::from_vars(&vars(&[(
            "SCANFLEET_REDIS__CLUSTER_NODES",
            "10.0.0.1:7000,redis-b, [::1]:7002",
        )]))
        .unwrap();
        assert_eq!(
            s.redis.cluster_nodes,
            vec![
                ("10.0.0.1".to_string(), 7000),
                ("redis-b".to_string(), 6379),
                ("::1".to_string(), 7002)
            ]
        );
        let err = Settings::from_vars(&vars(&[("SCANFLEET_REDIS__CLUSTER_NODES", ":7000")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SCANFLEET_REDIS__CLUSTER_NODES"), "{err}");
        assert!(Settings::from_vars(&HashMap::new())
            .unwrap()
            .redis
            .cluster_nodes
            .is_empty());
    }

    #[test]
    fn a_prefix_with_a_brace_is_refused_since_it_would_change_the_hash_tags() {
        for bad in ["{scanfleet}", "a}b", "x{"] {
            let err = Settings::from_vars(&vars(&[("SCANFLEET_REDIS_PREFIX", bad)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("SCANFLEET_REDIS_PREFIX"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_node_reads_redis_and_its_own_section_only() {
        // Production with no JWT secret, no database and a payment provider
        // the api would refuse: none of it is the node's.
        let s = NodeSettings::from_vars(&vars(&[
            ("SCANFLEET_MODE", "production"),
            ("SCANFLEET_PAYMENTS__PROVIDER", "dev"),
            ("SCANFLEET_API__BIND", "not an address"),
            ("SCANFLEET_SCANNER__CONCURRENCY", "6"),
            ("SCANFLEET_REDIS_PREFIX", "fleet-a"),
        ]))
        .unwrap();
        assert_eq!(s.mode, Mode::Production);
        assert_eq!(s.scanner.concurrency, 6);
        assert_eq!(s.redis.prefix, "fleet-a");
        let err = NodeSettings::from_vars(&vars(&[("SCANFLEET_SCANNER__HEARTBEAT_SECS", "0")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SCANFLEET_SCANNER__HEARTBEAT_SECS"), "{err}");
    }

    #[test]
    fn secrets_do_not_show_in_debug_output() {
        let s = Settings::from_vars(&vars(&[
            ("SCANFLEET_JWT_SECRET", "very-secret-signing-key"),
            ("DATABASE_URL", "postgres://u:pw-in-url@h/db"),
        ]))
        .unwrap();
        let dbg = format!("{s:?}");
        assert!(!dbg.contains("very-secret-signing-key"));
        assert!(!dbg.contains("pw-in-url"));
    }
}
