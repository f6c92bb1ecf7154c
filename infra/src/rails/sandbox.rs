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
//! Its ledger lives in its own SQLite file, so it survives restarts, and it counts every call:
//! tests read it to prove no transaction was ever sent twice. It also writes its statement
//! ([`statement_of`]): every instruction it accepted, with the outcome it reports.

use async_trait::async_trait;
use ops_domain::ids::TransactionId;
use ops_domain::money::{Amount, Currency};
use ops_domain::rail::{
    Ack, Instruction, RailAdapter, RailError, RailState, Statement, StatementFormat, StatementLine, StatementStatus,
};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

pub const SANDBOX_RAIL: &str = "psp-local:sandbox";

pub struct SandboxRail {
    ledger: Mutex<Connection>,
}

/// What the sandbox saw of one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxEntry {
    pub transaction_id: String,
    pub amount: i64,
    pub submit_calls: u32,
    /// Submits that arrived after the rail already held the instruction: must stay 0.
    pub duplicate_submits: u32,
    pub accepted: bool,
    pub status_calls: u32,
}

fn rail_error(e: rusqlite::Error) -> RailError {
    RailError::Transient(format!("sandbox ledger: {e}"))
}

impl SandboxRail {
    pub fn open(path: &Path) -> rusqlite::Result<SandboxRail> {
        let connection = Connection::open(path)?;
        connection.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS ledger (
                 transaction_id TEXT PRIMARY KEY, amount INTEGER NOT NULL, submit_calls INTEGER NOT NULL,
                 duplicate_submits INTEGER NOT NULL, accepted INTEGER NOT NULL, status_calls INTEGER NOT NULL);",
        )?;
        // Columns a statement needs, added to ledgers made before statements were written.
        for column in ["currency TEXT", "accepted_on TEXT"] {
            match connection.execute(&format!("ALTER TABLE ledger ADD COLUMN {column}"), []) {
                Err(e) if e.to_string().contains("duplicate column") => {}
                other => {
                    other?;
                }
            }
        }
        Ok(SandboxRail {
            ledger: Mutex::new(connection),
        })
    }

    pub fn entries(&self) -> Vec<SandboxEntry> {
        let connection = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        read_entries(&connection).unwrap_or_default()
    }

    fn outcome(amount: i64) -> i64 {
        amount % 100
    }
}

/// Reads a sandbox ledger file (for tests that run the server in another process).
pub fn read_entries(connection: &Connection) -> rusqlite::Result<Vec<SandboxEntry>> {
    let mut statement = connection.prepare(
        "SELECT transaction_id, amount, submit_calls, duplicate_submits, accepted, status_calls FROM ledger ORDER BY transaction_id",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(SandboxEntry {
            transaction_id: row.get(0)?,
            amount: row.get(1)?,
            submit_calls: row.get(2)?,
            duplicate_submits: row.get(3)?,
            accepted: row.get(4)?,
            status_calls: row.get(5)?,
        })
    })?;
    rows.collect()
}

impl SandboxEntry {
    pub fn read_file(path: &Path) -> rusqlite::Result<Vec<SandboxEntry>> {
        read_entries(&Connection::open(path)?)
    }

    /// The statement of the sandbox whose ledger is at `path` ([`statement_of`]).
    pub fn statement_file(path: &Path) -> rusqlite::Result<String> {
        statement_of(&Connection::open(path)?)
    }
}

#[async_trait]
impl RailAdapter for SandboxRail {
    fn id(&self) -> &str {
        SANDBOX_RAIL
    }

