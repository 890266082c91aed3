//! `scanfleet-api`: serves the API (no arguments), or
//! `scanfleet-api create-admin EMAIL` (password from SCANFLEET_ADMIN_PASSWORD),
//! or `scanfleet-api openapi` (prints the contract); `--help` lists them.

use anyhow::Context;
use scanfleet_api::Application;
use scanfleet_common::shutdown::shutdown_signal;
use scanfleet_common::{telemetry, Settings};

/// The api allocates many small, short-lived objects per request (rows,
/// strings, response bytes) from every worker thread; mimalloc's per-thread
/// heaps serve that pattern at a fraction of glibc malloc's cost (about a
/// third of the scan detail's CPU went to malloc and free before).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line: the start-up errors name the setting and the remedy.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "\
usage: scanfleet-api [COMMAND]

commands:
  serve                 serve the API (the default when no command is given)
  create-admin [EMAIL]  create an admin account (password from
                        SCANFLEET_ADMIN_PASSWORD; email from SCANFLEET_ADMIN_EMAIL
                        when not given), then exit
  openapi               print the OpenAPI contract (JSON) and exit
  help, -h, --help      print this help and exit

Configuration comes from the environment (DATABASE_URL, REDIS_URL,
SCANFLEET_*); see docs/configuration.md.
";

async fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("openapi") => {
            print!("{}", scanfleet_api::openapi_json());
            return Ok(());
        }
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            return Ok(());
        }
        _ => {}
    }
    let settings = Settings::load()?;
    telemetry::init(settings.log_format);
    match args.first().map(String::as_str) {
        None | Some("serve") => {
            let app = Application::build(settings).await?;
            app.run_until_stopped(shutdown_signal()).await?;
            tracing::info!("api stopped");
        }
        Some("create-admin") => {
            let email = args
                .get(1)
                .cloned()
                .or_else(|| settings.admin_email.clone())
                .context("usage: scanfleet-api create-admin EMAIL (password in SCANFLEET_ADMIN_PASSWORD)")?;
            let password = settings
                .admin_password
                .clone()
                .context("set SCANFLEET_ADMIN_PASSWORD to the new admin's password")?;
            let mut settings = settings;
            settings.admin_email = None;
            settings.api.bind = "127.0.0.1:0".parse()?;
            let app = Application::build(settings).await?;
            let created =
                scanfleet_api::app::create_admin(app.state(), &email, password.expose()).await?;
            println!(
                "{}",
                if created {
                    "admin created"
                } else {
                    "an account with this email already exists; left unchanged"
                }
            );
        }
        Some(other) => {
            anyhow::bail!(
                "unknown command `{other}`: expected serve, create-admin or openapi (see --help)"
            )
        }
    }
    Ok(())
}
