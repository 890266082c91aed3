//! The `scanfleet-scanner` command line: `run`, `templates check`, `worker`.
//!
//! # Layout
//! - [`oob`]: the out-of-band (interactsh) flags.
//! - [`run`]: `run -t TEMPLATES -u URL`: templates in, findings out.
//! - [`templates`]: `templates check DIR [--json]`.
//! - [`map`]: `templates map [DIR...]`: the `auto` engine's technology map.
//! - [`worker`]: the scanner node.

pub mod map;
pub mod oob;
pub mod run;
pub mod templates;
pub mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Run(run::RunArgs),
    /// Work with template files.
    Templates {
        #[command(subcommand)]
        command: TemplatesCommand,
    },
    /// Run as a scanner node that pulls jobs from Redis.
    Worker,
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Load every template under a directory and report which ones can run.
    Check(templates::CheckArgs),
    /// Print the technology -> templates map the `auto` engine uses.
    Map(map::MapArgs),
}

/// Dispatches a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(args) => run::run_blocking(args),
        Command::Worker => worker::worker(),
        Command::Templates {
            command: TemplatesCommand::Check(args),
        } => templates::check(&args),
        Command::Templates {
            command: TemplatesCommand::Map(args),
        } => map::map(&args),
    }
}
