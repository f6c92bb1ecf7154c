//! The sandbox rail's ledger in its own SQLite file, so it survives restarts of a local server
//! and tests in another process can read it.

use crate::rails::{SandboxEntry, SandboxLedger};
use async_trait::async_trait;
use ops_domain::rail::{Instruction, RailDirection, RailError};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::Path;
use std::sync::Mutex;
use time::Date;

pub struct SqliteSandboxLedger {
    connection: Mutex<Connection>,
}

fn rail_error(e: rusqlite::Error) -> RailError {
    RailError::Transient(format!("sandbox ledger: {e}"))
}

const COLUMNS: &str = "transaction_id, amount, coalesce(currency, ''), submit_calls, duplicate_submits, accepted,
     accepted_on, status_calls, coalesce(direction, 'credit')";

fn entry(row: &Row) -> rusqlite::Result<SandboxEntry> {
    let accepted_on: Option<String> = row.get(6)?;
    Ok(SandboxEntry {
        transaction_id: row.get(0)?,
        amount: row.get(1)?,
        currency: row.get(2)?,
        submit_calls: row.get(3)?,
        duplicate_submits: row.get(4)?,
        accepted: row.get(5)?,
        accepted_on: accepted_on
            .and_then(|day| Date::parse(&day, time::macros::format_description!("[year]-[month]-[day]")).ok()),
        status_calls: row.get(7)?,
        direction: RailDirection::parse(&row.get::<_, String>(8)?).unwrap_or_default(),
    })
}

impl SqliteSandboxLedger {
    pub fn open(path: &Path) -> rusqlite::Result<SqliteSandboxLedger> {
        let connection = Connection::open(path)?;
        connection.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS ledger (
                 transaction_id TEXT PRIMARY KEY, amount INTEGER NOT NULL, submit_calls INTEGER NOT NULL,
                 duplicate_submits INTEGER NOT NULL, accepted INTEGER NOT NULL, status_calls INTEGER NOT NULL);",
        )?;
        // Columns a statement needs, added to ledgers made before statements were written.
        for column in ["currency TEXT", "accepted_on TEXT", "direction TEXT"] {
            match connection.execute(&format!("ALTER TABLE ledger ADD COLUMN {column}"), []) {
                Err(e) if e.to_string().contains("duplicate column") => {}
                other => {
                    other?;
                }
            }
        }
        Ok(SqliteSandboxLedger {
            connection: Mutex::new(connection),
        })
    }

    /// Every entry, by transaction id (what [`SandboxLedger::entries`] answers, without a
    /// runtime: the `sandbox-statement` tool and tests in another process read it).
    pub fn read(&self) -> rusqlite::Result<Vec<SandboxEntry>> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let mut statement = connection.prepare(&format!("SELECT {COLUMNS} FROM ledger ORDER BY transaction_id"))?;
        let rows = statement.query_map([], entry)?;
        rows.collect()
    }
}

#[async_trait]
impl SandboxLedger for SqliteSandboxLedger {
    async fn count_submit(&self, instruction: &Instruction) -> Result<SandboxEntry, RailError> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let id = instruction.transaction_id.as_str();
        connection
            .execute(
                "INSERT INTO ledger (transaction_id, amount, currency, submit_calls, duplicate_submits, accepted, status_calls, direction)
                 VALUES (?1, ?2, ?3, 0, 0, 0, 0, ?4) ON CONFLICT (transaction_id) DO NOTHING",
                params![
                    id,
                    instruction.amount.minor_units(),
                    instruction.currency.code(),
                    instruction.direction.as_str()
                ],
            )
            .map_err(rail_error)?;
        connection
            .query_row(
                &format!(
                    "UPDATE ledger SET submit_calls = submit_calls + 1, duplicate_submits = duplicate_submits + accepted
                     WHERE transaction_id = ?1 RETURNING {COLUMNS}"
                ),
                [id],
                entry,
            )
            .map_err(rail_error)
    }

    async fn accept(&self, transaction_id: &str, day: Date) -> Result<(), RailError> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        connection
            .execute(
                "UPDATE ledger SET accepted = 1, accepted_on = ?2 WHERE transaction_id = ?1",
                params![transaction_id, day.to_string()],
            )
            .map_err(rail_error)?;
        Ok(())
    }

    async fn count_status(&self, transaction_id: &str) -> Result<Option<SandboxEntry>, RailError> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        connection
            .query_row(
                &format!(
                    "UPDATE ledger SET status_calls = status_calls + 1 WHERE transaction_id = ?1 RETURNING {COLUMNS}"
                ),
                [transaction_id],
                entry,
            )
            .optional()
            .map_err(rail_error)
    }

    async fn entries(&self) -> Result<Vec<SandboxEntry>, RailError> {
        self.read().map_err(rail_error)
    }
}
