//! What a function needs from its environment, read once per container.

use crate::compose::{self, Adapters, HttpRailSpec, Options};
use crate::driver::{Driver, Pace};
use crate::streams::DynamoStream;
use ops_domain::access::{Environment, DEFAULT_RATE_LIMIT};
use ops_domain::desk::{DeskSla, Queue};
use ops_domain::ports::{Clock, Secrets, SystemClock};
use ops_domain::service::Service;
use ops_domain::transactions::RailSecret;
use ops_domain::webhooks::TargetPolicy;
use ops_domain::webhooks::DELIVERY_TIMEOUT;
use ops_infra::aws::{
    DynamoSandboxLedger, DynamoStore, EmfMetrics, EventBridgeBus, EventBridgeTimers, QueueUrls, S3Blobs,
    SecretsManagerSecrets, SqsQueue, TimerTarget,
};
use ops_infra::rails::SandboxRail;
use ops_infra::InMemoryRateLimiter;
use std::sync::Arc;
use std::time::Duration;

/// Name of the API-key pepper in Secrets Manager (under the stack's prefix).
pub const PEPPER_SECRET: &str = "api-key-pepper";

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The stack's settings, from the environment variables `template.yaml` sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub environment: Environment,
    pub table: String,
    pub queues: QueueUrls,
    /// The S3 bucket uploaded files' bytes are kept in.
    pub files_bucket: String,
    pub event_bus: Option<String>,
    pub secrets_prefix: String,
    /// Rails served over HTTP.
    pub http_rails: Vec<HttpRailSpec>,
    /// Whether the sandbox rail is served (its ledger is a partition of the table, so every
    /// function of the stack sees the same rail).
    pub sandbox_rail: bool,
    /// Requests per second each API key may make (0: unlimited).
    pub rate_limit: u32,
    /// How long the desk's items may wait (`OPS_APPROVALS_SLA_MINUTES`,
    /// `OPS_EXCEPTIONS_SLA_MINUTES`; defaults when unset).
    pub desk_sla: DeskSla,
    /// Webhooks may go to plain http and to loopback or private addresses: off unless set (a
    /// function in the cloud reaches no developer's laptop, and must never reach the metadata
    /// address); refused for production.
    pub webhook_allow_local: bool,
    /// Where the schedules' timers live (EventBridge Scheduler); none: schedules fire only
    /// by the due index (local mode against AWS).
    pub timers: Option<TimerTarget>,
}

