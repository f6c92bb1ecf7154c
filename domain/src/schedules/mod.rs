//! Recurring operations: schedules, their occurrences, and the timer that fires
//! them (EventBridge Scheduler in the cloud, the store's due index locally).
//!
//! An occurrence never makes two operations: the operation is created under an idempotency
//! key made of the schedule id and the occurrence's time, and in the same changeset as the
//! occurrence's record and the schedule's next run, so a second firing finds it recorded.

mod backfill;
mod business_days;
mod cron_field;
pub mod expression;
mod firing;
mod use_cases;

pub use backfill::{Backfill, Backfilled, MAX_BACKFILL};
pub use firing::FireSchedule;
pub use use_cases::{CreateSchedule, MAX_LIVE_SCHEDULES, MAX_UPCOMING};

use crate::access::Environment;
use crate::calendars::BusinessDay;
use crate::cause::Cause;
use crate::ids::{ApiKeyId, CalendarId, CustomerId, OperationId, ScheduleId};
use crate::ports::{StoreError, TimerError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleStatus {
    Active,
    Paused,
    /// No run left (an `at()` that ran, or past its end).
    Ended,
    /// Deleted on request: kept for its occurrences' sake, shown to no one.
    Deleted,
}

impl ScheduleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleStatus::Active => "active",
            ScheduleStatus::Paused => "paused",
            ScheduleStatus::Ended => "ended",
            ScheduleStatus::Deleted => "deleted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub id: ScheduleId,
    pub customer_id: CustomerId,
    /// Canonical text: `rate(…)`, `cron(…)` or `at(…)`.
    pub expression: String,
    /// IANA name.
    pub timezone: String,
    /// The body of the operation each occurrence creates (as `POST /v1/operations` takes it,
    /// validated when the schedule was made, without `customer_id`).
    pub operation: serde_json::Value,
    pub status: ScheduleStatus,
    #[serde(with = "time::serde::rfc3339::option")]
    pub start_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub end_at: Option<OffsetDateTime>,
    /// When the next occurrence not yet recorded runs (its time moved by the business-day
    /// rule); none once ended (or while paused). What the timer waits for.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_run_at: Option<OffsetDateTime>,
    /// That occurrence's own time, as the expression gives it: the key it is recorded and
    /// made under. Schedules stored before occurrences could move read it as `next_run_at`.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub next_occurrence_at: Option<OffsetDateTime>,
    /// Where an occurrence on a day `calendar_id` is closed runs instead.
    #[serde(default)]
    pub business_day: BusinessDay,
    #[serde(default)]
    pub calendar_id: Option<CalendarId>,
    /// Whether an occurrence that makes no operation, or whose operation is rejected or
    /// fails, pauses the schedule (with a work item) until someone looks.
    #[serde(default)]
    pub pause_on_failure: bool,
    /// How late an occurrence may still be made after an outage (1 to 168 hours); an older
    /// one is recorded `missed` with a work item. Schedules stored before it was kept have 24.
    #[serde(default = "default_catch_up_window_hours")]
    pub catch_up_window_hours: u16,
    /// Where a rate counts from: the start, or the minute the schedule was made.
    #[serde(with = "time::serde::rfc3339")]
    pub anchor: OffsetDateTime,
    /// The key whose authority each occurrence acts with: revoked or expired, it makes nothing.
    pub api_key_id: ApiKeyId,
    pub created_by: String,
    /// Who set the schedule up last (made or resumed it): each operation it makes is theirs
    /// for every four-eyes rule, so no one approves a payout they arranged. Schedules stored
    /// before it was kept read as set up by their creator.
    #[serde(default)]
    pub set_up_by: Option<String>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

/// A day: how late an occurrence is made by default, as before windows could be set.
pub const DEFAULT_CATCH_UP_WINDOW_HOURS: u16 = 24;
/// A week: the widest window.
pub const MAX_CATCH_UP_WINDOW_HOURS: u16 = 168;

fn default_catch_up_window_hours() -> u16 {
    DEFAULT_CATCH_UP_WINDOW_HOURS
}

impl Schedule {
    /// How late an occurrence may still be made.
    pub fn catch_up_window(&self) -> time::Duration {
        time::Duration::hours(i64::from(self.catch_up_window_hours))
    }

    pub fn is_visible(&self) -> bool {
        self.status != ScheduleStatus::Deleted
    }

    /// The key of the occurrence `next_run_at` runs.
    pub fn next_occurrence(&self) -> Option<OffsetDateTime> {
        self.next_occurrence_at.or(self.next_run_at)
    }

    /// Whether its occurrences may run on another day than their own, which the cloud's
    /// timer cannot express: the service then sets it to each next run in turn.
    pub fn moves_occurrences(&self) -> bool {
        self.business_day != BusinessDay::None
    }

    /// The person (a user, or a key without one) behind the operations the schedule makes.
    pub fn set_up_by(&self) -> &str {
        self.set_up_by.as_deref().unwrap_or(&self.created_by)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OccurrenceStatus {
    /// Its operation was made.
    Created,
    /// Fired later than its catch-up window allows (the service was down): recorded,
    /// nothing made.
    Missed,
    /// The schedule could not act (its key, customer or operation no longer works).
    Skipped,
}

impl OccurrenceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OccurrenceStatus::Created => "created",
            OccurrenceStatus::Missed => "missed",
            OccurrenceStatus::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Occurrence {
    pub schedule_id: ScheduleId,
    /// Its own time, as the expression gives it: its key.
    #[serde(with = "time::serde::rfc3339")]
    pub scheduled_at: OffsetDateTime,
    /// When it ran: `scheduled_at` moved by the schedule's business-day rule. Occurrences
    /// recorded before occurrences could move have none (they ran at `scheduled_at`).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub runs_at: Option<OffsetDateTime>,
    /// Made by a backfill request rather than the timer.
    #[serde(default)]
    pub backfilled: bool,
    pub status: OccurrenceStatus,
    pub operation_id: Option<OperationId>,
    /// Why nothing was made (missed or skipped).
    pub reason: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub recorded_at: OffsetDateTime,
}

/// A time the schedule will run, not yet recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpcomingOccurrence {
    pub schedule_id: ScheduleId,
    /// Its own time, as the expression gives it.
    #[serde(with = "time::serde::rfc3339")]
    pub scheduled_at: OffsetDateTime,
    /// When it will run, moved by the business-day rule.
    #[serde(with = "time::serde::rfc3339")]
    pub runs_at: OffsetDateTime,
}

/// Which schedules a list returns: newest first, a customer's (or every customer's).
#[derive(Debug, Clone, Default)]
pub struct ScheduleQuery {
    pub customer_id: Option<CustomerId>,
    pub starting_after: Option<ScheduleId>,
    pub limit: usize,
}

/// The store's port for schedules.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, StoreError>;
    /// Visible schedules (not deleted), newest first.
    async fn schedules(&self, query: &ScheduleQuery) -> Result<Vec<Schedule>, StoreError>;
    /// Active schedules whose next run is at or before `now`, soonest first: the embedded
    /// timer's index, read without touching schedules that are not due.
    async fn schedules_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Schedule>, StoreError>;
    async fn occurrence(&self, id: &ScheduleId, at: OffsetDateTime) -> Result<Option<Occurrence>, StoreError>;
    /// A schedule's occurrences, newest first, those before `before` when given.
    async fn occurrences(
        &self,
        id: &ScheduleId,
        before: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Occurrence>, StoreError>;
}

/// The cloud's timer: one EventBridge Scheduler schedule per schedule, invoking the
/// `schedule-fire` function with the schedule id and the occurrence's time. Locally there is
/// none: the store's due index is the timer.
#[async_trait]
pub trait ScheduleTimers: Send + Sync {
    /// Creates or updates the timer of `schedule` (enabled when active, disabled when paused).
    async fn put(&self, schedule: &Schedule) -> Result<(), TimerError>;
    /// Removes the timer of a schedule, if there is one.
    async fn remove(&self, id: &ScheduleId) -> Result<(), TimerError>;
}
