//! The job a scanner node takes from the queue.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Scan engines: which stages and templates a scan runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Discovery, HTTP probe, every template.
    Full,
    /// The domain itself, HTTP probe, templates of severity medium and above.
    Quick,
    /// Discovery and probe, technology findings only.
    Recon,
    /// Discovery, probe, technology detection, then per host the templates
    /// of its technologies plus a technology-independent baseline.
    Auto,
    /// One finding's template against its host (the job's `templates`
    /// and `domain`); started by a retest, never by `POST /scans`.
    Retest,
}

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Full, Engine::Quick, Engine::Recon, Engine::Auto];

    pub fn parse(value: &str) -> Option<Engine> {
        match value {
            "full" => Some(Engine::Full),
            "quick" => Some(Engine::Quick),
            "recon" => Some(Engine::Recon),
            "auto" => Some(Engine::Auto),
            "retest" => Some(Engine::Retest),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Full => "full",
            Engine::Quick => "quick",
            Engine::Recon => "recon",
            Engine::Auto => "auto",
            Engine::Retest => "retest",
        }
    }
}

/// Pushed by the api (and the scheduler) for every created scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanJob {
    pub scan_id: Uuid,
    pub target_id: Uuid,
    pub domain: String,
    pub engine: Engine,
    /// Only these templates run (by id); every template of the engine's
    /// selection when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<String>,
    /// The target's ceiling on requests a second to any one of its hosts,
    /// across all of the scan's work; the node's own
    /// (`SCANFLEET_SCANNER__PER_HOST_RPS`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rps_per_host: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_round_trip_through_their_names() {
        for e in Engine::ALL {
            assert_eq!(Engine::parse(e.as_str()), Some(e));
        }
        assert_eq!(Engine::parse("retest"), Some(Engine::Retest));
        assert_eq!(Engine::parse("deep"), None);
        assert_eq!(Engine::parse("FULL"), None);
    }
}
