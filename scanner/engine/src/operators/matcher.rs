//! Compiled matchers: one per `matchers:` entry, evaluated against a
//! response context. Semantics follow Nuclei's `pkg/operators/matchers`:
//! `or` returns on the first hit, `and` fails on the first miss, `match-all`
//! keeps going to collect every hit, `negative` inverts the verdict (and
//! drops the snippets), and a part the response does not have is a miss
//! before any inversion.

use std::borrow::Cow;
use std::sync::Arc;

use memchr::memmem;

use super::defs::{MatcherDef, StringOrList};
use super::error::OperatorError;
use super::part::{Part, PartCache};
use super::render::Word as RenderedWord;
use super::xpath::{self, XPathQueries};
use super::Condition;
use crate::dsl::{Expr, Value, Vars};
use crate::goregex::{self, LazyRegex};

/// The verdict of one matcher on one response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MatchOutcome {
    pub matched: bool,
    /// What matched (words, the first match of each regex or all of them
    /// with `match-all`, binary needles, the status code); empty for
    /// negative, dsl, size and xpath matchers.
    pub snippets: Vec<String>,
}

/// A compiled matcher. Immutable after compilation and shared by reference
/// across the rayon workers that evaluate responses.
#[derive(Debug)]
pub struct Matcher {
    name: Option<String>,
    internal: bool,
    negative: bool,
    condition: Condition,
    match_all: bool,
    pub(crate) part: Part,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Word(Words),
    Regex(Vec<Arc<LazyRegex>>),
    Status(Vec<i64>),
    Size(Vec<usize>),
    Binary(Vec<Vec<u8>>),
    Dsl(Vec<Expr>),
    XPath(XPathQueries),
}

#[derive(Debug)]
struct Words {
    words: Vec<Word>,
    case_insensitive: bool,
    /// Whether some word has non-ASCII letters, which needs a Unicode
    /// lowercased copy of the part rather than an ASCII-folding search.
    needs_lowered_corpus: bool,
}

#[derive(Debug)]
struct Word {
    rendered: RenderedWord,
    /// Prebuilt searcher for literal, case-sensitive words.
    finder: Option<memmem::Finder<'static>>,
}

fn values(list: &Option<StringOrList>) -> Vec<String> {
    list.as_ref().map(StringOrList::to_vec).unwrap_or_default()
}

fn require<T>(items: Vec<T>, kind: &str, field: &'static str) -> Result<Vec<T>, OperatorError> {
    if items.is_empty() {
        Err(OperatorError::MissingValues {
            kind: format!("{kind} matcher"),
            field,
        })
    } else {
        Ok(items)
    }
}

