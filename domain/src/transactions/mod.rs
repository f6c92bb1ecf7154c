//! Transactions and their state machine. Transactions are made from approved
//! operations, one per item; `unknown` is left only by asking the rail, never by resubmitting.

mod bank_file;
mod file_rail;
mod operator;
mod pipeline;
mod rail_reports;
mod submission;

pub use bank_file::{
    write_pain001, BankFile, BankFileStatus, BankFileStore, MAX_BANK_FILE_PARTS, MAX_BANK_FILE_TRANSACTIONS,
};
pub use file_rail::CancelTransaction;
pub use operator::{ResolveTransaction, RetryTransaction};
pub(crate) use pipeline::transaction_id_of;
pub use pipeline::{
    settle, submit_backoff, MAX_NOT_FOUND_POLLS, MAX_SUBMIT_ATTEMPTS, POLL_BATCH, RETURN_CHECKS, SUBMIT_TIMEOUT,
};
pub use rail_reports::{RailReport, RailSecret, RAIL_SECRET};
pub(crate) use submission::RailSource;

use crate::access::Environment;
use crate::cause::Cause;
use crate::error::DomainError;
use crate::money::{Amount, Currency};
use crate::operations::Beneficiary;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

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

    pub fn as_str(self) -> &'static str {
        match self {
            TransactionStatus::Pending => "pending",
            TransactionStatus::Submitted => "submitted",
            TransactionStatus::Confirmed => "confirmed",
            TransactionStatus::Failed => "failed",
            TransactionStatus::Returned => "returned",
            TransactionStatus::Unknown => "unknown",
            TransactionStatus::NeedsAttention => "needs_attention",
        }
    }

    /// The statuses an operator watches across operations, each listed by the stores
    /// ([`TransactionStore::transactions_in`]): a lost outcome being asked, and one that needs
    /// a person. Transactions pass through them rarely, so their lists cost little.
    pub const WATCHED: [TransactionStatus; 2] = [TransactionStatus::Unknown, TransactionStatus::NeedsAttention];

    pub fn is_watched(self) -> bool {
        Self::WATCHED.contains(&self)
    }

    pub fn parse(value: &str) -> Option<TransactionStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// Whether the transaction has ended; `confirmed` may still be `returned` later.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TransactionStatus::Confirmed | TransactionStatus::Failed | TransactionStatus::Returned
        )
    }

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

/// A change of a transaction's status; each variant carries its cause.
#[derive(Debug, Clone, PartialEq)]
pub enum TransactionTransition {
    /// The rail accepted the instruction under its own reference.
    Submit {
        rail_reference: String,
        cause: Cause,
    },
    Confirm(Cause),
    Fail(Cause),
    Return(Cause),
    /// The rail may or may not have the instruction: ask it, never resubmit.
    MarkUnknown(Cause),
    FlagForAttention(Cause),
    /// An operator sends the transaction back to be submitted again.
    Retry(Cause),
}

