//! Encoding helpers, matching Go's standard library behaviour that Nuclei
//! inherits: `url.QueryEscape`, `base64.StdEncoding`, `html.EscapeString`...

use std::io::{Read, Write};

use base64::alphabet;
use base64::engine::{DecodePaddingMode, Engine, GeneralPurpose, GeneralPurposeConfig};

use super::{int_arg, CallCtx};
use crate::dsl::error::DslError;
use crate::dsl::value::Value;

type R = Result<Value, DslError>;

/// Decompressed output is capped like Nuclei's (10 MiB).
const MAX_DECOMPRESSED: u64 = 10 * 1024 * 1024;

/// Go's `StdEncoding`: padded, and lenient about the unused low bits of the
/// last character.
const STD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

pub(super) fn base64(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(STD.encode(a[0].as_bytes())))
}

/// Python's `base64.encodebytes`: lines of 76 characters, each ending with
/// a newline, including the last (so the empty input gives "\n", as
/// Nuclei's helper does). Favicon hashes depend on this exact layout.
pub(crate) fn base64_python(data: &[u8]) -> Vec<u8> {
    let encoded = STD.encode(data);
    let mut out = Vec::with_capacity(encoded.len() + encoded.len() / 76 + 1);
    for line in encoded.as_bytes().chunks(76) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    if encoded.is_empty() {
        out.push(b'\n');
    }
    out
}

pub(super) fn base64_py(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(base64_python(&a[0].as_bytes())))
}

pub(super) fn base64_decode(a: &[Value], _: &CallCtx) -> R {
    let input: Vec<u8> = a[0]
        .as_bytes()
        .iter()
        .copied()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect();
    STD.decode(input)
        .map(Value::from)
        .map_err(|e| DslError::bad_input("base64_decode", e))
}

/// `url.QueryEscape`.
pub(crate) fn query_escape(s: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &b in s {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
    }
    out
}

pub(super) fn url_encode(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(query_escape(&a[0].as_bytes())))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `url.QueryUnescape`: `+` is a space, and a bad `%` escape is an error.
pub(super) fn url_decode(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hi = s.get(i + 1).copied().and_then(hex_val);
                let lo = s.get(i + 2).copied().and_then(hex_val);
                match (hi, lo) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => {
                        let end = (i + 3).min(s.len());
                        return Err(DslError::arg(
                            "url_decode",
                            format!(
                                "invalid URL escape \"{}\"",
                                String::from_utf8_lossy(&s[i..end])
                            ),
                        ));
                    }
                }
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(Value::from(out))
}

pub(super) fn hex_encode(a: &[Value], _: &CallCtx) -> R {
    Ok(Value::from(hex::encode(a[0].as_bytes())))
}

pub(super) fn hex_decode(a: &[Value], _: &CallCtx) -> R {
    hex::decode(a[0].as_bytes())
        .map(Value::from)
        .map_err(|e| DslError::bad_input("hex_decode", e))
}

/// `html.EscapeString`: the five characters Go escapes, with its numeric
/// forms for the quotes.
pub(super) fn html_escape(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let mut out = Vec::with_capacity(s.len());
    for &b in s.iter() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'"' => out.extend_from_slice(b"&#34;"),
            _ => out.push(b),
        }
    }
    Ok(Value::from(out))
}

/// The Latin-1 entities, in code point order from U+00A0. Like the five
/// basic ones, HTML accepts them without the closing `;` (legacy names).
const LATIN1: [&str; 96] = [
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf",
    "laquo", "not", "shy", "reg", "macr", "deg", "plusmn", "sup2", "sup3", "acute", "micro",
    "para", "middot", "cedil", "sup1", "ordm", "raquo", "frac14", "frac12", "frac34", "iquest",
    "Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig", "Ccedil", "Egrave", "Eacute",
    "Ecirc", "Euml", "Igrave", "Iacute", "Icirc", "Iuml", "ETH", "Ntilde", "Ograve", "Oacute",
    "Ocirc", "Otilde", "Ouml", "times", "Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute",
    "THORN", "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil",
    "egrave", "eacute", "ecirc", "euml", "igrave", "iacute", "icirc", "iuml", "eth", "ntilde",
    "ograve", "oacute", "ocirc", "otilde", "ouml", "divide", "oslash", "ugrave", "uacute", "ucirc",
    "uuml", "yacute", "thorn", "yuml",
];

