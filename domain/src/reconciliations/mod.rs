//! Reconciliation: a rail's statement matched, line by line, against the
//! transactions held here. A statement is read by its rail's adapter, so each rail keeps its own
//! format; the outcome of every line (and every confirmed transaction the statement lacks) is
//! kept with the reconciliation, and each break opens an exceptions work item.

pub mod bai2;
mod balances;
pub mod camt;
mod matching;
pub mod mt940;
pub mod pain002;
mod rules;
mod statement_file;
mod use_cases;

pub use balances::BalanceCheck;
pub use matching::match_statement;
pub use rules::{
    ManyToOne, MatchingRules, PutMatchingRules, ReconciliationRules, Tolerance, MAX_DATE_WINDOW_DAYS,
    MAX_GROUP_TRANSACTIONS, MAX_TOLERANCE_BASIS_POINTS, MAX_TOLERANCE_MINOR_UNITS,
};
pub use use_cases::{ImportStatement, StatementPreview};

/// Reads a statement in one of the formats banks send (ISO 20022 camt, SWIFT MT940, BAI2),
/// as a rail's adapter does when its statements come in one; the error says what is wrong and
/// where. The rail's own CSV is its adapter's to read.
pub fn read_bank_statement(format: StatementFormat, bytes: &[u8]) -> Result<crate::rail::Statement, String> {
    match format {
        StatementFormat::Mt940 => mt940::parse(bytes),
        StatementFormat::Bai2 => bai2::parse(bytes),
        StatementFormat::Pain002 => pain002::parse(bytes),
        StatementFormat::Csv => Err("a CSV statement is the rail's own, read by its adapter".into()),
        xml => camt::parse(xml, bytes),
    }
}

/// What a payment's references name: our transaction (its `InstrId`, which a file rail's
/// files set to the transaction's id, else its `EndToEndId`, which an instruction's is), and
/// the customer's end-to-end id when that is not one of ours.
fn named_by(instruction_id: Option<&str>, end_to_end_id: Option<&str>) -> (Option<TransactionId>, Option<String>) {
    let ours = |id: Option<&str>| id.and_then(|id| TransactionId::parse(id.trim()));
    let customers = end_to_end_id
        .map(str::trim)
        .filter(|id| !id.is_empty() && *id != "NOTPROVIDED" && TransactionId::parse(id).is_none())
        .map(str::to_owned);
    (ours(instruction_id).or_else(|| ours(end_to_end_id)), customers)
}

use crate::access::Environment;
use crate::cause::Cause;
use crate::ids::{ReconciliationId, TransactionId, WorkItemId};
use crate::money::{Amount, Currency};
use crate::rail::{EntryDirection, Period, StatementFormat, StatementStatus};
use crate::transactions::TransactionStatus;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::{Date, OffsetDateTime};

/// The largest statement taken, decoded (base64-encoded in JSON it stays within the 6 MB a
/// Lambda function's request may carry).
pub const MAX_STATEMENT_BYTES: usize = 4 * 1024 * 1024;

/// What became of one line of a statement (or of a transaction it lacks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineOutcome {
    /// The statement and the transaction agree.
    Matched,
    /// They agree but for an amount within the rail's tolerance; the difference is shown, and
    /// opens an exceptions item above the rules' threshold.
    MatchedWithDifference,
    /// A transaction was found, but its amount, currency or state differs (or the statement
    /// lists it twice).
    Mismatched,
    /// No transaction here answers to the line.
    Unmatched,
    /// The line names a transaction whose money goes the other way (a credit naming a
    /// payout, a debit naming a collection): nothing is applied, and the transaction is left
    /// for a line that moved its money.
    WrongDirection,
    /// A transaction confirmed here on this rail in the statement's period that the statement
    /// lacks.
    Missing,
    /// One of the statement's booked balances is not what the rail's settlement account held
    /// at the end of that day.
    BalanceMismatch,
}

