//! Full payout lifecycles (create → approve → rail → confirmed → webhook received) with their
//! latencies, and lookups against a growing history: local mode, and the AWS adapters on the
//! emulator.

use crate::local_server;
use crate::measure::{ms, peak_memory_mib, percentile};
use futures_util::future::join_all;
use ops_tests::receiver::Receiver;
use ops_tests::{payout, Api};
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};

struct Run {
    clients: usize,
    lifecycles: usize,
    elapsed: Duration,
    create: Vec<Duration>,
    approve: Vec<Duration>,
}

/// One payout created (`two_step`) and approved: its id and how long each call took.
async fn create_and_approve(
    api: &Api,
    customer: &ops_tests::Customer,
    approver: &ops_tests::Member,
) -> (String, Duration, Duration) {
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
    (id, created, t.elapsed())
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
            timings.push(create_and_approve(api, customer, approver).await);
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

fn lifecycle_header(label: &str) {
    println!();
    println!(
        "| {label}: clients | lifecycles | lifecycles/s | create p50 ms | create p99 ms | approve p50 ms | approve p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
}

/// One table row: `clients` concurrent clients each running `per_client` lifecycles, for a
/// fresh customer (with a webhook endpoint) on a running server.
async fn lifecycle_row(api: &Api, clients: usize, per_client: usize) {
    let receiver = Receiver::start(0).await;
    let customer = api.create_customer().await;
    let approver = api.add_member(&customer, &["approver"], &["operations:approve"]).await;
    api.subscribe(&customer.key, &receiver.url, &["operation.completed"])
        .await;
    let mut run = lifecycles(api, &receiver, &customer, &approver, clients, per_client).await;
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

/// A list every stored operation matches, and one none does: a list that walked past rows
/// it drops would slow down with history on the second.
pub(crate) const LIST_ALL: &str = "/v1/operations?limit=10&status=pending_approval";
pub(crate) const LIST_NONE: &str = "/v1/operations?limit=10&status=needs_attention";

/// Lookups must not slow down as history grows: times them as the store fills up to each
/// target number of operations (`stored` are there already).
async fn lookup_table(api: &Api, label: &str, mut stored: usize, targets: &[usize]) {
    let customer = api.create_customer().await;
    println!();
    println!("| {label}: stored operations | GET /v1/operations/{{id}} p50 ms | {LIST_ALL} p50 ms | {LIST_NONE} p50 ms | POST /v1/operations p50 ms | GET /v1/board p50 ms |");
    println!("|---|---|---|---|---|---|");
    let mut probe = String::new();
    for &target in targets {
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
        let (mut get, mut list, mut rare, mut create, mut board) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..50 {
            let t = Instant::now();
            api.get(&format!("/v1/operations/{probe}"), &customer.key).await;
            get.push(t.elapsed());
            let t = Instant::now();
            api.get(LIST_ALL, &customer.key).await;
            list.push(t.elapsed());
            let t = Instant::now();
            api.get(LIST_NONE, &customer.key).await;
            rare.push(t.elapsed());
            let t = Instant::now();
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[5_000]),
            )
            .await;
            create.push(t.elapsed());
            let t = Instant::now();
            let answer = api.get("/v1/board", &customer.key).await;
            board.push(t.elapsed());
            assert_eq!(answer.status, 200);
        }
        stored += 50;
        println!(
            "| {target} | {} | {} | {} | {} | {} |",
            ms(percentile(&mut get, 0.5)),
            ms(percentile(&mut list, 0.5)),
            ms(percentile(&mut rare, 0.5)),
            ms(percentile(&mut create, 0.5)),
            ms(percentile(&mut board, 0.5))
        );
    }
}

pub(crate) async fn local_mode() {
    let (_server, api, _data) = local_server(true).await;
    let runs = [(1, 20), (8, 10), (64, 4)];
    lifecycle_header("local mode (SQLite)");
    for (clients, per_client) in runs {
        lifecycle_row(&api, clients, per_client).await;
    }
    let stored = runs.iter().map(|(clients, per_client)| clients * per_client).sum();
    lookup_table(&api, "local mode (SQLite)", stored, &[1_000, 10_000, 100_000]).await;
    println!();
    println!(
        "Peak resident memory (server, pipeline and clients in one process): {:.1} MiB",
        peak_memory_mib()
    );
}

/// The same lifecycles on the AWS adapters: local mode with `OPS_BACKEND=aws`, its pump
/// standing in for the Lambda triggers (one poller, where AWS would run functions in parallel).
/// Each row gets a fresh stack: the emulator snapshots a table on every `TransactWriteItems`,
/// so a table grown by the earlier rows would slow the later ones down.
pub(crate) async fn aws_lifecycles() {
    lifecycle_header("AWS adapters (emulator)");
    for (clients, per_client) in [(1, 10), (8, 2), (64, 1)] {
        let (server, api, _data) = crate::aws_server(&format!("bench-{clients}")).await;
        lifecycle_row(&api, clients, per_client).await;
        server.task.abort();
    }
}