impl TransactionTransition {
    pub fn target(&self) -> TransactionStatus {
        use TransactionStatus::*;
        match self {
            TransactionTransition::Submit { .. } => Submitted,
            TransactionTransition::Confirm(_) => Confirmed,
            TransactionTransition::Fail(_) => Failed,
            TransactionTransition::Return(_) => Returned,
            TransactionTransition::MarkUnknown(_) => Unknown,
            TransactionTransition::FlagForAttention(_) => NeedsAttention,
            TransactionTransition::Retry(_) => Pending,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    pub id: crate::ids::TransactionId,
    pub operation_id: crate::ids::OperationId,
    pub customer_id: crate::ids::CustomerId,
    pub item_id: crate::ids::ItemId,
    pub rail: String,
    pub rail_reference: Option<String>,
    pub amount: Amount,
    pub currency: Currency,
    pub beneficiary: Beneficiary,
    pub account: String,
    pub reference: Option<String>,
    /// The customer's end-to-end id for the payment, when it gave one: sent on to the rail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
    pub status: TransactionStatus,
    pub cause: Cause,
    /// Submit calls made so far (transient refusals included).
    pub submit_attempts: u32,
    /// A submit call is under way: set before calling the rail, cleared with its outcome. Found
    /// set by a later worker, it means the outcome was lost, so the transaction is `unknown`.
    #[serde(with = "time::serde::rfc3339::option")]
    pub submitting_since: Option<OffsetDateTime>,
    /// The rail may hold this instruction; from then on it is never submitted again.
    pub possibly_submitted: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_poll_at: Option<OffsetDateTime>,
    pub status_polls: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub environment: Environment,
    /// The hold its operation placed on an account for it, settled with its outcome.
    #[serde(default)]
    pub hold_id: Option<crate::ids::MovementId>,
    /// When its hold expires: not yet handed to its rail by then, it fails (`hold_expired`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub hold_expires_at: Option<OffsetDateTime>,
    /// When the rail confirmed it (kept if it is returned later): statements are matched
    /// against the transactions confirmed in their period.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub confirmed_at: Option<OffsetDateTime>,
    /// Payout (`credit`) or collection (`debit`), as the rail is told.
    #[serde(default)]
    pub direction: crate::rail::RailDirection,
    /// The customer account a collection credits once the rail confirms it.
    #[serde(default)]
    pub credit_account_id: Option<crate::ids::AccountId>,
    /// The rail's cut-off it was last submitted (or waits) for, when the rail keeps cut-offs.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub cutoff_at: Option<OffsetDateTime>,
    /// The banking day it is expected to settle on, by that cut-off.
    #[serde(default, with = "banking_day::option")]
    pub settlement_day: Option<time::Date>,
    /// It came after the rail's last cut-off of a banking day, and the rail waits: it is
    /// submitted when its settlement day's window opens, not before.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub submit_after: Option<OffsetDateTime>,
    /// The bank file of a file rail it is in (waits in, until the file's cut-off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bank_file: Option<crate::ids::BankFileId>,
    pub version: u64,
}

time::serde::format_description!(banking_day, Date, "[year]-[month]-[day]");

/// The cause of a transaction, and of an operation all of whose transactions, failed because
/// their hold expired before they reached the rail.
pub const HOLD_EXPIRED: &str = "hold_expired";

impl Transaction {
    /// The rail took its money and has not sent it back (a return is `returned`).
    pub fn is_confirmed(&self) -> bool {
        self.status == TransactionStatus::Confirmed
    }

    /// Its hold has expired and it was never handed to its rail (nor is being), so it may
    /// still be given up without asking anyone.
    pub fn hold_expired(&self, now: OffsetDateTime) -> bool {
        self.status == TransactionStatus::Pending
            && self.submitting_since.is_none()
            && self.submit_attempts == 0
            && self.bank_file.is_none()
            && self.hold_expires_at.is_some_and(|at| at <= now)
    }

    pub fn apply(
        &mut self,
        transition: TransactionTransition,
    ) -> Result<(TransactionStatus, TransactionStatus, Cause), DomainError> {
        let to = transition.target();
        if !self.status.can_become(to) {
            return Err(DomainError::invalid_state(
                "invalid_transition",
                format!(
                    "Transaction {} is {}; it cannot become {}.",
                    self.id,
                    self.status.as_str(),
                    to.as_str()
                ),
            ));
        }
        // Money never moves twice: once the rail may hold the instruction, nothing sends the
        // transaction back to be submitted, whichever way it went (submitted, unknown, then
        // needs attention).
        if to == TransactionStatus::Pending && self.possibly_submitted {
            return Err(DomainError::invalid_state(
                "possibly_submitted",
                "The rail may hold this transaction; resubmitting could pay twice. Resolve it after checking with the rail.",
            ));
        }
        if matches!(to, TransactionStatus::Submitted | TransactionStatus::Unknown) {
            self.possibly_submitted = true;
        }

        let cause = match transition {
            TransactionTransition::Submit { rail_reference, cause } => {
                self.rail_reference = Some(rail_reference);
                cause
            }
            TransactionTransition::Confirm(c)
            | TransactionTransition::Fail(c)
            | TransactionTransition::Return(c)
            | TransactionTransition::MarkUnknown(c)
            | TransactionTransition::FlagForAttention(c)
            | TransactionTransition::Retry(c) => c,
        };
        if to == TransactionStatus::Confirmed {
            self.confirmed_at.get_or_insert(cause.at);
        }
        let from = self.status;
        self.status = to;
        self.cause = cause.clone();
        self.updated_at = cause.at;
        Ok((from, to, cause))
    }
}

/// How far a rail's sweep for one return check has got: the last transaction it asked
/// about, by confirmation time and then id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReturnSweep {
    pub rail: String,
    /// Which of [`RETURN_CHECKS`] the sweep makes.
    pub check: usize,
    #[serde(with = "time::serde::rfc3339")]
    pub confirmed_at: OffsetDateTime,
    pub transaction_id: crate::ids::TransactionId,
}

impl Transaction {
    /// What finds its operation by the rail's reference, on the write that records it: the
    /// submission the rail accepted (its status polls, each a write, come after).
    pub fn finding(&self) -> Option<crate::operations::Finding> {
        let reference = self
            .rail_reference
            .as_deref()
            .filter(|r| crate::operations::findable(r))?;
        let just_submitted = self.status == TransactionStatus::Submitted && self.status_polls == 0;
        just_submitted.then(|| crate::operations::Finding {
            by: crate::operations::FindBy::RailReference,
            value: reference.to_owned(),
            customer_id: self.customer_id.clone(),
            operation_id: self.operation_id.clone(),
        })
    }

