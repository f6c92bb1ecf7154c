//! Payout limits: each customer's limits, and the counters of what was approved against them.

use super::*;
use async_trait::async_trait;
use ops_domain::ids::CustomerId;
use ops_domain::limits::{KnownPayee, LimitStore, LimitUse, PayoutLimits};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS payout_limits (customer_id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
-- What was approved against a limit, by counter (LimitUse::key): a day's or a month's sum, a
-- beneficiary's day's count.
CREATE TABLE IF NOT EXISTS limit_counters (key TEXT PRIMARY KEY, used INTEGER NOT NULL) WITHOUT ROWID;
-- Where each customer paid each beneficiary last (the payee review's memory).
CREATE TABLE IF NOT EXISTS known_payees (
    customer_id TEXT NOT NULL, payee TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (customer_id, payee)) WITHOUT ROWID;
";

pub(super) fn put_limits(tx: &Connection, limits: &PayoutLimits) -> Result<(), TxError> {
    one_row(tx.run(
        "INSERT INTO payout_limits (customer_id, version, body) VALUES (?1, ?2, ?3)
         ON CONFLICT (customer_id) DO UPDATE SET version = excluded.version, body = excluded.body
         WHERE payout_limits.version = excluded.version - 1",
        params![limits.customer_id.as_str(), limits.version as i64, json(limits)],
    )?)
}

/// The counter moves from `before` to `after`, or the changeset fails: a counter not yet
/// written holds 0, so its first use inserts it.
pub(super) fn use_limit(tx: &Connection, used: &LimitUse) -> Result<(), TxError> {
    let changed = if used.before == 0 {
        tx.run(
            "INSERT INTO limit_counters (key, used) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET used = excluded.used WHERE limit_counters.used = 0",
            params![used.key, used.after],
        )?
    } else {
        tx.run(
            "UPDATE limit_counters SET used = ?2 WHERE key = ?1 AND used = ?3",
            params![used.key, used.after, used.before],
        )?
    };
    one_row(changed)
}

pub(super) fn remember_payee(tx: &Connection, payee: &KnownPayee) -> Result<(), TxError> {
    tx.run(
        "INSERT INTO known_payees (customer_id, payee, body) VALUES (?1, ?2, ?3)
         ON CONFLICT (customer_id, payee) DO UPDATE SET body = excluded.body",
        params![payee.customer_id.as_str(), payee.payee, json(payee)],
    )?;
    Ok(())
}

#[async_trait]
impl LimitStore for SqliteStore {
    async fn payout_limits(&self, customer_id: &CustomerId) -> Result<Option<PayoutLimits>, StoreError> {
        self.document(
            "SELECT body FROM payout_limits WHERE customer_id = ?1",
            customer_id.into(),
        )
        .await
    }

    async fn limit_counters(&self, keys: &[String]) -> Result<Vec<i64>, StoreError> {
        self.look_up(|c| {
            let mut statement = c
                .prepare_cached("SELECT used FROM limit_counters WHERE key = ?1")
                .map_err(unavailable)?;
            keys.iter()
                .map(|key| {
                    statement
                        .query_row([key], |row| row.get::<_, i64>(0))
                        .optional()
                        .map(|used| used.unwrap_or(0))
                        .map_err(unavailable)
                })
                .collect()
        })
    }

    async fn known_payees(
        &self,
        customer_id: &CustomerId,
        payees: &[String],
    ) -> Result<Vec<Option<KnownPayee>>, StoreError> {
        self.look_up(|c| {
            let mut statement = c
                .prepare_cached("SELECT body FROM known_payees WHERE customer_id = ?1 AND payee = ?2")
                .map_err(unavailable)?;
            payees
                .iter()
                .map(|payee| {
                    let body: Option<String> = statement
                        .query_row(params![customer_id.as_str(), payee], |row| row.get(0))
                        .optional()
                        .map_err(unavailable)?;
                    body.map(|body| serde_json::from_str(&body).map_err(unavailable))
                        .transpose()
                })
                .collect()
        })
    }
}
