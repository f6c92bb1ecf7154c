//! New payees and changed accounts: while a customer's review is on, a payout to a beneficiary
//! it never paid, or paid last at another account, waits for one more approval. Payees are
//! learnt from the payouts approved while the review is on.

use super::LimitKind;
use crate::access::Role;
use crate::ids::CustomerId;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

fn yes() -> bool {
    true
}

/// A customer's review of whom its payouts pay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayeeReview {
    /// A beneficiary paid for the first time.
    #[serde(default = "yes")]
    pub new_payee: bool,
    /// A beneficiary paid at another account than last time.
    #[serde(default = "yes")]
    pub changed_account: bool,
    /// Who gives the approval such a payout waits for.
    pub role: Role,
}

/// A beneficiary a customer has paid, and where it was paid last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownPayee {
    pub customer_id: CustomerId,
    /// `<id type>:<id>`, or the destination account for an item without a beneficiary.
    pub payee: String,
    /// `<rail>:<account>`.
    pub destination: String,
    #[serde(with = "time::serde::rfc3339")]
    pub first_paid_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub last_paid_at: OffsetDateTime,
}

/// Something the review asks one more approval for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayeeFinding {
    pub kind: LimitKind,
    pub message: String,
}

/// What `review` finds in a payout's `(payee, destination)` pairs, given what is known of each
/// payee (in the same order).
pub fn review(review: &PayeeReview, paid: &[(String, String)], known: &[Option<KnownPayee>]) -> Vec<PayeeFinding> {
    let mut findings = vec![];
    for ((payee, destination), known) in paid.iter().zip(known) {
        match known {
            None if review.new_payee => findings.push(PayeeFinding {
                kind: LimitKind::NewPayee,
                message: format!("{payee} is paid for the first time"),
            }),
            Some(known) if review.changed_account && known.destination != *destination => findings.push(PayeeFinding {
                kind: LimitKind::ChangedAccount,
                message: format!("{payee} is paid at {destination}, last at {}", known.destination),
            }),
            _ => {}
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(destination: &str) -> Option<KnownPayee> {
        Some(KnownPayee {
            customer_id: "cus_1".into(),
            payee: "RUT:1-9".into(),
            destination: destination.into(),
            first_paid_at: OffsetDateTime::UNIX_EPOCH,
            last_paid_at: OffsetDateTime::UNIX_EPOCH,
        })
    }

    #[test]
    fn a_new_payee_and_a_changed_account_are_found_each_as_the_review_asks() {
        let paid = [
            ("RUT:1-9".to_string(), "sbx:001".to_string()),
            ("RUT:2-7".to_string(), "sbx:002".to_string()),
        ];
        let both = PayeeReview {
            new_payee: true,
            changed_account: true,
            role: Role::Approver,
        };
        let found = review(&both, &paid, &[known("sbx:999"), None]);
        assert_eq!(
            found.iter().map(|f| (f.kind, f.message.as_str())).collect::<Vec<_>>(),
            [
                (LimitKind::ChangedAccount, "RUT:1-9 is paid at sbx:001, last at sbx:999"),
                (LimitKind::NewPayee, "RUT:2-7 is paid for the first time"),
            ]
        );
        assert!(
            review(&both, &paid[..1], &[known("sbx:001")]).is_empty(),
            "same account"
        );
        let new_only = PayeeReview {
            changed_account: false,
            ..both
        };
        assert_eq!(review(&new_only, &paid, &[known("sbx:999"), None]).len(), 1);
    }
}
