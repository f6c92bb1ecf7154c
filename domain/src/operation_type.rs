//! The kinds of operation: shared vocabulary of the operations module, which creates them, and
//! the approvals module, whose rules and floors are set per kind (so neither imports the other
//! for it).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationType {
    Payout,
    Collection,
    Transfer,
}

impl OperationType {
    pub const ALL: [OperationType; 3] = [
        OperationType::Payout,
        OperationType::Collection,
        OperationType::Transfer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OperationType::Payout => "payout",
            OperationType::Collection => "collection",
            OperationType::Transfer => "transfer",
        }
    }

    pub fn parse(value: &str) -> Option<OperationType> {
        Self::ALL.into_iter().find(|t| t.as_str() == value)
    }
}
