//! Local creates side by side with the limit (the smallest durable create server, which
//! `scripts/bench` builds from beside the repository).

use crate::local_server;
use crate::measure::Usage;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// One `loadgen` run: (creates/s, p50 ms, p99 ms), from its `key=value` line.
async fn loadgen(bin: &Path, url: &str, key: &str, customer: &str, clients: usize, creates: usize) -> (f64, f64, f64) {
    let output = tokio::process::Command::new(bin.join("loadgen"))
        .args([url, key, customer, &clients.to_string(), &creates.to_string()])
        .output()
        .await
        .expect("loadgen runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| -> f64 {
        text.split_whitespace()
            .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("loadgen printed no {name}: {text}"))
    };
    assert_eq!(field("errors"), 0.0, "{text}");
    (field("rps"), field("p50_ms"), field("p99_ms"))
}

/// Local creates side by side with the limit (built by `scripts/bench` and named by
/// `LIMITS_BIN` from `scripts/bench`): `limit-server` does the least a create must do, the
/// service runs in local mode (pipeline running, rate limit off, `synchronous=FULL`); the same
/// `loadgen` sends one-item `two_step` payouts to each at 1, 8 and 64 clients, alternating,
/// twice (after one warm-up run each), and the ratios are of the runs side by side.
/// `LIMIT_CLIENTS=1` runs only the rows named (e.g. under a profiler); `NO_PIPELINE=1` runs
/// the service without its pipeline, to see what the pipeline's work beside the creates
/// costs them.
pub(crate) async fn creates_against_the_limit() {
    let Some(bin) = std::env::var_os("LIMITS_BIN").map(PathBuf::from) else {
        println!("\n(creates against the limit skipped: LIMITS_BIN is not set; scripts/bench sets it)");
        return;
    };
    let database = tempfile::tempdir().unwrap();
    let listen = "127.0.0.1:18080";
    let mut limit = tokio::process::Command::new(bin.join("limit-server"))
        .env("LIMIT_LISTEN", listen)
        .env("LIMIT_DB", database.path().join("limit.db"))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("limit-server starts");
    while tokio::net::TcpStream::connect(listen).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_server, api, _data) = local_server(std::env::var_os("NO_PIPELINE").is_none()).await;
    let customer = api.create_customer().await;
    println!();
    println!("| clients | limit creates/s | service creates/s | × | limit p50 ms | service p50 ms | × | p99 ms (limit, service) | CPU µs a create (limit, service) | write calls a create | KB written a create | context switches a create |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let limit_pid = limit.id().expect("limit-server runs").to_string();
    let only: Option<Vec<usize>> = std::env::var("LIMIT_CLIENTS")
        .ok()
        .map(|list| list.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    // First a warm-up run each, printed but not one of the rows the ratios are judged on: the
    // service's first run on an empty database is the slower of its pair, the limit's is not
    // (a restart on a database already written to is not slower).
    let rows = [(0, 1_500), (1, 1_500), (8, 6_000), (64, 6_000)];
    for (row, creates) in rows
        .into_iter()
        .filter(|(c, _)| *c == 0 || only.as_ref().is_none_or(|o| o.contains(c)))
    {
        let (clients, runs, label) = match row {
            0 => (1, 1, "1 (warm-up)".to_owned()),
            clients => (clients, 2, clients.to_string()),
        };
        for _ in 0..runs {
            let before = Usage::of(&limit_pid);
            let (limit_rps, limit_p50, limit_p99) = loadgen(
                &bin,
                &format!("http://{listen}"),
                "sk_test_limit",
                "cus_limit",
                clients,
                creates,
            )
            .await;
            let limit_used = Usage::of(&limit_pid).each_since(before, creates);
            let before = Usage::own();
            let (rps, p50, p99) = loadgen(&bin, &api.base, &customer.key, &customer.id, clients, creates).await;
            let used = Usage::own().each_since(before, creates);
            println!(
                "| {label} | {limit_rps:.0} | {rps:.0} | {:.2} | {limit_p50:.2} | {p50:.2} | {:.2} | {limit_p99:.1}, {p99:.1} | {:.0}, {:.0} | {:.1}, {:.1} | {:.1}, {:.1} | {:.1}, {:.1} |",
                rps / limit_rps,
                p50 / limit_p50,
                limit_used.0,
                used.0,
                limit_used.1,
                used.1,
                limit_used.2 / 1024.0,
                used.2 / 1024.0,
                limit_used.3,
                used.3,
            );
        }
    }
    limit.kill().await.ok();
}
