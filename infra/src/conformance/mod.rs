//! One behaviour suite per port, run against every implementation of it (embedded and AWS),
//! so local mode and the cloud cannot drift apart.

pub mod desk;
pub mod files;
pub mod queue;
pub mod rate_limiter;
pub mod reconciliations;
pub mod sandbox;
pub mod secrets;
pub mod store;
