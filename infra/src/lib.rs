//! Implementations of the domain's ports.
//!
//! - [`aws`]: DynamoDB, SQS, Secrets Manager and EventBridge for the cloud.
//! - [`embedded`]: local mode, a SQLite file (WAL) that keeps everything acknowledged across
//!   restarts.
//! - [`rails`]: the sandbox rail simulator and the HTTP rail adapter.
//! - [`webhook_sender`]: webhook delivery with reqwest.
//! - [`queue_consumer`]: receiving from the queues, for local mode's pump and the tests.
//! - [`InMemoryRateLimiter`]: request counts in the process's memory (local mode's, and a
//!   Lambda function's reads).
//! - [`conformance`]: the behaviour every store, queue and secrets implementation must show,
//!   run against each of them.

pub mod aws;
pub mod conformance;
pub mod embedded;
mod in_memory_rate_limiter;
pub mod queue_consumer;
pub mod rails;
pub mod webhook_sender;

pub use in_memory_rate_limiter::InMemoryRateLimiter;
pub use queue_consumer::QueueConsumer;

/// Rows or entries a list filtered by what is not a key (an operation's or an event's `type`)
/// reads at most for one request, however long the history it filters. A page that found
/// fewer items by then says where it read up to, and the next starts there.
pub const FILTERED_READ_BUDGET: usize = 1000;

/// Where a newest-first page starts: just past the id given, or before every id (ids are
/// sort keys, and none sorts after the last code point).
fn page_start(starting_after: Option<&str>) -> String {
    starting_after.map_or_else(|| "\u{10FFFF}".into(), String::from)
}
