//! Local mode's ports: everything lives in one SQLite file, including the change stream (the
//! event log read from per-consumer checkpoints) and the queues.

mod queue;
mod sqlite_store;

pub use queue::SqliteQueue;
pub use sqlite_store::SqliteStore;
