//! The firing of occurrences, by the cloud's timer or the embedded one: each occurrence
//! recorded once, late ones made with their own time, missed ones recorded without an operation.

use super::business_days::Slot;
use super::use_cases::{operation_body, rfc3339, schedule_actor, MAX_ATTEMPTS};
use super::{Occurrence, OccurrenceStatus, Schedule, ScheduleStatus};
use crate::access::Principal;
use crate::cause::Cause;
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::{fingerprint, IdempotencyClaim, KeyHold, Once, StoredResponse};
use crate::ids::{EventId, OperationId, ScheduleId};
use crate::operations::{Operation, StandingInstruction};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::service::{Handled, Service};
use serde::Deserialize;
use time::OffsetDateTime;

/// Occurrences one firing records at most; a schedule further behind goes on at the next.
const CATCH_UP: usize = 100;
/// Schedules one round of the embedded timer fires.
const DUE_BATCH: usize = 100;

/// What the timer sends for an occurrence (the Scheduler's target input on AWS).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FireSchedule {
    pub schedule_id: ScheduleId,
    #[serde(with = "time::serde::rfc3339")]
    pub scheduled_at: OffsetDateTime,
}

/// What firing one occurrence came to.
enum Fired {
    Recorded,
    /// A concurrent firing changed the schedule first: read it again.
    Raced,
}

impl Service {
    /// Records every occurrence of the schedule due at or before `scheduled_at` (catching up
    /// on those a stopped service never fired), each once however often it is fired. A
    /// firing for a paused, ended or deleted schedule, or for a time already recorded, does
    /// nothing. Returns how many occurrences it recorded.
    pub async fn fire_schedule(&self, fire: &FireSchedule) -> Result<usize, DomainError> {
        let (recorded, moves) = self.record_due(fire, None).await?;
        if moves {
            self.set_timer_to_next_run(&fire.schedule_id).await?;
        }
        Ok(recorded)
    }

    /// The cloud's timer of a schedule whose occurrences move is a one-off `at()` of its next
    /// run, which the Scheduler cannot work out: set here after each firing (again when a
    /// retried firing records nothing, so a lost update is made good).
    async fn set_timer_to_next_run(&self, id: &ScheduleId) -> Result<(), DomainError> {
        let Some(timers) = &self.timers else {
            return Ok(());
        };
        if let Some(schedule) = self.store.schedule(id).await? {
            if schedule.status == ScheduleStatus::Active {
                timers.put(&schedule).await?;
            }
        }
        Ok(())
    }

    /// A firing that failed all its attempts (on AWS, `schedule-fire`'s dead-letter queue):
    /// each occurrence it was due to record and still is is recorded `missed` with `error`,
    /// which opens its exceptions work item now rather than at the next occurrence. One that
    /// a later attempt recorded meanwhile is left as it is.
    pub async fn record_failed_firing(&self, fire: &FireSchedule, error: &str) -> Result<usize, DomainError> {
        Ok(self.record_due(fire, Some(error)).await?.0)
    }

