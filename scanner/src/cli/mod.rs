//! The `scanfleet-scanner` command line: `run`, `templates check`, `worker`.
//!
//! # Layout
//! - [`templates`]: `templates check DIR [--json]`.

pub mod templates;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Runs Nuclei-format HTTP templates against targets.
#[derive(Debug, Parser)]
#[command(name = "scanfleet-scanner", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run templates against targets and print findings.
    Run(scanfleet_scanner::engine::cli::RunArgs),
    /// Work with template files.
    Templates {
        #[command(subcommand)]
        command: TemplatesCommand,
    },
    /// Run as a scanner node that pulls jobs from Redis.
    Worker(NotYetAvailable),
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Load every template under a directory and report which ones can run.
    Check(templates::CheckArgs),
}

/// Arguments of a subcommand this build does not provide yet; accepted
/// as-is so the answer is the clear error below, not a usage error.
#[derive(Debug, Args)]
pub struct NotYetAvailable {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// Exit code when a subcommand is not available in this build.
const EXIT_UNAVAILABLE: u8 = 2;

fn not_yet_available(name: &str) -> ExitCode {
    eprintln!("error: `scanfleet-scanner {name}` is not yet available in this build");
    ExitCode::from(EXIT_UNAVAILABLE)
}

/// Dispatches a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(args) => scanfleet_scanner::engine::cli::run_blocking(args),
        Command::Worker(_) => not_yet_available("worker"),
        Command::Templates {
            command: TemplatesCommand::Check(args),
        } => templates::check(&args),
    }
}
