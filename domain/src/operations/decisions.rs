//! The four-eyes rules for deciding on an operation.

use super::{Approval, Decision, Operation, OperationStatus, OperationTransition, StatusChange};
use crate::access::Principal;
use crate::cause::Cause;
use crate::error::DomainError;
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
/// approvals approve.
pub fn record_decision(
    operation: &mut Operation,
    principal: &Principal,
    decision: Decision,
    comment: Option<String>,
    now: OffsetDateTime,
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
    let requirement = operation
        .approval_requirement
        .ok_or_else(|| DomainError::invalid_state("no_approval_required", "This operation needs no approval."))?;
    if !requirement.held_by(&user.roles) {
        return Err(DomainError::forbidden(
            "role_required",
            format!(
                "Deciding on this operation needs the role '{}'.",
                requirement.roles_label()
            ),
        ));
    }
    if operation.approvals.iter().any(|a| a.user_id == user.id) {
        return Err(DomainError::invalid_state(
            "already_decided",
            "This user has already decided on this operation.",
        ));
    }
    operation.approvals.push(Approval {
        user_id: user.id.clone(),
        decision,
        comment: comment.clone(),
        at: now,
    });
    let actor = principal.actor();
    match decision {
        Decision::Rejected => {
            let reason = comment.unwrap_or_default();
            let cause = Cause::new(
                "rejected_by_approver",
                format!("Rejected by {}: {reason}", user.id),
                actor,
                now,
            );
            operation.apply(OperationTransition::Reject(cause)).map(Some)
        }
        Decision::Approved => {
            let approvals = operation
                .approvals
                .iter()
                .filter(|a| a.decision == Decision::Approved)
                .count();
            if approvals < requirement.count as usize {
                return Ok(None);
            }
            let cause = Cause::new(
                "approved_by_approver",
                format!(
                    "Approved by {} ({approvals} of {} approval(s))",
                    user.id, requirement.count
                ),
                actor,
                now,
            );
            operation.apply(OperationTransition::Approve(cause)).map(Some)
        }
    }
}

#[cfg(test)]
mod four_eyes_tests {
    use super::*;
    use crate::access::Role;
    use crate::access::{ApiKey, Environment, Scope, User, UserStatus};
    use crate::approvals::ApprovalRequirement;
    use crate::operations::tests::operation_in;

    fn principal(user_id: &str, roles: &[Role]) -> Principal {
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
            }),
        }
    }

    fn pending(count: u8) -> Operation {
        let mut op = operation_in(OperationStatus::PendingApproval);
        op.created_by = "usr_maker".into();
        op.approval_requirement = Some(ApprovalRequirement {
            count,
            role: Role::Approver,
            also_role: None,
        });
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
                NOW
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
                NOW
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
            code(record_decision(&mut op, &keyonly, Decision::Approved, None, NOW)),
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
            record_decision(&mut op, &a, Decision::Approved, None, NOW).unwrap(),
            None
        );
        assert_eq!(op.status, OperationStatus::PendingApproval);
        assert_eq!(
            code(record_decision(&mut op, &a, Decision::Approved, None, NOW)),
            "already_decided"
        );
        assert_eq!(
            code(record_decision(&mut op, &a, Decision::Rejected, Some("no".into()), NOW)),
            "already_decided"
        );
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Approved,
            None,
            NOW,
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
        )
        .unwrap();
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Rejected,
            Some("wrong account".into()),
            NOW,
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
                NOW
            )),
            "operation_not_pending_approval"
        );
    }
}
