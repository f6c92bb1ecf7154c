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
//! tests read it to prove no transaction was ever sent twice.

use async_trait::async_trait;
use ops_domain::ids::TransactionId;
use ops_domain::money::{Amount, Currency};
use ops_domain::rail::{Ack, Instruction, RailAdapter, RailError, RailState, StatementLine, StatementStatus};
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
                "INSERT INTO ledger (transaction_id, amount, submit_calls, duplicate_submits, accepted, status_calls)
                 VALUES (?1, ?2, 0, 0, 0, 0) ON CONFLICT (transaction_id) DO NOTHING",
                params![id, instruction.amount.minor_units()],
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
                .execute("UPDATE ledger SET accepted = 1 WHERE transaction_id = ?1", [id])
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

    /// Statement format: CSV lines `rail_reference,transaction_id,amount,currency,status`.
    async fn import_statement(&self, statement: &[u8]) -> Result<Vec<StatementLine>, RailError> {
        let text =
            std::str::from_utf8(statement).map_err(|e| RailError::Permanent(format!("statement is not UTF-8: {e}")))?;
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .enumerate()
            .map(|(n, line)| {
                let fields: Vec<&str> = line.split(',').map(str::trim).collect();
                let [reference, transaction, amount, currency, status] = fields[..] else {
                    return Err(RailError::Permanent(format!("line {}: expected 5 fields", n + 1)));
                };
                let bad = |field: &str| RailError::Permanent(format!("line {}: bad {field}", n + 1));
                Ok(StatementLine {
                    rail_reference: reference.into(),
                    transaction_id: match transaction {
                        "" => None,
                        id => Some(TransactionId::parse(id).ok_or_else(|| bad("transaction_id"))?),
                    },
                    amount: amount.parse().ok().and_then(Amount::new).ok_or_else(|| bad("amount"))?,
                    currency: Currency::parse(currency).ok_or_else(|| bad("currency"))?,
                    status: StatementStatus::parse(status).ok_or_else(|| bad("status"))?,
                })
            })
            .collect()
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
            .import_statement(b"sbx_1,txn_01abc,1500,CLP,confirmed\n\nsbx_2,,20,USD,returned\n")
            .await
            .unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].transaction_id, Some(TransactionId::from("txn_01abc")));
        assert_eq!((lines[0].amount.minor_units(), lines[0].currency.code()), (1500, "CLP"));
        assert_eq!(
            (lines[1].transaction_id.clone(), lines[1].status),
            (None, StatementStatus::Returned)
        );
        for (bad, field) in [
            ("sbx_1,op_1,1500,CLP,confirmed", "transaction_id"),
            ("sbx_1,,0,CLP,confirmed", "amount"),
            ("sbx_1,,10,XXX1,confirmed", "currency"),
            ("sbx_1,,10,CLP,booked", "status"),
        ] {
            let refused = rail.import_statement(bad.as_bytes()).await.unwrap_err();
            assert!(refused.to_string().contains(field), "{bad}: {refused}");
        }
    }
}
