//! The execution pipeline's consumers. Delivery is at least once everywhere, so each handler
//! is idempotent: it reads the current state and does only what is still to be done.
//!
//! - [`Service::handle_transition_events`] (stream → transition, here): routes each change to
//!   a task in its customer's lane: approved operations to have their transactions made, new
//!   transactions to be submitted, changed transactions to settle their operation.
//! - [`Service::handle_submissions`] (queue → those tasks and the rail submit) and
//!   [`Service::poll_rails`] (timer → status poll), in `submission.rs`.
//! - [`Service::handle_webhook_events`] (stream → webhook dispatch) and
//!   [`Service::handle_webhook_sends`] (queue → webhook send), in `webhooks`.

use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{ItemId, OperationId, TransactionId};
use crate::operations::{Operation, OperationStatus, OperationTransition, StatusChange};
use crate::ports::{AuditEntry, BatchOutcome, Changeset, QueueName, QueueTask, StoreError, Write, MAX_QUEUE_DELAY};
use crate::service::{jitter, Handled, Service};
use crate::transactions::{Transaction, TransactionStatus};
use time::{Duration, OffsetDateTime};

/// Submit calls (transient refusals included) before a transaction needs an operator.
pub const MAX_SUBMIT_ATTEMPTS: u32 = 5;
/// A submit call still marked as running after this long lost its outcome.
pub const SUBMIT_TIMEOUT: Duration = Duration::seconds(60);
/// Polls answered "not found" before an unknown transaction needs an operator.
pub const MAX_NOT_FOUND_POLLS: u32 = 5;
/// How long an unknown transaction may go without its rail answering an inquiry (errors,
/// timeouts) before it needs an operator: nobody knows whether its money moved, and nobody
/// can find out by asking. An answer of "pending" says the rail has it, and waits on.
pub const UNANSWERED_PATIENCE: Duration = Duration::hours(1);
/// Transactions one status-poll round takes, and how many of them it asks about at a time.
pub const POLL_BATCH: usize = 100;
pub(super) const POLL_CONCURRENCY: usize = 16;
/// How long the poll of a transaction on a rail no adapter serves waits before it is due again.
pub(super) const UNSERVED_RAIL_WAIT: Duration = Duration::minutes(10);
/// After confirmation the rail is asked again this long after it, in case the money came
/// back; a later return arrives by rail report. Each check is a sweep over the rail's
/// confirmed transactions (`Service::sweep_returns`), so a check writes nothing unless the
/// money came back.
pub const RETURN_CHECKS: [Duration; 4] = [
    Duration::minutes(1),
    Duration::minutes(10),
    Duration::hours(1),
    Duration::hours(24),
];

pub(super) fn rail_actor(rail: &str) -> Actor {
    Actor {
        kind: ActorType::Rail,
        id: rail.to_owned(),
    }
}

pub(super) fn system() -> Actor {
    Actor::system()
}

/// The wait before submit attempt `attempt + 1`: 2, 4, 8, 16 … seconds, plus up to 25%.
pub fn submit_backoff(attempt: u32) -> Duration {
    let base = Duration::seconds(1i64 << attempt.min(10));
    base + base * (0.25 * jitter())
}

/// The wait before status poll `polls + 1`: 2 s doubling to at most 10 minutes.
pub(super) fn poll_backoff(polls: u32) -> Duration {
    Duration::seconds((2i64 << polls.min(9)).min(600))
}

/// How far back of its window a return check's first sweep starts.
pub(super) const RETURN_SWEEP_LOOKBACK: Duration = Duration::days(1);

/// Each item's transaction id is fixed by the item, so making it twice is a conflict, not a
/// second transaction.
pub(crate) fn transaction_id_of(item_id: &ItemId) -> TransactionId {
    TransactionId::from(format!("txn_{}", item_id.trim_start_matches("itm_")))
}

/// Transactions made per store transaction: three writes each stays under DynamoDB's 100.
const TRANSACTIONS_PER_CHANGESET: usize = 25;
/// Transactions one task of a customer's lane makes: an operation with more has the rest
/// made by the next task in the lane, these many at a time, so that its customer's turn is
/// short whatever the operation's size.
const TRANSACTIONS_AT_ONCE: usize = TRANSACTIONS_PER_CHANGESET;

