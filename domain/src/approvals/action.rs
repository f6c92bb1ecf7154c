//! What a matching rule does. Written `{"action": "require_approvals", "count": 2, "role":
//! "approver"}`, or with `steps` for a chain signed in order; read through a flat struct rather
//! than serde's internally tagged enum, which buffers the fields and so could only say a bad
//! `role` or `count` was somewhere in `then`.

use super::ApprovalRequirement;
use crate::access::Role;
use crate::ids::UserId;
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Approve,
    Reject {
        reason: String,
    },
    /// Approvals signed in order, step by step: every approval of a step comes before any of
    /// the next.
    RequireApprovals {
        steps: Vec<ApprovalRequirement>,
    },
}

impl Action {
    /// One step of `count` approvals by `role`.
    pub fn approvals(count: u8, role: Role) -> Action {
        Action::RequireApprovals {
            steps: vec![ApprovalRequirement::new(count, role)],
        }
    }
}

impl Serialize for Action {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Action::Approve => map.serialize_entry("action", "approve")?,
            Action::Reject { reason } => {
                map.serialize_entry("action", "reject")?;
                map.serialize_entry("reason", reason)?;
            }
            Action::RequireApprovals { steps } => {
                map.serialize_entry("action", "require_approvals")?;
                match steps.as_slice() {
                    [one] if one.also_role.is_none() => {
                        map.serialize_entry("count", &one.count)?;
                        map.serialize_entry("role", &one.role)?;
                        if !one.users.is_empty() {
                            map.serialize_entry("users", &one.users)?;
                        }
                    }
                    _ => map.serialize_entry("steps", steps)?,
                }
            }
        }
        map.end()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ActionName {
    Approve,
    Reject,
    RequireApprovals,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionFields {
    action: ActionName,
    reason: Option<String>,
    count: Option<u8>,
    role: Option<Role>,
    users: Option<Vec<UserId>>,
    steps: Option<Vec<ApprovalRequirement>>,
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Action, D::Error> {
        let ActionFields {
            action,
            reason,
            count,
            role,
            users,
            steps,
        } = ActionFields::deserialize(deserializer)?;
        // A field another action takes is refused as an unknown one, as a derived enum would.
        let refuse = |name: &str, given: bool| match given {
            true => Err(D::Error::unknown_field(name, &[])),
            false => Ok(()),
        };
        let no_approvals = |steps_too: bool| {
            refuse("count", count.is_some())?;
            refuse("role", role.is_some())?;
            refuse("users", users.is_some())?;
            refuse("steps", steps_too)
        };
        match action {
            ActionName::Approve => {
                refuse("reason", reason.is_some())?;
                no_approvals(steps.is_some())?;
                Ok(Action::Approve)
            }
            ActionName::Reject => {
                no_approvals(steps.is_some())?;
                Ok(Action::Reject {
                    reason: reason.ok_or_else(|| D::Error::missing_field("reason"))?,
                })
            }
            ActionName::RequireApprovals => {
                refuse("reason", reason.is_some())?;
                if let Some(steps) = steps {
                    // A chain names its steps; one step is written flat, not both.
                    no_approvals(false)?;
                    return Ok(Action::RequireApprovals { steps });
                }
                let mut step = ApprovalRequirement::new(
                    count.ok_or_else(|| D::Error::missing_field("count"))?,
                    role.ok_or_else(|| D::Error::missing_field("role"))?,
                );
                step.users = users.unwrap_or_default();
                Ok(Action::RequireApprovals { steps: vec![step] })
            }
        }
    }
}