    /// The hour's count of transactions reaching `status`, for the change that brings this
    /// one there at `at`. A submission is not counted: every transaction passes through it on
    /// its way to an outcome, and on DynamoDB its counter would turn the one write a submission
    /// is into a transaction of two (two units more a payout, for a line that says little).
    pub fn tally(&self, status: TransactionStatus, at: OffsetDateTime) -> Option<crate::tallies::Tally> {
        if status == TransactionStatus::Submitted {
            return None;
        }
        let series = crate::tallies::Series::Transactions {
            direction: self.direction.as_str().into(),
            rail: self.rail.clone(),
            status: status.as_str().into(),
        };
        let period = crate::tallies::Period::Hour;
        Some(crate::tallies::Tally::new(
            &self.customer_id,
            period,
            at,
            series,
            &self.id,
        ))
    }
}

/// The reads of transactions (the store's port for this module).
#[async_trait::async_trait]
pub trait TransactionStore: Send + Sync {
    async fn transaction(
        &self,
        id: &crate::ids::TransactionId,
    ) -> Result<Option<Transaction>, crate::ports::StoreError>;
    /// An operation's transactions, in the order of their ids. Each is its item's
    /// (`items[].transaction_id`, fixed when the operation starts processing), so a store may
    /// find them by those ids rather than keep a list of them.
    async fn transactions_of_operation(
        &self,
        operation: &crate::operations::Operation,
    ) -> Result<Vec<Transaction>, crate::ports::StoreError>;
    /// The transactions in a [`TransactionStatus::WATCHED`] status, of one customer or every
    /// one, newest first, older than `starting_after` when given, at most `limit`.
    async fn transactions_in(
        &self,
        status: TransactionStatus,
        customer_id: Option<&crate::ids::CustomerId>,
        starting_after: Option<&crate::ids::TransactionId>,
        limit: usize,
    ) -> Result<Vec<Transaction>, crate::ports::StoreError>;
    /// Transactions whose `next_poll_at` has come, oldest first.
    async fn transactions_due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Transaction>, crate::ports::StoreError>;
    /// The transactions of `rail` confirmed on a day of `[from, to]` (returned ones
    /// included), in id order: what a statement of those days speaks of.
    async fn confirmed_on_rail(
        &self,
        rail: &str,
        from: time::Date,
        to: time::Date,
    ) -> Result<Vec<Transaction>, crate::ports::StoreError>;
    /// The transactions of `rail` confirmed after `after` (a confirmation time, then an id:
    /// those confirmed at that instant with a greater id come too) and no later than `until`,
    /// by confirmation time and then id, at most `limit` (returned ones included).
    async fn confirmed_between(
        &self,
        rail: &str,
        after: (OffsetDateTime, &crate::ids::TransactionId),
        until: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Transaction>, crate::ports::StoreError>;
    /// How far `rail`'s sweep for return check `check` has got, if it ever ran.
    async fn return_sweep(&self, rail: &str, check: usize) -> Result<Option<ReturnSweep>, crate::ports::StoreError>;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::TransactionStatus::{self, *};
    use super::*;
    use crate::operations::tests::cause;

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
                assert_eq!(from.can_become(to), allowed.contains(&(from, to)), "{from:?} -> {to:?}");
            }
        }
        // The rule that keeps money from moving twice: nothing leads from unknown back to
        // pending or submitted.
        assert!(!Unknown.can_become(Pending) && !Unknown.can_become(Submitted));
    }

    #[test]
    fn transitions_carry_their_cause_and_submit_records_the_reference() {
        let mut txn = crate::transactions::tests::transaction();
        let (from, to, recorded) = txn
            .apply(TransactionTransition::Submit {
                rail_reference: "sbx_1".into(),
                cause: cause("accepted_by_rail"),
            })
            .unwrap();
        assert_eq!(
            (from, to, recorded.code.as_str()),
            (Pending, Submitted, "accepted_by_rail")
        );
        assert_eq!(txn.rail_reference.as_deref(), Some("sbx_1"));
        assert!(txn.apply(TransactionTransition::Retry(cause("retry"))).is_err());
        txn.apply(TransactionTransition::MarkUnknown(cause("timeout"))).unwrap();
        // The one thing that must never happen: an unknown transaction going back to be sent.
        assert!(txn.apply(TransactionTransition::Retry(cause("retry"))).is_err());
        assert!(txn
            .apply(TransactionTransition::Submit {
                rail_reference: "x".into(),
                cause: cause("again")
            })
            .is_err());
        txn.apply(TransactionTransition::Confirm(cause("status_confirmed")))
            .unwrap();
        assert_eq!(txn.status, Confirmed);
    }

    /// Every sequence of transitions (up to six long) from a transaction the rail may hold
    /// (submitted, or unknown) never reaches `pending`, and so is never submitted again.
    #[test]
    fn no_path_leads_from_submitted_or_unknown_back_to_pending() {
        let every = |c: &str| {
            vec![
                TransactionTransition::Submit {
                    rail_reference: "r".into(),
                    cause: cause(c),
                },
                TransactionTransition::Confirm(cause(c)),
                TransactionTransition::Fail(cause(c)),
                TransactionTransition::Return(cause(c)),
                TransactionTransition::MarkUnknown(cause(c)),
                TransactionTransition::FlagForAttention(cause(c)),
                TransactionTransition::Retry(cause(c)),
            ]
        };
        let mut frontier = vec![];
        for start in [
            TransactionTransition::MarkUnknown(cause("timeout")),
            TransactionTransition::Submit {
                rail_reference: "r".into(),
                cause: cause("accepted"),
            },
        ] {
            let mut txn = transaction();
            txn.apply(start).unwrap();
            frontier.push(txn);
        }
        let mut walked = 0;
        for _ in 0..6 {
            let mut next = vec![];
            for txn in &frontier {
                for transition in every("step") {
                    let mut moved = txn.clone();
                    if moved.apply(transition).is_ok() {
                        assert_ne!(
                            moved.status, Pending,
                            "a path led back to pending from {:?}",
                            txn.status
                        );
                        walked += 1;
                        next.push(moved);
                    }
                }
            }
            frontier = next;
        }
        assert!(walked > 10, "the walk went nowhere");

        // A transaction the rail never took (transient refusals until attention) may be retried.
        let mut refused = transaction();
        refused
            .apply(TransactionTransition::FlagForAttention(cause("retries_exhausted")))
            .unwrap();
        assert!(refused
            .apply(TransactionTransition::Retry(cause("operator_retry")))
            .is_ok());
    }

    pub fn transaction() -> Transaction {
        let at = OffsetDateTime::UNIX_EPOCH;
        Transaction {
            end_to_end_id: None,
            id: "txn_1".into(),
            operation_id: "op_1".into(),
            customer_id: "cus_1".into(),
            item_id: "itm_1".into(),
            rail: "psp-local:sandbox".into(),
            rail_reference: None,
            amount: Amount::new(100).unwrap(),
            currency: Currency::parse("CLP").unwrap(),
            beneficiary: Beneficiary {
                id_type: "RUT".into(),
                id: "1".into(),
            },
            account: "123".into(),
            reference: None,
            status: Pending,
            cause: cause("created"),
            submit_attempts: 0,
            submitting_since: None,
            possibly_submitted: false,
            next_poll_at: None,
            status_polls: 0,
            confirmed_at: None,
            created_at: at,
            updated_at: at,
            environment: Environment::Test,
            hold_id: None,
            hold_expires_at: None,
            direction: crate::rail::RailDirection::Credit,
            credit_account_id: None,
            cutoff_at: None,
            settlement_day: None,
            submit_after: None,
            bank_file: None,
            version: 1,
        }
    }
}
