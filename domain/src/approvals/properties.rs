//! Property tests of workflow evaluation.

use super::*;
use proptest::prelude::*;

fn range() -> impl Strategy<Value = Option<Range>> {
    proptest::option::of(
        (proptest::option::of(0i64..2_000), proptest::option::of(0i64..2_000))
            .prop_map(|(gte, lte)| Range { gte, lte }),
    )
}

fn rule() -> impl Strategy<Value = Rule> {
    let conditions = (
        range(),
        range(),
        range(),
        proptest::option::of(proptest::sample::subsequence(vec!["psp-local:a", "psp-local:b"], 0..=2)),
    );
    let action = prop_oneof![
        Just(Action::Approve),
        Just(Action::Reject { reason: "no".into() }),
        (1u8..4).prop_map(|count| Action::approvals(count, Role::Approver)),
    ];
    (conditions, action).prop_map(|((total_amount, item_amount, item_count, rails), then)| Rule {
        when: Conditions {
            total_amount,
            item_amount,
            item_count,
            rail: rails.map(|r| r.into_iter().map(String::from).collect()),
            ..Conditions::default()
        },
        then,
    })
}

proptest! {
    /// The verdict comes from the first rule that holds; rules after it never matter, and
    /// only a workflow where no rule holds rejects without a rule.
    #[test]
    fn the_first_rule_that_holds_decides(rules in proptest::collection::vec(rule(), 1..8), amounts in proptest::collection::vec(1i64..1_000, 1..5), on_b in any::<bool>()) {
        let currency = Currency::parse("CLP").unwrap();
        let rail = if on_b { "psp-local:b" } else { "psp-local:a" };
        let facts = Facts { kind: OperationType::Payout, currency: &currency, total_amount: amounts.iter().sum(), items: amounts.iter().map(|a| (*a, rail, "RUT")).collect(), metadata: &super::tests::NO_METADATA };
        let definition = WorkflowDefinition { description: None, matching: Matching::First,
        approval_ttl: None, rules: rules.clone() };
        let verdict = definition.evaluate(&facts);
        let first = rules.iter().position(|r| r.when.hold_for(&facts));
        match (&verdict, first) {
            (Verdict::Approve { rule }, Some(i)) | (Verdict::RequireApprovals { rule, .. }, Some(i)) => prop_assert_eq!(*rule, i),
            (Verdict::Reject { rule, .. }, first) => prop_assert_eq!(*rule, first),
            (other, None) => prop_assert!(false, "{:?} without a matching rule", other),
        }
        if let Some(i) = first {
            let truncated = WorkflowDefinition { description: None, matching: Matching::First,
        approval_ttl: None, rules: rules[..=i].to_vec() };
            prop_assert_eq!(truncated.evaluate(&facts), verdict);
        }
    }
}
