//! `scanfleet-scanner`: the scanner as a standalone tool. Parsing and
//! dispatch live in [`cli`]; the work itself is in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    cli::run(cli::Cli::parse())
}
