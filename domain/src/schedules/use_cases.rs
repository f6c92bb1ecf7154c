//! The schedules API: create, list, get, pause, resume, delete and occurrences (the firing of
//! occurrences is in `firing.rs`).

use super::business_days::Timing;
use super::expression::{parse_zone, Expression};
use super::{Occurrence, Schedule, ScheduleQuery, ScheduleStatus};
use crate::access::{Principal, Scope};
use crate::calendars::BusinessDay;
use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{CustomerId, EventId, ScheduleId};
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::{customer_scope, Page, Service};
use crate::validate::{self, CreateOperation};
use serde::Deserialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The most upcoming occurrences one list answers.
pub const MAX_UPCOMING: usize = 50;

/// Schedules a customer may have active or paused at once.
pub const MAX_LIVE_SCHEDULES: usize = 100;
/// Optimistic-concurrency retries before a busy schedule is reported as a conflict.
pub(super) const MAX_ATTEMPTS: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSchedule {
    pub customer_id: Option<String>,
    pub expression: Option<String>,
    pub timezone: Option<String>,
    pub start_at: Option<String>,
    pub end_at: Option<String>,
    pub operation: Option<serde_json::Value>,
    /// How late an occurrence is still made after an outage, in hours (1 to 168; 24 when
    /// absent).
    pub catch_up_window_hours: Option<i64>,
    /// Where an occurrence on a closed day of `calendar_id` runs (`none` when absent).
    pub business_day: Option<BusinessDay>,
    pub calendar_id: Option<String>,
    /// Pause the schedule when an occurrence makes no operation or its operation fails.
    pub pause_on_failure: Option<bool>,
}

pub(super) fn schedule_actor(id: &ScheduleId) -> Actor {
    Actor {
        kind: ActorType::Schedule,
        id: id.to_string(),
    }
}

pub(super) fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).expect("times in range format")
}

/// Which way a bound given between two whole minutes moves to one.
#[derive(Clone, Copy)]
enum Bound {
    /// `start_at`: to the next minute, so the first run is never before it.
    Start,
    /// `end_at`: to the minute before, so the last run is never after it.
    End,
}

/// A bound given as RFC 3339, kept on a whole minute (the Scheduler's precision) within what
/// was given: a start at 09:00:30 first runs at 09:01, never half a minute early.
fn optional_bound(value: Option<String>, param: &str, bound: Bound) -> Result<Option<OffsetDateTime>, DomainError> {
    let Some(text) = value else {
        return Ok(None);
    };
    let at = crate::validate::rfc3339_time(&text, param)?;
    match bound {
        Bound::End => Ok(Some(minute(at))),
        Bound::Start => minute_up(at)
            .filter(|up| up.year() <= 9999)
            .map(Some)
            .ok_or_else(|| DomainError::invalid(param, "invalid_time", format!("{param} is before the year 10000."))),
    }
}

fn minute(at: OffsetDateTime) -> OffsetDateTime {
    at.replace_second(0)
        .and_then(|at| at.replace_nanosecond(0))
        .expect("zero is a valid second")
}

/// `at` if on a whole minute, else the next whole minute (none past the end of time).
fn minute_up(at: OffsetDateTime) -> Option<OffsetDateTime> {
    match minute(at) {
        down if down == at => Some(at),
        down => down.checked_add(time::Duration::MINUTE),
    }
}

/// A refusal of the schedule's operation body, naming its field under `operation.`.
pub(super) fn within_operation(error: DomainError) -> DomainError {
    let prefixed = |param: Option<String>| Some(param.map_or("operation".into(), |p| format!("operation.{p}")));
    match error {
        DomainError::InvalidRequest { code, param, message } => DomainError::InvalidRequest {
            code,
            param: prefixed(param),
            message,
        },
        DomainError::NotFound { param, message } => DomainError::NotFound {
            param: prefixed(param),
            message,
        },
        other => other,
    }
}

/// The create body a schedule's operation stands for, for its customer.
pub(super) fn operation_body(
    template: &serde_json::Value,
    customer_id: &CustomerId,
) -> Result<CreateOperation, DomainError> {
    let mut body = template.clone();
    body["customer_id"] = customer_id.to_string().into();
    crate::body::parse(&body)
}

