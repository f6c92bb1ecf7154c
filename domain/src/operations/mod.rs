//! Operations, their items, and the operation state machine.

mod decisions;
mod expiry;
mod reversals;
mod use_cases;

pub(crate) use use_cases::StandingInstruction;
pub use use_cases::MAX_BULK_DECISIONS;

pub use crate::operation_type::OperationType;
pub use decisions::{not_the_creator, record_decision};
pub use reversals::{ReversalOf, ReverseOperation, ReversedItem, ReversedItemInput};

use crate::approvals::ApprovalRequirement;
use crate::cause::Cause;
use crate::error::DomainError;
use crate::money::{Amount, Currency};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    PendingApproval,
    Approved,
    Rejected,
    Cancelled,
    Processing,
    Completed,
    PartiallyCompleted,
    Failed,
    NeedsAttention,
    /// Its approvals did not all come within its workflow's `approval_ttl`.
    Expired,
}

impl OperationStatus {
    pub const ALL: [OperationStatus; 10] = [
        OperationStatus::PendingApproval,
        OperationStatus::Approved,
        OperationStatus::Rejected,
        OperationStatus::Cancelled,
        OperationStatus::Processing,
        OperationStatus::Completed,
        OperationStatus::PartiallyCompleted,
        OperationStatus::Failed,
        OperationStatus::NeedsAttention,
        OperationStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::PendingApproval => "pending_approval",
            OperationStatus::Approved => "approved",
            OperationStatus::Rejected => "rejected",
            OperationStatus::Cancelled => "cancelled",
            OperationStatus::Processing => "processing",
            OperationStatus::Completed => "completed",
            OperationStatus::PartiallyCompleted => "partially_completed",
            OperationStatus::Failed => "failed",
            OperationStatus::NeedsAttention => "needs_attention",
            OperationStatus::Expired => "expired",
        }
    }

    pub fn parse(value: &str) -> Option<OperationStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    pub fn is_final(self) -> bool {
        use OperationStatus::*;
        matches!(
            self,
            Completed | PartiallyCompleted | Failed | Rejected | Cancelled | Expired
        )
    }

    /// The statuses only an operation pending approval moves to: it waits no longer.
    pub fn left_pending_approval(self) -> bool {
        use OperationStatus::*;
        matches!(self, Approved | Rejected | Cancelled | Expired)
    }

    /// The whole operation state machine in one table.
    pub fn can_become(self, to: OperationStatus) -> bool {
        use OperationStatus::*;
        matches!(
            (self, to),
            (PendingApproval, Approved | Rejected | Cancelled | Expired)
                // Failed: the approved operation's account lacks the funds.
                | (Approved, Processing | Cancelled | Failed)
                | (Processing, Completed | PartiallyCompleted | Failed | NeedsAttention)
                | (NeedsAttention, Processing | Completed | PartiallyCompleted | Failed)
        )
    }
}

/// A change of an operation's status. Each variant names its target and carries its cause,
/// so no transition can be expressed without one.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationTransition {
    Approve(Cause),
    Reject(Cause),
    Cancel(Cause),
    StartProcessing(Cause),
    Complete(Cause),
    CompletePartially(Cause),
    Fail(Cause),
    FlagForAttention(Cause),
    Expire(Cause),
}

impl OperationTransition {
    pub fn target(&self) -> OperationStatus {
        use OperationStatus::*;
        match self {
            OperationTransition::Approve(_) => Approved,
            OperationTransition::Reject(_) => Rejected,
            OperationTransition::Cancel(_) => Cancelled,
            OperationTransition::StartProcessing(_) => Processing,
            OperationTransition::Complete(_) => Completed,
            OperationTransition::CompletePartially(_) => PartiallyCompleted,
            OperationTransition::Fail(_) => Failed,
            OperationTransition::FlagForAttention(_) => NeedsAttention,
            OperationTransition::Expire(_) => Expired,
        }
    }

    pub fn into_cause(self) -> Cause {
        match self {
            OperationTransition::Approve(c)
            | OperationTransition::Reject(c)
            | OperationTransition::Cancel(c)
            | OperationTransition::StartProcessing(c)
            | OperationTransition::Complete(c)
            | OperationTransition::CompletePartially(c)
            | OperationTransition::Fail(c)
            | OperationTransition::FlagForAttention(c)
            | OperationTransition::Expire(c) => c,
        }
    }
}

