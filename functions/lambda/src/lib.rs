//! The Lambda functions. Every function of `template.yaml` runs one of three bootstraps, each
//! built once and shared: `ops-api` (`src/bin/ops-api.rs`) and `ops-schedules` for the
//! API's endpoints (each its own, [`ops_api::Bootstrap`]), `ops-triggers` for the pipeline's
//! triggers. A bootstrap runs the [`Function`] its `Handler` property names: it builds its
//! clients once ([`start`], over `ops-runtime`) and hands events to a handler, an API
//! endpoint's router from `ops-api` or a trigger handler from `ops_runtime::triggers`. Each
//! function keeps its own route, trigger and least-privilege policy; only the file is shared.
//! Three files rather than one because no function needs the others' code (the other
//! endpoints' routes, or the stream and queue handlers), and one file holding all of it would
//! be over the 8 MiB a function's file may take.

pub mod template;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};
use ops_api::{App, ClientAddress, Endpoint};
use ops_domain::ports::QueueName;
use ops_domain::service::Service;
use ops_runtime::deployment::{system_clock, Settings};
use ops_runtime::driver::{StreamConsumer, Trigger};
use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What one Lambda function runs: an API endpoint or a trigger of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Endpoint(Endpoint),
    Trigger(Trigger),
    /// Stream batches that failed for good, replayed when an operator invokes it
    /// (`ops_runtime::replay`).
    StreamReplay,
    /// A new stack's first platform admin key, minted when an operator invokes it and only
    /// while the platform has none.
    FirstPlatformKey,
}

impl Function {
    /// Every function of the stack, endpoints first.
    pub fn all() -> impl Iterator<Item = Function> {
        let endpoints = Endpoint::ALL.iter().map(|e| Function::Endpoint(*e));
        endpoints
            .chain(Trigger::ALL.map(Function::Trigger))
            .chain([Function::StreamReplay, Function::FirstPlatformKey])
    }

    /// The function's `Handler` in `template.yaml`: `api-` and the endpoint's name in kebab
    /// case (`api-create-operation`), or the trigger's name (`stream-transition`).
    pub fn handler(self) -> String {
        match self {
            Function::Endpoint(endpoint) => {
                let mut name = String::from("api");
                for c in endpoint.name().chars() {
                    if c.is_ascii_uppercase() {
                        name.push('-');
                    }
                    name.push(c.to_ascii_lowercase());
                }
                name
            }
            Function::Trigger(trigger) => trigger.as_str().to_owned(),
            Function::StreamReplay => "stream-replay".to_owned(),
            Function::FirstPlatformKey => "first-platform-key".to_owned(),
        }
    }

    /// The function a `Handler` names.
    pub fn named(handler: &str) -> Option<Function> {
        Function::all().find(|f| f.handler() == handler)
    }

    /// The bootstrap that runs it (`template.yaml`'s `Binary`).
    pub fn binary(self) -> &'static str {
        match self {
            Function::Endpoint(endpoint) => endpoint.bootstrap().binary(),
            Function::Trigger(_) | Function::StreamReplay | Function::FirstPlatformKey => "ops-triggers",
        }
    }
}

/// The function Lambda started this container for: its `Handler`, which Lambda passes as
/// `_HANDLER`.
pub fn started_function() -> Result<Function, Error> {
    let handler =
        std::env::var("_HANDLER").map_err(|_| "_HANDLER is not set: a function's Handler names what it runs")?;
    Function::named(&handler).ok_or_else(|| format!("no function is named {handler:?}").into())
}

/// Runs `trigger` for the life of the container.
pub async fn serve_trigger(trigger: Trigger) -> Result<(), Error> {
    match trigger {
        Trigger::Stream(consumer) => serve_stream(consumer).await,
        Trigger::Queue(queue) => serve_queue(queue).await,
        Trigger::DeadLetters => serve_dead_letters().await,
        Trigger::StatusPoll => serve_status_poll().await,
        Trigger::ScheduleTimer => serve_schedule_fire().await,
        Trigger::Outbox => serve_outbox().await,
        Trigger::SecretSweep => serve_secret_sweep().await,
    }
}

/// Makes the router of an endpoint its bootstrap serves (`ops_api::api_lambda_router`).
pub type EndpointRouter = fn(App, Endpoint, usize) -> Option<axum::Router>;

/// Serves one API endpoint behind API Gateway, with the router of the bootstrap running.
pub async fn serve_endpoint(endpoint: Endpoint, router_of: EndpointRouter) -> Result<(), lambda_http::Error> {
    let service = start().await?;
    let router = router_of(App { service }, endpoint, ops_api::spill::LAMBDA_RESPONSE_LIMIT)
        .ok_or_else(|| format!("{endpoint:?} runs in {}", endpoint.bootstrap().binary()))?
        .layer(axum::middleware::map_request(with_source_ip));
    lambda_http::run(router).await
}

