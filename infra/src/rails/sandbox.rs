//! `psp-local:sandbox`: a deterministic rail simulator. The last two digits of an amount (in
//! minor units) choose the outcome:
//!
//! | ends in | outcome |
//! |---|---|
//! | `01` | rejected at submit (`account_closed`) |
//! | `02` | accepted, then failed (`insufficient_funds`) |
//! | `03` | two transient errors, then accepted and confirmed |
//! | `04` | submit times out, but the rail has it: `unknown`, then confirmed by status inquiry |
//! | `05` | late confirmation: `pending` for the first three inquiries, then confirmed |
//! | `06` | confirmed, then returned (`beneficiary_returned`) |
//! | `07` | transient errors forever (retries run out: `needs_attention`) |
//! | `08` | submit times out and the rail never got it: `unknown`, then `needs_attention` |
//! | other | accepted, confirmed at the first status inquiry |
//!
//! Its ledger ([`SandboxLedger`]) counts every call: tests read it to prove no transaction was
//! ever sent twice. Locally it is a SQLite file, so it survives restarts; on AWS it is a
//! partition of the stack's table, so every function of a deployed test stack sees the same
//! rail (the submit function's instruction is what the status poll asks about). It also gives
//! the rail's statement ([`statement_of`]): every instruction it accepted, with the outcome it
//! reports.

use async_trait::async_trait;
use ops_domain::ids::TransactionId;
use ops_domain::money::{Amount, Currency, MAX_ITEM_AMOUNT};
use ops_domain::rail::{
    Ack, EntryDirection, Instruction, RailAdapter, RailDirection, RailError, RailState, Statement, StatementFormat,
    StatementLine, StatementStatus,
};
use std::sync::Arc;
use time::Date;

pub const SANDBOX_RAIL: &str = "psp-local:sandbox";

/// What the sandbox saw of one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxEntry {
    pub transaction_id: String,
    pub amount: i64,
    pub currency: String,
    pub submit_calls: u32,
    /// Submits that arrived after the rail already held the instruction: must stay 0.
    pub duplicate_submits: u32,
    pub accepted: bool,
    /// The day the rail took the instruction (its statement's `booked_on`).
    pub accepted_on: Option<Date>,
    pub status_calls: u32,
    /// Which way the instruction moved the money (a payout's credit, a collection's debit).
    pub direction: RailDirection,
}

/// The sandbox's memory, one entry per transaction it was asked about. Every method is one
/// atomic step of the store behind it, so two functions calling the rail at once count right.
#[async_trait]
pub trait SandboxLedger: Send + Sync {
    /// Counts one submit of `instruction`, adding its entry on the first; a submit to an entry
    /// already accepted also counts as a duplicate. Answers the entry after counting.
    async fn count_submit(&self, instruction: &Instruction) -> Result<SandboxEntry, RailError>;

    /// Marks the transaction's instruction as taken by the rail on `day`.
    async fn accept(&self, transaction_id: &str, day: Date) -> Result<(), RailError>;

    /// Counts one status inquiry and answers the entry after counting; `None` (and nothing
    /// counted) when the rail never saw the transaction.
    async fn count_status(&self, transaction_id: &str) -> Result<Option<SandboxEntry>, RailError>;

    /// Every entry, by transaction id.
    async fn entries(&self) -> Result<Vec<SandboxEntry>, RailError>;
}

pub struct SandboxRail {
    ledger: Arc<dyn SandboxLedger>,
}

impl SandboxRail {
    pub fn new(ledger: Arc<dyn SandboxLedger>) -> SandboxRail {
        SandboxRail { ledger }
    }

    /// Every entry of the ledger (for tests).
    pub async fn entries(&self) -> Vec<SandboxEntry> {
        self.ledger.entries().await.expect("sandbox ledger readable")
    }

    /// This sandbox's statement ([`statement_of`]).
    pub async fn statement(&self) -> String {
        statement_of(&self.entries().await)
    }

    fn outcome(amount: i64) -> i64 {
        amount % 100
    }
}

fn reference_of(transaction_id: &str) -> String {
    format!("sbx_{}", transaction_id.trim_start_matches("txn_"))
}

#[async_trait]
impl RailAdapter for SandboxRail {
    fn id(&self) -> &str {
        SANDBOX_RAIL
    }