/// The lane task each event of a batch calls for, with its lane (the customer): an approved
/// operation's transactions to make, a new transaction to submit, an accepted file to split,
/// and an operation to settle once a batch, however many of its transactions changed in it
/// (it is settled from all its transactions as they then are).
fn transition_tasks(events: &[Event]) -> Vec<(&str, QueueTask)> {
    let mut settling = std::collections::HashSet::new();
    let operation_id = |event: &Event| OperationId::from(event.data.text("operation_id").unwrap_or_default());
    events
        .iter()
        .filter_map(|event| {
            let task = match event.kind.as_str() {
                "operation.approved" => QueueTask::MakeTransactions {
                    operation_id: operation_id(event),
                },
                "transaction.pending" => QueueTask::SubmitTransaction {
                    transaction_id: TransactionId::from(event.data.text("transaction_id").unwrap_or_default()),
                },
                "file.accepted" => QueueTask::SplitFile {
                    file_id: crate::ids::FileId::from(event.data.text("file_id").unwrap_or_default()),
                },
                kind if kind.starts_with("transaction.") && settling.insert(operation_id(event)) => {
                    QueueTask::SettleOperation {
                        operation_id: operation_id(event),
                    }
                }
                _ => return None,
            };
            Some((event.customer_id.as_str(), task))
        })
        .collect()
}

impl Service {
    /// Writes a transaction's change with its audit entry, its event and what it does to
    /// its hold in one changeset.
    pub(super) async fn transaction_changes(
        &self,
        transaction: &Transaction,
        change: Option<(TransactionStatus, TransactionStatus, Cause)>,
    ) -> Result<Changeset, DomainError> {
        let mut changes = Changeset::default();
        if let Some((from, to, cause)) = change {
            self.settle_hold(&mut changes, transaction, to, &cause).await?;
            let entry = AuditEntry::new("transaction", &transaction.id, "status_changed", cause)
                .moving(Some(from.as_str()), to.as_str());
            changes.push(Write::Audit(entry.of_operation(&transaction.operation_id)));
            changes.push(Write::Event(Event::of_transaction(
                crate::ids::EventId::new(&*self.ids),
                transaction,
            )));
            if let Some(tally) = transaction.tally(to, transaction.updated_at) {
                changes.push(Write::Tally(tally));
            }
        }
        changes.push(Write::UpdateTransaction(transaction.clone()));
        Ok(changes)
    }

    /// Applies `change` to the transaction and stores it; retried on a lost race so the
    /// change always sees the latest state. `change` returns `None` when there is nothing
    /// (more) to do. It starts from `copy` when one is in hand, which saves a read: a copy
    /// that is out of date loses the versioned write, and the change is made again on a fresh
    /// read.
    pub(crate) async fn update_transaction<F>(
        &self,
        id: &TransactionId,
        mut copy: Option<Transaction>,
        change: F,
    ) -> Result<Option<Transaction>, DomainError>
    where
        F: Fn(
            &mut Transaction,
            OffsetDateTime,
        ) -> Result<Option<Option<(TransactionStatus, TransactionStatus, Cause)>>, DomainError>,
    {
        let change = &change;
        let busy = || Err(DomainError::conflict("The transaction is changing too fast; retry."));
        self.retry_on_conflict(5, busy, move || {
            let copy = copy.take();
            async move {
                let mut transaction = match copy {
                    Some(copy) => copy,
                    None => self
                        .store
                        .transaction(id)
                        .await?
                        .ok_or_else(|| DomainError::not_found("transaction", id))?,
                };
                let now = self.now();
                let Some(status_change) = change(&mut transaction, now)? else {
                    return Ok((None, Changeset::default()));
                };
                transaction.version += 1;
                transaction.updated_at = now;
                let changes = self.transaction_changes(&transaction, status_change).await?;
                Ok((Some(transaction), changes))
            }
        })
        .await
    }

    // ---- stream → transition ------------------------------------------------------------

