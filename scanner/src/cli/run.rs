//! `scanfleet-scanner run`: templates in, targets in, findings out.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use scanfleet_common::chain::Chain;
use scanfleet_engine::engine::load::{self, LoadFailed};
use scanfleet_engine::template::CheckOptions;
use scanfleet_interactsh::ClientError;

use super::oob::InteractshArgs;
use scanfleet_engine::engine::run::parse_variables;
use scanfleet_engine::engine::{
    CompiledTemplate, Engine, EngineConfig, EngineError, Event, ScanResult, TargetErrorKind,
};
use scanfleet_http::{ClientConfig, HttpError, TargetUrl};
use tokio_util::sync::CancellationToken;

/// Arguments of `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Template file or directory (repeatable); the built-in pack when absent.
    #[arg(short = 't', long = "templates")]
    pub templates: Vec<PathBuf>,
    /// Target URL (repeatable).
    #[arg(short = 'u', long = "target", required = true)]
    pub targets: Vec<String>,
    /// One JSON object per finding per line.
    #[arg(long)]
    pub jsonl: bool,
    /// Allow loopback, private and other non-public target addresses.
    #[arg(long)]
    pub allow_private: bool,
    /// A template variable, `name=value` (repeatable).
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// Most requests per second to one host.
    #[arg(long)]
    pub rate_limit: Option<u32>,
    /// Most requests in flight at once.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Print every failed or skipped request on stderr.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[command(flatten)]
    pub interactsh: InteractshArgs,
}

/// Exit code for a target refused by the address safety check.
const EXIT_REFUSED: u8 = 2;
/// Exit code for bad arguments or templates that cannot be loaded.
const EXIT_USAGE: u8 = 1;

