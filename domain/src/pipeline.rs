//! The execution pipeline's consumers. Delivery is at least once everywhere, so each handler
//! is idempotent: it reads the current state and does only what is still to be done.
//!
//! - [`Service::handle_transition_events`] (stream → transition): approved operations become
//!   transactions; new transactions are queued for submission; settled transactions settle
//!   their operation.
//! - [`Service::handle_submissions`] (queue → rail submit).
//! - [`Service::poll_rails`] (timer → status poll).
//! - [`Service::handle_webhook_events`] (stream → webhook dispatch) and
//!   [`Service::handle_webhook_sends`] (queue → webhook send).

use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::IdKind;
use crate::operation::{Operation, OperationStatus, OperationTransition, StatusChange};
use crate::ports::{AuditEntry, BatchOutcome, Changeset, QueueMessage, QueueTask, StoreError, Write, MAX_QUEUE_DELAY};
use crate::rail::{Ack, Instruction, RailError, RailState};
use crate::service::Service;
use crate::signature;
use crate::transaction::{Transaction, TransactionStatus, TransactionTransition};
use crate::webhook::{self, Attempt, Delivery, DeliveryStatus, WebhookEndpoint};
use futures_util::future::join_all;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::hash_map::{Entry, HashMap};
use time::{Duration, OffsetDateTime};

/// Submit calls (transient refusals included) before a transaction needs an operator.
pub const MAX_SUBMIT_ATTEMPTS: u32 = 5;
/// A submit call still marked as running after this long lost its outcome.
pub const SUBMIT_TIMEOUT: Duration = Duration::seconds(60);
/// Polls answered "not found" before an unknown transaction needs an operator.
pub const MAX_NOT_FOUND_POLLS: u32 = 5;
/// Transactions one status-poll round takes, and how many of them it asks about at a time.
pub const POLL_BATCH: usize = 100;
const POLL_CONCURRENCY: usize = 16;
/// How long the poll of a transaction on a rail no adapter serves waits before it is due again.
const UNSERVED_RAIL_WAIT: Duration = Duration::minutes(10);
/// After confirmation the rail is asked again this long after it, in case the money came
/// back; a later return arrives by rail report. Four checks cost four writes per payout.
pub const RETURN_CHECKS: [Duration; 4] = [
    Duration::minutes(1),
    Duration::minutes(10),
    Duration::hours(1),
    Duration::hours(24),
];

/// What one consumer did with one item.
enum Handled {
    Done,
    /// Leave the item for a later delivery (e.g. another worker holds it right now).
    Later,
}

fn rail_actor(rail: &str) -> Actor {
    Actor {
        kind: ActorType::Rail,
        id: rail.to_owned(),
    }
}

fn system() -> Actor {
    Actor::system()
}

fn jitter() -> f64 {
    rand::random::<f64>()
}

/// The wait before submit attempt `attempt + 1`: 2, 4, 8, 16 … seconds, plus up to 25%.
pub fn submit_backoff(attempt: u32) -> Duration {
    let base = Duration::seconds(1i64 << attempt.min(10));
    base + base * (0.25 * jitter())
}

/// The wait before status poll `polls + 1`: 2 s doubling to at most 10 minutes.
fn poll_backoff(polls: u32) -> Duration {
    Duration::seconds((2i64 << polls.min(9)).min(600))
}

/// The next return check of a transaction confirmed at `confirmed_at`, if any is left.
fn next_return_check(confirmed_at: OffsetDateTime, now: OffsetDateTime) -> Option<OffsetDateTime> {
    RETURN_CHECKS
        .iter()
        .map(|after| confirmed_at + *after)
        .find(|check| *check > now)
}

/// Each item's transaction id is fixed by the item, so making it twice is a conflict, not a
/// second transaction.
fn transaction_id_of(item_id: &str) -> String {
    format!("txn_{}", item_id.trim_start_matches("itm_"))
}

/// Transactions made per store transaction: three writes each stays under DynamoDB's 100.
const TRANSACTIONS_PER_CHANGESET: usize = 25;

/// Delivery ids are derived from event and endpoint, so dispatching twice makes one delivery.
fn delivery_id(event_id: &str, endpoint_id: &str) -> String {
    let digest = Sha256::digest(format!("{event_id}/{endpoint_id}"));
    format!("whd_{}", &hex::encode(digest)[..26])
}

