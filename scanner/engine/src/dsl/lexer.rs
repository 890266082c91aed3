//! Tokens of the expression language, following govaluate's lexer where it
//! matters for templates: a backslash inside a string literal makes the next
//! character literal (so `'\n'` is the letter `n`, as in Nuclei), a string
//! ends only at its own kind of quote, and `0x` starts a hex number.

use super::error::DslError;
use super::value::Value;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Num(NumLit),
    Str(Vec<u8>),
    Ident(String),
    Bool(bool),
    Op(&'static str),
    In,
    LParen,
    RParen,
    Comma,
}

/// Numbers keep their exact integer form when they have one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NumLit {
    Int(i64),
    Float(f64),
}

impl NumLit {
    pub(crate) fn value(self) -> Value {
        match self {
            NumLit::Int(i) => Value::Int(i),
            NumLit::Float(f) => Value::Float(f),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub at: usize,
    /// Byte range of the token in the source, used to keep string literals'
    /// raw text for `{{...}}` markers inside them.
    pub end: usize,
}

/// Longest operators first so that maximal munch picks `**` over `*`.
const OPERATORS: &[&str] = &[
    "**", "==", "!=", "<=", ">=", "=~", "!~", "&&", "||", "??", "<<", ">>", "+", "-", "*", "/",
    "%", "<", ">", "!", "~", "&", "|", "^", "?", ":",
];

pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, DslError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let (tok, end) = next_token(src, i)?;
        out.push(Token { tok, at: i, end });
        i = end;
    }
    Ok(out)
}

/// The token that starts at `start` (not whitespace), and where it ends.
fn next_token(src: &str, start: usize) -> Result<(Tok, usize), DslError> {
    let rest = &src[start..];
    // Markers nested inside an expression (`{{md5({{num}})}}`) group
    // like parentheses: Nuclei substitutes the inner value before
    // evaluating the outer expression.
    if rest.starts_with("{{") {
        return Ok((Tok::LParen, start + 2));
    }
    if rest.starts_with("}}") {
        return Ok((Tok::RParen, start + 2));
    }
    match src.as_bytes()[start] {
        b'(' => Ok((Tok::LParen, start + 1)),
        b')' => Ok((Tok::RParen, start + 1)),
        b',' => Ok((Tok::Comma, start + 1)),
        quote @ (b'\'' | b'"') => lex_string(src, start, quote),
        b'[' => lex_bracketed_name(src, start),
        b'0'..=b'9' | b'.' => {
            let (lit, next) = lex_number(src, start)?;
            Ok((Tok::Num(lit), next))
        }
        c if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => lex_word(src, start),
        _ => lex_operator(src, start),
    }
}

/// A string literal opened by `quote` at `start`: a backslash takes the
/// next character literally, and only the same quote closes it.
fn lex_string(src: &str, start: usize, quote: u8) -> Result<(Tok, usize), DslError> {
    let bytes = src.as_bytes();
    let mut value = Vec::new();
    let mut i = start + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' {
            if i + 1 >= bytes.len() {
                break;
            }
            // The escaped character is taken literally, whole
            // (it may be a multi-byte UTF-8 sequence).
            let ch_len = utf8_len(bytes[i + 1]);
            let stop = (i + 1 + ch_len).min(bytes.len());
            value.extend_from_slice(&bytes[i + 1..stop]);
            i = stop;
            continue;
        }
        if b == quote {
            return Ok((Tok::Str(value), i + 1));
        }
        value.push(b);
        i += 1;
    }
    Err(DslError::Syntax {
        at: start,
        message: "unclosed string literal".into(),
    })
}

/// govaluate's escaped parameter name: `[any-name here]`.
fn lex_bracketed_name(src: &str, start: usize) -> Result<(Tok, usize), DslError> {
    let Some(close) = src[start + 1..].find(']') else {
        return Err(DslError::Syntax {
            at: start,
            message: "unclosed parameter bracket".into(),
        });
    };
    let name = src[start + 1..start + 1 + close].to_string();
    Ok((Tok::Ident(name), start + 1 + close + 1))
}

