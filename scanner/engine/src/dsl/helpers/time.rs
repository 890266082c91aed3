//! Date and time helpers. Times are in UTC: scanner nodes run in UTC, and
//! Nuclei uses the host's local zone, which on servers is the same.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};

use super::{int_arg, CallCtx};
use crate::dsl::error::DslError;
use crate::dsl::value::Value;

type R = Result<Value, DslError>;

fn time_arg(v: Option<&Value>) -> Result<DateTime<Utc>, DslError> {
    let Some(v) = v else {
        return Ok(Utc::now());
    };
    let secs = match v {
        Value::Int(i) => *i,
        Value::Float(f) => *f as i64,
        other => {
            let text = other.to_string_lossy();
            text.trim()
                .parse::<i64>()
                .map_err(|_| DslError::arg("date_time", "invalid argument type"))?
        }
    };
    Utc.timestamp_opt(secs, 0)
        .single()
        .ok_or_else(|| DslError::arg("date_time", format!("timestamp {secs} out of range")))
}

/// `date_time(format, optional_unix_time)`. `format` uses either Nuclei's
/// `%Y %M %D %H %m %s` placeholders (two-digit, zero padded) or a Go
/// reference layout such as `2006-01-02`.
pub(super) fn date_time(a: &[Value], _: &CallCtx) -> R {
    let format = a[0].to_string_lossy();
    let t = time_arg(a.get(1))?;
    if has_percent_directive(&format) {
        return simple_format(&format, &t).map(Value::from);
    }
    let chrono_fmt = go_layout_to_chrono(&format);
    Ok(Value::from(t.format(&chrono_fmt).to_string()))
}

fn has_percent_directive(f: &str) -> bool {
    let b = f.as_bytes();
    b.windows(2)
        .any(|w| w[0] == b'%' && w[1].is_ascii_alphabetic())
}

fn simple_format(format: &str, t: &DateTime<Utc>) -> Result<String, DslError> {
    use chrono::{Datelike, Timelike};
    let pad = |n: u32| format!("{n:02}");
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(d) if d.is_ascii_alphabetic() => {
                chars.next();
                match d {
                    'Y' | 'y' => out.push_str(&t.year().to_string()),
                    'M' => out.push_str(&pad(t.month())),
                    'D' | 'd' => out.push_str(&pad(t.day())),
                    'H' | 'h' => out.push_str(&pad(t.hour())),
                    'm' => out.push_str(&pad(t.minute())),
                    'S' | 's' => out.push_str(&pad(t.second())),
                    other => {
                        return Err(DslError::arg(
                            "date_time",
                            format!("invalid date time format string: %{other}"),
                        ))
                    }
                }
            }
            _ => out.push('%'),
        }
    }
    Ok(out)
}

