use super::*;

pub(crate) static NO_METADATA: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

pub(crate) fn clp() -> Currency {
    Currency::parse("CLP").unwrap()
}

pub(crate) fn facts<'a>(currency: &'a Currency, items: Vec<(i64, &'a str, &'a str)>) -> Facts<'a> {
    Facts {
        kind: OperationType::Payout,
        currency,
        total_amount: items.iter().map(|i| i.0).sum(),
        items,
        metadata: &NO_METADATA,
    }
}

pub(crate) fn rule(when: serde_json::Value, then: Action) -> Rule {
    Rule {
        when: serde_json::from_value(when).unwrap(),
        then,
    }
}

fn first_rule_matches(when: serde_json::Value, facts: &Facts) -> bool {
    let definition = WorkflowDefinition {
        description: None,
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![rule(when, Action::Approve)],
    };
    matches!(definition.evaluate(facts), Verdict::Approve { rule: 0 })
}

#[test]
fn every_condition_kind_matches_and_misses() {
    let clp = clp();
    let f = facts(
        &clp,
        vec![(100, "psp-local:sandbox", "RUT"), (900, "psp-local:spei", "DNI")],
    );
    let cases = [
        (serde_json::json!({"total_amount": {"gte": 1000}}), true),
        (serde_json::json!({"total_amount": {"gte": 1001}}), false),
        (serde_json::json!({"total_amount": {"lte": 999}}), false),
        (serde_json::json!({"item_amount": {"gte": 500}}), true),
        (serde_json::json!({"item_amount": {"gte": 901}}), false),
        (serde_json::json!({"item_count": {"gte": 2, "lte": 2}}), true),
        (serde_json::json!({"item_count": {"gte": 3}}), false),
        (serde_json::json!({"currency": ["CLP", "USD"]}), true),
        (serde_json::json!({"currency": ["USD"]}), false),
        (serde_json::json!({"rail": ["psp-local:spei"]}), true),
        (serde_json::json!({"rail": ["psp-local:other"]}), false),
        (serde_json::json!({"type": ["payout"]}), true),
        (serde_json::json!({"type": ["collection"]}), false),
        (serde_json::json!({"beneficiary_id_type": ["DNI"]}), true),
        (serde_json::json!({"beneficiary_id_type": ["PASSPORT"]}), false),
        (serde_json::json!({}), true),
        (
            serde_json::json!({"currency": ["CLP"], "total_amount": {"gte": 5000}}),
            false,
        ),
    ];
    for (when, expected) in cases {
        assert_eq!(first_rule_matches(when.clone(), &f), expected, "{when}");
    }
}

#[test]
fn first_matching_rule_wins_and_each_action_gives_its_verdict() {
    let clp = clp();
    let definition = WorkflowDefinition {
        description: None,
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![
            rule(
                serde_json::json!({"total_amount": {"gte": 1_000_000}}),
                Action::Reject {
                    reason: "too large".into(),
                },
            ),
            rule(
                serde_json::json!({"total_amount": {"gte": 10_000}}),
                Action::approvals(2, Role::Approver),
            ),
            rule(serde_json::json!({}), Action::Approve),
        ],
    };
    assert_eq!(
        definition.evaluate(&facts(&clp, vec![(2_000_000, "r", "x")])),
        Verdict::Reject {
            rule: Some(0),
            reason: "too large".into()
        }
    );
    assert_eq!(
        definition.evaluate(&facts(&clp, vec![(20_000, "r", "x")])),
        Verdict::RequireApprovals {
            rule: 1,
            chain: vec![ApprovalRequirement::new(2, Role::Approver)]
        }
    );
    assert_eq!(
        definition.evaluate(&facts(&clp, vec![(5, "r", "x")])),
        Verdict::Approve { rule: 2 }
    );
}

#[test]
fn no_matching_rule_rejects() {
    let clp = clp();
    let definition = WorkflowDefinition {
        description: None,
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![rule(serde_json::json!({"currency": ["USD"]}), Action::Approve)],
    };
    assert!(matches!(
        definition.evaluate(&facts(&clp, vec![(5, "r", "x")])),
        Verdict::Reject { rule: None, .. }
    ));
}

