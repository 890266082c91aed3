//! String helpers. Inputs are byte strings; where Go works on runes
//! (trimming with a cutset, reversing, case mapping) we do too when the bytes
//! are UTF-8.

use memchr::memmem;

use super::{int_arg, use_regex, with_text, CallCtx};
use crate::dsl::error::DslError;
use crate::dsl::value::{Bytes, Value};

type R = Result<Value, DslError>;

fn find(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || memmem::find(hay, needle).is_some()
}

pub(super) fn contains(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::Bool(find(&a[0].as_bytes(), &a[1].as_bytes())))
}

pub(super) fn contains_all(a: &[Value], _: &CallCtx) -> R {
    let hay = a[0].as_bytes();
    Ok(Value::Bool(
        a[1..].iter().all(|n| find(&hay, &n.as_bytes())),
    ))
}

pub(super) fn contains_any(a: &[Value], _: &CallCtx) -> R {
    let hay = a[0].as_bytes();
    Ok(Value::Bool(
        a[1..].iter().any(|n| find(&hay, &n.as_bytes())),
    ))
}

pub(super) fn starts_with(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    Ok(Value::Bool(
        a[1..].iter().any(|p| s.starts_with(&p.as_bytes())),
    ))
}

pub(super) fn ends_with(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    Ok(Value::Bool(
        a[1..].iter().any(|p| s.ends_with(&p.as_bytes())),
    ))
}

pub(super) fn line_starts_with(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let prefixes: Vec<_> = a[1..].iter().map(|p| p.as_bytes()).collect();
    Ok(Value::Bool(
        s.split(|b| *b == b'\n')
            .any(|line| prefixes.iter().any(|p| line.starts_with(p))),
    ))
}

pub(super) fn line_ends_with(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let suffixes: Vec<_> = a[1..].iter().map(|p| p.as_bytes()).collect();
    Ok(Value::Bool(
        s.split(|b| *b == b'\n')
            .any(|line| suffixes.iter().any(|p| line.ends_with(p))),
    ))
}

pub(super) fn to_lower(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    if s.is_ascii() {
        return Ok(Value::from(s.to_ascii_lowercase()));
    }
    Ok(Value::from(with_text(&s, str::to_lowercase)))
}

pub(super) fn to_upper(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    if s.is_ascii() {
        return Ok(Value::from(s.to_ascii_uppercase()));
    }
    Ok(Value::from(with_text(&s, str::to_uppercase)))
}

pub(super) fn to_title(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let out = with_text(&s, |t| {
        let mut out = String::with_capacity(t.len());
        let mut at_word_start = true;
        for c in t.chars() {
            if c.is_alphanumeric() || c == '\'' {
                if at_word_start {
                    out.extend(c.to_uppercase());
                } else {
                    out.extend(c.to_lowercase());
                }
                at_word_start = false;
            } else {
                out.push(c);
                at_word_start = true;
            }
        }
        out
    });
    Ok(Value::from(out))
}

pub(super) fn concat(a: &[Value], _: &CallCtx) -> R {
    let mut out = Vec::new();
    for v in a {
        out.extend_from_slice(&v.as_bytes());
    }
    Ok(Value::from(out))
}

/// `strings.ReplaceAll`, including its rule for an empty `old`: insert `new`
/// before every character and at the end.
pub(crate) fn replace_all(s: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    if old.is_empty() {
        let text = String::from_utf8_lossy(s);
        out.extend_from_slice(new);
        for c in text.chars() {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            out.extend_from_slice(new);
        }
        return out;
    }
    let mut last = 0;
    for pos in memmem::find_iter(s, old) {
        if pos < last {
            continue;
        }
        out.extend_from_slice(&s[last..pos]);
        out.extend_from_slice(new);
        last = pos + old.len();
    }
    out.extend_from_slice(&s[last..]);
    out
}

pub(super) fn replace(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(replace_all(
        &a[0].as_bytes(),
        &a[1].as_bytes(),
        &a[2].as_bytes(),
    )))
}

pub(super) fn replace_regex(a: &[Value], ctx: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let rep = a[2].as_bytes();
    use_regex(ctx, &a[1], &s, |re| match re {
        Some(re) => Value::from(re.replace_all(&s, rep.as_ref()).into_owned()),
        // Nothing to replace.
        None => Value::from(s.to_vec()),
    })
}

enum Side {
    Left,
    Right,
    Both,
}

