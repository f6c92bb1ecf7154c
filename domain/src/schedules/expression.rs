//! Schedule expressions as EventBridge Scheduler reads them, and when they next run.
//!
//! - `rate(N minutes|hours|days)`: every N units from the schedule's anchor (its start, or
//!   when it was made); a day is 24 hours whatever the clocks do.
//! - `cron(minutes hours day-of-month month day-of-week year)`: wall-clock times in the
//!   schedule's time zone; one of the two day fields is `?`; days of the week run 1 (Sunday)
//!   to 7. The day of the month may be `L` (the last), `LW` (the last weekday) or `15W` (the
//!   weekday nearest the 15th, in its month); the day of the week `L` (Saturday), `6L` (the
//!   last Friday) or `6#3` (the third Friday). The `croner` crate, in its Quartz mode, does the
//!   matching.
//! - `at(yyyy-mm-ddThh:mm:ss)`: once, at that wall-clock time.
//!
//! Daylight saving as the Scheduler handles it: a wall-clock time the spring change skips is
//! skipped, and a time the autumn change repeats runs once (the first time).

use super::cron_field::CRON_FIELDS;
use crate::error::DomainError;
use chrono::{NaiveDateTime, Utc};
use chrono_tz::Tz;
use std::str::FromStr;
use time::{Duration, OffsetDateTime};

/// A parsed expression; its canonical text is [`Expression::text`].
#[derive(Debug, Clone)]
pub enum Expression {
    Rate { value: u32, unit: RateUnit },
    Cron(Box<croner::Cron>, String),
    At(NaiveDateTime),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    Minute,
    Hour,
    Day,
}

impl RateUnit {
    fn name(self) -> &'static str {
        match self {
            RateUnit::Minute => "minute",
            RateUnit::Hour => "hour",
            RateUnit::Day => "day",
        }
    }

    fn length(self) -> Duration {
        match self {
            RateUnit::Minute => Duration::minutes(1),
            RateUnit::Hour => Duration::hours(1),
            RateUnit::Day => Duration::days(1),
        }
    }
}

/// The longest rate taken: ten years of days.
const MAX_RATE_DAYS: u32 = 3650;
/// Candidates a cron expression may skip (times a spring change removed) before giving up.
const MAX_SKIPPED: usize = 1000;

pub(super) fn invalid(code: &'static str, message: impl Into<String>) -> DomainError {
    DomainError::invalid("expression", code, message)
}

impl FromStr for Expression {
    type Err = DomainError;

    fn from_str(text: &str) -> Result<Expression, DomainError> {
        let inner = |prefix: &str| {
            text.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(')'))
                .map(str::trim)
        };
        if let Some(rate) = inner("rate(") {
            parse_rate(rate)
        } else if let Some(fields) = inner("cron(") {
            parse_cron(fields)
        } else if let Some(at) = inner("at(") {
            NaiveDateTime::parse_from_str(at, "%Y-%m-%dT%H:%M:%S")
                .map(Expression::At)
                .map_err(|_| {
                    invalid(
                        "invalid_expression",
                        format!("'{at}' is not a time of the form yyyy-mm-ddThh:mm:ss."),
                    )
                })
        } else {
            Err(invalid(
                "invalid_expression",
                "An expression is rate(N minutes|hours|days), cron(minutes hours day-of-month month day-of-week year) or at(yyyy-mm-ddThh:mm:ss).",
            ))
        }
    }
}

fn parse_rate(rate: &str) -> Result<Expression, DomainError> {
    let (value, unit) = rate
        .split_once(' ')
        .ok_or_else(|| invalid("invalid_expression", "A rate is a number and a unit: rate(5 minutes)."))?;
    let value: u32 = value
        .trim()
        .parse()
        .map_err(|_| invalid("invalid_expression", format!("'{value}' is not a whole number.")))?;
    let unit = match unit.trim() {
        "minute" | "minutes" => RateUnit::Minute,
        "hour" | "hours" => RateUnit::Hour,
        "day" | "days" => RateUnit::Day,
        other => {
            return Err(invalid(
                "invalid_expression",
                format!("'{other}' is not a unit: minutes, hours or days."),
            ))
        }
    };
    if value == 0 {
        return Err(invalid("rate_too_short", "A rate is at least one minute."));
    }
    if unit.length() * value > Duration::days(i64::from(MAX_RATE_DAYS)) {
        return Err(invalid(
            "rate_too_long",
            format!("A rate is at most {MAX_RATE_DAYS} days."),
        ));
    }
    Ok(Expression::Rate { value, unit })
}