impl LineOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LineOutcome::Matched => "matched",
            LineOutcome::MatchedWithDifference => "matched_with_difference",
            LineOutcome::Mismatched => "mismatched",
            LineOutcome::Unmatched => "unmatched",
            LineOutcome::WrongDirection => "wrong_direction",
            LineOutcome::Missing => "missing",
            LineOutcome::BalanceMismatch => "balance_mismatch",
        }
    }

    /// A break is what an operator must look at.
    pub fn is_break(self) -> bool {
        !matches!(self, LineOutcome::Matched | LineOutcome::MatchedWithDifference)
    }
}

/// How a line found its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    RailReference,
    /// The transaction id, which is the end-to-end id the rail was given; or, when the
    /// statement gives only the customer's end-to-end id, the one transaction carrying it.
    TransactionId,
    /// Same currency and direction, the amount within the rules' tolerance, booked within
    /// their date window of its confirmation.
    AmountAndDate,
    /// Several transactions whose amounts add up to the line's (the rules' `many_to_one`).
    Group,
}

impl MatchedBy {
    pub fn parse(value: &str) -> Option<MatchedBy> {
        serde_json::from_value(serde_json::Value::String(value.to_owned())).ok()
    }
}

/// What differs between a line and its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    Amount,
    Currency,
    Status,
    /// An earlier line of the statement already matched this transaction.
    Duplicate,
    /// A batch booking's details do not add up to what the entry books (a line of its own,
    /// about the entry, after the statement's lines).
    BatchTotal,
}

/// A line's place in a batch booking (an entry of the statement that books several payments
/// as one), and what the batch adds up to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineBatch {
    /// The entry's number among the statement's entries, from 1.
    pub entry: u32,
    pub details: u32,
    /// What the entry books in all.
    pub entry_amount: Amount,
    /// What its details add up to.
    pub details_total: i64,
    /// The one operation every detail's transaction belongs to, when they all belong to one.
    #[serde(default)]
    pub operation_id: Option<crate::ids::OperationId>,
    /// The one file every detail's transaction came from, when they all came from one.
    #[serde(default)]
    pub file_id: Option<crate::ids::FileId>,
}

/// One line of a reconciliation: what the statement says (absent for a `missing`
/// transaction), the transaction it matched and how, and what the statement changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconciliationLine {
    /// From 1, in statement order; `missing` transactions come after the statement's lines.
    pub number: u32,
    pub outcome: LineOutcome,
    pub rail_reference: Option<String>,
    /// The transaction id the statement gives, if any.
    pub statement_transaction_id: Option<TransactionId>,
    /// The customer's end-to-end id: the statement's, else its transaction's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
    pub amount: Option<Amount>,
    pub currency: Option<Currency>,
    pub status: Option<StatementStatus>,
    /// Which way the line's money moved on the service's account at the rail.
    #[serde(default)]
    pub direction: Option<EntryDirection>,
    /// The line reverses an earlier booking (its direction is that booking's).
    #[serde(default)]
    pub reversal: bool,
    #[serde(default, with = "crate::reconciliations::day::option")]
    pub booked_on: Option<Date>,
    /// The transaction the line is about.
    pub transaction_id: Option<TransactionId>,
    pub matched_by: Option<MatchedBy>,
    /// The transaction's amount and status here, before the statement was applied.
    pub transaction_amount: Option<Amount>,
    pub transaction_currency: Option<Currency>,
    pub transaction_status: Option<TransactionStatus>,
    pub differences: Vec<Difference>,
    /// The status the statement moved the transaction to (`returned`, `failed`, …), if it did.
    pub applied: Option<TransactionStatus>,
    /// The exceptions item a break opened.
    pub work_item_id: Option<WorkItemId>,
    /// The batch booking the line is a detail of (or, for a `batch_total` break, is about).
    #[serde(default)]
    pub batch: Option<LineBatch>,
    /// The line's amount less its transaction's (or its group's sum), when they differ.
    #[serde(default)]
    pub amount_difference: Option<i64>,
    /// The transactions a `group` match added up, in the order they were found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group: Vec<TransactionId>,
    /// A `balance_mismatch` line's balance, as the statement and the ledger each hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<BalanceCheck>,
}

