//! Compiled extractors: pull values out of a response, following Nuclei's
//! `pkg/operators/extractors`. Values come out deduplicated in the order
//! they were found.

use std::collections::HashSet;
use std::sync::Arc;

use super::defs::{ExtractorDef, StringOrList};
use super::error::OperatorError;
use super::json::{self, JsonQuery};
use super::matcher::compile_dsl;
use super::part::{Part, PartCache};
use super::xpath::{self, XPathQueries};
use crate::dsl::{Expr, Value, Vars};
use crate::goregex::{self, LazyRegex};

/// A compiled extractor, shared across rayon workers.
#[derive(Debug)]
pub struct Extractor {
    name: Option<String>,
    internal: bool,
    case_insensitive: bool,
    pub(crate) part: Part,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Regex {
        regexes: Vec<Arc<LazyRegex>>,
        group: usize,
    },
    /// Variable names lowercased, as written and with `-` turned into `_`:
    /// headers are exposed in snake case, cookies under their own name.
    Kval(Vec<(String, String)>),
    Json(Vec<Arc<JsonQuery>>),
    XPath {
        queries: XPathQueries,
        attribute: Option<String>,
    },
    Dsl(Vec<Expr>),
}

fn values(
    list: &Option<StringOrList>,
    kind: &str,
    field: &'static str,
) -> Result<Vec<String>, OperatorError> {
    let items = list.as_ref().map(StringOrList::to_vec).unwrap_or_default();
    if items.is_empty() {
        Err(OperatorError::MissingValues {
            kind: format!("{kind} extractor"),
            field,
        })
    } else {
        Ok(items)
    }
}

impl Extractor {
    /// Compiles an extractor: regexes, jq queries, XPath queries and DSL
    /// expressions are all checked and built here, once.
    pub fn compile(def: &ExtractorDef) -> Result<Extractor, OperatorError> {
        let kind_name = def.kind.trim();
        let kind = match kind_name {
            "regex" => {
                let regexes = values(&def.regex, kind_name, "regex")?
                    .iter()
                    .map(|p| goregex::compile_lazy(p))
                    .collect::<Result<Vec<_>, _>>()?;
                Kind::Regex {
                    regexes,
                    group: def.group.unwrap_or(0),
                }
            }
            "kval" => Kind::Kval(
                values(&def.kval, kind_name, "kval")?
                    .iter()
                    .map(|k| {
                        let key = k.trim().to_lowercase();
                        let snake = key.replace('-', "_");
                        (key, snake)
                    })
                    .collect(),
            ),
            "json" => Kind::Json(
                values(&def.json, kind_name, "json")?
                    .iter()
                    .map(|q| JsonQuery::compile_shared(q))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            "xpath" => Kind::XPath {
                queries: XPathQueries::compile(values(&def.xpath, kind_name, "xpath")?)?,
                attribute: def.attribute.clone().filter(|a| !a.is_empty()),
            },
            "dsl" => Kind::Dsl(compile_dsl(&values(&def.dsl, kind_name, "dsl")?)?),
            other => return Err(OperatorError::UnknownExtractorType(other.to_string())),
        };
        Ok(Extractor {
            name: def.name.clone().filter(|n| !n.is_empty()),
            internal: def.internal,
            case_insensitive: def.case_insensitive,
            part: Part::new(def.part.as_deref()),
            kind,
        })
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Internal extractors feed later requests and are never reported.
    pub fn is_internal(&self) -> bool {
        self.internal
    }

    /// Extracts values from a response context.
    pub fn extract(&self, ctx: &dyn Vars) -> Vec<String> {
        let cache = PartCache::new(ctx, self.part.slot + 1);
        self.extract_cached(&cache)
    }

    pub(crate) fn extract_cached(&self, cache: &PartCache<'_>) -> Vec<String> {
        let mut found = Vec::new();
        match &self.kind {
            Kind::Kval(keys) => {
                for (key, snake) in keys {
                    let value = cache.ctx().get(key).or_else(|| cache.ctx().get(snake));
                    if let Some(value) = value {
                        found.push(value.to_string_lossy());
                    }
                }
            }
            Kind::Dsl(exprs) => {
                for expr in exprs {
                    // A missing variable or failing helper yields nothing for
                    // that expression; the others still run.
                    match expr.eval(cache.ctx()) {
                        Ok(Value::Null) | Err(_) => {}
                        Ok(value) => {
                            let text = value.to_string_lossy();
                            if !text.is_empty() {
                                found.push(text);
                            }
                        }
                    }
                }
            }
            _ => {
                let Some(part) = cache.get(&self.part) else {
                    return Vec::new();
                };
                let corpus = part.as_bytes();
                match &self.kind {
                    Kind::Regex { regexes, group } => {
                        extract_regex(regexes, *group, &corpus, &mut found)
                    }
                    Kind::Json(queries) => {
                        if let Some(document) = json::parse(&corpus) {
                            for query in queries {
                                query.run(&document, &mut found);
                            }
                        }
                    }
                    Kind::XPath { queries, attribute } => {
                        if let Some(package) = xpath::parse_document(&corpus) {
                            let document = package.as_document();
                            for query in queries.iter() {
                                if let Some(selection) = xpath::select(&document, query) {
                                    found.extend(selection.strings(attribute.as_deref()));
                                }
                            }
                        }
                    }
                    Kind::Kval(_) | Kind::Dsl(_) => {}
                }
            }
        }
        if self.case_insensitive {
            for value in &mut found {
                *value = value.to_lowercase();
            }
        }
        dedupe(found)
    }
}

/// Every match of every regex, taking capture `group`. A regex without that
/// group yields nothing; a group that did not take part in a match yields
/// an empty string, as Go's `FindAllStringSubmatch` does.
fn extract_regex(regexes: &[Arc<LazyRegex>], group: usize, corpus: &[u8], found: &mut Vec<String>) {
    for regex in regexes {
        let Some(regex) = regex.get_for(corpus) else {
            continue;
        };
        if group >= regex.captures_len() {
            continue;
        }
        if group == 0 {
            found.extend(
                regex
                    .find_iter(corpus)
                    .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned()),
            );
            continue;
        }
        for captures in regex.captures_iter(corpus) {
            let text = captures
                .get(group)
                .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
                .unwrap_or_default();
            found.push(text);
        }
    }
}

/// Removes repeats, keeping first occurrences in order.
pub(crate) fn dedupe(values: Vec<String>) -> Vec<String> {
    if values.len() < 2 {
        return values;
    }
    let mut seen = HashSet::with_capacity(values.len());
    values
        .into_iter()
        .filter(|v| seen.insert(v.clone()))
        .collect()
}