/// Translates a Go reference layout (`Mon Jan 2 15:04:05 MST 2006`) into a
/// chrono format string.
pub(crate) fn go_layout_to_chrono(layout: &str) -> String {
    const TOKENS: &[(&str, &str)] = &[
        ("January", "%B"),
        ("Monday", "%A"),
        ("Z07:00", "%:z"),
        ("-07:00", "%:z"),
        ("-0700", "%z"),
        ("2006", "%Y"),
        (".000000000", "%.9f"),
        (".000000", "%.6f"),
        (".000", "%.3f"),
        ("Jan", "%b"),
        ("Mon", "%a"),
        ("MST", "%Z"),
        ("_2", "%e"),
        ("01", "%m"),
        ("02", "%d"),
        ("03", "%I"),
        ("04", "%M"),
        ("05", "%S"),
        ("06", "%y"),
        ("15", "%H"),
        ("PM", "%p"),
        ("pm", "%P"),
        ("1", "%-m"),
        ("2", "%-d"),
        ("3", "%-I"),
        ("4", "%-M"),
        ("5", "%-S"),
    ];
    let mut out = String::with_capacity(layout.len() * 2);
    let mut rest = layout;
    'outer: while !rest.is_empty() {
        for (go, chrono) in TOKENS {
            if rest.starts_with(go) {
                out.push_str(chrono);
                rest = &rest[go.len()..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '%' {
            out.push_str("%%");
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `unix_time(optional_offset_seconds)`.
pub(super) fn unix_time(a: &[Value], _: &CallCtx) -> R {
    let offset = match a.first() {
        Some(v) => int_arg("unix_time", v)?,
        None => 0,
    };
    Ok(Value::Int(Utc::now().timestamp().saturating_add(offset)))
}

/// `to_unix_time(input, optional_go_layout)`: numbers pass through; dates
/// are read with the layout, or with Nuclei's default layouts.
pub(super) fn to_unix_time(a: &[Value], _: &CallCtx) -> R {
    let input = a[0].to_string_lossy();
    let input = input.trim();
    if let Ok(f) = input.parse::<f64>() {
        return Ok(Value::Int(f as i64));
    }
    if let Some(layout) = a.get(1) {
        let fmt = go_layout_to_chrono(&layout.to_string_lossy());
        return parse_with(input, &fmt).map(Value::Int).ok_or_else(|| {
            DslError::arg(
                "to_unix_time",
                format!(
                    "could not parse the current input with the '{}' layout",
                    layout.to_string_lossy()
                ),
            )
        });
    }
    const DEFAULTS: &[&str] = &[
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%SZ",
        "%Y-%m-%d %H:%M:%S %:z",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M %:z",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d %:z",
        "%Y-%m-%d",
    ];
    DEFAULTS
        .iter()
        .find_map(|f| parse_with(input, f))
        .map(Value::Int)
        .ok_or_else(|| {
            DslError::arg(
                "to_unix_time",
                "could not parse the current input with the default layouts",
            )
        })
}

fn parse_with(input: &str, fmt: &str) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_str(input, fmt) {
        return Some(t.timestamp());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(input, fmt) {
        return Some(t.and_utc().timestamp());
    }
    if input.ends_with('Z') {
        if let Ok(t) = NaiveDateTime::parse_from_str(input, fmt) {
            return Some(t.and_utc().timestamp());
        }
    }
    NaiveDate::parse_from_str(input, fmt)
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp())
}

thread_local! {
    /// Time `wait_for` asked for since the innermost open [`RequestedWait`]
    /// on this thread began.
    static REQUESTED: std::cell::Cell<std::time::Duration> =
        const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// `wait_for(seconds)`: true. Nuclei sleeps right there, while it builds
/// the request; sleeping inside expression evaluation would park a worker
/// thread, so the time is only noted here and the request builder reads it
/// ([`RequestedWait`]) and waits asynchronously before sending. Outside a
/// request (a matcher) nothing waits.
pub(super) fn wait_for(a: &[Value], _: &CallCtx) -> R {
    let seconds = match &a[0] {
        Value::Float(f) if f.is_finite() => *f,
        other => super::int_arg("wait_for", other)? as f64,
    };
    if seconds > 0.0 {
        // Far beyond any cap the engine applies; keeps the conversion sane.
        let asked = std::time::Duration::from_secs_f64(seconds.min(86_400.0));
        REQUESTED.with(|r| r.set(r.get().saturating_add(asked)));
    }
    Ok(Value::Bool(true))
}

/// Collects what `wait_for` asked for while one request is rendered:
/// [`RequestedWait::begin`] before, [`RequestedWait::end`] after, on the
/// same thread with nothing awaited in between. Nested collections each see
/// their own; dropping one unfinished restores the outer total.
#[must_use]
pub struct RequestedWait {
    outer: std::time::Duration,
}

impl RequestedWait {
    pub fn begin() -> RequestedWait {
        RequestedWait {
            outer: REQUESTED.with(|r| r.replace(std::time::Duration::ZERO)),
        }
    }

    /// The total asked for since `begin`.
    pub fn end(self) -> std::time::Duration {
        REQUESTED.with(|r| r.get())
    }
}

impl Drop for RequestedWait {
    fn drop(&mut self) {
        REQUESTED.with(|r| r.set(self.outer));
    }
}