fn trim_cutset(s: &[u8], cutset: &[u8], side: Side) -> Vec<u8> {
    if cutset.is_ascii() {
        let in_set = |b: &u8| cutset.contains(b);
        let mut start = 0;
        let mut end = s.len();
        if matches!(side, Side::Left | Side::Both) {
            while start < end && in_set(&s[start]) {
                start += 1;
            }
        }
        if matches!(side, Side::Right | Side::Both) {
            while end > start && in_set(&s[end - 1]) {
                end -= 1;
            }
        }
        return s[start..end].to_vec();
    }
    let set: Vec<char> = String::from_utf8_lossy(cutset).chars().collect();
    with_text(s, |t| {
        let pred = |c: char| set.contains(&c);
        match side {
            Side::Left => t.trim_start_matches(pred),
            Side::Right => t.trim_end_matches(pred),
            Side::Both => t.trim_matches(pred),
        }
        .as_bytes()
        .to_vec()
    })
}

pub(super) fn trim(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(trim_cutset(
        &a[0].as_bytes(),
        &a[1].as_bytes(),
        Side::Both,
    )))
}

pub(super) fn trim_left(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(trim_cutset(
        &a[0].as_bytes(),
        &a[1].as_bytes(),
        Side::Left,
    )))
}

pub(super) fn trim_right(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(trim_cutset(
        &a[0].as_bytes(),
        &a[1].as_bytes(),
        Side::Right,
    )))
}

pub(super) fn trim_space(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    if s.is_ascii() {
        return Ok(Value::from(s.trim_ascii().to_vec()));
    }
    Ok(Value::from(with_text(&s, |t| t.trim().to_string())))
}

pub(super) fn trim_prefix(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let p = a[1].as_bytes();
    Ok(Value::from(
        s.strip_prefix(p.as_ref()).unwrap_or(&s).to_vec(),
    ))
}

pub(super) fn trim_suffix(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let p = a[1].as_bytes();
    Ok(Value::from(
        s.strip_suffix(p.as_ref()).unwrap_or(&s).to_vec(),
    ))
}

pub(super) fn reverse(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    if s.is_ascii() {
        let mut v = s.to_vec();
        v.reverse();
        return Ok(Value::from(v));
    }
    Ok(Value::from(with_text(&s, |t| {
        t.chars().rev().collect::<String>()
    })))
}

/// Go's `strconv.Atoi` on the text form of a value.
fn atoi(function: &'static str, v: &Value) -> Result<i64, DslError> {
    let text = v.to_string_lossy();
    text.parse::<i64>()
        .map_err(|_| DslError::arg(function, format!("'{text}' is not an integer")))
}

/// The largest string `repeat` and `padding` build: a guard against
/// templates (or typos) asking for gigabytes.
const MAX_BUILT: usize = 64 * 1024 * 1024;

pub(super) fn repeat(a: &[Value], _: &CallCtx) -> R {
    let n = atoi("repeat", &a[1])?;
    let n = usize::try_from(n).map_err(|_| DslError::arg("repeat", "negative count"))?;
    let s = a[0].as_bytes();
    if s.len().saturating_mul(n) > MAX_BUILT {
        return Err(DslError::arg("repeat", "result larger than 64 MiB"));
    }
    Ok(Value::from(s.repeat(n)))
}

fn split_n(s: &[u8], sep: &[u8], n: i64) -> Vec<Value> {
    if n == 0 {
        return Vec::new();
    }
    let limit = if n < 0 { usize::MAX } else { n as usize };
    if sep.is_empty() {
        // Go splits into UTF-8 characters; the last piece takes the rest.
        let text = String::from_utf8_lossy(s).into_owned();
        let mut out = Vec::new();
        let mut rest = text.as_str();
        while !rest.is_empty() {
            if out.len() + 1 == limit {
                out.push(Value::from(rest));
                return out;
            }
            let c = rest.chars().next().map(char::len_utf8).unwrap_or(1);
            out.push(Value::from(&rest[..c]));
            rest = &rest[c..];
        }
        return out;
    }
    let mut out = Vec::new();
    let mut last = 0;
    for pos in memmem::find_iter(s, sep) {
        if pos < last {
            continue;
        }
        if out.len() + 1 == limit {
            break;
        }
        out.push(Value::from(&s[last..pos]));
        last = pos + sep.len();
    }
    out.push(Value::from(&s[last..]));
    out
}

/// Nuclei's `toChunks`: pieces of `size` characters.
fn chunks(s: &[u8], size: i64) -> Vec<Value> {
    if size <= 0 || size as usize >= s.len() {
        return vec![Value::from(s)];
    }
    let text = String::from_utf8_lossy(s);
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size as usize)
        .map(|c| Value::from(c.iter().collect::<String>()))
        .collect()
}

pub(super) fn split(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    if a.len() == 2 {
        let sep_or_count = a[1].to_string_lossy();
        if let Ok(count) = sep_or_count.parse::<i64>() {
            return Ok(Value::List(chunks(&s, count)));
        }
        return Ok(Value::List(split_n(&s, &a[1].as_bytes(), -1)));
    }
    let n = atoi("split", &a[2])?;
    Ok(Value::List(split_n(&s, &a[1].as_bytes(), n)))
}