/// What stops a run before it starts: bad arguments or settings, or
/// templates that cannot be loaded (exit code 1).
#[derive(Debug, thiserror::Error)]
enum SetupError {
    /// `SCANFLEET_SCANNER__CONNECT_TO` or `SCANFLEET_SCANNER__HOSTS`.
    #[error(transparent)]
    ClientSetting(HttpError),
    /// A `--var` that is not `name=value`, or an engine that cannot start.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A `-u` that is not an absolute http(s) URL.
    #[error(transparent)]
    Target(HttpError),
    #[error(transparent)]
    Templates(#[from] LoadFailed),
    #[error("no runnable templates")]
    NoTemplates,
    /// `--interactsh-server` given, but no session could be registered.
    #[error("registering with the interactsh server")]
    Interactsh(#[source] ClientError),
}

/// The client settings from the environment (`SCANFLEET_SCANNER__*`) and flags.
fn client_config(args: &RunArgs) -> Result<ClientConfig, SetupError> {
    let mut cfg = ClientConfig::default();
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let truthy = |v: &str| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    };
    cfg.allow_private =
        args.allow_private || env("SCANFLEET_SCANNER__ALLOW_PRIVATE").is_some_and(|v| truthy(&v));
    if let Some(v) = env("SCANFLEET_SCANNER__CONNECT_TO") {
        cfg.connect_to = ClientConfig::parse_connect_to(&v).map_err(SetupError::ClientSetting)?;
    }
    if let Some(v) = env("SCANFLEET_SCANNER__HOSTS") {
        cfg.hosts = ClientConfig::parse_hosts(&v).map_err(SetupError::ClientSetting)?;
    }
    cfg.hosts_only = env("SCANFLEET_SCANNER__HOSTS_ONLY").is_some_and(|v| truthy(&v));
    if let Some(n) = args.concurrency {
        cfg.max_concurrency = n.max(1);
    }
    if let Some(r) = args.rate_limit {
        cfg.per_host_rps = Some(r.max(1));
    }
    Ok(cfg)
}

/// Loads and compiles templates; unrunnable ones are reported on stderr
/// with their reason and left out.
fn load_templates(
    paths: &[PathBuf],
    options: CheckOptions,
) -> Result<Vec<Arc<CompiledTemplate>>, LoadFailed> {
    let loaded = load::load_templates_for(paths, options)?;
    for left_out in &loaded.left_out {
        eprintln!("warning: {}", Chain(left_out));
    }
    eprintln!(
        "loaded {} template(s), {} runnable, in {:.3} s",
        loaded.found(),
        loaded.templates.len(),
        loaded.elapsed.as_secs_f64()
    );
    Ok(loaded.templates)
}

/// A run, ready to start.
struct Run {
    engine: Engine,
    targets: Vec<TargetUrl>,
    templates: Vec<Arc<CompiledTemplate>>,
}

/// The engine, targets and templates of a run, from its arguments.
fn set_up(args: &RunArgs) -> Result<Run, SetupError> {
    let client = client_config(args)?;
    let variables = parse_variables(&args.vars)?;
    let targets = args
        .targets
        .iter()
        .map(|t| TargetUrl::parse(t).map_err(SetupError::Target))
        .collect::<Result<Vec<_>, _>>()?;
    let templates = load_templates(&args.templates, args.interactsh.check_options())?;
    if templates.is_empty() {
        return Err(SetupError::NoTemplates);
    }
    let engine = Engine::new(EngineConfig {
        template_concurrency: client.max_concurrency,
        client,
        variables,
        ..EngineConfig::default()
    })?;
    Ok(Run {
        engine,
        targets,
        templates,
    })
}

/// Runs the subcommand; the exit code says how it went (0 ok, 1 usage or
/// template error, 2 a target refused by the address safety check).
pub async fn run_command(args: RunArgs) -> ExitCode {
    let Run {
        engine,
        targets,
        templates,
    } = match set_up(&args) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("error: {}", Chain(&e));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let engine = match args.interactsh.register().await {
        Ok(Some(oob)) => engine.with_interactsh(oob),
        Ok(None) => engine,
        Err(e) => {
            eprintln!("error: {}", Chain(&SetupError::Interactsh(e)));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let mut printer = Printer {
        // Not a held lock: the run is a task that may move between threads.
        stdout: std::io::stdout(),
        jsonl: args.jsonl,
        verbose: args.verbose,
        tally: Tally::default(),
    };
    let scan_started = std::time::Instant::now();
    // Held to the end, so no template is freed during the scan: freeing
    // one (thousands of small allocations made on the loading threads) was
    // about a tenth of the scan's CPU. The process exits right after.
    let keep = templates.clone();
    engine
        .run_with(templates, targets, cancel, |ev| printer.print(ev))
        .await;
    let _ = printer.stdout.flush();
    if let Some(oob) = engine.interactsh() {
        if let Err(e) = oob.session.deregister().await {
            eprintln!("warning: deregistering from the interactsh server: {e}");
        }
    }
    // The process ends now; the OS takes the memory back faster than
    // freeing every template would.
    std::mem::forget(keep);
    let Tally {
        findings,
        failed,
        skipped,
        refused,
    } = printer.tally;
    // Findings go to stdout; the summary to stderr, so JSON Lines stay clean.
    eprintln!("{findings} finding(s), {failed} failed request(s), {skipped} request(s) skipped");
    eprintln!(
        "{} request(s) sent in {:.3} s",
        engine.client().requests_sent(),
        scan_started.elapsed().as_secs_f64()
    );
    if refused {
        return ExitCode::from(EXIT_REFUSED);
    }
    ExitCode::SUCCESS
}

/// What a run reported, counted for its summary.
#[derive(Debug, Default)]
struct Tally {
    findings: usize,
    failed: usize,
    skipped: usize,
    /// A target was refused by the address safety check.
    refused: bool,
}

/// Prints a run's events as they come: findings on stdout, errors on
/// stderr (request failures and skips only when verbose).
struct Printer {
    stdout: std::io::Stdout,
    jsonl: bool,
    verbose: bool,
    tally: Tally,
}

impl Printer {
    fn print(&mut self, event: Event) {
        match event {
            Event::Result(r) => {
                self.tally.findings += 1;
                let line = if self.jsonl {
                    r.to_json_line()
                } else {
                    finding_line(&r)
                };
                // A closed stdout (piped into `head`) is not worth a panic.
                let _ = writeln!(self.stdout, "{line}");
            }
            Event::Error(e) => match e.kind {
                TargetErrorKind::Refused => {
                    self.tally.refused = true;
                    eprintln!("error: {e}");
                }
                TargetErrorKind::Request => {
                    self.tally.failed += 1;
                    if self.verbose {
                        eprintln!("failed: {e}");
                    }
                }
                TargetErrorKind::Skipped => {
                    self.tally.skipped += 1;
                    if self.verbose {
                        eprintln!("skipped: {e}");
                    }
                }
                TargetErrorKind::Flow => {
                    if self.verbose {
                        eprintln!("flow: {e}");
                    }
                }
            },
            Event::Progress { .. } => {}
        }
    }
}

/// `[template:matcher] [severity] url [extracted,...]`.
fn finding_line(r: &ScanResult) -> String {
    let extra = if r.extracted_results.is_empty() {
        String::new()
    } else {
        format!(" [{}]", r.extracted_results.join(","))
    };
    let name = r
        .matcher_name
        .as_deref()
        .map(|m| format!(":{m}"))
        .unwrap_or_default();
    format!(
        "[{}{}] [{}] {}{}",
        r.template_id, name, r.severity, r.matched_at, extra
    )
}

/// [`run_command`] on a runtime of its own, for a synchronous `main`.
pub fn run_blocking(args: RunArgs) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        // The run is a task on the workers rather than polled by this
        // thread: each event it receives then wakes a task on a busy
        // worker instead of this parked thread (a futex wake-up per event,
        // which was a large part of a run's context switches).
        Ok(rt) => rt.block_on(async {
            tokio::spawn(run_command(args)).await.unwrap_or_else(|e| {
                eprintln!("error: the run ended abnormally: {e}");
                ExitCode::FAILURE
            })
        }),
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
