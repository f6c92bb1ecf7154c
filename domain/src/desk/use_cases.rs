//! The desk's use cases: the operator's list, get, claim, assign and release, and the board
//! (the stream consumer that keeps them is in `consumer.rs`).

use super::board::{column_bucket, queue_bucket, Board, BoardEntry, BoardMove, Column, ColumnView, QueueView};
use super::consumer::DeskFacts;
use super::{Assignee, Queue, Subject, SubjectType, WorkItem, WorkItemQuery, WorkItemStatus, WorkItemTransition};
use crate::access::{Principal, Role, Scope, User, UserStatus};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{CustomerId, OperationId, UserId, WorkItemId};
use crate::ports::{signals, AuditEntry, Changeset, Signal, SignalUnit, StoreError, Write};
use crate::service::{customer_scope, Page, Service};
use crate::tallies::{Period, Series, Tally};
use serde::Deserialize;
use std::collections::BTreeMap;
use time::Duration;

/// How long a claim holds an item before it goes back to the queue.
pub const CLAIM_LEASE: Duration = Duration::minutes(15);
/// How long an assignment holds an item: a working day.
pub const ASSIGNMENT_LEASE: Duration = Duration::hours(8);
/// Items a user's deactivation hands back at once, at most.
const RELEASED_ON_DEACTIVATION: usize = 100;
/// Past-due items the board counts, at most: enough to say a queue is far behind.
const PAST_DUE_COUNTED: usize = 1_000;
/// Candidates one claim looks at before answering that the queue has nothing for the caller.
const CLAIM_CANDIDATES: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimWorkItem {
    pub queue: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignWorkItem {
    pub user_id: Option<String>,
}

impl Service {
    /// A new open item, due when its queue's SLA runs out.
    pub(crate) fn new_work_item(
        &self,
        id: WorkItemId,
        queue: Queue,
        kind: &str,
        subject: Subject,
        customer_id: CustomerId,
        cause: Cause,
    ) -> WorkItem {
        let at = cause.at;
        WorkItem {
            id,
            queue,
            kind: kind.to_owned(),
            subject,
            customer_id,
            status: WorkItemStatus::Open,
            assignee: None,
            claimed_until: None,
            required_role: None,
            subject_created_by: None,
            subject_decided_by: vec![],
            cause,
            created_at: at,
            // Whole seconds: the stores sort by them.
            due_at: (at + self.desk_sla.of(queue))
                .replace_nanosecond(0)
                .expect("0 is a valid nanosecond"),
            done_at: None,
            resolution: None,
            message: None,
            environment: self.environment,
            version: 1,
        }
    }

    /// The audit entry and the event of a work item's change, for one changeset.
    pub(crate) fn record_work_item(&self, changes: &mut Changeset, item: &WorkItem, change: &str) {
        let mut entry =
            AuditEntry::new("work_item", &item.id, change, item.cause.clone()).moving(None, item.status.as_str());
        if item.subject.kind == SubjectType::Operation {
            entry = entry.of_operation(&item.subject.id);
        }
        changes.push(Write::Audit(entry));
        changes.push(Write::Event(Event::of_work_item(
            crate::ids::EventId::new(&*self.ids),
            change,
            item,
        )));
        // The day's count of exceptions opened or closed (done is final: reached once). Other
        // queues are not charted, and their items' counters would only cost writes.
        if item.queue != Queue::Exceptions {
            return;
        }
        let opened = match (change, item.status) {
            ("opened", _) => true,
            (_, WorkItemStatus::Done) => false,
            _ => return,
        };
        let series = Series::WorkItems {
            queue: item.queue.as_str().into(),
            opened,
        };
        changes.push(Write::Tally(Tally::new(
            &item.customer_id,
            Period::Day,
            self.now(),
            series,
            &item.id,
        )));
    }

    pub async fn list_work_items(
        &self,
        principal: &Principal,
        mut query: WorkItemQuery,
    ) -> Result<Page<WorkItem>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = WorkItemQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of(self.store.work_items(&query).await?, limit))
    }

    pub async fn get_work_item(&self, principal: &Principal, id: &WorkItemId) -> Result<WorkItem, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.store
            .work_item(id)
            .await?
            .filter(|item| principal.can_access(&item.customer_id))
            .ok_or_else(|| DomainError::not_found("work_item", id))
    }

    /// Hands the caller the oldest item of the queue it may act on, held for [`CLAIM_LEASE`].
    /// Two claimers never get the same item: each claim is a conditional update, and a
    /// claimer that loses one race moves on to the next item.
    pub async fn claim_work_item(&self, principal: &Principal, claim: ClaimWorkItem) -> Result<WorkItem, DomainError> {
        let name = claim
            .queue
            .ok_or_else(|| DomainError::invalid("queue", "parameter_missing", "queue is required."))?;
        let queue = Queue::parse(&name).ok_or_else(|| {
            DomainError::invalid(
                "queue",
                "invalid_queue",
                format!("Unknown queue '{name}'; the queues are approvals and exceptions."),
            )
        })?;
        self.may_work_queue(principal, queue)?;
        if queue == Queue::Approvals && principal.user.is_none() {
            // Held, the item would be kept from the approvers for the lease.
            return Err(DomainError::forbidden(
                "user_required",
                "An approvals item is worked by deciding it, and decisions are signed by a user: claim with an API key that belongs to a user.",
            ));
        }
        let customer_id = principal.key.customer_id.clone();
        let mut candidates = vec![];
        for status in [WorkItemStatus::Open, WorkItemStatus::Claimed] {
            let query = WorkItemQuery {
                queue: Some(queue),
                status: Some(status),
                customer_id: customer_id.clone(),
                limit: CLAIM_CANDIDATES,
                ..WorkItemQuery::default()
            };
            candidates.extend(self.store.work_items(&query).await?);
        }
        let now = self.now();
        candidates.retain(|item| item.is_claimable(now) && may_act_on(principal, item));
        candidates.sort_by(|a, b| (a.due_at, &a.id).cmp(&(b.due_at, &b.id)));
        let actor = principal.actor();
        for mut item in candidates {
            let cause = Cause::new("claimed", format!("Claimed by {}", actor.id), actor.clone(), now);
            item.apply(
                WorkItemTransition::Claim {
                    assignee: actor.id.clone(),
                    until: now + CLAIM_LEASE,
                    cause,
                },
                now,
            )?;
            let mut changes = Changeset::default();
            self.record_work_item(&mut changes, &item, "claimed");
            changes.push(Write::UpdateWorkItem(item.clone()));
            match self.store.commit(changes).await {
                Ok(()) => return Ok(item),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::missing_reference(
            "queue",
            format!("The {} queue has no item you may claim.", queue.as_str()),
        ))
    }

    /// Gives an approvals item to a user of its customer who holds the role it needs.
    pub async fn assign_work_item(
        &self,
        principal: &Principal,
        id: &WorkItemId,
        assign: AssignWorkItem,
    ) -> Result<WorkItem, DomainError> {
        let mut item = self.get_work_item(principal, id).await?;
        self.may_work(principal, &item)?;
        if item.queue == Queue::Exceptions {
            return Err(DomainError::invalid(
                "user_id",
                "not_assignable",
                "Exceptions are worked by the platform's operators, who claim them; they are not assigned to a customer's user.",
            ));
        }
        let user_id = assign
            .user_id
            .ok_or_else(|| DomainError::invalid("user_id", "parameter_missing", "user_id is required."))?;
        let user_id = UserId::parse(&user_id)
            .ok_or_else(|| DomainError::invalid("user_id", "invalid_user_id", "user_id is not a user id (usr_…)."))?;
        let user = self
            .store
            .user(&user_id)
            .await?
            .filter(|user| user.customer_id == item.customer_id)
            .ok_or_else(|| DomainError::missing_reference("user_id", format!("No such user: '{user_id}'")))?;
        if user.status == UserStatus::Deactivated {
            return Err(DomainError::invalid(
                "user_id",
                "user_deactivated",
                format!("User {} was deactivated; work is not assigned to them.", user.id),
            ));
        }
        if item.subject_created_by.as_deref() == Some(user.id.as_str()) {
            return Err(DomainError::invalid(
                "user_id",
                "creator_cannot_decide",
                format!(
                    "User {} made this operation; four eyes keep its decision from them.",
                    user.id
                ),
            ));
        }
        if item.has_decided(&user.id) {
            return Err(DomainError::invalid(
                "user_id",
                "already_decided",
                format!(
                    "User {} has already decided on this operation; the item waits for another approver.",
                    user.id
                ),
            ));
        }
        if let Some(role) = item.required_role {
            if !user.roles.contains(&role) {
                return Err(DomainError::invalid(
                    "user_id",
                    "role_missing",
                    format!(
                        "User {} does not hold the role {} this item needs.",
                        user.id,
                        role.name()
                    ),
                ));
            }
        }
        let now = self.now();
        let actor = principal.actor();
        let cause = Cause::new(
            "assigned",
            format!("Assigned to {} by {}", user.id, actor.id),
            actor,
            now,
        );
        item.apply(
            WorkItemTransition::Assign {
                assignee: user.id.to_string(),
                until: now + ASSIGNMENT_LEASE,
                cause,
            },
            now,
        )?;
        self.commit_work_item(item, "assigned").await
    }

    /// Puts a claimed item back in its queue: its holder may, and the platform's operators.
    pub async fn release_work_item(&self, principal: &Principal, id: &WorkItemId) -> Result<WorkItem, DomainError> {
        let mut item = self.get_work_item(principal, id).await?;
        self.may_work(principal, &item)?;
        let actor = principal.actor();
        if item.status == WorkItemStatus::Claimed
            && item.assignee.as_deref() != Some(actor.id.as_str())
            && !principal.is_platform()
        {
            return Err(DomainError::forbidden(
                "not_holder",
                format!(
                    "Work item {} is held by someone else; only they may release it.",
                    item.id
                ),
            ));
        }
        let now = self.now();
        let cause = Cause::new("released", format!("Released by {}", actor.id), actor, now);
        item.apply(WorkItemTransition::Release(cause), now)?;
        self.commit_work_item(item, "released").await
    }

    /// Hands back to their queues the items a deactivated user holds (at most
    /// [`RELEASED_ON_DEACTIVATION`]; a repeated deactivation hands back the next ones, and any
    /// left come back when their lease runs out),
    /// each released with `cause`. One at a time: an item the user's holding changed under
    /// (released, closed) meanwhile is left as it now is.
    pub(crate) async fn release_items_held_by(&self, user: &User, cause: &Cause) -> Result<usize, DomainError> {
        let query = WorkItemQuery {
            status: Some(WorkItemStatus::Claimed),
            assignee: Some(Assignee::Holder(user.id.to_string())),
            customer_id: Some(user.customer_id.clone()),
            limit: RELEASED_ON_DEACTIVATION,
            ..WorkItemQuery::default()
        };
        let mut released = 0;
        for mut item in self.store.work_items(&query).await? {
            let now = self.now();
            if item.apply(WorkItemTransition::Release(cause.clone()), now).is_err() {
                continue;
            }
            match self.commit_work_item(item, "released").await {
                Ok(_) => released += 1,
                Err(DomainError::InvalidState { code: "conflict", .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(released)
    }

    /// A decision that left its operation waiting for more approvals: the operation's open
    /// approvals item remembers the decider (who may not decide again), and goes back to the
    /// queue if the decider held it, so that the next approver need not wait for the lease.
    pub(crate) async fn record_decider_on_item(
        &self,
        changes: &mut Changeset,
        operation_id: &OperationId,
        user_id: &str,
        next_role: Option<Role>,
        cause: &Cause,
    ) -> Result<(), DomainError> {
        let Some(mut item) = self
            .store
            .open_work_item(Queue::Approvals, operation_id.as_str())
            .await?
        else {
            return Ok(());
        };
        // The approval it waits for next may be another step's, or a limit's: its role now
        // says who may claim the item.
        item.required_role = next_role.or(item.required_role);
        if item.record_decider(user_id, cause.clone(), self.now()) {
            self.record_work_item(changes, &item, "released");
        }
        changes.push(Write::UpdateWorkItem(item));
        Ok(())
    }

    pub(super) async fn commit_work_item(&self, item: WorkItem, change: &str) -> Result<WorkItem, DomainError> {
        let mut changes = Changeset::default();
        self.record_work_item(&mut changes, &item, change);
        changes.push(Write::UpdateWorkItem(item.clone()));
        self.commit(changes).await?;
        Ok(item)
    }

    /// Approvals are worked by those who may decide; exceptions by the platform's operators
    /// with a scope that works some exception (which ones, `may_work` says item by item).
    fn may_work_queue(&self, principal: &Principal, queue: Queue) -> Result<(), DomainError> {
        match queue {
            Queue::Approvals => principal.require(Scope::OperationsApprove),
            Queue::Exceptions if !principal.is_platform() => Err(DomainError::forbidden(
                "platform_only",
                "The exceptions queue is worked by the platform's operators.",
            )),
            Queue::Exceptions if principal.has_scope(Scope::WebhooksManage) => Ok(()),
            Queue::Exceptions => principal.require(Scope::OperationsWrite),
        }
    }

    /// Whether the caller may work `item`: its queue's rule, and the scope its subject needs
    /// (reading an item is not working it).
    pub(super) fn may_work(&self, principal: &Principal, item: &WorkItem) -> Result<(), DomainError> {
        self.may_work_queue(principal, item.queue)?;
        principal.require(item.scope_needed())
    }
}

/// Whether the caller may act on `item`: its customer's, not speaking for its operation's
/// creator, and (for a user) holding its role.
fn may_act_on(principal: &Principal, item: &WorkItem) -> bool {
    if !principal.can_access(&item.customer_id) || !principal.has_scope(item.scope_needed()) {
        return false;
    }
    if let Some(creator) = &item.subject_created_by {
        if crate::operations::not_the_creator(principal, creator).is_err() {
            return false;
        }
    }
    if principal.user.as_ref().is_some_and(|user| item.has_decided(&user.id)) {
        return false;
    }
    match (&principal.user, item.required_role) {
        (Some(user), Some(role)) => user.roles.contains(&role),
        _ => true,
    }
}

impl Service {
    /// Keeps an operation's place on the board: moved once per change of column, by the
    /// operation's version in the event, so an older or repeated delivery moves nothing.
    pub(super) async fn count_on_board(
        &self,
        event: &Event,
        facts: &DeskFacts,
    ) -> Result<Option<Changeset>, DomainError> {
        if facts.subject_type != Some(SubjectType::Operation) {
            return Ok(None);
        }
        let (Some(operation_id), Some(object)) = (&facts.operation_id, &facts.object) else {
            return Ok(None);
        };
        let (Some(version), Some(amount), Some(status), Some(currency)) = (
            object.version,
            object.total_amount,
            object
                .status
                .as_deref()
                .and_then(crate::operations::OperationStatus::parse),
            object.currency.as_deref().and_then(crate::money::Currency::parse),
        ) else {
            return Ok(None);
        };
        let id = OperationId::from(operation_id.as_str());
        let entry = self.store.board_entry(&id).await?;
        if entry
            .as_ref()
            .is_some_and(|e| (e.operation_version, &e.event_id) >= (version, &event.id))
        {
            return Ok(None);
        }
        let from = entry.as_ref().and_then(|e| e.column);
        let to = Column::of(status);
        if entry.is_some() && from == to {
            return Ok(None);
        }
        let moved = BoardMove {
            entry: BoardEntry {
                operation_id: id,
                customer_id: event.customer_id.clone(),
                currency,
                amount,
                column: to,
                operation_version: version,
                event_id: event.id.clone(),
                version: entry.map_or(1, |e| e.version + 1),
            },
            from,
        };
        let mut changes = Changeset::default();
        changes.push(Write::MoveOnBoard(moved));
        Ok(Some(changes))
    }

    /// `GET /v1/board`: a customer's board (theirs only), or the platform's over every customer.
    pub async fn board(&self, principal: &Principal, customer_id: Option<CustomerId>) -> Result<Board, DomainError> {
        self.board_of(board_scope(principal, customer_id)?).await
    }

    /// The schedule's report of the platform's levels (once a minute on AWS): what needs an
    /// operator, how far behind the exceptions are, how long the oldest payout is in flight.
    pub async fn record_operator_levels(&self) -> Result<(), DomainError> {
        let board = self.board_of(None).await?;
        let exceptions = &board.queues[Queue::Exceptions.as_str()];
        self.metrics.record(&[
            Signal::count(signals::NEEDS_ATTENTION, board.needs_attention.count),
            Signal::count(signals::EXCEPTIONS_OPEN, exceptions.open),
            Signal::count(signals::EXCEPTIONS_PAST_DUE, exceptions.past_due),
            Signal {
                name: signals::OLDEST_IN_PROGRESS,
                value: board.in_progress.oldest_age_seconds.unwrap_or(0) as f64,
                unit: SignalUnit::Seconds,
            },
        ]);
        Ok(())
    }

    async fn board_of(&self, customer_id: Option<CustomerId>) -> Result<Board, DomainError> {
        let now = self.now();
        let counts = self.store.board_counts(customer_id.as_ref()).await?;
        let mut columns = Vec::new();
        for column in Column::ALL {
            let bucket = column_bucket(column);
            let mut view = ColumnView {
                count: 0,
                amount: BTreeMap::new(),
                oldest_age_seconds: None,
            };
            for count in counts.iter().filter(|c| c.bucket == bucket) {
                view.count += count.count;
                if let Some(currency) = &count.currency {
                    if count.amount != 0 || count.count != 0 {
                        *view.amount.entry(currency.clone()).or_default() += count.amount;
                    }
                }
            }
            if view.count > 0 {
                view.oldest_age_seconds = self
                    .store
                    .oldest_in_column(column, customer_id.as_ref())
                    .await?
                    .map(|created| (now - created).whole_seconds().max(0));
            }
            columns.push(view);
        }
        let mut queues = BTreeMap::new();
        for queue in Queue::ALL {
            let bucket = queue_bucket(queue);
            let open = counts.iter().filter(|c| c.bucket == bucket).map(|c| c.count).sum();
            let past_due = if open > 0 {
                self.store
                    .past_due(queue, customer_id.as_ref(), now, PAST_DUE_COUNTED)
                    .await? as i64
            } else {
                0
            };
            queues.insert(queue.as_str(), QueueView { open, past_due });
        }
        let [pending_approval, in_progress, needs_attention]: [ColumnView; 3] =
            columns.try_into().expect("three columns");
        Ok(Board {
            customer_id,
            pending_approval,
            in_progress,
            needs_attention,
            queues,
            as_of: now,
        })
    }
}

/// Whose board (or charts) `principal` reads: the customer it names, its own, or (none) every
/// customer's for the platform; another customer's is no such customer.
pub(super) fn board_scope(
    principal: &Principal,
    customer_id: Option<CustomerId>,
) -> Result<Option<CustomerId>, DomainError> {
    principal.require(Scope::OperationsRead)?;
    customer_scope(principal, customer_id)
        .ok_or_else(|| DomainError::missing_reference("customer_id", "No such customer.".to_string()))
}
