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
use serde::Deserialize;

/// What a subject's current state asks of the desk.
struct Wanted {
    queue: Queue,
    kind: &'static str,
    subject: Subject,
    customer_id: crate::ids::CustomerId,
    required_role: Option<Role>,
    /// An approval's operation's creator.
    subject_created_by: Option<String>,
    /// Those who have decided an approval's operation.
    subject_decided_by: Vec<String>,
    /// Whether an item should be open now.
    open: bool,
    /// The subject's latest cause: why an item opens or closes.
    cause: Cause,
}

/// What the desk reads of an operation's or a transaction's event: read once, in one pass
/// over its data, and handed to each step (the event's wave, its board move, its items).
#[derive(Default, serde::Deserialize)]
pub(super) struct DeskFacts {
    /// Whose event it is (decided once, from the event's kind); none for any other event.
    #[serde(skip)]
    pub(super) subject_type: Option<SubjectType>,
    pub(super) operation_id: Option<String>,
    transaction_id: Option<String>,
    status: Option<String>,
    /// Read apart, so that a cause this version cannot read leaves the rest of the event read.
    cause: Option<serde_json::Value>,
    /// An operation event's snapshot of the operation: where it stands on the board.
    pub(super) object: Option<BoardFacts>,
    /// A payout limit's warning: its counter and the share of the limit reached.
    counter: Option<String>,
    percent: Option<u8>,
}

/// What the board reads of an operation's snapshot (absent fields: the board does not move).
/// Each is read leniently: a field of another type (a shape a later version might write) is
/// absent, and leaves the rest of the event read, its work items included.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct BoardFacts {
    #[serde(deserialize_with = "leniently")]
    pub(super) version: Option<u64>,
    #[serde(deserialize_with = "leniently")]
    pub(super) status: Option<String>,
    #[serde(deserialize_with = "leniently")]
    pub(super) currency: Option<String>,
    #[serde(deserialize_with = "leniently")]
    pub(super) total_amount: Option<i64>,
}

/// A field as `T`, or absent if the JSON there is of another type (still an error if it is
/// not JSON at all).
fn leniently<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

impl DeskFacts {
    /// An operation's or a transaction's event's facts; nothing for any other event.
    fn of(event: &Event) -> DeskFacts {
        let subject_type = if event.kind.starts_with("operation.") {
            SubjectType::Operation
        } else if event.kind.starts_with("transaction.") {
            SubjectType::Transaction
        } else if event.kind == crate::limits::WARNING_EVENT {
            SubjectType::PayoutLimit
        } else {
            return DeskFacts::default();
        };
        DeskFacts {
            subject_type: Some(subject_type),
            ..event.data.read().unwrap_or_default()
        }
    }

    /// The subject whose desk state the event changes (an operation's or a transaction's id).
    fn subject(&self) -> Option<&str> {
        match self.subject_type? {
            SubjectType::Operation => self.operation_id.as_deref(),
            SubjectType::Transaction => self.transaction_id.as_deref(),
            _ => None,
        }
    }
}

/// The cause an event carries, if it reads as one.
fn event_cause(facts: &DeskFacts) -> Option<Cause> {
    facts.cause.as_ref().and_then(|cause| Cause::deserialize(cause).ok())
}

