//! Approval floors: what a customer requires of every operation of one type, whatever
//! workflow it names, and how floor and workflow combine (the stricter decides).

use super::{Action, ApprovalRequirement, Conditions, Facts, Matching, Rule, Verdict, WorkflowDefinition};
use crate::access::{Environment, Role};
use crate::operation_type::OperationType;

/// Where a customer's approval floor for one operation type is kept: beside its workflows,
/// under a name no workflow can take (`valid_name` refuses `:`).
pub fn floor_name(kind: OperationType) -> String {
    format!("floor:{}", kind.as_str())
}

/// The floor a customer has until its admin sets one: in production one approval by an
/// `approver` (nothing moves on one person's word), in the test environment none.
pub fn default_floor(environment: Environment) -> WorkflowDefinition {
    let then = match environment {
        Environment::Production => Action::approvals(1, Role::Approver),
        Environment::Test => Action::Approve,
    };
    WorkflowDefinition {
        description: Some("Default floor".into()),
        matching: Matching::First,
        approval_ttl: None,
        rules: vec![Rule {
            when: Conditions::default(),
            then,
        }],
    }
}

impl WorkflowDefinition {
    /// What an approval floor asks of an operation: its first matching rule's verdict, or
    /// nothing when no rule matches (a floor only ever adds).
    pub fn floor_verdict(&self, facts: &Facts) -> Verdict {
        match self.evaluate(facts) {
            Verdict::Reject { rule: None, .. } => Verdict::Approve { rule: usize::MAX },
            verdict => verdict,
        }
    }
}

/// Which verdict decides an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Decider {
    Workflow,
    Floor,
    Both,
}

/// The stricter of the named workflow's verdict and the customer's floor: reject over
/// approvals over approve; of two chains, step by step the larger count and both roles (the
/// longer chain's extra steps as they are), so neither can ask less than it did alone.
pub fn stricter(workflow: Verdict, floor: Verdict) -> (Verdict, Decider) {
    use Verdict::*;
    match (workflow, floor) {
        (reject @ Reject { .. }, _) => (reject, Decider::Workflow),
        (_, reject @ Reject { .. }) => (reject, Decider::Floor),
        (RequireApprovals { rule, chain: w }, RequireApprovals { chain: f, .. }) => {
            let chain: Vec<ApprovalRequirement> = (0..w.len().max(f.len()))
                .map(|i| match (w.get(i), f.get(i)) {
                    (Some(w), Some(f)) => both(w, f),
                    (Some(only), None) | (None, Some(only)) => only.clone(),
                    (None, None) => unreachable!("i is below the longer chain's length"),
                })
                .collect();
            let decider = if chain == w { Decider::Workflow } else { Decider::Both };
            (RequireApprovals { rule, chain }, decider)
        }
        (require @ RequireApprovals { .. }, Approve { .. }) => (require, Decider::Workflow),
        (Approve { .. }, require @ RequireApprovals { .. }) => (require, Decider::Floor),
        (approve @ Approve { .. }, Approve { .. }) => (approve, Decider::Workflow),
    }
}

