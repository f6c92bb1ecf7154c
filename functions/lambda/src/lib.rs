//! The Lambda functions' shared library. Each binary in `src/bin/` is a thin `main` that
//! builds its clients once ([`deployment`]) and hands events to a handler here or in
//! `ops-api`; no logic lives in a `main`.

pub mod deployment;
pub mod provision;
pub mod pump;
pub mod triggers;

use ops_api::{App, Endpoint};

/// Serves one API endpoint behind API Gateway.
pub async fn serve_endpoint(endpoint: Endpoint) -> Result<(), lambda_http::Error> {
    let service = deployment::start().await?;
    lambda_http::run(ops_api::router_for(App { service }, &[endpoint])).await
}
