//! Evaluation of the syntax tree, with govaluate's typing rules: `+` joins
//! strings when either side is one, other arithmetic needs numbers, logical
//! operators need booleans, and values of different kinds are never equal.

use std::cmp::Ordering;

use super::ast::{is_simple_name, variables, BinOp, Interp, Marker, Node, Part, Pattern, UnOp};
use super::error::DslError;
use super::helpers::{self, CallCtx};
use super::value::{Bytes, Value};
use super::vars::Vars;

pub(crate) fn eval(node: &Node, vars: &dyn Vars) -> Result<Value, DslError> {
    match node {
        Node::Lit(v) => Ok(v.clone()),
        Node::Interp(t) => Ok(Value::from(render(t, vars).bytes)),
        Node::Var(name) => vars
            .get(name)
            .ok_or_else(|| DslError::UndefinedVariable(name.to_string())),
        Node::Unary(op, a) => unary(*op, eval(a, vars)?),
        Node::Binary(op, a, b) => binary(*op, eval(a, vars)?, eval(b, vars)?),
        Node::And(a, b) => {
            if !boolean("&&", eval(a, vars)?)? {
                return Ok(Value::Bool(false));
            }
            Ok(Value::Bool(boolean("&&", eval(b, vars)?)?))
        }
        Node::Or(a, b) => {
            if boolean("||", eval(a, vars)?)? {
                return Ok(Value::Bool(true));
            }
            Ok(Value::Bool(boolean("||", eval(b, vars)?)?))
        }
        Node::Coalesce(a, b) => {
            let left = eval(a, vars)?;
            if left.is_null() {
                eval(b, vars)
            } else {
                Ok(left)
            }
        }
        Node::Ternary(c, then, otherwise) => {
            if boolean("?", eval(c, vars)?)? {
                eval(then, vars)
            } else {
                match otherwise {
                    Some(o) => eval(o, vars),
                    None => Ok(Value::Null),
                }
            }
        }
        Node::Match {
            negate,
            left,
            pattern,
        } => Ok(Value::Bool(matches(left, pattern, vars)? != *negate)),
        Node::In(a, b) => {
            let needle = eval(a, vars)?;
            match eval(b, vars)? {
                Value::List(items) => Ok(Value::Bool(items.iter().any(|i| i.dsl_eq(&needle)))),
                other => Ok(Value::Bool(other.dsl_eq(&needle))),
            }
        }
        Node::Call {
            helper,
            args,
            regex,
            arity_error,
        } => {
            if let Some(e) = arity_error {
                return Err(e.clone());
            }
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(eval(a, vars)?);
            }
            let regex = match regex {
                Some(Ok(re)) => Some(&**re),
                Some(Err(e)) => return Err(e.clone()),
                None => None,
            };
            helpers::call_memo(helper, &values, &CallCtx { regex })
        }
        Node::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(eval(i, vars)?);
            }
            Ok(Value::List(out))
        }
    }
}

/// The result of rendering a template string.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub bytes: Vec<u8>,
    /// Variables that markers needed and the scope did not define, in order
    /// of first appearance, without repeats. Their markers were kept verbatim.
    pub unresolved: Vec<String>,
    /// Markers whose expression failed for another reason (a helper rejected
    /// its input, an unsupported helper...), with the error. Kept verbatim.
    pub errors: Vec<(String, DslError)>,
}

impl Rendered {
    /// True when every marker was resolved.
    pub fn is_complete(&self) -> bool {
        self.unresolved.is_empty() && self.errors.is_empty()
    }

