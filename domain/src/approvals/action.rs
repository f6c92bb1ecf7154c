//! What a matching rule does. Written `{"action": "require_approvals", "count": 2, "role":
//! "approver"}`; read through a flat struct rather than serde's internally tagged enum, which
//! buffers the fields and so could only say a bad `role` or `count` was somewhere in `then`.

use crate::access::Role;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Approve,
    Reject { reason: String },
    RequireApprovals { count: u8, role: Role },
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
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Action, D::Error> {
        let ActionFields {
            action,
            reason,
            count,
            role,
        } = ActionFields::deserialize(deserializer)?;
        // A field another action takes is refused as an unknown one, as a derived enum would.
        let refuse = |name: &str, given: bool| match given {
            true => Err(D::Error::unknown_field(name, &[])),
            false => Ok(()),
        };
        match action {
            ActionName::Approve => {
                refuse("reason", reason.is_some())?;
                refuse("count", count.is_some())?;
                refuse("role", role.is_some())?;
                Ok(Action::Approve)
            }
            ActionName::Reject => {
                refuse("count", count.is_some())?;
                refuse("role", role.is_some())?;
                Ok(Action::Reject {
                    reason: reason.ok_or_else(|| D::Error::missing_field("reason"))?,
                })
            }
            ActionName::RequireApprovals => {
                refuse("reason", reason.is_some())?;
                Ok(Action::RequireApprovals {
                    count: count.ok_or_else(|| D::Error::missing_field("count"))?,
                    role: role.ok_or_else(|| D::Error::missing_field("role"))?,
                })
            }
        }
    }
}