fn parse_cron(fields: &str) -> Result<Expression, DomainError> {
    let parts: Vec<&str> = fields.split_whitespace().collect();
    let [minutes, hours, day_of_month, month, day_of_week, year] = parts[..] else {
        return Err(invalid(
            "invalid_expression",
            format!(
                "A cron expression has six fields (minutes hours day-of-month month day-of-week year); this one has {}.",
                parts.len()
            ),
        ));
    };
    if (day_of_month == "?") == (day_of_week == "?") {
        return Err(invalid(
            "invalid_expression",
            "Exactly one of day-of-month and day-of-week is '?'.",
        ));
    }
    for (field, text) in CRON_FIELDS.iter().zip(&parts) {
        field.check(text)?;
    }
    // Quartz's seven fields, seconds first: the Scheduler runs on whole minutes. `L` alone as
    // a day of the week is its last, Saturday, which the crate reads only as `7`.
    let day_of_week = if day_of_week.eq_ignore_ascii_case("L") {
        "7"
    } else {
        day_of_week
    };
    let quartz = format!("0 {minutes} {hours} {day_of_month} {month} {day_of_week} {year}");
    let schedule = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Required)
        .alternative_weekdays(true)
        // `0/5` (from 0, every 5) is Quartz's and the Scheduler's; a bare `/5` is refused above.
        .sloppy_ranges(true)
        .build()
        .parse(&quartz)
        .map_err(|e| invalid("invalid_expression", format!("Not a cron expression: {e}.")))?;
    Ok(Expression::Cron(Box::new(schedule), parts.join(" ")))
}

impl Expression {
    /// The expression as stored and as given to the Scheduler.
    pub fn text(&self) -> String {
        match self {
            Expression::Rate { value: 1, unit } => format!("rate(1 {})", unit.name()),
            Expression::Rate { value, unit } => format!("rate({value} {}s)", unit.name()),
            Expression::Cron(_, fields) => format!("cron({fields})"),
            Expression::At(at) => format!("at({})", at.format("%Y-%m-%dT%H:%M:%S")),
        }
    }

    pub fn is_rate(&self) -> bool {
        matches!(self, Expression::Rate { .. })
    }

    pub fn is_once(&self) -> bool {
        matches!(self, Expression::At(_))
    }

    /// The first run strictly after `after`; `anchor` is where a rate counts from.
    pub fn next_after(&self, after: OffsetDateTime, zone: Tz, anchor: OffsetDateTime) -> Option<OffsetDateTime> {
        match self {
            Expression::Rate { value, unit } => {
                let every = unit.length() * *value;
                if after < anchor {
                    return Some(anchor);
                }
                let periods = (after - anchor).whole_seconds() / every.whole_seconds() + 1;
                // Past the end of representable time there is no next run (not a panic).
                anchor.checked_add(every.checked_mul(i32::try_from(periods).ok()?)?)
            }
            Expression::Cron(schedule, _) => {
                // The crate walks wall-clock times; each is then placed in the zone.
                let wall = from_unix(after)?.with_timezone(&zone).naive_local();
                schedule
                    .iter_after(wall)
                    .take(MAX_SKIPPED)
                    .filter_map(|candidate| first_instant(zone, candidate))
                    .find(|instant| *instant > after)
            }
            Expression::At(at) => first_instant(zone, *at).filter(|instant| *instant > after),
        }
    }

    /// The first run at or after `from`.
    pub fn first_from(&self, from: OffsetDateTime, zone: Tz, anchor: OffsetDateTime) -> Option<OffsetDateTime> {
        self.next_after(from.checked_sub(Duration::seconds(1))?, zone, anchor)
    }
}

use crate::zone::first_instant;
pub use crate::zone::parse_zone;

