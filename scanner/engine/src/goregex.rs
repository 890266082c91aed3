//! Compiles template regexes, written for Go's RE2 engine, with the `regex`
//! crate. Both are RE2-family engines, so most patterns mean the same thing;
//! this module bridges the differences that matter in practice:
//!
//! - Go's `\d`, `\w`, `\s` and `\b` are ASCII-only; Rust's are Unicode. Besides
//!   changing meaning, Unicode `\b` stops the lazy DFA on non-ASCII input and
//!   makes matching far slower, so these are rewritten to ASCII forms.
//! - Go reads `{` that does not start a valid repetition as a literal
//!   (`{"key":`), and a `[` inside a class as a literal; Rust rejects or reads
//!   them as nested classes, so they are escaped.
//! - Go supports `\Q...\E` quoting; Rust does not, so it is expanded.
//!
//! Compiled regexes are shared through a process-wide cache: the public
//! corpus repeats the same patterns across thousands of templates, and a
//! `Regex` clone is a cheap reference-count bump.
//!
//! Template operators use [`compile_lazy`]: the pattern is checked when the
//! template is compiled (so a bad one still makes the template unrunnable)
//! but built into automata only when a response first reaches it. Building
//! was the largest share of loading the corpus, and most regexes of a scan
//! are never run: they sit behind a status or word matcher that fails.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// A pattern that neither engine accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid regex `{pattern}`")]
pub struct RegexError {
    /// The pattern as written.
    pub pattern: String,
    #[source]
    pub source: RegexFailure,
}

/// What the `regex` crate said of a translated pattern.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegexFailure {
    /// It does not parse (boxed: the parser's error is large, and errors
    /// travel in every `Result` of the DSL).
    #[error(transparent)]
    Syntax(Box<regex_syntax::Error>),
    /// It parses but cannot be built (too large, say).
    #[error(transparent)]
    Build(#[from] regex::Error),
}

impl From<regex_syntax::Error> for RegexFailure {
    fn from(e: regex_syntax::Error) -> RegexFailure {
        RegexFailure::Syntax(Box::new(e))
    }
}

/// Compiled size ceiling. The default (10 MiB) rejects a few large
/// alternations from the corpus that Go accepts.
const SIZE_LIMIT: usize = 64 * 1024 * 1024;

fn cache() -> &'static Mutex<HashMap<String, Regex>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Compiles a Go-dialect pattern for matching on raw response bytes.
pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
    cached(cache(), pattern, || compile_uncached(pattern))
}

/// [`compile`] without the process-wide cache, for patterns computed at run
/// time, which would otherwise fill it without bound.
pub fn compile_uncached(pattern: &str) -> Result<Regex, RegexError> {
    build(&translate(pattern)).map_err(|e| RegexError {
        pattern: pattern.to_string(),
        source: e.into(),
    })
}

/// The value kept in `cache` for `pattern`, made (and kept) on a miss. A
/// poisoned cache is skipped, not fatal.
fn cached<T: Clone>(
    cache: &Mutex<HashMap<String, T>>,
    pattern: &str,
    make: impl FnOnce() -> Result<T, RegexError>,
) -> Result<T, RegexError> {
    if let Ok(cache) = cache.lock() {
        if let Some(found) = cache.get(pattern) {
            return Ok(found.clone());
        }
    }
    let made = make()?;
    if let Ok(mut cache) = cache.lock() {
        cache.insert(pattern.to_string(), made.clone());
    }
    Ok(made)
}

fn build(translated: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(translated)
        .octal(true)
        .size_limit(SIZE_LIMIT)
        .build()
}

/// A checked pattern, built on first use and then shared.
#[derive(Debug)]
pub struct LazyRegex {
    /// The pattern as written (for messages).
    pattern: String,
    /// The pattern in the `regex` crate's dialect.
    translated: String,
    /// Every match starts with one of these (`None`: no short set is
    /// known). While the regex is unbuilt, a haystack holding none of them
    /// is answered "no match" without building it.
    prefixes: Option<Literals>,
    /// The same for the literals every match ends with.
    suffixes: Option<Literals>,
    regex: OnceLock<Regex>,
}

impl LazyRegex {
    /// The compiled regex. A pattern that passed the syntax check but still
    /// fails to build (past the size limit) never matches: the check at
    /// template compilation is what reports bad patterns.
    pub fn get(&self) -> &Regex {
        self.regex.get_or_init(|| {
            build(&self.translated).unwrap_or_else(|e| {
                tracing::warn!(pattern = %self.pattern, error = %e, "regex cannot be built; it never matches");
                never_matches()
            })
        })
    }
}

