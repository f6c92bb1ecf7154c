//! Exceptions that are no operation's or transaction's state: a webhook delivery whose retries
//! ran out, a message that reached a dead-letter queue, a schedule's occurrence that made
//! nothing. Each item opens in the changeset of the change that made it (so it is there exactly
//! when the change is) and closes with its remedy: a resend, a redrive, or an operator's
//! acknowledgement.

use super::{Queue, Subject, SubjectType, WorkItem, WorkItemStatus, WorkItemTransition};
use crate::access::Principal;
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{CustomerId, DeliveryId, WorkItemId};
use crate::ports::{
    signals, BatchOutcome, Changeset, QueueMessage, QueueTask, Signal, StoreError, Write, MAX_RECEIVES,
};
use crate::schedules::{FireSchedule, Occurrence, OccurrenceStatus, Schedule};
use crate::service::Service;
use crate::validate::optional_reason;
use crate::webhooks::{Delivery, DeliveryStatus, FollowUp};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveWorkItem {
    /// Why (required to acknowledge an occurrence that made nothing).
    pub reason: Option<String>,
}

/// Closing an item races claims and releases: a few tries, then the conflict is answered.
const CLOSE_ATTEMPTS: usize = 3;

/// A dead letter's item id is fixed by its message, so a redelivered dead letter opens nothing.
fn dead_letter_item_id(message_id: &str) -> WorkItemId {
    let digest = Sha256::digest(format!("dead_letter/{message_id}"));
    WorkItemId::from(format!("wi_{}", &hex::encode(digest)[..26]))
}

impl Service {
    /// Opens, in `changes`, the exceptions item of a delivery whose retries just ran out.
    pub(crate) fn delivery_failed(&self, changes: &mut Changeset, delivery: &Delivery, customer_id: &CustomerId) {
        let last = delivery.attempts.last();
        let answer = match (last.and_then(|a| a.status_code), last.and_then(|a| a.error.as_deref())) {
            (Some(status), _) => format!("HTTP {status}"),
            (None, Some(error)) => error.to_owned(),
            (None, None) => "no answer".to_owned(),
        };
        let cause = Cause::new(
            "webhook_delivery_failed",
            format!(
                "Delivery {} of event {} to endpoint {} failed after {} attempt{}; the last answer was {answer}.",
                delivery.id,
                delivery.event_id,
                delivery.endpoint_id,
                delivery.attempts.len(),
                if delivery.attempts.len() == 1 { "" } else { "s" }
            ),
            Actor::system(),
            self.now(),
        );
        let subject = Subject {
            kind: SubjectType::Delivery,
            id: delivery.id.to_string(),
        };
        let item = self.exception(
            WorkItemId::new(&*self.ids),
            "webhook_delivery_failed",
            subject,
            customer_id,
            cause,
        );
        self.record_work_item(changes, &item, "opened");
        changes.push(Write::InsertWorkItem(item));
    }

    /// Opens, in `changes`, the exceptions item of a schedule's occurrence that made nothing.
    pub(crate) fn occurrence_failed(&self, changes: &mut Changeset, schedule: &Schedule, occurrence: &Occurrence) {
        let kind = match occurrence.status {
            OccurrenceStatus::Created => return,
            OccurrenceStatus::Missed => "occurrence_missed",
            OccurrenceStatus::Skipped => "occurrence_skipped",
        };
        let at = occurrence
            .scheduled_at
            .format(&time::format_description::well_known::Rfc3339)
            .expect("a scheduled time formats");
        let cause = Cause::new(
            kind,
            format!(
                "The occurrence of {at} made no operation: {}",
                occurrence.reason.as_deref().unwrap_or("no reason recorded")
            ),
            Actor::system(),
            occurrence.recorded_at,
        );
        let subject = Subject {
            kind: SubjectType::Occurrence,
            id: format!("{}@{at}", schedule.id),
        };
        let item = self.exception(WorkItemId::new(&*self.ids), kind, subject, &schedule.customer_id, cause);
        self.record_work_item(changes, &item, "opened");
        changes.push(Write::InsertWorkItem(item));
    }

    /// Opens, in `changes`, the exceptions item of a schedule paused because the operation of
    /// its occurrence at `occurrence_at` was rejected or failed (`cause` says which).
    pub(crate) fn occurrence_operation_failed(
        &self,
        changes: &mut Changeset,
        schedule: &Schedule,
        occurrence_at: time::OffsetDateTime,
        cause: Cause,
    ) {
        let at = occurrence_at
            .format(&time::format_description::well_known::Rfc3339)
            .expect("a scheduled time formats");
        let subject = Subject {
            kind: SubjectType::Occurrence,
            id: format!("{}@{at}", schedule.id),
        };
        let kind = "occurrence_operation_failed";
        let item = self.exception(WorkItemId::new(&*self.ids), kind, subject, &schedule.customer_id, cause);
        self.record_work_item(changes, &item, "opened");
        changes.push(Write::InsertWorkItem(item));
    }

