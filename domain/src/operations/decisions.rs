//! The four-eyes rules for deciding on an operation.

use super::{Approval, Decision, Operation, OperationStatus, OperationTransition, StatusChange};
use crate::access::Principal;
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::ids::UserId;
use crate::limits::{LimitCheck, LimitHold, OverLimit};
use time::OffsetDateTime;

/// Refuses a caller who speaks for `creator`, an operation's `created_by`: the creator's user
/// or key, or a key descending from them (minted or rotated, at any depth).
pub fn not_the_creator(principal: &Principal, creator: &str) -> Result<(), DomainError> {
    if principal.user.as_ref().is_some_and(|user| user.id == creator) || principal.key.id == creator {
        return Err(DomainError::forbidden(
            "self_approval_forbidden",
            "The creator of an operation cannot decide on it.",
        ));
    }
    // Four-eyes holds between minting and deciding: a key minted by the creator (or by the key
    // that created the operation, whose actor is then the creator), by a key they minted, or
    // rotated from one of theirs speaks for the creator.
    if principal.descends_from(creator) {
        return Err(DomainError::forbidden(
            "key_minted_by_creator",
            "This key descends from the operation's creator (minted or rotated by them or by a key of theirs), so its decision would be the creator's own.",
        ));
    }
    Ok(())
}