impl Service {
    /// Writes a transaction's change with its audit entry and event in one changeset.
    fn transaction_changes(
        &self,
        transaction: &Transaction,
        change: Option<(TransactionStatus, TransactionStatus, Cause)>,
    ) -> Changeset {
        let mut changes = Changeset::default();
        if let Some((from, to, cause)) = change {
            let entry = AuditEntry::new("transaction", &transaction.id, "status_changed", cause)
                .moving(Some(from.as_str()), to.as_str());
            changes.push(Write::Audit(entry.of_operation(&transaction.operation_id)));
            changes.push(Write::Event(Event::of_transaction(
                self.ids.new_id(IdKind::Event),
                transaction,
            )));
        }
        changes.push(Write::UpdateTransaction(transaction.clone()));
        changes
    }

    /// Applies `change` to the current transaction and stores it; retried on a lost race so
    /// the change always sees the latest state. `change` returns `None` when there is
    /// nothing (more) to do.
    pub(crate) async fn update_transaction<F>(&self, id: &str, change: F) -> Result<Option<Transaction>, DomainError>
    where
        F: Fn(
            &mut Transaction,
            OffsetDateTime,
        ) -> Result<Option<Option<(TransactionStatus, TransactionStatus, Cause)>>, DomainError>,
    {
        self.update_transaction_from(id, None, change).await
    }