    pub async fn handle_transition_events(&self, events: &[Event]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        // The stream is one ordered log for every customer, so it only routes: each event's
        // work becomes a task in its customer's lane, where customers take turns, and a
        // customer's file of fifty thousand payouts costs the stream a few sends a hundred
        // events rather than the work itself (which held every other customer's payouts
        // behind it).
        let tasks = transition_tasks(events);
        for queue in QueueName::ALL {
            let on_queue: Vec<(String, String)> = tasks
                .iter()
                .filter(|(_, task)| task.queue() == queue)
                .map(|(lane, task)| (lane.to_string(), task.to_body()))
                .collect();
            if on_queue.is_empty() {
                continue;
            }
            if let Err(error) = self.queue.send_all(queue, on_queue).await {
                tracing::warn!(%error, "routing the batch's tasks failed; the batch comes again");
                // Tasks are idempotent: those sent before the failure may come twice.
                outcome.failed.extend(events.first().map(|e| e.id.to_string()));
                return outcome;
            }
        }
        // A schedule's timer is kept in step here, and a schedule paused when an operation it
        // made fails: both are rare and small.
        for event in events {
            let result = match event.kind.as_str() {
                "operation.rejected" | "operation.failed" => self.pause_on_failed_operation(event).await,
                kind if kind.starts_with("schedule.") => self.sync_schedule_timer(event).await,
                _ => continue,
            };
            if !matches!(result, Ok(Handled::Done)) {
                if let Err(error) = &result {
                    tracing::warn!(event = %event.id, %error, "transition handler failed; the event comes again");
                }
                // A stream is ordered: everything from the first failure on comes again.
                outcome.failed.push(event.id.to_string());
                break;
            }
        }
        outcome
    }

    /// An approved operation moves to processing with a transaction id fixed for each item,
    /// then its transactions are made in chunks (so any number of items fits a store
    /// transaction). Both steps are idempotent: a second delivery finds the operation
    /// processing and makes only the transactions still missing (none exist before the move).
    pub(super) async fn start_processing(&self, operation_id: &OperationId) -> Result<Handled, DomainError> {
        let Some(mut operation) = self.store.operation(operation_id).await? else {
            return Ok(Handled::Done);
        };
        match operation.status {
            OperationStatus::Approved => {
                let now = self.now();
                for item in operation.items.iter_mut() {
                    item.transaction_id = Some(transaction_id_of(&item.id));
                }
                let cause = Cause::new(
                    "transactions_created",
                    format!("{} transaction(s) created", operation.items.len()),
                    system(),
                    now,
                );
                let change = operation.apply(OperationTransition::StartProcessing(cause))?;
                operation.version += 1;
                operation.updated_at = now;
                let mut changes = Changeset::default();
                self.record_operation_change(&mut changes, &operation, change);
                changes.push(Write::UpdateOperation(operation.clone()));
                match self.store.commit(changes).await {
                    Ok(()) => self.make_missing_transactions(&operation, &[]).await,
                    // Lost to a concurrent change (a cancel, or another delivery): look again.
                    Err(StoreError::Conflict) => Ok(Handled::Later),
                    Err(other) => Err(other.into()),
                }
            }
            OperationStatus::Processing => {
                let existing = self.store.transactions_of_operation(&operation).await?;
                self.make_missing_transactions(&operation, &existing).await
            }
            _ => Ok(Handled::Done),
        }
    }

