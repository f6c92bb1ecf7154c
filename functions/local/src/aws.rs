//! Local mode on AWS: the same server, with the AWS adapters instead of SQLite (LocalStack,
//! moto, or real AWS as `AWS_ENDPOINT_URL` says), pumping the table's stream and the SQS
//! queues itself so the whole lifecycle runs without Lambda.

use crate::{Config, StartError};
use ops_api::App;
use ops_domain::access::Environment;
use ops_domain::ports::Clock;
use ops_runtime::deployment::Settings;
use std::net::SocketAddr;
use std::sync::Arc;
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
    settings.sandbox_rail = config.sandbox_rail.unwrap_or(environment == Environment::Test);
    let (service, parts) = settings.service_with(&sdk, clock).await.map_err(config_error)?;
    let service = Arc::new(service);
    if let Some(secret) = &config.bootstrap_admin_key {
        service
            .bootstrap_admin_key(secret)
            .await
            .map_err(|e| config_error(format!("OPS_BOOTSTRAP_ADMIN_KEY: {e}")))?;
    }
    let driver = parts.driver(&sdk, service.clone()).await.map_err(config_error)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let address = listener.local_addr()?;
    let router = crate::router(App { service }, &config);
    let pipeline = config.worker.then(|| driver.run());
    let task = tokio::spawn(crate::serve(
        listener,
        router,
        crate::connection_limits(&config),
        pipeline,
    ));
    Ok(AwsServer { address, task })
}