impl ReconciliationLine {
    /// What an operator working the break's exceptions item needs to read first: which
    /// line or transaction it is, and what the statement and the service each hold.
    pub fn break_message(&self, rail: &str, reconciliation: &ReconciliationId) -> String {
        let line = format!(
            "Line {} of the {rail} statement (reconciliation {reconciliation})",
            self.number
        );
        let money = |amount: Option<Amount>, currency: Option<&Currency>| match (amount, currency) {
            (Some(amount), Some(currency)) => format!("{} {}", amount.minor_units(), currency.code()),
            (Some(amount), None) => amount.minor_units().to_string(),
            _ => "no amount".to_owned(),
        };
        let said = money(self.amount, self.currency.as_ref());
        let held = money(self.transaction_amount, self.transaction_currency.as_ref());
        let transaction = self.transaction_id.as_ref().map_or("?".to_owned(), ToString::to_string);
        match self.outcome {
            LineOutcome::BalanceMismatch => {
                let said = balances::mismatch_message(self, rail).unwrap_or_default();
                format!("{said} (reconciliation {reconciliation}, line {})", self.number)
            }
            LineOutcome::Matched | LineOutcome::MatchedWithDifference if !self.group.is_empty() => format!(
                "{line} ({said}) matches {} transactions that add up to {}: {}.",
                self.group.len(),
                self.transaction_amount.map_or(0, Amount::minor_units),
                self.group.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
            LineOutcome::Matched => format!("{line} matches transaction {transaction}."),
            LineOutcome::MatchedWithDifference => format!(
                "{line} matches transaction {transaction} with a difference of {}: the statement says {said}, the transaction {held}.",
                self.amount_difference.unwrap_or(0)
            ),
            LineOutcome::WrongDirection => format!(
                "{line} is a {} of {said}, but transaction {transaction} it names moves its money the other way.",
                self.direction.map_or("?", EntryDirection::as_str)
            ),
            LineOutcome::Unmatched => {
                let reference = self.rail_reference.as_deref().unwrap_or("none");
                format!("{line} matches no transaction: rail reference {reference}, {said}.")
            }
            LineOutcome::Missing => format!(
                "Transaction {transaction} ({held}, {} on {rail}) is not in the statement (reconciliation {reconciliation}, line {}).",
                self.transaction_status.map_or("?", TransactionStatus::as_str),
                self.number
            ),
            LineOutcome::Mismatched if self.transaction_id.is_none() => {
                let (entry, details, total) = self
                    .batch
                    .as_ref()
                    .map_or((0, 0, 0), |b| (b.entry, b.details, b.details_total));
                format!(
                    "{line}: entry {entry} of the statement books {said}, but its {details} transaction details add up to {total}."
                )
            }
            LineOutcome::Mismatched => {
                let held_status = self.transaction_status.map_or("?", TransactionStatus::as_str);
                let differences: Vec<String> = self
                    .differences
                    .iter()
                    .map(|difference| match difference {
                        Difference::Amount => format!("the statement says {said}, the transaction {held}"),
                        Difference::Currency => format!(
                            "the statement's currency, {}, is not the transaction's, {}",
                            self.currency.as_ref().map_or("?", Currency::code),
                            self.transaction_currency.as_ref().map_or("?", Currency::code)
                        ),
                        Difference::Status => format!(
                            "the statement says {}, the transaction was {held_status}",
                            self.status.map_or("?", StatementStatus::as_str)
                        ),
                        Difference::Duplicate => "an earlier line of the statement already matched it".to_owned(),
                        Difference::BatchTotal => "its batch's details do not add up to the entry".to_owned(),
                    })
                    .collect();
                let applied = self
                    .applied
                    .map_or(String::new(), |status| format!(" It is now {}.", status.as_str()));
                format!(
                    "{line} does not agree with transaction {transaction}: {}.{applied}",
                    differences.join("; ")
                )
            }
        }
    }
}

time::serde::format_description!(day, Date, "[year]-[month]-[day]");

/// Lines per outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub matched: u32,
    #[serde(default)]
    pub matched_with_difference: u32,
    pub mismatched: u32,
    pub unmatched: u32,
    #[serde(default)]
    pub wrong_direction: u32,
    pub missing: u32,
    #[serde(default)]
    pub balance_mismatch: u32,
}

