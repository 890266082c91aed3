//! Tracing set-up for the binaries: human-readable text by default, JSON
//! lines when `SCANFLEET_LOG_FORMAT=json`, filtered by `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// The filter when `RUST_LOG` is unset: our own lines and the libraries'
/// at `info`, but the DNS server's, which logs every query it answers
/// (two lines each) at `info`, only from `warn`.
pub const DEFAULT_FILTER: &str = "info,hickory_server=warn";

/// Installs the global subscriber. Safe to call more than once (later calls
/// are ignored), which tests that boot several apps rely on.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // Colours only for a person at a terminal: escape codes in a log file or
    // a collector's input are noise. The fmt layer writes to stdout.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
