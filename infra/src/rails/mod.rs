//! Rail adapters: the sandbox simulator and the HTTP adapter for a PSP's connectivity layer.

mod http;
mod sandbox;

pub use http::HttpRail;
pub use sandbox::{read_entries, statement_of, SandboxEntry, SandboxRail, SANDBOX_RAIL, STATEMENT_HEADER};