    async fn submit(&self, instruction: &Instruction) -> Result<Ack, RailError> {
        let connection = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let id = instruction.transaction_id.as_str();
        connection
            .execute(
                "INSERT INTO ledger (transaction_id, amount, currency, submit_calls, duplicate_submits, accepted, status_calls)
                 VALUES (?1, ?2, ?3, 0, 0, 0, 0) ON CONFLICT (transaction_id) DO NOTHING",
                params![id, instruction.amount.minor_units(), instruction.currency.code()],
            )
            .map_err(rail_error)?;
        let (calls, accepted): (u32, bool) = connection
            .query_row(
                "UPDATE ledger SET submit_calls = submit_calls + 1,
                     duplicate_submits = duplicate_submits + accepted
                 WHERE transaction_id = ?1 RETURNING submit_calls, accepted",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(rail_error)?;
        let reference = format!("sbx_{}", id.trim_start_matches("txn_"));
        if accepted {
            // A real rail deduplicates on the transaction id; the ledger counts it as a fault.
            return Ok(Ack::Accepted {
                rail_reference: reference,
            });
        }
        let accept = || {
            connection
                .execute(
                    "UPDATE ledger SET accepted = 1, accepted_on = ?2 WHERE transaction_id = ?1",
                    params![id, time::OffsetDateTime::now_utc().date().to_string()],
                )
                .map_err(rail_error)
        };
        match Self::outcome(instruction.amount.minor_units()) {
            1 => Ok(Ack::Rejected {
                code: "account_closed".into(),
                reason: "The destination account is closed.".into(),
            }),
            3 if calls <= 2 => Err(RailError::Transient(format!("sandbox busy (call {calls})"))),
            7 => Err(RailError::Transient(
                "sandbox always busy for amounts ending in 07".into(),
            )),
            4 => {
                accept()?;
                Err(RailError::Timeout)
            }
            8 => Err(RailError::Timeout),
            _ => {
                accept()?;
                Ok(Ack::Accepted {
                    rail_reference: reference,
                })
            }
        }
    }

    async fn status(
        &self,
        transaction_id: &ops_domain::ids::TransactionId,
        _rail_reference: Option<&str>,
    ) -> Result<RailState, RailError> {
        let connection = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let found: Option<(i64, bool, u32)> = connection
            .query_row(
                "UPDATE ledger SET status_calls = status_calls + 1 WHERE transaction_id = ?1 RETURNING amount, accepted, status_calls",
                [transaction_id.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(rail_error)?;
        let Some((amount, true, asked)) = found else {
            return Ok(RailState::NotFound);
        };
        let rail_reference = format!("sbx_{}", transaction_id.trim_start_matches("txn_"));
        Ok(match Self::outcome(amount) {
            2 => RailState::Failed {
                code: "insufficient_funds".into(),
                reason: "The payer account lacks funds.".into(),
            },
            5 if asked <= 3 => RailState::Pending,
            6 if asked >= 2 => RailState::Returned {
                code: "beneficiary_returned".into(),
                reason: "The beneficiary bank returned the funds.".into(),
            },
            _ => RailState::Confirmed { rail_reference },
        })
    }

    /// CSV statements are the sandbox's own ([`parse_csv`]); `camt.053` is read as ISO 20022.
    async fn import_statement(&self, format: StatementFormat, statement: &[u8]) -> Result<Statement, RailError> {
        match format {
            StatementFormat::Csv => parse_csv(statement),
            StatementFormat::Camt053 => {
                ops_domain::reconciliations::camt053::parse(statement).map_err(RailError::Permanent)
            }
        }
    }
}

/// The header of the sandbox's CSV statement; `booked_on` (YYYY-MM-DD) may be left empty.
pub const STATEMENT_HEADER: &str = "rail_reference,transaction_id,amount,currency,status,booked_on";

/// Reads the sandbox's CSV statement: [`STATEMENT_HEADER`]'s columns (the header line itself
/// is optional, and so is the last column).
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
            let bad = |field: &str| RailError::Permanent(format!("line {}: bad {field}", n + 1));
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if !(5..=6).contains(&fields.len()) {
                return Err(RailError::Permanent(format!("line {}: expected 5 or 6 fields", n + 1)));
            }
            let (reference, transaction, amount, currency, status) =
                (fields[0], fields[1], fields[2], fields[3], fields[4]);
            let booked = fields.get(5).copied().unwrap_or("");
            if reference.is_empty() {
                return Err(bad("rail_reference"));
            }
            Ok(StatementLine {
                rail_reference: reference.into(),
                transaction_id: match transaction {
                    "" => None,
                    id => Some(TransactionId::parse(id).ok_or_else(|| bad("transaction_id"))?),
                },
                amount: amount.parse().ok().and_then(Amount::new).ok_or_else(|| bad("amount"))?,
                currency: Currency::parse(currency).ok_or_else(|| bad("currency"))?,
                status: StatementStatus::parse(status).ok_or_else(|| bad("status"))?,
                booked_on: match booked {
                    "" => None,
                    booked => Some(time::Date::parse(booked, &day).map_err(|_| bad("booked_on"))?),
                },
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Statement { period: None, lines })
}

/// The sandbox's statement, as CSV: every instruction it accepted, with the outcome it
/// reports for it (`02` failed, `06` returned, the rest confirmed) and the day it took it.
pub fn statement_of(connection: &Connection) -> rusqlite::Result<String> {
    let mut statement = connection.prepare(
        "SELECT transaction_id, amount, coalesce(currency, ''), coalesce(accepted_on, '') FROM ledger
         WHERE accepted = 1 ORDER BY transaction_id",
    )?;
    let mut csv = format!("{STATEMENT_HEADER}\n");
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    for row in rows {
        let (id, amount, currency, day) = row?;
        let status = match SandboxRail::outcome(amount) {
            2 => "failed",
            6 => "returned",
            _ => "confirmed",
        };
        let reference = format!("sbx_{}", id.trim_start_matches("txn_"));
        csv.push_str(&format!("{reference},{id},{amount},{currency},{status},{day}\n"));
    }
    Ok(csv)
}

impl SandboxRail {
    /// This sandbox's statement ([`statement_of`]).
    pub fn statement(&self) -> String {
        let connection = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        statement_of(&connection).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_statement_is_read_into_typed_lines_and_a_bad_field_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let rail = SandboxRail::open(&dir.path().join("ledger.sqlite")).unwrap();
        let lines = rail
            .import_statement(
                StatementFormat::Csv,
                b"rail_reference,transaction_id,amount,currency,status,booked_on\nsbx_1,txn_01abc,1500,CLP,confirmed\n\nsbx_2,,20,USD,returned,2026-11-24\n",
            )
            .await
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
        for (bad, field) in [
            ("sbx_1,op_1,1500,CLP,confirmed", "transaction_id"),
            ("sbx_1,,0,CLP,confirmed", "amount"),
            ("sbx_1,,10,XXX1,confirmed", "currency"),
            ("sbx_1,,10,CLP,booked", "status"),
            ("sbx_1,,10,CLP,confirmed,24/11/2026", "booked_on"),
            (",,10,CLP,confirmed", "rail_reference"),
            ("sbx_1,,10,CLP", "5 or 6 fields"),
        ] {
            let refused = rail
                .import_statement(StatementFormat::Csv, bad.as_bytes())
                .await
                .unwrap_err();
            assert!(refused.to_string().contains(field), "{bad}: {refused}");
        }
    }
}
