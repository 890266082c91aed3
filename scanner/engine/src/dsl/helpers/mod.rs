//! The helper functions templates call, with Nuclei's names, argument
//! orders and edge cases.
//!
//! Every helper is also reachable under its name without underscores
//! (`tolower`, `randbase`), as Nuclei registers both for old templates.
//!
//! # Layout
//! - `strings`: searching, slicing, case, trimming, splitting.
//! - `encoding`: base64, hex, URL, HTML, compression, number bases, JSON.
//! - `hashing`: digests, HMAC, MurmurHash3.
//! - `random`: random strings, numbers, addresses.
//! - `time`: `date_time`, `unix_time`, `to_unix_time`, `wait_for`.
//! - `version`: `compare_versions` with hashicorp/go-version semantics.
//! - `jwt`: `generate_jwt` for the HMAC and `none` algorithms.

mod encoding;
mod hashing;
mod jwt;
mod random;
mod strings;
mod time;
mod version;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use regex::bytes::Regex;

use super::error::DslError;
use super::value::Value;
use crate::goregex::{self, LazyRegex};

pub use hashing::mmh3_hash;
pub use time::RequestedWait;
pub use version::compare_versions;

/// What a helper gets besides its arguments.
pub(crate) struct CallCtx<'a> {
    /// The pattern argument checked at parse time, when it was a literal;
    /// built on first use.
    pub regex: Option<&'a LazyRegex>,
}

type HelperFn = fn(&[Value], &CallCtx) -> Result<Value, DslError>;

pub(crate) struct Helper {
    pub name: &'static str,
    pub min: usize,
    /// `None` for variadic helpers.
    pub max: Option<usize>,
    /// Index of an argument that is a regular expression, precompiled when
    /// it is a literal.
    pub regex_arg: Option<usize>,
    /// Pure one-argument helpers whose results on large inputs are worth
    /// remembering: hundreds of favicon templates compute
    /// `mmh3(base64_py(body))` on the same response body.
    pub memo: bool,
    pub run: HelperFn,
}

impl std::fmt::Debug for Helper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Helper {
    pub(crate) fn check_arity(&self, got: usize) -> Result<(), DslError> {
        let ok = got >= self.min && self.max.is_none_or(|m| got <= m);
        if ok {
            return Ok(());
        }
        let expected = match self.max {
            Some(m) if m == self.min => m.to_string(),
            Some(m) => format!("{} to {}", self.min, m),
            None => format!("at least {}", self.min),
        };
        Err(DslError::Arity {
            name: self.name.to_string(),
            expected,
            got,
        })
    }
}

const fn h(name: &'static str, min: usize, max: usize, run: HelperFn) -> Helper {
    Helper {
        name,
        min,
        max: Some(max),
        regex_arg: None,
        memo: false,
        run,
    }
}

const fn variadic(name: &'static str, min: usize, run: HelperFn) -> Helper {
    Helper {
        name,
        min,
        max: None,
        regex_arg: None,
        memo: false,
        run,
    }
}

const fn memo(mut helper: Helper) -> Helper {
    helper.memo = true;
    helper
}

const fn with_regex(mut helper: Helper, arg: usize) -> Helper {
    helper.regex_arg = Some(arg);
    helper
}

macro_rules! unsupported {
    ($name:literal, $min:expr, $max:expr, $reason:literal) => {
        Helper {
            name: $name,
            min: $min,
            max: $max,
            regex_arg: None,
            memo: false,
            run: |_, _| {
                Err(DslError::Unsupported {
                    function: $name,
                    reason: $reason,
                })
            },
        }
    };
}

