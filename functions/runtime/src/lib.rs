//! What the Lambda functions and local mode share beneath the API: the composition root
//! ([`compose`]: the one place a `Service` is assembled, over the embedded or the AWS adapters),
//! the settings a stack runs with ([`deployment`]), provisioning a stack on an emulator
//! ([`provision`]), the trigger handlers (Lambda event payloads in, the domain's consumers
//! called, partial batch failures out: [`triggers`]), and the one trigger driver that runs
//! those consumers without Lambda ([`driver`], over the change streams of [`streams`]). Local
//! mode depends on this crate, not on the Lambda runtime.

pub mod compose;
pub mod deployment;
pub mod driver;
pub mod provision;
pub mod replay;
pub mod streams;
pub mod triggers;