/// Legacy names understood without a `;` besides the Latin-1 ones.
const BASIC: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("AMP", '&'),
    ("LT", '<'),
    ("GT", '>'),
    ("QUOT", '"'),
];

/// Other common named entities, recognised only with their `;`. Go knows the
/// whole HTML5 table; names missing here are left as written.
const NAMED: &[(&str, &str)] = &[
    ("apos", "'"),
    ("trade", "™"),
    ("hellip", "…"),
    ("mdash", "—"),
    ("ndash", "–"),
    ("lsquo", "‘"),
    ("rsquo", "’"),
    ("sbquo", "‚"),
    ("ldquo", "“"),
    ("rdquo", "”"),
    ("bdquo", "„"),
    ("euro", "€"),
    ("bull", "•"),
    ("dagger", "†"),
    ("Dagger", "‡"),
    ("permil", "‰"),
    ("lsaquo", "‹"),
    ("rsaquo", "›"),
    ("larr", "←"),
    ("rarr", "→"),
    ("uarr", "↑"),
    ("darr", "↓"),
    ("harr", "↔"),
    ("ne", "≠"),
    ("le", "≤"),
    ("ge", "≥"),
    ("infin", "∞"),
    ("tab", "\t"),
    ("newline", "\n"),
    ("colon", ":"),
    ("sol", "/"),
    ("bsol", "\\"),
    ("lpar", "("),
    ("rpar", ")"),
    ("lsqb", "["),
    ("rsqb", "]"),
    ("lcub", "{"),
    ("rcub", "}"),
    ("excl", "!"),
    ("num", "#"),
    ("dollar", "$"),
    ("percnt", "%"),
    ("ast", "*"),
    ("plus", "+"),
    ("comma", ","),
    ("period", "."),
    ("semi", ";"),
    ("equals", "="),
    ("quest", "?"),
    ("commat", "@"),
    ("grave", "`"),
    ("verbar", "|"),
    ("lowbar", "_"),
    ("Hat", "^"),
];

/// Windows-1252 characters that HTML maps numeric references 0x80-0x9F to.
const CP1252: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

/// A name usable without a closing `;`.
fn legacy_entity(name: &str) -> Option<char> {
    if let Some((_, c)) = BASIC.iter().find(|(n, _)| *n == name) {
        return Some(*c);
    }
    LATIN1
        .iter()
        .position(|n| *n == name)
        .and_then(|i| char::from_u32(0xA0 + i as u32))
}

/// `html.UnescapeString`: named, decimal and hex character references.
pub(super) fn html_unescape(a: &[Value], _: &CallCtx) -> R {
    let s = a[0].as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'&' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        if let Some((text, used)) = entity_at(&s[i + 1..]) {
            out.extend_from_slice(text.as_bytes());
            i += 1 + used;
        } else {
            out.push(b'&');
            i += 1;
        }
    }
    Ok(Value::from(out))
}

/// Decodes the entity after an `&`, returning its text and the bytes used.
fn entity_at(s: &[u8]) -> Option<(String, usize)> {
    if s.first() == Some(&b'#') {
        let (radix, start) = match s.get(1) {
            Some(b'x' | b'X') => (16, 2),
            _ => (10, 1),
        };
        let mut end = start;
        while end < s.len() && (s[end] as char).is_digit(radix) {
            end += 1;
        }
        if end == start {
            return None;
        }
        let digits = std::str::from_utf8(&s[start..end]).ok()?;
        let code = u32::from_str_radix(digits, radix).unwrap_or(u32::MAX);
        let c = match code {
            0x80..=0x9F => CP1252[(code - 0x80) as usize],
            0 => '\u{FFFD}',
            _ => char::from_u32(code).unwrap_or('\u{FFFD}'),
        };
        let used = if s.get(end) == Some(&b';') {
            end + 1
        } else {
            end
        };
        return Some((c.to_string(), used));
    }
    let mut end = 0;
    while end < s.len() && s[end].is_ascii_alphanumeric() {
        end += 1;
    }
    if end == 0 {
        return None;
    }
    let name = std::str::from_utf8(&s[..end]).ok()?;
    if s.get(end) == Some(&b';') {
        if let Some(c) = legacy_entity(name) {
            return Some((c.to_string(), end + 1));
        }
        if let Some((_, text)) = NAMED.iter().find(|(n, _)| *n == name) {
            return Some((text.to_string(), end + 1));
        }
    }
    // Without a `;`, the longest legacy name that prefixes the run counts.
    (2..=end.min(6))
        .rev()
        .find_map(|len| legacy_entity(&name[..len]).map(|c| (c.to_string(), len)))
}

