//! Tracing set-up for the binaries: human-readable text by default, JSON
//! lines when `SCANFLEET_LOG_FORMAT=json`, filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// Installs the global subscriber. Safe to call more than once (later calls
/// are ignored), which tests that boot several apps rely on.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
