use super::*;
use crate::cause::Actor;

pub fn cause(code: &str) -> Cause {
    Cause::new(code, code, Actor::system(), OffsetDateTime::UNIX_EPOCH)
}

fn all_transitions() -> Vec<OperationTransition> {
    use OperationTransition::*;
    vec![
        Approve(cause("a")),
        Reject(cause("r")),
        Cancel(cause("c")),
        StartProcessing(cause("p")),
        Complete(cause("d")),
        CompletePartially(cause("pc")),
        Fail(cause("f")),
        FlagForAttention(cause("n")),
        Expire(cause("e")),
    ]
}

pub fn operation_in(status: OperationStatus) -> Operation {
    Operation {
        id: "op_1".into(),
        customer_id: "cus_1".into(),
        kind: OperationType::Payout,
        currency: Currency::parse("CLP").unwrap(),
        items: vec![],
        workflow: "auto".into(),
        status,
        cause: cause("created"),
        total_amount: 0,
        approval_chain: vec![],
        approval_expires_at: None,
        approvals: vec![],
        created_by: "usr_1".into(),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        metadata: BTreeMap::new(),
        environment: crate::access::Environment::Test,
        source_account_id: None,
        destination_account_id: None,
        file_id: None,
        schedule_id: None,
        occurrence_at: None,
        hold_ttl: None,
        reversal_of: None,
        reversals: vec![],
        decided_by_rule: None,
        limit_hold: None,
        version: 0,
    }
}

