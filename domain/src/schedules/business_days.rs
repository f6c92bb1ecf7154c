//! Where a schedule's occurrences really run. Each occurrence keeps its own time (its key, as
//! the expression gives it); one whose day the schedule's calendar has closed runs on the day
//! its business-day rule moves it to, at the same wall-clock time in the schedule's zone.

use super::expression::{parse_zone, Expression};
use super::Schedule;
use crate::calendars::{BusinessDay, Calendar};
use crate::error::DomainError;
use chrono_tz::Tz;
use time::OffsetDateTime;

/// Occurrences passed over looking for one that runs late enough (a daily schedule moved to
/// the end of a long closure passes over a few dozen).
const MAX_PASSED_OVER: usize = 400;

/// One occurrence: its own time and when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub key: OffsetDateTime,
    pub runs_at: OffsetDateTime,
}

/// A schedule's times, with the calendar its rule reads (none when it has no rule).
pub(crate) struct Timing<'a> {
    schedule: &'a Schedule,
    expression: Expression,
    zone: Tz,
    calendar: Option<Calendar>,
}

impl<'a> Timing<'a> {
    pub fn new(schedule: &'a Schedule, calendar: Option<Calendar>) -> Result<Timing<'a>, DomainError> {
        Ok(Timing {
            schedule,
            expression: schedule.expression.parse()?,
            zone: parse_zone(&schedule.timezone)?,
            calendar: calendar.filter(|_| schedule.business_day != BusinessDay::None),
        })
    }

    /// When the occurrence of `key` runs. A day the calendar cannot move (closed for a
    /// year) keeps its own time rather than losing the payout.
    pub fn runs_at(&self, key: OffsetDateTime) -> OffsetDateTime {
        let Some(calendar) = &self.calendar else {
            return key;
        };
        let Some(wall) = crate::zone::wall_clock(key, self.zone) else {
            return key;
        };
        match calendar.shift(wall.date(), self.schedule.business_day) {
            Some(day) if day != wall.date() => {
                let moved = day.with_time(wall.time());
                // A time in a daylight-saving gap on the new day runs at the gap's end.
                crate::zone::instant_at_or_after(moved, self.zone).unwrap_or(key)
            }
            _ => key,
        }
    }

    fn within_end(&self, key: OffsetDateTime) -> bool {
        self.schedule.end_at.is_none_or(|end| key <= end)
    }

    fn slot(&self, key: Option<OffsetDateTime>) -> Option<Slot> {
        let key = key.filter(|key| self.within_end(*key))?;
        Some(Slot {
            key,
            runs_at: self.runs_at(key),
        })
    }

    /// The occurrence after the one of `key`.
    pub fn next_after(&self, key: OffsetDateTime) -> Option<Slot> {
        self.slot(self.expression.next_after(key, self.zone, self.schedule.anchor))
    }

    /// The first occurrence whose own time is at or after `from` and which runs at or after
    /// `not_before` when given: a schedule made or resumed does not run late what its rule
    /// moved into the past.
    pub fn first_from(&self, from: OffsetDateTime, not_before: Option<OffsetDateTime>) -> Option<Slot> {
        let mut slot = self.slot(self.expression.first_from(from, self.zone, self.schedule.anchor))?;
        for _ in 0..MAX_PASSED_OVER {
            if not_before.is_none_or(|at| slot.runs_at >= at) {
                return Some(slot);
            }
            slot = self.next_after(slot.key)?;
        }
        None
    }
}

impl Timing<'_> {
    /// The calendar its rule reads, to build the timing of a changed copy of the schedule.
    pub fn into_calendar(self) -> Option<Calendar> {
        self.calendar
    }
}

