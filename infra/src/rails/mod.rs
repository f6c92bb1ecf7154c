//! Rail adapters: the sandbox simulator and the HTTP adapter for a PSP's connectivity layer.

mod sandbox;

pub use sandbox::{read_entries, SandboxEntry, SandboxRail, SANDBOX_RAIL};
