//! Typed settings, loaded once at start-up: defaults for local use, then an
//! optional file named by `SCANFLEET_CONFIG_FILE` (lines of `NAME=value`), then
//! environment variables, which win. Names follow `SCANFLEET_SECTION__KEY`;
//! `DATABASE_URL` and `REDIS_URL` keep their conventional names.
//!
//! Nothing else in the code base reads the environment: binaries load
//! [`Settings`] and pass it down, and tests build it directly.

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
    #[error("cannot read the settings file {path}: {source}")]
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
    /// How often an idle node asks the queue for a job.
    pub poll_interval_ms: u64,
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

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub database_url: Secret,
    pub redis_url: Secret,
    /// Sentinels asked for the current master (`REDIS_SENTINELS`, a list of
    /// `host:port`); when set, `REDIS_URL` only gives the credentials and
    /// database, and the clients follow a promoted replica.
    pub redis_sentinels: Vec<(String, u16)>,
    /// The master's name among the sentinels (`REDIS_SENTINEL_MASTER`).
    pub redis_sentinel_master: String,
    pub redis_prefix: String,
    pub jwt_secret: Option<Secret>,
    pub admin_email: Option<String>,
    pub admin_password: Option<Secret>,
    pub api: ApiSettings,
    pub scanner: ScannerSettings,
    pub scheduler: SchedulerSettings,
    pub rate: RateSettings,
    pub targets: TargetSettings,
    pub payments: PaymentSettings,
    pub log_format: LogFormat,
}