impl crate::service::Service {
    /// The schedule's timing, with its calendar read when its rule needs one (a calendar
    /// since removed moves nothing).
    pub(crate) async fn timing<'a>(&self, schedule: &'a Schedule) -> Result<Timing<'a>, DomainError> {
        let calendar = match &schedule.calendar_id {
            Some(id) if schedule.moves_occurrences() => self.store.calendar(id).await?,
            _ => None,
        };
        Timing::new(schedule, calendar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Environment;
    use crate::calendars::Holiday;
    use crate::cause::{Actor, Cause};
    use time::macros::{date, datetime};

    fn schedule(expression: &str, zone: &str, rule: BusinessDay) -> Schedule {
        let at = datetime!(2026-01-01 00:00 UTC);
        serde_json::from_value(serde_json::json!({
            "id": "sch_1", "customer_id": "cus_1", "expression": expression, "timezone": zone,
            "operation": {}, "status": "active", "start_at": null, "end_at": null,
            "next_run_at": null, "business_day": rule, "calendar_id": "cal_1",
            "anchor": "2026-01-01T00:00:00Z", "api_key_id": "key_1", "created_by": "usr_1",
            "cause": Cause::new("schedule_created", "test", Actor::system(), at),
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "environment": Environment::Test, "version": 1,
        }))
        .unwrap()
    }

    fn berlin_banks() -> Calendar {
        let at = datetime!(2026-01-01 00:00 UTC);
        Calendar {
            id: "cal_1".into(),
            name: "Berlin".into(),
            timezone: "Europe/Berlin".into(),
            working_days: ["mon", "tue", "wed", "thu", "fri"].map(String::from).to_vec(),
            holidays: vec![Holiday {
                date: date!(2026 - 12 - 25),
                name: "Weihnachten".into(),
            }],
            cause: Cause::new("calendar_created", "test", Actor::system(), at),
            created_at: at,
            updated_at: at,
            environment: Environment::Test,
            version: 1,
        }
    }

    #[test]
    fn an_occurrence_on_a_closed_day_moves_by_its_rule_at_the_same_wall_clock_time() {
        // Christmas 2026 is a Friday: 09:00 in Berlin (UTC+1) moves to Monday the 28th or
        // Thursday the 24th.
        let christmas = datetime!(2026-12-25 08:00 UTC);
        let moved = |rule| {
            let schedule = schedule("cron(0 9 25 * ? *)", "Europe/Berlin", rule);
            Timing::new(&schedule, Some(berlin_banks())).unwrap().runs_at(christmas)
        };
        assert_eq!(moved(BusinessDay::None), christmas);
        assert_eq!(moved(BusinessDay::Following), datetime!(2026-12-28 08:00 UTC));
        assert_eq!(moved(BusinessDay::Preceding), datetime!(2026-12-24 08:00 UTC));
        // Sunday 25 October, the night the clocks went back: its 09:00 is in winter time
        // (UTC+1), as Monday's is.
        let october = datetime!(2026-10-25 08:00 UTC);
        let schedule = schedule("cron(0 9 25 * ? *)", "Europe/Berlin", BusinessDay::Following);
        let timing = Timing::new(&schedule, Some(berlin_banks())).unwrap();
        assert_eq!(timing.runs_at(october), datetime!(2026-10-26 08:00 UTC));
        // Listed in order of their own times, each with its run.
        let slots: Vec<Slot> =
            std::iter::successors(timing.first_from(datetime!(2026-10-01 00:00 UTC), None), |slot| {
                timing.next_after(slot.key)
            })
            .take(3)
            .collect();
        assert_eq!(
            slots.iter().map(|s| (s.key, s.runs_at)).collect::<Vec<_>>(),
            [
                (datetime!(2026-10-25 08:00 UTC), datetime!(2026-10-26 08:00 UTC)),
                (datetime!(2026-11-25 08:00 UTC), datetime!(2026-11-25 08:00 UTC)),
                (datetime!(2026-12-25 08:00 UTC), datetime!(2026-12-28 08:00 UTC)),
            ]
        );
        // Made after a run its rule moved into the past (Thursday the 24th for Christmas),
        // the schedule starts with the next one rather than running it late.
        let preceding = self::schedule("cron(0 9 25 * ? *)", "Europe/Berlin", BusinessDay::Preceding);
        let timing = Timing::new(&preceding, Some(berlin_banks())).unwrap();
        let made_on_christmas_eve_evening = datetime!(2026-12-24 20:00 UTC);
        let first = timing
            .first_from(made_on_christmas_eve_evening, Some(made_on_christmas_eve_evening))
            .unwrap();
        assert_eq!(first.key, datetime!(2027-01-25 08:00 UTC));
    }
}