    async fn submit(&self, instruction: &Instruction) -> Result<Ack, RailError> {
        let id = instruction.transaction_id.as_str();
        let entry = self.ledger.count_submit(instruction).await?;
        let reference = reference_of(id);
        if entry.accepted {
            // A real rail deduplicates on the transaction id; the ledger counts it as a fault.
            return Ok(Ack::Accepted {
                rail_reference: reference,
            });
        }
        let today = time::OffsetDateTime::now_utc().date();
        match Self::outcome(instruction.amount.minor_units()) {
            1 => Ok(Ack::Rejected {
                code: "account_closed".into(),
                reason: "The destination account is closed.".into(),
            }),
            3 if entry.submit_calls <= 2 => Err(RailError::Transient(format!(
                "sandbox busy (call {})",
                entry.submit_calls
            ))),
            7 => Err(RailError::Transient(
                "sandbox always busy for amounts ending in 07".into(),
            )),
            4 => {
                self.ledger.accept(id, today).await?;
                Err(RailError::Timeout)
            }
            8 => Err(RailError::Timeout),
            _ => {
                self.ledger.accept(id, today).await?;
                Ok(Ack::Accepted {
                    rail_reference: reference,
                })
            }
        }
    }

    async fn status(
        &self,
        transaction_id: &TransactionId,
        _rail_reference: Option<&str>,
    ) -> Result<RailState, RailError> {
        let Some(entry) = self.ledger.count_status(transaction_id.as_str()).await? else {
            return Ok(RailState::NotFound);
        };
        if !entry.accepted {
            return Ok(RailState::NotFound);
        }
        Ok(match Self::outcome(entry.amount) {
            2 => RailState::Failed {
                code: "insufficient_funds".into(),
                reason: "The payer account lacks funds.".into(),
            },
            5 if entry.status_calls <= 3 => RailState::Pending,
            6 if entry.status_calls >= 2 => RailState::Returned {
                code: "beneficiary_returned".into(),
                reason: "The beneficiary bank returned the funds.".into(),
            },
            _ => RailState::Confirmed {
                rail_reference: reference_of(transaction_id.as_str()),
            },
        })
    }

    /// CSV statements are the sandbox's own ([`parse_csv`]); `camt.053`, `camt.052` and
    /// `camt.054` are read as ISO 20022.
    async fn import_statement(&self, format: StatementFormat, statement: &[u8]) -> Result<Statement, RailError> {
        match format {
            StatementFormat::Csv => parse_csv(statement),
            bank => ops_domain::reconciliations::read_bank_statement(bank, statement).map_err(RailError::Permanent),
        }
    }
}

/// The header of the sandbox's CSV statement: `rail_reference`, `transaction_id` and
/// `booked_on` (YYYY-MM-DD) may be left empty; `direction` is how the line booked on the
/// service's account (`debit`: a payout left it, `credit`: a collection arrived).
pub const STATEMENT_HEADER: &str = "rail_reference,transaction_id,amount,currency,status,booked_on,direction";

