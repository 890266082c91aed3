//! The out-of-band flags, under Nuclei's own names: `--interactsh-server`
//! (`-iserver`), `--interactsh-token` (`-itoken`), the poll, cooldown and
//! eviction periods, `--no-interactsh` (`-ni`). Shared by `run` and
//! `templates check`.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use scanfleet_engine::engine::{Interactsh, OobTiming};
use scanfleet_engine::template::CheckOptions;
use scanfleet_interactsh::{ClientError, Session, SessionConfig};

/// Nuclei's single-dash spellings, rewritten to the long flags before clap
/// reads the command line (clap's short flags are one character).
const NUCLEI_SPELLINGS: [(&str, &str); 3] = [
    ("-iserver", "--interactsh-server"),
    ("-itoken", "--interactsh-token"),
    ("-ni", "--no-interactsh"),
];

/// The command line with Nuclei's single-dash flags in their long form
/// (`-iserver=URL` too); everything else as given.
pub fn nuclei_spellings(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    args.into_iter()
        .map(|arg| {
            let Some(text) = arg.to_str() else {
                return arg;
            };
            for (short, long) in NUCLEI_SPELLINGS {
                if text == short {
                    return OsString::from(long);
                }
                if let Some(value) = text.strip_prefix(short).and_then(|r| r.strip_prefix('=')) {
                    return OsString::from(format!("{long}={value}"));
                }
            }
            arg
        })
        .collect()
}

#[derive(Debug, Clone, clap::Args)]
pub struct InteractshArgs {
    /// Interactsh server for out-of-band templates (ours, scanfleet-oob, or
    /// any interactsh v1.x server), e.g. https://oob.example.com; also
    /// `-iserver`. Without it, out-of-band templates are not run.
    #[arg(long = "interactsh-server", value_name = "URL")]
    pub server: Option<String>,
    /// The zone payload hosts are made under, when it is not the server
    /// URL's host (a server reached on loopback or an internal name).
    #[arg(long = "interactsh-domain", value_name = "DOMAIN")]
    pub domain: Option<String>,
    /// The server's token (sent as the Authorization header); also `-itoken`.
    #[arg(long = "interactsh-token", value_name = "TOKEN")]
    pub token: Option<String>,
    /// Seconds between two polls of the server.
    #[arg(
        long = "interactions-poll-duration",
        value_name = "SECS",
        default_value_t = 5
    )]
    pub poll_secs: u64,
    /// Seconds a run waits at its end for late interactions.
    #[arg(
        long = "interactions-cooldown-period",
        value_name = "SECS",
        default_value_t = 5
    )]
    pub cooldown_secs: u64,
    /// Seconds a request waits for its interactions (and an early
    /// interaction for its request).
    #[arg(
        long = "interactions-eviction",
        value_name = "SECS",
        default_value_t = 60
    )]
    pub eviction_secs: u64,
    /// Do not use an interactsh server even if one is given; also `-ni`.
    #[arg(long = "no-interactsh")]
    pub disabled: bool,
}

impl InteractshArgs {
    /// The server to use: none with `--no-interactsh`.
    pub fn server(&self) -> Option<&str> {
        self.server
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty() && !self.disabled)
    }

    /// How templates are checked: out-of-band ones run when a server is set.
    pub fn check_options(&self) -> CheckOptions {
        CheckOptions {
            interactsh: self.server().is_some(),
        }
    }

    pub fn timing(&self) -> OobTiming {
        OobTiming {
            poll: Duration::from_secs(self.poll_secs.max(1)),
            cooldown: Duration::from_secs(self.cooldown_secs),
            eviction: Duration::from_secs(self.eviction_secs.max(1)),
        }
    }

    /// Registers a session with the server, if one is configured.
    pub async fn register(&self) -> Result<Option<Interactsh>, ClientError> {
        let Some(server) = self.server() else {
            return Ok(None);
        };
        let session = Session::register_with(SessionConfig {
            server_url: server.to_string(),
            token: self.token.clone().filter(|t| !t.trim().is_empty()),
            payload_domain: self.domain.clone().filter(|d| !d.trim().is_empty()),
            ..SessionConfig::default()
        })
        .await?;
        Ok(Some(Interactsh {
            session: Arc::new(session),
            timing: self.timing(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nuclei_single_dash_flags_become_the_long_ones() {
        let args = ["x", "-iserver", "http://a", "-itoken=t", "-ni", "-u", "-ix"];
        let out = nuclei_spellings(args.iter().map(OsString::from));
        let out: Vec<&str> = out.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            out,
            [
                "x",
                "--interactsh-server",
                "http://a",
                "--interactsh-token=t",
                "--no-interactsh",
                "-u",
                "-ix"
            ]
        );
    }
}
