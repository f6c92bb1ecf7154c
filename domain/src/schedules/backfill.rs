//! Backfill: the occurrences of a past range a schedule did not make (it was paused, did not
//! exist yet, or the service was down past its catch-up window), made on request. Each is made
//! under the occurrence's own idempotency key, as the timer makes it, so an occurrence is never
//! made twice whoever asks and however often.

use super::business_days::Slot;
use super::use_cases::{operation_body, rfc3339, within_operation};
use super::{Occurrence, OccurrenceStatus, Schedule};
use crate::access::{Principal, Scope};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::idempotency::Once;
use crate::ids::ScheduleId;
use crate::ports::{AuditEntry, Write};
use crate::service::Service;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The most occurrences one backfill makes: a wider range is asked for in parts.
pub const MAX_BACKFILL: usize = 100;

/// `POST /v1/schedules/{id}/backfill`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backfill {
    /// RFC 3339: the range's first moment, included.
    pub from: Option<String>,
    /// RFC 3339, in the past: the range's last moment, included.
    pub to: Option<String>,
}

/// What a backfill did.
#[derive(Debug, Serialize)]
pub struct Backfilled {
    pub schedule_id: ScheduleId,
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub to: OffsetDateTime,
    /// The occurrences it made, oldest first.
    pub created: Vec<Occurrence>,
    /// Occurrences of the range made before (by the timer or an earlier backfill), left as
    /// they were.
    pub already_created: usize,
}

impl Service {
    /// Makes each occurrence of the schedule whose own time is in `from..=to` (in the past,
    /// before the occurrence the timer makes next, not before the schedule's start) that has
    /// no operation yet, including those recorded `missed` or `skipped`. Made with the
    /// schedule's authority, as the timer makes them; the caller stands behind them for
    /// four-eyes and is the actor of each one's audit entry.
    pub async fn backfill_schedule(
        &self,
        principal: &Principal,
        id: &ScheduleId,
        command: Backfill,
    ) -> Result<Backfilled, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let schedule = self.visible_schedule(principal, id).await?;
        let from = required_time(command.from, "from")?;
        let to = required_time(command.to, "to")?;
        let now = self.now();
        if to < from {
            return Err(DomainError::invalid(
                "to",
                "end_before_start",
                "to is at or after from.",
            ));
        }
        if to > now {
            return Err(DomainError::invalid(
                "to",
                "backfill_in_future",
                "to is in the past: what is still to come is the timer's.",
            ));
        }
        let keys = self.backfill_keys(&schedule, from, to).await?;
        let acting = self
            .acting_principal(&schedule.customer_id, &schedule.api_key_id, now, "the schedule")
            .await?
            .map_err(|reason| DomainError::invalid_state("schedule_cannot_act", reason))?;
        // Refused now with the error a create would give, before anything is made.
        let body = operation_body(&schedule.operation, &schedule.customer_id).map_err(within_operation)?;
        self.draft_operation(&acting, body, None)
            .await
            .map_err(within_operation)?;

        let mut created = Vec::new();
        let mut already_created = 0;
        for key in keys {
            let known = self.store.occurrence(&schedule.id, key).await?;
            if known.as_ref().is_some_and(|o| o.status == OccurrenceStatus::Created) {
                already_created += 1;
                continue;
            }
            let slot = Slot { key, runs_at: now };
            let mut made = None;
            let record = |changes: &mut crate::ports::Changeset, mut occurrence: Occurrence| {
                occurrence.backfilled = true;
                let cause = Cause::new(
                    "occurrence_backfilled",
                    format!(
                        "Occurrence of {} made on request (backfill of {} to {})",
                        rfc3339(key),
                        rfc3339(from),
                        rfc3339(to)
                    ),
                    principal.actor(),
                    now,
                );
                let entry = AuditEntry::new("schedule", &schedule.id, "occurrence_backfilled", cause);
                let entry = match &occurrence.operation_id {
                    Some(operation) => entry.of_operation(operation),
                    None => entry,
                };
                changes.push(Write::Audit(entry));
                made = Some(occurrence.clone());
                changes.push(Write::BackfillOccurrence(occurrence));
            };
            match self
                .make_occurrence(&acting, &schedule, slot, &principal.actor().id, record)
                .await?
            {
                Once::Done(_) => created.extend(made),
                // The timer made it meanwhile.
                Once::Replayed(_) => already_created += 1,
            }
        }
        Ok(Backfilled {
            schedule_id: schedule.id,
            from,
            to,
            created,
            already_created,
        })
    }

    /// The occurrences' own times in `from..=to` a backfill may make, refused past
    /// [`MAX_BACKFILL`].
    async fn backfill_keys(
        &self,
        schedule: &Schedule,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<OffsetDateTime>, DomainError> {
        let timing = self.timing(schedule).await?;
        let first = from.max(schedule.start_at.unwrap_or(from));
        let timers_next = schedule.next_occurrence();
        let mut keys = Vec::new();
        let mut next = timing.first_from(first, None);
        while let Some(slot) = next.filter(|s| s.key <= to && timers_next.is_none_or(|n| s.key < n)) {
            if keys.len() == MAX_BACKFILL {
                return Err(DomainError::invalid(
                    "from",
                    "backfill_too_wide",
                    format!("A backfill makes at most {MAX_BACKFILL} occurrences; ask for a narrower range."),
                ));
            }
            keys.push(slot.key);
            next = timing.next_after(slot.key);
        }
        Ok(keys)
    }
}

fn required_time(value: Option<String>, param: &str) -> Result<OffsetDateTime, DomainError> {
    let text = value.ok_or_else(|| DomainError::missing(param))?;
    crate::validate::rfc3339_time(&text, param)
}