impl Service {
    /// Stream → desk: each operation event keeps its place on the board, and each operation or
    /// transaction event opens or closes its subject's work items.
    ///
    /// The batch is taken in waves: each subject's first event in the first, its second in the
    /// second, and so on (an event of no subject in the first). A wave's events are planned,
    /// then committed together ([`Commit::commit_derived_each`](crate::ports::Commit::commit_derived_each):
    /// one SQLite transaction, so the pages they share are written once; on DynamoDB as few
    /// transactions as the writes fit, each customer's counters updated once in each, so a
    /// busy stream's moves share their counter updates); each changeset still all or nothing.
    /// A subject's event is planned only after its earlier one committed, so its reads see
    /// those writes; subjects are independent of each other, so their order across subjects
    /// does not matter. On a failure the batch stops, and the first event in the stream's
    /// order not done is reported: it and everything after come again.
    pub async fn handle_desk_events(&self, events: &[Event]) -> BatchOutcome {
        let facts: Vec<DeskFacts> = events.iter().map(DeskFacts::of).collect();
        let mut waves: Vec<Vec<usize>> = vec![];
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for (at, facts) in facts.iter().enumerate() {
            let wave = facts.subject().map_or(0, |subject| {
                let count = seen.entry(subject).or_default();
                *count += 1;
                *count - 1
            });
            if waves.len() <= wave {
                waves.resize_with(wave + 1, Vec::new);
            }
            waves[wave].push(at);
        }
        let mut not_done: std::collections::BTreeSet<usize> = (0..events.len()).collect();
        for wave in waves {
            let mut planned: Vec<(usize, Changeset)> = vec![];
            let mut stopped = false;
            for at in wave {
                match self.plan_desk(&events[at], &facts[at]).await {
                    Ok(changesets) => {
                        not_done.remove(&at);
                        planned.extend(changesets.into_iter().map(|changes| (at, changes)));
                    }
                    Err(error) => {
                        tracing::warn!(event = %events[at].id, %error, "desk handler failed; the event comes again");
                        stopped = true;
                        break;
                    }
                }
            }
            let failed = self.commit_planned(events, planned).await;
            not_done.extend(&failed);
            if stopped || !failed.is_empty() {
                break;
            }
        }
        BatchOutcome {
            failed: not_done
                .first()
                .map(|&at| events[at].id.to_string())
                .into_iter()
                .collect(),
        }
    }

    /// Commits the planned changesets (each of the event at its position in `events`), each on
    /// its own terms; answers the events one of whose changesets did not commit (a conflict:
    /// another delivery or a claim got there first, so the event comes again and is read anew).
    async fn commit_planned(&self, events: &[Event], planned: Vec<(usize, Changeset)>) -> Vec<usize> {
        let (positions, changesets): (Vec<usize>, Vec<Changeset>) = planned.into_iter().unzip();
        let outcomes = self.store.commit_derived_each(changesets).await;
        let mut failed = vec![];
        for (at, outcome) in positions.into_iter().zip(outcomes) {
            if let Err(error) = outcome {
                if !matches!(error, StoreError::Conflict) {
                    tracing::warn!(event = %events[at].id, %error, "desk commit failed; the event comes again");
                }
                failed.push(at);
            }
        }
        failed
    }

    /// The changesets an event calls for: each work item it opens or closes, the first of them
    /// together with its move on the board. An operation's move and its item's opening or
    /// closing come from the same event (`created`, `approved`, `needs_attention` …), and in
    /// one changeset the store counts both in one update of the customer's counters.
    async fn plan_desk(&self, event: &Event, facts: &DeskFacts) -> Result<Vec<Changeset>, DomainError> {
        let moved = self.count_on_board(event, facts).await?;
        let mut changesets = self.reconcile_desk(event, facts).await?;
        match (moved, changesets.first_mut()) {
            (Some(moved), Some(first)) => {
                first.writes.splice(0..0, moved.writes);
            }
            (Some(moved), None) => changesets.push(moved),
            (None, _) => {}
        }
        Ok(changesets)
    }

