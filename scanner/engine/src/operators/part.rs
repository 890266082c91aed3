//! Which piece of the response a matcher or extractor reads (`part:`), and a
//! per-evaluation cache so that each part is fetched from the context once
//! even when many matchers read it.

use std::cell::OnceCell;

use crate::dsl::{Value, Vars};

/// A resolved `part:` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartKey {
    /// A context variable read as is (`body`, `content_type`, `body_2`,
    /// a response header, an extracted value, ...).
    Named(String),
    /// `header`: the status line and headers. Nuclei reads `all_headers`.
    Header,
    /// `all`: headers and body together.
    All,
    /// `response` / `raw`: the raw response, headers and body.
    Response,
}

impl PartKey {
    pub(crate) fn parse(part: Option<&str>) -> PartKey {
        match part.map(str::trim) {
            None | Some("") | Some("body") => PartKey::Named("body".to_string()),
            Some("header") | Some("all_headers") => PartKey::Header,
            Some("all") => PartKey::All,
            Some("response") | Some("raw") => PartKey::Response,
            Some(other) => PartKey::Named(other.to_string()),
        }
    }

    /// Reads the part from the context; `None` when the response has no such
    /// part, which makes the matcher fail rather than error.
    pub(crate) fn resolve(&self, ctx: &dyn Vars) -> Option<Value> {
        match self {
            PartKey::Named(name) => ctx.get(name),
            PartKey::Header => ctx.get("all_headers").or_else(|| ctx.get("header")),
            // Nuclei concatenates body and headers for `all`; the raw
            // response holds the same bytes (headers first) without building
            // a new buffer per evaluation.
            PartKey::All => ctx
                .get("all")
                .or_else(|| ctx.get("response"))
                .or_else(|| join_headers_and_body(ctx)),
            PartKey::Response => ctx
                .get("response")
                .or_else(|| ctx.get("raw"))
                .or_else(|| ctx.get("all"))
                .or_else(|| join_headers_and_body(ctx)),
        }
    }
}

/// Builds `all` when the context does not carry it.
fn join_headers_and_body(ctx: &dyn Vars) -> Option<Value> {
    let headers = ctx.get("all_headers").or_else(|| ctx.get("header"));
    let body = ctx.get("body");
    if headers.is_none() && body.is_none() {
        return None;
    }
    let mut joined = Vec::new();
    if let Some(h) = &headers {
        joined.extend_from_slice(&h.as_bytes());
    }
    if let Some(b) = &body {
        joined.extend_from_slice(&b.as_bytes());
    }
    Some(Value::str(joined))
}

/// A part together with its slot in the per-evaluation cache.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub(crate) key: PartKey,
    pub(crate) slot: usize,
}

impl Part {
    pub(crate) fn new(part: Option<&str>) -> Part {
        Part {
            key: PartKey::parse(part),
            slot: 0,
        }
    }
}

/// Values of the parts read during one evaluation. Lives on the evaluating
/// thread's stack only, so plain cells suffice.
pub(crate) struct PartCache<'a> {
    ctx: &'a dyn Vars,
    cells: Vec<OnceCell<Option<Value>>>,
}

impl<'a> PartCache<'a> {
    pub(crate) fn new(ctx: &'a dyn Vars, slots: usize) -> PartCache<'a> {
        PartCache {
            ctx,
            cells: (0..slots.max(1)).map(|_| OnceCell::new()).collect(),
        }
    }

    pub(crate) fn ctx(&self) -> &'a dyn Vars {
        self.ctx
    }

    pub(crate) fn get(&self, part: &Part) -> Option<&Value> {
        match self.cells.get(part.slot) {
            Some(cell) => cell.get_or_init(|| part.key.resolve(self.ctx)).as_ref(),
            // Callers size the cache from the slots they assigned, so this
            // arm is unreachable in practice; reading nothing is the safe answer.
            None => None,
        }
    }
}

/// Assigns cache slots so that matchers reading the same part share one.
pub(crate) fn assign_slots<'p>(parts: impl Iterator<Item = &'p mut Part>) -> usize {
    let mut seen: Vec<PartKey> = Vec::new();
    for part in parts {
        part.slot = match seen.iter().position(|k| *k == part.key) {
            Some(i) => i,
            None => {
                seen.push(part.key.clone());
                seen.len() - 1
            }
        };
    }
    seen.len()
}
