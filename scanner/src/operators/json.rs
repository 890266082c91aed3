//! jq-style queries for `json` extractors, run by `jaq` (a jq clone in Rust).
//! The public corpus uses far more than plain paths (`select`, `//`,
//! string concatenation, `capture`, `split`, `to_entries`), so a full jq
//! implementation is used rather than a path subset.
//!
//! Output follows Nuclei: strings are emitted raw, every other value as its
//! JSON text; the first runtime error ends a query's output.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars as JqVars};
use jaq_json::Val;

use super::error::OperatorError;

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

impl JsonQuery {
    pub(crate) fn compile(source: &str) -> Result<JsonQuery, OperatorError> {
        let bad = |reason: String| OperatorError::BadJsonPath {
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
            bad(format!(
                "does not parse ({} error(s): {:?})",
                errs.len(),
                first_error(&errs)
            ))
        })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                bad(format!(
                    "does not compile ({} error(s): {:?})",
                    errs.len(),
                    first_error(&errs)
                ))
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
                other => other.to_string(),
            });
        }
    }
}

/// Parses a response part as one JSON document; `None` when it is not JSON.
pub(crate) fn parse(corpus: &[u8]) -> Option<Val> {
    jaq_json::read::parse_single(corpus).ok()
}

fn first_error<T: std::fmt::Debug>(errs: &[T]) -> String {
    let text = errs.first().map(|e| format!("{e:?}")).unwrap_or_default();
    text.chars().take(200).collect()
}
