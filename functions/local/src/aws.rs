//! Local mode on AWS: the same server, with the AWS adapters instead of SQLite (LocalStack,
//! moto, or real AWS as `AWS_ENDPOINT_URL` says), pumping the table's stream and the SQS
//! queues itself so the whole lifecycle runs without Lambda.

use crate::{loops, Config, StartError};
use ops_api::App;
use ops_domain::access::Environment;
use ops_domain::ports::{Clock, QueueName};
use ops_runtime::deployment::Settings;
use ops_runtime::pump::{Pump, StreamConsumer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

pub struct AwsServer {
    pub address: SocketAddr,
    pub task: JoinHandle<std::io::Result<()>>,
}

fn config_error(e: impl std::fmt::Display) -> StartError {
    StartError::Config(e.to_string())
}

pub async fn start_on_aws(config: Config, clock: Arc<dyn Clock>) -> Result<AwsServer, StartError> {
    let environment = Environment::from(config.environment);
    let sdk = ops_infra::aws::load_config().await;
    let mut settings = match &config.aws_provision {
        Some(stack) => ops_runtime::provision::provision(&sdk, stack, environment, config.rail_secret.as_deref())
            .await
            .map_err(config_error)?,
        None => Settings::from_env().map_err(config_error)?,
    };
    settings.rate_limit = config.rate_limit;
    if let Some(allow) = config.webhook_allow_local {
        settings.webhook_allow_local = allow;
    }
    if config.sandbox_rail.unwrap_or(environment == Environment::Test) {
        std::fs::create_dir_all(&config.data_dir)?;
        settings.sandbox_ledger = Some(
            config
                .data_dir
                .join(format!("rail-sandbox-{}.sqlite", environment.as_str())),
        );
    }
    let (service, parts) = settings.service_with(&sdk, clock).await.map_err(config_error)?;
    let service = Arc::new(service);
    if let Some(secret) = &config.bootstrap_admin_key {
        service
            .bootstrap_admin_key(secret)
            .await
            .map_err(|e| config_error(format!("OPS_BOOTSTRAP_ADMIN_KEY: {e}")))?;
    }
    let stream_arn = parts.store.stream_arn().await.map_err(config_error)?;
    let pump = Pump::new(
        service.clone(),
        parts.queue.clone(),
        aws_sdk_dynamodbstreams::Client::new(&sdk),
        stream_arn,
    );
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let address = listener.local_addr()?;
    let router = ops_api::router(App { service });
    let pipeline = config.worker.then(|| loops::run(pump_triggers(Arc::new(pump))));
    let task = tokio::spawn(crate::serve(listener, router, config.max_connections, pipeline));
    Ok(AwsServer { address, task })
}

/// Each trigger of the stack in a loop of its own, as in [`crate::worker::Worker::run`], but
/// resting longer when idle: every empty round is a few requests to the endpoint.
fn pump_triggers(pump: Arc<Pump>) -> Vec<loops::Trigger> {
    let idle = Duration::from_millis(200);
    let mut triggers = vec![];
    for consumer in [StreamConsumer::Transition, StreamConsumer::WebhookDispatch] {
        let round = move |pump: Arc<Pump>| async move { pump.pump_stream(consumer).await };
        triggers.push(loops::trigger(consumer.as_str(), idle, pump.clone(), round));
    }
    for queue in [QueueName::Submissions, QueueName::Webhooks] {
        let round = move |pump: Arc<Pump>| async move { pump.pump_queue(queue).await };
        triggers.push(loops::trigger(queue.as_str(), idle, pump.clone(), round));
    }
    // One query per poll shard: once a second is plenty (the cloud's schedule is a minute).
    let poll = |pump: Arc<Pump>| async move { pump.poll_rails().await };
    triggers.push(loops::trigger("status-poll", Duration::from_secs(1), pump, poll));
    triggers
}
