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
//! module uses (causes, errors, events, idempotency, ids, money, operation types, rails, free
//! text, validation). The module folders import each other one way only: access ← approvals ←
//! operations ← transactions, webhooks beside them, and schedules on top of operations.

pub mod access;
pub mod approvals;
pub mod body;
pub mod calendars;
pub mod cause;
pub mod desk;
pub mod error;
pub mod event;
pub mod event_data;
pub mod files;
pub mod history;
pub mod idempotency;
pub mod ids;
pub mod ledger;
pub mod limits;
pub mod money;
pub mod operation_type;
pub mod operations;
pub mod ports;
pub mod rail;
pub mod reconciliations;
pub mod reports;
pub mod schedules;
pub mod service;
pub mod tallies;
pub mod text;
pub mod transactions;
pub mod validate;
pub mod webhooks;
mod xml_writer;
pub mod zone;

pub use error::DomainError;

#[cfg(test)]
mod tests {
    /// A file over this is a room holding two concerns: split it by concern (as ledger/ into
    /// the accounts API, postings and flows) rather than let the next module grow it.
    const MAX_LINES: usize = 600;

    #[test]
    fn no_source_file_of_the_domain_outgrows_one_concern() {
        let mut pending = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
        let mut read = 0;
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "rs") {
                    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                    assert!(lines <= MAX_LINES, "{} has {lines} lines", path.display());
                    read += 1;
                }
            }
        }
        assert!(read >= 40, "read only {read} files");
    }
}
