//! Ports: what the use cases need from the outside world. `ops-infra` implements each one
//! twice (embedded for local mode, AWS for the cloud) and runs one conformance suite on both.

use crate::access::{AccessStore, ApiKey, Customer, User};
use crate::approvals::{Workflow, WorkflowStore};
use crate::cause::Cause;
use crate::desk::{DeskStore, WorkItem};
use crate::event::Event;
use crate::files::{File, FileStore};
use crate::history::HistoryStore;
use crate::idempotency::{IdempotencyStore, StoredResponse};
use crate::ledger::LedgerStore;
use crate::operations::{Operation, OperationStore};
use crate::reconciliations::ReconciliationStore;
use crate::schedules::{Occurrence, Schedule, ScheduleStore};
use crate::transactions::{Transaction, TransactionStore};
use crate::webhooks::{Delivery, WebhookEndpoint, WebhookStore};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

mod queue_task;
mod secrets;
pub use queue_task::{QueueTask, UnknownTask};
pub use secrets::{Secrets, StoredSecret};

pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// What a store's list read found, newest first, and, when it stopped reading before
/// finding as many as asked (a filter that is not a key reads at most a bounded number of
/// entries), the id it read up to: the next read starts after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub read_up_to: Option<String>,
}

impl<T> Listed<T> {
    /// Everything there was to find.
    pub fn complete(items: Vec<T>) -> Listed<T> {
        Listed {
            items,
            read_up_to: None,
        }
    }
}

/// One audit entry: a state change (or a recorded decision) with its cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub entity_type: String,
    pub entity_id: String,
    /// The operation the entry belongs to, so its history is one lookup.
    pub operation_id: Option<String>,
    /// `created`, `status_changed`, `approval_recorded`, `updated`, `rotated`, `revoked` …
    pub action: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// What the change made, where a reader needs more than its states: a workflow's or an
    /// approval floor's rules as saved in that version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl AuditEntry {
    pub fn new(entity_type: &str, entity_id: &str, action: &str, cause: Cause) -> AuditEntry {
        AuditEntry {
            entity_type: entity_type.into(),
            entity_id: entity_id.into(),
            operation_id: None,
            action: action.into(),
            from: None,
            to: None,
            at: cause.at,
            cause,
            details: None,
        }
    }

    /// An entry about an operation (or one of its transactions): part of its history.
    pub fn of_operation(mut self, operation_id: &str) -> AuditEntry {
        self.operation_id = Some(operation_id.into());
        self
    }

    pub fn with_details(mut self, details: serde_json::Value) -> AuditEntry {
        self.details = Some(details);
        self
    }

    pub fn moving(mut self, from: Option<&str>, to: &str) -> AuditEntry {
        self.from = from.map(Into::into);
        self.to = Some(to.into());
        self
    }
}

