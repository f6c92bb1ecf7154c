//! Fair share: one customer's single payout while another customer's 50,000-line file runs,
//! beside the same payout on an idle service: on the embedded store, and on the AWS adapters
//! against the emulator when `FAIRNESS_AWS_LINES` names the file's size there. Below each row,
//! where the best idle and the worst busy payout spent their time.

use crate::local_server;
use crate::measure::ms;
use ops_tests::{payout, Api, Customer};
use std::time::{Duration, Instant};

/// Lines of the busy customer's file (`FAIRNESS_LINES` to try another size).
const FILE_LINES: usize = 50_000;
/// Single payouts timed while the file runs, one every few seconds.
const SAMPLES: usize = 8;

/// Creates an auto-approved one-item payout and waits for it to complete: the time it took,
/// and the operation's id.
async fn single_payout(api: &Api, customer: &Customer) -> (Duration, String) {
    let started = Instant::now();
    let created = api
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[7_000]))
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let path = format!("/v1/operations/{}", created.id());
    loop {
        let operation = api.get(&path, &customer.key).await.json();
        if operation["status"] == "completed" {
            return (started.elapsed(), created.id());
        }
        assert!(started.elapsed() < Duration::from_secs(1_800), "{operation}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Uploads `customer`'s auto-approved payroll file of `lines` lines: its id.
async fn upload_file(api: &Api, customer: &Customer, lines: usize) -> String {
    let lines: Vec<(i64, &str)> = (0..lines).map(|i| (1_000 + i as i64, "CLP")).collect();
    let uploaded = api
        .upload(
            "/v1/files?workflow=auto",
            &customer.key,
            "fairness-file",
            "text/csv",
            ops_tests::payroll_csv(&lines),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    uploaded.id()
}

/// Whether the busy customer's payouts are still being paid: some transaction of theirs is
/// not yet confirmed, or the file's operations are still being made.
async fn file_running(api: &Api, customer: &Customer, file: &str) -> bool {
    let shown = api.get(&format!("/v1/files/{file}"), &customer.key).await.json();
    if shown["status"] != "completed" {
        return true;
    }
    let page = api
        .get("/v1/operations?status=processing&limit=1", &customer.key)
        .await
        .json();
    page["data"].as_array().is_some_and(|d| !d.is_empty())
}

/// One table row: the single payout idle (best of three), then timed every few seconds while
/// another customer's file of `lines` runs (the worst and the median).
async fn row(backend: &str, api: &Api, lines: usize) {
    let small = api.create_customer().await;
    let mut idle = vec![];
    for _ in 0..3 {
        idle.push(single_payout(api, &small).await);
    }
    let (idle, idle_id) = idle.into_iter().min().unwrap();
    let big = api.create_customer().await;
    let file = upload_file(api, &big, lines).await;
    let mut busy = vec![];
    while busy.len() < SAMPLES {
        busy.push(single_payout(api, &small).await);
        if !file_running(api, &big, &file).await {
            break;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let still_running = file_running(api, &big, &file).await;
    busy.sort();
    let (worst, worst_id) = busy.last().cloned().unwrap();
    println!(
        "| {backend} | {lines} | {} ms | {} ms | {} ms | {} | {:.1}× |",
        ms(idle),
        ms(busy[busy.len() / 2].0),
        ms(worst),
        busy.len(),
        worst.as_secs_f64() / idle.as_secs_f64()
    );
    if !still_running {
        println!("|  | (the file finished while it was timed: the later samples saw an idle service) | | | | | |");
    }
    for (which, id) in [("the best idle sample", &idle_id), ("the worst sample", &worst_id)] {
        println!("|  | steps of {which}: {} | | | | | |", steps(api, &small, id).await);
    }
}

/// Where a payout's time went: each change in its history, milliseconds after its creation.
async fn steps(api: &Api, customer: &Customer, operation: &str) -> String {
    let history = api
        .get(&format!("/v1/operations/{operation}/history"), &customer.key)
        .await
        .json();
    let entries = history["data"].as_array().cloned().unwrap_or_default();
    let at = |entry: &serde_json::Value| {
        time::OffsetDateTime::parse(
            entry["at"].as_str().unwrap_or_default(),
            &time::format_description::well_known::Rfc3339,
        )
        .ok()
    };
    let Some(created) = entries.first().and_then(at) else {
        return "(no history)".into();
    };
    entries
        .iter()
        .map(|entry| {
            let after = at(entry).map_or(0, |t| (t - created).whole_milliseconds());
            let what = entry["to"]
                .as_str()
                .unwrap_or_else(|| entry["action"].as_str().unwrap_or("?"));
            format!("{} {what} +{after}", entry["entity_type"].as_str().unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) async fn fairness() {
    let lines = std::env::var("FAIRNESS_LINES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FILE_LINES);
    println!();
    println!("| backend | busy customer's file, lines | single payout idle (best of 3) | while the file runs: median | worst | samples | worst ÷ idle (goal ≤ 3×) |");
    println!("|---|---|---|---|---|---|---|");
    let (_server, api, _data) = local_server(true).await;
    row("local mode (SQLite)", &api, lines).await;
    // On the AWS adapters only when asked for, with the file's size: the emulator answers one
    // request at a time for every function at once, so a large file takes long there.
    let (Ok(_), Some(aws_lines)) = (
        std::env::var("AWS_ENDPOINT_URL"),
        std::env::var("FAIRNESS_AWS_LINES").ok().and_then(|n| n.parse().ok()),
    ) else {
        return;
    };
    let (server, api, _data) = crate::aws_server("bench-fairness").await;
    row("AWS adapters (emulator: DynamoDB stream, SQS)", &api, aws_lines).await;
    server.task.abort();
}
