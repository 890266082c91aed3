//! Strings with `{{...}}` (and `§name§`) markers: paths, headers, bodies and
//! payload values. Parsed once; rendered per request.
//!
//! Rendering follows Nuclei's `expressions.Evaluate`:
//! - `{{name}}` whose exact text is a defined variable becomes its value
//!   (this is how hyphenated names like `{{interactsh-url}}` resolve);
//! - otherwise a marker holding an expression that reads a variable or calls
//!   a helper is evaluated (`{{base64(username)}}`, `{{md5({{num}})}}`);
//! - a marker with only literals (`{{7*7}}`, a classic template-injection
//!   probe) stays as written, so does anything that does not parse;
//! - a marker that cannot be resolved stays as written and its variable
//!   names are reported in [`Rendered::unresolved`].
//!
//! Values substituted into the output are never re-read as markers.

use std::collections::BTreeSet;

use super::error::DslError;
use super::expr::Expr;
use super::value::Bytes;
use super::vars::Vars;

const SECTION: &str = "§";

#[derive(Debug, Clone)]
enum Part {
    Text(Bytes),
    Marker(Marker),
}

#[derive(Debug, Clone)]
struct Marker {
    /// The marker as written, braces included, emitted when unresolved.
    raw: Box<str>,
    /// The text between the braces.
    inner: Box<str>,
    /// The inner text parsed as an expression, when it is one.
    expr: Option<Expr>,
    /// `§name§` markers only ever name a variable.
    name_only: bool,
    /// The expression has neither variables nor helper calls, so it is
    /// left as written (computed once here, not per render).
    literal_only: bool,
    /// `inner` is a bare name, looked up as is before anything else
    /// (computed once here, not per render).
    simple: bool,
}

/// A parsed template string.
#[derive(Debug, Clone)]
pub struct TemplateString {
    src: Box<str>,
    parts: Vec<Part>,
    /// Room a render starts with: the text and a short value per marker,
    /// so that most renders never grow their buffer.
    room: usize,
}

/// The result of rendering a [`TemplateString`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub bytes: Vec<u8>,
    /// Variables that markers needed and the scope did not define, in order
    /// of first appearance, without repeats. Their markers were kept verbatim.
    pub unresolved: Vec<String>,
    /// Markers whose expression failed for another reason (a helper rejected
    /// its input, an unsupported helper...), with the error. Kept verbatim.
    pub errors: Vec<(String, DslError)>,
}

impl Rendered {
    /// True when every marker was resolved.
    pub fn is_complete(&self) -> bool {
        self.unresolved.is_empty() && self.errors.is_empty()
    }

    pub fn into_string_lossy(self) -> String {
        String::from_utf8(self.bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

fn is_simple_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

impl TemplateString {
    /// Parses a template string. This never fails on odd markers (they are
    /// kept as text, as Nuclei does); the `Result` is for future strictness
    /// and for symmetry with [`Expr::parse`].
    pub fn parse(src: &str) -> Result<TemplateString, DslError> {
        let mut parts = Vec::new();
        let mut text_start = 0;
        let mut i = 0;
        let bytes = src.as_bytes();
        while i < bytes.len() {
            if bytes[i..].starts_with(b"{{") {
                if let Some((marker, end)) = brace_marker(src, i) {
                    if text_start < i {
                        parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..i])));
                    }
                    parts.push(Part::Marker(marker));
                    i = end;
                    text_start = end;
                    continue;
                }
                i += 2;
                continue;
            }
            if bytes[i..].starts_with(SECTION.as_bytes()) {
                let after = i + SECTION.len();
                if let Some(close) = src[after..].find(SECTION) {
                    let name = &src[after..after + close];
                    if is_simple_name(name) {
                        if text_start < i {
                            parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..i])));
                        }
                        let end = after + close + SECTION.len();
                        parts.push(Part::Marker(Marker {
                            raw: src[i..end].into(),
                            inner: name.into(),
                            expr: None,
                            name_only: true,
                            literal_only: false,
                            simple: true,
                        }));
                        i = end;
                        text_start = end;
                        continue;
                    }
                }
                i = after;
                continue;
            }
            i += 1;
        }
        if text_start < bytes.len() {
            parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..])));
        }
        let room = parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                Part::Marker(_) => 32,
            })
            .sum();
        Ok(TemplateString {
            src: src.into(),
            parts,
            room,
        })
    }

    pub fn source(&self) -> &str {
        &self.src
    }

    /// True when the string has no marker at all: rendering returns it as is.
    pub fn is_plain(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Variables the markers read, sorted, without repeats. A marker that is
    /// a bare name (`{{interactsh-url}}`) counts as that one name.
    pub fn variables(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for part in &self.parts {
            if let Part::Marker(m) = part {
                out.extend(m.variables());
            }
        }
        out.into_iter().collect()
    }

    /// Helpers the markers call, sorted, without repeats.
    pub fn functions(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for part in &self.parts {
            if let Part::Marker(Marker { expr: Some(e), .. }) = part {
                out.extend(e.functions());
            }
        }
        out.into_iter().collect()
    }

    /// Renders against a scope. Never fails: what cannot be resolved is
    /// kept verbatim and reported in the result.
    pub fn render(&self, vars: &dyn Vars) -> Rendered {
        let mut out = Rendered {
            bytes: Vec::with_capacity(self.room),
            ..Rendered::default()
        };
        for part in &self.parts {
            match part {
                Part::Text(t) => out.bytes.extend_from_slice(t),
                Part::Marker(m) => m.render(vars, &mut out),
            }
        }
        out
    }
}

