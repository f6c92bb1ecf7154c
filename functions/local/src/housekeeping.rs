//! Upkeep of the SQLite file that DynamoDB does by itself on AWS: idempotency records past
//! their retention are deleted there by the table's TTL, and here by this sweep, so the file
//! does not keep every response ever sent.

use ops_domain::ports::Clock;
use ops_infra::embedded::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

/// How often the sweep runs: a record is gone within a minute of its retention's end.
const EVERY: Duration = Duration::from_secs(60);
/// Records deleted in one write: the writer is held a few milliseconds at a time.
const BATCH: usize = 500;

/// Sweeps at once, then every [`EVERY`], until dropped.
pub(crate) async fn run(store: SqliteStore, clock: Arc<dyn Clock>) {
    loop {
        forget_expired(&store, clock.as_ref()).await;
        tokio::time::sleep(EVERY).await;
    }
}

async fn forget_expired(store: &SqliteStore, clock: &dyn Clock) {
    let now = clock.now();
    loop {
        match store.forget_expired_idempotency(now, BATCH).await {
            // A full batch: more may be waiting; requests take the writer in between.
            Ok(BATCH) => tokio::task::yield_now().await,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, "expired idempotency records stay until the next sweep");
                return;
            }
        }
    }
}
