//! Creates a stack's resources on an emulator (moto, LocalStack) the way `template.yaml`
//! declares them in the cloud: the table with its stream and TTL, both queues with their
//! dead-letter queues, the event bus, and the secrets.

use crate::deployment::{Settings, PEPPER_SECRET};
use ops_domain::auth::Environment;
use ops_domain::ports::Secrets;
use ops_infra::aws::{DynamoStore, QueueUrls, SecretsManagerSecrets};
use std::collections::HashMap;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Receives before SQS moves a message to its dead-letter queue (as in `template.yaml`).
pub const MAX_RECEIVE_COUNT: u32 = 5;

async fn queue_with_dead_letters(sqs: &aws_sdk_sqs::Client, name: &str) -> Result<String, Error> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let dlq = sqs.create_queue().queue_name(format!("{name}-dlq")).send().await?;
    let dlq_url = dlq.queue_url().ok_or("no dead-letter queue url")?;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?;
    let dlq_arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .ok_or("no dead-letter queue arn")?;
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT.to_string()})
        .to_string();
    let queue = sqs
        .create_queue()
        .queue_name(name)
        .set_attributes(Some(HashMap::from([
            (QueueAttributeName::RedrivePolicy, redrive),
            (QueueAttributeName::VisibilityTimeout, "30".into()),
        ])))
        .send()
        .await?;
    Ok(queue.queue_url().ok_or("no queue url")?.to_owned())
}

/// Provisions a stack named `name` and returns its settings. `rail_secret` is stored for the
/// HTTP rails and rail reports.
pub async fn provision(
    config: &aws_config::SdkConfig,
    name: &str,
    environment: Environment,
    rail_secret: Option<&str>,
) -> Result<Settings, Error> {
    let table = format!("{name}-table");
    DynamoStore::new(aws_sdk_dynamodb::Client::new(config), &table)
        .create_table()
        .await?;
    let sqs = aws_sdk_sqs::Client::new(config);
    let queues = QueueUrls {
        submissions: queue_with_dead_letters(&sqs, &format!("{name}-submissions")).await?,
        webhooks: queue_with_dead_letters(&sqs, &format!("{name}-webhooks")).await?,
    };
    let bus = format!("{name}-events");
    aws_sdk_eventbridge::Client::new(config)
        .create_event_bus()
        .name(&bus)
        .send()
        .await?;
    let secrets_prefix = format!("{name}/");
    let secrets = SecretsManagerSecrets::new(aws_sdk_secretsmanager::Client::new(config), &secrets_prefix);
    let mut pepper = [0u8; 32];
    rand::fill(&mut pepper);
    secrets.put_secret(PEPPER_SECRET, &hex::encode(pepper)).await?;
    if let Some(secret) = rail_secret {
        secrets.put_secret(ops_domain::execution::RAIL_SECRET, secret).await?;
    }
    Ok(Settings {
        environment,
        table,
        queues,
        event_bus: Some(bus),
        secrets_prefix,
        http_rails: vec![],
        sandbox_ledger: None,
    })
}