/// One write of a [`Changeset`]. Conditions are part of the write so a store can check them
/// inside its transaction (SQLite) or as condition expressions (DynamoDB).
#[derive(Debug, Clone)]
pub enum Write {
    InsertCustomer(Customer),
    /// Replace the stored customer if its version is still `customer.version - 1`.
    UpdateCustomer(Customer),
    InsertUser(User),
    /// Replace the stored user if its version is still `user.version - 1` (its name, roles or
    /// status changed).
    UpdateUser(User),
    /// Insert (version 1; the secret's hash not another key's) or replace if the stored
    /// version is still `key.version - 1`.
    PutApiKey(ApiKey),
    InsertOperation(Operation),
    /// Replace the stored operation if its version is still `operation.version - 1`.
    UpdateOperation(Operation),
    /// Insert (version 1) or replace the stored definition if its version is still
    /// `workflow.version - 1`.
    PutWorkflow(Workflow),
    InsertTransaction(Transaction),
    /// Replace the stored transaction if its version is still `transaction.version - 1`.
    UpdateTransaction(Transaction),
    /// Appends to the event log, which is also the change stream.
    Event(Event),
    /// Insert (version 1) or replace if the stored version is still `endpoint.version - 1`.
    PutWebhookEndpoint(WebhookEndpoint),
    /// Insert (version 1) or replace if the stored version is still `roster.version - 1`.
    PutEndpointRoster(crate::webhooks::EndpointRoster),
    /// Insert; a delivery of the same id already stored is a conflict.
    InsertDelivery(Delivery),
    /// Replace the stored delivery if its version is still `delivery.version - 1`.
    UpdateDelivery(Delivery),
    Audit(AuditEntry),
    /// Insert (version 1) or replace if the stored version is still `schedule.version - 1`.
    PutSchedule(Schedule),
    /// Insert; an occurrence of the same schedule and time already stored is a conflict.
    InsertOccurrence(Occurrence),
    /// Insert (version 1) or replace if the stored version is still `health.version - 1`.
    PutEndpointHealth(crate::webhooks::EndpointHealth),
    /// Insert (version 1) or replace if the stored version is still `line.version - 1`.
    PutDeliveryLine(crate::webhooks::DeliveryLine),
    /// A backfilled occurrence: inserted, or replacing a record of one that made nothing
    /// (`missed`, `skipped`); one already `created` fails the changeset.
    BackfillOccurrence(Occurrence),
    /// Insert; a second account of the same holder and currency is a conflict.
    InsertAccount(crate::ledger::Account),
    /// Insert; a movement of the same id already stored is a conflict.
    InsertMovement(crate::ledger::Movement),
    /// Replace the stored movement if its version is still `movement.version - 1`.
    UpdateMovement(crate::ledger::Movement),
    /// Adds to an account's balances; a conflict if the account is missing, or if the change
    /// is guarded and would take `available` below zero.
    ChangeBalances(crate::ledger::AccountChange),
    /// Insert; a conflict if an item of the same id exists, or an item of the same queue and
    /// subject that is not done.
    InsertWorkItem(WorkItem),
    /// Replace the stored item if its version is still `item.version - 1`. Inserting an item
    /// and closing one also count it on the board (its queue's open items).
    UpdateWorkItem(WorkItem),
    /// Puts an operation's board entry (insert at version 1, else replace if its version is
    /// still one less) and moves its count and amount from the column it leaves to the one it
    /// enters, on its customer's board and the platform's.
    MoveOnBoard(crate::desk::board::BoardMove),
    /// Insert (version 1) or replace if the stored version is still `limits.version - 1`.
    PutPayoutLimits(crate::limits::PayoutLimits),
    /// Sets a limit's counter to `after` if it still holds `before` (a counter never written
    /// holds 0); otherwise a conflict.
    UseLimit(crate::limits::LimitUse),
    /// Insert or replace: where a customer paid a beneficiary last.
    RememberPayee(crate::limits::KnownPayee),
    /// Insert; with `unique_bytes`, a file of the same customer and bytes is a conflict.
    InsertFile {
        file: File,
        unique_bytes: bool,
    },
    /// Replace the stored file if its version is still `file.version - 1`.
    UpdateFile(File),
    /// Insert; a reconciliation of the same id (the same statement) is a conflict.
    InsertReconciliation(crate::reconciliations::Reconciliation),
    /// Insert (version 1) or replace a rail's rules if the stored version is still
    /// `rules.version - 1`.
    PutReconciliationRules(crate::reconciliations::ReconciliationRules),
    /// Insert (version 1) or replace a calendar if the stored version is still
    /// `calendar.version - 1`.
    PutCalendar(crate::calendars::Calendar),
    /// Versioned: a file rail's bank file (version 1 creates it).
    PutBankFile(crate::transactions::BankFile),
    /// Insert (version 1) or replace a rail's cut-offs if the stored version is still
    /// `cutoffs.version - 1`.
    PutRailCutoffs(crate::calendars::RailCutoffs),
    /// How far a return check's sweep got (the last wins: one beside it only asks again).
    PutReturnSweep(crate::transactions::ReturnSweep),
    /// Adds a count to its period's counter (created at zero).
    Tally(crate::tallies::Tally),
    /// Completes a claimed idempotency key with the response the client was sent.
    CompleteIdempotency {
        scope: String,
        key: String,
        response: StoredResponse,
    },
    /// Writes an idempotency key's record, completed with the response, for a request that did
    /// not claim it first: only if the key is free (no record, one past its retention, or a
    /// claim whose request died); another request's record there is a conflict.
    TakeIdempotency {
        claim: crate::idempotency::IdempotencyClaim,
        response: StoredResponse,
    },
}

