//! The parsers: expressions, from tokens to a [`Node`] tree, and strings
//! with markers, from text to an [`Interp`]. They call each other: a string
//! literal of an expression may hold markers, and the text of a marker is an
//! expression.
//!
//! Operator precedence follows govaluate's planner, lowest first: ternary
//! `?:` and `??`; `||`; `&&`; comparators (`== != < > <= >= =~ !~ in`);
//! bitwise `& | ^`; shifts; `+ -`; `* / %`; `**`; prefix `- ! ~`. Note that
//! govaluate binds `&`, `|`, `^` tighter than comparisons, unlike C, and
//! every binary level, `**` included, is left-associative.

use std::sync::Arc;

use super::ast::{
    is_literal_only, is_simple_name, BinOp, Interp, Marker, Node, Part, Pattern, UnOp,
};
use super::error::DslError;
use super::helpers;
use super::lexer::{tokenize, Tok, Token};
use super::value::{Bytes, Value};
use crate::goregex::{self, LazyRegex};

const SECTION: &str = "§";

/// Parses an expression into its tree. With `strict`, a helper call with
/// an argument count the helper never accepts fails the parse; otherwise
/// it fails when evaluated.
pub(crate) fn expression(src: &str, strict: bool) -> Result<Node, DslError> {
    let tokens = tokenize(src)?;
    if tokens.is_empty() {
        return Err(DslError::Syntax {
            at: 0,
            message: "empty expression".into(),
        });
    }
    let mut p = Parser {
        src,
        strict,
        tokens: &tokens,
        pos: 0,
    };
    let root = p.ternary()?;
    if let Some(t) = p.peek() {
        return Err(DslError::Syntax {
            at: t.at,
            message: format!("unexpected '{}'", &src[t.at..t.end]),
        });
    }
    Ok(root)
}

/// Parses a string with markers. Odd markers are kept as text, as Nuclei
/// does, so this never fails.
pub(crate) fn interpolated(src: &str) -> Interp {
    let mut parts = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    let bytes = src.as_bytes();
    while i < bytes.len() {
        if bytes[i..].starts_with(b"{{") {
            if let Some((marker, end)) = brace_marker(src, i) {
                if text_start < i {
                    parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..i])));
                }
                parts.push(Part::Marker(marker));
                i = end;
                text_start = end;
                continue;
            }
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(SECTION.as_bytes()) {
            let after = i + SECTION.len();
            if let Some(close) = src[after..].find(SECTION) {
                let name = &src[after..after + close];
                if is_simple_name(name) {
                    if text_start < i {
                        parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..i])));
                    }
                    let end = after + close + SECTION.len();
                    parts.push(Part::Marker(Marker {
                        raw: src[i..end].into(),
                        inner: name.into(),
                        expr: None,
                        name_only: true,
                        literal_only: false,
                        simple: true,
                    }));
                    i = end;
                    text_start = end;
                    continue;
                }
            }
            i = after;
            continue;
        }
        i += 1;
    }
    if text_start < bytes.len() {
        parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..])));
    }
    let room = parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.len(),
            Part::Marker(_) => 32,
        })
        .sum();
    Interp { parts, room }
}

/// Finds the marker opening at `open`: the first closing `}}` whose enclosed
/// text parses as an expression, or failing that, the first `}}` when the
/// text is a bare name such as `interactsh-url` (`a-b` would otherwise read
/// as a subtraction, which still parses, so this is only for the rest).
fn brace_marker(src: &str, open: usize) -> Option<(Marker, usize)> {
    let inner_start = open + 2;
    let mut search = inner_start;
    let mut first: Option<usize> = None;
    // Bounded so a stray `{{` before a large JSON body (full of `}}`) costs
    // a few parse attempts, not one per closing pair.
    let mut attempts = 0;
    while let Some(rel) = src[search..].find("}}") {
        attempts += 1;
        if attempts > 32 {
            break;
        }
        let close = search + rel;
        // `}}}` closes on the last pair: `{{a}}}` is `{{a}}` then `}`, but
        // `{{md5({{a}})}}}` needs the inner pair; the parse check decides.
        let inner = &src[inner_start..close];
        first.get_or_insert(close);
        if !inner.trim().is_empty() {
            if let Ok(expr) = expression(inner, false) {
                return Some((
                    Marker {
                        raw: src[open..close + 2].into(),
                        inner: inner.into(),
                        literal_only: is_literal_only(&expr),
                        expr: Some(Arc::new(expr)),
                        name_only: false,
                        simple: is_simple_name(inner),
                    },
                    close + 2,
                ));
            }
        }
        search = close + 1;
    }
    let close = first?;
    let inner = &src[inner_start..close];
    if inner.contains("{{") || inner.trim().is_empty() {
        return None;
    }
    Some((
        Marker {
            raw: src[open..close + 2].into(),
            inner: inner.into(),
            expr: None,
            name_only: false,
            literal_only: false,
            simple: is_simple_name(inner),
        },
        close + 2,
    ))
}

