//! The schedule expression engine against a reference written here, day by day, from
//! EventBridge Scheduler's documented cron rules, sharing nothing with the engine: for
//! expressions drawn at random (lists, ranges, steps, names, `?`, `L`, `LW`, `W`, `#`) and
//! instants anywhere in the next 400 years, both name the same next run.

use ops_domain::schedules::expression::{parse_zone, Expression};
use proptest::prelude::*;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

/// One field's values as text and as the set it stands for.
#[derive(Debug, Clone)]
struct Field {
    text: String,
    values: Vec<u32>,
}

const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// `*`, a value, a range, a step from a value or over the range, or a list of two values;
/// `names` (for months and days of the week) stand in for numbers half the time.
fn field(min: u32, max: u32, names: &'static [&'static str]) -> impl Strategy<Value = Field> {
    any_field(min, max, names).prop_map(|mut field| {
        field.values.sort();
        field.values.dedup();
        field
    })
}

impl Field {
    fn has(&self, value: u32) -> bool {
        self.values.binary_search(&value).is_ok()
    }
}

fn any_field(min: u32, max: u32, names: &'static [&'static str]) -> impl Strategy<Value = Field> {
    let name = move |value: u32, named: bool| match (named, names.get((value - min) as usize)) {
        (true, Some(name)) => name.to_lowercase(),
        _ => value.to_string(),
    };
    prop_oneof![
        Just(Field {
            text: "*".into(),
            values: (min..=max).collect()
        }),
        (min..=max, any::<bool>()).prop_map(move |(v, named)| Field {
            text: name(v, named),
            values: vec![v]
        }),
        (min..=max, min..=max, any::<bool>()).prop_map(move |(a, b, named)| {
            let (a, b) = (a.min(b), a.max(b));
            Field {
                text: format!("{}-{}", name(a, named), name(b, named)),
                values: (a..=b).collect(),
            }
        }),
        (min..=max, 1..=max.max(2) / 2).prop_map(move |(a, step)| Field {
            text: format!("{a}/{step}"),
            values: (a..=max).step_by(step as usize).collect()
        }),
        (1..=max.max(2) / 2).prop_map(move |step| Field {
            text: format!("*/{step}"),
            values: (min..=max).step_by(step as usize).collect()
        }),
        (min..=max, min..=max).prop_map(move |(a, b)| Field {
            text: format!("{a},{b}"),
            values: vec![a, b]
        }),
    ]
}

/// A day of the month or of the week, as the reference reads it.
#[derive(Debug, Clone)]
enum Day {
    Any,
    OfMonth(Vec<u32>),
    LastOfMonth,
    LastWeekdayOfMonth,
    NearestWeekday(u32),
    OfWeek(Vec<u32>),
    LastOfWeek(u32),
    Nth(u32, u32),
}

/// The two day fields: one of them `?`.
fn days() -> impl Strategy<Value = (String, String, Day)> {
    prop_oneof![
        field(1, 31, &[]).prop_map(|f| (f.text, "?".into(), Day::OfMonth(f.values))),
        Just(("L".into(), "?".into(), Day::LastOfMonth)),
        Just(("LW".into(), "?".into(), Day::LastWeekdayOfMonth)),
        (1u32..=28).prop_map(|d| (format!("{d}W"), "?".into(), Day::NearestWeekday(d))),
        field(1, 7, &DAY_NAMES).prop_map(|f| ("?".into(), f.text, Day::OfWeek(f.values))),
        Just(("?".into(), "*".into(), Day::Any)),
        Just(("?".into(), "L".into(), Day::OfWeek(vec![7]))),
        (1u32..=7).prop_map(|d| ("?".into(), format!("{d}L"), Day::LastOfWeek(d))),
        (1u32..=7, 1u32..=5).prop_map(|(d, n)| ("?".into(), format!("{d}#{n}"), Day::Nth(d, n))),
    ]
}

/// 1 (Sunday) to 7 (Saturday), as the Scheduler counts.
fn day_of_week(date: Date) -> u32 {
    u32::from(date.weekday().number_days_from_sunday()) + 1
}

fn is_weekday(date: Date) -> bool {
    (2..=6).contains(&day_of_week(date))
}

fn days_in_month(date: Date) -> u32 {
    u32::from(date.month().length(date.year()))
}