/// Writes that land together or not at all: entity, audit entries and the idempotency record.
#[derive(Debug, Clone, Default)]
pub struct Changeset {
    pub writes: Vec<Write>,
}

impl Changeset {
    pub fn push(&mut self, write: Write) -> &mut Self {
        // One count a counter: a store may not update one item twice in one transaction.
        if let Write::Tally(tally) = &write {
            let same = self.writes.iter_mut().find_map(|w| match w {
                Write::Tally(same) if same.counts_with(tally) => Some(same),
                _ => None,
            });
            if let Some(same) = same {
                same.count += tally.count;
                return self;
            }
        }
        self.writes.push(write);
        self
    }
}

impl Extend<Write> for Changeset {
    fn extend<T: IntoIterator<Item = Write>>(&mut self, writes: T) {
        for write in writes {
            self.push(write);
        }
    }
}

/// What an adapter's failure came from (an SDK error, a SQLite error …), kept for the log.
pub type ErrorSource = std::sync::Arc<dyn std::error::Error + Send + Sync>;

fn source(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ErrorSource {
    ErrorSource::from(error.into())
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A write's condition failed (a concurrent change won); nothing was written.
    #[error("a concurrent change won")]
    Conflict,
    /// The store could not be reached, or failed; nothing was written.
    #[error("the store is unavailable: {0}")]
    Unavailable(#[source] ErrorSource),
}

impl StoreError {
    pub fn unavailable(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
        StoreError::Unavailable(source(error))
    }
}

/// A port's failure, with its source kept for the log.
macro_rules! port_error {
    ($(#[$doc:meta])* $name:ident, $message:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone, thiserror::Error)]
        #[error($message)]
        pub struct $name(#[source] pub ErrorSource);

        impl $name {
            pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> $name {
                $name(source(error))
            }
        }
    };
}

port_error!(
    /// A queue could not take or give a message.
    QueueError,
    "the queue is unavailable: {0}"
);
port_error!(
    /// The secrets store could not keep or give a secret.
    SecretsError,
    "the secrets store is unavailable: {0}"
);
port_error!(
    /// The cloud's timer (EventBridge Scheduler) did not take a change.
    TimerError,
    "the schedule timer is unavailable: {0}"
);
port_error!(
    /// The blob store (S3, the data directory) did not keep or give bytes.
    BlobError,
    "the blob store is unavailable: {0}"
);
port_error!(
    /// The event bus did not take a batch of events.
    BusError,
    "the event bus is unavailable: {0}"
);

/// Commits a [`Changeset`]. What is promised is what both stores keep:
///
/// - **The change is all or nothing.** Every write that decides it (the entity's versioned or
///   conditional write, a balance's guard, a claim) lands with the others, or none does, and a
///   lost condition is [`StoreError::Conflict`] with nothing written.
/// - **What derives from it is never lost nor doubled.** Its events and audit entries, and a
///   create's idempotency record, land with it in SQLite's one transaction. On DynamoDB a
///   changeset of one entity may be written entity first, carrying its events and entries in
///   its own `outbox` (written right after it, or by the stream's outbox consumer if its writer
///   dies in between), and a create's completed idempotency record may go before its entity
///   (a key whose entity never lands is in use until its lock passes, then free). So a reader
///   may see an entity a moment before its events, never an event without its entity, and
///   each event and entry is written once (its key is fixed before the first write).
#[async_trait]
pub trait Commit: Send + Sync {
    async fn commit(&self, changes: Changeset) -> Result<(), StoreError>;

    /// Commits each changeset on its own terms (each all or nothing; a conflict in one leaves
    /// the others), as cheaply as the store can: side by side here; SQLite makes them one
    /// transaction, so one sync to disk.
    async fn commit_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        futures_util::future::join_all(changesets.into_iter().map(|changes| self.commit(changes))).await
    }

    /// Commits what a stream consumer derives from events already stored (the board's
    /// counts, work items), as [`commit`](Self::commit) does but, where the store can, without
    /// waiting for the disk. Lost in a power cut, it is derived again: the consumer's
    /// checkpoint, written after it, is lost with it. Anything later done with it (a claim,
    /// a webhook delivery) is a full commit, which makes it durable first, as SQLite's log
    /// keeps commits in order. DynamoDB makes every write durable: there it is a commit.
    async fn commit_derived(&self, changes: Changeset) -> Result<(), StoreError> {
        self.commit(changes).await
    }

    /// Commits derived changesets as [`commit_derived`](Self::commit_derived) does, each on
    /// its own terms, in order: one after another here; SQLite makes them one transaction, so
    /// the pages they share are written once.
    async fn commit_derived_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        let mut outcomes = Vec::with_capacity(changesets.len());
        for changes in changesets {
            outcomes.push(self.commit_derived(changes).await);
        }
        outcomes
    }
}

/// The whole store: each module's narrow port (the reads its use cases need, declared in its
/// folder) and the one way to write. A store adapter implements each; a use case names only
/// the ports it reads.
pub trait Store:
    Commit
    + AccessStore
    + WorkflowStore
    + OperationStore
    + TransactionStore
    + WebhookStore
    + IdempotencyStore
    + ScheduleStore
    + LedgerStore
    + DeskStore
    + FileStore
    + ReconciliationStore
    + crate::calendars::CalendarStore
    + crate::transactions::BankFileStore
    + crate::tallies::TallyStore
    + crate::limits::LimitStore
    + HistoryStore
{
}

impl<T> Store for T where
    T: Commit
        + AccessStore
        + WorkflowStore
        + OperationStore
        + TransactionStore
        + WebhookStore
        + IdempotencyStore
        + ScheduleStore
        + LedgerStore
        + DeskStore
        + FileStore
        + ReconciliationStore
        + crate::calendars::CalendarStore
        + crate::transactions::BankFileStore
        + crate::tallies::TallyStore
        + crate::limits::LimitStore
        + HistoryStore
{
}

/// The queues between the pipeline's stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueName {
    /// Transactions to hand to their rail.
    Submissions,
    /// Webhook deliveries to attempt.
    Webhooks,
    /// Files to make operations of, a few chunks per message.
    Files,
}

impl QueueName {
    pub const ALL: [QueueName; 3] = [QueueName::Submissions, QueueName::Webhooks, QueueName::Files];

    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::Submissions => "submissions",
            QueueName::Webhooks => "webhooks",
            QueueName::Files => "files",
        }
    }
}

