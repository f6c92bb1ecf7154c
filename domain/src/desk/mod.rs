//! The operations desk: work items in two queues, `approvals` and `exceptions`,
//! opened and closed by the state changes themselves (the desk's stream consumer, or the
//! changeset of the change that made an exception), claimed, assigned and released by
//! operators.

pub mod board;
pub mod charts;
mod consumer;
mod exceptions;
mod use_cases;

pub use exceptions::ResolveWorkItem;
pub use use_cases::{AssignWorkItem, ClaimWorkItem, ASSIGNMENT_LEASE, CLAIM_LEASE};

use crate::access::{Environment, Role, Scope};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::{CustomerId, OperationId, WorkItemId};
use crate::ports::StoreError;
use async_trait::async_trait;
use board::{BoardCount, BoardEntry};
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    /// Operations waiting for a decision, routed to the role their requirement names.
    Approvals,
    /// What the machine could not settle on its own: for the platform's operators.
    Exceptions,
}

impl Queue {
    pub const ALL: [Queue; 2] = [Queue::Approvals, Queue::Exceptions];

    pub fn as_str(self) -> &'static str {
        match self {
            Queue::Approvals => "approvals",
            Queue::Exceptions => "exceptions",
        }
    }

    pub fn parse(name: &str) -> Option<Queue> {
        Queue::ALL.into_iter().find(|q| q.as_str() == name)
    }
}

/// How long an item of each queue may wait before it is past due: a deployment's setting
/// (`OPS_APPROVALS_SLA_MINUTES`, `OPS_EXCEPTIONS_SLA_MINUTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeskSla {
    pub approvals: Duration,
    pub exceptions: Duration,
}

impl Default for DeskSla {
    fn default() -> DeskSla {
        DeskSla {
            approvals: Duration::hours(4),
            exceptions: Duration::hours(1),
        }
    }
}

impl DeskSla {
    /// The longest SLA a queue may have: a week.
    pub const MAX_MINUTES: u32 = 7 * 24 * 60;

    /// From whole minutes, each between one and [`DeskSla::MAX_MINUTES`].
    pub fn from_minutes(approvals: u32, exceptions: u32) -> Result<DeskSla, String> {
        let minutes = |name: &str, value: u32| {
            if (1..=DeskSla::MAX_MINUTES).contains(&value) {
                Ok(Duration::minutes(value.into()))
            } else {
                Err(format!(
                    "the {name} SLA must be between 1 and {} minutes, not {value}",
                    DeskSla::MAX_MINUTES
                ))
            }
        };
        Ok(DeskSla {
            approvals: minutes("approvals", approvals)?,
            exceptions: minutes("exceptions", exceptions)?,
        })
    }

    pub fn of(&self, queue: Queue) -> Duration {
        match queue {
            Queue::Approvals => self.approvals,
            Queue::Exceptions => self.exceptions,
        }
    }

    pub fn minutes(&self, queue: Queue) -> u32 {
        self.of(queue).whole_minutes() as u32
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkItemStatus {
    Open,
    /// Someone holds it until `claimed_until`; after that it is open again to a claim.
    Claimed,
    Done,
}

impl WorkItemStatus {
    pub const ALL: [WorkItemStatus; 3] = [WorkItemStatus::Open, WorkItemStatus::Claimed, WorkItemStatus::Done];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkItemStatus::Open => "open",
            WorkItemStatus::Claimed => "claimed",
            WorkItemStatus::Done => "done",
        }
    }