pub(super) fn join(a: &[Value], _: &CallCtx) -> R {
    let sep = a[0].as_bytes();
    let items: Vec<&Value> = if a.len() == 2 {
        match &a[1] {
            Value::List(items) => items.iter().collect(),
            _ => return Err(DslError::arg("join", "cannot cast elements into string")),
        }
    } else {
        if a[1..].iter().any(|v| matches!(v, Value::List(_))) {
            return Err(DslError::arg(
                "join",
                "cannot use join on more than one slice element",
            ));
        }
        a[1..].iter().collect()
    };
    let mut out = Vec::new();
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(&sep);
        }
        out.extend_from_slice(&v.as_bytes());
    }
    Ok(Value::from(out))
}

pub(super) fn len(a: &[Value], _: &CallCtx) -> R {
    Ok(match &a[0] {
        Value::List(items) => Value::from(items.len()),
        Value::Str(s) => Value::from(s.len()),
        other => Value::from(other.as_bytes().len()),
    })
}

pub(super) fn index(a: &[Value], _: &CallCtx) -> R {
    let i = atoi("index", &a[1])?;
    match &a[0] {
        Value::List(items) => usize::try_from(i)
            .ok()
            .and_then(|i| items.get(i))
            .cloned()
            .ok_or_else(|| DslError::arg("index", format!("index out of range: {i}"))),
        other => {
            let s = other.as_bytes();
            usize::try_from(i)
                .ok()
                .and_then(|i| s.get(i))
                .map(|b| Value::from(vec![*b]))
                .ok_or_else(|| DslError::arg("index", format!("index out of range: {i}")))
        }
    }
}

pub(super) fn substr(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].to_bytes();
    if s.is_empty() {
        return Err(DslError::arg("substr", "empty string"));
    }
    let start = atoi("substr", &a[1])?;
    let start =
        usize::try_from(start).map_err(|_| DslError::arg("substr", "negative start position"))?;
    if start > s.len() {
        return Err(DslError::arg(
            "substr",
            "start position bigger than slice length",
        ));
    }
    if a.len() == 2 {
        return Ok(Value::Str(s.slice(start..)));
    }
    let end = atoi("substr", &a[2])?;
    let end = usize::try_from(end).map_err(|_| DslError::arg("substr", "negative end position"))?;
    if end < start {
        return Err(DslError::arg("substr", "end position before start"));
    }
    if end > s.len() {
        return Err(DslError::arg(
            "substr",
            "end position bigger than slice length",
        ));
    }
    Ok(Value::Str(s.slice(start..end)))
}

pub(super) fn regex(a: &[Value], ctx: &CallCtx) -> R {
    let input = a[1].as_bytes();
    use_regex(ctx, &a[0], &input, |re| {
        Value::Bool(re.is_some_and(|re| re.is_match(&input)))
    })
}

fn patterns(v: &Value) -> Vec<Value> {
    match v {
        Value::List(items) => items.clone(),
        other => vec![other.clone()],
    }
}