impl Settings {
    /// Defaults, then `SCANFLEET_CONFIG_FILE` if set, then the process environment.
    pub fn load() -> Result<Settings, SettingsError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        let mut vars = HashMap::new();
        if let Some(path) = env.get("SCANFLEET_CONFIG_FILE") {
            vars.extend(read_env_file(Path::new(path))?);
        }
        vars.extend(env);
        Settings::from_vars(&vars)
    }

    /// Builds settings from a name -> value map (the environment, in production).
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, SettingsError> {
        let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mode = match get("SCANFLEET_MODE").unwrap_or("dev") {
            "dev" | "development" => Mode::Dev,
            "production" | "prod" => Mode::Production,
            other => return Err(invalid("SCANFLEET_MODE", other, "dev or production")),
        };
        let log_format = match get("SCANFLEET_LOG_FORMAT").unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(invalid("SCANFLEET_LOG_FORMAT", other, "text or json")),
        };
        // Dev mode without a provider key: the local stand-in.
        let provider = match get("SCANFLEET_PAYMENTS__PROVIDER") {
            None if mode == Mode::Dev && get("SCANFLEET_PAYMENTS__SECRET_KEY").is_none() => {
                PaymentProvider::Dev
            }
            None => PaymentProvider::Stripe,
            Some("stripe") => PaymentProvider::Stripe,
            Some("dev") => PaymentProvider::Dev,
            Some(other) => {
                return Err(invalid(
                    "SCANFLEET_PAYMENTS__PROVIDER",
                    other,
                    "stripe or dev",
                ))
            }
        };
        let jwt_secret = get("SCANFLEET_JWT_SECRET").map(Secret::new);
        if mode == Mode::Production && jwt_secret.is_none() {
            return Err(SettingsError::MissingJwtSecret);
        }
        if mode == Mode::Production && provider == PaymentProvider::Dev {
            return Err(SettingsError::DevPaymentsInProduction);
        }
        let bind: SocketAddr = parse(&get, "SCANFLEET_API__BIND", "127.0.0.1:8080")?;
        let public_url = get("SCANFLEET_API__PUBLIC_URL")
            .map(|s| s.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("http://{bind}"));
        let settings = Settings {
            mode,
            database_url: Secret::new(
                get("DATABASE_URL").unwrap_or("postgres://postgres@127.0.0.1:5432/scanfleet"),
            ),
            redis_url: Secret::new(get("REDIS_URL").unwrap_or("redis://127.0.0.1:6379")),
            redis_sentinels: get("REDIS_SENTINELS")
                .map(parse_sentinels)
                .transpose()?
                .unwrap_or_default(),
            redis_sentinel_master: get("REDIS_SENTINEL_MASTER")
                .unwrap_or("mymaster")
                .to_string(),
            redis_prefix: get("SCANFLEET_REDIS_PREFIX")
                .unwrap_or("scanfleet")
                .to_string(),
            jwt_secret,
            admin_email: get("SCANFLEET_ADMIN_EMAIL").map(str::to_string),
            admin_password: get("SCANFLEET_ADMIN_PASSWORD").map(Secret::new),
            api: ApiSettings {
                bind,
                public_url,
                access_token_ttl_secs: parse(&get, "SCANFLEET_API__ACCESS_TOKEN_TTL_SECS", "900")?,
                refresh_token_ttl_secs: parse(
                    &get,
                    "SCANFLEET_API__REFRESH_TOKEN_TTL_SECS",
                    "2592000",
                )?,
                max_body_bytes: parse(&get, "SCANFLEET_API__MAX_BODY_BYTES", "1048576")?,
            },
            scanner: ScannerSettings {
                concurrency: parse(&get, "SCANFLEET_SCANNER__CONCURRENCY", "2")?,
                allow_private: parse_bool(&get, "SCANFLEET_SCANNER__ALLOW_PRIVATE", false)?,
                connect_to: get("SCANFLEET_SCANNER__CONNECT_TO")
                    .unwrap_or("")
                    .to_string(),
                hosts: get("SCANFLEET_SCANNER__HOSTS").unwrap_or("").to_string(),
                hosts_only: parse_bool(&get, "SCANFLEET_SCANNER__HOSTS_ONLY", false)?,
                dns_server: parse_optional(&get, "SCANFLEET_SCANNER__DNS_SERVER")?,
                templates_dir: get("SCANFLEET_SCANNER__TEMPLATES_DIR").map(str::to_string),
                poll_interval_ms: parse(&get, "SCANFLEET_SCANNER__POLL_INTERVAL_MS", "50")?,
                heartbeat_secs: parse(&get, "SCANFLEET_SCANNER__HEARTBEAT_SECS", "2")?,
                orphan_after_secs: parse(&get, "SCANFLEET_SCANNER__ORPHAN_AFTER_SECS", "10")?,
                deadline_full_secs: parse(&get, "SCANFLEET_SCANNER__DEADLINE_FULL_SECS", "3600")?,
                deadline_quick_secs: parse(&get, "SCANFLEET_SCANNER__DEADLINE_QUICK_SECS", "900")?,
                deadline_recon_secs: parse(&get, "SCANFLEET_SCANNER__DEADLINE_RECON_SECS", "1800")?,
                dns_timeout_ms: parse(&get, "SCANFLEET_SCANNER__DNS_TIMEOUT_MS", "2000")?,
                dns_concurrency: parse(&get, "SCANFLEET_SCANNER__DNS_CONCURRENCY", "32")?,
                per_host_rps: parse(&get, "SCANFLEET_SCANNER__PER_HOST_RPS", "50")?,
                drain_secs: parse(&get, "SCANFLEET_SCANNER__DRAIN_SECS", "10")?,
                metrics_bind: parse_optional(&get, "SCANFLEET_SCANNER__METRICS_BIND")?,
                interactsh_server: get("SCANFLEET_SCANNER__INTERACTSH_SERVER").map(str::to_string),
                interactsh_token: get("SCANFLEET_SCANNER__INTERACTSH_TOKEN").map(Secret::new),
                interactsh_domain: get("SCANFLEET_SCANNER__INTERACTSH_DOMAIN").map(str::to_string),
            },
            scheduler: SchedulerSettings {
                stuck_after_secs: parse(&get, "SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "120")?,
                queued_after_secs: parse(&get, "SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS", "600")?,
                reap_interval_secs: parse(&get, "SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS", "5")?,
            },
            rate: RateSettings {
                enabled: parse_bool(&get, "SCANFLEET_RATE__ENABLED", true)?,
                anon_rpm: parse(&get, "SCANFLEET_RATE__ANON_RPM", "60")?,
                account_failures: parse(&get, "SCANFLEET_RATE__ACCOUNT_FAILURES", "10")?,
                account_window_secs: parse(&get, "SCANFLEET_RATE__ACCOUNT_WINDOW_SECS", "900")?,
            },
            targets: TargetSettings {
                require_verification: parse_bool(
                    &get,
                    "SCANFLEET_TARGETS__REQUIRE_VERIFICATION",
                    mode == Mode::Production,
                )?,
                verification_ttl_days: parse(
                    &get,
                    "SCANFLEET_TARGETS__VERIFICATION_TTL_DAYS",
                    "30",
                )?,
            },
            payments: PaymentSettings {
                provider,
                api_base: get("SCANFLEET_PAYMENTS__API_BASE")
                    .unwrap_or("https://api.stripe.com")
                    .trim_end_matches('/')
                    .to_string(),
                secret_key: get("SCANFLEET_PAYMENTS__SECRET_KEY").map(Secret::new),
                webhook_secret: get("SCANFLEET_PAYMENTS__WEBHOOK_SECRET").map(Secret::new),
                price_monthly: get("SCANFLEET_PAYMENTS__PRICE_MONTHLY").map(str::to_string),
                price_yearly: get("SCANFLEET_PAYMENTS__PRICE_YEARLY").map(str::to_string),
                timeout_secs: parse(&get, "SCANFLEET_PAYMENTS__TIMEOUT_SECS", "10")?,
            },
            log_format,
        };
        if settings.api.access_token_ttl_secs <= 0 || settings.api.refresh_token_ttl_secs <= 0 {
            return Err(SettingsError::Invalid {
                name: "SCANFLEET_API__ACCESS_TOKEN_TTL_SECS",
                message: "token lifetimes must be positive".into(),
            });
        }
        for (name, value) in [
            (
                "SCANFLEET_SCANNER__CONCURRENCY",
                settings.scanner.concurrency as u64,
            ),
            (
                "SCANFLEET_SCANNER__POLL_INTERVAL_MS",
                settings.scanner.poll_interval_ms,
            ),
            (
                "SCANFLEET_SCANNER__HEARTBEAT_SECS",
                settings.scanner.heartbeat_secs,
            ),
            (
                "SCANFLEET_SCANNER__DEADLINE_FULL_SECS",
                settings.scanner.deadline_full_secs,
            ),
            (
                "SCANFLEET_SCANNER__DEADLINE_QUICK_SECS",
                settings.scanner.deadline_quick_secs,
            ),
            (
                "SCANFLEET_SCANNER__DEADLINE_RECON_SECS",
                settings.scanner.deadline_recon_secs,
            ),
            (
                "SCANFLEET_SCANNER__DNS_TIMEOUT_MS",
                settings.scanner.dns_timeout_ms,
            ),
            (
                "SCANFLEET_SCANNER__DNS_CONCURRENCY",
                settings.scanner.dns_concurrency as u64,
            ),
            (
                "SCANFLEET_TARGETS__VERIFICATION_TTL_DAYS",
                u64::from(settings.targets.verification_ttl_days),
            ),
            (
                "SCANFLEET_RATE__ACCOUNT_FAILURES",
                u64::from(settings.rate.account_failures),
            ),
            (
                "SCANFLEET_RATE__ACCOUNT_WINDOW_SECS",
                settings.rate.account_window_secs,
            ),
            (
                "SCANFLEET_API__MAX_BODY_BYTES",
                settings.api.max_body_bytes as u64,
            ),
            (
                "SCANFLEET_SCHEDULER__STUCK_AFTER_SECS",
                settings.scheduler.stuck_after_secs,
            ),
            (
                "SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS",
                settings.scheduler.queued_after_secs,
            ),
            (
                "SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS",
                settings.scheduler.reap_interval_secs,
            ),
        ] {
            if value == 0 {
                return Err(invalid(name, "0", "at least 1"));
            }
        }
        if settings.scanner.orphan_after_secs < 2 * settings.scanner.heartbeat_secs {
            return Err(SettingsError::Invalid {
                name: "SCANFLEET_SCANNER__ORPHAN_AFTER_SECS",
                message: "must be at least twice SCANFLEET_SCANNER__HEARTBEAT_SECS, or a live \
                          node's jobs would be taken from it"
                    .into(),
            });
        }
        if settings.payments.timeout_secs == 0 {
            return Err(invalid(
                "SCANFLEET_PAYMENTS__TIMEOUT_SECS",
                "0",
                "at least 1",
            ));
        }
        Ok(settings)
    }
}

