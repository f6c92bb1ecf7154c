//! The Lambda functions' shared library. Each binary in `src/bin/` is a thin `main` that
//! builds its clients once ([`start`], over `ops-runtime`) and hands events to a handler: an
//! API endpoint's router from `ops-api`, or a trigger handler from `ops_runtime::triggers`. No
//! logic lives in a `main`.

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};
use ops_api::{App, ClientAddress, Endpoint};
use ops_domain::ports::QueueName;
use ops_domain::service::Service;
use ops_runtime::deployment::{system_clock, Settings};
use ops_runtime::driver::StreamConsumer;
use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Serves one API endpoint behind API Gateway.
pub async fn serve_endpoint(endpoint: Endpoint) -> Result<(), lambda_http::Error> {
    let service = start().await?;
    let router = ops_api::lambda_router_for(App { service }, &[endpoint], ops_api::spill::LAMBDA_RESPONSE_LIMIT)
        .layer(axum::middleware::map_request(with_source_ip));
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

/// Serves one consumer of the table's stream (its event source mapping hands it batches).
pub async fn serve_stream(consumer: StreamConsumer) -> Result<(), lambda_runtime::Error> {
    let service = start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<StreamEvent>| {
        let service = service.clone();
        async move { Ok::<_, lambda_runtime::Error>(ops_runtime::triggers::stream(&service, consumer, event.payload).await) }
    }))
    .await
}

/// Serves the consumer of one queue.
pub async fn serve_queue(queue: QueueName) -> Result<(), lambda_runtime::Error> {
    let service = start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let service = service.clone();
        async move { Ok::<_, lambda_runtime::Error>(ops_runtime::triggers::queue(&service, queue, event.payload).await) }
    }))
    .await
}

/// The dead-letter function: the dead-letter queues → exceptions work items.
pub async fn serve_dead_letters() -> Result<(), lambda_runtime::Error> {
    let service = start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let service = service.clone();
        async move { Ok::<_, lambda_runtime::Error>(ops_runtime::triggers::dead_letters(&service, event.payload).await) }
    }))
    .await
}

/// A trigger function's start: logs, settings and the service, once per container.
pub async fn start() -> Result<Arc<Service>, Error> {
    init_tracing();
    Settings::from_env()?.service(system_clock()).await
}

/// JSON logs for CloudWatch, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .without_time()
        .try_init();
}
