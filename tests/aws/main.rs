//! The AWS adapters and the Lambda handlers against an AWS emulator (moto_server, started by
//! `./scripts/test`). The emulator cannot invoke Lambdas, so the tests read the table's stream
//! and the queues themselves and hand the Lambda payloads to the same handlers. `template`
//! checks `template.yaml` against the code (it lives here so that testing never builds the
//! Lambda binaries, which an integration test of their own package would).

mod access;
mod approvals;
mod desk;
mod fair_share;
mod file_rail;
mod files;
mod idempotency;
mod ledger;
mod lifecycle;
mod limits;
mod local_mode;
mod logs;
mod rate_limit;
mod reconciliations;
mod reports;
mod requests;
mod schedules;
mod stream_replay;
mod template;
mod triggers;

use ops_domain::access::Environment;
use ops_domain::service::Service;
use ops_runtime::deployment::Parts;
use ops_runtime::driver::Driver;
use ops_tests::{Api, TestClock, ADMIN_KEY, RAIL_SECRET};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct AwsApp {
    pub api: Api,
    pub service: Arc<Service>,
    pub parts: Parts,
    pub driver: Driver,
    pub clock: Arc<TestClock>,
    pub config: aws_config::SdkConfig,
    pub settings: ops_runtime::deployment::Settings,
    /// What the service's EMF metrics wrote (a function's log in the cloud).
    pub metrics: Written,
}

/// Bytes written, kept for the test to read back line by line.
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Written {
    /// Each line read as JSON.
    pub fn documents(&self) -> Vec<serde_json::Value> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

impl std::ops::Deref for AwsApp {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

/// A fresh stack on the emulator (its own table, queues, bus and secrets), the API on a random
/// port, and the trigger driver standing in for Lambda's event source mappings.
pub async fn spawn_aws_app() -> AwsApp {
    spawn_aws_app_with(|_| {}).await
}

/// [`spawn_aws_app`] with its settings changed by `customize` before the service is built.
pub async fn spawn_aws_app_with(customize: impl FnOnce(&mut ops_runtime::deployment::Settings)) -> AwsApp {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with ./scripts/test, which starts the emulator"
    );
    static STACKS: AtomicUsize = AtomicUsize::new(0);
    let name = format!("ops-{}-{}", std::process::id(), STACKS.fetch_add(1, Ordering::SeqCst));
    let config = ops_infra::aws::load_config().await;
    let mut settings = ops_runtime::provision::provision(&config, &name, Environment::Test, Some(RAIL_SECRET))
        .await
        .expect("stack provisioned");
    customize(&mut settings);
    let clock = Arc::new(TestClock::default());
    let (mut service, parts) = settings
        .service_with(&config, clock.clone())
        .await
        .expect("service on AWS adapters");
    parts.store.meter().count_index_entries_exactly();
    let metrics = Written::default();
    service.metrics = Arc::new(ops_infra::aws::EmfMetrics::new("test", Box::new(metrics.clone())));
    let service = Arc::new(service);
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = ops_api::router(ops_api::App {
        service: service.clone(),
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    let driver = parts.driver(&config, service.clone()).await.expect("trigger driver");
    AwsApp {
        api: Api {
            base,
            client: reqwest::Client::new(),
        },
        service,
        parts,
        driver,
        clock,
        config,
        settings,
        metrics,
    }
}

impl AwsApp {
    /// The object under `key` in the stack's files bucket, read with the S3 SDK (the service
    /// writes it with its own signed calls).
    pub async fn stored_object(&self, key: &str) -> Vec<u8> {
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&self.config)
                .force_path_style(true)
                .build(),
        );
        let object = s3
            .get_object()
            .bucket(&self.settings.files_bucket)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{key} is in S3: {e}"));
        object.body.collect().await.unwrap().into_bytes().to_vec()
    }

    /// Pumps until nothing is left, moving the clock by `step` between rounds.
    pub async fn settle(&self, step: time::Duration, rounds: usize) {
        for _ in 0..rounds {
            for _ in 0..100 {
                if self.driver.tick().await.expect("trigger round") == 0 {
                    break;
                }
            }
            self.clock.advance(step);
        }
    }
}