fn invalid(name: &'static str, value: &str, expected: &str) -> SettingsError {
    SettingsError::Invalid {
        name,
        message: format!("`{value}` is not valid: expected {expected}"),
    }
}

fn parse<'a, T: FromStr>(
    get: &impl Fn(&str) -> Option<&'a str>,
    name: &'static str,
    default: &'a str,
) -> Result<T, SettingsError>
where
    T::Err: std::fmt::Display,
{
    let raw = get(name).unwrap_or(default);
    raw.parse().map_err(|e: T::Err| SettingsError::Invalid {
        name,
        message: format!("`{raw}`: {e}"),
    })
}

/// None when unset; otherwise the parsed value, or an error naming `name`.
fn parse_optional<'a, T: FromStr>(
    get: &impl Fn(&str) -> Option<&'a str>,
    name: &'static str,
) -> Result<Option<T>, SettingsError>
where
    T::Err: std::fmt::Display,
{
    get(name)
        .map(|raw| {
            raw.parse().map_err(|e: T::Err| SettingsError::Invalid {
                name,
                message: format!("`{raw}`: {e}"),
            })
        })
        .transpose()
}

/// `host:port` entries separated by commas; the port defaults to 26379,
/// Sentinel's own.
fn parse_sentinels(raw: &str) -> Result<Vec<(String, u16)>, SettingsError> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (host, port) = match entry.rsplit_once(':') {
                Some((h, p)) if !h.ends_with(':') => (h, p.parse().ok()),
                _ => (entry, Some(26379)),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            match port {
                Some(port) if !host.is_empty() => Ok((host.to_string(), port)),
                _ => Err(invalid("REDIS_SENTINELS", entry, "host:port entries")),
            }
        })
        .collect()
}

