//! The ports on AWS: DynamoDB (store, change stream), SQS (queues), Secrets Manager,
//! EventBridge (the event bus), EventBridge Scheduler (the schedules' timer) and S3 (files'
//! bytes). Clients come from the standard AWS configuration, so `AWS_ENDPOINT_URL` points
//! them at LocalStack or moto, and nothing at all means real AWS. The SDK's clients send
//! through `reqwest` ([`ReqwestHttpClient`]); S3 and the Scheduler are a few signed REST calls
//! (`signed_calls`), not SDK clients.

mod documents;
mod dynamo_store;
mod emf_metrics;
mod event_bus;
mod event_scheduler;
mod http_client;
mod keys;
mod s3_blobs;
mod sandbox_ledger;
mod secrets_manager;
mod signed_calls;
mod sqs_queue;
pub mod stream_images;

pub use dynamo_store::{
    AfterKeyRecord, DynamoStore, Faults, Meter, OutboxRecord, INDEXES, MAX_WRITES, PROJECTED, SHARDS,
};
pub use emf_metrics::{emf_line, EmfMetrics, NAMESPACE};
pub use event_bus::EventBridgeBus;
pub use event_scheduler::{EventBridgeTimers, TimerTarget};
pub use http_client::ReqwestHttpClient;
pub use s3_blobs::S3Blobs;
pub use sandbox_ledger::DynamoSandboxLedger;
pub use secrets_manager::SecretsManagerSecrets;
pub use sqs_queue::{QueueUrls, SqsQueue};

use aws_config::BehaviorVersion;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use aws_types::region::Region;
pub use aws_types::SdkConfig;

/// Loads the AWS configuration once per process (region, credentials, endpoint) by the SDK's
/// whole default chain: environment, profiles, SSO, web identity, instance metadata. For local
/// mode, the tests and the bench.
pub async fn load_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(ReqwestHttpClient::default())
        .load()
        .await
}

/// The configuration a Lambda function is given: its region and its execution role's
/// credentials in the variables Lambda sets, and `AWS_ENDPOINT_URL` when an emulator stands in.
/// A function needs nothing else of the default chain, whose code (and STS's client, for web
/// identity) would be in every function's bootstrap. Retries and timeouts are the SDK's
/// defaults for the latest behaviour version, as with the chain.
pub fn lambda_config() -> Result<SdkConfig, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let required = |name: &str| var(name).ok_or_else(|| format!("{name} is not set"));
    let credentials = Credentials::new(
        required("AWS_ACCESS_KEY_ID")?,
        required("AWS_SECRET_ACCESS_KEY")?,
        var("AWS_SESSION_TOKEN"),
        None,
        "lambda-environment",
    );
    let mut config = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(ReqwestHttpClient::default())
        .region(Region::new(required("AWS_REGION")?))
        .credentials_provider(SharedCredentialsProvider::new(credentials));
    if let Some(endpoint) = var("AWS_ENDPOINT_URL") {
        config = config.endpoint_url(endpoint);
    }
    Ok(config.build())
}