fn compress_with<W: Write>(
    function: &'static str,
    mut w: W,
    data: &[u8],
    finish: impl FnOnce(W) -> std::io::Result<Vec<u8>>,
) -> R {
    w.write_all(data)
        .map_err(|e| DslError::bad_input(function, e))?;
    finish(w)
        .map(Value::from)
        .map_err(|e| DslError::bad_input(function, e))
}

fn decompress<Rd: Read>(function: &'static str, r: Rd) -> R {
    let mut out = Vec::new();
    r.take(MAX_DECOMPRESSED)
        .read_to_end(&mut out)
        .map_err(|e| DslError::bad_input(function, e))?;
    Ok(Value::from(out))
}

pub(super) fn gzip(a: &[Value], _: &CallCtx) -> R {
    let w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    compress_with("gzip", w, &a[0].as_bytes(), |w| w.finish())
}

pub(super) fn gzip_decode(a: &[Value], _: &CallCtx) -> R {
    let data = a[0].as_bytes();
    decompress("gzip_decode", flate2::read::GzDecoder::new(data.as_ref()))
}

pub(super) fn zlib(a: &[Value], _: &CallCtx) -> R {
    let w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    compress_with("zlib", w, &a[0].as_bytes(), |w| w.finish())
}

pub(super) fn zlib_decode(a: &[Value], _: &CallCtx) -> R {
    let data = a[0].as_bytes();
    decompress("zlib_decode", flate2::read::ZlibDecoder::new(data.as_ref()))
}

pub(super) fn deflate(a: &[Value], _: &CallCtx) -> R {
    let w = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    compress_with("deflate", w, &a[0].as_bytes(), |w| w.finish())
}

pub(super) fn inflate(a: &[Value], _: &CallCtx) -> R {
    let data = a[0].as_bytes();
    decompress("inflate", flate2::read::DeflateDecoder::new(data.as_ref()))
}

/// Nuclei's `stringNumberToDecimal`: with the prefix, Go's base-0 parsing
/// (which then reads the prefix); without, the given base.
fn to_decimal(function: &'static str, v: &Value, prefix: &str, radix: u32) -> R {
    let text = v.to_string_lossy();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let digits = body
        .strip_prefix(prefix)
        .or_else(|| body.strip_prefix(&prefix.to_uppercase()))
        .unwrap_or(body)
        .replace('_', "");
    i64::from_str_radix(&digits, radix)
        .map(|n| Value::Int(if negative { -n } else { n }))
        .map_err(|_| DslError::arg(function, format!("invalid number: {text}")))
}

pub(super) fn hex_to_dec(a: &[Value], _: &CallCtx) -> R {
    to_decimal("hex_to_dec", &a[0], "0x", 16)
}

pub(super) fn oct_to_dec(a: &[Value], _: &CallCtx) -> R {
    to_decimal("oct_to_dec", &a[0], "0o", 8)
}

pub(super) fn bin_to_dec(a: &[Value], _: &CallCtx) -> R {
    to_decimal("bin_to_dec", &a[0], "0b", 2)
}

pub(super) fn dec_to_hex(a: &[Value], _: &CallCtx) -> R {
    let n = int_arg("dec_to_hex", &a[0])?;
    let s = if n < 0 {
        format!("-{:x}", n.unsigned_abs())
    } else {
        format!("{n:x}")
    };
    Ok(Value::from(s))
}