#[async_trait]
pub trait Queue: Send + Sync {
    /// Sends `body`, visible to consumers after `delay` (at most [`MAX_QUEUE_DELAY`]), in
    /// `lane`: whose work it is (a customer's; a webhook endpoint's for its sends). Lanes take
    /// turns: one lane's backlog does not hold back another's next message.
    async fn send(&self, queue: QueueName, lane: &str, body: String, delay: time::Duration) -> Result<(), QueueError>;

    /// Sends each `(lane, body)` as [`Queue::send`] does, due at once: together where the
    /// queue can (one write; SQS's batches of ten). All or some may have been sent on error;
    /// consumers take a message twice as they take any redelivery.
    async fn send_all(&self, queue: QueueName, messages: Vec<(String, String)>) -> Result<(), QueueError> {
        for (lane, body) in messages {
            self.send(queue, &lane, body, time::Duration::ZERO).await?;
        }
        Ok(())
    }
}

/// The longest a queue holds a message back (SQS's limit); longer waits are taken in hops.
pub const MAX_QUEUE_DELAY: time::Duration = time::Duration::minutes(15);

/// Receives before a queue moves a message to its dead-letter queue: the embedded queues'
/// limit and SQS's `maxReceiveCount` in `template.yaml`.
pub const MAX_RECEIVES: u32 = 5;