    /// As [`Self::update_transaction`], starting from `copy` when one is in hand, which saves
    /// a read: a copy that is out of date loses the versioned write, and the change is made
    /// again on a fresh read.
    pub(crate) async fn update_transaction_from<F>(
        &self,
        id: &str,
        mut copy: Option<Transaction>,
        change: F,
    ) -> Result<Option<Transaction>, DomainError>
    where
        F: Fn(
            &mut Transaction,
            OffsetDateTime,
        ) -> Result<Option<Option<(TransactionStatus, TransactionStatus, Cause)>>, DomainError>,
    {
        for _ in 0..5 {
            let mut transaction = match copy.take() {
                Some(copy) => copy,
                None => self
                    .store
                    .transaction(id)
                    .await?
                    .ok_or_else(|| DomainError::not_found("transaction", id))?,
            };
            let now = self.now();
            let Some(status_change) = change(&mut transaction, now)? else {
                return Ok(None);
            };
            transaction.version += 1;
            transaction.updated_at = now;
            match self
                .store
                .commit(self.transaction_changes(&transaction, status_change))
                .await
            {
                Ok(()) => return Ok(Some(transaction)),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::invalid_state(
            "conflict",
            "The transaction is changing too fast; retry.",
        ))
    }

    // ---- stream → transition ------------------------------------------------------------

    pub async fn handle_transition_events(&self, events: &[Event]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for event in events {
            let result = match event.kind.as_str() {
                "operation.approved" => self.start_processing(event).await,
                "transaction.pending" => self.queue_submission(event).await,
                kind if kind.starts_with("transaction.") => self.settle_operation(event).await,
                _ => Ok(Handled::Done),
            };
            if !matches!(result, Ok(Handled::Done)) {
                if let Err(error) = &result {
                    tracing::warn!(event = %event.id, %error, "transition handler failed; the event comes again");
                }
                // A stream is ordered: everything from the first failure on comes again.
                outcome.failed.push(event.id.clone());
                break;
            }
        }
        outcome
    }

    fn data_id<'a>(event: &'a Event, field: &str) -> &'a str {
        event.data[field].as_str().unwrap_or_default()
    }

    /// An approved operation moves to processing with a transaction id fixed for each item,
    /// then its transactions are made in chunks (so any number of items fits a store
    /// transaction). Both steps are idempotent: a second delivery finds the operation
    /// processing and makes only the transactions still missing (none exist before the move).
    async fn start_processing(&self, event: &Event) -> Result<Handled, DomainError> {
        let operation_id = Self::data_id(event, "operation_id");
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
                let existing = self.store.transactions_of_operation(&operation.id).await?;
                self.make_missing_transactions(&operation, &existing).await
            }
            _ => Ok(Handled::Done),
        }
    }

    async fn make_missing_transactions(
        &self,
        operation: &Operation,
        existing: &[Transaction],
    ) -> Result<Handled, DomainError> {
        let existing: Vec<&str> = existing.iter().map(|t| t.id.as_str()).collect();
        let missing: Vec<_> = operation
            .items
            .iter()
            .filter(|i| !existing.contains(&transaction_id_of(&i.id).as_str()))
            .collect();
        for chunk in missing.chunks(TRANSACTIONS_PER_CHANGESET) {
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
                    object: "transaction".into(),
                    operation_id: operation.id.clone(),
                    customer_id: operation.customer_id.clone(),
                    item_id: item.id.clone(),
                    rail: item.destination.rail.clone(),
                    rail_reference: None,
                    amount: item.amount,
                    currency: operation.currency.clone(),
                    beneficiary: item.beneficiary.clone(),
                    account: item.destination.account.clone(),
                    reference: item.reference.clone(),
                    status: TransactionStatus::Pending,
                    cause: cause.clone(),
                    submit_attempts: 0,
                    submitting_since: None,
                    possibly_submitted: false,
                    next_poll_at: None,
                    status_polls: 0,
                    created_at: now,
                    updated_at: now,
                    environment: operation.environment,
                    version: 1,
                };
                let entry = AuditEntry::new("transaction", &transaction.id, "created", cause)
                    .moving(None, "pending")
                    .of_operation(&operation.id);
                changes.push(Write::Audit(entry));
                changes.push(Write::Event(Event::of_transaction(
                    self.ids.new_id(IdKind::Event),
                    &transaction,
                )));
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

    async fn queue_submission(&self, event: &Event) -> Result<Handled, DomainError> {
        let transaction_id = Self::data_id(event, "transaction_id").to_owned();
        self.enqueue(QueueTask::SubmitTransaction { transaction_id }, Duration::ZERO)
            .await?;
        Ok(Handled::Done)
    }

    /// Puts a task on its queue, due after `delay` (a longer wait is taken in hops: the task
    /// finds itself early and goes back on the queue).
    async fn enqueue(&self, task: QueueTask, delay: Duration) -> Result<(), DomainError> {
        Ok(self
            .queue
            .send(task.queue(), task.to_body(), delay.min(MAX_QUEUE_DELAY))
            .await?)
    }

    /// Recomputes an operation's status from its transactions.
    async fn settle_operation(&self, event: &Event) -> Result<Handled, DomainError> {
        let operation_id = Self::data_id(event, "operation_id");
        let Some(mut operation) = self.store.operation(operation_id).await? else {
            return Ok(Handled::Done);
        };
        let transactions = self.store.transactions_of_operation(operation_id).await?;
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

    // ---- queue → rail submit ------------------------------------------------------------

    pub async fn handle_submissions(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for message in messages {
            let result = match QueueTask::parse(&message.body) {
                Ok(QueueTask::SubmitTransaction { transaction_id }) => self.submit(&transaction_id).await,
                Ok(other) => {
                    tracing::error!(message = %message.id, task = ?other, "a task of another queue dropped from the submissions queue");
                    Ok(Handled::Done)
                }
                // Kept for its dead-letter queue, where a deployment that reads it can redrive it.
                Err(error) => Err(DomainError::Store(error.to_string())),
            };
            if !matches!(result, Ok(Handled::Done)) {
                if let Err(error) = &result {
                    tracing::warn!(message = %message.id, %error, "submission failed; the message comes again");
                }
                outcome.failed.push(message.id.clone());
            }
        }
        outcome
    }

    /// Hands a pending transaction to its rail, at most once per attempt: the attempt is
    /// recorded before the call, so a worker that finds an attempt without outcome knows the
    /// rail may hold the instruction and asks instead of sending again.
    async fn submit(&self, transaction_id: &str) -> Result<Handled, DomainError> {
        let claimed = self
            .update_transaction(transaction_id, |txn, now| {
                if txn.status != TransactionStatus::Pending {
                    return Ok(None);
                }
                match txn.submitting_since {
                    Some(since) if now - since < SUBMIT_TIMEOUT => Ok(None),
                    Some(_) => {
                        // A worker died during the call: the outcome is unknown.
                        txn.submitting_since = None;
                        txn.next_poll_at = Some(now);
                        let cause = Cause::new(
                            "submit_outcome_lost",
                            "A submit call ended without a recorded outcome; asking the rail",
                            system(),
                            now,
                        );
                        txn.apply(TransactionTransition::MarkUnknown(cause))
                            .map(|c| Some(Some(c)))
                    }
                    None => {
                        txn.submitting_since = Some(now);
                        txn.submit_attempts += 1;
                        Ok(Some(None))
                    }
                }
            })
            .await?;
        let Some(transaction) = claimed else {
            let current = self.store.transaction(transaction_id).await?;
            let busy = current.is_some_and(|t| t.status == TransactionStatus::Pending && t.submitting_since.is_some());
            return Ok(if busy { Handled::Later } else { Handled::Done });
        };
        if transaction.status != TransactionStatus::Pending {
            return Ok(Handled::Done); // just marked unknown
        }
        let Some(adapter) = self.rails.get(&transaction.rail).cloned() else {
            let cause = Cause::new(
                "rail_unavailable",
                format!("No adapter serves rail {}", transaction.rail),
                system(),
                self.now(),
            );
            self.record_submit_outcome(transaction, Err(RailError::Permanent(cause.message.clone())))
                .await?;
            return Ok(Handled::Done);
        };
        let instruction = Instruction {
            transaction_id: transaction.id.clone(),
            operation_id: transaction.operation_id.clone(),
            customer_id: transaction.customer_id.clone(),
            amount: transaction.amount.minor_units(),
            currency: transaction.currency.code().to_owned(),
            beneficiary: transaction.beneficiary.clone(),
            account: transaction.account.clone(),
            reference: transaction.reference.clone(),
            environment: transaction.environment,
        };
        let result = adapter.submit(&instruction).await;
        self.record_submit_outcome(transaction, result).await
    }

    /// Records the rail's answer on the transaction as the submit claim left it.
    async fn record_submit_outcome(
        &self,
        claimed: Transaction,
        result: Result<Ack, RailError>,
    ) -> Result<Handled, DomainError> {
        let retry_after = std::sync::Mutex::new(None);
        let transaction_id = claimed.id.clone();
        self.update_transaction_from(&transaction_id, Some(claimed), |txn, now| {
            if txn.status != TransactionStatus::Pending || txn.submitting_since.is_none() {
                return Ok(None);
            }
            txn.submitting_since = None;
            let rail = rail_actor(&txn.rail);
            let transition = match &result {
                Ok(Ack::Accepted { rail_reference }) => {
                    txn.next_poll_at = Some(now + poll_backoff(0));
                    let cause = Cause::new("accepted_by_rail", format!("Accepted by {} as {rail_reference}", txn.rail), rail, now);
                    TransactionTransition::Submit { rail_reference: rail_reference.clone(), cause }
                }
                Ok(Ack::Rejected { code, reason }) => TransactionTransition::Fail(Cause::new(&format!("rail_rejected_{code}"), reason.clone(), rail, now)),
                Err(RailError::Timeout) => {
                    txn.next_poll_at = Some(now + poll_backoff(0));
                    TransactionTransition::MarkUnknown(Cause::new("rail_timeout", "The rail did not answer in time; its status will be asked", rail, now))
                }
                Err(RailError::Transient(reason)) if txn.submit_attempts < MAX_SUBMIT_ATTEMPTS => {
                    let wait = submit_backoff(txn.submit_attempts);
                    *retry_after.lock().unwrap_or_else(|e| e.into_inner()) = Some(wait);
                    tracing::info!(transaction = %txn.id, attempt = txn.submit_attempts, %reason, "transient rail error; retrying");
                    return Ok(Some(None));
                }
                Err(RailError::Transient(reason)) => TransactionTransition::FlagForAttention(Cause::new(
                    "submit_retries_exhausted",
                    format!("{} submit attempts failed; last: {reason}", txn.submit_attempts),
                    system(),
                    now,
                )),
                Err(RailError::Permanent(reason)) => TransactionTransition::FlagForAttention(Cause::new("rail_permanent_error", reason.clone(), rail, now)),
            };
            txn.apply(transition).map(|c| Some(Some(c)))
        })
        .await?;
        if let Some(wait) = retry_after.into_inner().unwrap_or_else(|e| e.into_inner()) {
            self.enqueue(QueueTask::SubmitTransaction { transaction_id }, wait)
                .await?;
        }
        Ok(Handled::Done)
    }

    // ---- timer → status poll ------------------------------------------------------------

    /// Asks the rails about the transactions whose poll is due (up to [`POLL_BATCH`], several
    /// at a time); returns how many it asked.
    pub async fn poll_rails(&self) -> Result<usize, DomainError> {
        let due = self.store.transactions_due(self.now(), POLL_BATCH).await?;
        let asked: Vec<bool> = futures_util::stream::iter(due)
            .map(|transaction| async move { self.poll(&transaction).await })
            .buffer_unordered(POLL_CONCURRENCY)
            .collect()
            .await;
        Ok(asked.into_iter().filter(|asked| *asked).count())
    }

    /// Asks the transaction's rail about it and records the answer; false when no adapter
    /// serves the rail (any more), in which case the poll waits, so that such transactions
    /// do not fill every round ahead of the others.
    async fn poll(&self, transaction: &Transaction) -> bool {
        let Some(adapter) = self.rails.get(&transaction.rail).cloned() else {
            let deferred = self
                .update_transaction_from(&transaction.id, Some(transaction.clone()), |txn, now| {
                    Ok(txn.next_poll_at.is_some().then(|| {
                        txn.next_poll_at = Some(now + UNSERVED_RAIL_WAIT);
                        None
                    }))
                })
                .await;
            if let Err(error) = deferred {
                tracing::warn!(transaction = %transaction.id, %error, "could not defer the poll of an unserved rail");
            }
            return false;
        };
        let state = adapter
            .status(&transaction.id, transaction.rail_reference.as_deref())
            .await;
        let copy = Some(transaction.clone());
        if let Err(error) = self.apply_rail_state(&transaction.id, copy, state, None).await {
            tracing::warn!(transaction = %transaction.id, %error, "could not record a status answer");
        }
        true
    }

    /// Records what a rail says of a transaction, from a poll (`report` = None) or a report;
    /// `copy` is the transaction as the poll found it.
    pub(crate) async fn apply_rail_state(
        &self,
        transaction_id: &str,
        copy: Option<Transaction>,
        state: Result<RailState, RailError>,
        report: Option<&str>,
    ) -> Result<Option<Transaction>, DomainError> {
        self.update_transaction_from(transaction_id, copy, |txn, now| {
            use TransactionStatus::*;
            let rail = rail_actor(&txn.rail);
            let source = report.map_or("status inquiry".to_string(), |r| format!("rail report {r}"));
            let waiting = matches!(txn.status, Submitted | Unknown);
            let transition = match (&state, txn.status) {
                (Ok(RailState::Confirmed { rail_reference }), Submitted | Unknown) => {
                    txn.rail_reference.get_or_insert_with(|| rail_reference.clone());
                    TransactionTransition::Confirm(Cause::new(
                        "confirmed_by_rail",
                        format!("Confirmed by {source}"),
                        rail,
                        now,
                    ))
                }
                (Ok(RailState::Failed { code, reason }), Submitted | Unknown) => {
                    TransactionTransition::Fail(Cause::new(
                        &format!("rail_failed_{code}"),
                        format!("{reason} ({source})"),
                        rail,
                        now,
                    ))
                }
                (Ok(RailState::Returned { code, reason }), Confirmed) => TransactionTransition::Return(Cause::new(
                    &format!("rail_returned_{code}"),
                    format!("{reason} ({source})"),
                    rail,
                    now,
                )),
                (Ok(RailState::NotFound), Unknown) if txn.status_polls + 1 >= MAX_NOT_FOUND_POLLS => {
                    TransactionTransition::FlagForAttention(Cause::new(
                        "rail_has_no_record",
                        format!("The rail reported no such transaction {} times", txn.status_polls + 1),
                        rail,
                        now,
                    ))
                }
                _ if waiting => {
                    // Nothing final yet: ask again later.
                    txn.status_polls += 1;
                    txn.next_poll_at = Some(now + poll_backoff(txn.status_polls));
                    return Ok(Some(None));
                }
                _ if txn.status == Confirmed && txn.next_poll_at.is_some() => {
                    txn.status_polls += 1;
                    txn.next_poll_at = next_return_check(txn.cause.at, now);
                    return Ok(Some(None));
                }
                _ => return Ok(None),
            };
            txn.status_polls += 1;
            let change = txn.apply(transition)?;
            // Confirmed money can still come back: keep asking for a while.
            txn.next_poll_at = match txn.status {
                Confirmed => next_return_check(now, now),
                _ => None,
            };
            Ok(Some(Some(change)))
        })
        .await
    }

    // ---- stream → webhook dispatch ------------------------------------------------------

    pub async fn handle_webhook_events(&self, events: &[Event]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        if let (Some(bus), Some(first)) = (&self.bus, events.first()) {
            if let Err(error) = bus.publish(events).await {
                tracing::warn!(%error, "publishing to the event bus failed; the batch comes again");
                outcome.failed.push(first.id.clone());
                return outcome;
            }
        }
        // A batch mostly holds one customer's events: its endpoints are looked up once.
        let mut endpoints_of: HashMap<&str, Vec<WebhookEndpoint>> = HashMap::new();
        for event in events {
            let dispatched = async {
                let endpoints = match endpoints_of.entry(&event.customer_id) {
                    Entry::Occupied(found) => found.into_mut(),
                    Entry::Vacant(slot) => {
                        slot.insert(self.store.webhook_endpoints_for(Some(&event.customer_id)).await?)
                    }
                };
                self.dispatch_to(event, endpoints, None).await
            };
            if let Err(error) = dispatched.await {
                tracing::warn!(event = %event.id, %error, "webhook dispatch failed; the event comes again");
                outcome.failed.push(event.id.clone());
                break;
            }
        }
        outcome
    }

    /// Makes one delivery per interested endpoint and queues it. `fresh` gives new delivery
    /// ids (a resend); otherwise ids derive from event and endpoint, so a second dispatch of
    /// the same event finds its deliveries made and only queues them again.
    pub(crate) async fn dispatch_to(
        &self,
        event: &Event,
        endpoints: &[WebhookEndpoint],
        fresh: Option<&str>,
    ) -> Result<Vec<Delivery>, DomainError> {
        let mut made = vec![];
        for endpoint in endpoints {
            if !endpoint.wants(&event.kind, &event.customer_id)
                || fresh.is_some_and(|only| only != "*" && only != endpoint.id)
            {
                continue;
            }
            let now = self.now();
            let id = match fresh {
                Some(_) => self.ids.new_id(IdKind::Event).replacen("evt_", "whd_", 1),
                None => delivery_id(&event.id, &endpoint.id),
            };
            let delivery = Delivery {
                id,
                object: "webhook_delivery".into(),
                event_id: event.id.clone(),
                endpoint_id: endpoint.id.clone(),
                url: endpoint.url.clone(),
                status: DeliveryStatus::Pending,
                attempts: vec![],
                next_attempt_at: Some(now),
                created_at: now,
                version: 1,
            };
            let mut changes = Changeset::default();
            changes.push(Write::InsertDelivery(delivery.clone()));
            match self.store.commit(changes).await {
                Ok(()) | Err(StoreError::Conflict) => {}
                Err(other) => return Err(other.into()),
            }
            let task = QueueTask::SendWebhook {
                delivery_id: delivery.id.clone(),
            };
            self.enqueue(task, Duration::ZERO).await?;
            made.push(delivery);
        }
        Ok(made)
    }

    // ---- queue → webhook send -----------------------------------------------------------

    /// Sends a batch side by side: a receiver that hangs holds up its own message only. A
    /// delivery named twice in one batch is sent once (the first message stands for both).
    pub async fn handle_webhook_sends(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut deliveries = std::collections::HashSet::new();
        let mut sends = vec![];
        let mut unreadable = vec![];
        for message in messages {
            match QueueTask::parse(&message.body) {
                Ok(QueueTask::SendWebhook { delivery_id }) if deliveries.insert(delivery_id.clone()) => {
                    sends.push((message, delivery_id))
                }
                Ok(QueueTask::SendWebhook { .. }) => {}
                Ok(other) => {
                    tracing::error!(message = %message.id, task = ?other, "a task of another queue dropped from the webhooks queue")
                }
                Err(error) => {
                    // Kept for its dead-letter queue, where a deployment that reads it can redrive it.
                    tracing::error!(message = %message.id, %error, "unreadable webhook message left for the dead-letter queue");
                    unreadable.push(message.id.clone());
                }
            }
        }
        let sent = join_all(sends.into_iter().map(|(message, delivery_id)| async move {
            self.send_webhook(&delivery_id).await.map_err(|error| {
                tracing::warn!(message = %message.id, %error, "webhook send failed; the message comes again");
                message.id.clone()
            })
        }))
        .await;
        BatchOutcome {
            failed: sent.into_iter().filter_map(Result::err).chain(unreadable).collect(),
        }
    }

    async fn send_webhook(&self, delivery_id: &str) -> Result<(), DomainError> {
        let Some(delivery) = self.store.delivery(delivery_id).await? else {
            return Ok(());
        };
        if delivery.status != DeliveryStatus::Pending {
            return Ok(());
        }
        let now = self.now();
        if let Some(due) = delivery.next_attempt_at.filter(|due| *due > now) {
            // Not yet (a duplicate message, or a wait longer than a queue can hold).
            let task = QueueTask::SendWebhook {
                delivery_id: delivery_id.to_owned(),
            };
            self.enqueue(task, due - now).await?;
            return Ok(());
        }
        let event = self
            .store
            .event(&delivery.event_id)
            .await?
            .ok_or_else(|| DomainError::Store(format!("event {} missing", delivery.event_id)))?;
        let endpoint = self.store.webhook_endpoint(&delivery.endpoint_id).await?;
        let mut secrets = vec![];
        for secret in endpoint.iter().flat_map(|e| e.live_secrets(now)) {
            if let Some(value) = self.secrets.secret(&secret.secret_name).await? {
                secrets.push(value);
            }
        }
        let body = serde_json::to_vec(&event).expect("serializes");
        let started = std::time::Instant::now();
        let answer = match endpoint.as_ref().map(|e| e.status.as_str()) {
            Some("enabled") if !secrets.is_empty() => {
                let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
                let header = signature::header(&refs, now.unix_timestamp(), &body);
                self.webhooks.post(&delivery.url, &header, body).await
            }
            _ => Err("the endpoint was disabled or deleted".to_string()),
        };
        let attempt = Attempt {
            at: now,
            status_code: answer.as_ref().ok().copied(),
            error: answer.as_ref().err().cloned(),
            duration_ms: started.elapsed().as_millis() as u64,
        };
        let delivered = matches!(answer, Ok(200..=299));
        let mut updated = delivery.clone();
        updated.attempts.push(attempt);
        updated.version += 1;
        if delivered {
            updated.status = DeliveryStatus::Delivered;
            updated.next_attempt_at = None;
        } else {
            match webhook::retry_delay(updated.attempts.len() - 1, jitter()) {
                Some(wait) => updated.next_attempt_at = Some(now + wait),
                None => {
                    updated.status = DeliveryStatus::Failed;
                    updated.next_attempt_at = None;
                }
            }
        }
        let mut changes = Changeset::default();
        changes.push(Write::UpdateDelivery(updated.clone()));
        match self.store.commit(changes).await {
            Ok(()) => {}
            // Another worker recorded this attempt first; its record stands.
            Err(StoreError::Conflict) => return Ok(()),
            Err(other) => return Err(other.into()),
        }
        if let Some(due) = updated.next_attempt_at {
            let task = QueueTask::SendWebhook {
                delivery_id: delivery_id.to_owned(),
            };
            self.enqueue(task, due - now).await?;
        }
        Ok(())
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
    use crate::operation::tests::operation_in;
    use crate::transaction::tests::transaction;

    fn item() -> crate::operation::Item {
        let txn = transaction();
        crate::operation::Item {
            id: "itm_1".into(),
            beneficiary: txn.beneficiary,
            destination: crate::operation::Destination {
                rail: txn.rail,
                account: txn.account,
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
        assert_eq!(transaction_id_of("itm_01abc"), "txn_01abc");
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

    #[test]
    fn a_confirmed_transaction_is_checked_for_returns_four_times_then_left_alone() {
        let confirmed = OffsetDateTime::UNIX_EPOCH;
        let mut now = confirmed;
        let mut checks = vec![];
        while let Some(check) = next_return_check(confirmed, now) {
            checks.push(check - confirmed);
            now = check;
        }
        assert_eq!(checks, RETURN_CHECKS);
        // A late poll skips the checks already overdue instead of running them back to back.
        assert_eq!(
            next_return_check(confirmed, confirmed + Duration::hours(2)),
            Some(confirmed + Duration::hours(24))
        );
    }

    #[test]
    fn delivery_ids_are_stable_per_event_and_endpoint() {
        assert_eq!(delivery_id("evt_1", "whe_1"), delivery_id("evt_1", "whe_1"));
        assert_ne!(delivery_id("evt_1", "whe_1"), delivery_id("evt_1", "whe_2"));
        assert!(delivery_id("evt_1", "whe_1").starts_with("whd_"));
    }
}
