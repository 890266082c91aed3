//! The syntax tree of an expression, and the parsed form of a string with
//! `{{...}}` markers. The two nest in each other (a string literal of an
//! expression may hold markers, a marker holds an expression), so both live
//! here, under the parser (`parse`) and the evaluator (`eval`), which each
//! handle both, and under the public [`Expr`](super::Expr) and
//! [`TemplateString`](super::TemplateString) that wrap them.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::error::DslError;
use super::helpers::Helper;
use super::value::{Bytes, Value};
use crate::goregex::LazyRegex;

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
    Interp(Box<Interp>),
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

/// A string with markers, parsed: text and markers in order.
#[derive(Debug, Clone)]
pub(crate) struct Interp {
    pub(crate) parts: Vec<Part>,
    /// Room a render starts with: the text and a short value per marker,
    /// so that most renders never grow their buffer.
    pub(crate) room: usize,
}

#[derive(Debug, Clone)]
pub(crate) enum Part {
    Text(Bytes),
    Marker(Marker),
}

#[derive(Debug, Clone)]
pub(crate) struct Marker {
    /// The marker as written, braces included, emitted when unresolved.
    pub(crate) raw: Box<str>,
    /// The text between the braces.
    pub(crate) inner: Box<str>,
    /// The inner text parsed as an expression, when it is one.
    pub(crate) expr: Option<Arc<Node>>,
    /// `§name§` markers only ever name a variable.
    pub(crate) name_only: bool,
    /// The expression has neither variables nor helper calls, so it is
    /// left as written (computed once here, not per render).
    pub(crate) literal_only: bool,
    /// `inner` is a bare name, looked up as is before anything else
    /// (computed once here, not per render).
    pub(crate) simple: bool,
}

impl Interp {
    /// True when the string has no marker at all: rendering returns it as is.
    pub(crate) fn is_plain(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Variables the markers read, sorted, without repeats. A marker that is
    /// a bare name (`{{interactsh-url}}`) counts as that one name.
    pub(crate) fn variables(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for part in &self.parts {
            if let Part::Marker(m) = part {
                out.extend(m.variables());
            }
        }
        out.into_iter().collect()
    }

    /// Helpers the markers call, sorted, without repeats.
    pub(crate) fn functions(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for part in &self.parts {
            if let Part::Marker(Marker { expr: Some(e), .. }) = part {
                out.extend(functions(e));
            }
        }
        out.into_iter().collect()
    }
}

impl Marker {
    pub(crate) fn variables(&self) -> Vec<String> {
        match &self.expr {
            _ if self.name_only => vec![self.inner.to_string()],
            Some(e) if !is_simple_name(self.inner.trim()) => variables(e),
            Some(_) if self.literal_only => Vec::new(),
            _ if is_simple_name(self.inner.trim()) => vec![self.inner.trim().to_string()],
            _ => Vec::new(),
        }
    }
}

pub(crate) fn is_simple_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Names of the variables a tree reads (including those inside `{{...}}`
/// markers in its string literals), sorted, without repeats.
pub(crate) fn variables(node: &Node) -> Vec<String> {
    let mut out = BTreeSet::new();
    collect(node, &mut out, &mut BTreeSet::new());
    out.into_iter().collect()
}

/// Names of the helpers a tree calls, sorted, without repeats.
pub(crate) fn functions(node: &Node) -> Vec<String> {
    let mut out = BTreeSet::new();
    collect(node, &mut BTreeSet::new(), &mut out);
    out.into_iter().collect()
}

/// True when a tree reads no variable and calls no helper, so its value
/// never changes.
pub(crate) fn is_literal_only(node: &Node) -> bool {
    variables(node).is_empty() && functions(node).is_empty()
}

/// Errors that are certain to occur whenever the tree is evaluated.
pub(crate) fn problems(node: &Node, out: &mut Vec<DslError>) {
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
