//! Banking calendars: the days a rail's banks work (their time zone, working weekdays and
//! dated holidays), the cut-off times a rail takes submissions by, and what follows from them:
//! whether a day is a banking day, the next cut-off after a moment and the day it settles,
//! and where a date falling on a closed day moves by a business-day rule.

mod holidays;
mod use_cases;

pub use holidays::read_holidays;
pub use use_cases::{CreateCalendar, ImportHolidays, NextCutoff, PutRailCutoffs};

use crate::access::Environment;
use crate::cause::Cause;
use crate::ids::CalendarId;
use crate::ports::StoreError;
use serde::{Deserialize, Serialize};
use time::{Date, OffsetDateTime, Time, Weekday};

/// A day closed for banking, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holiday {
    #[serde(with = "day")]
    pub date: Date,
    pub name: String,
}

time::serde::format_description!(day, Date, "[year]-[month]-[day]");

/// A banking calendar, set by the platform and named by rails and schedules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calendar {
    pub id: CalendarId,
    pub name: String,
    /// IANA name: the cut-offs of rails that name the calendar are wall-clock times here.
    pub timezone: String,
    /// `mon` … `sun`, in week order.
    pub working_days: Vec<String>,
    /// In date order.
    pub holidays: Vec<Holiday>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

/// The days of the week as a calendar names them.
pub const WEEKDAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

/// The furthest a search for a banking day goes: a calendar closed for longer is refused.
const LONGEST_CLOSURE_DAYS: u32 = 366;

impl Calendar {
    pub fn is_banking_day(&self, day: Date) -> bool {
        let weekday = WEEKDAYS
            .iter()
            .find(|(_, w)| *w == day.weekday())
            .map_or("", |(name, _)| *name);
        self.working_days.iter().any(|d| d == weekday) && self.holidays.binary_search_by(|h| h.date.cmp(&day)).is_err()
    }

    /// The first banking day from `day` on (`day` itself if it is one), or before it when
    /// `backwards`; `None` if the calendar has none within a year.
    pub fn banking_day_from(&self, day: Date, backwards: bool) -> Option<Date> {
        let mut candidate = day;
        for _ in 0..LONGEST_CLOSURE_DAYS {
            if self.is_banking_day(candidate) {
                return Some(candidate);
            }
            candidate = if backwards {
                candidate.previous_day()?
            } else {
                candidate.next_day()?
            };
        }
        None
    }

    /// Where a date on a closed day moves by `rule` (a banking day stays).
    pub fn shift(&self, day: Date, rule: BusinessDay) -> Option<Date> {
        match rule {
            BusinessDay::None => Some(day),
            BusinessDay::Following => self.banking_day_from(day, false),
            BusinessDay::Preceding => self.banking_day_from(day, true),
            BusinessDay::ModifiedFollowing => {
                let following = self.banking_day_from(day, false)?;
                if following.month() == day.month() {
                    Some(following)
                } else {
                    self.banking_day_from(day, true)
                }
            }
        }
    }
}

/// How a date that falls on a closed day moves (ISDA's business-day conventions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusinessDay {
    /// It stays where it falls.
    #[default]
    None,
    /// To the next banking day.
    Following,
    /// To the banking day before.
    Preceding,
    /// To the next banking day, unless that is in the next month: then the one before.
    ModifiedFollowing,
}

/// What happens to a submission after a banking day's last cut-off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterLastCutoff {
    /// It waits for the next banking day's first cut-off.
    #[default]
    Wait,
    /// It goes now, and settles on the next banking day.
    SendNow,
}

/// A rail's banking days and cut-offs, set by the platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailCutoffs {
    pub rail: String,
    pub environment: Environment,
    pub calendar_id: CalendarId,
    /// Wall-clock times in the calendar's time zone, in order.
    #[serde(with = "cutoff_times")]
    pub cutoffs: Vec<Time>,
    pub after_last_cutoff: AfterLastCutoff,
    pub cause: Cause,
    pub version: u64,
}

mod cutoff_times {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::Time;