/// At most this many prefix (or suffix) literals are kept for the
/// pre-check; a longer list (a case-insensitive word expands into one
/// literal per spelling) costs more to scan for than the regex's own
/// prefilter.
const MAX_LITERALS: usize = 32;

impl LazyRegex {
    /// The regex to run over `haystack`, or `None` when it cannot match
    /// there. Before the regex is first built this looks for the literals
    /// every match starts with, and for those every match ends with: most
    /// template regexes meet only responses that lack them (a 404 page
    /// against a product fingerprint), and then are never built at all.
    /// Once built, the regex's own prefilter does this job.
    pub fn get_for(&self, haystack: &[u8]) -> Option<&Regex> {
        if let Some(built) = self.regex.get() {
            return Some(built);
        }
        for needed in [&self.prefixes, &self.suffixes].into_iter().flatten() {
            if !needed.any_in(haystack) {
                return None;
            }
        }
        Some(self.get())
    }
}

/// Literals one of which starts (or, for suffixes, ends) every match of a
/// regex.
#[derive(Debug)]
struct Literals {
    /// ASCII letters lowered: a case-insensitive pattern's spellings of
    /// one word collapse into one literal, searched ignoring ASCII case
    /// (which finds a superset of the exact spellings, so nothing that
    /// could match is turned away).
    folded: bool,
    literals: Box<[Box<[u8]>]>,
}

impl Literals {
    /// From the literals every match of `hir` starts (`kind` Prefix) or
    /// ends (Suffix) with, when they are few (after folding ASCII case if
    /// need be) and none is empty (an empty one would let anything
    /// through).
    fn of(hir: &regex_syntax::hir::Hir, kind: ExtractKind) -> Option<Literals> {
        let seq = Extractor::new().kind(kind).extract(hir);
        let literals = seq.literals()?;
        if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
            return None;
        }
        if literals.len() <= MAX_LITERALS {
            return Some(Literals {
                folded: false,
                literals: literals.iter().map(|l| l.as_bytes().into()).collect(),
            });
        }
        let mut lowered: Vec<Box<[u8]>> = literals
            .iter()
            .map(|l| l.as_bytes().to_ascii_lowercase().into())
            .collect();
        lowered.sort_unstable();
        lowered.dedup();
        (lowered.len() <= MAX_LITERALS).then(|| Literals {
            folded: true,
            literals: lowered.into(),
        })
    }

    fn any_in(&self, haystack: &[u8]) -> bool {
        if self.folded {
            self.literals
                .iter()
                .any(|l| contains_ignoring_ascii_case(haystack, l))
        } else {
            self.literals
                .iter()
                .any(|l| memchr::memmem::find(haystack, l).is_some())
        }
    }
}

/// Whether `haystack` holds `needle` (ASCII letters lowered) in any ASCII
/// case. Candidates come from a search for the first byte in both cases.
fn contains_ignoring_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return true;
    };
    let fits = |at: usize| {
        haystack
            .get(at..at + needle.len())
            .is_some_and(|window| window.eq_ignore_ascii_case(needle))
    };
    let upper = first.to_ascii_uppercase();
    if upper == first {
        memchr::memchr_iter(first, haystack).any(fits)
    } else {
        memchr::memchr2_iter(first, upper, haystack).any(fits)
    }
}

#[cfg(test)]
impl LazyRegex {
    pub(crate) fn is_built(&self) -> bool {
        self.regex.get().is_some()
    }
}

fn never_matches() -> Regex {
    static NEVER: OnceLock<Regex> = OnceLock::new();
    NEVER
        .get_or_init(|| Regex::new(r"(?-u:[^\x00-\xFF])").expect("an empty byte class"))
        .clone()
}

fn lazy_cache() -> &'static Mutex<HashMap<String, Arc<LazyRegex>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<LazyRegex>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Checks a Go-dialect pattern now and builds it on first use. The same
/// pattern gives the same shared [`LazyRegex`], so it is built at most once.
pub fn compile_lazy(pattern: &str) -> Result<Arc<LazyRegex>, RegexError> {
    cached(lazy_cache(), pattern, || {
        let translated = translate(pattern);
        let hir = parse_hir(&translated).map_err(|source| RegexError {
            pattern: pattern.to_string(),
            source,
        })?;
        Ok(Arc::new(LazyRegex {
            pattern: pattern.to_string(),
            prefixes: Literals::of(&hir, ExtractKind::Prefix),
            suffixes: Literals::of(&hir, ExtractKind::Suffix),
            translated,
            regex: OnceLock::new(),
        }))
    })
}