static HELPERS: &[Helper] = &[
    // strings
    h("contains", 2, 2, strings::contains),
    variadic("contains_all", 1, strings::contains_all),
    variadic("contains_any", 1, strings::contains_any),
    variadic("starts_with", 2, strings::starts_with),
    variadic("ends_with", 2, strings::ends_with),
    variadic("line_starts_with", 2, strings::line_starts_with),
    variadic("line_ends_with", 2, strings::line_ends_with),
    memo(h("to_lower", 1, 1, strings::to_lower)),
    memo(h("to_upper", 1, 1, strings::to_upper)),
    h("to_title", 1, 2, strings::to_title),
    variadic("concat", 0, strings::concat),
    h("replace", 3, 3, strings::replace),
    with_regex(h("replace_regex", 3, 3, strings::replace_regex), 1),
    h("trim", 2, 2, strings::trim),
    h("trim_left", 2, 2, strings::trim_left),
    h("trim_right", 2, 2, strings::trim_right),
    memo(h("trim_space", 1, 1, strings::trim_space)),
    h("trim_prefix", 2, 2, strings::trim_prefix),
    h("trim_suffix", 2, 2, strings::trim_suffix),
    h("reverse", 1, 1, strings::reverse),
    h("repeat", 2, 2, strings::repeat),
    h("split", 2, 3, strings::split),
    variadic("join", 2, strings::join),
    h("len", 1, 1, strings::len),
    h("index", 2, 2, strings::index),
    h("substr", 2, 3, strings::substr),
    with_regex(h("regex", 2, 2, strings::regex), 0),
    h("regex_all", 2, 2, strings::regex_all),
    h("regex_any", 2, 2, strings::regex_any),
    variadic("equals_any", 2, strings::equals_any),
    h("remove_bad_chars", 2, 2, strings::remove_bad_chars),
    h("count", 2, 2, strings::count),
    variadic("sort", 1, strings::sort),
    variadic("uniq", 1, strings::uniq),
    h("padding", 3, 4, strings::padding),
    h("to_string", 1, 1, strings::to_string),
    h("to_number", 1, 1, strings::to_number),
    variadic("print_debug", 1, strings::print_debug),
    h("getNetworkPort", 2, 2, strings::get_network_port),
    // encoding
    memo(h("base64", 1, 1, encoding::base64)),
    memo(h("base64_py", 1, 1, encoding::base64_py)),
    h("base64_decode", 1, 1, encoding::base64_decode),
    memo(h("url_encode", 1, 1, encoding::url_encode)),
    h("url_decode", 1, 1, encoding::url_decode),
    memo(h("hex_encode", 1, 1, encoding::hex_encode)),
    h("hex_decode", 1, 1, encoding::hex_decode),
    h("html_escape", 1, 1, encoding::html_escape),
    memo(h("html_unescape", 1, 1, encoding::html_unescape)),
    h("gzip", 1, 1, encoding::gzip),
    h("gzip_decode", 1, 1, encoding::gzip_decode),
    h("zlib", 1, 1, encoding::zlib),
    h("zlib_decode", 1, 1, encoding::zlib_decode),
    h("deflate", 1, 1, encoding::deflate),
    h("inflate", 1, 1, encoding::inflate),
    h("hex_to_dec", 1, 1, encoding::hex_to_dec),
    h("oct_to_dec", 1, 1, encoding::oct_to_dec),
    h("bin_to_dec", 1, 1, encoding::bin_to_dec),
    h("dec_to_hex", 1, 1, encoding::dec_to_hex),
    h("json_minify", 1, 1, encoding::json_minify),
    h("json_prettify", 1, 1, encoding::json_prettify),
    variadic("xor", 2, encoding::xor),
    variadic("zip", 2, encoding::zip),
    // hashing
    memo(h("md5", 1, 1, hashing::md5)),
    memo(h("sha1", 1, 1, hashing::sha1)),
    memo(h("sha256", 1, 1, hashing::sha256)),
    memo(h("sha512", 1, 1, hashing::sha512)),
    memo(h("mmh3", 1, 1, hashing::mmh3)),
    h("hmac", 3, 3, hashing::hmac),
    // random
    h("rand_base", 1, 2, random::rand_base),
    h("rand_char", 0, 1, random::rand_char),
    h("rand_text_alpha", 1, 2, random::rand_text_alpha),
    h(
        "rand_text_alphanumeric",
        1,
        2,
        random::rand_text_alphanumeric,
    ),
    h("rand_text_numeric", 1, 2, random::rand_text_numeric),
    h("rand_int", 0, 2, random::rand_int),
    variadic("rand_ip", 1, random::rand_ip),
    // time
    h("date_time", 1, 2, time::date_time),
    h("unix_time", 0, 1, time::unix_time),
    h("to_unix_time", 1, 2, time::to_unix_time),
    h("wait_for", 1, 1, time::wait_for),
    // versions
    variadic("compare_versions", 2, version::compare_versions_helper),
    // tokens
    h("generate_jwt", 2, 4, jwt::generate_jwt),
    // Recognised but not run: they need the network, block a worker, or
    // need code the scanner does not ship.
    unsupported!(
        "resolve",
        1,
        Some(2),
        "it needs DNS resolution at evaluation time"
    ),
    unsupported!("public_ip", 0, Some(0), "it needs a network lookup"),
    unsupported!("jarm", 1, Some(1), "it needs TLS handshakes to the target"),
    unsupported!(
        "llm_prompt",
        1,
        Some(2),
        "it calls an external language-model service"
    ),
    unsupported!(
        "generate_java_gadget",
        3,
        Some(3),
        "Java deserialization gadgets are not shipped"
    ),
    unsupported!("aes_cbc", 3, Some(3), "AES is not linked into the scanner"),
    unsupported!("aes_gcm", 2, Some(2), "AES is not linked into the scanner"),
    unsupported!(
        "ip_format",
        2,
        Some(2),
        "alternate IP notations are not implemented"
    ),
    unsupported!(
        "unpack",
        2,
        Some(2),
        "binary struct unpacking is not implemented"
    ),
];

