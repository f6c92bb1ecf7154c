//! Causes: why a state changed, who made it change, and when. Every transition carries one.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    User,
    ApiKey,
    System,
    Rail,
    Schedule,
    Operator,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: ActorType,
    pub id: String,
}

impl Actor {
    pub fn system() -> Actor {
        Actor {
            kind: ActorType::System,
            id: "system".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// Stable, machine-readable reason (`workflow_auto_approved`, `approved_by_user`, …).
    pub code: String,
    pub message: String,
    pub actor: Actor,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

impl Cause {
    pub fn new(code: &str, message: impl Into<String>, actor: Actor, at: OffsetDateTime) -> Cause {
        Cause {
            code: code.to_owned(),
            message: message.into(),
            actor,
            at,
        }
    }
}