impl OutcomeCounts {
    pub fn of(lines: &[ReconciliationLine]) -> OutcomeCounts {
        let mut counts = OutcomeCounts::default();
        for line in lines {
            *match line.outcome {
                LineOutcome::Matched => &mut counts.matched,
                LineOutcome::MatchedWithDifference => &mut counts.matched_with_difference,
                LineOutcome::Mismatched => &mut counts.mismatched,
                LineOutcome::Unmatched => &mut counts.unmatched,
                LineOutcome::WrongDirection => &mut counts.wrong_direction,
                LineOutcome::Missing => &mut counts.missing,
                LineOutcome::BalanceMismatch => &mut counts.balance_mismatch,
            } += 1;
        }
        counts
    }
}

/// A statement, reconciled. Its id is fixed by the rail and the statement's bytes, so the
/// same statement imported again is the same reconciliation and changes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reconciliation {
    pub id: ReconciliationId,
    pub rail: String,
    pub format: StatementFormat,
    pub period: Period,
    pub sha256: String,
    /// Lines the statement had.
    pub statement_lines: u32,
    pub outcomes: OutcomeCounts,
    /// Transactions whose status the statement changed.
    pub transitions_applied: u32,
    /// Exceptions items opened for its breaks.
    pub work_items_opened: u32,
    /// The version of the rail's rules it was matched by (0: the defaults).
    #[serde(default)]
    pub rules_version: u64,
    /// The statement's booked balances, each against the ledger.
    #[serde(default)]
    pub balances: Vec<BalanceCheck>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

impl Reconciliation {
    /// The id of `statement` on `rail` in `environment`.
    pub fn id_of(environment: Environment, rail: &str, format: StatementFormat, statement: &[u8]) -> ReconciliationId {
        let mut digest = Sha256::new();
        digest.update(format!("{}\n{rail}\n{}\n", environment.as_str(), format.as_str()));
        digest.update(statement);
        ReconciliationId::from(format!("rec_{}", &hex::encode(digest.finalize())[..26]))
    }

    /// Where its lines are kept (a blob: they are written once and read page by page).
    pub fn lines_key(id: &ReconciliationId) -> String {
        format!("reconciliations/{id}/lines.json")
    }
}

/// The exceptions item of a break: fixed by the reconciliation and the line, so a retried
/// import opens it once.
pub fn break_item_id(reconciliation: &ReconciliationId, number: u32) -> WorkItemId {
    let digest = Sha256::digest(format!("reconciliation/{reconciliation}/{number}"));
    WorkItemId::from(format!("wi_{}", &hex::encode(digest)[..26]))
}

/// A page of reconciliations: newest import first, of one rail or all, after `starting_after`
/// (the last of the page before, which the page's position is read from: a reconciliation's
/// id is its statement's digest, not its time).
#[derive(Debug, Clone)]
pub struct ReconciliationQuery {
    pub rail: Option<String>,
    pub starting_after: Option<Reconciliation>,
    pub limit: usize,
}

/// The store's reads for reconciliations.
#[async_trait::async_trait]
pub trait ReconciliationStore: Send + Sync {
    async fn reconciliation(&self, id: &ReconciliationId) -> Result<Option<Reconciliation>, crate::ports::StoreError>;