    pub fn serialize<S: Serializer>(times: &[Time], serializer: S) -> Result<S::Ok, S::Error> {
        let shown: Vec<String> = times
            .iter()
            .map(|t| format!("{:02}:{:02}", t.hour(), t.minute()))
            .collect();
        shown.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Time>, D::Error> {
        let shown = Vec::<String>::deserialize(deserializer)?;
        shown
            .iter()
            .map(|t| super::parse_time(t).ok_or_else(|| serde::de::Error::custom(format!("not a time: {t}"))))
            .collect()
    }
}

/// `HH:MM`, 24-hour.
pub fn parse_time(text: &str) -> Option<Time> {
    let (hour, minute) = text.split_once(':')?;
    if hour.len() != 2 || minute.len() != 2 {
        return None;
    }
    Time::from_hms(hour.parse().ok()?, minute.parse().ok()?, 0).ok()
}

/// The next cut-off a rail takes a submission made at `at` by, and the day it settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cutoff {
    #[serde(with = "time::serde::rfc3339")]
    pub cutoff_at: OffsetDateTime,
    #[serde(with = "day")]
    pub settlement_day: Date,
    /// Whether a submission made at `at` goes now (`send_now` after the last cut-off) rather
    /// than waiting for `cutoff_at`'s window.
    pub sends_now: bool,
    /// When a submission made at `at` after a banking day's last cut-off (or on a closed
    /// day) is sent, with `wait`: the start of the settlement day, when its window opens.
    #[serde(with = "time::serde::rfc3339::option")]
    pub waits_until: Option<OffsetDateTime>,
}

/// The first cut-off at or after `at` on a banking day of `calendar`, in `zone`; a
/// submission after a day's last cut-off settles on the next banking day, whether it waits
/// (`wait`) or goes now (`send_now`). `None` if the calendar has no banking day within a year.
pub fn next_cutoff(
    calendar: &Calendar,
    zone: chrono_tz::Tz,
    cutoffs: &[Time],
    after: AfterLastCutoff,
    at: OffsetDateTime,
) -> Option<Cutoff> {
    let local = crate::zone::wall_clock(at, zone)?;
    let mut day = local.date();
    let mut same_day = true;
    for _ in 0..LONGEST_CLOSURE_DAYS {
        if calendar.is_banking_day(day) {
            let open = cutoffs.iter().find(|t| !same_day || **t >= local.time());
            if let Some(time) = open {
                // A cut-off in a daylight-saving gap is at the first minute after the gap.
                let wall = day.with_time(*time);
                let cutoff_at = crate::zone::instant_at_or_after(wall, zone)?;
                let waits = !same_day && after == AfterLastCutoff::Wait;
                let waits_until = match waits {
                    // A midnight in a daylight-saving gap opens at the gap's end.
                    true => Some(crate::zone::instant_at_or_after(day.midnight(), zone)?),
                    false => None,
                };
                return Some(Cutoff {
                    cutoff_at,
                    settlement_day: day,
                    sends_now: !same_day && after == AfterLastCutoff::SendNow,
                    waits_until,
                });
            }
        }
        day = day.next_day()?;
        same_day = false;
    }
    None
}

/// The store's reads for calendars and rails' cut-offs.
#[async_trait::async_trait]
pub trait CalendarStore: Send + Sync {
    async fn calendar(&self, id: &CalendarId) -> Result<Option<Calendar>, StoreError>;
    async fn rail_cutoffs(&self, rail: &str, environment: Environment) -> Result<Option<RailCutoffs>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Actor;
    use time::macros::{date, datetime, time};

    pub(crate) fn chile() -> Calendar {
        let at = datetime!(2026-01-01 00:00 UTC);
        Calendar {
            id: "cal_1".into(),
            name: "Chile".into(),
            timezone: "America/Santiago".into(),
            working_days: ["mon", "tue", "wed", "thu", "fri"].map(String::from).to_vec(),
            holidays: vec![
                Holiday {
                    date: date!(2026 - 12 - 08),
                    name: "Inmaculada Concepción".into(),
                },
                Holiday {
                    date: date!(2026 - 12 - 25),
                    name: "Navidad".into(),
                },
            ],
            cause: Cause::new("calendar_created", "test", Actor::system(), at),
            created_at: at,
            updated_at: at,
            environment: Environment::Test,
            version: 1,
        }
    }

