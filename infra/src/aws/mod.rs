//! The ports on AWS: DynamoDB (store, change stream), SQS (queues), Secrets Manager,
//! EventBridge (the event bus), EventBridge Scheduler (the schedules' timer) and S3 (files'
//! bytes). Clients come from the standard AWS configuration, so `AWS_ENDPOINT_URL` points
//! them at LocalStack or moto, and nothing at all means real AWS.

pub mod documents;
mod dynamo_store;
mod emf_metrics;
mod event_bus;
mod event_scheduler;
mod keys;
mod s3_blobs;
mod sandbox_ledger;
mod secrets_manager;
mod sqs_queue;

pub use dynamo_store::{DynamoStore, OutboxRecord, INDEXES, MAX_WRITES, PROJECTED, SHARDS};
pub use emf_metrics::{emf_line, EmfMetrics, NAMESPACE};
pub use event_bus::EventBridgeBus;
pub use event_scheduler::{EventBridgeTimers, TimerTarget};
pub use s3_blobs::S3Blobs;
pub use sandbox_ledger::DynamoSandboxLedger;
pub use secrets_manager::SecretsManagerSecrets;
pub use sqs_queue::{QueueUrls, SqsQueue};

/// Loads the AWS configuration once per process (region, credentials, endpoint).
pub async fn load_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}
