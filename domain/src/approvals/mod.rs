//! Approval workflows: ordered rules, first match wins.

mod action;
mod floor;
mod use_cases;

pub use action::Action;
pub use floor::{default_floor, floor_name, stricter, Decider};
pub use use_cases::ApprovalFloor;

use crate::access::Role;
use crate::error::DomainError;
use crate::ids::{CustomerId, UserId};
use crate::money::Currency;
use crate::operation_type::OperationType;
use crate::validate::check_text;
use serde::{Deserialize, Serialize};

/// An inclusive range; either end may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gte: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lte: Option<i64>,
}

impl Range {
    fn contains(&self, value: i64) -> bool {
        self.gte.is_none_or(|min| value >= min) && self.lte.is_none_or(|max| value <= max)
    }
}

/// When a rule applies. Every condition given must hold; an absent condition always holds.
/// List conditions on items (`rail`, `beneficiary_id_type`, `item_amount`) hold when **any**
/// item matches, so "any item above X needs approval" is one rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_amount: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_amount: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_count: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Vec<Currency>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub kind: Option<Vec<OperationType>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beneficiary_id_type: Option<Vec<String>>,
    /// Holds when the operation's metadata has each of these keys with its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
}

/// One step of an approval chain: `count` approvals by distinct users holding `role`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequirement {
    pub count: u8,
    pub role: Role,
    /// A second role every approver must hold too, when a customer's approval floor and the
    /// named workflow ask for different roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_role: Option<Role>,
    /// When given, only these users (holding the role as well) may sign this step: "two of
    /// three named treasurers".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserId>,
}

/// A chain as a cause says it: `1 approval(s) by role approver, then 1 by role treasury`.
pub fn chain_label(chain: &[ApprovalRequirement]) -> String {
    chain
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let what = if i == 0 { " approval(s)" } else { "" };
            let among = match step.users.is_empty() {
                true => String::new(),
                false => format!(
                    " among {}",
                    step.users.iter().map(|u| u.as_str()).collect::<Vec<_>>().join(", ")
                ),
            };
            format!("{}{what} by role {}{among}", step.count, step.roles_label())
        })
        .collect::<Vec<_>>()
        .join(", then ")
}

/// The most steps a chain has, and the most approvals it asks for in all.
pub const MAX_STEPS: usize = 5;
pub const MAX_APPROVALS: usize = 10;

impl ApprovalRequirement {
    pub fn new(count: u8, role: Role) -> ApprovalRequirement {
        ApprovalRequirement {
            count,
            role,
            also_role: None,
            users: vec![],
        }
    }

    pub fn held_by(&self, roles: &[Role]) -> bool {
        roles.contains(&self.role) && self.also_role.is_none_or(|r| roles.contains(&r))
    }

    /// Whether this user may sign this step: the roles, and the name when the step names users.
    pub fn signable_by(&self, user: &UserId, roles: &[Role]) -> bool {
        self.held_by(roles) && (self.users.is_empty() || self.users.contains(user))
    }

    /// Role names as a message shows them: `approver` or `approver and admin`.
    pub fn roles_label(&self) -> String {
        match self.also_role {
            Some(also) => format!("{} and {}", self.role.name(), also.name()),
            None => self.role.name().to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub when: Conditions,
    pub then: Action,
}

/// Which of the rules that match an operation decides it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// The first, in order: rules read as "if … else if …".
    #[default]
    First,
    /// The strictest: a rejection over any approvals, more approvals over fewer, approvals over
    /// none; of equals, the first. Tiers can then be written in any order.
    Strictest,
}

impl Matching {
    fn is_first(&self) -> bool {
        *self == Matching::First
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDefinition {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "match", skip_serializing_if = "Matching::is_first")]
    pub matching: Matching,
    pub rules: Vec<Rule>,
    /// Seconds an operation waits for its approvals before it expires; none: it waits until
    /// decided or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_ttl: Option<u32>,
}

/// The shortest and longest `approval_ttl`: five minutes and thirty days.
pub const APPROVAL_TTL: std::ops::RangeInclusive<u32> = 300..=2_592_000;

/// When an operation made at `at` and waiting for approvals expires: the shorter of its
/// workflow's and its floor's `approval_ttl`, whole seconds (none if neither has one).
pub fn approval_expiry(
    at: time::OffsetDateTime,
    workflow: &WorkflowDefinition,
    floor: &WorkflowDefinition,
) -> Option<time::OffsetDateTime> {
    let ttl = [workflow.approval_ttl, floor.approval_ttl]
        .into_iter()
        .flatten()
        .min()?;
    let at = at.replace_nanosecond(0).expect("0 is a valid nanosecond");
    Some(at + time::Duration::seconds(i64::from(ttl)))
}

/// Who a stored definition belongs to; a customer's overrides the platform's of the same name,
/// which overrides the built-in one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "id")]
pub enum WorkflowOwner {
    Builtin,
    Platform,
    Customer(crate::ids::CustomerId),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    pub name: String,
    pub owner: WorkflowOwner,
    #[serde(flatten)]
    pub definition: WorkflowDefinition,
    pub version: u64,
}

pub const MAX_RULES: usize = 50;

/// The facts a workflow looks at.
pub struct Facts<'a> {
    pub kind: OperationType,
    pub currency: &'a Currency,
    pub total_amount: i64,
    /// (amount, rail, beneficiary id_type) per item.
    pub items: Vec<(i64, &'a str, &'a str)>,
    pub metadata: &'a std::collections::BTreeMap<String, String>,
}