    /// Opens, in `changes`, an exceptions item about a webhook endpoint's breaker (`subject`:
    /// the endpoint's id, or `<id>:disabled`), the platform's when the endpoint is.
    pub(crate) fn endpoint_exception(
        &self,
        changes: &mut Changeset,
        endpoint: &crate::webhooks::WebhookEndpoint,
        kind: &str,
        subject: String,
        cause: Cause,
    ) {
        let subject = Subject {
            kind: SubjectType::WebhookEndpoint,
            id: subject,
        };
        let owner = endpoint
            .customer_id
            .clone()
            .unwrap_or_else(|| CustomerId::from(crate::event::PLATFORM));
        let item = self.exception(WorkItemId::new(&*self.ids), kind, subject, &owner, cause);
        self.record_work_item(changes, &item, "opened");
        changes.push(Write::InsertWorkItem(item));
    }

    /// Whether an exceptions item about `subject` (an endpoint's) is open.
    pub(crate) async fn endpoint_exception_open(&self, subject: &str) -> Result<bool, DomainError> {
        Ok(self.store.open_work_item(Queue::Exceptions, subject).await?.is_some())
    }

    /// Closes the open exceptions item about `subject` (an endpoint's), if there is one.
    pub(crate) async fn close_endpoint_exception(&self, subject: &str, cause: Cause) -> Result<(), DomainError> {
        self.close_exception(subject, cause).await
    }

    fn exception(
        &self,
        id: WorkItemId,
        kind: &str,
        subject: Subject,
        customer_id: &CustomerId,
        cause: Cause,
    ) -> WorkItem {
        self.new_work_item(id, Queue::Exceptions, kind, subject, customer_id.clone(), cause)
    }

    /// Dead-letter queues → exceptions: each message becomes an item that keeps its body for a
    /// redrive, and then leaves the dead-letter queue. A task this deployment cannot read (a
    /// newer one's) stays there for a deployment that can; one about nothing stored is logged
    /// whole and dropped, as there is nothing to redrive it for. A schedule's firing that
    /// failed every attempt records its occurrence `missed`, which opens its item.
    pub async fn handle_dead_letters(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for message in messages {
            // A schedule's firing that failed every attempt: its occurrence is missed, now.
            if let Ok(fire) = serde_json::from_str::<FireSchedule>(&message.body) {
                let why = "its function failed (the schedule-fire function's log says why)";
                if let Err(error) = self.record_failed_firing(&fire, why).await {
                    tracing::warn!(message = %message.id, %error, "a failed firing was not recorded; it comes again");
                    outcome.failed.push(message.id.clone());
                }
                continue;
            }
            let task = match QueueTask::parse(&message.body) {
                Ok(task) => task,
                Err(error) => {
                    tracing::error!(message = %message.id, %error, "a dead letter this deployment cannot read stays in its queue");
                    outcome.failed.push(message.id.clone());
                    continue;
                }
            };
            if let Err(error) = self.open_dead_letter(message, &task).await {
                tracing::warn!(message = %message.id, %error, "a dead letter was not recorded; it comes again");
                outcome.failed.push(message.id.clone());
            }
        }
        outcome
    }