#[test]
fn every_allowed_and_refused_transition() {
    use OperationStatus::*;
    let allowed: &[(OperationStatus, OperationStatus)] = &[
        (PendingApproval, Approved),
        (PendingApproval, Rejected),
        (PendingApproval, Cancelled),
        (PendingApproval, Expired),
        (Approved, Processing),
        (Approved, Cancelled),
        (Approved, Failed),
        (Processing, Completed),
        (Processing, PartiallyCompleted),
        (Processing, Failed),
        (Processing, NeedsAttention),
        (NeedsAttention, Processing),
        (NeedsAttention, Completed),
        (NeedsAttention, PartiallyCompleted),
        (NeedsAttention, Failed),
    ];
    let mut checked = 0;
    for from in OperationStatus::ALL {
        for transition in all_transitions() {
            let to = transition.target();
            let code = transition.clone().into_cause().code;
            let mut op = operation_in(from);
            let result = op.apply(transition);
            if allowed.contains(&(from, to)) {
                let change = result.unwrap_or_else(|e| panic!("{from:?} -> {to:?}: {e}"));
                assert_eq!((change.from, change.to), (Some(from), to));
                assert_eq!(op.status, to);
                assert_eq!(op.cause.code, code, "the cause is recorded on the operation");
            } else {
                let err = result.expect_err(&format!("{from:?} -> {to:?} must be refused"));
                assert!(matches!(err, DomainError::InvalidState { .. }));
                assert_eq!(op.status, from, "a refused transition changes nothing");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 10 * 9);
}

#[test]
fn final_states_have_no_way_out() {
    for from in OperationStatus::ALL.into_iter().filter(|s| s.is_final()) {
        assert!(OperationStatus::ALL.iter().all(|to| !from.can_become(*to)), "{from:?}");
    }
}

#[test]
fn statuses_round_trip_through_their_names() {
    for status in OperationStatus::ALL {
        assert_eq!(OperationStatus::parse(status.as_str()), Some(status));
        let json = serde_json::to_string(&status).unwrap();
        assert_eq!(json, format!("\"{}\"", status.as_str()));
    }
}

mod chains {
    use super::*;
    use crate::access::Role;
    use crate::approvals::ApprovalRequirement;
    use crate::operations::decisions::four_eyes_tests::principal;

    const NOW: OffsetDateTime = OffsetDateTime::UNIX_EPOCH;

    fn chained(chain: Vec<ApprovalRequirement>) -> Operation {
        let mut op = operation_in(OperationStatus::PendingApproval);
        op.created_by = "usr_maker".into();
        op.approval_chain = chain;
        op
    }

    fn approve(op: &mut Operation, user: &str, roles: &[Role]) -> Result<Option<StatusChange>, DomainError> {
        record_decision(op, &principal(user, roles), Decision::Approved, None, NOW, None, None)
    }

    fn refusal(result: Result<Option<StatusChange>, DomainError>) -> &'static str {
        match result.unwrap_err() {
            DomainError::Forbidden { code, .. } | DomainError::InvalidState { code, .. } => code,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_chain_is_signed_step_by_step_in_order() {
        let mut op = chained(vec![
            ApprovalRequirement::new(1, Role::Approver),
            ApprovalRequirement::new(1, Role::Treasury),
        ]);
        let needed = |op: &Operation| {
            op.approvals_needed()
                .iter()
                .map(|n| (n.count, n.role))
                .collect::<Vec<_>>()
        };
        assert_eq!(needed(&op), [(1, Role::Approver), (1, Role::Treasury)]);
        // Treasury cannot sign before the approver's step is done.
        assert_eq!(refusal(approve(&mut op, "usr_t", &[Role::Treasury])), "role_required");
        assert_eq!(approve(&mut op, "usr_a", &[Role::Approver]).unwrap(), None);
        assert_eq!(needed(&op), [(1, Role::Treasury)]);
        // Now an approver without the treasury role no longer can.
        assert_eq!(refusal(approve(&mut op, "usr_b", &[Role::Approver])), "role_required");
        let change = approve(&mut op, "usr_t", &[Role::Treasury]).unwrap().unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
        assert_eq!(change.cause.message, "Approved by usr_t (2 of 2 approval(s))");
        assert!(op.approvals_needed().is_empty());
    }

    #[test]
    fn a_user_holding_both_roles_signs_one_step_only() {
        let mut op = chained(vec![
            ApprovalRequirement::new(1, Role::Approver),
            ApprovalRequirement::new(1, Role::Treasury),
        ]);
        let both = [Role::Approver, Role::Treasury];
        approve(&mut op, "usr_a", &both).unwrap();
        assert_eq!(refusal(approve(&mut op, "usr_a", &both)), "already_decided");
        assert_eq!(op.status, OperationStatus::PendingApproval);
    }

    #[test]
    fn a_step_naming_users_takes_only_them() {
        let mut step = ApprovalRequirement::new(2, Role::Approver);
        step.users = vec!["usr_a".into(), "usr_b".into(), "usr_c".into()];
        let mut op = chained(vec![step]);
        assert_eq!(op.approvals_needed()[0].users.len(), 3);
        assert_eq!(
            refusal(approve(&mut op, "usr_d", &[Role::Approver])),
            "named_signer_required"
        );
        // Named, but without the step's role.
        assert_eq!(refusal(approve(&mut op, "usr_b", &[Role::Viewer])), "role_required");
        assert_eq!(approve(&mut op, "usr_c", &[Role::Approver]).unwrap(), None);
        let change = approve(&mut op, "usr_a", &[Role::Approver]).unwrap().unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
    }

    #[test]
    fn a_rejection_at_any_step_rejects() {
        let mut op = chained(vec![
            ApprovalRequirement::new(1, Role::Approver),
            ApprovalRequirement::new(1, Role::Treasury),
        ]);
        approve(&mut op, "usr_a", &[Role::Approver]).unwrap();
        let change = record_decision(
            &mut op,
            &principal("usr_t", &[Role::Treasury]),
            Decision::Rejected,
            Some("too much".into()),
            NOW,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Rejected);
        assert!(op.approvals_needed().is_empty());
    }
}

#[test]
fn an_approval_expires_only_when_still_pending_past_its_time() {
    let at = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
    let mut op = operation_in(OperationStatus::PendingApproval);
    op.approval_chain = vec![crate::approvals::ApprovalRequirement::new(
        2,
        crate::access::Role::Approver,
    )];
    assert!(super::expiry::expire(&mut op, at).is_none(), "no ttl, no expiry");
    op.approval_expires_at = Some(at);
    assert!(super::expiry::expire(&mut op, at - time::Duration::seconds(1)).is_none());
    let change = super::expiry::expire(&mut op, at).unwrap().unwrap();
    assert_eq!(
        (change.from, change.to),
        (Some(OperationStatus::PendingApproval), OperationStatus::Expired)
    );
    assert_eq!(change.cause.code, "approval_expired");
    assert!(
        change.cause.message.contains("0 of 2 approval(s)"),
        "{}",
        change.cause.message
    );
    let mut approved = operation_in(OperationStatus::Approved);
    approved.approval_expires_at = Some(at);
    assert!(super::expiry::expire(&mut approved, at).is_none());
}