fn parse_json(function: &'static str, v: &Value) -> Result<serde_json::Value, DslError> {
    serde_json::from_slice(&v.as_bytes()).map_err(|e| DslError::bad_input(function, e))
}

pub(super) fn json_minify(a: &[Value], _: &CallCtx) -> R {
    let v = parse_json("json_minify", &a[0])?;
    if !v.is_object() {
        return Err(DslError::arg("json_minify", "input is not a JSON object"));
    }
    serde_json::to_vec(&v)
        .map(Value::from)
        .map_err(|e| DslError::bad_input("json_minify", e))
}

pub(super) fn json_prettify(a: &[Value], _: &CallCtx) -> R {
    use serde::Serialize;
    let v = parse_json("json_prettify", &a[0])?;
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    v.serialize(&mut ser)
        .map_err(|e| DslError::bad_input("json_prettify", e))?;
    Ok(Value::from(out))
}

pub(super) fn xor(a: &[Value], _: &CallCtx) -> R {
    let parts: Vec<_> = a.iter().map(Value::as_bytes).collect();
    let n = parts[0].len();
    if parts.iter().any(|p| p.len() != n) {
        return Err(DslError::arg(
            "xor",
            "all arguments must have the same length",
        ));
    }
    let mut out = vec![0u8; n];
    for p in &parts {
        for (o, b) in out.iter_mut().zip(p.iter()) {
            *o ^= b;
        }
    }
    Ok(Value::from(out))
}

/// `zip(name, content, name, content, ...)`: a ZIP archive with each file
/// deflated, as Go's `archive/zip` writes by default (templates upload it).
pub(super) fn zip(a: &[Value], _: &CallCtx) -> R {
    if a.len() & 1 == 1 {
        return Err(DslError::arg(
            "zip",
            "zip function requires pairs of file entry and content",
        ));
    }
    let mut out: Vec<u8> = Vec::new();
    let mut central: Vec<u8> = Vec::new();
    let mut entries: u16 = 0;
    for pair in a.chunks(2) {
        let name = pair[0].as_bytes();
        let content = pair[1].as_bytes();
        let mut crc = flate2::Crc::new();
        crc.update(&content);
        let mut enc =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&content)
            .map_err(|e| DslError::bad_input("zip", e))?;
        let packed = enc.finish().map_err(|e| DslError::bad_input("zip", e))?;
        let too_big = || DslError::arg("zip", "entry too large for a ZIP archive");
        let packed_len = u32::try_from(packed.len()).map_err(|_| too_big())?;
        let plain_len = u32::try_from(content.len()).map_err(|_| too_big())?;
        let name_len = u16::try_from(name.len()).map_err(|_| too_big())?;
        let offset = u32::try_from(out.len()).map_err(|_| too_big())?;
        // Fields shared by the local header and the central directory:
        // version needed, UTF-8 names flag, deflate, DOS time and date 0.
        let mut common = Vec::new();
        common.extend_from_slice(&20u16.to_le_bytes());
        common.extend_from_slice(&0x0800u16.to_le_bytes());
        common.extend_from_slice(&8u16.to_le_bytes());
        common.extend_from_slice(&0u16.to_le_bytes());
        common.extend_from_slice(&0x21u16.to_le_bytes());
        common.extend_from_slice(&crc.sum().to_le_bytes());
        common.extend_from_slice(&packed_len.to_le_bytes());
        common.extend_from_slice(&plain_len.to_le_bytes());
        common.extend_from_slice(&name_len.to_le_bytes());
        common.extend_from_slice(&0u16.to_le_bytes());

        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&common);
        out.extend_from_slice(&name);
        out.extend_from_slice(&packed);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&common);
        // Comment length, disk number, internal and external attributes.
        central.extend_from_slice(&[0u8; 10]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(&name);
        entries = entries
            .checked_add(1)
            .ok_or_else(|| DslError::arg("zip", "too many entries"))?;
    }
    let cd_offset =
        u32::try_from(out.len()).map_err(|_| DslError::arg("zip", "archive too large"))?;
    let cd_len =
        u32::try_from(central.len()).map_err(|_| DslError::arg("zip", "archive too large"))?;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    Ok(Value::from(out))
}