    pub fn parse(name: &str) -> Option<WorkItemStatus> {
        WorkItemStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectType {
    Operation,
    Transaction,
    /// A webhook delivery whose retries ran out.
    Delivery,
    /// A queue message that reached a dead-letter queue (its id is the message's).
    DeadLetter,
    /// A schedule's occurrence that made nothing (`<schedule id>@<scheduled time>`).
    Occurrence,
    /// A break of a reconciliation (`<reconciliation id>:<line number>`).
    StatementLine,
    /// A webhook endpoint failing (its id) or disabled (`<endpoint id>:disabled`).
    WebhookEndpoint,
    /// A share of a customer's payout limit reached (`<counter>:<percent>`).
    PayoutLimit,
}

/// What an item is about: it closes when this is resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    #[serde(rename = "type")]
    pub kind: SubjectType,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub cause: Cause,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    pub id: WorkItemId,
    pub queue: Queue,
    /// Why it is in the queue: `approval`, `operation_needs_attention`,
    /// `transaction_needs_attention`, `webhook_delivery_failed`, `dead_letter`,
    /// `occurrence_missed`, `occurrence_skipped`.
    pub kind: String,
    pub subject: Subject,
    pub customer_id: CustomerId,
    pub status: WorkItemStatus,
    /// Who holds it: a user id (or, for a platform key without a user, the key's id).
    pub assignee: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub claimed_until: Option<OffsetDateTime>,
    /// The role a customer's user needs to act on it (approvals); platform operators act on all.
    pub required_role: Option<Role>,
    /// Who made the operation an approvals item is about: four eyes keep its decision from
    /// them, so the item is neither claimed by them nor assigned to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_created_by: Option<String>,
    /// The users who have decided an approvals item's operation while it waits for more
    /// approvals: each may sign once, so the item is neither claimed by them nor assigned to them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_decided_by: Vec<String>,
    /// The cause of its latest change.
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub due_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub done_at: Option<OffsetDateTime>,
    pub resolution: Option<Resolution>,
    /// A dead letter's body, kept on its item so that a redrive can send it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub environment: Environment,
    pub version: u64,
}

/// A change to a work item; each carries its cause.
#[derive(Debug, Clone)]
pub enum WorkItemTransition {
    Claim {
        assignee: String,
        until: OffsetDateTime,
        cause: Cause,
    },
    Assign {
        assignee: String,
        until: OffsetDateTime,
        cause: Cause,
    },
    Release(Cause),
    /// Its subject was resolved.
    Close(Cause),
}

impl WorkItemTransition {
    /// The change's name in audit entries and event types (`work_item.<name>`).
    pub fn name(&self) -> &'static str {
        match self {
            WorkItemTransition::Claim { .. } => "claimed",
            WorkItemTransition::Assign { .. } => "assigned",
            WorkItemTransition::Release(_) => "released",
            WorkItemTransition::Close(_) => "closed",
        }
    }
}

impl WorkItem {
    /// The scope working this item needs: what its subject's own endpoints need (a decision,
    /// a retry or redrive of money moving, a webhook resend).
    pub fn scope_needed(&self) -> Scope {
        match (self.queue, self.subject.kind) {
            (Queue::Approvals, _) => Scope::OperationsApprove,
            (Queue::Exceptions, SubjectType::Delivery) => Scope::WebhooksManage,
            (Queue::Exceptions, _) => Scope::OperationsWrite,
        }
    }

    /// Open, or claimed on a lease that ran out.
    pub fn is_claimable(&self, now: OffsetDateTime) -> bool {
        match self.status {
            WorkItemStatus::Open => true,
            WorkItemStatus::Claimed => self.claimed_until.is_some_and(|until| until <= now),
            WorkItemStatus::Done => false,
        }
    }

    /// Whether `user_id` has decided the operation this approvals item is about.
    pub fn has_decided(&self, user_id: &str) -> bool {
        self.subject_decided_by.iter().any(|decider| decider == user_id)
    }

    /// Remembers a decision that left the item's operation waiting for more approvals. Held by
    /// the decider, the item goes back to its queue for the next approver (then `true`: it was
    /// released with `cause`).
    pub fn record_decider(&mut self, user_id: &str, cause: Cause, now: OffsetDateTime) -> bool {
        if !self.has_decided(user_id) {
            self.subject_decided_by.push(user_id.to_owned());
        }
        if self.status == WorkItemStatus::Claimed && self.assignee.as_deref() == Some(user_id) {
            return self.apply(WorkItemTransition::Release(cause), now).is_ok();
        }
        self.version += 1;
        false
    }