impl Settings {
    pub fn from_env() -> Result<Settings, Error> {
        Settings::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the settings from named variables (`from_env` reads the process environment).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, Error> {
        let var = |name: &str| lookup(name).ok_or_else(|| Error::from(format!("{name} is not set")));
        let environment =
            Environment::parse(&var("OPS_ENVIRONMENT")?).ok_or("OPS_ENVIRONMENT must be test or production")?;
        let http_rails = lookup("OPS_HTTP_RAILS")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|spec| spec.parse().map_err(|e| format!("OPS_HTTP_RAILS: {e}")))
            .collect::<Result<_, _>>()?;
        let rate_limit = match lookup("OPS_RATE_LIMIT").filter(|v| !v.is_empty()) {
            Some(value) => value
                .parse()
                .map_err(|_| format!("OPS_RATE_LIMIT must be a whole number of requests per second, not {value}"))?,
            None => DEFAULT_RATE_LIMIT,
        };
        let sla_minutes = |name: &str, default: u32| match lookup(name).filter(|v| !v.is_empty()) {
            Some(value) => value
                .parse::<u32>()
                .map_err(|_| format!("{name} must be a whole number of minutes, not {value}")),
            None => Ok(default),
        };
        let defaults = DeskSla::default();
        let desk_sla = DeskSla::from_minutes(
            sla_minutes("OPS_APPROVALS_SLA_MINUTES", defaults.minutes(Queue::Approvals))?,
            sla_minutes("OPS_EXCEPTIONS_SLA_MINUTES", defaults.minutes(Queue::Exceptions))?,
        )
        .map_err(|e| format!("OPS_*_SLA_MINUTES: {e}"))?;
        let webhook_allow_local = match lookup("OPS_WEBHOOK_ALLOW_LOCAL").as_deref() {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => return Err(format!("OPS_WEBHOOK_ALLOW_LOCAL must be true or false, not {other}").into()),
        };
        TargetPolicy::for_environment(environment, Some(webhook_allow_local))
            .map_err(|e| format!("OPS_WEBHOOK_ALLOW_LOCAL: {e}"))?;
        let sandbox_rail = lookup("OPS_SANDBOX_RAIL")
            .map(|v| v == "true")
            .unwrap_or(environment == Environment::Test);
        let timers = match (
            lookup("SCHEDULE_GROUP").filter(|v| !v.is_empty()),
            lookup("SCHEDULE_FIRE_ARN").filter(|v| !v.is_empty()),
            lookup("SCHEDULER_ROLE_ARN").filter(|v| !v.is_empty()),
        ) {
            (Some(group), Some(function_arn), Some(role_arn)) => Some(TimerTarget {
                group,
                function_arn,
                role_arn,
            }),
            (None, None, None) => None,
            _ => return Err("SCHEDULE_GROUP, SCHEDULE_FIRE_ARN and SCHEDULER_ROLE_ARN go together".into()),
        };
        Ok(Settings {
            environment,
            table: var("TABLE_NAME")?,
            queues: QueueUrls {
                submissions: var("SUBMISSIONS_QUEUE_URL")?,
                webhooks: var("WEBHOOKS_QUEUE_URL")?,
                files: var("FILES_QUEUE_URL")?,
            },
            files_bucket: var("FILES_BUCKET")?,
            event_bus: lookup("EVENT_BUS_NAME").filter(|b| !b.is_empty()),
            secrets_prefix: var("SECRETS_PREFIX")?,
            http_rails,
            sandbox_rail,
            rate_limit,
            desk_sla,
            webhook_allow_local,
            timers,
        })
    }

    /// The environment variables a function of this stack runs with (what `template.yaml`
    /// sets), for starting a function binary outside Lambda.
    pub fn to_vars(&self) -> Vec<(&'static str, String)> {
        let rails: Vec<String> = self.http_rails.iter().map(ToString::to_string).collect();
        vec![
            ("OPS_ENVIRONMENT", self.environment.as_str().to_owned()),
            ("TABLE_NAME", self.table.clone()),
            ("SUBMISSIONS_QUEUE_URL", self.queues.submissions.clone()),
            ("WEBHOOKS_QUEUE_URL", self.queues.webhooks.clone()),
            ("FILES_QUEUE_URL", self.queues.files.clone()),
            ("FILES_BUCKET", self.files_bucket.clone()),
            ("EVENT_BUS_NAME", self.event_bus.clone().unwrap_or_default()),
            ("SECRETS_PREFIX", self.secrets_prefix.clone()),
            ("OPS_HTTP_RAILS", rails.join(",")),
            ("OPS_SANDBOX_RAIL", self.sandbox_rail.to_string()),
            ("OPS_RATE_LIMIT", self.rate_limit.to_string()),
            (
                "OPS_APPROVALS_SLA_MINUTES",
                self.desk_sla.minutes(Queue::Approvals).to_string(),
            ),
            (
                "OPS_EXCEPTIONS_SLA_MINUTES",
                self.desk_sla.minutes(Queue::Exceptions).to_string(),
            ),
            ("OPS_WEBHOOK_ALLOW_LOCAL", self.webhook_allow_local.to_string()),
            (
                "SCHEDULE_GROUP",
                self.timers.as_ref().map(|t| t.group.clone()).unwrap_or_default(),
            ),
            (
                "SCHEDULE_FIRE_ARN",
                self.timers.as_ref().map(|t| t.function_arn.clone()).unwrap_or_default(),
            ),
            (
                "SCHEDULER_ROLE_ARN",
                self.timers.as_ref().map(|t| t.role_arn.clone()).unwrap_or_default(),
            ),
        ]
    }