/// The outcome of running a workflow over a new operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Approve {
        rule: usize,
    },
    Reject {
        rule: Option<usize>,
        reason: String,
    },
    RequireApprovals {
        rule: usize,
        chain: Vec<ApprovalRequirement>,
    },
}

impl Verdict {
    /// The rule that gave it, if one did (a floor no rule of which matched gave none).
    pub fn rule(&self) -> Option<usize> {
        match self {
            Verdict::Approve { rule } | Verdict::RequireApprovals { rule, .. } => Some(*rule),
            Verdict::Reject { rule, .. } => *rule,
        }
        .filter(|rule| *rule != usize::MAX)
    }
}

impl Conditions {
    fn hold_for(&self, facts: &Facts) -> bool {
        let in_list =
            |list: &Option<Vec<String>>, value: &str| list.as_ref().is_none_or(|l| l.iter().any(|v| v == value));
        self.total_amount.is_none_or(|r| r.contains(facts.total_amount))
            && self.item_count.is_none_or(|r| r.contains(facts.items.len() as i64))
            && self
                .item_amount
                .is_none_or(|r| facts.items.iter().any(|i| r.contains(i.0)))
            && self.currency.as_ref().is_none_or(|l| l.contains(facts.currency))
            && self.kind.as_ref().is_none_or(|l| l.contains(&facts.kind))
            && (self.rail.is_none() || facts.items.iter().any(|i| in_list(&self.rail, i.1)))
            && (self.beneficiary_id_type.is_none()
                || facts.items.iter().any(|i| in_list(&self.beneficiary_id_type, i.2)))
            && self
                .metadata
                .as_ref()
                .is_none_or(|wanted| wanted.iter().all(|(key, value)| facts.metadata.get(key) == Some(value)))
    }
}

impl WorkflowDefinition {
    /// The first matching rule decides, or the strictest (see [`Matching`]). No match rejects:
    /// money never moves on a rule nobody wrote.
    pub fn evaluate(&self, facts: &Facts) -> Verdict {
        let mut matching = self.rules.iter().enumerate().filter(|(_, r)| r.when.hold_for(facts));
        let decider = match self.matching {
            Matching::First => matching.next(),
            // `max_by_key` keeps the last of equals; reversed, that is the first.
            Matching::Strictest => matching.rev().max_by_key(|(_, r)| r.then.strictness()),
        };
        match decider {
            Some((rule, r)) => match &r.then {
                Action::Approve => Verdict::Approve { rule },
                Action::Reject { reason } => Verdict::Reject {
                    rule: Some(rule),
                    reason: reason.clone(),
                },
                Action::RequireApprovals { steps } => Verdict::RequireApprovals {
                    rule,
                    chain: steps.clone(),
                },
            },
            None => Verdict::Reject {
                rule: None,
                reason: "no rule of the workflow matched the operation".into(),
            },
        }
    }

