//! The operations desk: claims from one queue, and the board's first render in Chromium.

use crate::local_server;
use crate::measure::{ms, percentile};
use futures_util::future::join_all;
use ops_tests::ADMIN_KEY;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Claim latency: eight approvers claiming from one approvals queue at once until it is empty
/// (local mode, SQLite); each item is handed out once.
pub(crate) async fn claims() {
    let (_server, api, _data) = local_server(true).await;
    let customer = api.create_customer().await;
    let waiting = 400;
    crate::two_step_payouts(&api, &customer, waiting).await;
    let open = || async {
        api.get("/v1/board", &customer.key).await.json()["queues"]["approvals"]["open"]
            .as_i64()
            .unwrap_or(0)
    };
    while open().await < waiting as i64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let claimers =
        join_all((0..8).map(|_| api.add_member(&customer, &["approver"], &["operations:read", "operations:approve"])))
            .await;
    let started = Instant::now();
    let rounds = join_all(claimers.iter().map(|claimer| {
        let api = &api;
        async move {
            let (mut took, mut got) = (vec![], vec![]);
            loop {
                let t = Instant::now();
                let claimed = api
                    .post("/v1/work_items/claim", &claimer.key, json!({"queue": "approvals"}))
                    .await;
                took.push(t.elapsed());
                if claimed.status != 200 {
                    return (took, got);
                }
                got.push(claimed.id());
            }
        }
    }))
    .await;
    let elapsed = started.elapsed();
    let mut latencies: Vec<Duration> = rounds.iter().flat_map(|(took, _)| took.clone()).collect();
    let mut handed: Vec<String> = rounds.into_iter().flat_map(|(_, got)| got).collect();
    let claimed = handed.len();
    handed.sort();
    handed.dedup();
    assert_eq!((claimed, handed.len()), (waiting, waiting), "each item handed out once");
    println!();
    println!(
        "### Claims: 8 approvers claiming from one approvals queue of {waiting} items at once (local mode, SQLite)"
    );
    println!();
    println!("| claims | p50 ms | p99 ms | claims/s |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {claimed} | {} | {} | {:.0} |",
        ms(percentile(&mut latencies, 0.5)),
        ms(percentile(&mut latencies, 0.99)),
        claimed as f64 / elapsed.as_secs_f64()
    );
}

/// The operations console's first render in Debian's Chromium (headless, through playwright-core in
/// tests/browser, which the test command installs): to its heading, and to the columns drawn
/// from the API after the key is typed.
pub(crate) async fn console_first_render() {
    let browser = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/browser");
    if !browser.join("node_modules/playwright-core").exists() {
        println!("\n(first render skipped: run ./scripts/test once to install playwright-core)");
        return;
    }
    let (_server, api, _data) = local_server(true).await;
    let measured = tokio::process::Command::new("node")
        .current_dir(&browser)
        .args(["first-render.mjs", &api.base, ADMIN_KEY, "10"])
        .output()
        .await
        .expect("node runs");
    assert!(
        measured.status.success(),
        "{}",
        String::from_utf8_lossy(&measured.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&measured.stdout).expect("figures");
    println!();
    println!("### The operations console in Chromium (headless, local mode, 10 loads)");
    println!();
    println!("| to the heading p50 ms | to the columns drawn from the API p50 ms |");
    println!("|---:|---:|");
    println!("| {} | {} |", figures["heading_p50_ms"], figures["columns_p50_ms"]);
}