    /// Where webhooks may go: public https receivers, and local ones too when a test stack
    /// allows them (never a production one).
    pub fn webhook_targets(&self) -> Result<TargetPolicy, Error> {
        TargetPolicy::for_environment(self.environment, Some(self.webhook_allow_local))
            .map_err(|e| format!("OPS_WEBHOOK_ALLOW_LOCAL: {e}").into())
    }

    /// Builds the use cases over the AWS adapters, configured from the variables Lambda sets
    /// ([`ops_infra::aws::lambda_config`]; `AWS_ENDPOINT_URL` points them at an emulator).
    pub async fn service(&self, clock: Arc<dyn Clock>) -> Result<Arc<Service>, Error> {
        let config = ops_infra::aws::lambda_config()?;
        Ok(Arc::new(self.service_with(&config, clock).await?.0))
    }

    /// The table's store alone (what `stream-outbox` needs).
    pub fn store(&self) -> Result<DynamoStore, Error> {
        let config = ops_infra::aws::lambda_config()?;
        Ok(DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), &self.table))
    }

    /// The service and the concrete adapters it runs on.
    pub async fn service_with(
        &self,
        config: &ops_infra::aws::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(Service, Parts), Error> {
        let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(config), &self.table);
        let queue = Arc::new(SqsQueue::new(aws_sdk_sqs::Client::new(config), self.queues.clone()));
        let secrets = Arc::new(SecretsManagerSecrets::new(
            aws_sdk_secretsmanager::Client::new(config),
            &self.secrets_prefix,
        ));
        let pepper = secrets
            .secret(PEPPER_SECRET)
            .await?
            .ok_or_else(|| format!("secret {}{PEPPER_SECRET} is missing", self.secrets_prefix))?;
        let sandbox = self.sandbox_rail.then(|| {
            let ledger = DynamoSandboxLedger::new(aws_sdk_dynamodb::Client::new(config), &self.table);
            Arc::new(SandboxRail::new(Arc::new(ledger)))
        });
        let rail_secret = match self.http_rails.is_empty() {
            true => None,
            false => secrets.secret(ops_domain::transactions::RAIL_SECRET).await?,
        };
        let rails = compose::rails(sandbox.clone(), &self.http_rails, rail_secret.as_deref(), RAIL_TIMEOUT)?;
        let adapters = Adapters {
            store: Arc::new(store.clone()),
            queue: queue.clone(),
            secrets,
            rate_limiter: Arc::new(store.clone()),
            // A read writes nothing, not even its count: read functions hold no write right.
            read_rate_limiter: Arc::new(InMemoryRateLimiter::default()),
            bus: self
                .event_bus
                .as_ref()
                .map(|name| Arc::new(EventBridgeBus::new(aws_sdk_eventbridge::Client::new(config), name)) as _),
            timers: match &self.timers {
                Some(target) => Some(Arc::new(EventBridgeTimers::new(config, target.clone())?) as _),
                None => None,
            },
            metrics: Arc::new(EmfMetrics::stdout(self.environment.as_str())),
            blobs: Arc::new(S3Blobs::new(config, &self.files_bucket)?),
        };
        let options = Options {
            environment: self.environment,
            pepper,
            rails,
            webhook_targets: self.webhook_targets()?,
            webhook_timeout: DELIVERY_TIMEOUT,
            rail_secret: RailSecret::InSecrets,
            rate_limit: self.rate_limit,
            desk_sla: self.desk_sla,
        };
        let service = compose::service(adapters, options, clock);
        Ok((service, Parts { store, queue, sandbox }))
    }
}

/// How long an HTTP rail has to answer before the outcome counts as unknown.
const RAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// The adapters behind a service, for local pumping and for tests.
pub struct Parts {
    pub store: DynamoStore,
    pub queue: Arc<SqsQueue>,
    pub sandbox: Option<Arc<SandboxRail>>,
}

impl Parts {
    /// The trigger driver over the table's stream and the stack's queues: what the event
    /// source mappings and schedules do in the cloud.
    pub async fn driver(&self, config: &ops_infra::aws::SdkConfig, service: Arc<Service>) -> Result<Driver, Error> {
        let stream = DynamoStream::new(
            aws_sdk_dynamodbstreams::Client::new(config),
            self.store.stream_arn().await?,
            self.store.clone(),
        );
        Ok(Driver::new(service, Arc::new(stream), self.queue.clone(), Pace::AWS))
    }
}

