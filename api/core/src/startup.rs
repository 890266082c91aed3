//! Start-up checks that turn a failure to reach Postgres or Redis, or to
//! bind the listen address, into one line naming the setting at fault and
//! what to do about it. In dev mode a database that does not exist yet is
//! created.

use std::time::Duration;

use scanfleet_common::settings::Mode;
use scanfleet_common::Settings;
use tokio_postgres::error::SqlState;

/// How long start-up waits for Redis before giving up.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Each message is one sentence with its cause inside it, and the cause is
/// kept as a field rather than a `source()`: the sentence is printed whole,
/// and a printed chain says the cause once.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("DATABASE_URL is not a valid Postgres URL: {0}")]
    BadDatabaseUrl(tokio_postgres::Error),
    #[error(
        "DATABASE_URL: database \"{name}\" does not exist on {server}: create it \
         (createdb {name}) or point DATABASE_URL at an existing one"
    )]
    DatabaseMissing { name: String, server: String },
    #[error(
        "DATABASE_URL: Postgres at {server} refused user \"{user}\" ({}): check the user \
         and password in DATABASE_URL",
        reason_of(cause)
    )]
    DatabaseAuth {
        server: String,
        user: String,
        cause: tokio_postgres::Error,
    },
    #[error(
        "DATABASE_URL: cannot reach Postgres at {server} ({}): start Postgres or fix \
         DATABASE_URL",
        reason_of(cause)
    )]
    DatabaseUnreachable {
        server: String,
        cause: tokio_postgres::Error,
    },
    #[error("REDIS_URL: cannot reach Redis ({0}): start Redis or fix REDIS_URL")]
    RedisUnreachable(RedisUnreachable),
    #[error(
        "SCANFLEET_API__BIND: cannot listen on {addr} ({cause}): choose another address or \
         stop what uses it"
    )]
    Bind { addr: String, cause: std::io::Error },
}

/// Why Redis could not be reached at start-up.
#[derive(Debug, thiserror::Error)]
pub enum RedisUnreachable {
    /// The plain TCP connection to the server failed: the operating
    /// system's words ("Connection refused").
    #[error("{addr}: {cause}")]
    Connect { addr: String, cause: std::io::Error },
    #[error("{addr}: no answer")]
    NoAnswer { addr: String },
    #[error(transparent)]
    Client(#[from] fred::error::Error),
    #[error("no answer within {0} s")]
    Timeout(u64),
}

/// Checks that the database of `DATABASE_URL` can be used, creating it in
/// dev mode when it is missing.
pub async fn check_database(settings: &Settings) -> Result<(), StartupError> {
    let url = settings.database_url.expose();
    let config: tokio_postgres::Config = url.parse().map_err(StartupError::BadDatabaseUrl)?;
    let server = describe_server(&config);
    let user = config.get_user().unwrap_or("").to_string();
    let name = config.get_dbname().unwrap_or(&user).to_string();
    match config.connect(tokio_postgres::NoTls).await {
        Ok((client, conn)) => {
            drop(client);
            drop(conn);
            Ok(())
        }
        Err(e) if e.code() == Some(&SqlState::INVALID_CATALOG_NAME) => {
            if settings.mode == Mode::Dev {
                create_database(&config, &name, &server).await
            } else {
                Err(StartupError::DatabaseMissing { name, server })
            }
        }
        Err(e) if matches!(e.code(), Some(c) if *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION) => {
            Err(StartupError::DatabaseAuth {
                server,
                user,
                cause: e,
            })
        }
        Err(cause) => Err(StartupError::DatabaseUnreachable { server, cause }),
    }
}

async fn create_database(
    config: &tokio_postgres::Config,
    name: &str,
    server: &str,
) -> Result<(), StartupError> {
    let mut admin = config.clone();
    admin.dbname("postgres");
    let unreachable = |cause: tokio_postgres::Error| StartupError::DatabaseUnreachable {
        server: server.to_string(),
        cause,
    };
    let (client, conn) = admin
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(unreachable)?;
    let driver = tokio::spawn(conn);
    let quoted = name.replace('"', "\"\"");
    let created = client
        .batch_execute(&format!("CREATE DATABASE \"{quoted}\""))
        .await;
    drop(client);
    let _ = driver.await;
    match created {
        Ok(()) => {
            tracing::warn!(database = %name, "created the missing database (dev mode)");
            Ok(())
        }
        // Another process created it at the same moment: the api and the
        // scheduler under `make run` on a fresh server. Postgres says so
        // with `duplicate_database`, or, when the two CREATEs overlap, with
        // a unique violation of `pg_database`'s name index (seen trying the
        // README's walk on a fresh database: the scheduler exited, and
        // `make run` with it).
        Err(e)
            if e.code() == Some(&SqlState::DUPLICATE_DATABASE)
                || e.code() == Some(&SqlState::UNIQUE_VIOLATION) =>
        {
            Ok(())
        }
        Err(_) => Err(StartupError::DatabaseMissing {
            name: name.to_string(),
            server: server.to_string(),
        }),
    }
}

/// Connects a Redis client for `role`, giving up after a few seconds with
/// one line. Without sentinels or a cluster (whose seeds are not the URL's
/// server) a plain TCP connection to `url`'s server is
/// tried first, so the reason is the operating system's words
/// ("Connection refused") rather than the client's.
pub async fn connect_redis(
    target: &scanfleet_bus::RedisTarget,
    url: &str,
    role: &'static str,
) -> Result<fred::clients::Client, StartupError> {
    if let Some(addr) = redis_address(url).filter(|_| !target.is_sentinel() && !target.is_cluster())
    {
        match tokio::time::timeout(REDIS_TIMEOUT, tokio::net::TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => {}
            Ok(Err(cause)) => {
                return Err(StartupError::RedisUnreachable(RedisUnreachable::Connect {
                    addr,
                    cause,
                }))
            }
            Err(_) => {
                return Err(StartupError::RedisUnreachable(RedisUnreachable::NoAnswer {
                    addr,
                }))
            }
        }
    }
    match tokio::time::timeout(REDIS_TIMEOUT, scanfleet_bus::connect(target, role)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(StartupError::RedisUnreachable(e.into())),
        Err(_) => Err(StartupError::RedisUnreachable(RedisUnreachable::Timeout(
            REDIS_TIMEOUT.as_secs(),
        ))),
    }
}

/// `host:port` of a `redis://` or `rediss://` URL.
fn redis_address(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit('@').next()?;
    if host_port.is_empty() {
        return None;
    }
    Some(if host_port.contains(':') && !host_port.ends_with(']') {
        host_port.to_string()
    } else {
        format!("{host_port}:6379")
    })
}

fn describe_server(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// The innermost cause's message: tokio-postgres' own text is often empty
/// ("error connecting to server") with the reason further down.
fn reason_of(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    if text.is_empty() {
        e.to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::redis_address;

    #[test]
    fn redis_urls_give_their_address() {
        assert_eq!(
            redis_address("redis://127.0.0.1:6379").as_deref(),
            Some("127.0.0.1:6379")
        );
        assert_eq!(
            redis_address("redis://:pw@cache:7000/2").as_deref(),
            Some("cache:7000")
        );
        assert_eq!(
            redis_address("redis://cache").as_deref(),
            Some("cache:6379")
        );
    }
}
