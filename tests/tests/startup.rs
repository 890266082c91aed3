//! Start-up failures name the setting at fault in one line, and dev mode
//! creates a missing database (the api binary, run for real).

use std::process::Command;
use std::time::Duration;

use scanfleet_tests::database_url;
use scanfleet_tests::fleet::binary;

/// Runs the api with `env` until it exits (or 30 s), returning its exit
/// success and its last stderr line.
fn run_api(env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(binary("scanfleet-api"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SCANFLEET_API__BIND", "127.0.0.1:0")
        .env("RUST_LOG", "warn");
    if let Ok(redis) = std::env::var("REDIS_URL") {
        cmd.env("REDIS_URL", redis);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running the api");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let last = stderr.lines().last().unwrap_or("").to_string();
    (out.status.success(), last)
}

#[test]
fn a_missing_database_in_production_is_one_line_naming_database_url() {
    let url = database_url("scanfleet_no_such_database");
    let (ok, line) = run_api(&[
        ("SCANFLEET_MODE", "production"),
        (
            "SCANFLEET_JWT_SECRET",
            "a-production-secret-a-production-secret",
        ),
        ("SCANFLEET_PAYMENTS__PROVIDER", "stripe"),
        ("DATABASE_URL", &url),
    ]);
    assert!(!ok);
    assert!(
        line.starts_with(
            "error: DATABASE_URL: database \"scanfleet_no_such_database\" does not exist"
        ),
        "{line}"
    );
    assert!(line.contains("createdb"), "{line}");
}

#[test]
fn unreachable_postgres_and_redis_and_a_taken_port_each_name_their_setting() {
    let (ok, line) = run_api(&[("DATABASE_URL", "postgres://postgres@127.0.0.1:1/x")]);
    assert!(!ok);
    assert!(
        line.starts_with("error: DATABASE_URL: cannot reach Postgres at 127.0.0.1:1"),
        "{line}"
    );

    // Redis is checked before any migration runs on the (reachable) server.
    let db = database_url("postgres");
    let (ok, line) = run_api(&[("DATABASE_URL", &db), ("REDIS_URL", "redis://127.0.0.1:1")]);
    assert!(!ok);
    assert!(
        line.starts_with("error: REDIS_URL: cannot reach Redis (127.0.0.1:1"),
        "{line}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // The address is checked first: the unreachable database is not reached.
    let (ok, line) = run_api(&[
        ("DATABASE_URL", "postgres://postgres@127.0.0.1:1/x"),
        ("SCANFLEET_API__BIND", &addr),
    ]);
    assert!(!ok);
    assert!(
        line.starts_with(&format!(
            "error: SCANFLEET_API__BIND: cannot listen on {addr}"
        )),
        "{line}"
    );

    let (ok, line) = run_api(&[("SCANFLEET_SCANNER__CONCURRENCY", "many")]);
    assert!(!ok);
    assert!(line.contains("SCANFLEET_SCANNER__CONCURRENCY"), "{line}");
}

#[tokio::test]
async fn dev_mode_creates_a_missing_database() {
    let name = format!("scanfleet_created_{}", uuid::Uuid::new_v4().simple());
    let url = database_url(&name);
    let mut child = Command::new(binary("scanfleet-api"))
        .env("DATABASE_URL", &url)
        .env("SCANFLEET_API__BIND", "127.0.0.1:0")
        .env("SCANFLEET_REDIS_PREFIX", format!("startup-{name}"))
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("api");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut created = false;
    while std::time::Instant::now() < deadline {
        if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            // Migrations ran too: the ledger is there.
            if client
                .query_one("SELECT count(*) FROM schema_migrations", &[])
                .await
                .is_ok()
            {
                created = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    scanfleet_tests::drop_database(&database_url("postgres"), &name);
    assert!(created, "the database was not created and migrated");
}

#[test]
fn help_lists_the_commands_and_exits_0() {
    for flag in ["--help", "-h", "help"] {
        let out = Command::new(binary("scanfleet-api"))
            .arg(flag)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .expect("running the api");
        let usage = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flag}: {usage}");
        for command in ["serve", "create-admin", "openapi"] {
            assert!(usage.contains(command), "{flag}: {usage}");
        }
    }
}

/// Colour codes are for a terminal; in a file or a pipe they are noise
/// (issue: layers, item 8).
#[tokio::test]
async fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let name = format!("scanfleet_plain_{}", uuid::Uuid::new_v4().simple());
    let url = database_url(&name);
    let child = Command::new(binary("scanfleet-api"))
        .env("DATABASE_URL", &url)
        .env("SCANFLEET_API__BIND", "127.0.0.1:0")
        .env("SCANFLEET_REDIS_PREFIX", format!("startup-{name}"))
        .env("SCANFLEET_LOG_FORMAT", "text")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("api");
    // The api logs that it created the database (dev mode), then migrates:
    // once the ledger is there, the first lines have been written.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            if client
                .query_one("SELECT count(*) FROM schema_migrations", &[])
                .await
                .is_ok()
            {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut child = child;
    let _ = child.kill();
    let out = child.wait_with_output().expect("api output");
    scanfleet_tests::drop_database(&database_url("postgres"), &name);
    let logs = String::from_utf8_lossy(&out.stdout);
    assert!(logs.contains("created the missing database"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "{logs:?}");
}

/// `make run` on a fresh server: the api and the scheduler start at once
/// and both create the missing database (dev mode). The one whose CREATE
/// overlaps the other's gets a unique violation, not `duplicate_database`,
/// and must take it as "created by the other" instead of exiting, which
/// brought `make run` down (issue 37, seen trying the README's walk).
#[tokio::test]
async fn the_api_and_the_scheduler_creating_a_missing_database_at_once_both_start() {
    let mut failures = Vec::new();
    // Three rounds: the race is the two CREATEs overlapping, which two
    // processes started together make likely but not certain.
    for round in 0..3 {
        let name = format!("scanfleet_race_{}", uuid::Uuid::new_v4().simple());
        let url = database_url(&name);
        let spawn = |bin: &str, log: &str| {
            let file = std::fs::File::create(log).expect("log");
            Command::new(binary(bin))
                .env("DATABASE_URL", &url)
                .env("SCANFLEET_API__BIND", "127.0.0.1:0")
                .env("SCANFLEET_REDIS_PREFIX", format!("startup-{name}"))
                .env("SCANFLEET_LOG_FORMAT", "text")
                .env("RUST_LOG", "info")
                .stdout(file.try_clone().expect("log"))
                .stderr(file)
                .spawn()
                .expect(bin)
        };
        let dir = std::env::temp_dir();
        let api_log = dir.join(format!("{name}-api.log"));
        let scheduler_log = dir.join(format!("{name}-scheduler.log"));
        let mut api = spawn("scanfleet-api", api_log.to_str().unwrap());
        let mut scheduler = spawn("scanfleet-scheduler", scheduler_log.to_str().unwrap());
        let started = |log: &std::path::Path, line: &str| {
            std::fs::read_to_string(log).is_ok_and(|text| text.contains(line))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut up = false;
        while std::time::Instant::now() < deadline {
            if started(&api_log, "api listening") && started(&scheduler_log, "scheduler started") {
                up = true;
                break;
            }
            if matches!(api.try_wait(), Ok(Some(_))) || matches!(scheduler.try_wait(), Ok(Some(_)))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let alive = matches!(api.try_wait(), Ok(None)) && matches!(scheduler.try_wait(), Ok(None));
        for child in [&mut api, &mut scheduler] {
            let _ = child.kill();
            let _ = child.wait();
        }
        scanfleet_tests::drop_database(&database_url("postgres"), &name);
        if !(up && alive) {
            failures.push(format!(
                "round {round}: api log:\n{}\nscheduler log:\n{}",
                std::fs::read_to_string(&api_log).unwrap_or_default(),
                std::fs::read_to_string(&scheduler_log).unwrap_or_default()
            ));
        }
        let _ = std::fs::remove_file(&api_log);
        let _ = std::fs::remove_file(&scheduler_log);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