    /// Makes up to [`TRANSACTIONS_AT_ONCE`] of the operation's missing transactions, and
    /// queues the making of the rest in the customer's lane.
    async fn make_missing_transactions(
        &self,
        operation: &Operation,
        existing: &[Transaction],
    ) -> Result<Handled, DomainError> {
        let existing: std::collections::HashSet<&str> = existing.iter().map(|t| t.id.as_str()).collect();
        let missing: Vec<_> = operation
            .items
            .iter()
            .filter(|i| !existing.contains(transaction_id_of(&i.id).as_str()))
            .collect();
        if missing.len() > TRANSACTIONS_AT_ONCE {
            let task = QueueTask::MakeTransactions {
                operation_id: operation.id.clone(),
            };
            self.enqueue(task, &operation.customer_id, Duration::ZERO).await?;
        }
        for chunk in missing[..missing.len().min(TRANSACTIONS_AT_ONCE)].chunks(TRANSACTIONS_PER_CHANGESET) {
            let now = self.now();
            let mut changes = Changeset::default();
            for item in chunk {
                let cause = Cause::new(
                    "operation_approved",
                    format!("Created from approved operation {}", operation.id),
                    system(),
                    now,
                );
                let transaction = Transaction {
                    id: transaction_id_of(&item.id),
                    operation_id: operation.id.clone(),
                    customer_id: operation.customer_id.clone(),
                    item_id: item.id.clone(),
                    rail: item.destination.rail.clone(),
                    rail_reference: None,
                    amount: item.amount,
                    currency: operation.currency.clone(),
                    // A rail item always has one (a create refuses it without); only a
                    // transfer's may not, and a transfer makes no transaction.
                    beneficiary: item.beneficiary.clone().unwrap_or_default(),
                    account: item.destination.account.clone(),
                    reference: item.reference.clone(),
                    end_to_end_id: item.end_to_end_id.clone(),
                    status: TransactionStatus::Pending,
                    cause: cause.clone(),
                    submit_attempts: 0,
                    submitting_since: None,
                    possibly_submitted: false,
                    next_poll_at: None,
                    status_polls: 0,
                    confirmed_at: None,
                    created_at: now,
                    updated_at: now,
                    environment: operation.environment,
                    hold_id: operation
                        .source_account_id
                        .as_ref()
                        .map(|_| crate::ids::MovementId::of_item(&item.id)),
                    hold_expires_at: operation
                        .hold_ttl
                        .filter(|_| operation.source_account_id.is_some())
                        .map(|ttl| now + Duration::seconds(i64::from(ttl))),
                    direction: match operation.kind {
                        crate::operations::OperationType::Collection => crate::rail::RailDirection::Debit,
                        _ => crate::rail::RailDirection::Credit,
                    },
                    credit_account_id: operation.destination_account_id.clone(),
                    cutoff_at: None,
                    settlement_day: None,
                    submit_after: None,
                    bank_file: None,
                    version: 1,
                };
                let entry = AuditEntry::new("transaction", &transaction.id, "created", cause)
                    .moving(None, "pending")
                    .of_operation(&operation.id);
                changes.push(Write::Audit(entry));
                changes.push(Write::Event(Event::of_transaction(
                    crate::ids::EventId::new(&*self.ids),
                    &transaction,
                )));
                changes.extend(transaction.tally(TransactionStatus::Pending, now).map(Write::Tally));
                changes.push(Write::InsertTransaction(transaction));
            }
            match self.store.commit(changes).await {
                Ok(()) => {}
                // Another delivery is making them right now: look again later.
                Err(StoreError::Conflict) => return Ok(Handled::Later),
                Err(other) => return Err(other.into()),
            }
        }
        Ok(Handled::Done)
    }

    /// Puts a task on its queue in `lane` (see [`crate::ports::Queue::send`]), due after
    /// `delay` (a longer wait is taken in hops: the task finds itself early and goes back on
    /// the queue).
    pub(crate) async fn enqueue(&self, task: QueueTask, lane: &str, delay: Duration) -> Result<(), DomainError> {
        Ok(self
            .queue
            .send(task.queue(), lane, task.to_body(), delay.min(MAX_QUEUE_DELAY))
            .await?)
    }

    /// Recomputes an operation's status from its transactions.
    pub(super) async fn settle_operation(&self, operation_id: &OperationId) -> Result<Handled, DomainError> {
        let Some(mut operation) = self.store.operation(operation_id).await? else {
            return Ok(Handled::Done);
        };
        let transactions = self.store.transactions_of_operation(&operation).await?;
        let Some(change) = settle(&mut operation, &transactions, self.now())? else {
            return Ok(Handled::Done);
        };
        operation.version += 1;
        let mut changes = Changeset::default();
        self.record_operation_change(&mut changes, &operation, change);
        changes.push(Write::UpdateOperation(operation));
        match self.store.commit(changes).await {
            Err(StoreError::Conflict) => Ok(Handled::Later),
            other => other.map(|()| Handled::Done).map_err(Into::into),
        }
    }
}