impl Matcher {
    /// Compiles a matcher: regexes, hex needles, DSL expressions and XPath
    /// queries are all checked and built here, once.
    pub fn compile(def: &MatcherDef) -> Result<Matcher, OperatorError> {
        let kind_name = def.kind.trim();
        let condition = Condition::parse(def.condition.as_deref())?;
        let kind = match kind_name {
            "word" | "words" => {
                let raw = require(values(&def.words), kind_name, "words")?;
                Kind::Word(compile_words(raw, def)?)
            }
            "regex" => {
                let raw = require(values(&def.regex), kind_name, "regex")?;
                // Nuclei rejects `case-insensitive` outside word matchers; we
                // honour it instead, as an `(?i)` flag.
                let regexes = raw
                    .iter()
                    .map(|p| {
                        if def.case_insensitive {
                            goregex::compile_lazy(&format!("(?i){p}"))
                        } else {
                            goregex::compile_lazy(p)
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Kind::Regex(regexes)
            }
            "status" => {
                let codes = require(def.status.clone().unwrap_or_default(), kind_name, "status")?;
                Kind::Status(codes.into_iter().map(i64::from).collect())
            }
            "size" => Kind::Size(require(
                def.size.clone().unwrap_or_default(),
                kind_name,
                "size",
            )?),
            "binary" => {
                let raw = require(values(&def.binary), kind_name, "binary")?;
                let needles = raw
                    .iter()
                    .map(|v| {
                        hex::decode(v.trim()).map_err(|reason| OperatorError::BadHex {
                            value: v.clone(),
                            reason,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Kind::Binary(needles)
            }
            "dsl" => {
                let raw = require(values(&def.dsl), kind_name, "dsl")?;
                Kind::Dsl(compile_dsl(&raw)?)
            }
            "xpath" => {
                let raw = require(values(&def.xpath), kind_name, "xpath")?;
                Kind::XPath(XPathQueries::compile(raw)?)
            }
            other => return Err(OperatorError::UnknownMatcherType(other.to_string())),
        };
        Ok(Matcher {
            name: def.name.clone().filter(|n| !n.is_empty()),
            internal: def.internal,
            negative: def.negative,
            condition,
            match_all: def.match_all,
            part: Part::new(def.part.as_deref()),
            kind,
        })
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Internal matchers take part in the verdict but are never reported.
    pub fn is_internal(&self) -> bool {
        self.internal
    }

    /// Relative evaluation cost, used to order matchers under `and`.
    pub(crate) fn cost(&self) -> u8 {
        match self.kind {
            Kind::Status(_) => 0,
            Kind::Size(_) => 1,
            Kind::Word(_) | Kind::Binary(_) => 2,
            Kind::Regex(_) => 3,
            Kind::Dsl(_) => 4,
            Kind::XPath(_) => 5,
        }
    }

    /// Evaluates the matcher against a response context.
    pub fn matches(&self, ctx: &dyn Vars) -> MatchOutcome {
        let cache = PartCache::new(ctx, self.part.slot + 1);
        self.matches_cached(&cache)
    }

    pub(crate) fn matches_cached(&self, cache: &PartCache<'_>) -> MatchOutcome {
        let (matched, snippets) = match &self.kind {
            Kind::Status(codes) => {
                let Some(code) = status_code(cache.ctx()) else {
                    return MatchOutcome::default();
                };
                let hit = codes.contains(&code);
                let snippets = if hit && !self.negative {
                    vec![code.to_string()]
                } else {
                    Vec::new()
                };
                (hit, snippets)
            }
            Kind::Dsl(exprs) => (self.match_dsl(exprs, cache.ctx()), Vec::new()),
            _ => {
                let Some(part) = cache.get(&self.part) else {
                    return MatchOutcome::default();
                };
                let corpus = part.as_bytes();
                match &self.kind {
                    Kind::Word(words) => self.match_words(words, &corpus, cache.ctx()),
                    Kind::Regex(regexes) => self.match_regexes(regexes, &corpus),
                    Kind::Size(sizes) => (sizes.contains(&corpus.len()), Vec::new()),
                    Kind::Binary(needles) => self.match_binary(needles, &corpus),
                    Kind::XPath(queries) => (self.match_xpath(queries, &corpus), Vec::new()),
                    Kind::Status(_) | Kind::Dsl(_) => (false, Vec::new()),
                }
            }
        };
        if self.negative {
            MatchOutcome {
                matched: !matched,
                snippets: Vec::new(),
            }
        } else {
            MatchOutcome {
                matched,
                snippets: if matched { snippets } else { Vec::new() },
            }
        }
    }

    /// Shared loop of the word, regex and binary matchers: `hits(i)` returns
    /// the snippets of value `i`, empty when it does not occur.
    fn combine(
        &self,
        count: usize,
        mut hits: impl FnMut(usize) -> Vec<String>,
    ) -> (bool, Vec<String>) {
        let mut collected = Vec::new();
        for i in 0..count {
            let found = hits(i);
            if found.is_empty() {
                match self.condition {
                    Condition::And => return (false, Vec::new()),
                    Condition::Or => continue,
                }
            }
            if self.condition == Condition::Or && !self.match_all {
                return (true, found);
            }
            collected.extend(found);
        }
        (!collected.is_empty(), collected)
    }

    fn match_words(&self, words: &Words, corpus: &[u8], ctx: &dyn Vars) -> (bool, Vec<String>) {
        let lowered: Option<Vec<u8>> = (words.case_insensitive && words.needs_lowered_corpus)
            .then(|| String::from_utf8_lossy(corpus).to_lowercase().into_bytes());
        self.combine(words.words.len(), |i| {
            let word = &words.words[i];
            let needle: Cow<'_, [u8]> = match word.rendered.render(ctx) {
                Some(rendered) if words.case_insensitive && !word.rendered.is_literal() => {
                    Cow::Owned(lowercase(&rendered))
                }
                Some(rendered) => rendered,
                // A failed render is a miss under `and` (Nuclei bails out).
                None if self.condition == Condition::And => return Vec::new(),
                None => Cow::Borrowed(word.rendered.raw()),
            };
            let found = if let Some(finder) = &word.finder {
                finder.find(corpus).is_some()
            } else if let Some(lowered) = &lowered {
                memmem::find(lowered, &needle).is_some()
            } else if words.case_insensitive {
                contains_ascii_case_insensitive(corpus, &needle)
            } else {
                memmem::find(corpus, &needle).is_some()
            };
            if found {
                vec![String::from_utf8_lossy(&needle).into_owned()]
            } else {
                Vec::new()
            }
        })
    }

    fn match_regexes(&self, regexes: &[Arc<LazyRegex>], corpus: &[u8]) -> (bool, Vec<String>) {
        // Every match is collected only for `match-all`; otherwise the first
        // match of each regex decides, and is the snippet.
        let first_only = !self.match_all;
        self.combine(regexes.len(), |i| {
            let lossy =
                |m: regex::bytes::Match<'_>| String::from_utf8_lossy(m.as_bytes()).into_owned();
            let Some(regex) = regexes[i].get_for(corpus) else {
                return Vec::new();
            };
            if first_only {
                regex.find(corpus).map(lossy).into_iter().collect()
            } else {
                regex.find_iter(corpus).map(lossy).collect()
            }
        })
    }

    fn match_binary(&self, needles: &[Vec<u8>], corpus: &[u8]) -> (bool, Vec<String>) {
        self.combine(needles.len(), |i| {
            if memmem::find(corpus, &needles[i]).is_some() {
                vec![hex::encode(&needles[i])]
            } else {
                Vec::new()
            }
        })
    }

    /// Each expression must come out true; an expression that fails to
    /// evaluate (a variable this response lacks) fails an `and` matcher and
    /// is skipped by an `or` matcher, as in Nuclei.
    fn match_dsl(&self, exprs: &[Expr], ctx: &dyn Vars) -> bool {
        for expr in exprs {
            let verdict = match expr.eval(ctx) {
                Ok(Value::Bool(b)) => b,
                Ok(other) => other.truthy(),
                Err(_) => false,
            };
            match (self.condition, verdict) {
                (Condition::Or, true) => return true,
                (Condition::And, false) => return false,
                _ => {}
            }
        }
        self.condition == Condition::And
    }

    fn match_xpath(&self, queries: &XPathQueries, corpus: &[u8]) -> bool {
        let Some(package) = xpath::parse_document(corpus) else {
            return false;
        };
        let document = package.as_document();
        let mut total = 0;
        for query in queries.iter() {
            let hits = xpath::select(&document, query).map_or(0, |s| s.hit_count());
            if hits == 0 {
                match self.condition {
                    Condition::And => return false,
                    Condition::Or => continue,
                }
            }
            if self.condition == Condition::Or && !self.match_all {
                return true;
            }
            total += hits;
        }
        total > 0
    }
}

fn compile_words(raw: Vec<String>, def: &MatcherDef) -> Result<Words, OperatorError> {
    let hex_encoded = match def.encoding.as_deref().map(str::trim) {
        None | Some("") => false,
        Some("hex") => true,
        Some(other) => return Err(OperatorError::UnknownEncoding(other.to_string())),
    };
    let mut words = Vec::with_capacity(raw.len());
    let mut needs_lowered_corpus = false;
    for word in raw {
        let mut bytes = word.into_bytes();
        if hex_encoded {
            // Nuclei keeps a word that is not valid hex as written.
            if let Ok(decoded) = hex::decode(&bytes) {
                if !decoded.is_empty() {
                    bytes = decoded;
                }
            }
        }
        if def.case_insensitive {
            bytes = lowercase(&bytes);
            needs_lowered_corpus |= !bytes.is_ascii();
        }
        let rendered = RenderedWord::compile(bytes);
        let finder = (rendered.is_literal() && !def.case_insensitive)
            .then(|| memmem::Finder::new(rendered.raw()).into_owned());
        words.push(Word { rendered, finder });
    }
    Ok(Words {
        words,
        case_insensitive: def.case_insensitive,
        needs_lowered_corpus,
    })
}

pub(crate) fn compile_dsl(raw: &[String]) -> Result<Vec<Expr>, OperatorError> {
    raw.iter()
        .map(|src| {
            Expr::parse(src).map_err(|reason| OperatorError::BadDsl {
                expression: src.clone(),
                reason,
            })
        })
        .collect()
}

/// Unicode lowercase for text, ASCII lowercase for other bytes.
fn lowercase(bytes: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_lowercase().into_bytes(),
        Err(_) => bytes.to_ascii_lowercase(),
    }
}

/// Substring search ignoring ASCII case; `needle` is already lowercase.
fn contains_ascii_case_insensitive(haystack: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    if needle.len() > haystack.len() {
        return false;
    }
    let last_start = haystack.len() - needle.len();
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), &haystack[..=last_start])
        .any(|at| haystack[at..at + needle.len()].eq_ignore_ascii_case(needle))
}

fn status_code(ctx: &dyn Vars) -> Option<i64> {
    match ctx.get("status_code")? {
        Value::Int(code) => Some(code),
        Value::Float(f) => Some(f as i64),
        other => other.to_string_lossy().trim().parse().ok(),
    }
}