fn from_unix(at: OffsetDateTime) -> Option<chrono::DateTime<Utc>> {
    chrono::DateTime::from_timestamp(at.unix_timestamp(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn next(expression: &str, zone: &str, after: OffsetDateTime) -> Option<OffsetDateTime> {
        let expression: Expression = expression.parse().unwrap();
        expression.next_after(after, parse_zone(zone).unwrap(), after)
    }

    #[test]
    fn cron_runs_on_wall_clock_time_in_its_zone() {
        // 09:00 in Santiago on the 1st, in summer (UTC-3) and in winter (UTC-4).
        let payroll = "cron(0 9 1 * ? *)";
        assert_eq!(
            next(payroll, "America/Santiago", datetime!(2026-01-15 00:00 UTC)),
            Some(datetime!(2026-02-01 12:00 UTC))
        );
        assert_eq!(
            next(payroll, "America/Santiago", datetime!(2026-06-15 00:00 UTC)),
            Some(datetime!(2026-07-01 13:00 UTC))
        );
    }

    #[test]
    fn day_and_month_names_holding_l_or_w_are_names_in_any_case() {
        // 2026-11-23 is a Monday: the next Wednesday is the 25th; the next first of July 2027.
        for wednesday in ["cron(0 9 ? * WED *)", "cron(0 9 ? * wed *)", "cron(0 9 ? * MON,WED *)"] {
            assert_eq!(
                next(wednesday, "UTC", datetime!(2026-11-23 12:00 UTC)),
                Some(datetime!(2026-11-25 09:00 UTC)),
                "{wednesday}"
            );
        }
        for july in ["cron(0 9 1 JUL ? *)", "cron(0 9 1 jul ? *)", "cron(0 9 1 JUN-JUL ? *)"] {
            assert!(next(july, "UTC", datetime!(2026-11-23 12:00 UTC)).is_some(), "{july}");
        }
        assert_eq!(
            next("cron(0 9 1 JUL ? *)", "UTC", datetime!(2026-11-23 12:00 UTC)),
            Some(datetime!(2027-07-01 09:00 UTC))
        );
    }

    #[test]
    fn the_last_nearest_weekday_and_nth_forms_run_on_the_days_they_name() {
        let after = datetime!(2026-01-10 12:00 UTC);
        for (expression, after, expected) in [
            // The last day of the month, February's in a leap year too.
            ("cron(0 9 L 2 ? *)", after, datetime!(2026-02-28 09:00 UTC)),
            ("cron(0 9 L 2 ? 2028)", after, datetime!(2028-02-29 09:00 UTC)),
            // The weekday nearest the 15th: Saturday 2026-08-15 runs Friday the 14th, Sunday
            // 2026-11-15 Monday the 16th; Saturday the 1st runs Monday the 3rd, in its month.
            ("cron(0 9 15W 8 ? *)", after, datetime!(2026-08-14 09:00 UTC)),
            ("cron(0 9 15W 11 ? *)", after, datetime!(2026-11-16 09:00 UTC)),
            ("cron(0 9 1W 8 ? *)", after, datetime!(2026-08-03 09:00 UTC)),
            // The last weekday: Sunday 2026-05-31 runs Friday the 29th.
            ("cron(0 9 LW 5 ? *)", after, datetime!(2026-05-29 09:00 UTC)),
            // The third Friday, the last Friday, the last day of the week (Saturday).
            ("cron(0 9 ? 12 6#3 *)", after, datetime!(2026-12-18 09:00 UTC)),
            ("cron(0 9 ? 12 FRI#3 *)", after, datetime!(2026-12-18 09:00 UTC)),
            ("cron(0 9 ? 12 6L *)", after, datetime!(2026-12-25 09:00 UTC)),
            ("cron(0 9 ? 12 L *)", after, datetime!(2026-12-05 09:00 UTC)),
            // Lower case, as the names.
            ("cron(0 9 l 2 ? *)", after, datetime!(2026-02-28 09:00 UTC)),
        ] {
            assert_eq!(next(expression, "UTC", after), Some(expected), "{expression}");
        }
    }

    #[test]
    fn day_of_week_counts_from_sunday_as_one() {
        // 2026-11-23 is a Monday; 2 is Monday.
        assert_eq!(
            next("cron(30 8 ? * 2 *)", "UTC", datetime!(2026-11-23 09:00 UTC)),
            Some(datetime!(2026-11-30 08:30 UTC))
        );
        assert_eq!(
            next("cron(30 8 ? * MON-FRI *)", "UTC", datetime!(2026-11-27 09:00 UTC)),
            Some(datetime!(2026-11-30 08:30 UTC))
        );
    }

    #[test]
    fn a_time_the_spring_change_skips_is_skipped_and_a_repeated_one_runs_once() {
        // Santiago: 2026-09-06 00:00 (UTC-4) becomes 01:00 (UTC-3); 00:30 does not exist.
        assert_eq!(
            next(
                "cron(30 0 * * ? *)",
                "America/Santiago",
                datetime!(2026-09-05 12:00 UTC)
            ),
            Some(datetime!(2026-09-07 03:30 UTC))
        );
        // 2026-04-05 00:00 (UTC-3) falls back to 2026-04-04 23:00 (UTC-4): 23:30 happens twice.
        let first = next(
            "cron(30 23 * * ? *)",
            "America/Santiago",
            datetime!(2026-04-04 12:00 UTC),
        )
        .unwrap();
        assert_eq!(first, datetime!(2026-04-05 02:30 UTC));
        assert_eq!(
            next("cron(30 23 * * ? *)", "America/Santiago", first),
            Some(datetime!(2026-04-06 03:30 UTC))
        );
    }

    #[test]
    fn a_rate_counts_from_its_anchor_in_fixed_lengths() {
        let anchor = datetime!(2026-03-07 10:00 UTC);
        let daily: Expression = "rate(1 day)".parse().unwrap();
        let zone = parse_zone("America/Santiago").unwrap();
        assert_eq!(daily.first_from(anchor, zone, anchor), Some(anchor));
        assert_eq!(
            daily.next_after(anchor + Duration::hours(30), zone, anchor),
            Some(datetime!(2026-03-09 10:00 UTC))
        );
        assert_eq!(
            "rate(5 minutes)".parse::<Expression>().unwrap().text(),
            "rate(5 minutes)"
        );
        assert_eq!(
            "rate(1 minutes)".parse::<Expression>().unwrap().text(),
            "rate(1 minute)"
        );
    }

    #[test]
    fn a_rate_at_the_end_of_time_has_no_next_run() {
        let end = datetime!(9999-12-31 23:00 UTC);
        let every: Expression = "rate(3650 days)".parse().unwrap();
        let zone = parse_zone("UTC").unwrap();
        assert_eq!(every.next_after(end, zone, end), None);
        assert_eq!(every.first_from(end, zone, end), Some(end));
    }

    #[test]
    fn at_runs_once() {
        let at = next(
            "at(2026-12-24T18:00:00)",
            "Europe/Madrid",
            datetime!(2026-11-23 00:00 UTC),
        );
        assert_eq!(at, Some(datetime!(2026-12-24 17:00 UTC)));
        assert_eq!(
            next("at(2026-12-24T18:00:00)", "UTC", datetime!(2026-12-25 00:00 UTC)),
            None
        );
    }

    #[test]
    fn a_cron_value_out_of_range_is_named_in_the_schedulers_terms() {
        let message = |text: &str| match text.parse::<Expression>() {
            Err(DomainError::InvalidRequest { message, .. }) => message,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            message("cron(0 25 ? * * *)"),
            "The cron expression's hours field: '25' is not from 0 to 23."
        );
        assert_eq!(
            message("cron(0 9 ? * FOO *)"),
            "The cron expression's day-of-week field: 'FOO' is not a number or a name (SUN-SAT)."
        );
        assert_eq!(
            message("cron(0 9 ? * * 1969)"),
            "The cron expression's year field: '1969' is not from 1970 to 2199."
        );
        assert_eq!(
            message("cron(0 9 ? * * 2200)"),
            "The cron expression's year field: '2200' is not from 1970 to 2199."
        );
        assert_eq!(
            message("cron(0 9 ? * 6#6 *)"),
            "The cron expression's day-of-week field: '6#6' names week 6 of a month (1 to 5)."
        );
        assert_eq!(
            message("cron(*/0 9 ? * * *)"),
            "The cron expression's minutes field: its step '0' is not a whole number from 1 to 59."
        );
        // Every value the Scheduler takes is read, names in either case.
        for good in [
            "cron(59 23 31 12 ? 2199)",
            "cron(0 0 ? jan-Dec SUN-SAT 1970)",
            "cron(0/5,7 1-3 ? * 1,7 *)",
        ] {
            assert!(good.parse::<Expression>().is_ok(), "{good}");
        }
    }

    #[test]
    fn malformed_expressions_are_refused_by_name() {
        for (bad, code) in [
            ("rate(0 minutes)", "rate_too_short"),
            ("rate(30 seconds)", "invalid_expression"),
            ("rate(five minutes)", "invalid_expression"),
            ("cron(0 9 1 * *)", "invalid_expression"),
            ("cron(0 9 1 * 2 *)", "invalid_expression"),
            ("cron(0 9 ? * ? *)", "invalid_expression"),
            ("cron(0 25 1 * ? *)", "invalid_expression"),
            ("cron(0 9 32W * ? *)", "invalid_expression"),
            ("cron(0 9 ? * 6#6 *)", "invalid_expression"),
            ("cron(0 9 ? * 8L *)", "invalid_expression"),
            ("cron(0 9 L,15 * ? *)", "invalid_expression"),
            ("cron(0 9 ? * * 2200)", "invalid_expression"),
            ("cron(0 9 ? 0 * *)", "invalid_expression"),
            ("cron(0 9 ? * 8 *)", "invalid_expression"),
            ("cron(0/0 9 ? * * *)", "invalid_expression"),
            ("cron(5-1 9 ? * * *)", "invalid_expression"),
            ("cron(0 9 ? * FOO *)", "invalid_expression"),
            ("cron(0 9 ? * * 1969)", "invalid_expression"),
            ("at(2026-13-01T00:00:00)", "invalid_expression"),
            ("every day", "invalid_expression"),
        ] {
            match bad.parse::<Expression>() {
                Err(DomainError::InvalidRequest { code: got, param, .. }) => {
                    assert_eq!((got, param.as_deref()), (code, Some("expression")), "{bad}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(parse_zone("Mars/Olympus").is_err());
    }
}
