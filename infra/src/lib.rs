//! Implementations of the domain's ports.
//!
//! - [`embedded`]: local mode, a SQLite file (WAL) that keeps everything acknowledged across
//!   restarts.
//! - [`conformance`]: the behaviour every store must show, run against each implementation.

pub mod conformance;
pub mod embedded;