pub(super) fn regex_all(a: &[Value], _: &CallCtx) -> R {
    let input = a[0].as_bytes();
    for p in patterns(&a[1]) {
        let re = super::cached_regex(&p.as_bytes())?;
        if !re.is_match(&input) {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

pub(super) fn regex_any(a: &[Value], _: &CallCtx) -> R {
    let input = a[0].as_bytes();
    for p in patterns(&a[1]) {
        let re = super::cached_regex(&p.as_bytes())?;
        if re.is_match(&input) {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

pub(super) fn equals_any(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let found = a[1..].iter().flat_map(patterns).any(|c| c.as_bytes() == s);
    Ok(Value::Bool(found))
}

pub(super) fn remove_bad_chars(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let bad = a[1].as_bytes();
    if bad.is_ascii() {
        return Ok(Value::from(
            s.iter()
                .copied()
                .filter(|b| !bad.contains(b))
                .collect::<Vec<u8>>(),
        ));
    }
    let bad: Vec<char> = String::from_utf8_lossy(&bad).chars().collect();
    Ok(Value::from(with_text(&s, |t| {
        t.chars().filter(|c| !bad.contains(c)).collect::<String>()
    })))
}

pub(super) fn count(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let sub = a[1].as_bytes();
    if sub.is_empty() {
        return Ok(Value::from(with_text(&s, |t| t.chars().count()) + 1));
    }
    let mut n = 0usize;
    let mut last = 0;
    for pos in memmem::find_iter(&s, &sub) {
        if pos >= last {
            n += 1;
            last = pos + sub.len();
        }
    }
    Ok(Value::from(n))
}

pub(super) fn sort(a: &[Value], _: &CallCtx) -> R {
    if a.len() == 1 {
        let s = a[0].as_bytes();
        return Ok(Value::from(with_text(&s, |t| {
            let mut chars: Vec<char> = t.chars().collect();
            chars.sort_unstable();
            chars.into_iter().collect::<String>()
        })));
    }
    let mut items: Vec<Bytes> = a.iter().map(Value::to_bytes).collect();
    items.sort();
    Ok(Value::List(items.into_iter().map(Value::Str).collect()))
}

pub(super) fn uniq(a: &[Value], _: &CallCtx) -> R {
    if a.len() == 1 {
        let s = a[0].as_bytes();
        return Ok(Value::from(with_text(&s, |t| {
            let mut seen = std::collections::HashSet::new();
            t.chars().filter(|c| seen.insert(*c)).collect::<String>()
        })));
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for v in a {
        let b = v.to_bytes();
        if seen.insert(b.clone()) {
            out.push(Value::Str(b));
        }
    }
    Ok(Value::List(out))
}

/// `padding(input, pad, length, 'prefix'|'suffix')`: pads `input` up to
/// `length` bytes by repeating `pad`. Older templates omit the mode; it then
/// pads as a prefix.
pub(super) fn padding(a: &[Value], _: &CallCtx) -> R {
    let len = int_arg("padding", &a[2])?;
    if len == 0 {
        return Err(DslError::arg("padding", "invalid padding length"));
    }
    let pad = a[1].as_bytes();
    if pad.is_empty() {
        return Err(DslError::arg("padding", "invalid padding byte"));
    }
    let data = a[0].as_bytes();
    let len = usize::try_from(len).unwrap_or(0);
    if data.len() >= len {
        return Ok(Value::from(data.to_vec()));
    }
    if len > MAX_BUILT {
        return Err(DslError::arg("padding", "result larger than 64 MiB"));
    }
    let mode = a.get(3).map(Value::to_string_lossy);
    let prefix = match mode.as_deref() {
        None | Some("prefix") => true,
        Some("suffix") => false,
        Some(_) => {
            return Err(DslError::arg(
                "padding",
                "padding mode must be 'prefix' or 'suffix'",
            ))
        }
    };
    let fill: Vec<u8> = pad.iter().copied().cycle().take(len - data.len()).collect();
    let mut out = Vec::with_capacity(len);
    if prefix {
        out.extend_from_slice(&fill);
        out.extend_from_slice(&data);
    } else {
        out.extend_from_slice(&data);
        out.extend_from_slice(&fill);
    }
    Ok(Value::from(out))
}

pub(super) fn to_string(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::Str(a[0].to_bytes()))
}

/// govalidator's `IsInt`: optional sign, no leading zeros.
fn is_int(t: &str) -> bool {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// govalidator's `IsFloat`.
fn is_float(t: &str) -> bool {
    if t.is_empty() {
        return false;
    }
    let s = t.strip_prefix(['+', '-']).unwrap_or(t);
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], Some(&mantissa[i + 1..])),
        None => (mantissa, None),
    };
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !frac.is_none_or(digits) {
        return false;
    }
    if let Some(e) = exp {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e.is_empty() || !digits(e) {
            return false;
        }
    }
    true
}

pub(super) fn to_number(a: &[Value], _: &CallCtx) -> R {
    match &a[0] {
        Value::Int(_) | Value::Float(_) => return Ok(a[0].clone()),
        _ => {}
    }
    let text = a[0].to_string_lossy();
    if is_int(&text) {
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Int(i));
        }
    }
    if is_float(&text) {
        if let Ok(f) = text.parse::<f64>() {
            return Ok(Value::Float(f));
        }
    }
    Err(DslError::arg(
        "to_number",
        format!("{text} could not be converted to int"),
    ))
}

pub(super) fn print_debug(a: &[Value], _: &CallCtx) -> R {
    let parts: Vec<String> = a.iter().map(Value::to_string_lossy).collect();
    tracing::debug!(values = ?parts, "print_debug");
    Ok(Value::Bool(true))
}

/// `getNetworkPort(port, default)`: the default when the port is empty or
/// one Nuclei treats as a protocol's usual port.
pub(super) fn get_network_port(a: &[Value], _: &CallCtx) -> R {
    const KNOWN: [&str; 6] = ["80", "443", "8080", "8081", "8443", "53"];
    let port = a[0].to_string_lossy();
    if port.is_empty() || KNOWN.iter().any(|k| k.eq_ignore_ascii_case(&port)) {
        return Ok(Value::Str(a[1].to_bytes()));
    }
    Ok(Value::from(port))
}
