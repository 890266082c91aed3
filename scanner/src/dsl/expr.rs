//! Compiled expressions: the syntax tree and the parser that builds it.
//!
//! Operator precedence follows govaluate's planner, lowest first: ternary
//! `?:` and `??`; `||`; `&&`; comparators (`== != < > <= >= =~ !~ in`);
//! bitwise `& | ^`; shifts; `+ -`; `* / %`; `**`; prefix `- ! ~`. Note that
//! govaluate binds `&`, `|`, `^` tighter than comparisons, unlike C, and
//! every binary level, `**` included, is left-associative.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use regex::bytes::Regex;

use crate::goregex::{self, LazyRegex};

use super::error::DslError;
use super::eval;
use super::helpers::{self, Helper};
use super::lexer::{tokenize, Tok, Token};
use super::template::TemplateString;
use super::value::Value;
use super::vars::Vars;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }
}

/// A regular expression operand: compiled once when it is a literal.
/// A literal that does not compile keeps its error, raised at evaluation, so
/// one broken matcher does not make the whole template unloadable (Nuclei
/// behaves the same way).
#[derive(Debug)]
pub(crate) enum Pattern {
    Fixed(Result<Arc<LazyRegex>, DslError>),
    Dynamic(Box<Node>),
}

#[derive(Debug)]
pub(crate) enum Node {
    Lit(Value),
    /// A string literal holding `{{...}}` or `§...§` markers, resolved
    /// against the evaluation scope (Nuclei resolves them before compiling).
    Interp(Box<TemplateString>),
    Var(Box<str>),
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Coalesce(Box<Node>, Box<Node>),
    Ternary(Box<Node>, Box<Node>, Option<Box<Node>>),
    Match {
        negate: bool,
        left: Box<Node>,
        pattern: Pattern,
    },
    In(Box<Node>, Box<Node>),
    Call {
        helper: &'static Helper,
        args: Vec<Node>,
        /// The helper's pattern argument, precompiled when it is a literal.
        regex: Option<Result<Arc<LazyRegex>, DslError>>,
        /// A call with an argument count the helper never accepts. Nuclei
        /// compiles such calls and fails when they run; so do we, unless the
        /// expression was parsed with [`Expr::parse_strict`].
        arity_error: Option<DslError>,
    },
    List(Vec<Node>),
}

/// A parsed expression: compile once, evaluate many times, share freely
/// between threads (cloning is a reference-count bump).
#[derive(Clone)]
pub struct Expr {
    src: Arc<str>,
    root: Arc<Node>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expr").field(&self.src).finish()
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.src)
    }
}

impl Expr {
    /// Parses an expression. Calls to functions that are not helpers fail
    /// here with [`DslError::UnknownFunction`]. A call with an argument
    /// count the helper never accepts parses (as in Nuclei) and fails with
    /// [`DslError::Arity`] when evaluated; see [`Expr::problems`].
    pub fn parse(src: &str) -> Result<Expr, DslError> {
        Self::parse_with(src, false)
    }

    /// Like [`Expr::parse`], but argument-count errors fail the parse.
    pub fn parse_strict(src: &str) -> Result<Expr, DslError> {
        Self::parse_with(src, true)
    }

    /// Errors that are certain to occur whenever the expression runs
    /// (currently: helper calls with the wrong number of arguments, and
    /// literal regular expressions that do not compile). A template loader
    /// can report these without rejecting the template.
    pub fn problems(&self) -> Vec<DslError> {
        let mut out = Vec::new();
        problems(&self.root, &mut out);
        out
    }

    fn parse_with(src: &str, strict: bool) -> Result<Expr, DslError> {
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
        Ok(Expr {
            src: Arc::from(src),
            root: Arc::new(root),
        })
    }

    /// Evaluates against a scope of variables.
    pub fn eval(&self, vars: &dyn Vars) -> Result<Value, DslError> {
        eval::eval(&self.root, vars)
    }

    /// Evaluates and requires a boolean, as Nuclei's DSL matchers do.
    pub fn eval_bool(&self, vars: &dyn Vars) -> Result<bool, DslError> {
        match self.eval(vars)? {
            Value::Bool(b) => Ok(b),
            other => Err(DslError::TypeMismatch {
                op: "dsl result",
                left: other.type_name(),
                right: "bool",
            }),
        }
    }

