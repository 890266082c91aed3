//! `compare_versions(version, constraint, ...)` with the semantics of
//! hashicorp/go-version, which Nuclei uses: lenient version strings (`v1.2`,
//! `5.8.3.1`, `2.4.49-beta`), constraints joined with commas, and
//! pre-releases that only satisfy constraints that name a pre-release.

use std::cmp::Ordering;
use std::sync::OnceLock;

use regex::Regex;

use super::CallCtx;
use crate::dsl::error::{DslError, VersionError};
use crate::dsl::value::Value;

const VERSION_RAW: &str = concat!(
    r"v?([0-9]+(\.[0-9]+)*?)",
    r"(-([0-9]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)|(-?([A-Za-z\-~]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)))?",
    r"(\+([0-9A-Za-z\-~]+(\.[0-9A-Za-z\-~]+)*))?",
    r"?"
);

// The patterns below are constants; `compare_versions` tests compile them.
fn version_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!("^{VERSION_RAW}$")).unwrap_or_else(|e| panic!("version regex: {e}"))
    })
}

fn constraint_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(r"^\s*(>=|<=|!=|~>|=|>|<|)\s*({VERSION_RAW})\s*$"))
            .unwrap_or_else(|e| panic!("constraint regex: {e}"))
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    segments: Vec<i64>,
    /// How many segments were written (before padding to three).
    written: usize,
    pre: String,
    metadata: String,
}

impl Version {
    fn parse(v: &str) -> Result<Version, VersionError> {
        let caps = version_re()
            .captures(v)
            .ok_or_else(|| VersionError::MalformedVersion(v.to_string()))?;
        let seg_text = caps.get(1).map_or("", |m| m.as_str());
        let mut segments = Vec::new();
        for part in seg_text.split('.') {
            segments.push(part.parse::<i64>().map_err(VersionError::Segment)?);
        }
        let written = segments.len();
        while segments.len() < 3 {
            segments.push(0);
        }
        let pre = caps
            .get(7)
            .or_else(|| caps.get(4))
            .map_or(String::new(), |m| m.as_str().to_string());
        let metadata = caps
            .get(10)
            .map_or(String::new(), |m| m.as_str().to_string());
        Ok(Version {
            segments,
            written,
            pre,
            metadata,
        })
    }

    fn canonical(&self) -> String {
        let mut s = self
            .segments
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(".");
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            s.push('+');
            s.push_str(&self.metadata);
        }
        s
    }

    fn compare(&self, other: &Version) -> Ordering {
        if self.canonical() == other.canonical() {
            return Ordering::Equal;
        }
        if self.segments == other.segments {
            return match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prereleases(&self.pre, &other.pre),
            };
        }
        let longest = self.segments.len().max(other.segments.len());
        for i in 0..longest {
            match (self.segments.get(i), other.segments.get(i)) {
                (Some(a), Some(b)) => match a.cmp(b) {
                    Ordering::Equal => continue,
                    o => return o,
                },
                (None, Some(_)) => {
                    return if other.segments[i..].iter().all(|s| *s == 0) {
                        Ordering::Equal
                    } else {
                        Ordering::Less
                    }
                }
                (Some(_), None) => {
                    return if self.segments[i..].iter().all(|s| *s == 0) {
                        Ordering::Equal
                    } else {
                        Ordering::Greater
                    }
                }
                (None, None) => break,
            }
        }
        Ordering::Equal
    }
}

fn compare_part(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let an = a.parse::<i64>().ok();
    let bn = b.parse::<i64>().ok();
    if a.is_empty() {
        return if bn.is_some() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    if b.is_empty() {
        return if an.is_some() {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    match (an, bn) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => {
            if a > b {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Some(x), Some(y)) => {
            if x > y {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

fn compare_prereleases(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let ap: Vec<&str> = a.split('.').collect();
    let bp: Vec<&str> = b.split('.').collect();
    for i in 0..ap.len().max(bp.len()) {
        let x = ap.get(i).copied().unwrap_or("");
        let y = bp.get(i).copied().unwrap_or("");
        match compare_part(x, y) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Pessimistic,
}

struct Constraint {
    op: Op,
    check: Version,
}

impl Constraint {
    fn parse(s: &str) -> Result<Constraint, VersionError> {
        let caps = constraint_re()
            .captures(s)
            .ok_or_else(|| VersionError::MalformedConstraint(s.to_string()))?;
        let op = match caps.get(1).map_or("", |m| m.as_str()) {
            "" | "=" => Op::Eq,
            "!=" => Op::Ne,
            ">" => Op::Gt,
            "<" => Op::Lt,
            ">=" => Op::Ge,
            "<=" => Op::Le,
            _ => Op::Pessimistic,
        };
        let check = Version::parse(caps.get(2).map_or("", |m| m.as_str()))?;
        Ok(Constraint { op, check })
    }

    fn prerelease_ok(v: &Version, c: &Version) -> bool {
        match (!v.pre.is_empty(), !c.pre.is_empty()) {
            (true, true) => v.segments == c.segments,
            (true, false) => false,
            _ => true,
        }
    }

    fn check(&self, v: &Version) -> bool {
        let c = &self.check;
        match self.op {
            Op::Eq => v.compare(c) == Ordering::Equal,
            Op::Ne => v.compare(c) != Ordering::Equal,
            Op::Gt => Self::prerelease_ok(v, c) && v.compare(c) == Ordering::Greater,
            Op::Lt => Self::prerelease_ok(v, c) && v.compare(c) == Ordering::Less,
            Op::Ge => Self::prerelease_ok(v, c) && v.compare(c) != Ordering::Less,
            Op::Le => Self::prerelease_ok(v, c) && v.compare(c) != Ordering::Greater,
            Op::Pessimistic => {
                if !Self::prerelease_ok(v, c) || (!c.pre.is_empty() && v.pre.is_empty()) {
                    return false;
                }
                if v.compare(c) == Ordering::Less {
                    return false;
                }
                let cs = c.segments.len();
                if cs > v.segments.len() {
                    return false;
                }
                for i in 0..c.written.saturating_sub(1) {
                    if v.segments[i] != c.segments[i] {
                        return false;
                    }
                }
                c.segments[cs - 1] <= v.segments[cs - 1]
            }
        }
    }
}

/// Checks `version` against constraints such as `"< 5.8.3"` and `">= 5.0"`
/// (each may itself hold several, comma-separated). All must hold.
pub fn compare_versions(version: &str, constraints: &[&str]) -> Result<bool, VersionError> {
    let v = Version::parse(version)?;
    let joined = constraints.join(",");
    for single in joined.split(',') {
        if !Constraint::parse(single)?.check(&v) {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(super) fn compare_versions_helper(a: &[Value], _: &CallCtx) -> Result<Value, DslError> {
    let version = a[0].to_string_lossy();
    let constraints: Vec<String> = a[1..].iter().map(Value::to_string_lossy).collect();
    let refs: Vec<&str> = constraints.iter().map(String::as_str).collect();
    compare_versions(&version, &refs)
        .map(Value::Bool)
        .map_err(|e| DslError::bad_input("compare_versions", e))
}