    /// Applies `transition` if the item's state allows it; `now` decides whether a lease ran out.
    pub fn apply(&mut self, transition: WorkItemTransition, now: OffsetDateTime) -> Result<(), DomainError> {
        let refuse = |item: &WorkItem, what: &str| {
            Err(DomainError::invalid_state(
                "invalid_transition",
                format!(
                    "Work item {} is {}; it cannot be {what}.",
                    item.id,
                    item.status.as_str()
                ),
            ))
        };
        let name = transition.name();
        match transition {
            WorkItemTransition::Claim { assignee, until, cause } => {
                if !self.is_claimable(now) {
                    return Err(DomainError::invalid_state(
                        "already_claimed",
                        format!("Work item {} is held by someone else.", self.id),
                    ));
                }
                self.hold(assignee, until, cause);
            }
            WorkItemTransition::Assign { assignee, until, cause } => {
                if self.status == WorkItemStatus::Done {
                    return refuse(self, name);
                }
                self.hold(assignee, until, cause);
            }
            WorkItemTransition::Release(cause) => {
                if self.status != WorkItemStatus::Claimed {
                    return refuse(self, name);
                }
                self.status = WorkItemStatus::Open;
                self.assignee = None;
                self.claimed_until = None;
                self.cause = cause;
            }
            WorkItemTransition::Close(cause) => {
                if self.status == WorkItemStatus::Done {
                    return refuse(self, name);
                }
                self.status = WorkItemStatus::Done;
                self.claimed_until = None;
                self.done_at = Some(cause.at);
                self.resolution = Some(Resolution { cause: cause.clone() });
                self.cause = cause;
            }
        }
        self.version += 1;
        Ok(())
    }

    fn hold(&mut self, assignee: String, until: OffsetDateTime, cause: Cause) {
        self.status = WorkItemStatus::Claimed;
        self.assignee = Some(assignee);
        self.claimed_until = Some(until);
        self.cause = cause;
    }
}

/// Who holds the items a list asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignee {
    Unassigned,
    /// A user id (or a platform key's id).
    Holder(String),
}

/// Which items a list returns: oldest `due_at` first.
#[derive(Debug, Clone, Default)]
pub struct WorkItemQuery {
    pub queue: Option<Queue>,
    pub status: Option<WorkItemStatus>,
    pub assignee: Option<Assignee>,
    pub customer_id: Option<CustomerId>,
    /// Only items after this one in the list's order.
    pub starting_after: Option<WorkItemId>,
    pub limit: usize,
}

/// The store's port for the desk.
#[async_trait]
pub trait DeskStore: Send + Sync {
    async fn work_item(&self, id: &WorkItemId) -> Result<Option<WorkItem>, StoreError>;
    /// The item not yet done about `subject_id` in `queue` (there is at most one).
    async fn open_work_item(&self, queue: Queue, subject_id: &str) -> Result<Option<WorkItem>, StoreError>;
    /// Items matching `query`, oldest `due_at` first (ties by id), at most `query.limit`.
    async fn work_items(&self, query: &WorkItemQuery) -> Result<Vec<WorkItem>, StoreError>;
    /// Items not done of `queue` (a customer's, or all) due before `now`, up to `limit`.
    async fn past_due(
        &self,
        queue: Queue,
        customer_id: Option<&CustomerId>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<usize, StoreError>;
    async fn board_entry(&self, operation_id: &OperationId) -> Result<Option<BoardEntry>, StoreError>;
    /// The board's counters: a customer's, or (none) the platform's over every customer.
    async fn board_counts(&self, customer_id: Option<&CustomerId>) -> Result<Vec<BoardCount>, StoreError>;
    /// When the oldest operation in `column` (a customer's, or any) was created.
    async fn oldest_in_column(
        &self,
        column: board::Column,
        customer_id: Option<&CustomerId>,
    ) -> Result<Option<OffsetDateTime>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sla_outside_a_minute_to_a_week_is_refused_with_its_queue() {
        let sla = DeskSla::from_minutes(30, 5).unwrap();
        assert_eq!(
            (sla.of(Queue::Approvals), sla.minutes(Queue::Exceptions)),
            (Duration::minutes(30), 5)
        );
        assert!(DeskSla::from_minutes(0, 5).unwrap_err().contains("approvals"));
        assert!(DeskSla::from_minutes(5, DeskSla::MAX_MINUTES + 1)
            .unwrap_err()
            .contains("exceptions"));
    }
}