impl Day {
    fn matches(&self, date: Date) -> bool {
        let (day, last) = (u32::from(date.day()), days_in_month(date));
        let on = |d: u32| Date::from_calendar_date(date.year(), date.month(), d as u8).unwrap();
        match self {
            Day::Any => true,
            Day::OfMonth(days) => days.contains(&day),
            Day::LastOfMonth => day == last,
            Day::LastWeekdayOfMonth => (1..=last).rev().find(|d| is_weekday(on(*d))) == Some(day),
            // The weekday nearest the day, never in another month.
            Day::NearestWeekday(target) => {
                let target = (*target).min(last);
                let nearest = match day_of_week(on(target)) {
                    7 if target == 1 => 3,
                    7 => target - 1,
                    1 if target == last => target - 2,
                    1 => target + 1,
                    _ => target,
                };
                day == nearest
            }
            Day::OfWeek(days) => days.contains(&day_of_week(date)),
            Day::LastOfWeek(d) => day_of_week(date) == *d && day + 7 > last,
            Day::Nth(d, n) => day_of_week(date) == *d && (day - 1) / 7 + 1 == *n,
        }
    }
}

#[derive(Debug, Clone)]
struct Cron {
    minutes: Field,
    hours: Field,
    days: (String, String, Day),
    months: Field,
    years: Field,
}

impl Cron {
    fn text(&self) -> String {
        format!(
            "cron({} {} {} {} {} {})",
            self.minutes.text, self.hours.text, self.days.0, self.months.text, self.days.1, self.years.text
        )
    }

    /// The first minute strictly after `after` (UTC) that every field takes, walking the days.
    fn next_after(&self, after: PrimitiveDateTime) -> Option<PrimitiveDateTime> {
        let mut date = after.date();
        while date.year() <= LAST_YEAR {
            if !self.years.has(date.year() as u32) {
                date = Date::from_calendar_date(date.year() + 1, Month::January, 1).ok()?;
                continue;
            }
            if !self.months.has(u32::from(u8::from(date.month()))) {
                let (year, month) = match date.month() {
                    Month::December => (date.year() + 1, Month::January),
                    month => (date.year(), month.next()),
                };
                date = Date::from_calendar_date(year, month, 1).ok()?;
                continue;
            }
            if self.days.2.matches(date) {
                let mut times: Vec<(u32, u32)> = self
                    .hours
                    .values
                    .iter()
                    .flat_map(|h| self.minutes.values.iter().map(move |m| (*h, *m)))
                    .collect();
                times.sort();
                for (h, m) in times {
                    let at = date.with_time(Time::from_hms(h as u8, m as u8, 0).unwrap());
                    if at > after {
                        return Some(at);
                    }
                }
            }
            date = date.next_day()?;
        }
        None
    }
}

/// The Scheduler takes years to 2199; `*` runs on past it, as far as the samples reach.
const LAST_YEAR: i32 = 2500;

fn cron() -> impl Strategy<Value = Cron> {
    let years = prop_oneof![
        4 => Just(Field { text: "*".into(), values: (1970..=LAST_YEAR as u32).collect() }),
        1 => (2026u32..=2199, 0u32..=3).prop_map(|(a, span)| {
            let b = (a + span).min(2199);
            Field { text: format!("{a}-{b}"), values: (a..=b).collect() }
        }),
    ];
    (
        field(0, 59, &[]),
        field(0, 23, &[]),
        days(),
        field(1, 12, &MONTH_NAMES),
        years,
    )
        .prop_map(|(minutes, hours, days, months, years)| Cron {
            minutes,
            hours,
            days,
            months,
            years,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_names_the_same_next_run_as_the_reference(
        cron in cron(),
        // Any minute from 2026 to 2426.
        minute in 0i64..400 * 525_960,
    ) {
        let after = OffsetDateTime::new_utc(Date::from_calendar_date(2026, Month::January, 1).unwrap(), Time::MIDNIGHT)
            + time::Duration::minutes(minute);
        let text = cron.text();
        let expression: Expression = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e:?}")))?;
        let engine = expression.next_after(after, parse_zone("UTC").unwrap(), after);
        let reference = cron
            .next_after(PrimitiveDateTime::new(after.date(), after.time()))
            .map(|at| at.assume_utc());
        prop_assert_eq!(engine, reference, "{} after {}", text, after);
    }
}