    /// Records each occurrence `fire` is due for, in turn: made (`failed` none), or missed
    /// with the reason the firing failed. Reads the schedule again after each, and after a
    /// race with another firing. Answers how many it recorded, and whether the schedule's
    /// occurrences move (its cloud timer is then set to each next run).
    async fn record_due(&self, fire: &FireSchedule, failed: Option<&str>) -> Result<(usize, bool), DomainError> {
        let mut recorded = 0;
        let mut races = 0;
        let mut moves = false;
        while recorded < CATCH_UP {
            let Some(schedule) = self.store.schedule(&fire.schedule_id).await? else {
                tracing::warn!(schedule = %fire.schedule_id, "a firing for no schedule");
                break;
            };
            moves = schedule.moves_occurrences();
            let due = schedule.next_run_at.filter(|next| *next <= fire.scheduled_at);
            let (ScheduleStatus::Active, Some(runs_at)) = (schedule.status, due) else {
                break;
            };
            let slot = Slot {
                key: schedule.next_occurrence().unwrap_or(runs_at),
                runs_at,
            };
            let next = self.timing(&schedule).await?.next_after(slot.key);
            let fired = match failed {
                None => self.fire_occurrence(&schedule, slot, next).await?,
                Some(error) => {
                    let reason = format!("The firing failed every attempt: {error}");
                    let missed = (OccurrenceStatus::Missed, reason);
                    self.record_without_operation(&schedule, slot, next, missed).await?
                }
            };
            match fired {
                Fired::Recorded => recorded += 1,
                Fired::Raced if races < MAX_ATTEMPTS => races += 1,
                Fired::Raced => {
                    return Err(DomainError::invalid_state(
                        "conflict",
                        "The schedule is changing too fast.",
                    ))
                }
            }
        }
        Ok((recorded, moves))
    }

    /// The embedded timer's round: fires every schedule due by now, found by the due index.
    pub async fn fire_due_schedules(&self) -> Result<usize, DomainError> {
        let now = self.now();
        let mut recorded = 0;
        for schedule in self.store.schedules_due(now, DUE_BATCH).await? {
            let fire = FireSchedule {
                schedule_id: schedule.id.clone(),
                scheduled_at: now,
            };
            match self.fire_schedule(&fire).await {
                Ok(count) => recorded += count,
                // One schedule's failure does not hold the others back; it is due again next round.
                Err(error) => tracing::warn!(schedule = %schedule.id, %error, "firing a schedule failed"),
            }
        }
        Ok(recorded)
    }

    /// Records the occurrence of `slot`: its operation, or why there is none; `next` is the
    /// schedule's occurrence after it.
    async fn fire_occurrence(&self, schedule: &Schedule, slot: Slot, next: Option<Slot>) -> Result<Fired, DomainError> {
        let now = self.now();
        let late = now - slot.runs_at;
        if late > schedule.catch_up_window() {
            let reason = format!(
                "Fired {} hour(s) late (the service was not running); an occurrence more than {} hour(s) late is not made.",
                late.whole_hours(),
                schedule.catch_up_window_hours
            );
            return self
                .record_without_operation(schedule, slot, next, (OccurrenceStatus::Missed, reason))
                .await;
        }
        let principal = match self
            .acting_principal(&schedule.customer_id, &schedule.api_key_id, now, "the schedule")
            .await?
        {
            Ok(principal) => principal,
            Err(reason) => {
                return self
                    .record_without_operation(schedule, slot, next, (OccurrenceStatus::Skipped, reason))
                    .await
            }
        };
        let made = self
            .make_occurrence(
                &principal,
                schedule,
                slot,
                schedule.set_up_by(),
                |changes, occurrence| self.advance(changes, schedule, occurrence, next, now),
            )
            .await;
        match made {
            Ok(Once::Done(_)) => Ok(Fired::Recorded),
            // Made and recorded by an earlier firing whose schedule we read before it committed.
            Ok(Once::Replayed(_)) | Err(DomainError::Store(StoreError::Conflict)) => Ok(Fired::Raced),
            Err(
                refused @ (DomainError::InvalidRequest { .. }
                | DomainError::NotFound { .. }
                | DomainError::Forbidden { .. }),
            ) => {
                let reason = format!("The operation was refused: {refused}");
                self.record_without_operation(schedule, slot, next, (OccurrenceStatus::Skipped, reason))
                    .await
            }
            Err(other) => Err(other),
        }
    }

