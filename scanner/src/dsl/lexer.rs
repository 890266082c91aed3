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
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        // Markers nested inside an expression (`{{md5({{num}})}}`) group
        // like parentheses: Nuclei substitutes the inner value before
        // evaluating the outer expression.
        if src[i..].starts_with("{{") {
            out.push(Token {
                tok: Tok::LParen,
                at: start,
                end: i + 2,
            });
            i += 2;
            continue;
        }
        if src[i..].starts_with("}}") {
            out.push(Token {
                tok: Tok::RParen,
                at: start,
                end: i + 2,
            });
            i += 2;
            continue;
        }
        match c {
            b'(' => {
                out.push(Token {
                    tok: Tok::LParen,
                    at: start,
                    end: i + 1,
                });
                i += 1;
            }
            b')' => {
                out.push(Token {
                    tok: Tok::RParen,
                    at: start,
                    end: i + 1,
                });
                i += 1;
            }
            b',' => {
                out.push(Token {
                    tok: Tok::Comma,
                    at: start,
                    end: i + 1,
                });
                i += 1;
            }
            b'\'' | b'"' => {
                let quote = c;
                let mut value = Vec::new();
                i += 1;
                let mut closed = false;
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
                        closed = true;
                        i += 1;
                        break;
                    }
                    value.push(b);
                    i += 1;
                }
                if !closed {
                    return Err(DslError::Syntax {
                        at: start,
                        message: "unclosed string literal".into(),
                    });
                }
                out.push(Token {
                    tok: Tok::Str(value),
                    at: start,
                    end: i,
                });
            }
            b'[' => {
                // govaluate's escaped parameter name: `[any-name here]`.
                let Some(close) = src[i + 1..].find(']') else {
                    return Err(DslError::Syntax {
                        at: start,
                        message: "unclosed parameter bracket".into(),
                    });
                };
                let name = src[i + 1..i + 1 + close].to_string();
                i = i + 1 + close + 1;
                out.push(Token {
                    tok: Tok::Ident(name),
                    at: start,
                    end: i,
                });
            }
            b'0'..=b'9' | b'.' => {
                let (lit, next) = lex_number(src, i)?;
                out.push(Token {
                    tok: Tok::Num(lit),
                    at: start,
                    end: next,
                });
                i = next;
            }
            _ if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
                let mut j = i;
                for ch in src[i..].chars() {
                    if ch.is_alphanumeric() || ch == '_' || ch == '.' {
                        j += ch.len_utf8();
                    } else {
                        break;
                    }
                }
                if j == i {
                    return Err(DslError::Syntax {
                        at: start,
                        message: format!(
                            "unexpected character '{}'",
                            &src[i..].chars().next().unwrap_or('?')
                        ),
                    });
                }
                let word = &src[i..j];
                let tok = match word {
                    "true" => Tok::Bool(true),
                    "false" => Tok::Bool(false),
                    "in" | "IN" => Tok::In,
                    _ => Tok::Ident(word.to_string()),
                };
                out.push(Token {
                    tok,
                    at: start,
                    end: j,
                });
                i = j;
            }
            _ => {
                let rest = &src[i..];
                let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) else {
                    return Err(DslError::Syntax {
                        at: start,
                        message: format!("invalid token '{}'", rest.chars().next().unwrap_or('?')),
                    });
                };
                i += op.len();
                out.push(Token {
                    tok: Tok::Op(op),
                    at: start,
                    end: i,
                });
            }
        }
    }
    Ok(out)
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