    /// Checks a definition before it is stored; errors name the offending field.
    /// Checks every rule; `known_rail` says which rails an adapter serves here, since a rule
    /// on any other rail would never match, and a requirement it was written to add would
    /// silently never apply.
    pub fn validate(&self, known_rail: &dyn Fn(&str) -> bool) -> Result<(), DomainError> {
        if self.rules.is_empty() {
            return Err(DomainError::invalid(
                "rules",
                "parameter_invalid_empty",
                "A workflow needs at least one rule.",
            ));
        }
        if self.rules.len() > MAX_RULES {
            return Err(DomainError::invalid(
                "rules",
                "too_many_rules",
                format!("A workflow has at most {MAX_RULES} rules."),
            ));
        }
        if let Some(description) = &self.description {
            check_text(description, "description", 500)?;
        }
        if self.approval_ttl.is_some_and(|ttl| !APPROVAL_TTL.contains(&ttl)) {
            return Err(DomainError::invalid(
                "approval_ttl",
                "out_of_range",
                format!(
                    "approval_ttl is a number of seconds from {} to {} (thirty days).",
                    APPROVAL_TTL.start(),
                    APPROVAL_TTL.end()
                ),
            ));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let when = &rule.when;
            for (name, range) in [
                ("total_amount", when.total_amount),
                ("item_amount", when.item_amount),
                ("item_count", when.item_count),
            ] {
                if let Some(Range {
                    gte: Some(min),
                    lte: Some(max),
                }) = range
                {
                    if min > max {
                        return Err(DomainError::invalid(
                            format!("rules[{i}].when.{name}"),
                            "invalid_range",
                            "gte must not be greater than lte.",
                        ));
                    }
                }
            }
            for (name, list) in [("rail", &when.rail), ("beneficiary_id_type", &when.beneficiary_id_type)] {
                let Some(list) = list else { continue };
                if list.is_empty() || list.iter().any(|v| v.is_empty()) {
                    return Err(DomainError::invalid(
                        format!("rules[{i}].when.{name}"),
                        "invalid_list",
                        "Give a non-empty list of non-empty values (at most 64 characters each).",
                    ));
                }
                for (j, value) in list.iter().enumerate() {
                    let param = format!("rules[{i}].when.{name}[{j}]");
                    check_text(value, &param, 64)?;
                    // An id_type no item can have would never match either.
                    if name == "beneficiary_id_type" {
                        crate::validate::item_field::beneficiary_id_type(Some(value.clone()), &param)?;
                    }
                    if name == "rail" && !known_rail(value) {
                        return Err(DomainError::invalid(
                            param,
                            "unknown_rail",
                            format!("No adapter serves rail '{value}': a rule on it would never match."),
                        ));
                    }
                }
            }
            if let Some(metadata) = &when.metadata {
                let param = format!("rules[{i}].when.metadata");
                if metadata.is_empty() {
                    return Err(DomainError::invalid(
                        param,
                        "invalid_metadata",
                        "Give at least one key and its value.",
                    ));
                }
                crate::validate::validate_metadata(metadata.clone()).map_err(|_| {
                    DomainError::invalid(
                        param,
                        "invalid_metadata",
                        "Keys and values as an operation's metadata takes them.",
                    )
                })?;
            }
            match &rule.then {
                Action::RequireApprovals { steps } => validate_chain(steps, &format!("rules[{i}].then"))?,
                Action::Reject { reason } if reason.trim().is_empty() => {
                    return Err(DomainError::invalid(
                        format!("rules[{i}].then.reason"),
                        "invalid_reason",
                        "A reject rule needs a reason of 1 to 500 characters.",
                    ));
                }
                Action::Reject { reason } => check_text(reason, &format!("rules[{i}].then.reason"), 500)?,
                Action::Approve => {}
            }
        }
        Ok(())
    }
}