/// What a transition did; becomes the audit entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange {
    pub from: Option<OperationStatus>,
    pub to: OperationStatus,
    pub cause: Cause,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Beneficiary {
    pub id_type: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// Where an item's money goes: an account at a rail (`rail`, `account`), or, for a transfer,
/// an account of this ledger (`account_id`).
pub struct Destination {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rail: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<crate::ids::AccountId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: crate::ids::ItemId,
    /// Always there on a payout's or a collection's item; a transfer's may leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beneficiary: Option<Beneficiary>,
    pub destination: Destination,
    pub amount: Amount,
    pub reference: Option<String>,
    /// The customer's ISO 20022 ids for this payment (a pain.001's `EndToEndId` and `InstrId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_id: Option<String>,
    /// Set when the operation is approved and its transactions are made.
    pub transaction_id: Option<crate::ids::TransactionId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub user_id: crate::ids::UserId,
    /// The named signer whose place `user_id` took, by that signer's delegation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<crate::ids::UserId>,
    pub decision: Decision,
    pub comment: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The approval a payout limit held the operation for (see [`Operation::limit_hold`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub for_limit: bool,
}

impl Approval {
    /// Whose place the decision took: the named signer a delegate signed for, else its user's.
    pub fn signer(&self) -> &crate::ids::UserId {
        self.on_behalf_of.as_ref().unwrap_or(&self.user_id)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub id: crate::ids::OperationId,
    pub customer_id: crate::ids::CustomerId,
    #[serde(rename = "type")]
    pub kind: OperationType,
    pub currency: Currency,
    pub items: Vec<Item>,
    pub workflow: String,
    pub status: OperationStatus,
    pub cause: Cause,
    pub total_amount: i64,
    /// The approvals the workflow asked for when the operation was created, step by step,
    /// signed in order (empty: none); later workflow edits do not move it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval_chain: Vec<ApprovalRequirement>,
    pub approvals: Vec<Approval>,
    /// When it expires if its approvals have not all come (its workflow's `approval_ttl`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub approval_expires_at: Option<OffsetDateTime>,
    /// The rule that decided how the operation is approved when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by_rule: Option<DecidingRule>,
    /// A payout limit the operation would pass, holding it for one more approval after the
    /// workflow's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_hold: Option<crate::limits::LimitHold>,
    pub created_by: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub metadata: BTreeMap<String, String>,
    pub environment: crate::access::Environment,
    /// The customer account the operation draws on, if any: approval holds the money there.
    #[serde(default)]
    pub source_account_id: Option<crate::ids::AccountId>,
    /// The customer account a collection credits as its transactions are confirmed.
    #[serde(default)]
    pub destination_account_id: Option<crate::ids::AccountId>,
    /// Seconds the funds held for its items may wait for the rail: a transaction not yet
    /// handed to its rail by then fails (`hold_expired`) and its hold is voided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ttl: Option<u32>,
    /// The operation whose money this one sends back, and how much of each item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reversal_of: Option<ReversalOf>,
    /// The reversals made of it, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reversals: Vec<crate::ids::OperationId>,
    /// The payroll file whose chunk made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<crate::ids::FileId>,
    /// The schedule whose occurrence made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<crate::ids::ScheduleId>,
    /// That occurrence's own time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub occurrence_at: Option<OffsetDateTime>,
    /// Optimistic-concurrency counter: every stored change bumps it.
    pub version: u64,
}

/// A workflow's or an approval floor's rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidingRule {
    /// `workflow:<name>`, or `approval_floor:<type>` when the customer's floor decided.
    pub by: String,
    /// Its place among the definition's rules, from 0.
    pub rule: usize,
}

/// An approval an operation still waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeededApproval {
    pub count: u8,
    pub role: crate::access::Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub also_role: Option<crate::access::Role>,
    /// The users who may sign it, when its step names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<crate::ids::UserId>,
    /// `workflow`, or the limit (or payee finding) that holds the operation.
    #[serde(rename = "for")]
    pub reason: &'static str,
}

/// Who an item pays, as payout limits count them and the payee review knows them: its beneficiary (`<id type>:<id>`), or,
/// without one, its destination account.
/// With where it pays them (`<rail>:<account>`).
pub fn payee(beneficiary: Option<&Beneficiary>, destination: &Destination) -> (String, String) {
    let to = format!("{}:{}", destination.rail, destination.account);
    match beneficiary {
        Some(b) => (format!("{}:{}", b.id_type, b.id), to),
        None => (format!("account:{to}"), to),
    }
}

impl Operation {
    /// What approving the operation at `at` asks of its customer's payout limits: payouts only.
    pub fn payout_facts(&self, at: OffsetDateTime) -> Option<crate::limits::PayoutFacts<'_>> {
        (self.kind == OperationType::Payout).then(|| crate::limits::PayoutFacts {
            customer_id: &self.customer_id,
            currency: &self.currency,
            total_amount: self.total_amount,
            payees: self
                .items
                .iter()
                .map(|i| payee(i.beneficiary.as_ref(), &i.destination))
                .collect(),
            at,
        })
    }

    /// The approvals given towards its workflow's requirement (a limit's is not one).
    pub fn workflow_approvals_given(&self) -> usize {
        self.approvals
            .iter()
            .filter(|a| a.decision == Decision::Approved && !a.for_limit)
            .count()
    }

    /// All the approvals its workflow's chain asks for.
    pub fn workflow_approvals_required(&self) -> usize {
        self.approval_chain.iter().map(|step| usize::from(step.count)).sum()
    }

    /// The steps of its chain not yet signed, each with the approvals it still needs; the
    /// first is the one the next workflow approval signs.
    pub fn steps_left(&self) -> Vec<(&ApprovalRequirement, usize)> {
        let mut given = self.workflow_approvals_given();
        let mut left = vec![];
        for step in &self.approval_chain {
            let count = usize::from(step.count);
            if given < count {
                left.push((step, count - given));
            }
            given = given.saturating_sub(count);
        }
        left
    }

    /// Who must still approve it, in order: the workflow's steps left, then the one a limit
    /// holds it for. Nobody once it is no longer pending approval.
    pub fn approvals_needed(&self) -> Vec<NeededApproval> {
        if self.status != OperationStatus::PendingApproval {
            return vec![];
        }
        let mut needed: Vec<NeededApproval> = self
            .steps_left()
            .into_iter()
            .map(|(step, left)| NeededApproval {
                count: left as u8,
                role: step.role,
                also_role: step.also_role,
                users: step.users.clone(),
                reason: "workflow",
            })
            .collect();
        if let Some(hold) = &self.limit_hold {
            needed.push(NeededApproval {
                count: 1,
                role: hold.role,
                also_role: None,
                users: vec![],
                reason: hold.limit.as_str(),
            });
        }
        needed
    }

    /// Moves the operation to the transition's target if the state machine allows it.
    pub fn apply(&mut self, transition: OperationTransition) -> Result<StatusChange, DomainError> {
        let to = transition.target();
        if !self.status.can_become(to) {
            return Err(DomainError::invalid_state(
                "invalid_transition",
                format!(
                    "Operation {} is {}; it cannot become {}.",
                    self.id,
                    self.status.as_str(),
                    to.as_str()
                ),
            ));
        }
        let from = self.status;
        let cause = transition.into_cause();
        self.status = to;
        self.updated_at = cause.at;
        self.cause = cause.clone();
        Ok(StatusChange {
            from: Some(from),
            to,
            cause,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct OperationQuery {
    pub customer_id: Option<crate::ids::CustomerId>,
    pub status: Option<OperationStatus>,
    pub kind: Option<OperationType>,
    /// Only operations with a smaller (older) id.
    pub starting_after: Option<crate::ids::OperationId>,
    /// Only operations with this id or a greater one (made then or later:
    /// [`crate::ids::IdKind::first_made_at`]).
    pub created_from: Option<crate::ids::OperationId>,
    /// Only operations whose `total_amount` is at least / at most this (minor units).
    pub min_amount: Option<i64>,
    pub max_amount: Option<i64>,
    pub limit: usize,
}

impl OperationQuery {
    /// Whether a filter no store keys (the type, the amount) is asked for.
    pub fn filters_unkeyed(&self) -> bool {
        self.kind.is_some() || self.min_amount.is_some() || self.max_amount.is_some()
    }

    /// Whether `operation` is within the amount range asked for.
    pub fn amount_fits(&self, operation: &Operation) -> bool {
        self.min_amount.is_none_or(|min| operation.total_amount >= min)
            && self.max_amount.is_none_or(|max| operation.total_amount <= max)
    }
}

/// What an exact lookup of operations goes by: a value their items or transactions carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindBy {
    /// What the rail calls a transaction, learned when it was submitted.
    RailReference,
    /// An item's `reference`, the customer's own.
    ItemReference,
    /// An item's `beneficiary.id`.
    BeneficiaryId,
}

impl FindBy {
    pub const ALL: [FindBy; 3] = [FindBy::RailReference, FindBy::ItemReference, FindBy::BeneficiaryId];

    /// Its name as a query parameter and in stored keys.
    pub fn as_str(self) -> &'static str {
        match self {
            FindBy::RailReference => "rail_reference",
            FindBy::ItemReference => "item_reference",
            FindBy::BeneficiaryId => "beneficiary_id",
        }
    }

    pub fn parse(value: &str) -> Option<FindBy> {
        Self::ALL.into_iter().find(|by| by.as_str() == value)
    }
}

/// One entry of the lookup the stores keep beside operations and transactions: `value` leads
/// to `operation_id`. Made from the domain's own records ([`Operation::findings`],
/// a transaction's `finding`), so both stores index the same values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Finding {
    pub by: FindBy,
    pub value: String,
    pub customer_id: crate::ids::CustomerId,
    pub operation_id: crate::ids::OperationId,
}

/// The longest value the lookup keeps (longer ones are no item reference, beneficiary id or
/// rail reference this service takes).
pub const MAX_FINDING_VALUE: usize = 256;

/// Whether the lookup keeps `value`.
pub fn findable(value: &str) -> bool {
    !value.is_empty() && value.len() <= MAX_FINDING_VALUE
}

impl Operation {
    /// What finds this operation from the day it is made: each distinct item reference and
    /// beneficiary id.
    pub fn findings(&self) -> Vec<Finding> {
        let mut found = std::collections::BTreeSet::new();
        for item in &self.items {
            if let Some(reference) = item.reference.as_deref().filter(|r| findable(r)) {
                found.insert((FindBy::ItemReference, reference));
            }
            if let Some(beneficiary) = item.beneficiary.as_ref().filter(|b| findable(&b.id)) {
                found.insert((FindBy::BeneficiaryId, beneficiary.id.as_str()));
            }
        }
        found
            .into_iter()
            .map(|(by, value)| Finding {
                by,
                value: value.to_owned(),
                customer_id: self.customer_id.clone(),
                operation_id: self.id.clone(),
            })
            .collect()
    }
}

/// An exact lookup: the operations that `value` leads to, of one customer or (a platform
/// caller) every customer, grouped by customer (descending ids) and newest first within each.
#[derive(Debug, Clone)]
pub struct OperationFind {
    pub by: FindBy,
    pub value: String,
    pub customer_id: Option<crate::ids::CustomerId>,
    /// Only what sorts after this customer's operation: the last of the previous page.
    pub after: Option<(crate::ids::CustomerId, crate::ids::OperationId)>,
    pub limit: usize,
}

/// The reads of operations and their history (the store's port for this module).
#[async_trait::async_trait]
pub trait OperationStore: Send + Sync {
    async fn operation(&self, id: &crate::ids::OperationId) -> Result<Option<Operation>, crate::ports::StoreError>;
    /// Newest first, at most `query.limit`; a `kind` filter may stop reading short of `limit` ([`crate::ports::Listed`]).
    async fn operations(
        &self,
        query: &OperationQuery,
    ) -> Result<crate::ports::Listed<Operation>, crate::ports::StoreError>;
    /// Every audit entry of an operation and its transactions, oldest first.
    async fn operation_history(
        &self,
        operation_id: &crate::ids::OperationId,
    ) -> Result<Vec<crate::ports::AuditEntry>, crate::ports::StoreError>;
    /// The operations an exact lookup leads to, at most `find.limit`, in its order. Read by key:
    /// what no operation carries reads nothing else.
    async fn find_operations(&self, find: &OperationFind) -> Result<Vec<Operation>, crate::ports::StoreError>;
    /// Operations pending approval whose `approval_expires_at` is at or before `now`, soonest
    /// first, at most `limit`.
    async fn approvals_expiring(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Operation>, crate::ports::StoreError>;
}

#[cfg(test)]
pub(crate) mod tests;