    pub fn into_string_lossy(self) -> String {
        String::from_utf8(self.bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// Renders a string with markers against a scope. Never fails: what cannot
/// be resolved is kept verbatim and reported in the result.
pub(crate) fn render(interp: &Interp, vars: &dyn Vars) -> Rendered {
    let mut out = Rendered {
        bytes: Vec::with_capacity(interp.room),
        ..Rendered::default()
    };
    for part in &interp.parts {
        match part {
            Part::Text(t) => out.bytes.extend_from_slice(t),
            Part::Marker(m) => render_marker(m, vars, &mut out),
        }
    }
    out
}

fn render_marker(marker: &Marker, vars: &dyn Vars, out: &mut Rendered) {
    // Exact-name substitution first (Nuclei's replacer); only names can
    // be keys, so expressions skip the lookup.
    if marker.simple {
        if let Some(v) = vars.get(&marker.inner) {
            out.bytes.extend_from_slice(&v.as_bytes());
            return;
        }
    }
    let keep = |out: &mut Rendered| out.bytes.extend_from_slice(marker.raw.as_bytes());
    let note = |out: &mut Rendered, name: String| {
        if !out.unresolved.contains(&name) {
            out.unresolved.push(name);
        }
    };
    if marker.name_only {
        keep(out);
        note(out, marker.inner.to_string());
        return;
    }
    let Some(expr) = &marker.expr else {
        keep(out);
        let trimmed = marker.inner.trim();
        if is_simple_name(trimmed) {
            note(out, trimmed.to_string());
        }
        return;
    };
    if marker.literal_only {
        keep(out);
        return;
    }
    match eval(expr, vars) {
        Ok(v) => out.bytes.extend_from_slice(&v.as_bytes()),
        Err(DslError::UndefinedVariable(missing)) => {
            keep(out);
            let trimmed = marker.inner.trim();
            if is_simple_name(trimmed) {
                note(out, trimmed.to_string());
            } else {
                let mut any = false;
                for name in variables(expr) {
                    if !vars.contains(&name) {
                        note(out, name);
                        any = true;
                    }
                }
                if !any {
                    note(out, missing);
                }
            }
        }
        Err(e) => {
            keep(out);
            out.errors.push((marker.inner.to_string(), e));
        }
    }
}

/// Whether `left` matches `pattern` (`=~`).
fn matches(left: &Node, pattern: &Pattern, vars: &dyn Vars) -> Result<bool, DslError> {
    let subject = eval(left, vars)?;
    Ok(match pattern {
        Pattern::Fixed(Ok(re)) => {
            let bytes = subject.as_bytes();
            re.get_for(&bytes).is_some_and(|r| r.is_match(&bytes))
        }
        Pattern::Fixed(Err(e)) => return Err(e.clone()),
        Pattern::Dynamic(p) => {
            let pat = eval(p, vars)?;
            let re = helpers::cached_regex(&pat.as_bytes())?;
            re.is_match(&subject.as_bytes())
        }
    })
}

fn boolean(op: &'static str, v: Value) -> Result<bool, DslError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(DslError::TypeMismatch {
            op,
            left: other.type_name(),
            right: "bool",
        }),
    }
}

fn unary(op: UnOp, v: Value) -> Result<Value, DslError> {
    match (op, v) {
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, Value::Int(i)) => Ok(i
            .checked_neg()
            .map(Value::Int)
            .unwrap_or(Value::Float(-(i as f64)))),
        (UnOp::Neg, Value::Float(f)) => Ok(Value::Float(-f)),
        (UnOp::BitNot, Value::Int(i)) => Ok(Value::Int(!i)),
        (UnOp::BitNot, Value::Float(f)) => Ok(Value::Int(!(f as i64))),
        (op, v) => Err(DslError::TypeMismatch {
            op: match op {
                UnOp::Neg => "-",
                UnOp::Not => "!",
                UnOp::BitNot => "~",
            },
            left: "nothing",
            right: v.type_name(),
        }),
    }
}

fn mismatch(op: BinOp, l: &Value, r: &Value) -> DslError {
    DslError::TypeMismatch {
        op: op.symbol(),
        left: l.type_name(),
        right: r.type_name(),
    }
}