/// A chain's steps, each refused at its own path (`rules[0].then.steps[1].users[2]`); a
/// one-step chain is written flat, so its fields are `then`'s own.
fn validate_chain(steps: &[ApprovalRequirement], at: &str) -> Result<(), DomainError> {
    if steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(DomainError::invalid(
            format!("{at}.steps"),
            "invalid_steps",
            format!("A chain has 1 to {MAX_STEPS} steps."),
        ));
    }
    let flat = steps.len() == 1;
    let total: usize = steps.iter().map(|s| usize::from(s.count)).sum();
    for (j, step) in steps.iter().enumerate() {
        let at = if flat {
            at.to_string()
        } else {
            format!("{at}.steps[{j}]")
        };
        if !(1..=MAX_APPROVALS as u8).contains(&step.count) {
            return Err(DomainError::invalid(
                format!("{at}.count"),
                "invalid_count",
                format!("count must be between 1 and {MAX_APPROVALS}."),
            ));
        }
        if step.users.is_empty() {
            continue;
        }
        for (k, user) in step.users.iter().enumerate() {
            if UserId::parse(user.as_str()).is_none() || step.users[..k].contains(user) {
                return Err(DomainError::invalid(
                    format!("{at}.users[{k}]"),
                    "invalid_user",
                    "Name each user once, by its id (usr_…).",
                ));
            }
        }
        if step.users.len() > MAX_APPROVALS || usize::from(step.count) > step.users.len() {
            return Err(DomainError::invalid(
                format!("{at}.users"),
                "invalid_users",
                format!(
                    "Name at least count users and at most {MAX_APPROVALS}: the step could never be signed otherwise."
                ),
            ));
        }
    }
    if total > MAX_APPROVALS {
        return Err(DomainError::invalid(
            format!("{at}.steps"),
            "too_many_approvals",
            format!("A chain asks for at most {MAX_APPROVALS} approvals in all."),
        ));
    }
    Ok(())
}

impl Action {
    /// How strict it is, to compare rules by: a rejection over any approvals, more approvals
    /// over fewer (then more steps over fewer), approvals over none.
    fn strictness(&self) -> (u8, usize, usize) {
        match self {
            Action::Approve => (0, 0, 0),
            Action::RequireApprovals { steps } => (1, steps.iter().map(|s| usize::from(s.count)).sum(), steps.len()),
            Action::Reject { .. } => (2, 0, 0),
        }
    }
}

/// The built-in workflows' names, in order.
pub const BUILTIN: [&str; 2] = ["auto", "two_step"];

/// The built-in workflows: `auto` approves any valid operation; `two_step` needs one approval
/// (a second signature) by an `approver` other than the creator.
pub fn builtin(name: &str) -> Option<WorkflowDefinition> {
    let then = match name {
        "auto" => Action::Approve,
        "two_step" => Action::approvals(1, Role::Approver),
        _ => return None,
    };
    Some(WorkflowDefinition {
        matching: Matching::First,
        approval_ttl: None,
        description: Some(match name {
            "auto" => "Approves every valid operation.".into(),
            _ => "One approval by a user with role approver, other than the creator.".into(),
        }),
        rules: vec![Rule {
            when: Conditions::default(),
            then,
        }],
    })
}

/// A name that resolves to no workflow for the customer, and where to find those that do.
pub fn unknown_workflow(name: &str, customer_id: &CustomerId) -> DomainError {
    DomainError::invalid(
        "workflow",
        "unknown_workflow",
        format!(
            "No workflow named '{name}' for {customer_id}; GET /v1/workflows?customer_id={customer_id} lists those it can name."
        ),
    )
}

/// The refusal of a workflow name that [`valid_name`] does not pass, at `param`.
pub fn name_refused(param: &str, code: &'static str) -> DomainError {
    DomainError::invalid(
        param,
        code,
        "Workflow names are 1-64 lowercase letters, digits, '_' or '-'.",
    )
}

/// Workflow names: lowercase letters, digits, `_` and `-`, 1 to 64 characters.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The reads of workflow definitions (the store's port for this module).
#[async_trait::async_trait]
pub trait WorkflowStore: Send + Sync {
    async fn workflow(&self, owner: &WorkflowOwner, name: &str) -> Result<Option<Workflow>, crate::ports::StoreError>;
    /// An owner's definitions named after `after` (its floors among them), by name, at most
    /// `limit`.
    async fn workflows_after(
        &self,
        owner: &WorkflowOwner,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Workflow>, crate::ports::StoreError>;
    /// Several definitions, in the order asked (one request where the store can).
    async fn workflows(
        &self,
        wanted: &[(WorkflowOwner, String)],
    ) -> Result<Vec<Option<Workflow>>, crate::ports::StoreError> {
        let mut found = Vec::with_capacity(wanted.len());
        for (owner, name) in wanted {
            found.push(self.workflow(owner, name).await?);
        }
        Ok(found)
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod properties;
