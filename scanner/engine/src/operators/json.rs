//! jq-style queries for `json` extractors, run by `jaq` (a jq clone in Rust).
//! The public corpus uses far more than plain paths (`select`, `//`,
//! string concatenation, `capture`, `split`, `to_entries`), so a full jq
//! implementation is used rather than a path subset.
//!
//! Output follows Nuclei: strings are emitted raw, every other value as the
//! JSON text Go's `encoding/json` writes; the first runtime error ends a
//! query's output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars as JqVars};
use jaq_json::{Num, Val};

use super::error::{JsonPathError, OperatorError};

type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// One compiled query. `jaq-json`'s `sync` feature makes the compiled filter
/// `Send + Sync`, so it is shared across rayon workers.
pub(crate) struct JsonQuery {
    source: String,
    filter: Filter,
}

impl std::fmt::Debug for JsonQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JsonQuery").field(&self.source).finish()
    }
}

/// Compiled queries by source. Compiling one loads and compiles jq's whole
/// standard library first, which made these queries a tenth of loading
/// the corpus; the runnability check and the engine compile each template's
/// operators, and templates repeat queries, so each is compiled once.
fn cache() -> &'static Mutex<HashMap<String, Arc<JsonQuery>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<JsonQuery>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl JsonQuery {
    /// [`JsonQuery::compile`], shared with every other use of the same
    /// source. Errors are not kept: a bad query fails again, quickly.
    pub(crate) fn compile_shared(source: &str) -> Result<Arc<JsonQuery>, OperatorError> {
        if let Some(found) = cache().lock().ok().and_then(|c| c.get(source).cloned()) {
            return Ok(found);
        }
        let query = Arc::new(JsonQuery::compile(source)?);
        if let Ok(mut cache) = cache().lock() {
            cache.insert(source.to_string(), query.clone());
        }
        Ok(query)
    }

    pub(crate) fn compile(source: &str) -> Result<JsonQuery, OperatorError> {
        let bad = |reason: JsonPathError| OperatorError::BadJsonPath {
            query: source.to_string(),
            reason,
        };
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let program = File {
            code: source,
            path: (),
        };
        let modules = loader.load(&arena, program).map_err(|errs| {
            bad(JsonPathError::Parse {
                count: errs.len(),
                first: first_error(&errs),
            })
        })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                bad(JsonPathError::Compile {
                    count: errs.len(),
                    first: first_error(&errs),
                })
            })?;
        Ok(JsonQuery {
            source: source.to_string(),
            filter,
        })
    }

    /// Appends the query's outputs on `input` to `out`.
    pub(crate) fn run(&self, input: &Val, out: &mut Vec<String>) {
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, JqVars::new([]));
        for item in self.filter.id.run((ctx, input.clone())).map(unwrap_valr) {
            let Ok(value) = item else {
                break;
            };
            out.push(match &value {
                Val::TStr(s) | Val::BStr(s) => String::from_utf8_lossy(s).into_owned(),
                other => {
                    let mut text = String::new();
                    write_go_json(other, &mut text);
                    text
                }
            });
        }
    }
}

/// Writes a value as Go's `encoding/json` does, which is what Nuclei prints
/// for non-string results: object keys sorted, integers without a fraction,
/// floats in their shortest form with Go's exponent style.
fn write_go_json(value: &Val, out: &mut String) {
    match value {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Num(n) => out.push_str(&go_number(n)),
        Val::TStr(s) | Val::BStr(s) => write_json_string(&String::from_utf8_lossy(s), out),
        Val::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Val::Obj(map) => {
            let mut entries: Vec<(String, &Val)> = map
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Val::TStr(s) | Val::BStr(s) => String::from_utf8_lossy(s).into_owned(),
                        other => other.to_string(),
                    };
                    (key, v)
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (key, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(&key, out);
                out.push(':');
                write_go_json(v, out);
            }
            out.push('}');
        }
    }
}

fn go_number(n: &Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::BigInt(i) => i.to_string(),
        Num::Float(f) => go_float(*f),
        Num::Dec(text) => text
            .parse::<f64>()
            .map(go_float)
            .unwrap_or_else(|_| text.to_string()),
    }
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`, switching to `1e+21` / `1e-07`
/// style outside [1e-6, 1e21) as `encoding/json` does.
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_string();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        if let Some((mantissa, exponent)) = text.split_once('e') {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exponent),
            };
            return format!("{mantissa}e{sign}{digits:0>2}");
        }
        return text;
    }
    format!("{f}")
}

fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses a response part as one JSON document; `None` when it is not JSON.
pub(crate) fn parse(corpus: &[u8]) -> Option<Val> {
    jaq_json::read::parse_single(corpus).ok()
}

fn first_error<T: std::fmt::Debug>(errs: &[T]) -> String {
    let text = errs.first().map(|e| format!("{e:?}")).unwrap_or_default();
    text.chars().take(200).collect()
}
