//! Local mode's ports: everything lives in one SQLite file (secrets sealed), including the change stream (the
//! event log read from per-consumer checkpoints) and the queues. Request counts for the rate
//! limit stay in memory ([`crate::InMemoryRateLimiter`]).

mod blob_directory;
mod log_metrics;
mod queue;
mod sandbox_ledger;
mod sealed_secrets;
mod snapshot;
mod sqlite_store;
mod wal_batching;

pub use blob_directory::BlobDirectory;
pub use log_metrics::LogMetrics;
pub use queue::SqliteQueue;
pub use sandbox_ledger::SqliteSandboxLedger;
pub use sealed_secrets::SealedSecrets;
pub use snapshot::copy_database;
pub use sqlite_store::SqliteStore;