fn table() -> &'static HashMap<String, &'static Helper> {
    static TABLE: OnceLock<HashMap<String, &'static Helper>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = HashMap::new();
        for helper in HELPERS {
            map.insert(helper.name.replace('_', ""), helper);
        }
        // Real names win over underscore-less aliases.
        for helper in HELPERS {
            map.insert(helper.name.to_string(), helper);
        }
        map
    })
}

pub(crate) fn lookup(name: &str) -> Option<&'static Helper> {
    table().get(name).copied()
}

/// Whether `name` is a helper the DSL recognises (including those that
/// return [`DslError::Unsupported`] when called).
pub fn is_helper(name: &str) -> bool {
    lookup(name).is_some()
}

/// Whether a recognised helper actually runs here.
pub fn is_supported_helper(name: &str) -> bool {
    lookup(name).is_some_and(|h| {
        !matches!(
            h.name,
            "resolve"
                | "public_ip"
                | "jarm"
                | "llm_prompt"
                | "generate_java_gadget"
                | "aes_cbc"
                | "aes_gcm"
                | "ip_format"
                | "unpack"
        )
    })
}

/// The canonical names of all helpers.
pub fn helper_names() -> Vec<&'static str> {
    HELPERS.iter().map(|h| h.name).collect()
}

/// Compiles a template regex. Templates are written for Go's RE2;
/// `goregex` bridges the dialect differences (ASCII `\d`/`\w`/`\b`, literal
/// `[` and `{`, `\Q...\E`) so DSL `regex()` and `=~` agree with `regex`
/// matchers on the same pattern.
pub(crate) fn compile_regex(pattern: &[u8]) -> Result<Arc<Regex>, DslError> {
    Ok(Arc::new(goregex::compile_uncached(
        &String::from_utf8_lossy(pattern),
    )?))
}