    async fn reconcile_desk(&self, event: &Event, facts: &DeskFacts) -> Result<Vec<Changeset>, DomainError> {
        let mut changesets = vec![];
        // Events come in order, so the one that moves a subject out of a state closes its item
        // with that transition's own cause, even if the subject has moved on since.
        let event_cause = event_cause(facts);
        for mut wanted in self.wanted_items(event, facts).await? {
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
                    item.subject_created_by = wanted.subject_created_by;
                    item.subject_decided_by = wanted.subject_decided_by;
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
    async fn wanted_items(&self, event: &Event, facts: &DeskFacts) -> Result<Vec<Wanted>, DomainError> {
        let status = facts.status.as_deref().unwrap_or_default();
        let closing = |queue, kind, subject: Subject| Wanted {
            queue,
            kind,
            subject,
            customer_id: event.customer_id.clone(),
            required_role: None,
            subject_created_by: None,
            subject_decided_by: vec![],
            open: false,
            cause: Cause::new("subject_moved_on", status, crate::cause::Actor::system(), self.now()),
        };
        if facts.subject_type == Some(SubjectType::Operation) {
            let id = OperationId::from(facts.operation_id.as_deref().unwrap_or_default());
            let subject = Subject {
                kind: SubjectType::Operation,
                id: id.to_string(),
            };
            let (queue, kind) = match status {
                "approved" | "rejected" | "cancelled" | "expired" => {
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
            // The role of the first approval it waits for: its chain's first step, or the
            // limit's when its limits hold it at once.
            let required_role = (queue == Queue::Approvals)
                .then(|| operation.approvals_needed().first().map(|needed| needed.role))
                .flatten();
            return Ok(vec![Wanted {
                queue,
                kind,
                subject,
                customer_id: operation.customer_id,
                required_role,
                subject_decided_by: match queue {
                    Queue::Approvals => operation.approvals.iter().map(|a| a.user_id.to_string()).collect(),
                    Queue::Exceptions => vec![],
                },
                subject_created_by: (queue == Queue::Approvals).then_some(operation.created_by),
                open: true,
                cause: operation.cause,
            }]);
        }
        if facts.subject_type == Some(SubjectType::PayoutLimit) {
            // A warning stays on the desk until someone acknowledges it.
            let (Some(counter), Some(percent), Some(cause)) = (&facts.counter, facts.percent, &event_cause(facts))
            else {
                return Ok(vec![]);
            };
            return Ok(vec![Wanted {
                queue: Queue::Exceptions,
                kind: "payout_limit_warning",
                subject: Subject {
                    kind: SubjectType::PayoutLimit,
                    id: format!("{counter}:{percent}"),
                },
                customer_id: event.customer_id.clone(),
                required_role: None,
                subject_created_by: None,
                subject_decided_by: vec![],
                open: true,
                cause: cause.clone(),
            }]);
        }
        if facts.subject_type == Some(SubjectType::Transaction) {
            let id = TransactionId::from(facts.transaction_id.as_deref().unwrap_or_default());
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
                subject_created_by: None,
                subject_decided_by: vec![],
                open: true,
                cause: transaction.cause,
            }]);
        }
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: serde_json::Value) -> Event {
        serde_json::from_value(serde_json::json!({
            "id": "evt_1", "object": "event", "type": kind, "created": 0, "environment": "test",
            "api_version": "v1", "customer_id": "cus_1", "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn a_board_field_of_another_type_leaves_the_rest_of_the_event_read() {
        let facts = DeskFacts::of(&event(
            "operation.pending_approval",
            serde_json::json!({
                "operation_id": "op_1", "status": "pending_approval",
                "object": {"version": "3", "status": "pending_approval", "currency": "EUR", "total_amount": 10},
            }),
        ));
        assert_eq!(facts.subject(), Some("op_1"));
        assert_eq!(facts.status.as_deref(), Some("pending_approval"));
        let object = facts.object.expect("the snapshot's other fields");
        assert_eq!((object.version, object.total_amount), (None, Some(10)));
        assert_eq!(object.currency.as_deref(), Some("EUR"));
    }

    #[test]
    fn an_events_subject_is_decided_by_its_kind() {
        let data = serde_json::json!({"operation_id": "op_1", "transaction_id": "txn_1"});
        assert_eq!(
            DeskFacts::of(&event("operation.created", data.clone())).subject(),
            Some("op_1")
        );
        assert_eq!(
            DeskFacts::of(&event("transaction.pending", data.clone())).subject(),
            Some("txn_1")
        );
        assert_eq!(DeskFacts::of(&event("webhook_endpoint.created", data)).subject(), None);
    }
}