    async fn open_dead_letter(&self, message: &QueueMessage, task: &QueueTask) -> Result<(), DomainError> {
        let customer_id = match task {
            QueueTask::SubmitTransaction { transaction_id } => {
                self.store.transaction(transaction_id).await?.map(|t| t.customer_id)
            }
            QueueTask::SendWebhook { delivery_id } => match self.store.delivery(delivery_id).await? {
                Some(delivery) => self.store.event(&delivery.event_id).await?.map(|e| e.customer_id),
                None => None,
            },
            QueueTask::SplitFile { file_id } => self.store.file(file_id).await?.map(|f| f.customer_id),
            QueueTask::ReleaseWaiting { endpoint_id, .. } => self.store.webhook_endpoint(endpoint_id).await?.map(|e| {
                e.customer_id
                    .unwrap_or_else(|| CustomerId::from(crate::event::PLATFORM))
            }),
            QueueTask::MakeTransactions { operation_id } | QueueTask::SettleOperation { operation_id } => {
                self.store.operation(operation_id).await?.map(|o| o.customer_id)
            }
        };
        let Some(customer_id) = customer_id else {
            tracing::error!(message = %message.id, body = %message.body, "a dead letter about nothing stored dropped");
            return Ok(());
        };
        let id = dead_letter_item_id(&message.id);
        if self.store.work_item(&id).await?.is_some() {
            return Ok(());
        }
        let cause = Cause::new(
            "dead_lettered",
            format!(
                "A {} message was received {MAX_RECEIVES} times without being handled.",
                task.queue().as_str()
            ),
            Actor::system(),
            self.now(),
        );
        let subject = Subject {
            kind: SubjectType::DeadLetter,
            id: message.id.clone(),
        };
        let mut item = self.exception(id, "dead_letter", subject, &customer_id, cause);
        item.message = Some(message.body.clone());
        let mut changes = Changeset::default();
        self.record_work_item(&mut changes, &item, "opened");
        changes.push(Write::InsertWorkItem(item));
        match self.store.commit(changes).await {
            Ok(()) => {
                self.metrics.record(&[Signal::count(signals::DEAD_LETTERS, 1)]);
                Ok(())
            }
            // Recorded by an earlier delivery of the same dead letter.
            Err(StoreError::Conflict) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }

    /// `POST /v1/work_items/{id}/resolve`: works an exceptions item by its subject's remedy: a
    /// dead letter is sent again to its queue, a failed delivery is resent to its endpoint, an
    /// occurrence that made nothing is acknowledged with a reason, and so is a dead letter or a
    /// delivery that can no longer be redone. An operation or a transaction is resolved through
    /// its own endpoints, which close its item.
    pub async fn resolve_work_item(
        &self,
        principal: &Principal,
        id: &WorkItemId,
        command: ResolveWorkItem,
    ) -> Result<WorkItem, DomainError> {
        let item = self.get_work_item(principal, id).await?;
        self.may_work(principal, &item)?;
        if item.status == WorkItemStatus::Done {
            return Err(DomainError::invalid_state(
                "invalid_transition",
                format!("Work item {} is done; it cannot be resolved.", item.id),
            ));
        }
        let reason = optional_reason(command.reason, "reason", 500)?;
        let actor = principal.actor();
        let said = |what: String| match &reason {
            Some(reason) => format!("{what}: {reason}"),
            None => what,
        };
        // What cannot be redone is acknowledged instead, with the operator's reason.
        let acknowledged = |code: &'static str, why: &str| match &reason {
            Some(reason) => Ok(Cause::new(
                "acknowledged",
                format!("{why} Acknowledged by {}: {reason}", actor.id),
                actor.clone(),
                self.now(),
            )),
            None => Err(DomainError::invalid(
                "reason",
                code,
                format!("{why} Give a reason to close it."),
            )),
        };
        match item.subject.kind {
            SubjectType::Operation | SubjectType::Transaction => {
                let kind = if item.subject.kind == SubjectType::Operation {
                    "operation"
                } else {
                    "transaction"
                };
                Err(DomainError::invalid_state(
                    "resolved_by_subject",
                    format!(
                        "Work item {} closes when {kind} {} is resolved through its own endpoints.",
                        item.id, item.subject.id
                    ),
                ))
            }
            SubjectType::DeadLetter => {
                let task = item.message.as_deref().and_then(|body| QueueTask::parse(body).ok());
                let Some(task) = task else {
                    let cause = acknowledged("nothing_to_redrive", "The dead letter's body is not a task.")?;
                    return self.close_and_show(principal, &item, cause).await;
                };
                self.enqueue(task.clone(), &item.customer_id, Duration::ZERO).await?;
                let message = said(format!(
                    "Sent again to the {} queue by {}",
                    task.queue().as_str(),
                    actor.id
                ));
                let cause = Cause::new("redriven", message, actor, self.now());
                self.close_and_show(principal, &item, cause).await
            }
            SubjectType::Delivery => {
                let delivery_id = DeliveryId::from(item.subject.id.as_str());
                match self.resend_delivery(&delivery_id).await? {
                    Some((event, made)) => {
                        self.close_failed_deliveries(&event, &made, actor, reason.as_deref())
                            .await?;
                        self.get_work_item(principal, id).await
                    }
                    None => {
                        let why =
                            "The delivery's event or endpoint is gone, or the endpoint no longer takes the event.";
                        let cause = acknowledged("nothing_to_resend", why)?;
                        match self.store.delivery(&delivery_id).await? {
                            Some(failed) => self.give_up_on_delivery(failed, cause).await?,
                            None => self.close_exception(&item.subject.id, cause).await?,
                        }
                        self.get_work_item(principal, id).await
                    }
                }
            }
            SubjectType::StatementLine => {
                let cause = acknowledged("reason_required", "Say how the break was settled.")?;
                self.close_and_show(principal, &item, cause).await
            }
            SubjectType::Occurrence => {
                let cause = acknowledged("reason_required", "The occurrence made nothing.")?;
                self.close_and_show(principal, &item, cause).await
            }
            SubjectType::PayoutLimit => {
                let cause = acknowledged("reason_required", "A limit's warning is read, not redone.")?;
                self.close_and_show(principal, &item, cause).await
            }
            SubjectType::WebhookEndpoint => {
                let why = "The endpoint's item closes when it answers again or is enabled again.";
                let cause = acknowledged("reason_required", why)?;
                self.close_and_show(principal, &item, cause).await
            }
        }
    }

