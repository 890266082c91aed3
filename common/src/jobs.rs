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
    /// One finding's template against its host (the job's `templates`
    /// and `domain`); started by a retest, never by `POST /scans`.
    Retest,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Full, Engine::Quick, Engine::Recon];

    pub fn parse(value: &str) -> Option<Engine> {
        match value {
            "full" => Some(Engine::Full),
            "quick" => Some(Engine::Quick),
            "recon" => Some(Engine::Recon),
            "retest" => Some(Engine::Retest),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Full => "full",
            Engine::Quick => "quick",
            Engine::Recon => "recon",
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
