//! [`CronSpec`]: a validated five-field cron expression, evaluated in UTC.
//!
//! Standard (Vixie) cron and the `cron` crate disagree in three ways, so an
//! expression is never handed to the crate as typed:
//! - the crate wants a seconds field (and an optional year);
//! - it numbers weekdays 1 = Sunday .. 7 = Saturday, where standard cron
//!   numbers 0 = Sunday .. 6 = Saturday and accepts 7 for Sunday too;
//! - it ANDs day-of-month with day-of-week, where standard cron ORs them when
//!   both are restricted (neither field starts with `*`).
//!
//! We therefore parse each field ourselves into the set of values it allows
//! (lists, ranges, steps, `MON`/`JAN` names, with errors that say what is
//! wrong), and hand the crate those sets as explicit lists. When both day
//! fields are restricted, the expression becomes two crate schedules (one per
//! day field) and the next firing is the earlier of the two.
//!
//! An expression may fire at most every 5 minutes: [`CronSpec::parse`]
//! rejects one with two consecutive firings closer than that, decided exactly
//! from the sets (see [`CronSpec::check_min_interval`]) rather than by
//! sampling a horizon.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, SubsecRound, Utc};

/// The shortest allowed distance between two firings, in minutes.
pub const MIN_INTERVAL_MINUTES: u32 = 5;

/// Why an expression was refused; the message is shown to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(String);

fn err(msg: impl Into<String>) -> CronError {
    CronError(msg.into())
}

/// A five-field cron expression (`minute hour day-of-month month
/// day-of-week`), validated, in UTC.
#[derive(Clone)]
pub struct CronSpec {
    source: String,
    /// Bit `m` set when minute `m` (0..=59) fires.
    minutes: u64,
    /// Bit `h` for hours 0..=23.
    hours: u32,
    /// Bit `d` for days of the month 1..=31.
    days_of_month: u32,
    /// Bit `m` for months 1..=12.
    months: u16,
    /// Bit `d` for weekdays, standard numbering 0 = Sunday ..= 6 = Saturday.
    days_of_week: u8,
    /// Both day fields restricted: a day matches when EITHER matches.
    days_ored: bool,
    /// The `cron` crate schedules whose union is this expression.
    schedules: Vec<::cron::Schedule>,
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronSpec").field(&self.source).finish()
    }
}

impl fmt::Display for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl PartialEq for CronSpec {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl FromStr for CronSpec {
    type Err = CronError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronSpec::parse(s)
    }
}

/// One field's rules: its name, bounds, and names allowed for values.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// The value of `names[0]`.
    names_start: u32,
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    names_start: 0,
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    names_start: 0,
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    names_start: 0,
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    names_start: 1,
};
// 7 is accepted as Sunday and folded onto 0 after parsing.
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    names_start: 0,
};

impl Field {
    fn value(&self, raw: &str) -> Result<u32, CronError> {
        let lower = raw.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            return Ok(self.names_start + i as u32);
        }
        let v: u32 = raw.parse().map_err(|_| {
            err(format!(
                "{} field: `{raw}` is not a number{}",
                self.name,
                if self.names.is_empty() {
                    String::new()
                } else {
                    format!(" or a name like `{}`", self.names[1].to_uppercase())
                }
            ))
        })?;
        if !(self.min..=self.max).contains(&v) {
            return Err(err(format!(
                "{} field: {v} is outside {}-{}",
                self.name, self.min, self.max
            )));
        }
        Ok(v)
    }

    /// The set of values a field allows, as a bit set.
    fn parse(&self, text: &str) -> Result<u64, CronError> {
        let mut set = 0u64;
        for item in text.split(',') {
            if item.is_empty() {
                return Err(err(format!("{} field: empty list item", self.name)));
            }
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s.parse().map_err(|_| {
                        err(format!("{} field: step `{s}` is not a number", self.name))
                    })?;
                    if step == 0 || step > self.max {
                        return Err(err(format!(
                            "{} field: step must be between 1 and {}",
                            self.name, self.max
                        )));
                    }
                    (r, Some(step))
                }
                None => (item, None),
            };
            let (lo, hi) = if range == "*" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(err(format!(
                        "{} field: range {a}-{b} runs backwards",
                        self.name
                    )));
                }
                (a, b)
            } else {
                let v = self.value(range)?;
                // `5/15` means from 5 to the end, every 15 (as `5-59/15`).
                (v, if step.is_some() { self.max } else { v })
            };
            let step = step.unwrap_or(1);
            let mut v = lo;
            while v <= hi {
                set |= 1 << v;
                v += step;
            }
        }
        Ok(set)
    }
}