fn binary(op: BinOp, l: Value, r: Value) -> Result<Value, DslError> {
    match op {
        BinOp::Eq => return Ok(Value::Bool(l.dsl_eq(&r))),
        BinOp::Ne => return Ok(Value::Bool(!l.dsl_eq(&r))),
        BinOp::Add if matches!(l, Value::Str(_)) || matches!(r, Value::Str(_)) => {
            let (a, b) = (l.as_bytes(), r.as_bytes());
            let mut out = Vec::with_capacity(a.len() + b.len());
            out.extend_from_slice(&a);
            out.extend_from_slice(&b);
            return Ok(Value::Str(Bytes::from(out)));
        }
        BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => return compare(op, &l, &r),
        _ => {}
    }
    // Everything left is numeric.
    if let (Value::Int(a), Value::Int(b)) = (&l, &r) {
        if let Some(v) = exact_int(op, *a, *b) {
            return Ok(Value::Int(v));
        }
    }
    let (Some(a), Some(b)) = (l.as_f64(), r.as_f64()) else {
        return Err(mismatch(op, &l, &r));
    };
    Ok(match op {
        BinOp::Add => Value::Float(a + b),
        BinOp::Sub => Value::Float(a - b),
        BinOp::Mul => Value::Float(a * b),
        BinOp::Div => Value::Float(a / b),
        BinOp::Mod => Value::Float(a % b),
        BinOp::Pow => Value::Float(a.powf(b)),
        BinOp::BitAnd => Value::Int((a as i64) & (b as i64)),
        BinOp::BitOr => Value::Int((a as i64) | (b as i64)),
        BinOp::BitXor => Value::Int((a as i64) ^ (b as i64)),
        BinOp::Shl => Value::Int(shift_left(a as i64, b as i64)),
        BinOp::Shr => Value::Int(shift_right(a as i64, b as i64)),
        _ => return Err(mismatch(op, &l, &r)),
    })
}

/// `<`, `>`, `<=`, `>=`: strings by their bytes, numbers by value.
fn compare(op: BinOp, l: &Value, r: &Value) -> Result<Value, DslError> {
    let ord = match (l, r) {
        (Value::Str(a), Value::Str(b)) => Some(a.as_ref().cmp(b.as_ref())),
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        _ => match (l.as_f64(), r.as_f64()) {
            (Some(a), Some(b)) => a.partial_cmp(&b),
            _ => return Err(mismatch(op, l, r)),
        },
    };
    let result = match (op, ord) {
        (_, None) => false,
        (BinOp::Lt, Some(o)) => o == Ordering::Less,
        (BinOp::Gt, Some(o)) => o == Ordering::Greater,
        (BinOp::Le, Some(o)) => o != Ordering::Greater,
        (_, Some(o)) => o != Ordering::Less,
    };
    Ok(Value::Bool(result))
}

/// Integer arithmetic when its result is an exact integer; `None` sends
/// the operation to floating point (an overflow, an inexact division).
fn exact_int(op: BinOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => {
            if b != 0 && a.checked_rem(b) == Some(0) {
                a.checked_div(b)
            } else {
                None
            }
        }
        BinOp::Mod => {
            if b != 0 {
                a.checked_rem(b)
            } else {
                None
            }
        }
        BinOp::Pow => u32::try_from(b).ok().and_then(|e| a.checked_pow(e)),
        BinOp::BitAnd => Some(a & b),
        BinOp::BitOr => Some(a | b),
        BinOp::BitXor => Some(a ^ b),
        BinOp::Shl => Some(shift_left(a, b)),
        BinOp::Shr => Some(shift_right(a, b)),
        _ => None,
    }
}

// govaluate shifts as unsigned 64-bit values; shifting by 64 or more gives 0.
fn shift_left(a: i64, b: i64) -> i64 {
    if !(0..64).contains(&b) {
        return 0;
    }
    ((a as u64) << b) as i64
}

fn shift_right(a: i64, b: i64) -> i64 {
    if !(0..64).contains(&b) {
        return 0;
    }
    ((a as u64) >> b) as i64
}