/// One step both a workflow and a floor ask for: the larger count, signed by users holding
/// both roles (and named by the workflow, if it names them, else by the floor).
fn both(w: &ApprovalRequirement, f: &ApprovalRequirement) -> ApprovalRequirement {
    let also_role = [w.also_role, Some(f.role), f.also_role]
        .into_iter()
        .flatten()
        .find(|role| *role != w.role);
    ApprovalRequirement {
        count: w.count.max(f.count),
        role: w.role,
        also_role,
        users: if w.users.is_empty() {
            f.users.clone()
        } else {
            w.users.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::tests::{clp, facts, rule};

    #[test]
    fn the_stricter_of_workflow_and_floor_decides() {
        let needs = |count, role| Verdict::RequireApprovals {
            rule: 0,
            chain: vec![ApprovalRequirement::new(count, role)],
        };
        let approve = Verdict::Approve { rule: 0 };
        let reject = Verdict::Reject {
            rule: Some(0),
            reason: "no".into(),
        };
        assert_eq!(
            stricter(approve.clone(), needs(1, Role::Approver)),
            (needs(1, Role::Approver), Decider::Floor)
        );
        assert_eq!(
            stricter(needs(2, Role::Approver), approve.clone()).0,
            needs(2, Role::Approver)
        );
        assert_eq!(
            stricter(approve.clone(), reject.clone()),
            (reject.clone(), Decider::Floor)
        );
        assert_eq!(stricter(reject.clone(), needs(3, Role::Admin)).0, reject);
        assert_eq!(
            stricter(needs(1, Role::Approver), needs(2, Role::Approver)).0,
            needs(2, Role::Approver)
        );
        let (both, decider) = stricter(needs(2, Role::Approver), needs(1, Role::Admin));
        assert_eq!(decider, Decider::Both);
        let Verdict::RequireApprovals { chain, .. } = both else {
            panic!()
        };
        let requirement = &chain[0];
        assert_eq!(
            (requirement.count, requirement.role, requirement.also_role),
            (2, Role::Approver, Some(Role::Admin))
        );
        assert!(requirement.held_by(&[Role::Approver, Role::Admin]) && !requirement.held_by(&[Role::Approver]));
        assert_eq!(stricter(approve.clone(), approve.clone()).0, approve);
    }

    #[test]
    fn a_floor_hardens_a_chain_step_by_step_and_keeps_the_longer_chains_steps() {
        let mut named = ApprovalRequirement::new(1, Role::Approver);
        named.users = vec!["usr_01aaaaaaaaaaaaaaaaaaaaaaaa".into()];
        let workflow = Verdict::RequireApprovals {
            rule: 2,
            chain: vec![named.clone(), ApprovalRequirement::new(1, Role::Treasury)],
        };
        let floor = Verdict::RequireApprovals {
            rule: 0,
            chain: vec![ApprovalRequirement::new(2, Role::Admin)],
        };
        let (merged, decider) = stricter(workflow, floor);
        assert_eq!(decider, Decider::Both);
        let Verdict::RequireApprovals { rule: 2, chain } = merged else {
            panic!("{merged:?}")
        };
        let first = ApprovalRequirement {
            count: 2,
            also_role: Some(Role::Admin),
            ..named
        };
        assert_eq!(chain, vec![first, ApprovalRequirement::new(1, Role::Treasury)]);
        // A floor longer than the workflow's chain adds its steps after.
        let (merged, _) = stricter(
            Verdict::RequireApprovals {
                rule: 0,
                chain: vec![ApprovalRequirement::new(1, Role::Approver)],
            },
            Verdict::RequireApprovals {
                rule: 0,
                chain: vec![
                    ApprovalRequirement::new(1, Role::Approver),
                    ApprovalRequirement::new(1, Role::Admin),
                ],
            },
        );
        assert!(
            matches!(merged, Verdict::RequireApprovals { chain, .. } if chain.len() == 2 && chain[1].role == Role::Admin)
        );
    }

    #[test]
    fn a_floor_without_a_matching_rule_asks_nothing_and_production_starts_with_one_approval() {
        let clp = clp();
        let f = facts(&clp, vec![(5, "r", "x")]);
        let floor = WorkflowDefinition {
            description: None,
            matching: Matching::First,
            approval_ttl: None,
            rules: vec![rule(
                serde_json::json!({"currency": ["USD"]}),
                Action::Reject { reason: "no".into() },
            )],
        };
        assert!(matches!(floor.floor_verdict(&f), Verdict::Approve { .. }));
        assert!(matches!(
            default_floor(Environment::Production).floor_verdict(&f),
            Verdict::RequireApprovals { chain, .. } if chain == [ApprovalRequirement::new(1, Role::Approver)]
        ));
        assert!(matches!(
            default_floor(Environment::Test).floor_verdict(&f),
            Verdict::Approve { .. }
        ));
    }
}