/// Standard shorthands; `@reboot` has no meaning for a scan schedule.
fn expand_macro(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "@hourly" => "0 * * * *",
        "@daily" | "@midnight" => "0 0 * * *",
        "@weekly" => "0 0 * * 0",
        "@monthly" => "0 0 1 * *",
        "@yearly" | "@annually" => "0 0 1 1 *",
        _ => return None,
    })
}

/// `1,2,3` from a bit set, or `*` when every value in `min..=max` is set.
fn list(set: u64, min: u32, max: u32, map: impl Fn(u32) -> u32) -> String {
    if (min..=max).all(|v| set & (1 << v) != 0) {
        return "*".to_string();
    }
    (min..=max)
        .filter(|v| set & (1 << v) != 0)
        .map(|v| map(v).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl CronSpec {
    /// Parses and validates a five-field expression (or `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly`). Refuses expressions that never
    /// fire or fire more often than every [`MIN_INTERVAL_MINUTES`] minutes.
    pub fn parse(text: &str) -> Result<CronSpec, CronError> {
        let source = text.trim();
        let expanded = if source.starts_with('@') {
            expand_macro(source).ok_or_else(|| {
                err("unknown shorthand: use @hourly, @daily, @weekly, @monthly or @yearly")
            })?
        } else {
            source
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "must have five fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        let minutes = MINUTE.parse(fields[0])?;
        let hours = HOUR.parse(fields[1])? as u32;
        let days_of_month = DAY_OF_MONTH.parse(fields[2])? as u32;
        let months = MONTH.parse(fields[3])? as u16;
        let mut dow = DAY_OF_WEEK.parse(fields[4])?;
        if dow & (1 << 7) != 0 {
            dow = (dow & !(1 << 7)) | 1;
        }
        let days_of_week = dow as u8;
        // Vixie cron's rule: a day field is "restricted" unless it starts with
        // `*`, and two restricted day fields are ORed.
        let days_ored = !fields[2].starts_with('*') && !fields[4].starts_with('*');

        let minute_list = list(minutes, 0, 59, |v| v);
        let hour_list = list(hours as u64, 0, 23, |v| v);
        let dom_list = list(days_of_month as u64, 1, 31, |v| v);
        let month_list = list(months as u64, 1, 12, |v| v);
        // The crate numbers Sunday 1 .. Saturday 7.
        let dow_list = list(days_of_week as u64, 0, 6, |v| v + 1);
        let crate_expr =
            |dom: &str, dow: &str| format!("0 {minute_list} {hour_list} {dom} {month_list} {dow}");
        let exprs = if days_ored {
            vec![crate_expr(&dom_list, "*"), crate_expr("*", &dow_list)]
        } else {
            vec![crate_expr(&dom_list, &dow_list)]
        };
        let schedules = exprs
            .iter()
            .map(|e| {
                ::cron::Schedule::from_str(e)
                    .map_err(|x| err(format!("cannot be evaluated ({e}): {x}")))
            })
            .collect::<Result<Vec<_>, _>>()?;

        let spec = CronSpec {
            source: source.to_string(),
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            days_ored,
            schedules,
        };
        if spec.next_after(Utc::now()).is_none() {
            return Err(err("never fires (no such date)"));
        }
        spec.check_min_interval()?;
        Ok(spec)
    }

    /// The expression as given (trimmed).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The first firing strictly after `after`, in UTC; `None` when the
    /// expression never fires again.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let after = after.trunc_subsecs(0);
        self.schedules
            .iter()
            .filter_map(|s| s.after(&after).next())
            .min()
    }

    /// Whether the expression fires on this calendar day.
    fn fires_on(&self, day: NaiveDate) -> bool {
        if self.months & (1 << day.month()) == 0 {
            return false;
        }
        let dom = self.days_of_month & (1 << day.day()) != 0;
        let dow = self.days_of_week & (1 << day.weekday().num_days_from_sunday()) != 0;
        if self.days_ored {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// Every firing day runs the same times of day, so two consecutive firings
    /// are either on one day (the closest two times of the day) or on two
    /// consecutive firing days (the last time of one day, then the first of
    /// the next). Firing days further apart are at least a day apart. The
    /// second case only matters when two calendar days in a row both fire:
    /// that is searched for over 400 years, a whole Gregorian cycle (so a rare
    /// coincidence, like a leap day that falls next to a chosen weekday, is
    /// found too).
    fn check_min_interval(&self) -> Result<(), CronError> {
        let times: Vec<u32> = (0..24)
            .filter(|h| self.hours & (1 << h) != 0)
            .flat_map(|h| {
                (0..60)
                    .filter(|m| self.minutes & (1u64 << m) != 0)
                    .map(move |m| h * 60 + m)
            })
            .collect();
        let too_close = || {
            err(format!(
                "fires more often than every {MIN_INTERVAL_MINUTES} minutes"
            ))
        };
        if times.windows(2).any(|w| w[1] - w[0] < MIN_INTERVAL_MINUTES) {
            return Err(too_close());
        }
        let (first, last) = (times[0], times[times.len() - 1]);
        if 24 * 60 - last + first < MIN_INTERVAL_MINUTES {
            let start = NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid date");
            let mut previous = false;
            for day in start.iter_days().take(146_097 + 1) {
                let fires = self.fires_on(day);
                if fires && previous {
                    return Err(too_close());
                }
                previous = fires;
            }
        }
        Ok(())
    }

    /// The firings in `(after, until]`, for tests and previews.
    pub fn firings_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut t = after;
        while let Some(next) = self.next_after(t) {
            if next > until {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Timelike, Weekday};

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn spec(s: &str) -> CronSpec {
        CronSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Brute force over every minute: what standard cron would fire.
    fn fires_at(c: &CronSpec, t: DateTime<Utc>) -> bool {
        c.fires_on(t.date_naive())
            && c.hours & (1 << t.hour()) != 0
            && c.minutes & (1u64 << t.minute()) != 0
    }

    /// Day by day, then minute by minute within firing days.
    fn brute_next(c: &CronSpec, after: DateTime<Utc>, horizon_days: i64) -> Option<DateTime<Utc>> {
        let first = after.trunc_subsecs(0).with_second(0).unwrap() + Duration::minutes(1);
        for day in first.date_naive().iter_days().take(horizon_days as usize) {
            if !c.fires_on(day) {
                continue;
            }
            let midnight = day.and_hms_opt(0, 0, 0).unwrap().and_utc();
            for minute in 0..24 * 60 {
                let t = midnight + Duration::minutes(minute);
                if t >= first && fires_at(c, t) {
                    return Some(t);
                }
            }
        }
        None
    }

    // 2026-11-16 is a Monday.
    const MONDAY: (i32, u32, u32) = (2026, 11, 16);

    #[test]
    fn nine_on_mondays_fires_on_mondays_at_nine_only() {
        let c = spec("0 9 * * 1");
        let (y, m, d) = MONDAY;
        assert_eq!(c.next_after(at(y, m, d, 8, 59)), Some(at(y, m, d, 9, 0)));
        assert_eq!(c.next_after(at(y, m, d, 9, 0)), Some(at(y, m, d + 7, 9, 0)));
        let firings = c.firings_between(at(2026, 1, 1, 0, 0), at(2027, 1, 1, 0, 0));
        assert!(firings.len() >= 52);
        assert!(firings
            .iter()
            .all(|t| t.weekday() == Weekday::Mon && t.hour() == 9 && t.minute() == 0));
    }

    #[test]
    fn every_fifteen_minutes_fires_on_the_quarter_hours() {
        let c = spec("*/15 * * * *");
        assert_eq!(
            c.next_after(at(2026, 11, 21, 10, 7)),
            Some(at(2026, 11, 21, 10, 15))
        );
        assert_eq!(
            c.next_after(at(2026, 12, 31, 23, 45)),
            Some(at(2027, 1, 1, 0, 0))
        );
        let f = c.firings_between(at(2026, 11, 21, 0, 0), at(2026, 11, 22, 0, 0));
        assert_eq!(f.len(), 96);
    }

    #[test]
    fn restricted_day_of_month_and_weekday_are_ored() {
        let c = spec("0 0 1,15 * 1");
        // November 2026: Mondays 2, 9, 16, 23, 30 and the 1st and 15th (Sundays).
        let f = c.firings_between(at(2026, 10, 31, 12, 0), at(2026, 11, 30, 12, 0));
        let days: Vec<u32> = f.iter().map(|t| t.day()).collect();
        assert_eq!(days, vec![1, 2, 9, 15, 16, 23, 30]);
        assert!(f.iter().all(|t| t.hour() == 0 && t.minute() == 0));
    }

    #[test]
    fn a_star_day_field_keeps_and_semantics() {
        // Odd days that are also Mondays (Vixie: `*/2` starts with a star).
        let c = spec("0 0 */2 * 1");
        let f = c.firings_between(at(2026, 11, 1, 0, 0), at(2027, 1, 1, 0, 0));
        assert!(!f.is_empty());
        assert!(f
            .iter()
            .all(|t| t.weekday() == Weekday::Mon && t.day() % 2 == 1));
    }

    #[test]
    fn sunday_is_both_zero_and_seven() {
        for e in ["0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "0 0 * * sun"] {
            let c = spec(e);
            let f = c.firings_between(at(2026, 11, 1, 0, 0), at(2026, 12, 1, 0, 0));
            assert_eq!(
                f.iter().map(|t| t.day()).collect::<Vec<_>>(),
                vec![8, 15, 22, 29],
                "{e}"
            );
            assert!(f.iter().all(|t| t.weekday() == Weekday::Sun), "{e}");
        }
    }

    #[test]
    fn weekday_ranges_lists_steps_and_names_translate() {
        let weekdays = |e: &str| -> Vec<Weekday> {
            let c = spec(e);
            let (y, m, d) = MONDAY;
            // Monday 00:00 to Sunday 23:59 of one week.
            c.firings_between(
                at(y, m, d, 0, 0) - Duration::minutes(1),
                at(y, m, d + 6, 23, 59),
            )
            .iter()
            .map(|t| t.weekday())
            .collect()
        };
        use Weekday::*;
        assert_eq!(weekdays("0 0 * * 1-5"), vec![Mon, Tue, Wed, Thu, Fri]);
        assert_eq!(weekdays("0 0 * * MON-FRI"), vec![Mon, Tue, Wed, Thu, Fri]);
        assert_eq!(weekdays("0 0 * * 5-7"), vec![Fri, Sat, Sun]);
        assert_eq!(weekdays("0 0 * * 0,6"), vec![Sat, Sun]);
        assert_eq!(weekdays("0 0 * * */2"), vec![Tue, Thu, Sat, Sun]);
        assert_eq!(weekdays("0 0 * * 1-5/2"), vec![Mon, Wed, Fri]);
        assert_eq!(weekdays("0 0 * * tue,Thu"), vec![Tue, Thu]);
    }

    #[test]
    fn month_names_and_shorthands_are_accepted() {
        let c = spec("30 6 1 jan,JUL *");
        assert_eq!(
            c.next_after(at(2026, 11, 21, 0, 0)),
            Some(at(2027, 1, 1, 6, 30))
        );
        assert_eq!(
            spec("@daily").next_after(at(2026, 11, 21, 10, 0)),
            Some(at(2026, 11, 22, 0, 0))
        );
        assert_eq!(spec("@hourly").as_str(), "@hourly");
    }

    #[test]
    fn next_after_matches_a_brute_force_evaluation_of_standard_cron() {
        let starts = [
            at(2026, 11, 21, 10, 7),
            at(2027, 2, 27, 23, 58),
            at(2028, 2, 28, 12, 0),
            at(2026, 12, 31, 23, 59),
        ];
        for e in [
            "0 9 * * 1",
            "*/15 * * * *",
            "0 0 1,15 * 1",
            "0 0 * * 7",
            "0 0 * * 0",
            "0 0 * * 1-5",
            "5,35 */6 * * *",
            "0 12 29 2 *",
            "0 12 31 * 5",
            "0 0 */2 * 1",
            "0 3 10-20 * sat",
            "*/5 * * * *",
        ] {
            let c = spec(e);
            for s in starts {
                let mut t = s;
                // The crate's calendar ends with 2099.
                while t.year() < 2090 {
                    let expected = brute_next(&c, t, 9 * 366);
                    assert_eq!(c.next_after(t), expected, "{e} after {t}");
                    match expected {
                        Some(n) if t - s < Duration::days(8) => t = n,
                        _ => break,
                    }
                }
            }
        }
    }

    fn invalid(e: &str) -> String {
        match CronSpec::parse(e) {
            Ok(_) => panic!("{e:?} was accepted"),
            Err(x) => x.to_string(),
        }
    }

    #[test]
    fn every_five_minutes_is_the_fastest_accepted_rate() {
        spec("*/5 * * * *");
        spec("0,5,10 * * * *");
        assert!(invalid("*/4 * * * *").contains("5 minutes"));
        assert!(invalid("* * * * *").contains("5 minutes"));
        assert!(invalid("0-4 * * * *").contains("5 minutes"));
        assert!(invalid("0,3 9 * * *").contains("5 minutes"));
        // 23:58 then 00:01 the next day.
        assert!(invalid("58,1 0,23 * * *").contains("5 minutes"));
        // ...but not when the days are never consecutive.
        spec("58,1 0,23 * * 1,3");
        // Jan 31 then Feb 1.
        assert!(invalid("58,1 0,23 1,31 1,2 *").contains("5 minutes"));
        // Feb 28 then Feb 29: only in leap years.
        assert!(invalid("58,1 0,23 28,29 2 *").contains("5 minutes"));
        // Minute 55 of one hour then minute 0 of the next.
        spec("0,55 * * * *");
        assert!(invalid("0,56 * * * *").contains("5 minutes"));
    }

    #[test]
    fn the_interval_rule_agrees_with_eight_days_of_firings() {
        for e in [
            "*/5 * * * *",
            "*/10 1-3 * * 1-5",
            "0,55 * * * *",
            "0 0 1,15 * 1",
        ] {
            let c = spec(e);
            let f = c.firings_between(at(2026, 11, 1, 0, 0), at(2026, 11, 9, 0, 0));
            assert!(
                f.windows(2)
                    .all(|w| w[1] - w[0] >= Duration::minutes(MIN_INTERVAL_MINUTES as i64)),
                "{e}"
            );
        }
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        assert!(invalid("").contains("five fields"));
        assert!(invalid("0 9 * *").contains("five fields"));
        assert!(invalid("0 0 9 * * 1").contains("five fields"));
        assert!(invalid("60 * * * *").contains("minute"));
        assert!(invalid("0 24 * * *").contains("hour"));
        assert!(invalid("0 0 0 * *").contains("day-of-month"));
        assert!(invalid("0 0 32 * *").contains("day-of-month"));
        assert!(invalid("0 0 * 13 *").contains("month"));
        assert!(invalid("0 0 * * 8").contains("day-of-week"));
        assert!(invalid("0 0 * * MOX").contains("day-of-week"));
        assert!(invalid("0 0 * * 5-1").contains("backwards"));
        assert!(invalid("*/0 * * * *").contains("step"));
        assert!(invalid("a * * * *").contains("minute"));
        assert!(invalid("0,,5 * * * *").contains("empty"));
        assert!(invalid("@reboot").contains("shorthand"));
        assert!(invalid("0 0 30 2 *").contains("never"));
        assert!(invalid("0 0 * * 1 #").contains("five fields"));
    }
}
