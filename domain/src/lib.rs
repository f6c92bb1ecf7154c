//! The payment operations service's business rules.
//!
//! This crate knows nothing of HTTP, SQLite or AWS. Use cases in [`service`] talk to the
//! outside world only through the traits in [`ports`]; `ops-infra` implements them.

pub mod auth;
pub mod cause;
pub mod error;
pub mod event;
pub mod execution;
pub mod idempotency;
pub mod ids;
pub mod money;
pub mod operation;
pub mod pipeline;
pub mod ports;
pub mod rail;
pub mod service;
pub mod signature;
pub mod transaction;
pub mod validate;
pub mod webhook;
pub mod workflow;

pub use error::DomainError;