/// A name, `true`, `false` or `in`.
fn lex_word(src: &str, start: usize) -> Result<(Tok, usize), DslError> {
    let mut end = start;
    for ch in src[start..].chars() {
        if ch.is_alphanumeric() || ch == '_' || ch == '.' {
            end += ch.len_utf8();
        } else {
            break;
        }
    }
    if end == start {
        return Err(DslError::Syntax {
            at: start,
            message: format!(
                "unexpected character '{}'",
                &src[start..].chars().next().unwrap_or('?')
            ),
        });
    }
    let tok = match &src[start..end] {
        "true" => Tok::Bool(true),
        "false" => Tok::Bool(false),
        "in" | "IN" => Tok::In,
        word => Tok::Ident(word.to_string()),
    };
    Ok((tok, end))
}

/// The longest operator at `start`.
fn lex_operator(src: &str, start: usize) -> Result<(Tok, usize), DslError> {
    let rest = &src[start..];
    let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) else {
        return Err(DslError::Syntax {
            at: start,
            message: format!("invalid token '{}'", rest.chars().next().unwrap_or('?')),
        });
    };
    Ok((Tok::Op(op), start + op.len()))
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

fn lex_number(src: &str, start: usize) -> Result<(NumLit, usize), DslError> {
    let bytes = src.as_bytes();
    if src[start..].starts_with("0x") || src[start..].starts_with("0X") {
        let mut j = start + 2;
        while j < bytes.len() && bytes[j].is_ascii_hexdigit() {
            j += 1;
        }
        let digits = &src[start + 2..j];
        return u64::from_str_radix(digits, 16)
            .map(|v| {
                let lit = i64::try_from(v)
                    .map(NumLit::Int)
                    .unwrap_or(NumLit::Float(v as f64));
                (lit, j)
            })
            .map_err(|_| DslError::Syntax {
                at: start,
                message: format!("invalid hex number '0x{digits}'"),
            });
    }
    let mut j = start;
    while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
        j += 1;
    }
    let text = &src[start..j];
    if !text.contains('.') {
        if let Ok(i) = text.parse::<i64>() {
            return Ok((NumLit::Int(i), j));
        }
    }
    text.parse::<f64>()
        .map(|f| (NumLit::Float(f), j))
        .map_err(|_| DslError::Syntax {
            at: start,
            message: format!("invalid number '{text}'"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_makes_the_next_character_literal_as_govaluate_does() {
        let toks = tokenize(r#"'a\'b' "c\"d" 'e\nf' 'g\\h'"#).unwrap_or_default();
        let strs: Vec<Vec<u8>> = toks
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Str(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(
            strs,
            vec![
                b"a'b".to_vec(),
                b"c\"d".to_vec(),
                b"enf".to_vec(),
                b"g\\h".to_vec()
            ]
        );
    }

    #[test]
    fn a_string_ends_only_at_its_own_quote() {
        let toks = tokenize(r#""it's" 'say "hi"'"#).unwrap_or_default();
        assert_eq!(toks[0].tok, Tok::Str(b"it's".to_vec()));
        assert_eq!(toks[1].tok, Tok::Str(b"say \"hi\"".to_vec()));
    }

    #[test]
    fn numbers_keep_integers_exact_and_read_hex() {
        let toks = tokenize("200 1.5 0x1F").unwrap_or_default();
        assert_eq!(toks[0].tok, Tok::Num(NumLit::Int(200)));
        assert_eq!(toks[1].tok, Tok::Num(NumLit::Float(1.5)));
        assert_eq!(toks[2].tok, Tok::Num(NumLit::Int(31)));
    }

    #[test]
    fn an_unclosed_string_is_a_syntax_error() {
        assert!(matches!(tokenize("'abc"), Err(DslError::Syntax { .. })));
    }
}
