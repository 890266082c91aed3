//! `templates check DIR [--json]`: load a template tree and report totals
//! and the reasons templates cannot run, grouped.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use scanfleet_common::chain::Chain;
use scanfleet_engine::template::{check_dir_for, CheckSummary};

use super::oob::InteractshArgs;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Directory of templates (`.yaml`/`.yml`, searched recursively).
    pub dir: PathBuf,
    /// Print one JSON object: found, parsed, runnable, unrunnable by reason.
    #[arg(long)]
    pub json: bool,
    /// Also list each file that failed to parse, with line and column.
    #[arg(long)]
    pub errors: bool,
    /// With `--interactsh-server` (and no `--no-interactsh`), out-of-band
    /// templates count as runnable: the check is told a server is
    /// configured. Nothing is contacted.
    #[command(flatten)]
    pub interactsh: InteractshArgs,
}

/// Exit code when the directory cannot be read at all.
const EXIT_BAD_DIR: u8 = 1;

/// Runs the check; exits 0 whenever the check ran, whatever it found.
pub fn check(args: &CheckArgs) -> ExitCode {
    if !args.dir.is_dir() {
        eprintln!("error: {} is not a directory", args.dir.display());
        return ExitCode::from(EXIT_BAD_DIR);
    }
    let (report, summary) = check_dir_for(&args.dir, args.interactsh.check_options());
    for e in &report.walk_errors {
        eprintln!("warning: {}", Chain(e));
    }
    if args.errors {
        for e in &report.failures {
            eprintln!("{}", Chain(e));
        }
    }
    let out = if args.json {
        match serde_json::to_string(&summary) {
            Ok(s) => s + "\n",
            Err(e) => {
                eprintln!("error: cannot encode the summary: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        table(&summary)
    };
    // A closed pipe (`| head`) is not worth a panic.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    ExitCode::SUCCESS
}

/// The human-readable report: totals, then reasons by count.
fn table(s: &CheckSummary) -> String {
    let mut out = String::new();
    out.push_str(&format!("found     {:>7}\n", s.found));
    out.push_str(&format!("parsed    {:>7}\n", s.parsed));
    out.push_str(&format!(
        "runnable  {:>7}  ({:.1}%)\n",
        s.runnable,
        s.runnable_percent()
    ));
    let reasons = s.reasons_by_count();
    if !reasons.is_empty() {
        let unrunnable: usize = reasons.iter().map(|(_, n)| n).sum();
        out.push_str(&format!("\nnot runnable: {unrunnable}\n"));
        out.push_str(&format!("{:>7}  {}\n", "count", "reason"));
        for (reason, n) in reasons {
            out.push_str(&format!("{n:>7}  {reason}\n"));
        }
    }
    out
}
