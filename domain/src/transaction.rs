//! The transaction state machine (DESIGN §4). Transactions are made from approved operations,
//! one per item; `unknown` is left only by asking the rail, never by resubmitting.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransactionStatus {
    Pending,
    Submitted,
    Confirmed,
    Failed,
    Returned,
    Unknown,
    NeedsAttention,
}

impl TransactionStatus {
    pub const ALL: [TransactionStatus; 7] = [
        TransactionStatus::Pending,
        TransactionStatus::Submitted,
        TransactionStatus::Confirmed,
        TransactionStatus::Failed,
        TransactionStatus::Returned,
        TransactionStatus::Unknown,
        TransactionStatus::NeedsAttention,
    ];

    pub fn can_become(self, to: TransactionStatus) -> bool {
        use TransactionStatus::*;
        matches!(
            (self, to),
            (Pending, Submitted | Failed | Unknown | NeedsAttention)
                | (Submitted, Confirmed | Failed | Unknown | NeedsAttention)
                | (Confirmed, Returned)
                | (Unknown, Confirmed | Failed | NeedsAttention)
                | (NeedsAttention, Pending | Failed | Confirmed)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::TransactionStatus::{self, *};

    #[test]
    fn every_allowed_and_refused_transition() {
        let allowed = [
            (Pending, Submitted),
            (Pending, Failed),
            (Pending, Unknown),
            (Pending, NeedsAttention),
            (Submitted, Confirmed),
            (Submitted, Failed),
            (Submitted, Unknown),
            (Submitted, NeedsAttention),
            (Confirmed, Returned),
            (Unknown, Confirmed),
            (Unknown, Failed),
            (Unknown, NeedsAttention),
            (NeedsAttention, Pending),
            (NeedsAttention, Failed),
            (NeedsAttention, Confirmed),
        ];
        for from in TransactionStatus::ALL {
            for to in TransactionStatus::ALL {
                assert_eq!(
                    from.can_become(to),
                    allowed.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
        // The rule that keeps money from moving twice: nothing leads from unknown back to
        // pending or submitted.
        assert!(!Unknown.can_become(Pending) && !Unknown.can_become(Submitted));
    }
}