/// API Gateway's view of the caller's address, for the failed-authentication limit.
async fn with_source_ip(mut request: axum::extract::Request) -> axum::extract::Request {
    use lambda_http::request::RequestContext;
    #[allow(irrefutable_let_patterns)]
    let source = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context.http.source_ip.as_deref().and_then(|ip| ip.parse().ok()),
        _ => None,
    };
    if let Some(ip) = source {
        request.extensions_mut().insert(ClientAddress(ip));
    }
    request
}

/// Serves a trigger: `handle` answers each invocation's payload with the service, built once
/// per container.
async fn run_trigger<E, R, Fut>(handle: impl Fn(Arc<Service>, E) -> Fut) -> Result<(), lambda_runtime::Error>
where
    E: serde::de::DeserializeOwned + Send + 'static,
    R: serde::Serialize + Send + 'static,
    Fut: std::future::Future<Output = Result<R, lambda_runtime::Error>> + Send,
{
    let service = start().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<E>| {
        handle(service.clone(), event.payload)
    }))
    .await
}

/// Serves one consumer of the table's stream (its event source mapping hands it batches).
pub async fn serve_stream(consumer: StreamConsumer) -> Result<(), lambda_runtime::Error> {
    run_trigger(move |service, batch: StreamEvent| async move {
        Ok(ops_runtime::triggers::stream(&service, consumer, batch).await)
    })
    .await
}

/// Serves the consumer of one queue.
pub async fn serve_queue(queue: QueueName) -> Result<(), lambda_runtime::Error> {
    run_trigger(move |service, batch: SqsEvent| async move {
        Ok(ops_runtime::triggers::queue(&service, queue, batch).await)
    })
    .await
}

/// Invoked by hand → the stream batches that failed for good, replayed; answers what it did.
pub async fn serve_stream_replay() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let replay = Arc::new(ops_runtime::replay::StreamReplay::from_env().await?);
    lambda_runtime::run(service_fn(|_: LambdaEvent<serde_json::Value>| {
        let replay = replay.clone();
        async move { replay.run().await }
    }))
    .await
}

/// Invoked by hand on a new stack → its first platform admin key: `{id, secret}`, the secret
/// shown this once; refused once the platform has any key.
pub async fn serve_first_platform_key() -> Result<(), lambda_runtime::Error> {
    run_trigger(|service, _: serde_json::Value| async move {
        let (id, secret) = service.first_platform_key().await?;
        Ok(serde_json::json!({"object": "api_key", "id": id, "secret": secret}))
    })
    .await
}

/// The dead-letter function: the dead-letter queues → exceptions work items.
pub async fn serve_dead_letters() -> Result<(), lambda_runtime::Error> {
    run_trigger(
        |service, batch: SqsEvent| async move { Ok(ops_runtime::triggers::dead_letters(&service, batch).await) },
    )
    .await
}

/// EventBridge (every minute) → expire the approvals past their ttl, and ask the rails about
/// transactions whose poll is due.
pub async fn serve_status_poll() -> Result<(), lambda_runtime::Error> {
    run_trigger(|service, _: serde_json::Value| async move { Ok(ops_runtime::triggers::status_poll(&service).await?) })
        .await
}

/// EventBridge (daily) → delete the signing secrets no webhook endpoint names.
pub async fn serve_secret_sweep() -> Result<(), lambda_runtime::Error> {
    run_trigger(|service, _: serde_json::Value| async move { Ok(ops_runtime::triggers::secret_sweep(&service).await?) })
        .await
}

/// EventBridge Scheduler (one schedule per schedule) → record the occurrence it names.
pub async fn serve_schedule_fire() -> Result<(), lambda_runtime::Error> {
    run_trigger(|service, payload: serde_json::Value| async move {
        Ok(ops_runtime::triggers::schedule_fire(&service, payload).await?)
    })
    .await
}

/// stream → the events and audit entries a writer left in its entity's outbox. Needs the
/// table alone, not the service.
pub async fn serve_outbox() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let store = Settings::from_env()?.store()?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<StreamEvent>| {
        let store = store.clone();
        async move { Ok::<_, Error>(ops_runtime::triggers::outbox(&store, &event.payload).await) }
    }))
    .await
}

/// A function's start: logs, settings and the service, once per container.
pub async fn start() -> Result<Arc<Service>, Error> {
    init_tracing();
    Settings::from_env()?.service(system_clock()).await
}

/// JSON logs for CloudWatch, filtered by `RUST_LOG` (`warn`, `info,ops_infra=warn`; default
/// `info`). Read as a list of targets: the regex-based `EnvFilter` would add its regex engine
/// to every function's binary. A release build has no debug or trace events to filter: the
/// crate's `release_max_level_info` features leave them out (about 0.4 MB of the binary, most
/// of it the AWS SDK's).
pub fn init_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let _ = json_logs(std::io::stdout).with(filter).try_init();
}

/// The functions' log lines: one JSON object each, with the spans it was logged in (the
/// runtime's, naming the Lambda request id, and the API's, naming its own request id and the
/// caller's key), and no time (CloudWatch stamps each line).
pub fn json_logs<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .without_time()
        .with_writer(writer)
        .finish()
}
