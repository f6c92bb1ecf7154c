//! The operations API's four functions (create, query, approve, cancel) and an operation's
//! history.

use super::record_decision;
use super::{OperationFind, OperationQuery};
use crate::access::{Principal, Scope};
use crate::approvals::{self, Decider, Facts, Verdict};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::OperationId;
use crate::limits::{LimitCheck, PayoutFacts};
use crate::money;
use crate::operation_type::OperationType;
use crate::operations::{payee, Decision, Item, Operation, OperationStatus, OperationTransition, StatusChange};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::service::{customer_scope, Page, Service};
use crate::validate::{self, CreateOperation};
use time::OffsetDateTime;

/// Operations one bulk approve or reject decides on.
pub const MAX_BULK_DECISIONS: usize = 100;

/// Optimistic-concurrency retries before a busy operation is reported as a conflict.
const MAX_ATTEMPTS: usize = 5;

/// An instruction a person set up that later makes operations on its own (a schedule). Four-eyes
/// looks through it to the person: whoever set it up is the creator of what it makes.
pub(crate) struct StandingInstruction {
    /// The schedule whose occurrence makes the operation.
    pub schedule_id: crate::ids::ScheduleId,
    /// The occurrence's own time.
    pub occurrence_at: OffsetDateTime,
    /// The instruction itself, the actor of each operation's cause.
    pub actor: Actor,
    /// The user (or key without one) who set it up last.
    pub set_up_by: String,
}

impl Service {
    // ---- Operations -------------------------------------------------------------------

    pub async fn create_operation(
        &self,
        principal: &Principal,
        command: CreateOperation,
        ticket: Option<Ticket<Operation>>,
    ) -> Result<Operation, DomainError> {
        // A lost race (another approval took the account's last funds) is drafted again: the
        // new draft sees the funds as they now are.
        for _ in 0..MAX_ATTEMPTS {
            let (operation, mut changes) = self.draft_operation(principal, command.clone(), None).await?;
            if let Some(ticket) = &ticket {
                changes.push(ticket.complete(&operation));
            }
            match self.store.commit(changes).await {
                Ok(()) => return Ok(operation),
                // Or a payout's limit counted by another approval since it was read.
                Err(StoreError::Conflict)
                    if operation.source_account_id.is_some() || operation.kind == OperationType::Payout =>
                {
                    continue
                }
                Err(other) => return Err(self.commit_error(other)),
            }
        }
        Err(DomainError::invalid_state(
            "conflict",
            "The account is changing too fast; retry.",
        ))
    }

