//! The Lambda functions' shared library. Each binary in `src/bin/` is a thin `main` that
//! builds its clients once ([`deployment`]) and hands events to a handler here or in
//! `ops-api`; no logic lives in a `main`.

pub mod deployment;
pub mod provision;
pub mod pump;
pub mod triggers;

use ops_api::{App, ClientAddress, Endpoint};

/// Serves one API endpoint behind API Gateway.
pub async fn serve_endpoint(endpoint: Endpoint) -> Result<(), lambda_http::Error> {
    let service = deployment::start().await?;
    let router = ops_api::router_for(App { service }, &[endpoint]).layer(axum::middleware::map_request(with_source_ip));
    lambda_http::run(router).await
}

/// API Gateway's view of the caller's address, for the failed-authentication limit.
async fn with_source_ip(mut request: axum::extract::Request) -> axum::extract::Request {
    use lambda_http::request::RequestContext;
    #[allow(irrefutable_let_patterns)]
    let source = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context.http.source_ip.clone(),
        _ => None,
    };
    if let Some(ip) = source {
        request.extensions_mut().insert(ClientAddress(ip));
    }
    request
}