/// One message handed to a queue consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueMessage {
    pub id: String,
    pub body: String,
    pub receive_count: u32,
}

/// Which items of a batch failed and must come again (`ReportBatchItemFailures`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    pub failed: Vec<String>,
}

/// Counts requests in one-second windows (`rate_limit_error`), so one caller cannot
/// starve the others. A request is counted for a member (an API key) within its group (the
/// key's customer), against a limit for each; both counts live together, so one write checks
/// and counts both. Windows are unix seconds of the wall clock.
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Counts a request of `member` in `group` in the second `window` unless the member already
    /// made `member_limit` requests there or the group `group_limit`; says whether it was
    /// counted (admitted) and what room is left. A refused request counts for neither.
    async fn admit(&self, group: &str, member: &str, window: i64, limits: Limits) -> Result<Admission, StoreError>;
}

/// What counting one request said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub admitted: bool,
    /// Requests the member may still make in the window, after this one: the tighter of its
    /// own room and its group's (0 when refused).
    pub remaining: u32,
}

impl Admission {
    pub const REFUSED: Admission = Admission {
        admitted: false,
        remaining: 0,
    };

    /// Admitted, with the member's and the group's counts after this request.
    pub fn counted(member_count: u32, group_count: u32, limits: Limits) -> Admission {
        Admission {
            admitted: true,
            remaining: limits
                .member
                .saturating_sub(member_count)
                .min(limits.group.saturating_sub(group_count)),
        }
    }
}

/// The most requests a member and its group may make in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub member: u32,
    pub group: u32,
}

/// Sends one webhook request, or hands it back unsent when its receiver is held back.
#[async_trait]
pub trait WebhookSender: Send + Sync {
    async fn post(
        &self,
        url: &str,
        signature: &str,
        body: Vec<u8>,
    ) -> Result<crate::webhooks::Posted, crate::webhooks::HeldBack>;
}

/// An operator signal: a count of what just happened, or a level measured now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signal {
    pub name: &'static str,
    pub value: f64,
    pub unit: SignalUnit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalUnit {
    Count,
    Seconds,
}

impl Signal {
    pub fn count(name: &'static str, value: i64) -> Signal {
        Signal {
            name,
            value: value as f64,
            unit: SignalUnit::Count,
        }
    }
}

/// The operator signals the service records; `template.yaml` has an alarm on each.
pub mod signals {
    /// Operations and transactions in `needs_attention` (a level, each minute).
    pub const NEEDS_ATTENTION: &str = "NeedsAttention";
    /// Exceptions work items not done, and those past their due time (levels).
    pub const EXCEPTIONS_OPEN: &str = "ExceptionsOpen";
    pub const EXCEPTIONS_PAST_DUE: &str = "ExceptionsPastDue";
    /// Seconds since the oldest operation in progress (handed to the rails, not settled) was made.
    pub const OLDEST_IN_PROGRESS: &str = "OldestInProgressSeconds";
    /// Webhook deliveries whose retries ran out (a count as they happen).
    pub const WEBHOOK_DELIVERIES_FAILED: &str = "WebhookDeliveriesFailed";
    /// Messages that reached a dead-letter queue (a count as they are taken off it).
    pub const DEAD_LETTERS: &str = "DeadLetters";

    pub const ALL: [&str; 6] = [
        NEEDS_ATTENTION,
        EXCEPTIONS_OPEN,
        EXCEPTIONS_PAST_DUE,
        OLDEST_IN_PROGRESS,
        WEBHOOK_DELIVERIES_FAILED,
        DEAD_LETTERS,
    ];
}

/// Where operator signals go: CloudWatch metrics (Embedded Metric Format log lines) on AWS,
/// the log locally. Recording never fails a use case.
pub trait Metrics: Send + Sync {
    fn record(&self, signals: &[Signal]);
}

/// Where events go for the PSP's own systems besides webhooks (EventBridge in the cloud).
#[async_trait]
pub trait EventBus: Send + Sync {
    async fn publish(&self, events: &[Event]) -> Result<(), BusError>;
}