/// The operation's next status given its transactions, if it changes.
pub fn settle(
    operation: &mut Operation,
    transactions: &[Transaction],
    now: OffsetDateTime,
) -> Result<Option<StatusChange>, DomainError> {
    use TransactionStatus::*;
    // Until every item's transaction exists the outcome is not known.
    let all_made = !transactions.is_empty() && transactions.len() == operation.items.len();
    if !matches!(
        operation.status,
        OperationStatus::Processing | OperationStatus::NeedsAttention
    ) || !all_made
    {
        return Ok(None);
    }
    let count = |status: TransactionStatus| transactions.iter().filter(|t| t.status == status).count();
    let (confirmed, failed, attention) = (count(Confirmed), count(Failed) + count(Returned), count(NeedsAttention));
    let total = transactions.len();
    let summary = format!("{confirmed} confirmed, {failed} failed, {attention} need attention of {total}");
    let cause = |code: &str| Cause::new(code, summary.clone(), system(), now);
    let transition = if attention > 0 {
        if operation.status == OperationStatus::NeedsAttention {
            return Ok(None);
        }
        OperationTransition::FlagForAttention(cause("transaction_needs_attention"))
    } else if confirmed + failed < total {
        if operation.status == OperationStatus::Processing {
            return Ok(None);
        }
        OperationTransition::StartProcessing(cause("transactions_in_progress"))
    } else if failed == 0 {
        OperationTransition::Complete(cause("all_transactions_confirmed"))
    } else if confirmed == 0 && transactions.iter().all(|t| t.cause.code == super::HOLD_EXPIRED) {
        OperationTransition::Fail(cause(super::HOLD_EXPIRED))
    } else if confirmed == 0 {
        OperationTransition::Fail(cause("all_transactions_failed"))
    } else {
        OperationTransition::CompletePartially(cause("some_transactions_failed"))
    };
    operation.apply(transition).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operations::tests::operation_in;
    use crate::transactions::tests::transaction;

    fn item() -> crate::operations::Item {
        let txn = transaction();
        crate::operations::Item {
            end_to_end_id: None,
            instruction_id: None,
            id: "itm_1".into(),
            beneficiary: Some(txn.beneficiary),
            destination: crate::operations::Destination {
                rail: txn.rail,
                account: txn.account,
                account_id: None,
            },
            amount: txn.amount,
            reference: None,
            transaction_id: None,
        }
    }

    #[test]
    fn an_operation_waits_for_all_its_transactions() {
        let mut operation = operation_in(OperationStatus::Processing);
        operation.items = vec![item(), item()];
        let one_made = txns(&[TransactionStatus::Confirmed]);
        assert_eq!(
            settle(&mut operation, &one_made, OffsetDateTime::UNIX_EPOCH).unwrap(),
            None
        );
        assert_eq!(transaction_id_of(&"itm_01abc".into()), "txn_01abc");
    }

    fn txns(statuses: &[TransactionStatus]) -> Vec<Transaction> {
        statuses
            .iter()
            .map(|s| Transaction {
                status: *s,
                ..transaction()
            })
            .collect()
    }

    fn settled(from: OperationStatus, statuses: &[TransactionStatus]) -> Option<(OperationStatus, String)> {
        let mut operation = operation_in(from);
        operation.items = statuses.iter().map(|_| item()).collect();
        settle(&mut operation, &txns(statuses), OffsetDateTime::UNIX_EPOCH)
            .unwrap()
            .map(|c| (c.to, c.cause.code))
    }

    #[test]
    fn an_operation_settles_from_its_transactions() {
        use OperationStatus as O;
        use TransactionStatus::*;
        let to = |status: O, code: &str| Some((status, code.to_string()));
        assert_eq!(
            settled(O::Processing, &[Confirmed, Confirmed]),
            to(O::Completed, "all_transactions_confirmed")
        );
        assert_eq!(
            settled(O::Processing, &[Failed, Returned]),
            to(O::Failed, "all_transactions_failed")
        );
        assert_eq!(
            settled(O::Processing, &[Confirmed, Failed]),
            to(O::PartiallyCompleted, "some_transactions_failed")
        );
        assert_eq!(settled(O::Processing, &[Confirmed, Submitted]), None, "still in flight");
        assert_eq!(
            settled(O::Processing, &[Confirmed, Unknown]),
            None,
            "unknown is still in flight"
        );
        assert_eq!(
            settled(O::Processing, &[NeedsAttention, Submitted]),
            to(O::NeedsAttention, "transaction_needs_attention")
        );
        assert_eq!(settled(O::NeedsAttention, &[NeedsAttention]), None);
        assert_eq!(
            settled(O::NeedsAttention, &[Pending, Confirmed]),
            to(O::Processing, "transactions_in_progress")
        );
        assert_eq!(
            settled(O::NeedsAttention, &[Failed, Confirmed]),
            to(O::PartiallyCompleted, "some_transactions_failed")
        );
        assert_eq!(settled(O::Completed, &[Returned]), None, "final operations stay final");
        assert_eq!(settled(O::Approved, &[Confirmed]), None);
    }

    #[test]
    fn backoffs_grow_and_are_bounded() {
        let waits: Vec<Duration> = (1..5).map(submit_backoff).collect();
        for (attempt, wait) in (1..5).zip(&waits) {
            let base = Duration::seconds(1 << attempt);
            assert!(*wait >= base && *wait <= base * 1.25, "{attempt}: {wait}");
        }
        assert_eq!(poll_backoff(0), Duration::seconds(2));
        assert_eq!(poll_backoff(3), Duration::seconds(16));
        assert_eq!(poll_backoff(30), Duration::minutes(10));
    }
}
