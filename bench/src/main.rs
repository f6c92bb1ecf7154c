//! `cargo run --release -p ops-bench`: full payout lifecycles on local mode (SQLite, the
//! background pipeline, the sandbox rail, a real webhook receiver) at 1, 8 and 64 concurrent
//! clients, with create and approve latencies, then lookups against a growing history.
//! Prints a Markdown table (BENCHMARKS.md keeps the last run).

use futures_util::future::join_all;
use ops_tests::receiver::Receiver;
use ops_tests::{payout, Api, ADMIN_KEY};
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// Peak resident memory of this process (server, pipeline and clients together).
fn peak_memory_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

struct Run {
    clients: usize,
    lifecycles: usize,
    elapsed: Duration,
    create: Vec<Duration>,
    approve: Vec<Duration>,
}

async fn lifecycles(
    api: &Api,
    receiver: &Receiver,
    customer: &ops_tests::Customer,
    approver: &ops_tests::Member,
    clients: usize,
    per_client: usize,
) -> Run {
    let started = Instant::now();
    let results = join_all((0..clients).map(|_| async {
        let mut timings = vec![];
        for _ in 0..per_client {
            let t = Instant::now();
            let id = api
                .post(
                    "/v1/operations",
                    &customer.key,
                    payout(&customer.id, "two_step", &[123_400]),
                )
                .await
                .id();
            let created = t.elapsed();
            let t = Instant::now();
            let approved = api
                .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
                .await;
            assert_eq!(approved.status, 200);
            timings.push((id, created, t.elapsed()));
        }
        timings
    }))
    .await;
    let timings: Vec<_> = results.into_iter().flatten().collect();
    let mut waiting: HashSet<String> = timings.iter().map(|t| t.0.clone()).collect();
    while !waiting.is_empty() {
        for delivery in receiver.received() {
            let event = delivery.json();
            if event["type"] == "operation.completed" {
                waiting.remove(event["data"]["operation_id"].as_str().unwrap_or_default());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Run {
        clients,
        lifecycles: timings.len(),
        elapsed: started.elapsed(),
        create: timings.iter().map(|t| t.1).collect(),
        approve: timings.iter().map(|t| t.2).collect(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(data_dir.path().to_path_buf());
    config.worker = true;
    let server = ops_local::start(config).await.expect("server starts");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    let receiver = Receiver::start(0).await;
    let customer = api.create_customer().await;
    let approver = api.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let hook = api
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": receiver.url, "events": ["operation.completed"]}),
        )
        .await;
    assert_eq!(hook.status, 201);

    println!(
        "| clients | lifecycles | lifecycles/s | create p50 ms | create p99 ms | approve p50 ms | approve p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (clients, per_client) in [(1, 20), (8, 10), (64, 4)] {
        let mut run = lifecycles(&api, &receiver, &customer, &approver, clients, per_client).await;
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {} |",
            run.clients,
            run.lifecycles,
            run.lifecycles as f64 / run.elapsed.as_secs_f64(),
            ms(percentile(&mut run.create, 0.5)),
            ms(percentile(&mut run.create, 0.99)),
            ms(percentile(&mut run.approve, 0.5)),
            ms(percentile(&mut run.approve, 0.99)),
        );
    }

    // Lookups must not slow down as history grows: time them at 1k and 10k stored operations.
    println!();
    println!("| stored operations | GET /v1/operations/{{id}} p50 ms | GET /v1/operations?limit=10 p50 ms | POST /v1/operations p50 ms |");
    println!("|---|---|---|---|");
    let mut stored = api.get("/v1/operations?limit=100", ADMIN_KEY).await.json()["data"]
        .as_array()
        .map_or(0, |d| d.len());
    let mut probe = String::new();
    for target in [1_000usize, 10_000, 100_000] {
        let fill: Vec<_> = (stored..target).collect();
        for chunk in fill.chunks(64) {
            let ids = join_all(chunk.iter().map(|_| {
                api.post(
                    "/v1/operations",
                    &customer.key,
                    payout(&customer.id, "two_step", &[5_000]),
                )
            }))
            .await;
            probe = ids.last().map(|r| r.id()).unwrap_or(probe);
        }
        stored = target;
        let (mut get, mut list, mut create) = (vec![], vec![], vec![]);
        for _ in 0..50 {
            let t = Instant::now();
            api.get(&format!("/v1/operations/{probe}"), &customer.key).await;
            get.push(t.elapsed());
            let t = Instant::now();
            api.get("/v1/operations?limit=10&status=pending_approval", &customer.key)
                .await;
            list.push(t.elapsed());
            let t = Instant::now();
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[5_000]),
            )
            .await;
            create.push(t.elapsed());
        }
        stored += 50;
        println!(
            "| {target} | {} | {} | {} |",
            ms(percentile(&mut get, 0.5)),
            ms(percentile(&mut list, 0.5)),
            ms(percentile(&mut create, 0.5))
        );
    }
    println!();
    println!(
        "Peak resident memory (server, pipeline and clients in one process): {:.1} MiB",
        peak_memory_mib()
    );
    if std::env::var("AWS_ENDPOINT_URL").is_ok() {
        aws_round_trips().await;
    }
}

/// Requests per lifecycle on the AWS adapters (against the emulator the endpoint names), and
/// what 1,000 payouts would cost at on-demand prices.
async fn aws_round_trips() {
    use ops_domain::auth::Environment;
    use std::sync::Arc;
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-{}", std::process::id());
    let mut settings = ops_lambda::provision::provision(&config, &stack, Environment::Test, None)
        .await
        .expect("stack");
    let ledger = tempfile::tempdir().unwrap();
    settings.sandbox_ledger = Some(ledger.path().join("sandbox.sqlite"));
    let clock = Arc::new(ops_tests::TestClock::default());
    let (service, parts) = settings.service_with(&config, clock.clone()).await.expect("service");
    let service = Arc::new(service);
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api {
        base: format!("http://{}", listener.local_addr().unwrap()),
        client: reqwest::Client::new(),
    };
    let router = ops_api::router(ops_api::App {
        service: service.clone(),
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    let stream = parts.store.stream_arn().await.unwrap();
    let pump = ops_lambda::pump::Pump::new(
        service.clone(),
        parts.queue.clone(),
        aws_sdk_dynamodbstreams::Client::new(&config),
        stream,
    );
    let customer = api.create_customer().await;
    let approver = api.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let settle = || async {
        for _ in 0..6 {
            while pump.tick().await.expect("pump") > 0 {}
            clock.advance(time::Duration::seconds(30));
        }
    };
    settle().await;
    let (requests, (transactions, items), sqs) = (
        parts.store.requests(),
        parts.store.transactions(),
        parts.queue.requests(),
    );
    let lifecycles = 20u64;
    let mut ids = vec![];
    for _ in 0..lifecycles {
        let id = api
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[123_400]),
            )
            .await
            .id();
        api.post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
            .await;
        ids.push(id);
    }
    settle().await;
    for id in &ids {
        assert_eq!(
            api.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
            "completed"
        );
    }
    let per = |n: u64| n as f64 / lifecycles as f64;
    let dynamo = per(parts.store.requests() - requests);
    let (tx, written) = (
        per(parts.store.transactions().0 - transactions),
        per(parts.store.transactions().1 - items),
    );
    let queue = per(parts.queue.requests() - sqs);
    // On-demand prices (us-east-1): $0.625 per million write units (a transactional item
    // takes two), $0.125 per million read units, SQS $0.40 per million requests. Every other
    // DynamoDB request is counted as one read unit (items here are under 4 KB).
    let reads = dynamo - tx;
    let cost = 1000.0 * ((written * 2.0) * 0.625e-6 + reads * 0.125e-6 + queue * 0.40e-6);
    println!();
    println!("| on the AWS adapters (emulator), per payout lifecycle | measured |");
    println!("|---|---|");
    println!("| DynamoDB requests | {dynamo:.1} |");
    println!("| of which TransactWriteItems | {tx:.1} ({written:.1} items) |");
    println!("| SQS requests (pump: receive, delete, send) | {queue:.1} |");
    println!("| DynamoDB + SQS cost per 1,000 payouts, on demand | ${cost:.4} |");
}
