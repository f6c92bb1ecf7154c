//! Creates a stack's resources on an emulator (moto, LocalStack) the way `template.yaml`
//! declares them in the cloud: the table with its stream and TTL, the queues with their
//! dead-letter queues, the files bucket, the event bus, the schedule group, and the secrets.

use crate::deployment::{Settings, PEPPER_SECRET};
use ops_domain::access::Environment;
use ops_domain::ports::Secrets;
use ops_infra::aws::{DynamoStore, S3Blobs, SecretsManagerSecrets, SqsQueue, TimerTarget};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Provisions a stack named `name` and returns its settings. `rail_secret` is stored for the
/// HTTP rails and rail reports.
pub async fn provision(
    config: &ops_infra::aws::SdkConfig,
    name: &str,
    environment: Environment,
    rail_secret: Option<&str>,
) -> Result<Settings, Error> {
    let table = format!("{name}-table");
    DynamoStore::new(aws_sdk_dynamodb::Client::new(config), &table)
        .create_table()
        .await?;
    let queues = SqsQueue::create_queues(&aws_sdk_sqs::Client::new(config), name).await?;
    let files_bucket = format!("{name}-files");
    S3Blobs::new(config, &files_bucket)?.create_bucket().await?;
    let bus = format!("{name}-events");
    aws_sdk_eventbridge::Client::new(config)
        .create_event_bus()
        .name(&bus)
        .send()
        .await?;
    let group = format!("{name}-schedules");
    aws_sdk_scheduler::Client::new(config)
        .create_schedule_group()
        .name(&group)
        .send()
        .await?;
    // The function and the role exist in the cloud's stack only; the emulator keeps the
    // schedules that name them and never fires one (the tests invoke `schedule-fire`).
    let region = config.region().map_or("us-east-1".into(), |r| r.to_string());
    let timers = TimerTarget {
        group,
        function_arn: format!("arn:aws:lambda:{region}:123456789012:function:{name}-schedule-fire"),
        role_arn: format!("arn:aws:iam::123456789012:role/{name}-scheduler"),
    };
    let secrets_prefix = format!("{name}/");
    let secrets = SecretsManagerSecrets::new(aws_sdk_secretsmanager::Client::new(config), &secrets_prefix);
    let mut pepper = [0u8; 32];
    rand::fill(&mut pepper);
    secrets.put_secret(PEPPER_SECRET, &hex::encode(pepper)).await?;
    if let Some(secret) = rail_secret {
        secrets
            .put_secret(ops_domain::transactions::RAIL_SECRET, secret)
            .await?;
    }
    Ok(Settings {
        environment,
        table,
        queues,
        files_bucket,
        event_bus: Some(bus),
        secrets_prefix,
        http_rails: vec![],
        sandbox_rail: environment == Environment::Test,
        rate_limit: ops_domain::access::DEFAULT_RATE_LIMIT,
        desk_sla: ops_domain::desk::DeskSla::default(),
        // An emulator's stack is a developer's or a test's: its receivers are local.
        webhook_allow_local: environment == Environment::Test,
        timers: Some(timers),
    })
}