    /// Makes the operation of the occurrence of `slot` with `principal`'s authority, under
    /// the occurrence's own idempotency key (whoever asks, the timer or a backfill, it is made
    /// once), `set_up_by` its creator for four-eyes; `record` adds the occurrence's record to
    /// the same changeset.
    pub(super) async fn make_occurrence(
        &self,
        principal: &Principal,
        schedule: &Schedule,
        slot: Slot,
        set_up_by: &str,
        record: impl FnOnce(&mut Changeset, Occurrence),
    ) -> Result<Once<Operation>, DomainError> {
        let now = self.now();
        let claim = IdempotencyClaim {
            // A scope of their own, so no client's key can stand in for an occurrence's.
            scope: format!("{}:schedules", principal.idempotency_scope()),
            key: format!("{}@{}", schedule.id, rfc3339(slot.key)),
            fingerprint: fingerprint("POST", "/v1/operations", &schedule.operation),
            now,
        };
        let render = |operation: &Operation| StoredResponse {
            status: 201,
            body: operation.id.as_bytes().to_vec(),
        };
        self.once(
            claim,
            KeyHold::ClaimFirst,
            render,
            DomainError::IdempotencyKeyReused,
            |ticket| async move {
                let body = operation_body(&schedule.operation, &schedule.customer_id)?;
                let instruction = StandingInstruction {
                    schedule_id: schedule.id.clone(),
                    occurrence_at: slot.key,
                    actor: schedule_actor(&schedule.id),
                    set_up_by: set_up_by.to_owned(),
                };
                let (operation, mut changes) = self.draft_operation(principal, body, Some(&instruction)).await?;
                let occurrence = Occurrence {
                    schedule_id: schedule.id.clone(),
                    scheduled_at: slot.key,
                    runs_at: Some(slot.runs_at),
                    backfilled: false,
                    status: OccurrenceStatus::Created,
                    operation_id: Some(operation.id.clone()),
                    reason: None,
                    recorded_at: now,
                };
                record(&mut changes, occurrence);
                changes.push(ticket.complete(&operation));
                self.store.commit(changes).await?;
                Ok(operation)
            },
        )
        .await
    }

    async fn record_without_operation(
        &self,
        schedule: &Schedule,
        slot: Slot,
        next: Option<Slot>,
        (status, reason): (OccurrenceStatus, String),
    ) -> Result<Fired, DomainError> {
        let now = self.now();
        let occurrence = Occurrence {
            schedule_id: schedule.id.clone(),
            scheduled_at: slot.key,
            runs_at: Some(slot.runs_at),
            backfilled: false,
            status,
            operation_id: None,
            reason: Some(reason),
            recorded_at: now,
        };
        let mut changes = Changeset::default();
        changes.push(Write::Event(Event::of_occurrence(
            EventId::new(&*self.ids),
            schedule,
            &occurrence,
        )));
        // Nothing was paid: an operator's to look at, in the same changeset.
        self.occurrence_failed(&mut changes, schedule, &occurrence);
        self.advance(&mut changes, schedule, occurrence, next, now);
        match self.store.commit(changes).await {
            Ok(()) => Ok(Fired::Recorded),
            Err(StoreError::Conflict) => Ok(Fired::Raced),
            Err(other) => Err(other.into()),
        }
    }

