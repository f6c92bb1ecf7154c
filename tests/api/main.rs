//! API tests: nearly every one starts the real local server (`spawn_app`) and speaks HTTP to it;
//! `in_process` calls the use cases on the service directly (`ops_tests::harness`).

mod auth;
mod business_days;
mod calendars;
mod console_page;
mod desk;
mod documents;
mod exceptions;
mod fair_share;
mod faults;
mod files;
mod four_eyes;
mod idempotency;
mod in_process;
mod ledger;
mod ledger_properties;
mod openapi;
mod operations;
mod pipeline;
mod rails;
mod reconciliations;
mod reports;
mod schedules;
mod security;
mod validation;
mod webhook_endpoints;
mod workflows;
