//! `{{...}}` markers inside matcher words. Nuclei renders each word against
//! the response variables before searching for it (`{{randstr}}` echoed back,
//! `{{7*7}}` for template injection), so a word is either a literal, known at
//! compile time, or a sequence of text and compiled expressions.

use std::borrow::Cow;

use crate::dsl::{Expr, Vars};

#[derive(Debug)]
enum Segment {
    Text(String),
    Expr(Expr),
}

/// A word as written in the template, compiled once.
#[derive(Debug)]
pub(crate) struct Rendered {
    raw: Vec<u8>,
    /// Empty when the word holds no expression.
    segments: Vec<Segment>,
}

impl Rendered {
    pub(crate) fn compile(raw: Vec<u8>) -> Rendered {
        let segments = match std::str::from_utf8(&raw) {
            Ok(text) if text.contains("{{") => split(text),
            _ => Vec::new(),
        };
        Rendered { raw, segments }
    }

    pub(crate) fn is_literal(&self) -> bool {
        self.segments.is_empty()
    }

    pub(crate) fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The word with its expressions evaluated; `None` when one of them
    /// cannot be evaluated (an unknown variable), in which case Nuclei
    /// searches for the word as written.
    pub(crate) fn render(&self, ctx: &dyn Vars) -> Option<Cow<'_, [u8]>> {
        if self.segments.is_empty() {
            return Some(Cow::Borrowed(&self.raw));
        }
        let mut out = Vec::with_capacity(self.raw.len());
        for segment in &self.segments {
            match segment {
                Segment::Text(t) => out.extend_from_slice(t.as_bytes()),
                Segment::Expr(e) => {
                    let value = e.eval(ctx).ok()?;
                    out.extend_from_slice(&value.as_bytes());
                }
            }
        }
        Some(Cow::Owned(out))
    }
}

/// Splits `text` into literal text and `{{expression}}` segments. A marker
/// whose content does not parse stays literal text, braces included, so
/// words that quote other template languages (`{{.Version}}`) still work.
fn split(text: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    let mut any_expr = false;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        literal.push_str(&rest[..open]);
        let inner = &after[..close];
        match Expr::parse(inner.trim()) {
            // Literal-only markers (`{{7*7}}`) stay as written, as in Nuclei:
            // they are payload text to look for, not something to compute.
            Ok(expr) if !inner.trim().is_empty() && !expr.is_literal_only() => {
                if !literal.is_empty() {
                    segments.push(Segment::Text(std::mem::take(&mut literal)));
                }
                segments.push(Segment::Expr(expr));
                any_expr = true;
            }
            _ => {
                literal.push_str("{{");
                literal.push_str(inner);
                literal.push_str("}}");
            }
        }
        rest = &after[close + 2..];
    }
    if !any_expr {
        return Vec::new();
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Text(literal));
    }
    segments
}