impl Marker {
    fn variables(&self) -> Vec<String> {
        match &self.expr {
            _ if self.name_only => vec![self.inner.to_string()],
            Some(e) if !is_simple_name(self.inner.trim()) => e.variables(),
            Some(_) if self.literal_only => Vec::new(),
            _ if is_simple_name(self.inner.trim()) => vec![self.inner.trim().to_string()],
            _ => Vec::new(),
        }
    }

    fn render(&self, vars: &dyn Vars, out: &mut Rendered) {
        // Exact-name substitution first (Nuclei's replacer); only names can
        // be keys, so expressions skip the lookup.
        if self.simple {
            if let Some(v) = vars.get(&self.inner) {
                out.bytes.extend_from_slice(&v.as_bytes());
                return;
            }
        }
        let keep = |out: &mut Rendered| out.bytes.extend_from_slice(self.raw.as_bytes());
        let note = |out: &mut Rendered, name: String| {
            if !out.unresolved.contains(&name) {
                out.unresolved.push(name);
            }
        };
        if self.name_only {
            keep(out);
            note(out, self.inner.to_string());
            return;
        }
        let Some(expr) = &self.expr else {
            keep(out);
            let trimmed = self.inner.trim();
            if is_simple_name(trimmed) {
                note(out, trimmed.to_string());
            }
            return;
        };
        if self.literal_only {
            keep(out);
            return;
        }
        match expr.eval(vars) {
            Ok(v) => out.bytes.extend_from_slice(&v.as_bytes()),
            Err(DslError::UndefinedVariable(missing)) => {
                keep(out);
                let trimmed = self.inner.trim();
                if is_simple_name(trimmed) {
                    note(out, trimmed.to_string());
                } else {
                    let mut any = false;
                    for name in expr.variables() {
                        if !vars.contains(&name) {
                            note(out, name);
                            any = true;
                        }
                    }
                    if !any {
                        note(out, missing);
                    }
                }
            }
            Err(e) => {
                keep(out);
                out.errors.push((self.inner.to_string(), e));
            }
        }
    }
}

/// Finds the marker opening at `open`: the first closing `}}` whose enclosed
/// text parses as an expression, or failing that, the first `}}` when the
/// text is a bare name such as `interactsh-url` (`a-b` would otherwise read
/// as a subtraction, which still parses, so this is only for the rest).
fn brace_marker(src: &str, open: usize) -> Option<(Marker, usize)> {
    let inner_start = open + 2;
    let mut search = inner_start;
    let mut first: Option<usize> = None;
    // Bounded so a stray `{{` before a large JSON body (full of `}}`) costs
    // a few parse attempts, not one per closing pair.
    let mut attempts = 0;
    while let Some(rel) = src[search..].find("}}") {
        attempts += 1;
        if attempts > 32 {
            break;
        }
        let close = search + rel;
        // `}}}` closes on the last pair: `{{a}}}` is `{{a}}` then `}`, but
        // `{{md5({{a}})}}}` needs the inner pair; the parse check decides.
        let inner = &src[inner_start..close];
        first.get_or_insert(close);
        if !inner.trim().is_empty() {
            if let Ok(expr) = Expr::parse(inner) {
                return Some((
                    Marker {
                        raw: src[open..close + 2].into(),
                        inner: inner.into(),
                        literal_only: expr.is_literal_only(),
                        expr: Some(expr),
                        name_only: false,
                        simple: is_simple_name(inner),
                    },
                    close + 2,
                ));
            }
        }
        search = close + 1;
    }
    let close = first?;
    let inner = &src[inner_start..close];
    if inner.contains("{{") || inner.trim().is_empty() {
        return None;
    }
    Some((
        Marker {
            raw: src[open..close + 2].into(),
            inner: inner.into(),
            expr: None,
            name_only: false,
            literal_only: false,
            simple: is_simple_name(inner),
        },
        close + 2,
    ))
}
