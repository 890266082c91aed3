//! Random values for payloads: unique markers, throwaway names.

use std::net::{Ipv4Addr, Ipv6Addr};

use rand::Rng;

use super::{int_arg, CallCtx};
use crate::dsl::error::DslError;
use crate::dsl::value::Value;

type R = Result<Value, DslError>;

const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const NUMBERS: &str = "1234567890";

fn length(function: &'static str, v: &Value) -> Result<usize, DslError> {
    let n = int_arg(function, v)?;
    // A payload marker is short; refuse absurd sizes instead of allocating.
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= 1 << 20)
        .ok_or_else(|| DslError::arg(function, format!("invalid length {n}")))
}

fn sequence(function: &'static str, charset: &[u8], n: usize) -> R {
    if charset.is_empty() {
        return Err(DslError::arg(function, "empty character set"));
    }
    let mut rng = rand::rng();
    let out: Vec<u8> = (0..n)
        .map(|_| charset[rng.random_range(0..charset.len())])
        .collect();
    Ok(Value::from(out))
}

fn without(set: &str, bad: &[u8]) -> Vec<u8> {
    set.bytes().filter(|b| !bad.contains(b)).collect()
}

/// `rand_base(length, optional_charset)`.
pub(super) fn rand_base(a: &[Value], _: &CallCtx) -> R {
    let n = length("rand_base", &a[0])?;
    let mut charset = format!("{LETTERS}{NUMBERS}").into_bytes();
    if let Some(custom) = a.get(1) {
        let custom = custom.as_bytes();
        if !custom.trim_ascii().is_empty() {
            charset = custom.to_vec();
        }
    }
    sequence("rand_base", &charset, n)
}

/// `rand_char(optional_charset)`.
pub(super) fn rand_char(a: &[Value], _: &CallCtx) -> R {
    let mut charset = format!("{LETTERS}{NUMBERS}").into_bytes();
    if let Some(custom) = a.first() {
        let custom = custom.as_bytes();
        if !custom.trim_ascii().is_empty() {
            charset = custom.to_vec();
        }
    }
    sequence("rand_char", &charset, 1)
}

/// `rand_text_alpha(length, optional_bad_chars)`.
pub(super) fn rand_text_alpha(a: &[Value], _: &CallCtx) -> R {
    let n = length("rand_text_alpha", &a[0])?;
    let bad = a.get(1).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
    sequence("rand_text_alpha", &without(LETTERS, &bad), n)
}

/// `rand_text_alphanumeric(length, optional_bad_chars)`.
pub(super) fn rand_text_alphanumeric(a: &[Value], _: &CallCtx) -> R {
    let n = length("rand_text_alphanumeric", &a[0])?;
    let bad = a.get(1).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
    let set = format!("{LETTERS}{NUMBERS}");
    sequence("rand_text_alphanumeric", &without(&set, &bad), n)
}

/// `rand_text_numeric(length, optional_bad_numbers)`.
pub(super) fn rand_text_numeric(a: &[Value], _: &CallCtx) -> R {
    let n = length("rand_text_numeric", &a[0])?;
    let bad = a.get(1).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
    sequence("rand_text_numeric", &without(NUMBERS, &bad), n)
}

/// `rand_int(optional_min, optional_max)`: in `[min, max)`, with max
/// defaulting to `i32::MAX`.
pub(super) fn rand_int(a: &[Value], _: &CallCtx) -> R {
    let min = match a.first() {
        Some(v) => int_arg("rand_int", v)?,
        None => 0,
    };
    let max = match a.get(1) {
        Some(v) => int_arg("rand_int", v)?,
        None => i64::from(i32::MAX),
    };
    if max <= min {
        return Err(DslError::arg(
            "rand_int",
            format!("empty range: min {min} is not below max {max}"),
        ));
    }
    Ok(Value::Int(rand::rng().random_range(min..max)))
}

/// `rand_ip(cidr, ...)`: a random address inside one of the ranges.
pub(super) fn rand_ip(a: &[Value], _: &CallCtx) -> R {
    let mut rng = rand::rng();
    let pick = &a[rng.random_range(0..a.len())];
    let text = pick.to_string_lossy();
    let (addr, bits) = text
        .split_once('/')
        .ok_or_else(|| DslError::arg("rand_ip", format!("'{text}' is not a CIDR range")))?;
    let bits: u32 = bits
        .trim()
        .parse()
        .map_err(|_| DslError::arg("rand_ip", format!("bad prefix length in '{text}'")))?;
    if let Ok(v4) = addr.trim().parse::<Ipv4Addr>() {
        if bits > 32 {
            return Err(DslError::arg(
                "rand_ip",
                format!("bad prefix length in '{text}'"),
            ));
        }
        let host_bits = 32 - bits;
        let mask: u32 = if host_bits == 32 {
            0
        } else {
            u32::MAX << host_bits
        };
        let base = u32::from(v4) & mask;
        let host: u32 = if host_bits == 0 {
            0
        } else {
            rng.random::<u32>() & !mask
        };
        return Ok(Value::from(Ipv4Addr::from(base | host).to_string()));
    }
    if let Ok(v6) = addr.trim().parse::<Ipv6Addr>() {
        if bits > 128 {
            return Err(DslError::arg(
                "rand_ip",
                format!("bad prefix length in '{text}'"),
            ));
        }
        let host_bits = 128 - bits;
        let mask: u128 = if host_bits == 128 {
            0
        } else {
            u128::MAX << host_bits
        };
        let base = u128::from(v6) & mask;
        let host: u128 = if host_bits == 0 {
            0
        } else {
            rng.random::<u128>() & !mask
        };
        return Ok(Value::from(Ipv6Addr::from(base | host).to_string()));
    }
    Err(DslError::arg(
        "rand_ip",
        format!("'{text}' is not a CIDR range"),
    ))
}
