//! The rail adapter port and the registry of adapters by rail id.

use crate::access::Environment;
use crate::ids::TransactionId;
use crate::money::{Amount, Currency};
use crate::operations::Beneficiary;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use time::Date;

/// Which way the money goes at the rail: `credit` pays the beneficiary's account (a payout),
/// `debit` collects from the payer's account (a collection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RailDirection {
    #[default]
    Credit,
    Debit,
}

impl RailDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            RailDirection::Credit => "credit",
            RailDirection::Debit => "debit",
        }
    }

    pub fn parse(direction: &str) -> Option<RailDirection> {
        match direction {
            "credit" => Some(RailDirection::Credit),
            "debit" => Some(RailDirection::Debit),
            _ => None,
        }
    }
}

/// What the rail is asked to execute. `transaction_id` is the rail's idempotency key and the
/// payment's end-to-end id: the rail carries it with the payment (ISO 20022 `EndToEndId`, at
/// most 35 characters; ours are 30), so its statements can name the transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instruction {
    pub transaction_id: TransactionId,
    pub operation_id: crate::ids::OperationId,
    pub customer_id: crate::ids::CustomerId,
    pub amount: Amount,
    pub currency: Currency,
    pub beneficiary: Beneficiary,
    pub account: String,
    pub reference: Option<String>,
    /// The customer's end-to-end id (ISO 20022 `EndToEndId`), for the rail to carry with the
    /// payment beside ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
    pub environment: Environment,
    #[serde(default)]
    pub direction: RailDirection,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Ack {
    Accepted { rail_reference: String },
    Rejected { code: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RailState {
    Pending,
    Confirmed {
        rail_reference: String,
    },
    Failed {
        code: String,
        reason: String,
    },
    Returned {
        code: String,
        reason: String,
    },
    /// The rail has no instruction with this transaction id.
    NotFound,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RailError {
    /// Not accepted, try again later (the rail did not take the instruction).
    #[error("transient rail error: {0}")]
    Transient(String),
    /// No answer in time: the rail may or may not have the instruction.
    #[error("the rail did not answer in time")]
    Timeout,
    /// An answer that does not say whether the rail took the instruction (a proxy in front of
    /// it failed after passing it on): as after a timeout, it may or may not have it.
    #[error("the rail's answer does not say whether it took the instruction: {0}")]
    Unknown(String),
    #[error("permanent rail error: {0}")]
    Permanent(String),
}

/// What a statement says became of a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatementStatus {
    Confirmed,
    Failed,
    Returned,
}

impl StatementStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StatementStatus::Confirmed => "confirmed",
            StatementStatus::Failed => "failed",
            StatementStatus::Returned => "returned",
        }
    }

    pub fn parse(status: &str) -> Option<StatementStatus> {
        match status {
            "confirmed" => Some(StatementStatus::Confirmed),
            "failed" => Some(StatementStatus::Failed),
            "returned" => Some(StatementStatus::Returned),
            _ => None,
        }
    }
}

/// Which way a statement line's money moved on the service's account at the rail: a payout
/// leaves it (`debit`), a collection arrives in it (`credit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryDirection {
    Credit,
    Debit,
}

impl EntryDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryDirection::Credit => "credit",
            EntryDirection::Debit => "debit",
        }
    }

    pub fn parse(direction: &str) -> Option<EntryDirection> {
        match direction {
            "credit" => Some(EntryDirection::Credit),
            "debit" => Some(EntryDirection::Debit),
            _ => None,
        }
    }

    pub fn flipped(self) -> EntryDirection {
        match self {
            EntryDirection::Credit => EntryDirection::Debit,
            EntryDirection::Debit => EntryDirection::Credit,
        }
    }

    /// How a transaction that moves money `direction` at its rail books on the service's
    /// account there: paying a beneficiary debits it, collecting from a payer credits it.
    pub fn of(direction: RailDirection) -> EntryDirection {
        match direction {
            RailDirection::Credit => EntryDirection::Debit,
            RailDirection::Debit => EntryDirection::Credit,
        }
    }
}

/// A line that is one transaction detail of a batch booking: an entry of the statement that
/// books several payments as one amount (a payroll file's payouts as one debit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchDetail {
    /// The entry's number in the statement, from 1.
    pub entry: u32,
    /// How many transaction details the entry lists.
    pub details: u32,
    /// What the entry books in all.
    pub entry_amount: Amount,
}

/// One line of a rail's statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementLine {
    /// The rail's reference, when the statement gives one (ISO 20022 makes it optional).
    #[serde(default)]
    pub rail_reference: Option<String>,
    pub transaction_id: Option<TransactionId>,
    pub amount: Amount,
    pub currency: Currency,
    pub status: StatementStatus,
    /// The direction of the booking the line is about: a reversal's is the booking it
    /// reverses (the statement's indicator flipped), and `reversal` says so.
    pub direction: EntryDirection,
    #[serde(default)]
    pub reversal: bool,
    /// The batch booking the line is a detail of, if it is one.
    #[serde(default)]
    pub batch: Option<BatchDetail>,
    /// The day the rail booked it, when the statement says.
    #[serde(default, with = "iso_date::option")]
    pub booked_on: Option<Date>,
    /// The end-to-end id the statement gives when it is not one of ours: the customer's own
    /// (ISO 20022 `EndToEndId`), which finds its transaction when nothing else names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_id: Option<String>,
}

/// The days a statement covers, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    #[serde(with = "iso_date")]
    pub from: Date,
    #[serde(with = "iso_date")]
    pub to: Date,
}

impl Period {
    pub fn contains(&self, day: Date) -> bool {
        self.from <= day && day <= self.to
    }
}

