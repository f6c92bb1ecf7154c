//! Scenarios told through the API alone, run on both backends: the embedded store
//! (`tests/api`) and the AWS adapters on the emulator (`tests/aws`). One file per part of the
//! API; each scenario is called by name from both suites.

mod access;
mod approval_chains;
mod customers;
mod file_rail;
mod holds;
mod limits;
mod reconciliations;
mod reversals;
mod webhook_endpoints;

pub use access::*;
pub use approval_chains::*;
pub use customers::*;
pub use file_rail::*;
pub use holds::*;
pub use limits::*;
pub use reconciliations::*;
pub use reversals::*;
pub use webhook_endpoints::*;