/// Reads the sandbox's CSV statement: [`STATEMENT_HEADER`]'s columns (the header line itself
/// is optional).
pub fn parse_csv(statement: &[u8]) -> Result<Statement, RailError> {
    let text =
        std::str::from_utf8(statement).map_err(|e| RailError::Permanent(format!("statement is not UTF-8: {e}")))?;
    let day = time::macros::format_description!("[year]-[month]-[day]");
    let lines = text
        .lines()
        .enumerate()
        .filter(|(n, line)| {
            let header = *n == 0 && line.trim() == STATEMENT_HEADER;
            !line.trim().is_empty() && !header
        })
        .map(|(n, line)| {
            // Each refusal names the line, the column, what it takes and what it was given
            // (its first 40 characters: a cell can be as long as the statement).
            let bad = |field: &str, takes: &str, given: &str| {
                let given: String = given.chars().take(40).collect();
                RailError::Permanent(format!("line {}: {field} is {takes}, not {given:?}", n + 1))
            };
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != 7 {
                return Err(RailError::Permanent(format!(
                    "line {}: expected 7 fields ({STATEMENT_HEADER}), found {}",
                    n + 1,
                    fields.len()
                )));
            }
            let (reference, transaction, amount, currency, status, booked, direction) = (
                fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6],
            );
            Ok(StatementLine {
                rail_reference: (!reference.is_empty()).then(|| reference.to_owned()),
                transaction_id: match transaction {
                    "" => None,
                    id => Some(
                        TransactionId::parse(id)
                            .ok_or_else(|| bad("transaction_id", "a transaction id (txn_…) or empty", id))?,
                    ),
                },
                amount: amount.parse().ok().and_then(Amount::new).ok_or_else(|| {
                    bad(
                        "amount",
                        &format!("a positive integer of minor units, at most {MAX_ITEM_AMOUNT}"),
                        amount,
                    )
                })?,
                currency: Currency::parse(currency)
                    .ok_or_else(|| bad("currency", "an active ISO 4217 code", currency))?,
                status: StatementStatus::parse(status)
                    .ok_or_else(|| bad("status", "confirmed, failed or returned", status))?,
                direction: EntryDirection::parse(direction)
                    .ok_or_else(|| bad("direction", "credit or debit", direction))?,
                reversal: false,
                batch: None,
                booked_on: match booked {
                    "" => None,
                    booked => Some(
                        time::Date::parse(booked, &day)
                            .map_err(|_| bad("booked_on", "a date (YYYY-MM-DD) or empty", booked))?,
                    ),
                },
                end_to_end_id: None,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Statement {
        lines,
        ..Statement::default()
    })
}

/// The sandbox's statement, as CSV: every instruction it accepted, with the outcome it
/// reports for it (`02` failed, `06` returned, the rest confirmed) and the day it took it.
pub fn statement_of(entries: &[SandboxEntry]) -> String {
    let mut csv = format!("{STATEMENT_HEADER}\n");
    for entry in entries.iter().filter(|e| e.accepted) {
        let status = match SandboxRail::outcome(entry.amount) {
            2 => "failed",
            6 => "returned",
            _ => "confirmed",
        };
        let day = entry.accepted_on.map(|d| d.to_string()).unwrap_or_default();
        let (id, amount, currency) = (&entry.transaction_id, entry.amount, &entry.currency);
        let direction = EntryDirection::of(entry.direction).as_str();
        csv.push_str(&format!(
            "{},{id},{amount},{currency},{status},{day},{direction}\n",
            reference_of(id)
        ));
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_read_into_typed_lines_and_a_bad_field_is_named() {
        let lines = parse_csv(
                format!("{STATEMENT_HEADER}\nsbx_1,txn_01abc,1500,CLP,confirmed,,debit\n\n,,20,USD,returned,2026-11-24,credit\n").as_bytes(),
            )
            .unwrap()
            .lines;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].transaction_id, Some(TransactionId::from("txn_01abc")));
        assert_eq!((lines[0].amount.minor_units(), lines[0].currency.code()), (1500, "CLP"));
        assert_eq!(
            (lines[1].transaction_id.clone(), lines[1].status),
            (None, StatementStatus::Returned)
        );
        assert_eq!(
            (lines[0].booked_on, lines[1].booked_on),
            (None, Some(time::macros::date!(2026 - 11 - 24)))
        );
        // A reference is optional; a direction is not.
        assert_eq!(
            (lines[0].rail_reference.as_deref(), lines[1].rail_reference.as_deref()),
            (Some("sbx_1"), None)
        );
        assert_eq!(
            (lines[0].direction, lines[1].direction),
            (EntryDirection::Debit, EntryDirection::Credit)
        );
        for (bad, told) in [
            (
                "sbx_1,op_1,1500,CLP,confirmed,,debit",
                "line 1: transaction_id is a transaction id (txn_…) or empty, not \"op_1\"",
            ),
            (
                &format!("{STATEMENT_HEADER}\nsbx_1,,-5,CLP,confirmed,,debit"),
                "line 2: amount is a positive integer of minor units, at most 999999999999, not \"-5\"",
            ),
            (
                "sbx_1,,1000000000000,CLP,confirmed,,debit",
                "line 1: amount is a positive integer of minor units, at most 999999999999, not \"1000000000000\"",
            ),
            (
                "sbx_1,,10,XXX1,confirmed,,debit",
                "line 1: currency is an active ISO 4217 code, not \"XXX1\"",
            ),
            (
                "sbx_1,,10,CLP,booked,,debit",
                "line 1: status is confirmed, failed or returned, not \"booked\"",
            ),
            (
                "sbx_1,,10,CLP,confirmed,24/11/2026,debit",
                "line 1: booked_on is a date (YYYY-MM-DD) or empty, not \"24/11/2026\"",
            ),
            (
                "sbx_1,,10,CLP,confirmed,,out",
                "line 1: direction is credit or debit, not \"out\"",
            ),
            (
                "sbx_1,,10,CLP,confirmed,2026-11-24",
                "line 1: expected 7 fields (rail_reference,transaction_id,amount,currency,status,booked_on,direction), found 6",
            ),
        ] {
            let refused = parse_csv(bad.as_bytes()).unwrap_err();
            assert!(refused.to_string().ends_with(told), "{bad}: {refused}");
        }
        // A long cell is quoted by its first 40 characters.
        let long = format!("sbx_1,,10,{},confirmed,,debit", "X".repeat(1000));
        let refused = parse_csv(long.as_bytes()).unwrap_err().to_string();
        let told = format!(
            "line 1: currency is an active ISO 4217 code, not \"{}\"",
            "X".repeat(40)
        );
        assert!(refused.ends_with(&told), "{refused}");
    }
}