/// A rail's statement as read: its lines, its period when the statement states one, and the
/// booked balances it gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    #[serde(default)]
    pub period: Option<Period>,
    pub lines: Vec<StatementLine>,
    #[serde(default)]
    pub balances: Vec<StatementBalance>,
    /// It speaks only of the payments it lists (a bank's status report on one file), not of
    /// every booking of its period: nothing confirmed here is `missing` from it.
    #[serde(default)]
    pub partial: bool,
}

/// Which of a statement's booked balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BalanceKind {
    /// Before the statement's first booking (camt `OPBD`, MT940 `:60F:`, BAI2 `010`).
    Opening,
    /// After its last (camt `CLBD`, MT940 `:62F:`, BAI2 `015`).
    Closing,
}

/// A booked balance of the service's account at the rail, as a statement gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementBalance {
    pub kind: BalanceKind,
    /// The day at whose end the account held it (an opening balance dated the statement's
    /// first day, as camt and BAI2 date it, stands at the end of the day before).
    #[serde(with = "iso_date")]
    pub at_end_of: Date,
    pub currency: Currency,
    /// Minor units; negative for a debit (overdrawn) balance.
    pub amount: i64,
}

/// How a statement is written: the rail's own CSV, or ISO 20022 `camt.053` XML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatementFormat {
    #[default]
    Csv,
    /// ISO 20022 bank-to-customer statement (end of day).
    Camt053,
    /// ISO 20022 account report (intraday).
    Camt052,
    /// ISO 20022 debit and credit notification (entry by entry).
    Camt054,
    /// SWIFT MT940 customer statement.
    Mt940,
    /// BAI2 (Bank Administration Institute) cash-management file.
    Bai2,
    /// ISO 20022 customer payment status report, a bank's answer to a file it was sent.
    Pain002,
}

impl StatementFormat {
    pub fn parse(format: &str) -> Option<StatementFormat> {
        match format {
            "csv" => Some(StatementFormat::Csv),
            "camt053" => Some(StatementFormat::Camt053),
            "camt052" => Some(StatementFormat::Camt052),
            "camt054" => Some(StatementFormat::Camt054),
            "mt940" => Some(StatementFormat::Mt940),
            "bai2" => Some(StatementFormat::Bai2),
            "pain002" => Some(StatementFormat::Pain002),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StatementFormat::Csv => "csv",
            StatementFormat::Camt053 => "camt053",
            StatementFormat::Camt052 => "camt052",
            StatementFormat::Camt054 => "camt054",
            StatementFormat::Mt940 => "mt940",
            StatementFormat::Bai2 => "bai2",
            StatementFormat::Pain002 => "pain002",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            StatementFormat::Csv => "text/csv",
            StatementFormat::Mt940 | StatementFormat::Bai2 => "text/plain",
            StatementFormat::Camt053
            | StatementFormat::Camt052
            | StatementFormat::Camt054
            | StatementFormat::Pain002 => "application/xml",
        }
    }
}

time::serde::format_description!(iso_date, Date, "[year]-[month]-[day]");

/// How a rail takes payments: each instruction as it comes, or all those of a cut-off in one
/// file handed over at the cut-off (a bank that takes payouts only as files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RailKind {
    #[default]
    Instructions,
    Files,
}

/// A bank file handed to a file rail: its pain.001, and what identifies it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileHandover<'a> {
    /// The file's id, which is also its `MsgId`: the connectivity layer's idempotency key.
    pub file_id: &'a str,
    pub cutoff_at: time::OffsetDateTime,
    pub transactions: usize,
    /// The same bytes at every handover of the file.
    pub pain001: &'a [u8],
}

#[async_trait]
pub trait RailAdapter: Send + Sync {
    /// `psp-local:<rail_name>`.
    fn id(&self) -> &str;
    /// Whether the rail takes instructions or files.
    fn kind(&self) -> RailKind {
        RailKind::Instructions
    }
    /// Hands a cut-off's file to a file rail's connectivity layer, which takes a file it
    /// already has (by its id) as the same file again.
    async fn hand_over_file(&self, file: &FileHandover<'_>) -> Result<Ack, RailError> {
        Err(RailError::Permanent(format!(
            "{} takes instructions, not the file {}",
            self.id(),
            file.file_id
        )))
    }
    /// Whether the connectivity layer has the file, when a handover's outcome was lost: its
    /// reference for it if it has.
    async fn file_received(&self, file_id: &str) -> Result<Option<String>, RailError> {
        Err(RailError::Permanent(format!(
            "{} takes instructions, not the file {file_id}",
            self.id()
        )))
    }
    /// Hands the instruction to the rail, which keeps its `transaction_id` as the payment's
    /// end-to-end id.
    async fn submit(&self, instruction: &Instruction) -> Result<Ack, RailError>;
    /// Asks what became of a transaction (by its id, the rail's idempotency key, and the
    /// rail's reference when known).
    async fn status(
        &self,
        transaction_id: &TransactionId,
        rail_reference: Option<&str>,
    ) -> Result<RailState, RailError>;
    /// Reads a statement of this rail. A statement that cannot be read is a permanent error.
    async fn import_statement(&self, format: StatementFormat, statement: &[u8]) -> Result<Statement, RailError>;
}

/// The adapters this deployment can use, by rail id.
#[derive(Clone, Default)]
pub struct Rails {
    adapters: BTreeMap<String, Arc<dyn RailAdapter>>,
}

impl Rails {
    pub fn with(mut self, adapter: Arc<dyn RailAdapter>) -> Rails {
        self.adapters.insert(adapter.id().to_owned(), adapter);
        self
    }

    pub fn get(&self, id: &str) -> Option<&Arc<dyn RailAdapter>> {
        self.adapters.get(id)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.adapters.contains_key(id)
    }

    /// The rails served, in id order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.adapters.keys().map(String::as_str)
    }
}
