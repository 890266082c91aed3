//! `flow:` expressions the engine runs natively: boolean combinations of
//! request blocks, such as `http(1) && (http(2) || http(3))`.
//!
//! Nuclei runs every `flow` as JavaScript. Most public templates only
//! chain blocks with `&&`, `||` and parentheses, which need no JavaScript
//! engine: `http(n)` runs block `n` (1-based) and is true when it matched,
//! `&&` and `||` short-circuit as in JavaScript. A single `&` (bitwise and
//! in JavaScript) evaluates both sides. Anything else (`set`, `iterate`,
//! `template[...]`, other protocols) is JavaScript this parser refuses,
//! and the template keeps a named reason.

use std::fmt;

/// A parsed boolean flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowExpr {
    /// `http(n)`: the block's index, 0-based.
    Block(usize),
    /// `http(n)` naming a block the template does not have (written
    /// 1-based): Nuclei logs an error and the step is false; the steps
    /// before it have run and their results stand.
    Missing(usize),
    /// `a && b`: `b` runs only when `a` was true.
    And(Box<FlowExpr>, Box<FlowExpr>),
    /// `a || b`: `b` runs only when `a` was false.
    Or(Box<FlowExpr>, Box<FlowExpr>),
    /// `a & b`: both run, true when both were.
    BothAnd(Box<FlowExpr>, Box<FlowExpr>),
}

/// Why a flow is not a boolean flow over existing blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowError {
    /// Not of the boolean form: JavaScript proper.
    NotBoolean,
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowError::NotBoolean => f.write_str("not a boolean expression over http(n)"),
        }
    }
}

impl std::error::Error for FlowError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Http(usize),
    AndAnd,
    OrOr,
    And,
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>, FlowError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_ws = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() || b == b';' && text[i + 1..].trim().is_empty() {
            i += 1;
            continue;
        }
        match b {
            b'(' => {
                out.push(Token::Open);
                i += 1;
            }
            b')' => {
                out.push(Token::Close);
                i += 1;
            }
            b'&' if bytes.get(i + 1) == Some(&b'&') => {
                out.push(Token::AndAnd);
                i += 2;
            }
            b'&' => {
                out.push(Token::And);
                i += 1;
            }
            b'|' if bytes.get(i + 1) == Some(&b'|') => {
                out.push(Token::OrOr);
                i += 2;
            }
            _ if text[i..].starts_with("http") => {
                // `http(1)`, `http (3)`, `http("1")`, `http('1')`.
                let mut j = skip_ws(i + 4);
                if bytes.get(j) != Some(&b'(') {
                    return Err(FlowError::NotBoolean);
                }
                j = skip_ws(j + 1);
                let quote = bytes.get(j).copied().filter(|q| *q == b'"' || *q == b'\'');
                if quote.is_some() {
                    j += 1;
                }
                let start = j;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                if j == start {
                    return Err(FlowError::NotBoolean);
                }
                let n: usize = text[start..j].parse().map_err(|_| FlowError::NotBoolean)?;
                if let Some(q) = quote {
                    if bytes.get(j) != Some(&q) {
                        return Err(FlowError::NotBoolean);
                    }
                    j += 1;
                }
                j = skip_ws(j);
                if bytes.get(j) != Some(&b')') {
                    return Err(FlowError::NotBoolean);
                }
                out.push(Token::Http(n));
                i = j + 1;
            }
            _ => return Err(FlowError::NotBoolean),
        }
    }
    Ok(out)
}

/// Precedence climbing over JavaScript's order: `&` binds tighter than
/// `&&`, which binds tighter than `||`.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
    blocks: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn or(&mut self) -> Result<FlowExpr, FlowError> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::OrOr) {
            self.at += 1;
            let right = self.and()?;
            left = FlowExpr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<FlowExpr, FlowError> {
        let mut left = self.both()?;
        while self.peek() == Some(&Token::AndAnd) {
            self.at += 1;
            let right = self.both()?;
            left = FlowExpr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn both(&mut self) -> Result<FlowExpr, FlowError> {
        let mut left = self.primary()?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            let right = self.primary()?;
            left = FlowExpr::BothAnd(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<FlowExpr, FlowError> {
        match self.tokens.get(self.at).cloned() {
            Some(Token::Http(n)) => {
                self.at += 1;
                if n == 0 || n > self.blocks {
                    return Ok(FlowExpr::Missing(n));
                }
                Ok(FlowExpr::Block(n - 1))
            }
            Some(Token::Open) => {
                self.at += 1;
                let inner = self.or()?;
                if self.peek() != Some(&Token::Close) {
                    return Err(FlowError::NotBoolean);
                }
                self.at += 1;
                Ok(inner)
            }
            _ => Err(FlowError::NotBoolean),
        }
    }
}

impl FlowExpr {
    /// Parses `text` for a template with `blocks` http blocks.
    pub fn parse(text: &str, blocks: usize) -> Result<FlowExpr, FlowError> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens,
            at: 0,
            blocks,
        };
        let expr = parser.or()?;
        if parser.at != parser.tokens.len() {
            return Err(FlowError::NotBoolean);
        }
        Ok(expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: usize) -> Box<FlowExpr> {
        Box::new(FlowExpr::Block(n))
    }

    #[test]
    fn and_binds_tighter_than_or() {
        assert_eq!(
            FlowExpr::parse("http(1) || http(2) && http(3)", 3),
            Ok(FlowExpr::Or(b(0), Box::new(FlowExpr::And(b(1), b(2)))))
        );
    }

    #[test]
    fn parentheses_group() {
        assert_eq!(
            FlowExpr::parse("(http(1) || http(2)) && http (3)", 3),
            Ok(FlowExpr::And(Box::new(FlowExpr::Or(b(0), b(1))), b(2)))
        );
    }

    #[test]
    fn single_ampersand_is_a_non_short_circuit_and() {
        assert_eq!(
            FlowExpr::parse("http(1) & http('2')", 2),
            Ok(FlowExpr::BothAnd(b(0), b(1)))
        );
    }

    #[test]
    fn javascript_is_refused() {
        for js in [
            "http(1)\nfor (let x of iterate(template.a)) { set('x', x); http(2) }",
            "javascript() && http(1)",
            "http(1) && tcp(1)",
            "http(1) &&",
            "(http(1)",
            "http(a)",
            "",
        ] {
            assert_eq!(FlowExpr::parse(js, 2), Err(FlowError::NotBoolean), "{js}");
        }
    }

    #[test]
    fn a_block_that_does_not_exist_is_a_missing_step() {
        assert_eq!(
            FlowExpr::parse("http(1) && http(3)", 2),
            Ok(FlowExpr::And(b(0), Box::new(FlowExpr::Missing(3))))
        );
        assert_eq!(FlowExpr::parse("http(0)", 2), Ok(FlowExpr::Missing(0)));
    }
}