    /// Records `occurrence` and moves the schedule to `next` (or ends it), in `changes`. A
    /// schedule that pauses on failure pauses at an occurrence that made nothing.
    fn advance(
        &self,
        changes: &mut Changeset,
        schedule: &Schedule,
        occurrence: Occurrence,
        next: Option<Slot>,
        now: OffsetDateTime,
    ) {
        let cause = Cause::new(
            &format!("occurrence_{}", occurrence.status.as_str()),
            format!(
                "Occurrence of {} {}{}",
                rfc3339(occurrence.scheduled_at),
                occurrence.status.as_str(),
                occurrence.reason.as_ref().map_or(String::new(), |r| format!(": {r}"))
            ),
            schedule_actor(&schedule.id),
            now,
        );
        let entry = AuditEntry::new("schedule", &schedule.id, "occurrence_recorded", cause);
        changes.push(Write::Audit(match &occurrence.operation_id {
            Some(operation) => entry.of_operation(operation),
            None => entry,
        }));
        let failed = occurrence.status == OccurrenceStatus::Skipped;
        let scheduled_at = occurrence.scheduled_at;
        changes.push(Write::InsertOccurrence(occurrence));
        let mut moved = schedule.clone();
        moved.next_run_at = next.map(|slot| slot.runs_at);
        moved.next_occurrence_at = next.map(|slot| slot.key);
        if failed && schedule.pause_on_failure && next.is_some() {
            moved.status = ScheduleStatus::Paused;
            moved.next_run_at = None;
            moved.next_occurrence_at = None;
            let cause = Cause::new(
                "paused_on_failure",
                format!("The occurrence of {} made no operation", rfc3339(scheduled_at)),
                schedule_actor(&schedule.id),
                now,
            );
            self.record_schedule_change(changes, &mut moved, schedule.status, "paused", cause, now);
        } else if next.is_none() {
            moved.status = ScheduleStatus::Ended;
            let cause = Cause::new("schedule_ended", "No run left", schedule_actor(&schedule.id), now);
            self.record_schedule_change(changes, &mut moved, schedule.status, "ended", cause, now);
        } else {
            moved.version += 1;
            moved.updated_at = now;
            changes.push(Write::PutSchedule(moved));
        }
    }

    /// An operation a schedule that pauses on failure made was rejected or failed: the
    /// schedule pauses, with an exceptions work item, so the payouts to come wait for someone
    /// to look. A second delivery of the event finds it paused.
    pub(crate) async fn pause_on_failed_operation(&self, event: &Event) -> Result<Handled, DomainError> {
        let operation_id = OperationId::from(event.data.text("operation_id").unwrap_or_default());
        let Some(operation) = self.store.operation(&operation_id).await? else {
            return Ok(Handled::Done);
        };
        let (Some(schedule_id), Some(occurrence_at)) = (&operation.schedule_id, operation.occurrence_at) else {
            return Ok(Handled::Done);
        };
        let operation = &operation;
        self.retry_on_conflict(
            MAX_ATTEMPTS,
            || Ok(Handled::Later),
            move || async move {
                let Some(schedule) = self.store.schedule(schedule_id).await? else {
                    return Ok((Handled::Done, Changeset::default()));
                };
                if !schedule.pause_on_failure || schedule.status != ScheduleStatus::Active {
                    return Ok((Handled::Done, Changeset::default()));
                }
                let now = self.now();
                let cause = Cause::new(
                    "paused_on_failure",
                    format!(
                        "Operation {} of the occurrence of {} is {}",
                        operation.id,
                        rfc3339(occurrence_at),
                        operation.status.as_str()
                    ),
                    schedule_actor(&schedule.id),
                    now,
                );
                let mut paused = schedule.clone();
                paused.status = ScheduleStatus::Paused;
                paused.next_run_at = None;
                paused.next_occurrence_at = None;
                let mut changes = Changeset::default();
                self.occurrence_operation_failed(&mut changes, &schedule, occurrence_at, cause.clone());
                self.record_schedule_change(&mut changes, &mut paused, schedule.status, "paused", cause, now);
                Ok((Handled::Done, changes))
            },
        )
        .await
    }

    // ---- the cloud's timer --------------------------------------------------------------

    /// Makes the cloud's timer of the schedule an event names match the schedule as it now
    /// is (read again, so events handled out of order still leave it right).
    pub(crate) async fn sync_schedule_timer(&self, event: &Event) -> Result<Handled, DomainError> {
        let Some(timers) = &self.timers else {
            return Ok(Handled::Done);
        };
        let id = ScheduleId::from(event.data.text("schedule_id").unwrap_or_default());
        match self.store.schedule(&id).await? {
            Some(schedule) if matches!(schedule.status, ScheduleStatus::Active | ScheduleStatus::Paused) => {
                timers.put(&schedule).await?
            }
            _ => timers.remove(&id).await?,
        }
        Ok(Handled::Done)
    }
}