#[test]
fn builtins_approve_or_ask_for_one_approver() {
    let clp = clp();
    let f = facts(&clp, vec![(5, "r", "x")]);
    assert_eq!(builtin("auto").unwrap().evaluate(&f), Verdict::Approve { rule: 0 });
    assert_eq!(
        builtin("two_step").unwrap().evaluate(&f),
        Verdict::RequireApprovals {
            rule: 0,
            chain: vec![ApprovalRequirement::new(1, Role::Approver)]
        }
    );
    assert!(builtin("three_step").is_none());
}

#[test]
fn invalid_definitions_name_the_field() {
    let bad = |json: serde_json::Value| -> String {
        let def: WorkflowDefinition = serde_json::from_value(json).unwrap();
        match def.validate(&|rail| rail == "psp-local:sandbox").unwrap_err() {
            DomainError::InvalidRequest { param, .. } => param.unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(bad(serde_json::json!({"rules": []})), "rules");
    assert_eq!(
        bad(
            serde_json::json!({"rules": [{"then": {"action": "approve"}}, {"when": {"total_amount": {"gte": 5, "lte": 1}}, "then": {"action": "approve"}}]})
        ),
        "rules[1].when.total_amount"
    );
    assert_eq!(
        bad(serde_json::json!({"rules": [{"then": {"action": "require_approvals", "count": 0, "role": "approver"}}]})),
        "rules[0].then.count"
    );
    assert_eq!(
        bad(serde_json::json!({"rules": [{"then": {"action": "reject", "reason": " "}}]})),
        "rules[0].then.reason"
    );
    assert_eq!(
        bad(serde_json::json!({"rules": [{"when": {"rail": []}, "then": {"action": "approve"}}]})),
        "rules[0].when.rail"
    );
    // Free text here is stored and shown to operators as everywhere else: no control,
    // bidirectional or invisible characters (the fuzzer found a C1 control let through).
    assert_eq!(
        bad(serde_json::json!({"rules": [{"then": {"action": "reject", "reason": "no\u{9b}"}}]})),
        "rules[0].then.reason"
    );
    assert_eq!(
        bad(serde_json::json!({"description": "a\u{202E}b", "rules": [{"then": {"action": "approve"}}]})),
        "description"
    );
    assert_eq!(
        bad(
            serde_json::json!({"rules": [{"when": {"beneficiary_id_type": ["RUT", "x\u{7}"]}, "then": {"action": "approve"}}]})
        ),
        "rules[0].when.beneficiary_id_type[1]"
    );
    assert_eq!(
        bad(serde_json::json!({"rules": [{"when": {"rail": ["ñ".repeat(65)]}, "then": {"action": "approve"}}]})),
        "rules[0].when.rail[0]"
    );
    assert_eq!(
        bad(
            serde_json::json!({"rules": [{"when": {"rail": ["psp-local:sandbox", "psp-local:sandbx"]}, "then": {"action": "approve"}}]})
        ),
        "rules[0].when.rail[1]"
    );
    assert_eq!(
        bad(
            serde_json::json!({"rules": [{"when": {"beneficiary_id_type": ["RUT", "R U T"]}, "then": {"action": "approve"}}]})
        ),
        "rules[0].when.beneficiary_id_type[1]"
    );
}

#[test]
fn names_are_checked() {
    assert!(valid_name("two_step") && valid_name("big-payouts-2"));
    assert!(!valid_name("") && !valid_name("Two") && !valid_name("a b") && !valid_name(&"x".repeat(65)));
}

#[test]
fn a_metadata_condition_holds_when_each_key_has_its_value() {
    let currency = clp();
    let definition = WorkflowDefinition {
        description: None,
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![
            rule(
                serde_json::json!({"metadata": {"run": "payroll", "entity": "cl"}}),
                Action::approvals(2, Role::Approver),
            ),
            rule(serde_json::json!({}), Action::Approve),
        ],
    };
    let tagged: std::collections::BTreeMap<String, String> = [("run", "payroll"), ("entity", "cl"), ("batch", "7")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    let mut payroll = facts(&currency, vec![(1_000, "psp-local:sandbox", "RUT")]);
    payroll.metadata = &tagged;
    assert!(matches!(
        definition.evaluate(&payroll),
        Verdict::RequireApprovals { rule: 0, .. }
    ));
    let half: std::collections::BTreeMap<String, String> = [("run".to_owned(), "payroll".to_owned())].into();
    payroll.metadata = &half;
    assert_eq!(definition.evaluate(&payroll), Verdict::Approve { rule: 1 });
    let untagged = facts(&currency, vec![(1_000, "psp-local:sandbox", "RUT")]);
    assert_eq!(definition.evaluate(&untagged), Verdict::Approve { rule: 1 });
    let empty = WorkflowDefinition {
        description: None,
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![rule(serde_json::json!({"metadata": {}}), Action::Approve)],
    };
    match empty.validate(&|_| true).unwrap_err() {
        DomainError::InvalidRequest { param, code, .. } => {
            assert_eq!(
                (param.as_deref(), code),
                (Some("rules[0].when.metadata"), "invalid_metadata")
            )
        }
        other => panic!("{other:?}"),
    }
}

fn tiers(matching: Matching) -> WorkflowDefinition {
    serde_json::from_value(serde_json::json!({
        "match": matching,
        "rules": [
            {"when": {}, "then": {"action": "require_approvals", "count": 1, "role": "approver"}},
            {"when": {"total_amount": {"gte": 1_000_001}}, "then": {"action": "require_approvals", "steps": [
                {"count": 1, "role": "approver"}, {"count": 1, "role": "treasury"}]}},
            {"when": {"total_amount": {"gte": 50_000_001}}, "then": {"action": "require_approvals", "count": 2,
                "role": "treasury", "users": ["usr_01aaaaaaaaaaaaaaaaaaaaaaaa", "usr_01bbbbbbbbbbbbbbbbbbbbbbbb",
                "usr_01cccccccccccccccccccccccc"]}},
            {"when": {"currency": ["USD"]}, "then": {"action": "reject", "reason": "no dollars here"}},
        ]
    }))
    .unwrap()
}

#[test]
fn the_strictest_matching_rule_decides_whatever_its_place() {
    let clp = clp();
    let strictest = tiers(Matching::Strictest);
    strictest.validate(&|_| true).unwrap();
    let chain_of = |amount: i64| match strictest.evaluate(&facts(&clp, vec![(amount, "r", "x")])) {
        Verdict::RequireApprovals { rule, chain } => {
            (rule, chain.iter().map(|s| (s.count, s.role)).collect::<Vec<_>>())
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(chain_of(1_000_000), (0, vec![(1, Role::Approver)]));
    assert_eq!(chain_of(1_000_001), (1, vec![(1, Role::Approver), (1, Role::Treasury)]));
    // Two approvals in two steps are stricter than two in one (a signer more to pass).
    assert_eq!(
        chain_of(60_000_000),
        (1, vec![(1, Role::Approver), (1, Role::Treasury)])
    );
    let usd = Currency::parse("USD").unwrap();
    assert!(matches!(
        strictest.evaluate(&facts(&usd, vec![(5, "r", "x")])),
        Verdict::Reject { rule: Some(3), .. }
    ));
    // Read first-match, the catch-all at the top decides everything.
    let first = tiers(Matching::First);
    assert!(matches!(
        first.evaluate(&facts(&usd, vec![(60_000_000, "r", "x")])),
        Verdict::RequireApprovals { rule: 0, .. }
    ));
}

#[test]
fn more_approvals_are_stricter_than_fewer_steps() {
    let clp = clp();
    let mut three = ApprovalRequirement::new(3, Role::Treasury);
    three.users = vec![
        "usr_01aaaaaaaaaaaaaaaaaaaaaaaa".into(),
        "usr_01bbbbbbbbbbbbbbbbbbbbbbbb".into(),
        "usr_01cccccccccccccccccccccccc".into(),
    ];
    let definition = WorkflowDefinition {
        description: None,
        matching: Matching::Strictest,
        approval_ttl: None,
        rules: vec![
            rule(
                serde_json::json!({}),
                Action::RequireApprovals {
                    steps: vec![
                        ApprovalRequirement::new(1, Role::Approver),
                        ApprovalRequirement::new(1, Role::Treasury),
                    ],
                },
            ),
            rule(serde_json::json!({}), Action::Approve),
            rule(
                serde_json::json!({}),
                Action::RequireApprovals {
                    steps: vec![three.clone()],
                },
            ),
        ],
    };
    assert_eq!(
        definition.evaluate(&facts(&clp, vec![(5, "r", "x")])),
        Verdict::RequireApprovals {
            rule: 2,
            chain: vec![three]
        }
    );
}

#[test]
fn an_action_reads_flat_or_as_steps_and_writes_back_the_same() {
    for written in [
        serde_json::json!({"action": "require_approvals", "count": 2, "role": "approver"}),
        serde_json::json!({"action": "require_approvals", "count": 1, "role": "treasury",
            "users": ["usr_01aaaaaaaaaaaaaaaaaaaaaaaa"]}),
        serde_json::json!({"action": "require_approvals", "steps": [
            {"count": 1, "role": "approver"}, {"count": 1, "role": "treasury", "also_role": "admin"}]}),
        serde_json::json!({"action": "reject", "reason": "no"}),
        serde_json::json!({"action": "approve"}),
    ] {
        let action: Action = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&action).unwrap(), written);
    }
    for refused in [
        serde_json::json!({"action": "require_approvals", "count": 1, "role": "approver", "steps": []}),
        serde_json::json!({"action": "approve", "users": []}),
        serde_json::json!({"action": "require_approvals", "steps": [{"count": 1}]}),
        serde_json::json!({"action": "require_approvals", "steps": [{"count": 1, "role": "approver", "who": 1}]}),
    ] {
        assert!(serde_json::from_value::<Action>(refused.clone()).is_err(), "{refused}");
    }
}

#[test]
fn a_chain_that_could_never_be_signed_is_refused_at_its_path() {
    let refused = |then: serde_json::Value| {
        let definition: WorkflowDefinition =
            serde_json::from_value(serde_json::json!({"rules": [{"when": {}, "then": then}]})).unwrap();
        match definition.validate(&|_| true).unwrap_err() {
            DomainError::InvalidRequest { param, code, .. } => (param.unwrap(), code),
            other => panic!("{other:?}"),
        }
    };
    let step = |count: u8| serde_json::json!({"count": count, "role": "approver"});
    assert_eq!(
        refused(serde_json::json!({"action": "require_approvals", "steps": []})),
        ("rules[0].then.steps".to_string(), "invalid_steps")
    );
    assert_eq!(
        refused(serde_json::json!({"action": "require_approvals", "steps": [step(1), step(0)]})),
        ("rules[0].then.steps[1].count".to_string(), "invalid_count")
    );
    assert_eq!(
        refused(serde_json::json!({"action": "require_approvals", "count": 11, "role": "approver"})),
        ("rules[0].then.count".to_string(), "invalid_count")
    );
    assert_eq!(
        refused(serde_json::json!({"action": "require_approvals", "steps": [step(6), step(5)]})),
        ("rules[0].then.steps".to_string(), "too_many_approvals")
    );
    assert_eq!(
        refused(
            serde_json::json!({"action": "require_approvals", "count": 2, "role": "approver",
            "users": ["usr_01aaaaaaaaaaaaaaaaaaaaaaaa"]})
        ),
        ("rules[0].then.users".to_string(), "invalid_users")
    );
    assert_eq!(
        refused(
            serde_json::json!({"action": "require_approvals", "steps": [step(1), {"count": 1,
            "role": "approver", "users": ["usr_01aaaaaaaaaaaaaaaaaaaaaaaa", "bob"]}]})
        ),
        ("rules[0].then.steps[1].users[1]".to_string(), "invalid_user")
    );
}