    async fn close_and_show(
        &self,
        principal: &Principal,
        item: &WorkItem,
        cause: Cause,
    ) -> Result<WorkItem, DomainError> {
        self.close_exception(&item.subject.id, cause).await?;
        self.get_work_item(principal, &item.id).await
    }

    /// A new delivery of a failed one's event to its endpoint, if both are still there and the
    /// endpoint still takes the event.
    async fn resend_delivery(&self, id: &DeliveryId) -> Result<Option<(Event, Vec<Delivery>)>, DomainError> {
        let Some(delivery) = self.store.delivery(id).await? else {
            return Ok(None);
        };
        let event = self.store.event(&delivery.event_id).await?;
        let endpoint = self.store.webhook_endpoint(&delivery.endpoint_id).await?;
        let (Some(event), Some(endpoint)) = (event, endpoint) else {
            return Ok(None);
        };
        let made = self.dispatch_to(&event, &[endpoint], Some("*")).await?;
        Ok((!made.is_empty()).then_some((event, made)))
    }

    /// After a resend: the exceptions items of the event's failed deliveries to the endpoints
    /// just resent to close, each naming its new delivery.
    pub(crate) async fn close_failed_deliveries(
        &self,
        event: &Event,
        made: &[Delivery],
        actor: Actor,
        reason: Option<&str>,
    ) -> Result<(), DomainError> {
        for failed in self
            .store
            .deliveries_of_event(&event.id, event.operation_id().as_ref())
            .await?
        {
            if failed.status != DeliveryStatus::Failed {
                continue;
            }
            let Some(resent) = made.iter().find(|d| d.endpoint_id == failed.endpoint_id) else {
                continue;
            };
            let mut message = format!("Resent as delivery {} by {}", resent.id, actor.id);
            if let Some(reason) = reason {
                message = format!("{message}: {reason}");
            }
            let cause = Cause::new("resent", message, actor.clone(), self.now());
            let failed_id = failed.id.clone();
            let follow_up = FollowUp::Resent {
                delivery_id: resent.id.clone(),
            };
            self.follow_up_failed_delivery(failed, follow_up).await?;
            self.close_exception(&failed_id, cause).await?;
        }
        Ok(())
    }

    /// A failed delivery that cannot be resent (its endpoint no longer takes its event, or the
    /// event is gone): recorded as such, and its exceptions item acknowledged with `cause`.
    pub(crate) async fn give_up_on_delivery(&self, failed: Delivery, cause: Cause) -> Result<(), DomainError> {
        let failed_id = failed.id.clone();
        let follow_up = FollowUp::NotResent {
            reason: cause.message.clone(),
        };
        self.follow_up_failed_delivery(failed, follow_up).await?;
        self.close_exception(&failed_id, cause).await
    }

    /// Records what became of a failed delivery, once: a failed delivery changes in nothing
    /// else, so a conflict is another follow-up recorded first, which stands.
    async fn follow_up_failed_delivery(&self, mut failed: Delivery, follow_up: FollowUp) -> Result<(), DomainError> {
        if failed.follow_up.is_some() {
            return Ok(());
        }
        failed.follow_up = Some(follow_up);
        failed.version += 1;
        let mut changes = Changeset::default();
        changes.push(Write::UpdateDelivery(failed));
        match self.store.commit(changes).await {
            Ok(()) | Err(StoreError::Conflict) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }

    /// Closes the open exceptions item about `subject_id`, if there is one.
    async fn close_exception(&self, subject_id: &str, cause: Cause) -> Result<(), DomainError> {
        let cause = &cause;
        self.retry_on_conflict(
            CLOSE_ATTEMPTS,
            || Err(StoreError::Conflict.into()),
            move || async move {
                let Some(mut item) = self.store.open_work_item(Queue::Exceptions, subject_id).await? else {
                    return Ok(((), Changeset::default()));
                };
                item.apply(WorkItemTransition::Close(cause.clone()), self.now())?;
                let mut changes = Changeset::default();
                self.record_work_item(&mut changes, &item, "closed");
                changes.push(Write::UpdateWorkItem(item));
                Ok(((), changes))
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letters_item_id_is_fixed_by_its_message() {
        assert_eq!(dead_letter_item_id("m-1"), dead_letter_item_id("m-1"));
        assert_ne!(dead_letter_item_id("m-1"), dead_letter_item_id("m-2"));
        assert!(WorkItemId::parse(&dead_letter_item_id("m-1")).is_some());
    }
}
