//! The benchmark suite (`scripts/bench` builds what it needs and runs it): full payout
//! lifecycles (create → approve → rail → confirmed → webhook received) at 1, 8 and 64
//! concurrent clients with create and approve latencies, and lookups against a growing
//! history, on local mode and on the AWS adapters against an emulator; DynamoDB and SQS
//! requests and cost per lifecycle; peak memory; the Lambda bootstrap's size; API function cold
//! starts under `cargo lambda watch`. Prints Markdown tables (BENCHMARKS.md keeps the last run).

use futures_util::future::join_all;
use ops_tests::{payout, Api};
use std::path::{Path, PathBuf};

mod aws_requests;
mod desk;
mod fairness;
mod files;
mod lambda;
mod ledger;
mod lifecycles;
mod limit;
mod measure;
mod reconciliation;
mod sweep;
mod timer;
mod webhooks;

/// `ops-bench [local] [aws] [aws-requests] [cold-starts] [sizes] [timer] [ledger] [desk] [files] [reconciliation]
/// [webhooks] [limit] [sweep]`: the parts to run (all by default). The
/// aws parts need `AWS_ENDPOINT_URL` (an emulator) and are skipped without it; `aws-requests`
/// is the request counts alone, without the lifecycle timings and cold starts; `cold-starts`
/// the cold starts alone, on an empty stack. `LOGS=1` logs as `ops-local` does (`info`, plain
/// text, a line per request), to `/dev/null`, so the figures include writing the lines; any
/// other value is the filter (`LOGS=warn`).
#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if let Ok(logs) = std::env::var("LOGS") {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null");
        tracing_subscriber::fmt()
            .with_env_filter(if logs == "1" { "info" } else { logs.as_str() })
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(null))
            .init();
    }
    let parts: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    if wanted("local") {
        lifecycles::local_mode().await;
    }
    let emulator = std::env::var("AWS_ENDPOINT_URL").is_ok();
    if wanted("aws") && emulator {
        lifecycles::aws_lifecycles().await;
        let stack = aws_requests::aws_round_trips().await;
        lambda::cold_starts(&stack).await;
    } else if parts.iter().any(|p| p == "aws-requests") && emulator {
        aws_requests::aws_round_trips().await;
    } else if parts.iter().any(|p| p == "cold-starts") && emulator {
        lambda::cold_starts(&lambda::cold_start_stack().await).await;
    }
    if wanted("sizes") {
        lambda::lambda_binary_sizes();
    }
    if wanted("timer") {
        timer::schedule_timer().await;
    }
    if wanted("ledger") {
        ledger::ledger_holds(emulator).await;
    }
    if wanted("desk") {
        desk::claims().await;
        desk::console_first_render().await;
    }
    if wanted("fairness") {
        fairness::fairness().await;
    }
    if wanted("files") {
        files::files().await;
    }
    if wanted("reconciliation") {
        reconciliation::reconciliation().await;
    }
    if wanted("webhooks") {
        webhooks::webhook_deliveries().await;
    }
    if wanted("limit") {
        limit::creates_against_the_limit().await;
    }
    if wanted("sweep") {
        sweep::idempotency_sweep().await;
    }
}

/// A local server on a fresh data directory, its pipeline running if `worker`; one key drives
/// every client, so the per-key limit is off (the bench measures the service, not the limit).
pub(crate) async fn local_server(worker: bool) -> (ops_local::Server, Api, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(data_dir.path().to_path_buf());
    config.worker = worker;
    config.rate_limit = 0;
    let server = ops_local::start(config).await.expect("server starts");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    (server, api, data_dir)
}

/// Local mode on the AWS adapters against the emulator, on a fresh stack called `stack`, its
/// pipeline running, the per-key limit off: the server (abort its task when done), its API
/// and its data directory (kept while it runs).
pub(crate) async fn aws_server(stack: &str) -> (ops_local::AwsServer, Api, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(data_dir.path().to_path_buf());
    config.backend = ops_local::Backend::Aws;
    config.aws_provision = Some(format!("{stack}-{}", std::process::id()));
    config.worker = true;
    config.rate_limit = 0;
    let server = ops_local::start_on_aws(config, ops_runtime::deployment::system_clock())
        .await
        .expect("server starts on the AWS adapters");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    (server, api, data_dir)
}

/// The API over `service` on a random local port, as a Lambda function would answer it.
pub(crate) async fn serve(service: std::sync::Arc<ops_domain::service::Service>) -> Api {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api {
        base: format!("http://{}", listener.local_addr().unwrap()),
        client: reqwest::Client::new(),
    };
    let router = ops_api::router(ops_api::App { service });
    tokio::spawn(async move { axum::serve(listener, router).await });
    api
}

/// `count` one-item `two_step` payouts for `customer`, 32 at a time: they wait for approval.
pub(crate) async fn two_step_payouts(api: &Api, customer: &ops_tests::Customer, count: usize) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(32) {
        join_all(chunk.iter().map(|_| {
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[5_000]),
            )
        }))
        .await;
    }
}

pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}