impl Service {
    pub async fn create_schedule(
        &self,
        principal: &Principal,
        command: CreateSchedule,
        ticket: Option<Ticket<Schedule>>,
    ) -> Result<Schedule, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let text = validate::required_text(command.expression, "expression", 256)?;
        let expression: Expression = text.trim().parse()?;
        let timezone = validate::optional_text(command.timezone, "timezone", 64)?.unwrap_or_else(|| "UTC".into());
        parse_zone(&timezone)?;
        let start_at = optional_bound(command.start_at, "start_at", Bound::Start)?;
        let catch_up_window_hours = match command.catch_up_window_hours {
            None => super::DEFAULT_CATCH_UP_WINDOW_HOURS,
            Some(hours) if (1..=i64::from(super::MAX_CATCH_UP_WINDOW_HOURS)).contains(&hours) => hours as u16,
            Some(_) => {
                return Err(DomainError::invalid(
                    "catch_up_window_hours",
                    "invalid_catch_up_window",
                    format!(
                        "catch_up_window_hours is from 1 to {} (a week).",
                        super::MAX_CATCH_UP_WINDOW_HOURS
                    ),
                ))
            }
        };
        let end_at = optional_bound(command.end_at, "end_at", Bound::End)?;
        let business_day = command.business_day.unwrap_or_default();
        let calendar = self.schedule_calendar(business_day, command.calendar_id).await?;
        let now = self.now();
        if let (Some(start), Some(end)) = (start_at, end_at) {
            if end <= start {
                return Err(DomainError::invalid(
                    "end_at",
                    "end_before_start",
                    "end_at is after start_at, with a whole minute between them (schedules run on the minute).",
                ));
            }
        }
        if end_at.is_some_and(|end| end <= now) {
            return Err(DomainError::invalid(
                "end_at",
                "end_in_past",
                "end_at is in the future.",
            ));
        }
        let customer_id = self.acting_customer(principal, command.customer_id.as_deref()).await?;
        let template = command.operation.ok_or_else(|| DomainError::missing("operation"))?;
        if !template.is_object() {
            return Err(DomainError::invalid(
                "operation",
                "invalid_operation",
                "operation is the body of an operation to create.",
            ));
        }
        if template.get("customer_id").is_some() {
            return Err(DomainError::invalid(
                "operation.customer_id",
                "parameter_unknown",
                "The schedule's customer_id is its operations' customer.",
            ));
        }
        self.check_schedule_quota(&customer_id).await?;
        // Refused now with the error a create would give, rather than at every occurrence.
        let body = operation_body(&template, &customer_id).map_err(within_operation)?;
        self.draft_operation(principal, body, None)
            .await
            .map_err(within_operation)?;
        // With no start, a rate runs at once, as the Scheduler starts one ("immediately", to
        // its precision of a minute): at the next whole minute, never before it was made. A
        // cron or at() time already past in this minute is not run late, as the Scheduler
        // would not run it: a payout the caller meant for its next time.
        let anchor = start_at.unwrap_or_else(|| minute_up(now).unwrap_or(now));
        let from = match start_at {
            Some(start) => start.max(now),
            None if expression.is_rate() => anchor,
            None => now,
        };
        let cause = Cause::new(
            "schedule_created",
            format!("Schedule {} in {timezone} created", expression.text()),
            principal.actor(),
            now,
        );
        let mut schedule = Schedule {
            id: ScheduleId::new(&*self.ids),
            customer_id,
            expression: expression.text(),
            timezone,
            operation: template,
            status: ScheduleStatus::Active,
            start_at,
            end_at,
            next_run_at: None,
            next_occurrence_at: None,
            business_day,
            calendar_id: calendar.as_ref().map(|c| c.id.clone()),
            pause_on_failure: command.pause_on_failure.unwrap_or(false),
            catch_up_window_hours,
            anchor,
            api_key_id: principal.key.id.clone(),
            created_by: principal.actor().id,
            set_up_by: Some(principal.actor().id),
            cause: cause.clone(),
            created_at: now,
            updated_at: now,
            environment: self.environment,
            version: 1,
        };
        let first = Timing::new(&schedule, calendar)?.first_from(from, Some(now));
        let Some(first) = first else {
            return Err(match (expression.is_once(), end_at) {
                (true, _) => DomainError::invalid(
                    "expression",
                    "at_in_past",
                    "An at() schedule runs in the future, before the year 10000.",
                ),
                (false, Some(_)) => {
                    DomainError::invalid("end_at", "never_runs", "The schedule would not run before its end.")
                }
                (false, None) => DomainError::invalid(
                    if start_at.is_some() { "start_at" } else { "expression" },
                    "never_runs",
                    "The schedule would not run before the year 10000.",
                ),
            });
        };
        schedule.next_run_at = Some(first.runs_at);
        schedule.next_occurrence_at = Some(first.key);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("schedule", &schedule.id, "created", cause).moving(None, schedule.status.as_str()),
        ));
        changes.push(Write::Event(Event::of_schedule(
            EventId::new(&*self.ids),
            "created",
            &schedule,
        )));
        changes.push(Write::PutSchedule(schedule.clone()));
        self.commit_created(changes, ticket, &schedule).await?;
        Ok(schedule)
    }

    /// Refuses a customer's schedule past [`MAX_LIVE_SCHEDULES`] not ended or deleted: each runs
    /// for ever, so one customer's hundreds of minutely schedules would keep the timer, the
    /// queues and the rails busy for all. Counted by reading the customer's schedules, so two
    /// creates at once may both pass at the limit: a quota, not a fence.
    async fn check_schedule_quota(&self, customer_id: &CustomerId) -> Result<(), DomainError> {
        let mut live = 0;
        let mut query = ScheduleQuery {
            customer_id: Some(customer_id.clone()),
            starting_after: None,
            limit: 100,
        };
        loop {
            let page = self.store.schedules(&query).await?;
            live += page
                .iter()
                .filter(|s| matches!(s.status, ScheduleStatus::Active | ScheduleStatus::Paused))
                .count();
            if live >= MAX_LIVE_SCHEDULES {
                return Err(DomainError::invalid_state(
                    "schedule_limit_reached",
                    format!(
                        "A customer has at most {MAX_LIVE_SCHEDULES} active or paused schedules; delete one first."
                    ),
                ));
            }
            match page.last() {
                Some(last) if page.len() == query.limit => query.starting_after = Some(last.id.clone()),
                _ => return Ok(()),
            }
        }
    }

    pub async fn get_schedule(&self, principal: &Principal, id: &ScheduleId) -> Result<Schedule, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.visible_schedule(principal, id).await
    }

    pub(super) async fn visible_schedule(
        &self,
        principal: &Principal,
        id: &ScheduleId,
    ) -> Result<Schedule, DomainError> {
        self.store
            .schedule(id)
            .await?
            .filter(|s| s.is_visible() && principal.can_access(&s.customer_id))
            .ok_or_else(|| DomainError::not_found("schedule", id))
    }

    pub async fn list_schedules(
        &self,
        principal: &Principal,
        mut query: ScheduleQuery,
    ) -> Result<Page<Schedule>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = ScheduleQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of(self.store.schedules(&query).await?, limit))
    }

    pub async fn schedule_occurrences(
        &self,
        principal: &Principal,
        id: &ScheduleId,
        before: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Page<Occurrence>, DomainError> {
        let schedule = self.get_schedule(principal, id).await?;
        Ok(Page::of(
            self.store.occurrences(&schedule.id, before, limit + 1).await?,
            limit,
        ))
    }

    /// The next `count` times the schedule will run (none while paused or ended), from its
    /// next run on: what a customer reads to see December's payroll date before it runs.
    pub async fn upcoming_occurrences(
        &self,
        principal: &Principal,
        id: &ScheduleId,
        count: usize,
    ) -> Result<Page<super::UpcomingOccurrence>, DomainError> {
        let schedule = self.get_schedule(principal, id).await?;
        let timing = self.timing(&schedule).await?;
        let mut upcoming = Vec::with_capacity(count.min(MAX_UPCOMING));
        let mut next = match (schedule.status, schedule.next_occurrence(), schedule.next_run_at) {
            (ScheduleStatus::Active, Some(key), Some(runs_at)) => Some(super::business_days::Slot { key, runs_at }),
            _ => None,
        };
        while let Some(slot) = next.filter(|_| upcoming.len() < count.min(MAX_UPCOMING)) {
            upcoming.push(super::UpcomingOccurrence {
                schedule_id: schedule.id.clone(),
                scheduled_at: slot.key,
                runs_at: slot.runs_at,
            });
            next = timing.next_after(slot.key);
        }
        Ok(Page::all(upcoming))
    }

    pub async fn pause_schedule(&self, principal: &Principal, id: &ScheduleId) -> Result<Schedule, DomainError> {
        self.change_schedule(principal, id, "paused", |schedule, now| {
            if schedule.status != ScheduleStatus::Active {
                return Err(not_in(schedule, "paused", "active"));
            }
            schedule.status = ScheduleStatus::Paused;
            schedule.next_run_at = None;
            schedule.next_occurrence_at = None;
            Ok(Cause::new(
                "paused_on_request",
                "Paused on request",
                principal.actor(),
                now,
            ))
        })
        .await
    }

    /// Runs again from the next occurrence after now: those that fell in the pause are not made.
    pub async fn resume_schedule(&self, principal: &Principal, id: &ScheduleId) -> Result<Schedule, DomainError> {
        let calendar = match self.visible_schedule(principal, id).await? {
            schedule if schedule.moves_occurrences() => self.timing(&schedule).await?.into_calendar(),
            _ => None,
        };
        self.change_schedule(principal, id, "resumed", |schedule, now| {
            if schedule.status != ScheduleStatus::Paused {
                return Err(not_in(schedule, "resumed", "paused"));
            }
            let from = schedule.start_at.map_or(now, |start| start.max(now));
            let next = Timing::new(schedule, calendar.clone())?.first_from(from, Some(now));
            match next {
                Some(next) => {
                    schedule.status = ScheduleStatus::Active;
                    schedule.next_run_at = Some(next.runs_at);
                    schedule.next_occurrence_at = Some(next.key);
                    // Resuming arranges the payouts to come: the resumer stands behind them.
                    schedule.set_up_by = Some(principal.actor().id);
                    Ok(Cause::new(
                        "resumed_on_request",
                        "Resumed on request",
                        principal.actor(),
                        now,
                    ))
                }
                None => Err(DomainError::invalid_state(
                    "schedule_ended",
                    "The schedule has no run left to resume; create a new one.",
                )),
            }
        })
        .await
    }

    pub async fn delete_schedule(&self, principal: &Principal, id: &ScheduleId) -> Result<Schedule, DomainError> {
        self.change_schedule(principal, id, "deleted", |schedule, now| {
            schedule.status = ScheduleStatus::Deleted;
            schedule.next_run_at = None;
            schedule.next_occurrence_at = None;
            Ok(Cause::new(
                "deleted_on_request",
                "Deleted on request",
                principal.actor(),
                now,
            ))
        })
        .await
    }

    /// Loads, changes and stores a schedule with its audit entry and event, retrying when a
    /// concurrent change (a firing) won the race.
    async fn change_schedule<F>(
        &self,
        principal: &Principal,
        id: &ScheduleId,
        change: &'static str,
        apply: F,
    ) -> Result<Schedule, DomainError>
    where
        F: Fn(&mut Schedule, OffsetDateTime) -> Result<Cause, DomainError>,
    {
        principal.require(Scope::OperationsWrite)?;
        let apply = &apply;
        let busy = || Err(DomainError::conflict("The schedule is changing too fast; retry."));
        self.retry_on_conflict(MAX_ATTEMPTS, busy, move || async move {
            let mut schedule = self.visible_schedule(principal, id).await?;
            let from = schedule.status;
            let now = self.now();
            let cause = apply(&mut schedule, now)?;
            let mut changes = Changeset::default();
            self.record_schedule_change(&mut changes, &mut schedule, from, change, cause, now);
            Ok((schedule, changes))
        })
        .await
    }

    /// The calendar a schedule's business-day rule reads: refused by field when the rule
    /// names none, or one that does not exist.
    async fn schedule_calendar(
        &self,
        rule: BusinessDay,
        calendar_id: Option<String>,
    ) -> Result<Option<crate::calendars::Calendar>, DomainError> {
        let Some(text) = validate::optional_text(calendar_id, "calendar_id", 64)? else {
            if rule == BusinessDay::None {
                return Ok(None);
            }
            return Err(DomainError::invalid(
                "calendar_id",
                "calendar_required",
                "A business_day rule moves occurrences off the closed days of a calendar: name it in calendar_id.",
            ));
        };
        let calendar = self.named_calendar(&text).await?;
        Ok(Some(calendar))
    }

    /// Stores `schedule` as changed by `cause`, with its audit entry and its event.
    pub(super) fn record_schedule_change(
        &self,
        changes: &mut Changeset,
        schedule: &mut Schedule,
        from: ScheduleStatus,
        change: &str,
        cause: Cause,
        now: OffsetDateTime,
    ) {
        schedule.cause = cause.clone();
        schedule.version += 1;
        schedule.updated_at = now;
        changes.push(Write::Audit(
            AuditEntry::new("schedule", &schedule.id, "status_changed", cause)
                .moving(Some(from.as_str()), schedule.status.as_str()),
        ));
        changes.push(Write::Event(Event::of_schedule(
            EventId::new(&*self.ids),
            change,
            schedule,
        )));
        changes.push(Write::PutSchedule(schedule.clone()));
    }
}

fn not_in(schedule: &Schedule, change: &str, needed: &str) -> DomainError {
    DomainError::invalid_state(
        "invalid_schedule_status",
        format!(
            "A schedule is {change} only when {needed}; this one is {}.",
            schedule.status.as_str()
        ),
    )
}
