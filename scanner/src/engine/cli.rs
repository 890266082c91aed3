//! `scanfleet-scanner run`: templates in, targets in, findings out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use rayon::prelude::*;
use tokio_util::sync::CancellationToken;

use super::compile::CompiledTemplate;
use super::error::TargetErrorKind;
use super::run::{parse_variables, Engine, EngineConfig, Event};
use crate::http::{ClientConfig, TargetUrl};

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
}

/// Exit code for a target refused by the address safety check.
const EXIT_REFUSED: u8 = 2;
/// Exit code for bad arguments or templates that cannot be loaded.
const EXIT_USAGE: u8 = 1;

/// The client settings from the environment (`SCANFLEET_SCANNER__*`) and flags.
fn client_config(args: &RunArgs) -> Result<ClientConfig, String> {
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
        cfg.connect_to = ClientConfig::parse_connect_to(&v).map_err(|e| e.to_string())?;
    }
    if let Some(v) = env("SCANFLEET_SCANNER__HOSTS") {
        cfg.hosts = ClientConfig::parse_hosts(&v).map_err(|e| e.to_string())?;
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
pub fn load_templates(paths: &[PathBuf]) -> Result<Vec<Arc<CompiledTemplate>>, String> {
    let started = std::time::Instant::now();
    let mut loaded = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    if paths.is_empty() {
        for (path, yaml) in crate::pack::default_pack() {
            match crate::template::parse_str(yaml, Path::new(path)) {
                Ok(t) => loaded.push(t),
                Err(e) => problems.push(format!("{path}: {e}")),
            }
        }
    }
    for path in paths {
        if path.is_dir() {
            let report = crate::template::load_dir(path);
            for failure in &report.failures {
                problems.push(failure.to_string());
            }
            loaded.extend(report.templates);
        } else {
            match crate::template::load_file(path) {
                Ok(t) => loaded.push(t),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
    // Checking and compiling (regexes, DSL) is CPU work: on rayon, as the
    // parsing was; the order of the templates is kept.
    let outcomes: Vec<Result<Arc<CompiledTemplate>, String>> = loaded
        .into_par_iter()
        .map(|t| {
            // The operators are checked by compiling them, once.
            if let Err(reason) = crate::template::check_before_compiling(&t) {
                return Err(format!("{}: not runnable: {reason}", t.id));
            }
            CompiledTemplate::compile(t)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .collect();
    let mut compiled = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(c) => compiled.push(c),
            Err(p) => problems.push(p),
        }
    }
    for p in &problems {
        eprintln!("warning: {p}");
    }
    eprintln!(
        "loaded {} template(s), {} runnable, in {:.3} s",
        compiled.len() + problems.len(),
        compiled.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(compiled)
}

/// Runs the subcommand; the exit code says how it went (0 ok, 1 usage or
/// template error, 2 a target refused by the address safety check).
pub async fn run_command(args: RunArgs) -> ExitCode {
    let fail = |msg: String, code: u8| {
        eprintln!("error: {msg}");
        ExitCode::from(code)
    };
    let client = match client_config(&args) {
        Ok(c) => c,
        Err(e) => return fail(e, EXIT_USAGE),
    };
    let variables = match parse_variables(&args.vars) {
        Ok(v) => v,
        Err(e) => return fail(e.to_string(), EXIT_USAGE),
    };
    let mut targets = Vec::new();
    for t in &args.targets {
        match TargetUrl::parse(t) {
            Ok(u) => targets.push(u),
            Err(e) => return fail(e.to_string(), EXIT_USAGE),
        }
    }
    let templates = match load_templates(&args.templates) {
        Ok(t) => t,
        Err(e) => return fail(e, EXIT_USAGE),
    };
    if templates.is_empty() {
        return fail("no runnable templates".to_string(), EXIT_USAGE);
    }
    let engine = match Engine::new(EngineConfig {
        template_concurrency: client.max_concurrency,
        client,
        variables,
        ..EngineConfig::default()
    }) {
        Ok(e) => e,
        Err(e) => return fail(e.to_string(), EXIT_USAGE),
    };
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let mut refused = false;
    let mut findings = 0usize;
    let mut failed = 0usize;
    let mut skipped = 0usize;
    // Not a held lock: the run is a task that may move between threads.
    let mut stdout = std::io::stdout();
    let jsonl = args.jsonl;
    let scan_started = std::time::Instant::now();
    let verbose = args.verbose;
    // Held to the end, so no template is freed during the scan: freeing
    // one (thousands of small allocations made on the loading threads) was
    // about a tenth of the scan's CPU. The process exits right after.
    let keep = templates.clone();
    engine
        .run_with(templates, targets, cancel, |ev| match ev {
            Event::Result(r) => {
                findings += 1;
                let line = if jsonl {
                    r.to_json_line()
                } else {
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
                };
                // A closed stdout (piped into `head`) is not worth a panic.
                let _ = writeln!(stdout, "{line}");
            }
            Event::Error(e) => match e.kind {
                TargetErrorKind::Refused => {
                    refused = true;
                    eprintln!("error: {e}");
                }
                TargetErrorKind::Request => {
                    failed += 1;
                    if verbose {
                        eprintln!("failed: {e}");
                    }
                }
                TargetErrorKind::Skipped => {
                    skipped += 1;
                    if verbose {
                        eprintln!("skipped: {e}");
                    }
                }
                TargetErrorKind::Flow => {
                    if verbose {
                        eprintln!("flow: {e}");
                    }
                }
            },
            Event::Progress { .. } => {}
        })
        .await;
    let _ = stdout.flush();
    // The process ends now; the OS takes the memory back faster than
    // freeing every template would.
    std::mem::forget(keep);
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
