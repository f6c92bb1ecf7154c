//! What the Lambda functions and local mode share beneath the API: the settings a stack runs
//! with and the service assembled over the AWS adapters ([`deployment`]), provisioning a stack
//! on an emulator ([`provision`]), the trigger handlers (Lambda event payloads in, the domain's
//! consumers called, partial batch failures out: [`triggers`]), and the pump that feeds those
//! handlers from a real stream and real queues without Lambda ([`pump`]). Local mode depends on
//! this crate, not on the Lambda runtime.

pub mod deployment;
pub mod provision;
pub mod pump;
pub mod triggers;
