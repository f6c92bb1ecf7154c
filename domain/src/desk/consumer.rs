//! The desk's stream consumer: each operation event keeps its place on the board, and each
//! operation or transaction event opens or closes its subject's work items.

use super::{Queue, Subject, SubjectType};
use crate::access::Role;
use crate::cause::Cause;
use crate::desk::WorkItemTransition;
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{OperationId, TransactionId, WorkItemId};
use crate::ports::{BatchOutcome, Changeset, StoreError, Write};
use crate::service::Service;
use crate::transactions::TransactionStatus;

/// What a subject's current state asks of the desk.
struct Wanted {
    queue: Queue,
    kind: &'static str,
    subject: Subject,
    customer_id: crate::ids::CustomerId,
    required_role: Option<Role>,
    /// Whether an item should be open now.
    open: bool,
    /// The subject's latest cause: why an item opens or closes.
    cause: Cause,
}

/// The subject whose desk state an event changes (an operation's or a transaction's id).
fn desk_subject(event: &Event) -> Option<&str> {
    let field = if event.kind.starts_with("operation.") {
        "operation_id"
    } else if event.kind.starts_with("transaction.") {
        "transaction_id"
    } else {
        return None;
    };
    event.data[field].as_str()
}

impl Service {
    /// Stream → desk: each operation event keeps its place on the board, and each operation or
    /// transaction event opens or closes its subject's work items.
    ///
    /// What the batch's events call for is read and planned first, then committed together
    /// ([`Commit::commit_derived_each`](crate::ports::Commit::commit_derived_each): one SQLite
    /// transaction, so the pages the events share are written once, not once an event; each
    /// changeset still all or nothing). An event about a subject already planned for commits
    /// what waits first, as its reads must see those writes.
    pub async fn handle_desk_events(&self, events: &[Event]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        let mut planned: Vec<(&Event, Changeset)> = vec![];
        let mut subjects = std::collections::HashSet::new();
        for event in events {
            let subject = desk_subject(event);
            if subject.is_some_and(|subject| subjects.contains(subject)) {
                if let Some(failed) = self.commit_planned(std::mem::take(&mut planned)).await {
                    outcome.failed.push(failed);
                    return outcome;
                }
                subjects.clear();
            }
            match self.plan_desk(event).await {
                Ok(changesets) => {
                    planned.extend(changesets.into_iter().map(|changes| (event, changes)));
                    subjects.extend(subject);
                }
                Err(error) => {
                    tracing::warn!(event = %event.id, %error, "desk handler failed; the event comes again");
                    let failed = self.commit_planned(std::mem::take(&mut planned)).await;
                    outcome.failed.push(failed.unwrap_or_else(|| event.id.to_string()));
                    return outcome;
                }
            }
        }
        outcome.failed.extend(self.commit_planned(planned).await);
        outcome
    }

    /// Commits the planned changesets, each on its own terms; answers the first event one
    /// of which did not commit (a conflict: another delivery or a claim got there first, so
    /// the event comes again and is read anew).
    async fn commit_planned(&self, planned: Vec<(&Event, Changeset)>) -> Option<String> {
        let (events, changesets): (Vec<&Event>, Vec<Changeset>) = planned.into_iter().unzip();
        let outcomes = self.store.commit_derived_each(changesets).await;
        let (event, error) = events
            .into_iter()
            .zip(outcomes)
            .find_map(|(event, outcome)| outcome.err().map(|e| (event, e)))?;
        if !matches!(error, StoreError::Conflict) {
            tracing::warn!(event = %event.id, %error, "desk commit failed; the event comes again");
        }
        Some(event.id.to_string())
    }

    /// The changesets an event calls for: each work item it opens or closes, the first of them
    /// together with its move on the board. An operation's move and its item's opening or
    /// closing come from the same event (`created`, `approved`, `needs_attention` …), and in
    /// one changeset the store counts both in one update of the customer's counters.
    async fn plan_desk(&self, event: &Event) -> Result<Vec<Changeset>, DomainError> {
        let moved = self.count_on_board(event).await?;
        let mut changesets = self.reconcile_desk(event).await?;
        match (moved, changesets.first_mut()) {
            (Some(moved), Some(first)) => {
                first.writes.splice(0..0, moved.writes);
            }
            (Some(moved), None) => changesets.push(moved),
            (None, _) => {}
        }
        Ok(changesets)
    }