struct Parser<'a> {
    src: &'a str,
    strict: bool,
    tokens: &'a [Token],
    pos: usize,
}

type PResult = Result<Node, DslError>;

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a Token> {
        self.tokens.get(self.pos)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Token {
                tok: Tok::Op(op), ..
            }) => Some(op),
            _ => None,
        }
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn end_offset(&self) -> usize {
        self.src.len()
    }

    fn error_here(&self, message: &str) -> DslError {
        match self.peek() {
            Some(t) => DslError::Syntax {
                at: t.at,
                message: format!("{message}, found '{}'", &self.src[t.at..t.end]),
            },
            None => DslError::Syntax {
                at: self.end_offset(),
                message: format!("{message}, found end of expression"),
            },
        }
    }

    fn ternary(&mut self) -> PResult {
        self.ternary_inner(true)
    }

    /// `c ? a : b`, plus govaluate's bare `a : b` ("a unless it is null"),
    /// which a few templates contain by accident (`"k":"v"` inside a call)
    /// and which Nuclei therefore accepts. A then-branch may not use the
    /// bare form, or it would swallow its own else-branch.
    fn ternary_inner(&mut self, allow_bare_else: bool) -> PResult {
        let cond = self.coalesce()?;
        if self.eat_op("?") {
            let then = self.ternary_inner(false)?;
            let otherwise = if self.eat_op(":") {
                Some(Box::new(self.ternary_inner(allow_bare_else)?))
            } else {
                None
            };
            return Ok(Node::Ternary(Box::new(cond), Box::new(then), otherwise));
        }
        if allow_bare_else && self.eat_op(":") {
            let right = self.ternary_inner(true)?;
            return Ok(Node::Coalesce(Box::new(cond), Box::new(right)));
        }
        Ok(cond)
    }

    fn coalesce(&mut self) -> PResult {
        let mut left = self.or()?;
        while self.eat_op("??") {
            let right = self.or()?;
            left = Node::Coalesce(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn or(&mut self) -> PResult {
        let mut left = self.and()?;
        while self.eat_op("||") {
            let right = self.and()?;
            left = Node::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> PResult {
        let mut left = self.comparison()?;
        while self.eat_op("&&") {
            let right = self.comparison()?;
            left = Node::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn comparison(&mut self) -> PResult {
        let mut left = self.bitwise()?;
        loop {
            if matches!(self.peek(), Some(Token { tok: Tok::In, .. })) {
                self.pos += 1;
                let right = self.bitwise()?;
                left = Node::In(Box::new(left), Box::new(right));
                continue;
            }
            let op = match self.peek_op() {
                Some("==") => BinOp::Eq,
                Some("!=") => BinOp::Ne,
                Some("<") => BinOp::Lt,
                Some(">") => BinOp::Gt,
                Some("<=") => BinOp::Le,
                Some(">=") => BinOp::Ge,
                Some(op @ ("=~" | "!~")) => {
                    self.pos += 1;
                    let right = self.bitwise()?;
                    let pattern = match right {
                        Node::Lit(Value::Str(p)) => Pattern::Fixed(fixed_regex(&p)),
                        other => Pattern::Dynamic(Box::new(other)),
                    };
                    left = Node::Match {
                        negate: op == "!~",
                        left: Box::new(left),
                        pattern,
                    };
                    continue;
                }
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.bitwise()?;
            left = Node::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn binary_level(&mut self, ops: &[(&str, BinOp)], next: fn(&mut Self) -> PResult) -> PResult {
        let mut left = next(self)?;
        'outer: loop {
            let Some(found) = self.peek_op() else {
                return Ok(left);
            };
            for (sym, op) in ops {
                if *sym == found {
                    self.pos += 1;
                    let right = next(self)?;
                    left = Node::Binary(*op, Box::new(left), Box::new(right));
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn bitwise(&mut self) -> PResult {
        self.binary_level(
            &[
                ("&", BinOp::BitAnd),
                ("|", BinOp::BitOr),
                ("^", BinOp::BitXor),
            ],
            Self::shift,
        )
    }

    fn shift(&mut self) -> PResult {
        self.binary_level(&[("<<", BinOp::Shl), (">>", BinOp::Shr)], Self::additive)
    }

    fn additive(&mut self) -> PResult {
        self.binary_level(
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            Self::multiplicative,
        )
    }

    fn multiplicative(&mut self) -> PResult {
        self.binary_level(
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
            Self::power,
        )
    }

    /// `**` is left-associative in govaluate, like every other level.
    fn power(&mut self) -> PResult {
        self.binary_level(&[("**", BinOp::Pow)], Self::unary)
    }

    /// Prefix operators bind tighter than `**` in govaluate: `-2 ** 2` is 4.
    fn unary(&mut self) -> PResult {
        let op = match self.peek_op() {
            Some("-") => UnOp::Neg,
            Some("!") => UnOp::Not,
            Some("~") => UnOp::BitNot,
            _ => return self.primary(),
        };
        self.pos += 1;
        let operand = self.unary()?;
        // Fold negative number literals so `-1` is a constant.
        if op == UnOp::Neg {
            match operand {
                Node::Lit(Value::Int(i)) => {
                    if let Some(n) = i.checked_neg() {
                        return Ok(Node::Lit(Value::Int(n)));
                    }
                    return Ok(Node::Unary(op, Box::new(Node::Lit(Value::Int(i)))));
                }
                Node::Lit(Value::Float(f)) => return Ok(Node::Lit(Value::Float(-f))),
                other => return Ok(Node::Unary(op, Box::new(other))),
            }
        }
        Ok(Node::Unary(op, Box::new(operand)))
    }

    fn primary(&mut self) -> PResult {
        let Some(token) = self.peek() else {
            return Err(self.error_here("expected a value"));
        };
        match &token.tok {
            Tok::Num(n) => {
                self.pos += 1;
                Ok(Node::Lit(n.value()))
            }
            Tok::Bool(b) => {
                self.pos += 1;
                Ok(Node::Lit(Value::Bool(*b)))
            }
            Tok::Str(bytes) => {
                self.pos += 1;
                Ok(string_literal(bytes))
            }
            Tok::Ident(name) => {
                self.pos += 1;
                if matches!(
                    self.peek(),
                    Some(Token {
                        tok: Tok::LParen,
                        ..
                    })
                ) {
                    self.pos += 1;
                    return self.call(name);
                }
                Ok(Node::Var(name.clone().into_boxed_str()))
            }
            Tok::LParen => {
                self.pos += 1;
                let first = self.ternary()?;
                if matches!(
                    self.peek(),
                    Some(Token {
                        tok: Tok::Comma,
                        ..
                    })
                ) {
                    let mut items = vec![first];
                    while matches!(
                        self.peek(),
                        Some(Token {
                            tok: Tok::Comma,
                            ..
                        })
                    ) {
                        self.pos += 1;
                        items.push(self.ternary()?);
                    }
                    self.expect_close()?;
                    return Ok(Node::List(items));
                }
                self.expect_close()?;
                Ok(first)
            }
            _ => Err(self.error_here("expected a value")),
        }
    }

    fn expect_close(&mut self) -> Result<(), DslError> {
        if matches!(
            self.peek(),
            Some(Token {
                tok: Tok::RParen,
                ..
            })
        ) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error_here("expected ')'"))
        }
    }

    fn call(&mut self, name: &str) -> PResult {
        let helper =
            helpers::lookup(name).ok_or_else(|| DslError::UnknownFunction(name.to_string()))?;
        let mut args = Vec::new();
        if matches!(
            self.peek(),
            Some(Token {
                tok: Tok::RParen,
                ..
            })
        ) {
            self.pos += 1;
        } else {
            loop {
                args.push(self.ternary()?);
                match self.peek() {
                    Some(Token {
                        tok: Tok::Comma, ..
                    }) => self.pos += 1,
                    Some(Token {
                        tok: Tok::RParen, ..
                    }) => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error_here("expected ',' or ')' in call")),
                }
            }
        }
        let arity_error = helper.check_arity(args.len()).err();
        if let (true, Some(e)) = (self.strict, &arity_error) {
            return Err(e.clone());
        }
        let regex = helper.regex_arg.and_then(|i| match args.get(i) {
            Some(Node::Lit(Value::Str(p))) => Some(fixed_regex(p)),
            _ => None,
        });
        Ok(Node::Call {
            helper,
            args,
            regex,
            arity_error,
        })
    }
}

fn string_literal(bytes: &[u8]) -> Node {
    let has_marker = memchr::memmem::find(bytes, b"{{").is_some()
        || memchr::memmem::find(bytes, "§".as_bytes()).is_some();
    if has_marker {
        if let Ok(text) = std::str::from_utf8(bytes) {
            let interp = interpolated(text);
            if !interp.is_plain() {
                return Node::Interp(Box::new(interp));
            }
        }
    }
    Node::Lit(Value::str(bytes))
}

/// A literal pattern of an expression: checked now, built when first run
/// (most expressions of a scan never get that far; see `goregex`).
fn fixed_regex(pattern: &[u8]) -> Result<Arc<LazyRegex>, DslError> {
    let text = String::from_utf8_lossy(pattern);
    Ok(goregex::compile_lazy(&text)?)
}
