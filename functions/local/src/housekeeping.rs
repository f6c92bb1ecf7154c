//! Upkeep of the SQLite file that DynamoDB does by itself on AWS: idempotency records past
//! their retention are deleted there by the table's TTL, and here by this sweep, so the file
//! does not keep every response ever sent.

use ops_domain::ports::Clock;
use ops_infra::embedded::SqliteStore;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// How often the sweep runs: a record is gone within a minute of its retention's end.
const EVERY: Duration = Duration::from_secs(60);
/// Records deleted in one write, which holds the writer for about a millisecond and a half.
const BATCH: usize = 500;
/// The rest after a full batch. Each batch adds some 600 pages to the WAL; without a rest a
/// sweep of 100,000 records held the writer for most of 0.8 s and filled the WAL faster than
/// the checkpointer (then every 200 ms) emptied it, so a write waited 41–44 ms at p99 (a
/// commit copying the WAL into the database file itself), against 2 ms with this rest; with
/// the checkpointer every 25 ms while busy, 2.3–3.2 ms (`ops-bench sweep`).
const REST: Duration = Duration::from_millis(20);

/// Sweeps at once, then every [`EVERY`], until dropped.
pub(crate) async fn run(store: SqliteStore, clock: Arc<dyn Clock>) {
    loop {
        forget_expired(&store, clock.now()).await;
        tokio::time::sleep(EVERY).await;
    }
}

/// Deletes the records whose retention ended by `now`, a batch at a time; answers how many.
pub async fn forget_expired(store: &SqliteStore, now: OffsetDateTime) -> usize {
    let mut forgotten = 0;
    loop {
        match store.forget_expired_idempotency(now, BATCH).await {
            Ok(BATCH) => {
                forgotten += BATCH;
                tokio::time::sleep(REST).await;
            }
            Ok(last) => return forgotten + last,
            Err(error) => {
                tracing::warn!(%error, "expired idempotency records stay until the next sweep");
                return forgotten;
            }
        }
    }
}