    async fn reconcile_desk(&self, event: &Event) -> Result<Vec<Changeset>, DomainError> {
        let mut changesets = vec![];
        // Events come in order, so the one that moves a subject out of a state closes its item
        // with that transition's own cause, even if the subject has moved on since.
        let event_cause: Option<Cause> = serde_json::from_value(event.data["cause"].clone()).ok();
        for mut wanted in self.wanted_items(event).await? {
            if let Some(cause) = &event_cause {
                wanted.cause = cause.clone();
            }
            let open = self.store.open_work_item(wanted.queue, &wanted.subject.id).await?;
            let mut changes = Changeset::default();
            match (open, wanted.open) {
                (None, true) => {
                    let id = WorkItemId::from(format!("wi_{}", event.id.trim_start_matches("evt_")));
                    // This event opened an item before, closed since: a late delivery of it
                    // opens nothing (and is not a conflict to retry forever).
                    if self.store.work_item(&id).await?.is_some() {
                        continue;
                    }
                    let mut item = self.new_work_item(
                        id,
                        wanted.queue,
                        wanted.kind,
                        wanted.subject,
                        wanted.customer_id,
                        wanted.cause,
                    );
                    item.required_role = wanted.required_role;
                    self.record_work_item(&mut changes, &item, "opened");
                    changes.push(Write::InsertWorkItem(item));
                }
                (Some(mut item), false) => {
                    item.apply(WorkItemTransition::Close(wanted.cause), self.now())?;
                    self.record_work_item(&mut changes, &item, "closed");
                    changes.push(Write::UpdateWorkItem(item));
                }
                _ => continue,
            }
            changesets.push(changes);
        }
        Ok(changesets)
    }

    /// The items an event calls for. Only an event entering a state that opens an item reads
    /// its subject (it may have moved on: then nothing opens); one that may leave such a state
    /// asks for the item to close, with the event's cause; any other event asks nothing.
    async fn wanted_items(&self, event: &Event) -> Result<Vec<Wanted>, DomainError> {
        let status = event.data["status"].as_str().unwrap_or_default();
        let closing = |queue, kind, subject: Subject| Wanted {
            queue,
            kind,
            subject,
            customer_id: event.customer_id.clone(),
            required_role: None,
            open: false,
            cause: Cause::new("subject_moved_on", status, crate::cause::Actor::system(), self.now()),
        };
        if event.kind.starts_with("operation.") {
            let id = OperationId::from(event.data["operation_id"].as_str().unwrap_or_default());
            let subject = Subject {
                kind: SubjectType::Operation,
                id: id.to_string(),
            };
            let (queue, kind) = match status {
                "approved" | "rejected" | "cancelled" => {
                    return Ok(vec![closing(Queue::Approvals, "approval", subject)])
                }
                "processing" | "completed" | "partially_completed" | "failed" => {
                    return Ok(vec![closing(Queue::Exceptions, "operation_needs_attention", subject)])
                }
                "pending_approval" => (Queue::Approvals, "approval"),
                "needs_attention" => (Queue::Exceptions, "operation_needs_attention"),
                _ => return Ok(vec![]),
            };
            let Some(operation) = self.store.operation(&id).await? else {
                return Ok(vec![]);
            };
            if operation.status.as_str() != status {
                return Ok(vec![]);
            }
            return Ok(vec![Wanted {
                queue,
                kind,
                subject,
                customer_id: operation.customer_id,
                required_role: (queue == Queue::Approvals)
                    .then(|| operation.approval_requirement.as_ref().map(|r| r.role))
                    .flatten(),
                open: true,
                cause: operation.cause,
            }]);
        }
        if event.kind.starts_with("transaction.") {
            let id = TransactionId::from(event.data["transaction_id"].as_str().unwrap_or_default());
            let subject = Subject {
                kind: SubjectType::Transaction,
                id: id.to_string(),
            };
            let kind = "transaction_needs_attention";
            match status {
                "pending" | "failed" | "confirmed" => return Ok(vec![closing(Queue::Exceptions, kind, subject)]),
                "needs_attention" => {}
                _ => return Ok(vec![]),
            }
            let Some(transaction) = self.store.transaction(&id).await? else {
                return Ok(vec![]);
            };
            if transaction.status != TransactionStatus::NeedsAttention {
                return Ok(vec![]);
            }
            return Ok(vec![Wanted {
                queue: Queue::Exceptions,
                kind,
                subject,
                customer_id: transaction.customer_id,
                required_role: None,
                open: true,
                cause: transaction.cause,
            }]);
        }
        Ok(vec![])
    }
}
