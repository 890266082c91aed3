//! Finding severities. Anything outside the five known values is `info`, both
//! from templates and from events, so a typo in a template never loses a
//! finding.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
    /// Also what any unknown value in an event or template becomes.
    #[serde(other)]
    Info,
}

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ];

    /// Normalises any text to a severity; unknown or empty values become `Info`.
    pub fn normalize(value: &str) -> Severity {
        match value.trim().to_ascii_lowercase().as_str() {
            "critical" => Severity::Critical,
            "high" => Severity::High,
            "medium" => Severity::Medium,
            "low" => Severity::Low,
            _ => Severity::Info,
        }
    }

    /// The severity of exactly this name, as stored: no normalisation.
    pub fn parse(value: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|s| s.as_str() == value)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }

    /// Sort rank: critical first.
    pub fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_severities_normalise_to_info() {
        assert_eq!(Severity::normalize("CRITICAL"), Severity::Critical);
        assert_eq!(Severity::normalize(" high "), Severity::High);
        assert_eq!(Severity::normalize("unknown"), Severity::Info);
        assert_eq!(Severity::normalize(""), Severity::Info);
        assert_eq!(Severity::normalize("severe"), Severity::Info);
    }

    #[test]
    fn unknown_severities_in_json_become_info() {
        let s: Vec<Severity> = serde_json::from_str(r#"["high", "severe", "unknown"]"#).unwrap();
        assert_eq!(s, vec![Severity::High, Severity::Info, Severity::Info]);
    }

    #[test]
    fn critical_sorts_before_info() {
        let mut v = vec![Severity::Info, Severity::Critical, Severity::Low];
        v.sort();
        assert_eq!(v, vec![Severity::Critical, Severity::Low, Severity::Info]);
    }
}
