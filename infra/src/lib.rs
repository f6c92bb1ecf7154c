//! Implementations of the domain's ports.
//!
//! - [`aws`]: DynamoDB, SQS, Secrets Manager and EventBridge for the cloud.
//! - [`embedded`]: local mode, a SQLite file (WAL) that keeps everything acknowledged across
//!   restarts.
//! - [`rails`]: the sandbox rail simulator and the HTTP rail adapter.
//! - [`webhook_sender`]: webhook delivery with reqwest.
//! - [`conformance`]: the behaviour every store must show, run against each implementation.

pub mod aws;
pub mod conformance;
pub mod embedded;
pub mod rails;
pub mod webhook_sender;