fn parse_bool<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    name: &'static str,
    default: bool,
) -> Result<bool, SettingsError> {
    match get(name) {
        None => Ok(default),
        Some("1" | "true" | "yes" | "on") => Ok(true),
        Some("0" | "false" | "no" | "off") => Ok(false),
        Some(other) => Err(invalid(name, other, "true or false")),
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
        assert_eq!(s.redis_url.expose(), "redis://127.0.0.1:6379");
        assert_eq!(s.redis_prefix, "scanfleet");
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
        let err = Settings::from_vars(&vars(&[("SCANFLEET_MODE", "production")])).unwrap_err();
        assert!(matches!(err, SettingsError::MissingJwtSecret));
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
        assert_eq!(s.redis_prefix, "t-123");
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
    fn sentinels_are_host_port_pairs_with_sentinels_own_default_port() {
        let s = Settings::from_vars(&vars(&[
            ("REDIS_SENTINELS", "10.0.0.1:26380, sentinel-b ,[::1]:5000"),
            ("REDIS_SENTINEL_MASTER", "queue"),
        ]))
        .unwrap();
        assert_eq!(
            s.redis_sentinels,
            vec![
                ("10.0.0.1".to_string(), 26380),
                ("sentinel-b".to_string(), 26379),
                ("::1".to_string(), 5000)
            ]
        );
        assert_eq!(s.redis_sentinel_master, "queue");
        let err = Settings::from_vars(&vars(&[("REDIS_SENTINELS", "a:port")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("REDIS_SENTINELS"), "{err}");
        let s = Settings::from_vars(&HashMap::new()).unwrap();
        assert!(s.redis_sentinels.is_empty());
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