/// Parses the pattern as [`build`] would (octal escapes on, and matching
/// bytes, so a class may match invalid UTF-8), without building automata.
fn parse_hir(translated: &str) -> Result<regex_syntax::hir::Hir, RegexFailure> {
    Ok(regex_syntax::ParserBuilder::new()
        .octal(true)
        .utf8(false)
        .build()
        .parse(translated)?)
}

/// Rewrites a Go RE2 pattern into an equivalent pattern for the `regex` crate.
pub fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                i += translate_escape_sequence(&chars[i..], in_class, &mut out);
                continue;
            }
            '[' if !in_class => {
                let (consumed, opened) = open_class(&chars[i..], &mut out);
                in_class = opened;
                i += consumed;
                continue;
            }
            '[' if in_class => {
                // `[:alpha:]` is a POSIX class in both dialects; any other `[`
                // is a literal in Go but opens a nested class in Rust.
                if chars.get(i + 1) == Some(&':') {
                    if let Some(end) = find_posix_end(&chars, i + 2) {
                        out.extend(&chars[i..=end]);
                        i = end + 1;
                        continue;
                    }
                }
                out.push_str("\\[");
            }
            ']' if in_class => {
                out.push(']');
                in_class = false;
            }
            // Rust reads `&&`, `--` and `~~` inside classes as set operations.
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.get(i + 1) == Some(&'-') => {
                out.push_str("\\-");
            }
            '{' if !in_class => {
                if let Some(len) = repetition_len(&chars[i..]) {
                    if !out.is_empty() {
                        out.extend(&chars[i..i + len]);
                        i += len;
                        continue;
                    }
                }
                out.push_str("\\{");
            }
            '}' if !in_class => out.push_str("\\}"),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Translates the `\` at the start of `chars` and what it escapes;
/// returns how many chars that took.
fn translate_escape_sequence(chars: &[char], in_class: bool, out: &mut String) -> usize {
    let next = chars[1];
    if next == 'Q' {
        let (literal, consumed) = quoted_literal(&chars[2..]);
        for ch in literal.chars() {
            push_escaped(out, ch);
        }
        return 2 + consumed;
    }
    // `\p{Greek}` and `\x{1F600}` carry their own braces.
    if matches!(next, 'p' | 'P' | 'x') && chars.get(2) == Some(&'{') {
        if let Some(close) = chars[2..].iter().position(|&c| c == '}') {
            out.extend(&chars[..3 + close]);
            return 3 + close;
        }
    }
    out.push_str(&translate_escape(next, in_class));
    2
}

/// Translates the `[` at the start of `chars`, outside a class; returns how
/// many chars that took and whether a class is now open.
fn open_class(chars: &[char], out: &mut String) -> (usize, bool) {
    if let Some((replacement, consumed)) = whitespace_except(chars) {
        out.push_str(&replacement);
        return (consumed, false);
    }
    out.push('[');
    let mut i = 1;
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    // A `]` right after the opening `[` (and `^`) is a literal, as both
    // dialects read it.
    if chars.get(i) == Some(&']') {
        out.push_str("\\]");
        i += 1;
    }
    (i, true)
}

/// Rewrites `[^\S...]` ("whitespace except ...", common in secret-detection
/// templates) into the positive set it denotes. Left as a double negation it
/// costs milliseconds per regex to compile under `(?i)`, which adds up to
/// seconds for templates with hundreds of such patterns.
fn whitespace_except(chars: &[char]) -> Option<(String, usize)> {
    if chars.get(1) != Some(&'^') {
        return None;
    }
    let mut i = 2;
    let mut saw_not_space = false;
    let mut excluded = Vec::new();
    while i < chars.len() {
        match chars[i] {
            ']' if i > 2 => {
                if !saw_not_space {
                    return None;
                }
                let kept: String = ['\t', '\n', '\x0C', '\r', ' ']
                    .iter()
                    .filter(|c| !excluded.contains(*c))
                    .map(|c| match c {
                        '\t' => "\\t".to_string(),
                        '\n' => "\\n".to_string(),
                        '\x0C' => "\\x0C".to_string(),
                        '\r' => "\\r".to_string(),
                        other => other.to_string(),
                    })
                    .collect();
                let replacement = if kept.is_empty() {
                    // Nothing left: a class that can never match.
                    "[^\\x00-\\x{10FFFF}]".to_string()
                } else {
                    format!("[{kept}]")
                };
                return Some((replacement, i + 1));
            }
            '\\' => {
                let escaped = *chars.get(i + 1)?;
                match escaped {
                    'S' => saw_not_space = true,
                    't' => excluded.push('\t'),
                    'n' => excluded.push('\n'),
                    'f' => excluded.push('\x0C'),
                    'r' => excluded.push('\r'),
                    'v' | ' ' => {}
                    _ => return None,
                }
                i += 2;
            }
            literal @ ('\t' | '\n' | '\x0C' | '\r' | ' ') => {
                excluded.push(literal);
                i += 1;
            }
            _ => return None,
        }
    }
    None
}

/// Translates the escape `\c`. ASCII classes replace Unicode ones (see the
/// module docs); everything else passes through unchanged.
fn translate_escape(c: char, in_class: bool) -> String {
    const DIGIT: &str = "0-9";
    const WORD: &str = "0-9A-Za-z_";
    const SPACE: &str = "\\t\\n\\x0C\\r ";
    match (c, in_class) {
        ('d', false) => format!("[{DIGIT}]"),
        ('d', true) => DIGIT.to_string(),
        ('w', false) => format!("[{WORD}]"),
        ('w', true) => WORD.to_string(),
        ('s', false) => format!("[{SPACE}]"),
        ('s', true) => SPACE.to_string(),
        // Negated classes nest inside an enclosing class in Rust's syntax.
        ('D', _) => format!("[^{DIGIT}]"),
        ('W', _) => format!("[^{WORD}]"),
        ('S', _) => format!("[^{SPACE}]"),
        ('b', false) => "(?-u:\\b)".to_string(),
        ('B', false) => "(?-u:\\B)".to_string(),
        // Go accepts `\/` and other escaped punctuation; Rust accepts escaping
        // of meta characters only, so other punctuation is emitted bare.
        (p, _) if (p.is_ascii_punctuation() || p == ' ') && !is_rust_meta(p) => p.to_string(),
        (other, _) => format!("\\{other}"),
    }
}

fn is_rust_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    )
}

fn push_escaped(out: &mut String, c: char) {
    if is_rust_meta(c) {
        out.push('\\');
    }
    out.push(c);
}

/// Returns the literal text of a `\Q...\E` run and how many chars it used
/// (including the closing `\E`, which may be absent).
fn quoted_literal(rest: &[char]) -> (String, usize) {
    let mut literal = String::new();
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == '\\' && rest.get(i + 1) == Some(&'E') {
            return (literal, i + 2);
        }
        literal.push(rest[i]);
        i += 1;
    }
    (literal, i)
}

fn find_posix_end(chars: &[char], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < chars.len() {
        if chars[i] == ':' && chars[i + 1] == ']' {
            return Some(i + 1);
        }
        if !chars[i].is_ascii_alphabetic() && chars[i] != '^' {
            return None;
        }
        i += 1;
    }
    None
}

/// Length of a valid `{n}`, `{n,}` or `{n,m}` at the start of `chars`.
fn repetition_len(chars: &[char]) -> Option<usize> {
    let mut i = 1;
    let digits_start = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    if chars.get(i) == Some(&',') {
        i += 1;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
    }
    if chars.get(i) == Some(&'}') {
        // A lazy `?` after the braces is carried by the main loop.
        Some(i + 1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_patterns_translate_to_equivalent_rust_patterns() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            // (pattern, must match, must not match)
            (
                r#"{"version":"\d+"}"#,
                &[r#"{"version":"12"}"#],
                &[r#"{"version":"x"}"#],
            ),
            (r"a{2}b{1,}c{0,1}", &["aabbc", "aab"], &["ab"]),
            (r"[[]x]", &["[x]"], &["x]", "y"]),
            (r"\Qa.b*c\E+", &["a.b*cc"], &["axbc"]),
            (r"\p{Greek}+\x{41}", &["αβA"], &["abA"]),
            (r"[[:alpha:]]+[[:^alpha:]]", &["ab1"], &["ab"]),
            (r"\bword\b", &["a word here"], &["swordfish"]),
            (r"[^\S\n]x", &[" x", "\tx"], &["\nx", "ax"]),
            (
                r"[\w.-]+@[\w-]+\.com",
                &["first.last@ex-ample.com"],
                &["@.com"],
            ),
            (r"\/admin\/", &["/admin/"], &["admin"]),
            (r"[a&&b]", &["&", "a"], &["c"]),
        ];
        for (pattern, yes, no) in cases {
            let re = compile(pattern)
                .unwrap_or_else(|e| panic!("{pattern} -> {}: {e}", translate(pattern)));
            for text in *yes {
                assert!(
                    re.is_match(text.as_bytes()),
                    "{pattern} should match {text:?}"
                );
            }
            for text in *no {
                assert!(
                    !re.is_match(text.as_bytes()),
                    "{pattern} should not match {text:?}"
                );
            }
        }
    }

    #[test]
    fn template_regexes_are_checked_at_once_and_built_on_first_use() {
        assert!(matches!(
            compile_lazy(r"unclosed(group"),
            Err(RegexError { .. })
        ));
        // Bytes semantics, as the built regex has: a class may match non-UTF-8.
        assert!(compile_lazy(r"(?-u:\xFF)").is_ok());
        let lazy = compile_lazy(r"lazy-\d+-probe").expect("valid");
        assert!(!lazy.is_built());
        assert!(lazy.get().is_match(b"a lazy-42-probe"));
        assert!(lazy.is_built());
        let again = compile_lazy(r"lazy-\d+-probe").expect("valid");
        assert!(
            std::sync::Arc::ptr_eq(&lazy, &again),
            "one instance per pattern"
        );
    }

    #[test]
    fn a_regex_is_not_built_for_a_haystack_without_its_prefixes_or_suffixes() {
        let lazy = compile_lazy(r"<title>Tomcat-probe/(\d+)").expect("valid");
        assert!(lazy.get_for(b"<html>404 Not Found</html>").is_none());
        assert!(
            !lazy.is_built(),
            "a haystack without the prefix builds nothing"
        );
        let built = lazy
            .get_for(b"x <title>Tomcat-probe/9</title>")
            .expect("the prefix is there");
        assert!(built.is_match(b"x <title>Tomcat-probe/9</title>"));
        assert!(lazy.is_built());
        // Built, the regex answers on its own, also where the prefix is absent.
        assert!(lazy.get_for(b"nothing here").is_some());

        // Case-insensitive patterns keep every spelling of their prefix.
        let folded = compile_lazy(r"(?i)jboss-probe").expect("valid");
        assert!(folded.get_for(b"nginx").is_none());
        let haystack = b"Server: JBoss-Probe 7";
        assert!(folded
            .get_for(haystack)
            .is_some_and(|r| r.is_match(haystack)));

        // Open at the start, a pattern is still checked for the literals
        // every match ends with.
        let suffixed = compile_lazy(r"[a-z]+-suffix-probe\.php").expect("valid");
        assert!(suffixed.get_for(b"<html>index.html</html>").is_none());
        assert!(!suffixed.is_built());
        let text = b"GET /admin-suffix-probe.php";
        assert!(suffixed.get_for(text).is_some_and(|r| r.is_match(text)));

        // Open at both ends (`.` repeats): every haystack reaches the regex.
        for pattern in [r".+open-probe.+", r".*dot-star-probe.*"] {
            let open = compile_lazy(pattern).expect("valid");
            assert!(open.get_for(b"unrelated").is_some(), "{pattern}");
        }

        // The check and the regex agree on what a match is, through matchers
        // and extractors alike.
        for (pattern, text, expected) in [
            (r"ver(sion)?[=:] ?(\d+)", "version: 12", true),
            (r"ver(sion)?[=:] ?(\d+)", "ver=3", true),
            (r"ver(sion)?[=:] ?(\d+)", "release 3", false),
            (r"(?m)^X-Probe: on$", "A: b\nX-Probe: on\n", true),
            (r"\x{212A}elvin-probe", "\u{212A}elvin-probe", true),
            (r"(?i)kelvin-probe", "\u{212A}ELVIN-PROBE", true),
            (r"(?:|x)empty-branch-probe", "empty-branch-probe", true),
            (r"(?i)<title>folded-probe", "<TiTlE>Folded-Probe", true),
            (r"(?i)<title>folded-probe", "<title>folded-prob", false),
            (
                r"[0-9]+\.suffix-agree-probe",
                "v 12.suffix-agree-probe",
                true,
            ),
            (
                r"[0-9]+\.suffix-agree-probe",
                "v 12.suffix-agree-prob",
                false,
            ),
            (r"(?i)[a-z]+ tail-agree-probe", "X TAIL-AGREE-PROBE", true),
            (r"\w+-kelvin-tail\x{212A}", "ab-kelvin-tail\u{212A}", true),
            (r"(?i)\w+-kelvin-tail-k", "ab-KELVIN-TAIL-\u{212A}", true),
        ] {
            let lazy = compile_lazy(pattern).expect("valid");
            let got = lazy
                .get_for(text.as_bytes())
                .is_some_and(|r| r.is_match(text.as_bytes()));
            assert_eq!(got, expected, "{pattern} on {text:?}");
        }
    }
}