pub fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn production() -> Settings {
        Settings {
            environment: Environment::Production,
            table: "ops-prod-table".into(),
            queues: QueueUrls {
                submissions: "https://sqs.eu-west-1.amazonaws.com/1/ops-prod-submissions".into(),
                webhooks: "https://sqs.eu-west-1.amazonaws.com/1/ops-prod-webhooks".into(),
                files: "https://sqs.eu-west-1.amazonaws.com/1/ops-prod-files".into(),
            },
            files_bucket: "ops-prod-files".into(),
            event_bus: Some("ops-prod-events".into()),
            secrets_prefix: "ops-prod/".into(),
            http_rails: vec![
                "psp-local:spei=https://connect.example/spei".parse().unwrap(),
                "psp-local:ach=https://connect.example/ach".parse().unwrap(),
            ],
            sandbox_rail: false,
            rate_limit: 250,
            desk_sla: DeskSla::from_minutes(30, 15).unwrap(),
            webhook_allow_local: false,
            timers: Some(TimerTarget {
                group: "ops-prod-schedules".into(),
                function_arn: "arn:aws:lambda:eu-west-1:1:function:ops-prod-schedule-fire".into(),
                role_arn: "arn:aws:iam::1:role/ops-prod-scheduler".into(),
            }),
        }
    }

    #[test]
    fn a_stacks_variables_read_back_as_the_same_settings() {
        let settings = production();
        let vars: HashMap<_, _> = settings.to_vars().into_iter().collect();
        let read = Settings::from_vars(|name| vars.get(name).cloned()).expect("settings");
        assert_eq!(read, settings);
    }

    #[test]
    fn a_missing_variable_is_named() {
        let vars: HashMap<_, _> = production()
            .to_vars()
            .into_iter()
            .filter(|(name, _)| *name != "SUBMISSIONS_QUEUE_URL")
            .collect();
        let error = Settings::from_vars(|name| vars.get(name).cloned()).unwrap_err();
        assert_eq!(error.to_string(), "SUBMISSIONS_QUEUE_URL is not set");
    }

    #[test]
    fn local_webhook_targets_are_off_unless_set_and_never_for_production() {
        let mut vars: HashMap<_, _> = production().to_vars().into_iter().collect();
        vars.remove("OPS_WEBHOOK_ALLOW_LOCAL");
        let read = Settings::from_vars(|name| vars.get(name).cloned()).expect("settings");
        assert!(!read.webhook_allow_local);
        assert_eq!(read.webhook_targets().unwrap(), TargetPolicy::PUBLIC_ONLY);

        vars.insert("OPS_WEBHOOK_ALLOW_LOCAL", "true".into());
        let refused = Settings::from_vars(|name| vars.get(name).cloned()).unwrap_err();
        assert!(refused.to_string().starts_with("OPS_WEBHOOK_ALLOW_LOCAL"), "{refused}");
        vars.insert("OPS_ENVIRONMENT", "test".into());
        let test_stack = Settings::from_vars(|name| vars.get(name).cloned()).expect("settings");
        assert!(test_stack.webhook_targets().unwrap().allow_local);
        vars.insert("OPS_WEBHOOK_ALLOW_LOCAL", "yes".into());
        assert!(Settings::from_vars(|name| vars.get(name).cloned()).is_err());
    }

    #[test]
    fn the_rate_limit_defaults_and_a_bad_one_is_named() {
        let mut vars: HashMap<_, _> = production().to_vars().into_iter().collect();
        vars.remove("OPS_RATE_LIMIT");
        let read = Settings::from_vars(|name| vars.get(name).cloned()).expect("settings");
        assert_eq!(read.rate_limit, DEFAULT_RATE_LIMIT);

        vars.insert("OPS_RATE_LIMIT", "lots".into());
        let error = Settings::from_vars(|name| vars.get(name).cloned()).unwrap_err();
        assert!(error.to_string().starts_with("OPS_RATE_LIMIT"), "{error}");
    }
}