    /// Up to `query.limit` reconciliations, newest import first: by `created_at` to the
    /// millisecond, then by id.
    async fn reconciliations(
        &self,
        query: &ReconciliationQuery,
    ) -> Result<Vec<Reconciliation>, crate::ports::StoreError>;

    /// The rules the platform saved for `rail` in `environment`, if it saved any.
    async fn reconciliation_rules(
        &self,
        rail: &str,
        environment: Environment,
    ) -> Result<Option<ReconciliationRules>, crate::ports::StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(outcome: LineOutcome) -> ReconciliationLine {
        ReconciliationLine {
            number: 2,
            outcome,
            rail_reference: Some("sbx_1".into()),
            statement_transaction_id: None,
            end_to_end_id: None,
            amount: Amount::new(150),
            currency: Currency::parse("USD"),
            status: Some(StatementStatus::Returned),
            direction: Some(EntryDirection::Debit),
            reversal: false,
            booked_on: None,
            transaction_id: Some(TransactionId::from("txn_01abc")),
            matched_by: Some(MatchedBy::RailReference),
            transaction_amount: Amount::new(100),
            transaction_currency: Currency::parse("USD"),
            transaction_status: Some(TransactionStatus::Confirmed),
            differences: vec![],
            applied: None,
            work_item_id: None,
            batch: None,
            amount_difference: None,
            group: vec![],
            balance: None,
        }
    }

    #[test]
    fn a_break_says_what_the_statement_and_the_service_each_hold() {
        let id = ReconciliationId::from("rec_1");
        let message = |line: ReconciliationLine| line.break_message("psp-local:sandbox", &id);
        let mismatched = ReconciliationLine {
            differences: vec![Difference::Amount, Difference::Status],
            applied: Some(TransactionStatus::Returned),
            ..line(LineOutcome::Mismatched)
        };
        assert_eq!(
            message(mismatched),
            "Line 2 of the psp-local:sandbox statement (reconciliation rec_1) does not agree with transaction \
             txn_01abc: the statement says 150 USD, the transaction 100 USD; the statement says returned, the \
             transaction was confirmed. It is now returned."
        );
        let twice = ReconciliationLine {
            differences: vec![Difference::Duplicate],
            ..line(LineOutcome::Mismatched)
        };
        assert_eq!(
            message(twice),
            "Line 2 of the psp-local:sandbox statement (reconciliation rec_1) does not agree with transaction \
             txn_01abc: an earlier line of the statement already matched it."
        );
        let other_currency = ReconciliationLine {
            differences: vec![Difference::Currency],
            transaction_currency: Currency::parse("EUR"),
            ..line(LineOutcome::Mismatched)
        };
        assert_eq!(
            message(other_currency),
            "Line 2 of the psp-local:sandbox statement (reconciliation rec_1) does not agree with transaction \
             txn_01abc: the statement's currency, USD, is not the transaction's, EUR."
        );
        let unmatched = ReconciliationLine {
            transaction_id: None,
            ..line(LineOutcome::Unmatched)
        };
        assert_eq!(
            message(unmatched),
            "Line 2 of the psp-local:sandbox statement (reconciliation rec_1) matches no transaction: rail \
             reference sbx_1, 150 USD."
        );
        let credit = ReconciliationLine {
            direction: Some(EntryDirection::Credit),
            ..line(LineOutcome::WrongDirection)
        };
        assert_eq!(
            message(credit),
            "Line 2 of the psp-local:sandbox statement (reconciliation rec_1) is a credit of 150 USD, but \
             transaction txn_01abc it names moves its money the other way."
        );
        let missing = ReconciliationLine {
            amount: None,
            currency: None,
            status: None,
            number: 7,
            ..line(LineOutcome::Missing)
        };
        assert_eq!(
            message(missing),
            "Transaction txn_01abc (100 USD, confirmed on psp-local:sandbox) is not in the statement \
             (reconciliation rec_1, line 7)."
        );
    }
}