/// Compiles a pattern computed at evaluation time, through a small
/// per-thread cache: the same few patterns come back for every response.
pub(crate) fn cached_regex(pattern: &[u8]) -> Result<Arc<Regex>, DslError> {
    const CAPACITY: usize = 64;
    thread_local! {
        static CACHE: RefCell<HashMap<Vec<u8>, Arc<Regex>>> = RefCell::new(HashMap::new());
    }
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = compile_regex(pattern)?;
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(pattern.to_vec(), re.clone());
    });
    Ok(re)
}

/// Inputs shorter than this are cheaper to recompute than to look up.
const MEMO_MIN_LEN: usize = 4096;
/// Entries kept per thread. Each holds its input alive (that is what makes
/// pointer identity a safe key: a live `Bytes` buffer never changes).
const MEMO_ENTRIES: usize = 8;

struct MemoEntry {
    helper: &'static str,
    input: bytes::Bytes,
    output: Value,
}

/// Calls a memoizable helper, reusing the result computed on the same
/// buffer (same pointer and length, kept alive by the cache) on this thread.
pub(crate) fn call_memo(
    helper: &'static Helper,
    args: &[Value],
    ctx: &CallCtx,
) -> Result<Value, DslError> {
    let input = match args {
        [Value::Str(b)] if helper.memo && b.len() >= MEMO_MIN_LEN => b,
        _ => return (helper.run)(args, ctx),
    };
    thread_local! {
        static MEMO: RefCell<Vec<MemoEntry>> = const { RefCell::new(Vec::new()) };
    }
    let hit = MEMO.with(|m| {
        m.borrow()
            .iter()
            .find(|e| {
                e.helper == helper.name
                    && e.input.as_ptr() == input.as_ptr()
                    && e.input.len() == input.len()
            })
            .map(|e| e.output.clone())
    });
    if let Some(v) = hit {
        return Ok(v);
    }
    let output = (helper.run)(args, ctx)?;
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= MEMO_ENTRIES {
            m.remove(0);
        }
        m.push(MemoEntry {
            helper: helper.name,
            input: input.clone(),
            output: output.clone(),
        });
    });
    Ok(output)
}

/// Runs `f` with the regex for a pattern argument: the one checked at parse
/// time when the pattern was a literal, otherwise a cached compile. `f`
/// gets `None` when the regex is known not to match `haystack`.
pub(crate) fn use_regex<T>(
    ctx: &CallCtx,
    pattern: &Value,
    haystack: &[u8],
    f: impl FnOnce(Option<&Regex>) -> T,
) -> Result<T, DslError> {
    match ctx.regex {
        // `None`: the pattern cannot match `haystack` (it is left unbuilt).
        Some(lazy) => Ok(f(lazy.get_for(haystack))),
        None => {
            let re = cached_regex(&pattern.as_bytes())?;
            Ok(f(Some(&re)))
        }
    }
}

/// An integer argument. Nuclei passes numbers as floats and many helpers
/// parse the text form; accept both.
pub(crate) fn int_arg(function: &'static str, v: &Value) -> Result<i64, DslError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Float(f) if f.is_finite() => Ok(*f as i64),
        other => {
            let text = other.to_string_lossy();
            let t = text.trim();
            t.parse::<i64>()
                .or_else(|_| t.parse::<f64>().map(|f| f as i64))
                .map_err(|_| DslError::arg(function, format!("'{text}' is not a number")))
        }
    }
}

/// Applies `f` to the text when the bytes are UTF-8, otherwise to a lossy
/// copy (Go's string functions see invalid bytes as U+FFFD too).
pub(crate) fn with_text<T>(bytes: &[u8], f: impl FnOnce(&str) -> T) -> T {
    match std::str::from_utf8(bytes) {
        Ok(s) => f(s),
        Err(_) => f(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests;

/// HMAC by name, exposed to tests that check `generate_jwt` signatures.
#[cfg(test)]
pub(crate) fn hashing_for_tests(alg: &str, key: &[u8], msg: &[u8]) -> Vec<u8> {
    hashing::hmac_named(alg, key, msg).unwrap_or_default()
}