/// The four-eyes rules: a decision is signed by a user holding the required role, never the
/// operation's creator, at most once per user; one rejection rejects; enough distinct
/// approvals approve. Then a payout's limits have their say (`limits`: what approving it would
/// do to them): one it would pass rejects it or holds it for one more approval, by the role the
/// limit names, which then approves it over the limit.
pub fn record_decision(
    operation: &mut Operation,
    principal: &Principal,
    decision: Decision,
    comment: Option<String>,
    now: OffsetDateTime,
    limits: Option<&LimitCheck>,
    acting_for: Option<&UserId>,
) -> Result<Option<StatusChange>, DomainError> {
    if operation.status != OperationStatus::PendingApproval {
        return Err(DomainError::invalid_state(
            "operation_not_pending_approval",
            format!(
                "Operation {} is {}; only operations pending approval take decisions.",
                operation.id,
                operation.status.as_str()
            ),
        ));
    }
    let user = principal.user.as_ref().ok_or_else(|| {
        DomainError::forbidden(
            "user_required",
            "Decisions are signed by a user: use an API key that belongs to a user.",
        )
    })?;
    not_the_creator(principal, &operation.created_by)?;
    let needed = operation.workflow_approvals_required();
    let given = operation.workflow_approvals_given();
    // The workflow's chain comes first, step by step; the limit's approval, if one holds the
    // operation, after.
    let step = operation.steps_left().first().map(|(step, _)| (*step).clone());
    let for_limit = step.is_none();
    match (&step, &operation.limit_hold) {
        (None, None) => {
            return Err(DomainError::invalid_state(
                "no_approval_required",
                "This operation needs no approval.",
            ))
        }
        (None, Some(hold)) if !user.roles.contains(&hold.role) => {
            return Err(DomainError::forbidden(
                "role_required",
                format!(
                    "This operation is held over a payout limit; deciding on it needs the role '{}'.",
                    hold.role.name()
                ),
            ))
        }
        (Some(step), _) if !step.held_by(&user.roles) => {
            return Err(DomainError::forbidden(
                "role_required",
                format!(
                    "Deciding on this operation (at this step of its chain) needs the role '{}'.",
                    step.roles_label()
                ),
            ))
        }
        // A named signer's delegate signs in their place.
        (Some(step), _) if !step.signable_by(acting_for.unwrap_or(&user.id), &user.roles) => {
            return Err(DomainError::forbidden(
                "named_signer_required",
                format!(
                    "This step of the operation's chain is signed by named users only: {}.",
                    step.users.iter().map(|u| u.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ))
        }
        _ => {}
    }
    // One decision per person, and per named place: a delegate's counts as the delegator's.
    let places = [Some(&user.id), acting_for];
    if operation
        .approvals
        .iter()
        .any(|a| a.user_id == user.id || places.contains(&Some(a.signer())))
    {
        return Err(DomainError::invalid_state(
            "already_decided",
            "This user (or the user whose place they take) has already decided on this operation.",
        ));
    }
    // The delegation is used only where it is needed: in a step that names its signers.
    let on_behalf_of = acting_for.filter(|_| step.as_ref().is_some_and(|s| !s.users.is_empty()));
    operation.approvals.push(Approval {
        user_id: user.id.clone(),
        on_behalf_of: on_behalf_of.cloned(),
        decision,
        comment: comment.clone(),
        at: now,
        for_limit: for_limit && decision == Decision::Approved,
    });
    let actor = principal.actor();
    if decision == Decision::Rejected {
        let reason = comment.unwrap_or_default();
        let cause = Cause::new(
            "rejected_by_approver",
            format!("Rejected by {}: {reason}", user.id),
            actor,
            now,
        );
        return operation.apply(OperationTransition::Reject(cause)).map(Some);
    }
    if let (true, Some(hold)) = (for_limit, &operation.limit_hold) {
        let cause = Cause::new(
            "payout_limit_approved",
            format!(
                "Approved over its payout limit by {} ({}): {}",
                user.id,
                hold.role.name(),
                hold.reason
            ),
            actor,
            now,
        );
        return operation.apply(OperationTransition::Approve(cause)).map(Some);
    }
    if given + 1 < needed {
        return Ok(None);
    }
    if let Some(check) = limits.filter(|check| !check.within()) {
        return match over_limit(check, now) {
            (_, cause, None) => operation.apply(OperationTransition::Reject(cause)).map(Some),
            (_, _, hold) => {
                operation.limit_hold = hold;
                Ok(None)
            }
        };
    }
    let cause = Cause::new(
        "approved_by_approver",
        format!("Approved by {} ({} of {needed} approval(s))", user.id, given + 1),
        actor,
        now,
    );
    operation.apply(OperationTransition::Approve(cause)).map(Some)
}

/// What a payout over a limit (or one its payee review asks more for) becomes: rejected, or
/// held for one more approval by the role the limit or the review names.
pub(crate) fn over_limit(check: &LimitCheck, at: OffsetDateTime) -> (OperationStatus, Cause, Option<LimitHold>) {
    let (action, limit, reason) = check.verdict().expect("a check that is not within has a verdict");
    match action {
        OverLimit::Refuse => (
            OperationStatus::Rejected,
            Cause::new(
                "payout_limit_exceeded",
                format!("Refused: {reason}"),
                Actor::system(),
                at,
            ),
            None,
        ),
        OverLimit::Escalate { role } => (
            OperationStatus::PendingApproval,
            Cause::new(
                "payout_limit_escalated",
                format!("Held for one more approval, by role {}: {reason}", role.name()),
                Actor::system(),
                at,
            ),
            Some(LimitHold { limit, role, reason }),
        ),
    }
}

/// What a new operation's customer's limits make of it: its status, cause and requirement,
/// the hold if one holds it, and the check to count if it is approved at once.
pub(super) struct AtCreate {
    pub decided: (OperationStatus, Cause, Vec<crate::approvals::ApprovalRequirement>),
    pub hold: Option<LimitHold>,
    pub counted: Option<LimitCheck>,
}

impl crate::service::Service {
    /// A payout the workflow approves at once is checked against its customer's limits here;
    /// one that waits for approvals is checked when the last one comes. Either way it may pay
    /// no more beneficiaries than its limits can count or review in one approval.
    pub(super) async fn limits_at_create(
        &self,
        kind: crate::operation_type::OperationType,
        facts: &crate::limits::PayoutFacts<'_>,
        decided: (OperationStatus, Cause, Vec<crate::approvals::ApprovalRequirement>),
    ) -> Result<AtCreate, DomainError> {
        let unchanged = |decided| AtCreate {
            decided,
            hold: None,
            counted: None,
        };
        if kind != crate::operation_type::OperationType::Payout {
            return Ok(unchanged(decided));
        }
        let saved = self.store.payout_limits(facts.customer_id).await?;
        if let Some(saved) = &saved {
            saved.check_payee_count(facts)?;
        }
        if decided.0 != OperationStatus::Approved {
            return Ok(unchanged(decided));
        }
        match self.payout_limit_check_of(saved.as_ref(), facts).await? {
            Some(check) if !check.within() => {
                let (status, cause, hold) = over_limit(&check, facts.at);
                Ok(AtCreate {
                    decided: (status, cause, vec![]),
                    hold,
                    counted: None,
                })
            }
            counted => Ok(AtCreate {
                decided,
                hold: None,
                counted,
            }),
        }
    }
}

#[cfg(test)]
pub(crate) mod four_eyes_tests {
    use super::*;
    use crate::access::Role;
    use crate::access::{ApiKey, Environment, Scope, User, UserStatus};
    use crate::approvals::ApprovalRequirement;
    use crate::operations::tests::operation_in;

    pub(crate) fn principal(user_id: &str, roles: &[Role]) -> Principal {
        let at = OffsetDateTime::UNIX_EPOCH;
        Principal {
            key: ApiKey {
                id: format!("key_{user_id}").into(),
                name: None,
                customer_id: Some("cus_1".into()),
                user_id: Some(user_id.into()),
                environment: Environment::Test,
                scopes: vec![Scope::OperationsApprove],
                created_at: at,
                expires_at: None,
                revoked_at: None,
                created_by: None,
                lineage: vec![],
                rotated_to: None,
                secret_hash: String::new(),
                version: 1,
            },
            user: Some(User {
                id: user_id.into(),
                customer_id: "cus_1".into(),
                name: "n".into(),
                email: "e@x.io".into(),
                roles: roles.to_vec(),
                status: UserStatus::Active,
                created_at: at,
                version: 1,
                delegation: None,
            }),
        }
    }

    pub(crate) fn pending(count: u8) -> Operation {
        let mut op = operation_in(OperationStatus::PendingApproval);
        op.created_by = "usr_maker".into();
        op.approval_chain = vec![ApprovalRequirement::new(count, Role::Approver)];
        op
    }

    fn code(result: Result<Option<StatusChange>, DomainError>) -> &'static str {
        match result.unwrap_err() {
            DomainError::Forbidden { code, .. } | DomainError::InvalidState { code, .. } => code,
            other => panic!("{other:?}"),
        }
    }

    const NOW: OffsetDateTime = OffsetDateTime::UNIX_EPOCH;

    #[test]
    fn the_creator_never_approves_their_own_operation() {
        let mut op = pending(1);
        let maker_with_approver_role = principal("usr_maker", &[Role::Maker, Role::Approver]);
        assert_eq!(
            code(record_decision(
                &mut op,
                &maker_with_approver_role,
                Decision::Approved,
                None,
                NOW,
                None,
                None
            )),
            "self_approval_forbidden"
        );
        assert!(op.approvals.is_empty() && op.status == OperationStatus::PendingApproval);
    }

    #[test]
    fn the_required_role_is_needed() {
        let mut op = pending(1);
        assert_eq!(
            code(record_decision(
                &mut op,
                &principal("usr_viewer", &[Role::Viewer]),
                Decision::Approved,
                None,
                NOW,
                None,
                None
            )),
            "role_required"
        );
    }

    #[test]
    fn a_key_without_user_cannot_sign() {
        let mut op = pending(1);
        let mut keyonly = principal("usr_x", &[Role::Approver]);
        keyonly.user = None;
        assert_eq!(
            code(record_decision(
                &mut op,
                &keyonly,
                Decision::Approved,
                None,
                NOW,
                None,
                None
            )),
            "user_required"
        );
    }

    #[test]
    fn one_approval_completes_a_single_signature_requirement() {
        let mut op = pending(1);
        let change = record_decision(
            &mut op,
            &principal("usr_a", &[Role::Approver]),
            Decision::Approved,
            Some("ok".into()),
            NOW,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
        assert_eq!(change.cause.code, "approved_by_approver");
        assert_eq!(op.approvals.len(), 1);
    }

    #[test]
    fn two_distinct_approvers_are_needed_for_two_and_nobody_approves_twice() {
        let mut op = pending(2);
        let a = principal("usr_a", &[Role::Approver]);
        assert_eq!(
            record_decision(&mut op, &a, Decision::Approved, None, NOW, None, None).unwrap(),
            None
        );
        assert_eq!(op.status, OperationStatus::PendingApproval);
        assert_eq!(
            code(record_decision(&mut op, &a, Decision::Approved, None, NOW, None, None)),
            "already_decided"
        );
        assert_eq!(
            code(record_decision(
                &mut op,
                &a,
                Decision::Rejected,
                Some("no".into()),
                NOW,
                None,
                None
            )),
            "already_decided"
        );
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Approved,
            None,
            NOW,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
    }

    #[test]
    fn one_rejection_rejects_even_after_an_approval() {
        let mut op = pending(2);
        record_decision(
            &mut op,
            &principal("usr_a", &[Role::Approver]),
            Decision::Approved,
            None,
            NOW,
            None,
            None,
        )
        .unwrap();
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Rejected,
            Some("wrong account".into()),
            NOW,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Rejected);
        assert!(change.cause.message.contains("wrong account"));
        assert_eq!(
            code(record_decision(
                &mut op,
                &principal("usr_c", &[Role::Approver]),
                Decision::Approved,
                None,
                NOW,
                None,
                None
            )),
            "operation_not_pending_approval"
        );
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::access::Role;
    use crate::limits::{Breach, LimitKind};

    fn check(over_limit: OverLimit, breached: bool) -> LimitCheck {
        LimitCheck {
            currency: crate::money::Currency::try_from("CLP".to_string()).unwrap(),
            over_limit,
            breaches: breached
                .then_some(Breach {
                    limit: LimitKind::Daily,
                    ceiling: 1_000,
                    used: 900,
                    requested: 200,
                })
                .into_iter()
                .collect(),
            uses: vec![],
            warnings: vec![],
            payee_review: None,
            payee_findings: vec![],
            payees: vec![],
        }
    }

    fn decide(
        op: &mut Operation,
        user: &str,
        roles: &[Role],
        limits: &LimitCheck,
    ) -> Result<Option<StatusChange>, DomainError> {
        let principal = super::four_eyes_tests::principal(user, roles);
        record_decision(
            op,
            &principal,
            Decision::Approved,
            None,
            OffsetDateTime::UNIX_EPOCH,
            Some(limits),
            None,
        )
    }

    #[test]
    fn over_a_limit_that_escalates_the_last_approval_holds_it_for_the_role_the_limit_names() {
        let escalate = check(OverLimit::Escalate { role: Role::Admin }, true);
        let mut op = super::four_eyes_tests::pending(1);
        assert_eq!(decide(&mut op, "usr_a", &[Role::Approver], &escalate).unwrap(), None);
        assert_eq!(op.status, OperationStatus::PendingApproval);
        let hold = op.limit_hold.clone().expect("held over the limit");
        assert_eq!((hold.limit, hold.role), (LimitKind::Daily, Role::Admin));
        assert_eq!(
            hold.reason,
            "200 CLP more, after 900 approved, passes the daily limit of 1000"
        );
        // An approver without the role cannot give the limit's approval; the admin can.
        let refused = decide(&mut op, "usr_b", &[Role::Approver], &escalate).unwrap_err();
        assert!(
            matches!(
                refused,
                DomainError::Forbidden {
                    code: "role_required",
                    ..
                }
            ),
            "{refused:?}"
        );
        let change = decide(&mut op, "usr_c", &[Role::Admin], &escalate).unwrap().unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
        assert_eq!(change.cause.code, "payout_limit_approved");
        assert_eq!(
            op.approvals.iter().map(|a| a.for_limit).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn over_a_limit_that_refuses_the_last_approval_rejects_it_and_within_it_approves() {
        let mut op = super::four_eyes_tests::pending(1);
        let change = decide(&mut op, "usr_a", &[Role::Approver], &check(OverLimit::Refuse, true))
            .unwrap()
            .unwrap();
        assert_eq!(change.to, OperationStatus::Rejected);
        assert_eq!(change.cause.code, "payout_limit_exceeded");
        let mut op = super::four_eyes_tests::pending(1);
        let change = decide(&mut op, "usr_a", &[Role::Approver], &check(OverLimit::Refuse, false))
            .unwrap()
            .unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
        assert_eq!(op.limit_hold, None);
    }

    #[test]
    fn the_creator_cannot_give_the_limits_approval_either() {
        let escalate = check(OverLimit::Escalate { role: Role::Admin }, true);
        let mut op = super::four_eyes_tests::pending(1);
        decide(&mut op, "usr_a", &[Role::Approver], &escalate).unwrap();
        let refused = decide(&mut op, "usr_maker", &[Role::Admin], &escalate).unwrap_err();
        assert!(matches!(
            refused,
            DomainError::Forbidden {
                code: "self_approval_forbidden",
                ..
            }
        ));
        let again = decide(&mut op, "usr_a", &[Role::Admin, Role::Approver], &escalate).unwrap_err();
        assert!(matches!(
            again,
            DomainError::InvalidState {
                code: "already_decided",
                ..
            }
        ));
    }
}
