//! The payment operations service's business rules.
//!
//! This crate knows nothing of HTTP, SQLite or AWS. Each module of the service is a folder
//! with its entities, its state table and its use cases, which talk to the outside world only
//! through the traits in [`ports`] (`ops-infra` implements them):
//!
//! - [`access`]: customers, users, API keys, who a request acts as, and request limits;
//! - [`approvals`]: workflows and approval floors (which approvals an operation needs);
//! - [`operations`]: operations, the four-eyes rules, and the operations API (create, query,
//!   approve, cancel);
//! - [`transactions`]: transactions, the execution pipeline, operator actions, rail reports;
//! - [`webhooks`]: events' deliveries, signatures and endpoints;
//! - [`schedules`]: recurring operations and the timer that fires them;
//! - [`ledger`]: accounts and movements (double entry), holds placed with an approval;
//! - [`desk`]: work queues, exceptions and the operations board;
//! - [`files`]: payroll files that become operations;
//! - [`reports`]: a period's operations with their totals.
//!
//! Beside them: [`service`] (the shared state the use cases run on), and the pieces every
//! module uses (causes, errors, events, idempotency, ids, money, operation types, rails,
//! validation). The module folders import each other one way only: access ← approvals ←
//! operations ← transactions, webhooks beside them, and schedules on top of operations.

pub mod access;
pub mod approvals;
pub mod cause;
pub mod desk;
pub mod error;
pub mod event;
pub mod files;
pub mod idempotency;
pub mod ids;
pub mod ledger;
pub mod money;
pub mod operation_type;
pub mod operations;
pub mod ports;
pub mod rail;
pub mod reconciliations;
pub mod reports;
pub mod schedules;
pub mod service;
pub mod transactions;
pub mod validate;
pub mod webhooks;

pub use error::DomainError;
