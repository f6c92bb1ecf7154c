//! Rail adapters: the sandbox simulator and the HTTP adapter for a PSP's connectivity layer.

mod http;
mod sandbox;

pub use http::HttpRail;
pub use sandbox::{parse_csv, statement_of, SandboxEntry, SandboxLedger, SandboxRail, SANDBOX_RAIL, STATEMENT_HEADER};