    #[test]
    fn a_closed_day_moves_by_each_rule() {
        let calendar = chile();
        // Friday 25 December 2026 is Christmas; the 26th and 27th a weekend.
        let christmas = date!(2026 - 12 - 25);
        assert!(!calendar.is_banking_day(christmas));
        assert_eq!(calendar.shift(christmas, BusinessDay::None), Some(christmas));
        assert_eq!(
            calendar.shift(christmas, BusinessDay::Following),
            Some(date!(2026 - 12 - 28))
        );
        assert_eq!(
            calendar.shift(christmas, BusinessDay::Preceding),
            Some(date!(2026 - 12 - 24))
        );
        // Saturday 31 October: the following banking day is in November, so the one before.
        assert_eq!(
            calendar.shift(date!(2026 - 10 - 31), BusinessDay::ModifiedFollowing),
            Some(date!(2026 - 10 - 30))
        );
        assert_eq!(
            calendar.shift(date!(2026 - 12 - 08), BusinessDay::ModifiedFollowing),
            Some(date!(2026 - 12 - 09))
        );
    }

    #[test]
    fn the_next_cutoff_is_on_a_banking_day_in_the_calendars_zone() {
        let calendar = chile();
        let zone = crate::zone::parse_zone("America/Santiago").unwrap();
        let cutoffs = [time!(14:00), time!(17:30)];
        let next = |at, after| next_cutoff(&calendar, zone, &cutoffs, after, at).unwrap();
        // Santiago is UTC−3 in December (summer time).
        let before = next(datetime!(2026-12-07 15:00 UTC), AfterLastCutoff::Wait);
        assert_eq!(
            (before.cutoff_at, before.settlement_day, before.sends_now),
            (datetime!(2026-12-07 17:00 UTC), date!(2026 - 12 - 07), false)
        );
        let between = next(datetime!(2026-12-07 18:00 UTC), AfterLastCutoff::Wait);
        assert_eq!(
            (between.cutoff_at, between.waits_until),
            (datetime!(2026-12-07 20:30 UTC), None)
        );
        // After the last, waiting: until Wednesday's midnight in Santiago.
        let waiting = next(datetime!(2026-12-07 21:00 UTC), AfterLastCutoff::Wait);
        assert_eq!(waiting.waits_until, Some(datetime!(2026-12-09 03:00 UTC)));
        // After Monday's last cut-off: Tuesday the 8th is a holiday, so Wednesday's first.
        let late = next(datetime!(2026-12-07 21:00 UTC), AfterLastCutoff::SendNow);
        assert_eq!(
            (late.cutoff_at, late.settlement_day, late.sends_now, late.waits_until),
            (datetime!(2026-12-09 17:00 UTC), date!(2026 - 12 - 09), true, None)
        );
        // Santiago's clocks go from 24:00 to 01:00 on Sunday 6 September 2026: a midnight
        // cut-off that Monday is fine, but one on a working Sunday falls in the gap.
        let mut every_day = chile();
        every_day.working_days = WEEKDAYS.iter().map(|(name, _)| (*name).to_owned()).collect();
        let midnight = [time!(00:30)];
        let gap = next_cutoff(
            &every_day,
            zone,
            &midnight,
            AfterLastCutoff::Wait,
            datetime!(2026-09-06 00:00 UTC),
        )
        .unwrap();
        assert_eq!(gap.cutoff_at, datetime!(2026-09-06 04:00 UTC), "01:00 local, UTC−3");
        let christmas_eve = next(datetime!(2026-12-24 22:00 UTC), AfterLastCutoff::Wait);
        assert_eq!(
            (christmas_eve.settlement_day, christmas_eve.sends_now),
            (date!(2026 - 12 - 28), false)
        );
    }
}
