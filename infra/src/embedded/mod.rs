//! Local mode's ports: everything lives in one SQLite file, including the change stream (the
//! event log read from per-consumer checkpoints) and the queues. Request counts for the rate
//! limit stay in memory.

mod queue;
mod rate_limiter;
mod sqlite_store;

pub use queue::SqliteQueue;
pub use rate_limiter::InMemoryRateLimiter;
pub use sqlite_store::SqliteStore;