    /// The source text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// Names of the variables the expression reads (including those inside
    /// `{{...}}` markers in its string literals), sorted, without repeats.
    pub fn variables(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        collect(&self.root, &mut out, &mut BTreeSet::new());
        out.into_iter().collect()
    }

    /// Names of the helpers the expression calls, sorted, without repeats.
    pub fn functions(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        collect(&self.root, &mut BTreeSet::new(), &mut out);
        out.into_iter().collect()
    }

    /// True when the expression contains no variable at all, so its value
    /// never changes (`{{7*7}}` in a payload is such a literal, and Nuclei
    /// leaves it as written).
    pub fn is_literal_only(&self) -> bool {
        self.variables().is_empty() && self.functions().is_empty()
    }
}

fn problems(node: &Node, out: &mut Vec<DslError>) {
    match node {
        Node::Lit(_) | Node::Var(_) | Node::Interp(_) => {}
        Node::Unary(_, a) => problems(a, out),
        Node::Binary(_, a, b)
        | Node::And(a, b)
        | Node::Or(a, b)
        | Node::Coalesce(a, b)
        | Node::In(a, b) => {
            problems(a, out);
            problems(b, out);
        }
        Node::Ternary(a, b, c) => {
            problems(a, out);
            problems(b, out);
            if let Some(c) = c {
                problems(c, out);
            }
        }
        Node::Match { left, pattern, .. } => {
            problems(left, out);
            match pattern {
                Pattern::Fixed(Err(e)) => out.push(e.clone()),
                Pattern::Fixed(Ok(_)) => {}
                Pattern::Dynamic(p) => problems(p, out),
            }
        }
        Node::Call {
            args,
            regex,
            arity_error,
            ..
        } => {
            if let Some(e) = arity_error {
                out.push(e.clone());
            }
            if let Some(Err(e)) = regex {
                out.push(e.clone());
            }
            for a in args {
                problems(a, out);
            }
        }
        Node::List(items) => items.iter().for_each(|i| problems(i, out)),
    }
}

fn collect(node: &Node, vars: &mut BTreeSet<String>, funcs: &mut BTreeSet<String>) {
    match node {
        Node::Lit(_) => {}
        Node::Interp(t) => {
            vars.extend(t.variables());
            funcs.extend(t.functions());
        }
        Node::Var(name) => {
            vars.insert(name.to_string());
        }
        Node::Unary(_, a) => collect(a, vars, funcs),
        Node::Binary(_, a, b)
        | Node::And(a, b)
        | Node::Or(a, b)
        | Node::Coalesce(a, b)
        | Node::In(a, b) => {
            collect(a, vars, funcs);
            collect(b, vars, funcs);
        }
        Node::Ternary(a, b, c) => {
            collect(a, vars, funcs);
            collect(b, vars, funcs);
            if let Some(c) = c {
                collect(c, vars, funcs);
            }
        }
        Node::Match { left, pattern, .. } => {
            collect(left, vars, funcs);
            if let Pattern::Dynamic(p) = pattern {
                collect(p, vars, funcs);
            }
        }
        Node::Call { helper, args, .. } => {
            funcs.insert(helper.name.to_string());
            for a in args {
                collect(a, vars, funcs);
            }
        }
        Node::List(items) => {
            for a in items {
                collect(a, vars, funcs);
            }
        }
    }
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
            if let Ok(t) = TemplateString::parse(text) {
                if !t.is_plain() {
                    return Node::Interp(Box::new(t));
                }
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

/// Compiles a template regex. Templates are written for Go's RE2;
/// `goregex` bridges the dialect differences (ASCII `\d`/`\w`/`\b`, literal
/// `[` and `{`, `\Q...\E`) so DSL `regex()` and `=~` agree with `regex`
/// matchers on the same pattern.
pub(crate) fn compile_regex(pattern: &[u8]) -> Result<Arc<Regex>, DslError> {
    Ok(Arc::new(goregex::compile_uncached(
        &String::from_utf8_lossy(pattern),
    )?))
}