    /// An operation as `principal` would create it, and the changeset that stores it (with
    /// its audit entry and events), not yet committed. `made_by` is the standing instruction
    /// (a schedule) that makes it, if one does: it is then the actor of the operation's cause,
    /// and the person who set it up its creator.
    pub(crate) async fn draft_operation(
        &self,
        principal: &Principal,
        command: CreateOperation,
        made_by: Option<&StandingInstruction>,
    ) -> Result<(Operation, Changeset), DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let valid = command.validate(&|rail| self.rails.contains(rail))?;
        let customer_id = self.acting_customer(principal, valid.customer_id.as_deref()).await?;
        let (workflow, floor) = self
            .workflow_and_floor(&customer_id, &valid.workflow, valid.kind)
            .await?;
        let workflow = workflow.ok_or_else(|| crate::approvals::unknown_workflow(&valid.workflow, &customer_id))?;
        let total_amount = money::total(valid.items.iter().map(|i| i.amount))
            .ok_or_else(|| DomainError::invalid("items", "total_too_large", "The items' total overflows."))?;
        let facts = Facts {
            kind: valid.kind,
            currency: &valid.currency,
            total_amount,
            items: valid
                .items
                .iter()
                .map(|i| {
                    (
                        i.amount.minor_units(),
                        i.destination.rail.as_str(),
                        i.beneficiary.as_ref().map_or("", |b| b.id_type.as_str()),
                    )
                })
                .collect(),
            metadata: &valid.metadata,
        };
        let (verdict, decider) = approvals::stricter(
            workflow.definition.evaluate(&facts),
            floor.definition.floor_verdict(&facts),
        );
        let (source_account_id, destination_account_id) = self.ledger_accounts(&customer_id, &valid).await?;
        let now = self.now();
        let (decided_by, source) = match decider {
            Decider::Workflow => (
                format!("workflow:{}", workflow.name),
                format!("workflow {}", workflow.name),
            ),
            Decider::Floor => (
                format!("approval_floor:{}", valid.kind.as_str()),
                format!(
                    "the customer's approval floor for {} (workflow {} asked less)",
                    valid.kind.as_str(),
                    workflow.name
                ),
            ),
            Decider::Both => (
                format!("workflow:{}", workflow.name),
                format!(
                    "workflow {} with the customer's approval floor for {}",
                    workflow.name,
                    valid.kind.as_str()
                ),
            ),
        };
        let decided_by = Actor {
            kind: crate::cause::ActorType::System,
            id: decided_by,
        };
        let decided_by_rule = verdict.rule().map(|rule| super::DecidingRule {
            by: decided_by.id.clone(),
            rule,
        });
        let rule_name = |rule: Option<usize>| rule.map_or("no rule".to_string(), |r| format!("rule {r}"));
        let (status, cause, approval_chain) = match verdict {
            Verdict::Approve { rule } => (
                OperationStatus::Approved,
                Cause::new(
                    "workflow_approved",
                    format!("Approved by workflow {} ({})", workflow.name, rule_name(Some(rule))),
                    decided_by,
                    now,
                ),
                vec![],
            ),
            Verdict::Reject { rule, reason } => (
                OperationStatus::Rejected,
                Cause::new(
                    if decider == Decider::Floor {
                        "approval_floor_rejected"
                    } else {
                        "workflow_rejected"
                    },
                    format!("Rejected by {source} ({}): {reason}", rule_name(rule)),
                    decided_by,
                    now,
                ),
                vec![],
            ),
            Verdict::RequireApprovals { rule, chain } => (
                OperationStatus::PendingApproval,
                Cause::new(
                    "approval_required",
                    format!(
                        "Required by {source} ({}): {}",
                        rule_name(Some(rule)),
                        crate::approvals::chain_label(&chain)
                    ),
                    decided_by,
                    now,
                ),
                chain,
            ),
        };
        let cause = match made_by {
            Some(instruction) => Cause {
                message: format!(
                    "Made by schedule {}, set up by {}. {}",
                    instruction.schedule_id, instruction.set_up_by, cause.message
                ),
                actor: instruction.actor.clone(),
                ..cause
            },
            None => cause,
        };
        let payees: Vec<(String, String)> = match valid.kind {
            OperationType::Payout => valid
                .items
                .iter()
                .map(|i| payee(i.beneficiary.as_ref(), &i.destination))
                .collect(),
            _ => vec![],
        };
        let facts = PayoutFacts {
            customer_id: &customer_id,
            currency: &valid.currency,
            total_amount,
            payees,
            at: now,
        };
        let at_create = self
            .limits_at_create(valid.kind, &facts, (status, cause, approval_chain))
            .await?;
        let (status, cause, approval_chain) = at_create.decided;
        let approval_expires_at = match status {
            OperationStatus::PendingApproval => {
                approvals::approval_expiry(now, &workflow.definition, &floor.definition)
            }
            _ => None,
        };
        let (limit_hold, counted) = (at_create.hold, at_create.counted);
        let operation = Operation {
            id: crate::ids::OperationId::new(&*self.ids),
            customer_id,
            kind: valid.kind,
            currency: valid.currency,
            items: valid
                .items
                .into_iter()
                .map(|i| Item {
                    id: crate::ids::ItemId::new(&*self.ids),
                    beneficiary: i.beneficiary,
                    destination: i.destination,
                    amount: i.amount,
                    reference: i.reference,
                    end_to_end_id: i.end_to_end_id,
                    instruction_id: i.instruction_id,
                    transaction_id: None,
                })
                .collect(),
            workflow: workflow.name,
            status,
            cause: cause.clone(),
            total_amount,
            approval_chain,
            approval_expires_at,
            approvals: vec![],
            created_by: made_by.map_or_else(|| principal.actor().id, |instruction| instruction.set_up_by.clone()),
            created_at: now,
            updated_at: now,
            metadata: valid.metadata,
            environment: self.environment,
            source_account_id,
            destination_account_id,
            file_id: valid.file_id,
            schedule_id: made_by.map(|instruction| instruction.schedule_id.clone()),
            occurrence_at: made_by.map(|instruction| instruction.occurrence_at),
            hold_ttl: valid.hold_ttl,
            reversal_of: valid.reversal_of,
            reversals: vec![],
            decided_by_rule,
            limit_hold,
            version: 1,
        };
        // The stored document must fit a store item.
        let stored_size = serde_json::to_vec(&operation).map_or(usize::MAX, |doc| doc.len());
        crate::validate::check_operation_size(stored_size, operation.items.len())?;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("operation", &operation.id, "created", cause)
                .of_operation(&operation.id)
                .moving(None, status.as_str()),
        ));
        let [created, in_status] = Event::of_new_operation(
            crate::ids::EventId::new(&*self.ids),
            crate::ids::EventId::new(&*self.ids),
            &operation,
        );
        changes.push(Write::Event(created));
        changes.push(Write::Event(in_status));
        let mut operation = operation;
        if status == OperationStatus::Approved {
            let approval = operation.cause.clone();
            self.hold_funds(&mut changes, &mut operation, &approval).await?;
        }
        if let Some(check) = counted.filter(|_| operation.status == OperationStatus::Approved) {
            self.count_against_limits(&mut changes, &check, &operation.customer_id);
        }
        changes.push(Write::InsertOperation(operation.clone()));
        Ok((operation, changes))
    }

    pub async fn get_operation(&self, principal: &Principal, id: &OperationId) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.visible_operation(principal, id).await
    }

    pub(super) async fn visible_operation(
        &self,
        principal: &Principal,
        id: &OperationId,
    ) -> Result<Operation, DomainError> {
        self.store
            .operation(id)
            .await?
            .filter(|op| principal.can_access(&op.customer_id))
            .ok_or_else(|| DomainError::not_found("operation", id))
    }

    pub async fn list_operations(
        &self,
        principal: &Principal,
        mut query: OperationQuery,
    ) -> Result<Page<Operation>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = OperationQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of_listed(self.store.operations(&query).await?, limit))
    }

    /// The operations a rail reference, an item reference or a beneficiary id leads to, grouped
    /// by customer and newest first within each; a page goes on after `starting_after`.
    pub async fn find_operations(
        &self,
        principal: &Principal,
        mut find: OperationFind,
        starting_after: Option<OperationId>,
    ) -> Result<Page<Operation>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, find.customer_id.take()) else {
            return Ok(Page::empty());
        };
        find.customer_id = customer_id;
        if let Some(id) = starting_after {
            // A page starts after its predecessor's last operation, wherever that sorts.
            let last = self.visible_operation(principal, &id).await.map_err(|_| {
                DomainError::invalid(
                    "starting_after",
                    "invalid_id",
                    format!("{id} is no operation this list holds."),
                )
            })?;
            find.after = Some((last.customer_id, last.id));
        }
        let limit = find.limit;
        find.limit = limit + 1;
        Ok(Page::of(self.store.find_operations(&find).await?, limit))
    }

    pub async fn operation_history(
        &self,
        principal: &Principal,
        id: &OperationId,
    ) -> Result<Page<AuditEntry>, DomainError> {
        let operation = self.get_operation(principal, id).await?;
        Ok(Page::all(self.store.operation_history(&operation.id).await?))
    }

    pub async fn approve_operation(
        &self,
        principal: &Principal,
        id: &OperationId,
        command: validate::Approve,
    ) -> Result<Operation, DomainError> {
        let comment = validate::optional_reason(command.comment, "comment", 500)?;
        self.decide(principal, id, Decision::Approved, comment).await
    }

    pub async fn reject_operation(
        &self,
        principal: &Principal,
        id: &OperationId,
        command: validate::Reject,
    ) -> Result<Operation, DomainError> {
        let reason = validate::required_text(command.reason, "reason", 500)?;
        self.decide(principal, id, Decision::Rejected, Some(reason)).await
    }

    /// Decides on each of up to [`MAX_BULK_DECISIONS`] operations, each its own decision under
    /// the four-eyes rules: one refused leaves the others decided. The request as a whole is
    /// refused only for what is wrong with it (its ids, its comment or reason, the caller's scope).
    pub async fn decide_many(
        &self,
        principal: &Principal,
        decision: Decision,
        command: validate::BulkDecision,
    ) -> Result<Vec<(OperationId, Result<Operation, DomainError>)>, DomainError> {
        principal.require(Scope::OperationsApprove)?;
        let ids = command
            .ids
            .ok_or_else(|| DomainError::invalid("ids", "parameter_missing", "ids is required."))?;
        if ids.is_empty() || ids.len() > MAX_BULK_DECISIONS {
            return Err(DomainError::invalid(
                "ids",
                "invalid_length",
                format!("ids takes 1 to {MAX_BULK_DECISIONS} operation ids."),
            ));
        }
        let mut parsed: Vec<OperationId> = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let id = OperationId::parse(id).ok_or_else(|| {
                DomainError::invalid(
                    format!("ids[{i}]"),
                    "invalid_id",
                    format!("'{id}' is not an operation id."),
                )
            })?;
            if parsed.contains(&id) {
                return Err(DomainError::invalid(
                    format!("ids[{i}]"),
                    "duplicate_id",
                    format!("{id} is named twice."),
                ));
            }
            parsed.push(id);
        }
        let text = match decision {
            Decision::Approved => {
                if command.reason.is_some() {
                    return Err(DomainError::invalid(
                        "reason",
                        "not_supported",
                        "An approval takes a comment, not a reason.",
                    ));
                }
                validate::optional_reason(command.comment, "comment", 500)?
            }
            Decision::Rejected => {
                if command.comment.is_some() {
                    return Err(DomainError::invalid(
                        "comment",
                        "not_supported",
                        "A rejection takes a reason, not a comment.",
                    ));
                }
                Some(validate::required_text(command.reason, "reason", 500)?)
            }
        };
        let mut answers = Vec::with_capacity(parsed.len());
        for id in parsed {
            let answer = self.decide(principal, &id, decision, text.clone()).await;
            answers.push((id, answer));
        }
        Ok(answers)
    }

    pub async fn cancel_operation(
        &self,
        principal: &Principal,
        id: &OperationId,
        command: validate::Cancel,
    ) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let reason = validate::optional_reason(command.reason, "reason", 500)?;
        self.change_operation(principal, id, None, |operation, now, _, _| {
            let message = reason.clone().unwrap_or_else(|| "Cancelled on request".into());
            let cause = Cause::new("cancelled_on_request", message, principal.actor(), now);
            let change = operation.apply(OperationTransition::Cancel(cause))?;
            Ok(Some(change))
        })
        .await
    }

    async fn decide(
        &self,
        principal: &Principal,
        id: &OperationId,
        decision: Decision,
        comment: Option<String>,
    ) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsApprove)?;
        self.change_operation(principal, id, Some(decision), |operation, now, limits, acting_for| {
            record_decision(operation, principal, decision, comment.clone(), now, limits, acting_for)
        })
        .await
    }

    /// Loads, changes and stores an operation with its audit entry, retrying when a
    /// concurrent change won the race (the retry sees the winner's state, so a losing
    /// approve-versus-cancel gets its 409 from the state machine). A `decision` reads what it
    /// needs: a payout's limits to approve it; in a step naming signers, whose place it takes.
    async fn change_operation<F>(
        &self,
        principal: &Principal,
        id: &OperationId,
        decision: Option<Decision>,
        change: F,
    ) -> Result<Operation, DomainError>
    where
        F: Fn(
            &mut Operation,
            OffsetDateTime,
            Option<&LimitCheck>,
            Option<&crate::ids::UserId>,
        ) -> Result<Option<StatusChange>, DomainError>,
    {
        let change = &change;
        let busy = || Err(DomainError::conflict("The operation is changing too fast; retry."));
        self.retry_on_conflict(MAX_ATTEMPTS, busy, move || async move {
            let mut operation = self.visible_operation(principal, id).await?;
            let previous = operation.status;
            let now = self.now();
            // What approving it would do to its payout limits, read before the decision and
            // counted only with the version of the counters read here.
            let pending = previous == OperationStatus::PendingApproval;
            let limits = match operation.payout_facts(now) {
                Some(facts) if decision == Some(Decision::Approved) && pending => {
                    self.payout_limit_check(&facts).await?
                }
                _ => None,
            };
            let acting_for = match operation.steps_left().first() {
                Some((step, _)) if decision.is_some() && pending && !step.users.is_empty() => {
                    let signed: Vec<_> = operation.approvals.iter().map(|a| a.signer().clone()).collect();
                    self.acting_for(principal, &step.users, &signed, now).await?
                }
                _ => None,
            };
            let held_before = operation.limit_hold.is_some();
            let status_change = change(&mut operation, now, limits.as_ref(), acting_for.as_ref())?;
            operation.version += 1;
            operation.updated_at = now;
            let mut changes = Changeset::default();
            match status_change {
                Some(change) => {
                    let cause = change.cause.clone();
                    let to = change.to;
                    self.record_operation_change(&mut changes, &operation, change);
                    match (previous, to) {
                        (_, OperationStatus::Approved) => {
                            self.hold_funds(&mut changes, &mut operation, &cause).await?;
                            if let Some(check) = limits
                                .as_ref()
                                .filter(|_| operation.status == OperationStatus::Approved)
                            {
                                self.count_against_limits(&mut changes, check, &operation.customer_id);
                            }
                        }
                        (OperationStatus::Approved, OperationStatus::Cancelled) => {
                            self.release_holds(&mut changes, &operation, &cause).await?
                        }
                        _ => {}
                    }
                }
                None => {
                    let approval = operation
                        .approvals
                        .last()
                        .expect("a decision without a status change is an approval");
                    let cause = Cause::new(
                        "approval_recorded",
                        format!(
                            "Approved by {} ({} of {} approval(s))",
                            approval.user_id,
                            operation.approvals.len(),
                            operation.workflow_approvals_required()
                        ),
                        principal.actor(),
                        approval.at,
                    );
                    let decider = approval.user_id.to_string();
                    let next_role = operation.approvals_needed().first().map(|needed| needed.role);
                    self.record_decider_on_item(&mut changes, &operation.id, &decider, next_role, &cause)
                        .await?;
                    let entry = AuditEntry::new("operation", &operation.id, "approval_recorded", cause)
                        .moving(Some(previous.as_str()), previous.as_str());
                    changes.push(Write::Audit(entry.of_operation(&operation.id)));
                    if let Some(hold) = operation.limit_hold.as_ref().filter(|_| !held_before) {
                        let cause = Cause::new(
                            "payout_limit_escalated",
                            format!(
                                "Held for one more approval, by role {}: {}",
                                hold.role.name(),
                                hold.reason
                            ),
                            Actor::system(),
                            now,
                        );
                        let entry = AuditEntry::new("operation", &operation.id, "payout_limit_escalated", cause)
                            .moving(Some(previous.as_str()), previous.as_str());
                        changes.push(Write::Audit(entry.of_operation(&operation.id)));
                    }
                }
            }
            changes.push(Write::UpdateOperation(operation.clone()));
            Ok((operation, changes))
        })
        .await
    }
}
