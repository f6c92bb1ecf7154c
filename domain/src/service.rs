//! The service: the use cases' shared state (the ports they talk to) and what every use case
//! needs (the clock, pages of lists, committing a create with its idempotency record). The use
//! cases themselves live with their module: `access`, `approvals`, `operations`,
//! `transactions`, `webhooks`, `schedules`.

use crate::access::{Environment, KeyHasher, Principal, RateLimit};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{CustomerId, IdGenerator};
use crate::operations::{Operation, StatusChange};
use crate::ports::{
    AuditEntry, Changeset, Clock, EventBus, Listed, Queue, Secrets, Store, StoreError, WebhookSender, Write,
};
use crate::rail::Rails;
use crate::schedules::ScheduleTimers;
use crate::transactions::RailSecret;
use crate::webhooks::TargetPolicy;
use std::sync::Arc;
use time::OffsetDateTime;

/// What the use cases run on: the ports, built once by the composition root (local mode, or a
/// Lambda function's start).
pub struct Service {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    pub hasher: KeyHasher,
    pub environment: Environment,
    pub rails: Rails,
    pub queue: Arc<dyn Queue>,
    pub secrets: Arc<dyn Secrets>,
    pub webhooks: Arc<dyn WebhookSender>,
    /// Where the secret that signs rail reports comes from.
    pub rail_secret: RailSecret,
    /// Which webhook URLs may be registered (the sender enforces the same at connection time).
    pub webhook_targets: TargetPolicy,
    /// Where events also go for the PSP's own systems (EventBridge); none in local mode.
    pub bus: Option<Arc<dyn EventBus>>,
    /// Requests per second each API key may make; none: unlimited.
    pub rate_limit: Option<RateLimit>,
    /// Counts the deliveries to each webhook endpoint with a rate limit, across every
    /// instance, a second at a time.
    pub webhook_pace: Arc<dyn crate::ports::RateLimiter>,
    /// The cloud's schedule timer (EventBridge Scheduler); none in local mode, where the
    /// store's due index is the timer.
    pub timers: Option<Arc<dyn ScheduleTimers>>,
    /// How long the desk's items may wait before they are past due.
    pub desk_sla: crate::desk::DeskSla,
    /// Operator signals (CloudWatch metrics on AWS, the log locally).
    pub metrics: Arc<dyn crate::ports::Metrics>,
    /// Where uploaded files' bytes are kept (S3 on AWS, the data directory locally).
    pub blobs: Arc<dyn crate::files::Blobs>,
}

/// A page of a list: up to the limit asked, and whether more follow.
#[derive(Debug)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    /// Where the next page starts when this one stopped short: a list filtered by what is
    /// not a key reads a bounded number of entries a request, so a page may hold fewer items
    /// than asked (none, even) with more after them.
    pub next_starting_after: Option<String>,
}

impl<T> Page<T> {
    /// Every item, in one page.
    pub fn all(data: Vec<T>) -> Page<T> {
        Page {
            data,
            has_more: false,
            next_starting_after: None,
        }
    }

    pub fn empty() -> Page<T> {
        Page::all(vec![])
    }

    /// A page from up to `limit + 1` items fetched: the extra one only says there is more.
    pub fn of(mut data: Vec<T>, limit: usize) -> Page<T> {
        let has_more = data.len() > limit;
        data.truncate(limit);
        Page {
            data,
            has_more,
            next_starting_after: None,
        }
    }

    /// A page from up to `limit + 1` items a store listed, which may have stopped reading
    /// before it found them all.
    pub fn of_listed(listed: Listed<T>, limit: usize) -> Page<T> {
        match listed.read_up_to {
            Some(read_up_to) if listed.items.len() <= limit => Page {
                data: listed.items,
                has_more: true,
                next_starting_after: Some(read_up_to),
            },
            _ => Page::of(listed.items, limit),
        }
    }
}

/// A resource made with a secret that is shown once, in the answer to its creation, and never
/// again (an API key, a webhook endpoint's signing secret).
#[derive(Debug)]
pub struct Issued<T> {
    pub resource: T,
    pub secret: String,
}

/// The customer filter a list runs with: a customer's key only ever sees its own customer, and
/// asking for another one finds nothing (`None`).
pub(crate) fn customer_scope(principal: &Principal, asked: Option<CustomerId>) -> Option<Option<CustomerId>> {
    match (&principal.key.customer_id, asked) {
        (Some(own), Some(asked)) if *own != asked => None,
        (Some(own), _) => Some(Some(own.clone())),
        (None, asked) => Some(asked),
    }
}

impl Service {
    pub(crate) fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// The audit entry and the event of an operation's status change, for one changeset.
    pub(crate) fn record_operation_change(&self, changes: &mut Changeset, operation: &Operation, change: StatusChange) {
        let entry = AuditEntry::new("operation", &operation.id, "status_changed", change.cause)
            .moving(change.from.map(|s| s.as_str()), change.to.as_str());
        changes.push(Write::Audit(entry.of_operation(&operation.id)));
        changes.push(Write::Event(Event::of_operation(
            crate::ids::EventId::new(&*self.ids),
            change.to.as_str(),
            operation,
        )));
        if operation.metadata.contains_key(crate::files::STATUS_REPORTED) {
            if let Some(event) =
                crate::files::pain002::status_report_event(crate::ids::EventId::new(&*self.ids), operation)
            {
                changes.push(Write::Event(event));
            }
        }
    }

    /// Commits `changes`, completing `ticket` (if any) with what was `made` in the same
    /// transaction, so an effect and its idempotency record land together.
    pub(crate) async fn commit_created<T>(
        &self,
        mut changes: Changeset,
        ticket: Option<Ticket<T>>,
        made: &T,
    ) -> Result<(), DomainError> {
        if let Some(ticket) = ticket {
            changes.push(ticket.complete(made));
        }
        self.commit(changes).await
    }

    /// Reads, decides and commits again while the commit loses a race with a concurrent
    /// change, at most `attempts` times, then answers `busy()`. Each try reads afresh, so it
    /// decides on what the winner wrote; a try that finds nothing to write answers at once.
    pub(crate) async fn retry_on_conflict<T, Try>(
        &self,
        attempts: usize,
        busy: impl FnOnce() -> Result<T, DomainError>,
        mut attempt: impl FnMut() -> Try,
    ) -> Result<T, DomainError>
    where
        Try: std::future::Future<Output = Result<(T, Changeset), DomainError>>,
    {
        for _ in 0..attempts {
            let (value, changes) = attempt().await?;
            if changes.writes.is_empty() {
                return Ok(value);
            }
            match self.store.commit(changes).await {
                Ok(()) => return Ok(value),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        busy()
    }

    /// Commits `changes`; a lost race with a concurrent change is a conflict to retry.
    pub(crate) async fn commit(&self, changes: Changeset) -> Result<(), DomainError> {
        self.store.commit(changes).await.map_err(|e| self.commit_error(e))
    }

    /// A store's refusal of a commit, as the caller is told it.
    pub(crate) fn commit_error(&self, error: StoreError) -> DomainError {
        match error {
            StoreError::Conflict => {
                DomainError::invalid_state("conflict", "A concurrent request changed this resource; retry.")
            }
            other => other.into(),
        }
    }
}

/// What one consumer did with one item.
pub(crate) enum Handled {
    Done,
    /// Leave the item for a later delivery (e.g. another worker holds it right now).
    Later,
}

pub(crate) fn jitter() -> f64 {
    rand::random::<f64>()
}
