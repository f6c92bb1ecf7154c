//! The benchmark suite (`scripts/bench` builds what it needs and runs it): full payout
//! lifecycles (create → approve → rail → confirmed → webhook received) at 1, 8 and 64
//! concurrent clients with create and approve latencies, and lookups against a growing
//! history, on local mode and on the AWS adapters against an emulator; DynamoDB and SQS
//! requests and cost per lifecycle; peak memory; the Lambda bootstrap's size; API function cold
//! starts under `cargo lambda watch`. Prints Markdown tables (BENCHMARKS.md keeps the last run).

use futures_util::future::join_all;
use futures_util::StreamExt;
use ops_tests::receiver::Receiver;
use ops_tests::requests::{self, settle, Steps, DESIGN_MINIMUM};
use ops_tests::{payout, Api, ADMIN_KEY};
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// What a process has used so far: CPU time (user and system, every thread, in the kernel's
/// ticks of 10 ms), write calls (`write`, `pwrite`, `writev`: sockets and files), the bytes
/// they wrote and its threads' context switches, from `/proc/<pid>/stat`, `/proc/<pid>/io` and
/// each `/proc/<pid>/task/*/status`.
#[derive(Clone, Copy, Default)]
struct Usage {
    cpu: Duration,
    write_calls: u64,
    written: u64,
    switches: u64,
}

impl Usage {
    fn of(pid: &str) -> Usage {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command's name (which may hold spaces) in parentheses.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks = |n: usize| fields.get(n).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let counter = |name: &str| {
            io.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0)
        };
        // Every thread's context switches, voluntary or not, the exited ones' lost with them
        // (a blocking pool's idle threads live for seconds).
        let switches = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|task| {
                let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
                status
                    .lines()
                    .filter(|line| line.contains("ctxt_switches:"))
                    .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum::<u64>()
            })
            .sum();
        Usage {
            switches,
            // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
            cpu: Duration::from_millis((ticks(11) + ticks(12)) * 10),
            write_calls: counter("syscw:"),
            written: counter("wchar:"),
        }
    }

    fn own() -> Usage {
        Usage::of("self")
    }

    /// What was used since `before`, per one of `count` things done.
    fn each_since(&self, before: Usage, count: usize) -> (f64, f64, f64, f64) {
        let n = count as f64;
        (
            (self.cpu - before.cpu).as_secs_f64() * 1e6 / n,
            (self.write_calls - before.write_calls) as f64 / n,
            (self.written - before.written) as f64 / n,
            self.switches.saturating_sub(before.switches) as f64 / n,
        )
    }
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
const LIST_ALL: &str = "/v1/operations?limit=10&status=pending_approval";
const LIST_NONE: &str = "/v1/operations?limit=10&status=needs_attention";

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

/// `ops-bench [local] [aws] [aws-requests] [cold-starts] [sizes] [timer] [ledger] [desk] [files] [reconciliation]
/// [webhooks] [limit] [sweep]`: the parts to run (all by default). The
/// aws parts need `AWS_ENDPOINT_URL` (an emulator) and are skipped without it; `aws-requests`
/// is the request counts alone, without the lifecycle timings and cold starts; `cold-starts`
/// the cold starts alone, on an empty stack.
#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let parts: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    if wanted("local") {
        local_mode().await;
    }
    let emulator = std::env::var("AWS_ENDPOINT_URL").is_ok();
    if wanted("aws") && emulator {
        aws_lifecycles().await;
        let stack = aws_round_trips().await;
        cold_starts(&stack).await;
    } else if parts.iter().any(|p| p == "aws-requests") && emulator {
        aws_round_trips().await;
    } else if parts.iter().any(|p| p == "cold-starts") && emulator {
        cold_starts(&cold_start_stack().await).await;
    }
    if wanted("sizes") {
        lambda_binary_sizes();
    }
    if wanted("timer") {
        schedule_timer().await;
    }
    if wanted("ledger") {
        ledger_holds(emulator).await;
    }
    if wanted("desk") {
        claims().await;
        board_page_first_render().await;
    }
    if wanted("files") {
        files().await;
    }
    if wanted("reconciliation") {
        reconciliation().await;
    }
    if wanted("webhooks") {
        webhook_deliveries().await;
    }
    if wanted("limit") {
        creates_against_the_limit().await;
    }
    if wanted("sweep") {
        idempotency_sweep().await;
    }
}

/// Local mode's sweep of idempotency records past their retention (its housekeeping beside
/// the pipeline): 100,000 records of a 1 KiB response each under scattered keys, as clients'
/// random keys are, written more than a day before, then swept as local mode sweeps. Meanwhile
/// a small write every millisecond (a stream checkpoint moved, which takes the one writer as a
/// create does) times how long a write waits while the sweep runs, next to the same writes
/// just before it, with no sweep.
async fn idempotency_sweep() {
    use ops_domain::idempotency::{IdempotencyClaim, StoredResponse, RETENTION};
    use ops_domain::ports::{Changeset, Commit, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    const RECORDS: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let store = ops_infra::embedded::SqliteStore::open(&dir.path().join("sweep.sqlite")).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let then = now - RETENTION - time::Duration::hours(1);
    let response = StoredResponse {
        status: 201,
        body: vec![b'x'; 1024],
    };
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(1_000) {
        let mut changes = Changeset::default();
        for n in chunk {
            changes.push(Write::TakeIdempotency {
                claim: IdempotencyClaim {
                    scope: "cus_bench".into(),
                    key: format!("{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                    fingerprint: "f".into(),
                    now: then,
                },
                response: response.clone(),
            });
        }
        store.commit(changes).await.expect("records written");
    }
    // Writes one at a time until `done`, each a millisecond after the last: how long each took.
    async fn probe(store: ops_infra::embedded::SqliteStore, done: &AtomicBool) -> Vec<Duration> {
        let mut waits = vec![];
        for seq in 1.. {
            if done.load(Ordering::Relaxed) {
                break;
            }
            let t = Instant::now();
            store.advance_checkpoint("bench-probe", seq).await.expect("probe write");
            waits.push(t.elapsed());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        waits
    }
    let quiet = AtomicBool::new(false);
    let (mut before, ()) = tokio::join!(probe(store.clone(), &quiet), async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        quiet.store(true, Ordering::Relaxed);
    });
    let swept = AtomicBool::new(false);
    let started = Instant::now();
    let (mut during, (forgotten, took)) = tokio::join!(probe(store.clone(), &swept), async {
        let forgotten = ops_local::housekeeping::forget_expired(&store, now).await;
        swept.store(true, Ordering::Relaxed);
        (forgotten, started.elapsed())
    });
    assert_eq!(forgotten as u64, RECORDS, "every expired record deleted");
    println!();
    // A write's wait: p50, p99 and max, in ms to two places (most are tens of microseconds).
    let waits = |waits: &mut Vec<Duration>| {
        let ms2 = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
        let max = *waits.iter().max().expect("probe writes");
        format!(
            "{} | {} | {}",
            ms2(percentile(waits, 0.5)),
            ms2(percentile(waits, 0.99)),
            ms2(max)
        )
    };
    println!("| idempotency sweep (local mode) | records | ms | records/s | a write's wait p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    println!("| no sweep (2 s of writes) | | | | {} |", waits(&mut before));
    println!(
        "| sweep of records expired a day ago, 1 KiB responses | {RECORDS} | {} | {:.0} | {} |",
        ms(took),
        RECORDS as f64 / took.as_secs_f64(),
        waits(&mut during),
    );
}

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

/// Local creates side by side with the limit (`../shared/limits`, built and named by
/// `LIMITS_BIN` from `scripts/bench`): `limit-server` does the least a create must do, the
/// service runs in local mode (pipeline running, rate limit off, `synchronous=FULL`); the same
/// `loadgen` sends one-item `two_step` payouts to each at 1, 8 and 64 clients, alternating,
/// twice (after one warm-up run each), and the ratios are of the runs side by side.
/// `LIMIT_CLIENTS=1` runs only the rows named (e.g. under a profiler); `NO_PIPELINE=1` runs
/// the service without its pipeline, to see what the pipeline's work beside the creates
/// costs them.
async fn creates_against_the_limit() {
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
    // (a restart on a database already written to is not slower: BENCHMARKS.md).
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

/// Webhook delivery throughput (local mode): 20,000 events' deliveries sent by the webhook
/// consumer as local mode runs it (eight senders taking batches of fifty, each keeping up to
/// ten posts open, forty open at most in all: each delivery read, its endpoint's secrets
/// read, signed, posted, its attempt recorded with the retry bookkeeping), next to a plain
/// reqwest loop posting the same bodies, unsigned, to a receiver of the same kind with the
/// same concurrency (four loops, each keeping ten posts open), and next to the consumer's own
/// sender posting them signed with nothing read or recorded (the floor for the consumer).
/// `WEBHOOK_RECEIVER_MS` makes the receivers answer after that many milliseconds, as one
/// across a network would (default 0: at once); `WEBHOOK_RECEIVER_VARIES=1` makes that the
/// mean of waits spread evenly from none to twice it.
async fn webhook_deliveries() {
    use ops_domain::ports::{QueueName, WebhookSender};
    use ops_domain::webhooks::{signature, TargetPolicy};
    use ops_infra::webhook_sender::{HttpWebhookSender, MAX_OPEN_POSTS};
    use ops_runtime::driver::{Pace, StreamConsumer, Trigger};
    use std::sync::Arc;
    const SENDERS: usize = 4;
    const IN_FLIGHT: usize = 10;
    const _: () = assert!(
        SENDERS * IN_FLIGHT == MAX_OPEN_POSTS,
        "the loops keep as many posts open as the consumer may"
    );
    // Fewer (`WEBHOOK_DELIVERIES=2000`) make a quicker run; with 2,000 the plain loop took
    // about 40 ms and its rate swung by half between runs.
    let count = std::env::var("WEBHOOK_DELIVERIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let latency = Duration::from_secs_f64(
        std::env::var("WEBHOOK_RECEIVER_MS")
            .ok()
            .and_then(|ms| ms.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1000.0,
    );
    let varies = std::env::var("WEBHOOK_RECEIVER_VARIES").is_ok_and(|v| v == "1");
    let receiver_like_this = || async move {
        let receiver = Receiver::start(0).await;
        if varies {
            receiver.answer_after_about(latency);
        } else {
            receiver.answer_after(latency);
        }
        receiver
    };
    let (server, api, _data) = local_server(false).await;
    let receiver = receiver_like_this().await;
    let customer = api.create_customer().await;
    api.subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
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
    let dispatch = Trigger::Stream(StreamConsumer::WebhookDispatch);
    while server.driver.round(dispatch).await.expect("dispatch round") > 0 {}

    let (t, cpu) = (Instant::now(), Usage::own().cpu);
    join_all((0..Pace::EMBEDDED.webhook_senders).map(|_| async {
        while server
            .driver
            .round(Trigger::Queue(QueueName::Webhooks))
            .await
            .expect("send round")
            > 0
        {}
    }))
    .await;
    let (service, service_cpu) = (t.elapsed(), Usage::own().cpu - cpu);
    let bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), count, "every delivery arrived once");

    // The same bodies posted with the same concurrency (four loops, each keeping ten posts
    // open; each answer is dropped as it comes, so its connection takes the next post), first
    // by a plain reqwest client, then by the consumer's own sender, signed: the second row is
    // the floor for the consumer, what is left when nothing is read or recorded.
    let post_all = |bodies: Vec<Vec<u8>>, post: PostFn| async move {
        let receiver = receiver_like_this().await;
        let mut shares: Vec<Vec<Vec<u8>>> = (0..SENDERS).map(|_| vec![]).collect();
        for (n, body) in bodies.into_iter().enumerate() {
            shares[n % SENDERS].push(body);
        }
        let (t, cpu) = (Instant::now(), Usage::own().cpu);
        join_all(shares.into_iter().map(|share| {
            let (post, url) = (post.clone(), receiver.url.clone());
            futures_util::stream::iter(share).for_each_concurrent(IN_FLIGHT, move |body| post(url.clone(), body))
        }))
        .await;
        let used = (t.elapsed(), Usage::own().cpu - cpu);
        assert_eq!(receiver.received().len(), count);
        used
    };
    let client = reqwest::Client::new();
    let (loop_took, loop_cpu) = post_all(
        bodies.clone(),
        Arc::new(move |url, body| {
            let sent = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send();
            Box::pin(async move {
                sent.await.expect("the plain loop's post");
            })
        }),
    )
    .await;
    let sender = Arc::new(HttpWebhookSender::with_policy(TargetPolicy { allow_local: true }));
    let (alone_took, alone_cpu) = post_all(
        bodies,
        Arc::new(move |url, body| {
            let sender = sender.clone();
            Box::pin(async move {
                let header = signature::header(
                    &["whsec_bench"],
                    time::OffsetDateTime::now_utc().unix_timestamp(),
                    &body,
                );
                sender
                    .post(&url, &header, body)
                    .await
                    .expect("a receiver that answers is never held back")
                    .answer
                    .expect("the sender's post");
            })
        }),
    )
    .await;
    println!();
    let after = if varies { "about " } else { "" };
    println!("| webhook deliveries (local mode), receiver answering after {after}{latency:?} | deliveries | ms | deliveries/s | × the plain loop | CPU µs a delivery (both sides) |");
    println!("|---|---|---|---|---|---|");
    let per_second = |took: Duration| count as f64 / took.as_secs_f64();
    let row = |what: &str, took: Duration, cpu: Duration| {
        println!(
            "| {what} | {count} | {} | {:.0} | {:.2} | {:.1} |",
            ms(took),
            per_second(took),
            per_second(took) / per_second(loop_took),
            cpu.as_secs_f64() * 1e6 / count as f64
        )
    };
    row("plain reqwest loop, same bodies, same concurrency", loop_took, loop_cpu);
    row(
        "the consumer's sender alone (signed; nothing read or recorded)",
        alone_took,
        alone_cpu,
    );
    row("the webhook consumer (signed, attempt recorded)", service, service_cpu);
}

/// Posts one body to a receiver's URL; the bench's webhook rows differ only in this.
type PostFn = std::sync::Arc<
    dyn Fn(String, Vec<u8>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

/// Reconciliation (local mode): a 10,000-line statement matched against the 10,000
/// transactions it speaks of, in the domain alone and as an import over HTTP (read by the
/// sandbox adapter, candidates read from the store's confirmation index, lines kept), with
/// a hundred breaks (each an exceptions item) in the second run. The transactions are written
/// to the store directly, as confirmed payouts would have left them.
async fn reconciliation() {
    use ops_domain::money::Amount;
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::rail::Period;
    println!();
    println!("| reconciliation | lines | breaks | bytes | time ms | lines/s |");
    println!("|---|---|---|---|---|---|");
    let row = |what: &str, lines: usize, breaks: u64, bytes: usize, took: Duration| {
        println!(
            "| {what} | {lines} | {breaks} | {bytes} | {} | {:.0} |",
            ms(took),
            lines as f64 / took.as_secs_f64()
        );
    };
    let (server, api, _data) = local_server(true).await;
    // The two runs' payments were confirmed ten days apart, so neither is missing from the
    // other's statement.
    let now = time::OffsetDateTime::now_utc();
    let confirmed = |run: &str| now - time::Duration::days(if run == "a" { 0 } else { 10 });
    let count = 10_000;
    let statement_of = |run: &str, breaks: usize| {
        let day = confirmed(run).date();
        let mut csv = String::from("rail_reference,transaction_id,amount,currency,status,booked_on\n");
        for i in 0..count {
            // The last `breaks` lines carry another amount: mismatched.
            let amount = 1_000 + i as i64 + i64::from(i >= count - breaks);
            csv += &format!("ref-{run}-{i},,{amount},CLP,confirmed,{day}\n");
        }
        csv.into_bytes()
    };
    let mut transactions = vec![];
    for run in ["a", "b"] {
        let made: Vec<_> = (0..count)
            .map(|i| {
                let mut t = ops_infra::conformance::reconciliations::transaction(
                    &format!("txn_{run}{i:025}"),
                    "psp-local:sandbox",
                    Some(confirmed(run)),
                );
                t.rail_reference = Some(format!("ref-{run}-{i}"));
                t.amount = Amount::new(1_000 + i as i64).unwrap();
                t
            })
            .collect();
        for batch in made.chunks(1_000) {
            let writes = batch.iter().cloned().map(Write::InsertTransaction).collect();
            server
                .embedded
                .store
                .commit(Changeset { writes })
                .await
                .expect("stored");
        }
        transactions.push(made);
    }

    let statement = statement_of("a", 0);
    let t = Instant::now();
    let parsed = ops_infra::rails::parse_csv(&statement).expect("a statement");
    let today = now.date();
    let period = Period { from: today, to: today };
    let lines = ops_domain::reconciliations::match_statement(&parsed.lines, &transactions[0], period);
    assert_eq!(lines.len(), count);
    row("read and matched (domain)", count, 0, statement.len(), t.elapsed());

    for (run, breaks) in [("a", 0), ("b", 100)] {
        let statement = statement_of(run, breaks);
        let t = Instant::now();
        let imported = api
            .send(
                reqwest::Method::POST,
                "/v1/reconciliations",
                Some(ADMIN_KEY),
                Some(&format!("bench-statement-{run}")),
                Some(&ops_tests::statement_body("csv", &statement)),
            )
            .await;
        let took = t.elapsed();
        assert_eq!(imported.status, 201, "{}", imported.json());
        let outcomes = &imported.json()["outcomes"];
        assert_eq!(outcomes["matched"], (count - breaks) as u64, "{outcomes}");
        let found = outcomes["mismatched"].as_u64().unwrap() + outcomes["missing"].as_u64().unwrap();
        row("imported over HTTP (201)", count, found, statement.len(), took);
    }
}

/// Payroll files (local mode): validating a 50,000-line file, in the domain alone and as an
/// upload answered over HTTP, and a 10,000-line file's operations made end to end by the
/// worker (a two-step workflow, so the figure is the split, not the payouts).
async fn files() {
    println!();
    println!("| payroll file | lines | bytes | time ms | lines/s |");
    println!("|---|---|---|---|---|");
    let row = |what: &str, lines: usize, bytes: usize, took: Duration| {
        println!(
            "| {what} | {lines} | {bytes} | {} | {:.0} |",
            ms(took),
            lines as f64 / took.as_secs_f64()
        );
    };
    let lines =
        |count: usize| ops_tests::payroll_csv(&(0..count).map(|i| (1_000 + i as i64, "CLP")).collect::<Vec<_>>());
    let big = lines(50_000);
    let t = Instant::now();
    let parsed = ops_domain::files::csv_lines::parse(&big, &|rail| rail == "psp-local:sandbox").expect("valid");
    row("validate (domain)", parsed.len(), big.len(), t.elapsed());

    let (server, api, _data) = local_server(true).await;
    let customer = api.create_customer().await;
    let t = Instant::now();
    let uploaded = api
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "bench-50k",
            "text/csv",
            big.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    row("upload answered 202 (HTTP)", 50_000, big.len(), t.elapsed());

    let customer = api.create_customer().await;
    let ten = lines(10_000);
    let t = Instant::now();
    let uploaded = api
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "bench-10k",
            "text/csv",
            ten.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    loop {
        let file = api
            .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
            .await
            .json();
        if file["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    row(
        "10 operations made (upload to completed)",
        10_000,
        ten.len(),
        t.elapsed(),
    );
    report_of_many(&server, &api).await;
}

/// The peak resident memory of this process so far (KiB): the server runs in it.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A 100,000-row CSV report streamed over HTTP, read a chunk at a time, with the process's
/// peak memory before and after (the operations are written to the store directly, in
/// batches, as many creates would have).
async fn report_of_many(server: &ops_local::Server, api: &Api) {
    use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
    use ops_domain::operations::OperationStatus;
    use ops_domain::ports::{Changeset, Commit, Write};
    let rows = 100_000;
    let customer = api.create_customer().await;
    let ids = UlidGenerator::default();
    let from = time::OffsetDateTime::now_utc();
    for batch in 0..rows / 1_000 {
        let writes = (0..1_000)
            .map(|i| {
                let status = if (batch + i) % 3 == 0 {
                    OperationStatus::Completed
                } else {
                    OperationStatus::PendingApproval
                };
                let id = ids.new_id(IdKind::Operation);
                let mut operation = ops_infra::conformance::store::operation(&id, &customer.id, status);
                operation.created_at = time::OffsetDateTime::now_utc();
                Write::InsertOperation(operation)
            })
            .collect();
        server
            .embedded
            .store
            .commit(Changeset { writes })
            .await
            .expect("stored");
    }
    let to = time::OffsetDateTime::now_utc() + time::Duration::SECOND;
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
            .replace('+', "%2B")
    };
    let url = format!(
        "{}/v1/reports/operations?from={}&to={}&format=csv",
        api.base,
        rfc(from),
        rfc(to)
    );
    let read = || async {
        let mut response = api
            .client
            .get(url.as_str())
            .bearer_auth(&customer.key)
            .send()
            .await
            .expect("report");
        assert_eq!(response.status(), 200);
        let (mut bytes, mut lines) = (0usize, 0usize);
        while let Some(chunk) = response.chunk().await.expect("a chunk") {
            bytes += chunk.len();
            lines += chunk.iter().filter(|b| **b == b'\n').count();
        }
        (bytes, lines)
    };
    let before = peak_rss_kib();
    let t = Instant::now();
    let (bytes, lines) = read().await;
    let took = t.elapsed();
    // The header, the rows, a blank line, the totals' header and two totals.
    assert_eq!(lines, rows + 5, "every row once");
    println!();
    let after_first = peak_rss_kib();
    // A second read: memory a report holds would raise the peak again; caches filled by the
    // first would not.
    read().await;
    println!("| report | rows | bytes | time ms | rows/s | peak RSS before, after one, after two (MiB) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| GET /v1/reports/operations?format=csv | {rows} | {bytes} | {} | {:.0} | {:.0}, {:.0}, {:.0} |",
        ms(took),
        rows as f64 / took.as_secs_f64(),
        before as f64 / 1024.0,
        after_first as f64 / 1024.0,
        peak_rss_kib() as f64 / 1024.0
    );
}

/// A local server on a fresh data directory, its pipeline running if `worker`; one key drives
/// every client, so the per-key limit is off (the bench measures the service, not the limit).
async fn local_server(worker: bool) -> (ops_local::Server, Api, tempfile::TempDir) {
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

/// Claim latency: eight approvers claiming from one approvals queue at once until it is empty
/// (local mode, SQLite); each item is handed out once.
async fn claims() {
    let (_server, api, _data) = local_server(true).await;
    let customer = api.create_customer().await;
    let waiting = 400;
    for chunk in (0..waiting).collect::<Vec<_>>().chunks(32) {
        join_all(chunk.iter().map(|_| {
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[5_000]),
            )
        }))
        .await;
    }
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

/// The live board's first render in Debian's Chromium (headless, through playwright-core in
/// tests/browser, which the test command installs): to its heading, and to the columns drawn
/// from the API after the key is typed.
async fn board_page_first_render() {
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
    println!("### The live board in Chromium (headless, local mode, 10 loads)");
    println!();
    println!("| to the heading p50 ms | to the columns drawn from the API p50 ms |");
    println!("|---:|---:|");
    println!("| {} | {} |", figures["heading_p50_ms"], figures["columns_p50_ms"]);
}

/// Opens a CLP account for a new customer of `api` and funds it.
async fn funded_customer(api: &Api, amount: i64) -> (ops_tests::Customer, String) {
    let customer = api.create_customer().await;
    let account = api
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await
        .id();
    let funded = api
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": amount, "direction": "credit", "reason": "bench"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    (customer, account)
}

/// Auto-approved one-item payouts from `clients` concurrent clients, all drawing on one
/// account: each create places a hold on that account in its approval's changeset.
/// Returns holds per second, after checking none was lost or doubled.
async fn hot_account_round(api: &Api, clients: usize, per_client: usize) -> f64 {
    let (customer, account) = funded_customer(api, 1_000_000_000).await;
    let started = Instant::now();
    join_all((0..clients).map(|_| async {
        for _ in 0..per_client {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
                .await;
            assert_eq!(made.json()["status"], "approved", "{}", made.json());
        }
    }))
    .await;
    let elapsed = started.elapsed();
    let balances = api.get(&format!("/v1/accounts/{account}"), &customer.key).await.json()["balances"].clone();
    let holds = (clients * per_client) as i64;
    assert_eq!(balances["pending_debits"], holds * 1_000, "every hold once: {balances}");
    holds as f64 / elapsed.as_secs_f64()
}

/// Holds one account sustains locally (SQLite) at 8 and 64 concurrent clients, and the
/// DynamoDB requests and write units a funded payout's create takes beside an unfunded one.
async fn ledger_holds(emulator: bool) {
    println!();
    println!("### Hot account: holds on one account (local mode, SQLite, pipeline off)");
    println!();
    println!("| concurrent clients | holds | holds per second |");
    println!("|---:|---:|---:|");
    let (_server, api, _data) = local_server(false).await;
    for (clients, per_client) in [(8, 50), (64, 8)] {
        let rate = hot_account_round(&api, clients, per_client).await;
        println!("| {clients} | {} | {rate:.0} |", clients * per_client);
    }
    if emulator {
        ledger_requests().await;
    }
}

/// DynamoDB requests and write units of one auto-approved payout create, funded from an
/// account (its hold, the hold's audit entry and event, and the balance update ride in the
/// approval's transaction) and unfunded.
async fn ledger_requests() {
    use ops_domain::access::Environment;
    use std::sync::Arc;
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-ledger-{}", std::process::id());
    let mut settings = ops_runtime::provision::provision(&config, &stack, Environment::Test, None)
        .await
        .expect("stack");
    // Back-to-back creates from one key: the request limit would refuse them.
    settings.rate_limit = 0;
    let clock = Arc::new(ops_tests::TestClock::default());
    let (service, parts) = settings.service_with(&config, clock).await.expect("service");
    parts.store.count_index_entries_exactly();
    let service = Arc::new(service);
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api {
        base: format!("http://{}", listener.local_addr().unwrap()),
        client: reqwest::Client::new(),
    };
    let router = ops_api::router(ops_api::App { service });
    tokio::spawn(async move { axum::serve(listener, router).await });
    let (funded, _) = funded_customer(&api, 1_000_000_000).await;
    let unfunded = api.create_customer().await;
    println!();
    println!("### Hot account on DynamoDB: one auto-approved one-item payout create (emulator, rate limit off)");
    println!();
    println!("| payout | DynamoDB requests | write units |");
    println!("|---|---:|---:|");
    for (label, customer) in [
        ("drawing on an account (hold placed)", &funded),
        ("no account", &unfunded),
    ] {
        // The first create of each opens nothing new; measure the next ten.
        api.post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
            .await;
        let (requests, units) = (parts.store.requests(), parts.store.write_units());
        for _ in 0..10 {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
                .await;
            assert_eq!(made.json()["status"], "approved", "{}", made.json());
        }
        println!(
            "| {label} | {:.1} | {:.1} |",
            (parts.store.requests() - requests) as f64 / 10.0,
            (parts.store.write_units() - units) as f64 / 10.0
        );
    }
}

/// The embedded timer's cost per round with 100, 1,000 and 10,000 active schedules none of
/// which is due (the due index is read, not the schedules), and how soon after its time an
/// occurrence's operation exists with the local server's pipeline running.
async fn schedule_timer() {
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::schedules::{Schedule, ScheduleStatus, ScheduleStore};
    println!();
    println!("### Schedule timer (local mode, SQLite)");
    println!();
    println!("| active schedules | due-index read per round, p50 (ms) | p99 (ms) |");
    println!("|---:|---:|---:|");
    let data_dir = tempfile::tempdir().unwrap();
    let store = ops_infra::embedded::SqliteStore::open(&data_dir.path().join("timer.sqlite")).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let cause = ops_domain::cause::Cause::new("schedule_created", "bench", ops_domain::cause::Actor::system(), now);
    let mut stored = 0;
    for target in [100, 1_000, 10_000] {
        while stored < target {
            let writes = (stored..(stored + 500).min(target))
                .map(|i| {
                    Write::PutSchedule(Schedule {
                        id: format!("sch_bench{i:06}").into(),
                        customer_id: "cus_bench".into(),
                        expression: "rate(1 day)".into(),
                        timezone: "UTC".into(),
                        operation: serde_json::json!({}),
                        status: ScheduleStatus::Active,
                        start_at: None,
                        end_at: None,
                        // Spread over the next day: none due now.
                        next_run_at: Some(now + time::Duration::seconds(60 + i as i64 % 86_000)),
                        anchor: now,
                        api_key_id: "key_bench".into(),
                        created_by: "key_bench".into(),
                        cause: cause.clone(),
                        created_at: now,
                        updated_at: now,
                        environment: ops_domain::access::Environment::Test,
                        version: 1,
                    })
                })
                .collect::<Vec<_>>();
            stored += writes.len();
            store.commit(Changeset { writes }).await.unwrap();
        }
        let mut rounds = vec![];
        for _ in 0..500 {
            let started = Instant::now();
            let due = store.schedules_due(now, 100).await.unwrap();
            rounds.push(started.elapsed());
            assert!(due.is_empty());
        }
        println!(
            "| {target} | {} | {} |",
            ms(percentile(&mut rounds, 0.5)),
            ms(percentile(&mut rounds, 0.99))
        );
    }

    let server_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(server_dir.path().to_path_buf());
    config.worker = true;
    config.rate_limit = 0;
    let server = ops_local::start(config).await.expect("server starts");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    let customer = api.create_customer().await;
    let mut body = payout(&customer.id, "two_step", &[1_000]);
    body.as_object_mut().unwrap().remove("customer_id");
    let mut waits = vec![];
    for _ in 0..10 {
        let created = api
            .post(
                "/v1/schedules",
                &customer.key,
                serde_json::json!({"expression": "rate(1 day)", "operation": body}),
            )
            .await;
        let path = format!("/v1/schedules/{}/occurrences", created.id());
        loop {
            if !api.get(&path, &customer.key).await.json()["data"]
                .as_array()
                .unwrap()
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A rate schedule without a start runs at once: count from when it was made.
        waits.push(Duration::from_secs_f64(
            (time::OffsetDateTime::now_utc() - created_at(&created)).as_seconds_f64(),
        ));
    }
    println!();
    println!(
        "Occurrence due at creation → its operation stored, with the pipeline running (10 schedules): p50 {} ms, max {} ms",
        ms(percentile(&mut waits, 0.5)),
        ms(percentile(&mut waits, 1.0))
    );
}

fn created_at(reply: &ops_tests::Reply) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(
        reply.json()["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}

async fn local_mode() {
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
async fn aws_lifecycles() {
    lifecycle_header("AWS adapters (emulator)");
    for (clients, per_client) in [(1, 10), (8, 2), (64, 1)] {
        let data_dir = tempfile::tempdir().unwrap();
        let mut config = ops_tests::config(data_dir.path().to_path_buf());
        config.backend = ops_local::Backend::Aws;
        config.aws_provision = Some(format!("bench-{clients}-{}", std::process::id()));
        config.worker = true;
        config.rate_limit = 0;
        let server = ops_local::start_on_aws(config, ops_runtime::deployment::system_clock())
            .await
            .expect("server starts on the AWS adapters");
        let api = Api {
            base: format!("http://{}", server.address),
            client: reqwest::Client::new(),
        };
        lifecycle_row(&api, clients, per_client).await;
        server.task.abort();
    }
}

/// Requests per lifecycle on the AWS adapters (against the emulator the endpoint names), and
/// what 1,000 payouts would cost at on-demand prices. Returns the stack it measured on.
async fn aws_round_trips() -> ops_runtime::deployment::Settings {
    use ops_domain::access::Environment;
    use std::sync::Arc;
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-{}", std::process::id());
    let settings = ops_runtime::provision::provision(&config, &stack, Environment::Test, None)
        .await
        .expect("stack");
    let clock = Arc::new(ops_tests::TestClock::default());
    let (service, parts) = settings.service_with(&config, clock.clone()).await.expect("service");
    parts.store.count_index_entries_exactly();
    let stack_settings = settings.clone();
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
    let driver = parts.driver(&config, service.clone()).await.expect("trigger driver");
    let receiver = Receiver::start(0).await;
    let customer = api.create_customer().await;
    let approver = api.add_member(&customer, &["approver"], &["operations:approve"]).await;
    api.subscribe(&customer.key, &receiver.url, &["operation.completed"])
        .await;
    let mut setup = Steps::default();
    settle(&driver, &clock, &parts.store, &mut setup).await;
    let (requests, (transactions, items), puts, units, sqs) = (
        parts.store.requests(),
        parts.store.transactions(),
        parts.store.single_writes(),
        parts.store.write_units(),
        parts.queue.requests(),
    );
    let units_by_kind = parts.store.write_units_by_kind();
    let lifecycles = 20u64;
    let mut steps = Steps::default();
    let mut ids = vec![];
    for _ in 0..lifecycles {
        let made = steps.measure("POST /v1/operations", &parts.store, async {
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[123_400]),
            )
            .await
            .id()
        });
        ids.push(made.await);
    }
    for id in &ids {
        let path = format!("/v1/operations/{id}/approve");
        let approved = steps.measure("POST /v1/operations/{id}/approve", &parts.store, async {
            api.post(&path, &approver.key, json!({})).await
        });
        assert_eq!(approved.await.status, 200);
    }
    settle(&driver, &clock, &parts.store, &mut steps).await;
    let per = |n: u64| n as f64 / lifecycles as f64;
    let dynamo = per(parts.store.requests() - requests - steps.schedule_queries);
    let (tx, written) = (
        per(parts.store.transactions().0 - transactions),
        per(parts.store.transactions().1 - items),
    );
    let single = per(parts.store.single_writes() - puts);
    let write_units = per(parts.store.write_units() - units);
    let queue = per(parts.queue.requests() - sqs);
    for id in &ids {
        assert_eq!(
            api.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
            "completed"
        );
    }
    assert_eq!(receiver.received().len(), ids.len(), "one operation.completed each");
    // On-demand prices (us-east-1): $0.625 per million write units, $0.125 per million read
    // units, SQS $0.40 per million requests. Every DynamoDB request but a write is counted
    // as one read unit (items here are under 4 KB).
    let reads = dynamo - tx - single;
    let cost = 1000.0 * (write_units * 0.625e-6 + reads * 0.125e-6 + queue * 0.40e-6);
    println!();
    println!("| on the AWS adapters (emulator), per payout lifecycle | measured |");
    println!("|---|---|");
    println!(
        "| DynamoDB requests (besides the poll schedule's {} queries and each served rail's return sweeps a round) | {dynamo:.1} |",
        ops_infra::aws::SHARDS
    );
    println!("| of which TransactWriteItems | {tx:.1} ({written:.1} items) |");
    println!("| of which single-item writes (a changeset of one put, an idempotency claim) | {single:.1} |");
    println!("| write units (items by size, transactions doubled, index entries) | {write_units:.1} |");
    println!("| SQS requests (pump: receive, delete, send) | {queue:.1} |");
    println!("| DynamoDB + SQS cost per 1,000 payouts, on demand | ${cost:.4} |");

    println!();
    println!("| item written (its `entity`) | write units per payout lifecycle |");
    println!("|---|---|");
    for (kind, total) in parts.store.write_units_by_kind() {
        let spent = total - units_by_kind.get(&kind).copied().unwrap_or(0);
        if spent > 0 {
            println!("| {kind} | {:.1} |", per(spent));
        }
    }

    println!();
    println!("| on the AWS adapters (emulator), per payout lifecycle: step | DynamoDB requests | of which writes | the design's minimum | what the minimum is |");
    println!("|---|---|---|---|---|");
    for (step, counted) in &steps.counted {
        let (minimum, needs) = requests::minimum(step);
        println!(
            "| {step} | {:.1} | {:.1} | {minimum} | {needs} |",
            per(counted.requests),
            per(counted.writes)
        );
    }
    let minimum: u32 = DESIGN_MINIMUM.iter().map(|(_, minimum, _)| minimum).sum();
    println!("| all steps | {dynamo:.1} | {:.1} | {minimum} | |", tx + single);
    Lifecycles {
        api: &api,
        driver: &driver,
        clock: &clock,
        store: &parts.store,
        customer: &customer,
        approver: &approver,
    }
    .by_kind()
    .await;

    // No request path grows with history: the DynamoDB requests one lookup or create makes
    // stay the same as the table fills (the emulator's own latency does grow: it scans).
    println!();
    println!("| AWS adapters: stored operations | DynamoDB requests per GET /v1/operations/{{id}} | per {LIST_ALL} | per {LIST_NONE} | per POST /v1/operations | per GET /v1/board |");
    println!("|---|---|---|---|---|---|");
    let mut stored = lifecycles as usize;
    let create = || {
        api.post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[5_000]),
        )
    };
    for target in [250usize, 1_000] {
        for chunk in (stored..target).collect::<Vec<_>>().chunks(8) {
            join_all(chunk.iter().map(|_| create())).await;
        }
        stored = target;
        let per_request = |before: u64| (parts.store.requests() - before) as f64 / 10.0;
        let before = parts.store.requests();
        for _ in 0..10 {
            api.get(&format!("/v1/operations/{}", ids[0]), &customer.key).await;
        }
        let get = per_request(before);
        let before = parts.store.requests();
        for _ in 0..10 {
            api.get(LIST_ALL, &customer.key).await;
        }
        let list = per_request(before);
        let before = parts.store.requests();
        for _ in 0..10 {
            api.get(LIST_NONE, &customer.key).await;
        }
        let rare = per_request(before);
        let before = parts.store.requests();
        for _ in 0..10 {
            create().await;
        }
        let made = per_request(before);
        stored += 10;
        // The desk counts the first batch made (approvals waiting), so the board has a column
        // and a queue to read; draining the stream again would stall the emulator, and the
        // board's reads are the same whatever its counters say.
        if target == 250 {
            let desk = ops_runtime::driver::Trigger::Stream(ops_runtime::driver::StreamConsumer::Desk);
            while driver.round(desk).await.expect("desk round") > 0 {}
        }
        let before = parts.store.requests();
        for _ in 0..10 {
            let answer = api.get("/v1/board", &customer.key).await;
            assert!(answer.json()["pending_approval"]["count"].as_i64() >= Some(200));
        }
        let board = per_request(before);
        println!("| {target} | {get:.1} | {list:.1} | {rare:.1} | {made:.1} | {board:.1} |");
    }
    platform_board_by_customers(&api, &parts.store).await;
    stack_settings
}

/// What a payout's lifecycle on the emulator takes: the API, the trigger driver and its clock,
/// the store (which counts write units), a customer and its approver.
struct Lifecycles<'a> {
    api: &'a Api,
    driver: &'a ops_runtime::driver::Driver,
    clock: &'a ops_tests::TestClock,
    store: &'a ops_infra::aws::DynamoStore,
    customer: &'a ops_tests::Customer,
    approver: &'a ops_tests::Member,
}

impl Lifecycles<'_> {
    /// The lifecycle above is approved before the desk's first round, so its approvals item
    /// never opens; a payout a person approves later waits in the approvals queue first. What
    /// that lifecycle writes, by kind of item; and what a payroll's payout of ten lines writes.
    async fn by_kind(&self) {
        self.written("a payout whose approval waits in the approvals queue", &[123_400], true)
            .await;
        let lines: Vec<i64> = (1..=10).map(|line| line * 12_340).collect();
        self.written("a payout of ten lines, approved before the desk's round", &lines, false)
            .await;
    }

    /// Ten payouts of `lines` made, approved and run to the end (with `desk_first`, after the
    /// desk's rounds opened an approvals item for each): the write units of one, by kind.
    async fn written(&self, label: &str, lines: &[i64], desk_first: bool) {
        use ops_runtime::driver::{StreamConsumer, Trigger};
        let Lifecycles {
            api,
            driver,
            clock,
            store,
            customer,
            approver,
        } = self;
        let payouts = 10;
        let spent = ops_tests::requests::WriteUnitsSince::now(store);
        let mut ids = vec![];
        for _ in 0..payouts {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", lines))
                .await;
            ids.push(made.id());
        }
        if desk_first {
            while driver
                .round(Trigger::Stream(StreamConsumer::Desk))
                .await
                .expect("desk round")
                > 0
            {}
            let open = api
                .get("/v1/work_items?queue=approvals&status=open", &customer.key)
                .await
                .json();
            assert_eq!(open["data"].as_array().map(Vec::len), Some(payouts), "{open}");
        }
        for id in &ids {
            let approved = api
                .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
                .await;
            assert_eq!(approved.status, 200);
        }
        settle(driver, clock, store, &mut Steps::default()).await;
        let (write_units, lost_in_races, by_kind) = spent.per_payout(store, payouts);
        println!();
        println!("| on the AWS adapters (emulator), {label}: item written (its `entity`) | write units per payout lifecycle |");
        println!("|---|---|");
        for (kind, units) in by_kind {
            println!("| {kind} | {units:.1} |");
        }
        println!("| all (and {lost_in_races:.1} more lost in races) | {write_units:.1} |");
    }
}

/// The platform's board adds up every customer's counters when it is read: what one read
/// takes as customers are added (each with counters in one currency, as a move writes them).
async fn platform_board_by_customers(api: &Api, store: &ops_infra::aws::DynamoStore) {
    use ops_domain::desk::board::{BoardEntry, BoardMove, Column};
    use ops_domain::money::Currency;
    use ops_domain::ports::{Changeset, Commit, Write};
    println!();
    println!("| AWS adapters: customers with board counters | DynamoDB requests per GET /v1/board (the platform's) | KB of items queried a read | read units a read, eventually consistent (at least) |");
    println!("|---|---|---|---|");
    let mut customers = 1;
    for target in [1usize, 100, 300] {
        // One at a time: the emulator serves one request at a time, and its writes slow as
        // the table grows, so a crowd of them would time out.
        for n in customers..target {
            let entry = BoardEntry {
                operation_id: format!("op_board{n:05}").into(),
                customer_id: format!("cus_board{n:05}").into(),
                currency: Currency::parse("CLP").expect("a currency"),
                amount: 5_000,
                column: Some(Column::PendingApproval),
                operation_version: 1,
                event_id: format!("evt_board{n:05}").into(),
                version: 1,
            };
            // The emulator, slowed by the table's size, now and then drops a request: asked
            // again, a write it made anyway comes back as a conflict.
            for attempt in 1.. {
                let mut changes = Changeset::default();
                changes.push(Write::MoveOnBoard(BoardMove {
                    entry: entry.clone(),
                    from: None,
                }));
                match store.commit_derived(changes).await {
                    Ok(()) | Err(ops_domain::ports::StoreError::Conflict) => break,
                    Err(other) if attempt == 5 => panic!("counted on the board: {other}"),
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        }
        customers = target;
        let (requests, bytes) = (store.requests(), store.queried_bytes());
        for _ in 0..10 {
            let answer = api.get("/v1/board", ADMIN_KEY).await;
            assert!(answer.json()["pending_approval"]["count"].as_i64() >= Some(target as i64));
        }
        let per_read = |n: u64| n as f64 / 10.0;
        let kb = per_read(store.queried_bytes() - bytes) / 1024.0;
        println!(
            "| {target} | {:.1} | {kb:.1} | {:.1} |",
            per_read(store.requests() - requests),
            kb / 4.0 / 2.0
        );
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// The Lambda bootstraps as `sam build` ships them (`cargo lambda build --release --arm64`,
/// which `scripts/bench` runs through `sam build`): each binary, and the zip Lambda is given
/// (deflated as `sam package` does; `gzip -6` here, within a few bytes of it).
fn lambda_binary_sizes() {
    println!();
    println!("| Lambda artifact (arm64 release `bootstrap`) | functions sharing it | MiB | bytes | deflated (the zip uploaded), MiB |");
    println!("|---|---:|---:|---:|---:|");
    let binaries: std::collections::BTreeSet<&str> = ops_lambda::Function::all().map(|f| f.binary()).collect();
    for binary in binaries {
        let functions = ops_lambda::Function::all().filter(|f| f.binary() == binary).count();
        let bootstrap = target_dir().join("lambda").join(binary).join("bootstrap");
        let Ok(metadata) = bootstrap.metadata() else {
            println!("| {binary} | {functions} | not built | | |");
            continue;
        };
        let zipped = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("gzip -6 -c {} | wc -c", bootstrap.display()))
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().ok());
        println!(
            "| {binary} | {functions} | {} | {} | {} |",
            mib(metadata.len()),
            metadata.len(),
            zipped.map(mib).unwrap_or_default()
        );
    }
}

/// A fresh stack on the emulator holding the bench's admin key, for the cold starts alone.
async fn cold_start_stack() -> ops_runtime::deployment::Settings {
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-cold-{}", std::process::id());
    let settings = ops_runtime::provision::provision(&config, &stack, ops_domain::access::Environment::Test, None)
        .await
        .expect("stack");
    let clock = std::sync::Arc::new(ops_tests::TestClock::default());
    let (service, _) = settings.service_with(&config, clock).await.expect("service");
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    settings
}

async fn answered(client: &reqwest::Client, url: &str, key: Option<&str>) {
    let mut request = client.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("invocation");
    assert_eq!(
        response.status(),
        200,
        "{url}: {}",
        response.text().await.unwrap_or_default()
    );
}

/// Time from starting an API function's process to its first answered request, with
/// `cargo lambda watch --only-lambda-apis` as the Lambda runtime API and the emulator stack
/// behind it; then one more request on the warm process. The API functions' bootstraps
/// (`ops-api`, and `ops-schedules` for the schedules'), built in release for this machine
/// (`scripts/bench` builds them), told which function they are by `_HANDLER`.
async fn cold_starts(stack: &ops_runtime::deployment::Settings) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut watch = tokio::process::Command::new("cargo")
        .args([
            "lambda",
            "watch",
            "--only-lambda-apis",
            "--invoke-port",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("cargo lambda watch (pip install cargo-lambda)");
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "cargo lambda watch did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::new();
    // In --only-lambda-apis mode the runtime serves one function, named `_`.
    let invoke = format!("http://127.0.0.1:{port}/lambda-url/_");
    println!();
    println!("| API function (bootstrap) under `cargo lambda watch` | profile | binary MiB (x86_64) | process start → first answer p50 ms | max ms | warm request p50 ms |");
    println!("|---|---|---|---|---|---|");
    // The release profile is what Lambda runs (optimised for size); the fast profile, built
    // for speed, is beside it to show what the size costs at start.
    for profile in ["release", "fast"] {
        for (bootstrap, function, path, key) in [
            ("ops-api", "api-health", "/health", None),
            (
                "ops-api",
                "api-list-operations",
                "/v1/operations?limit=10",
                Some(ADMIN_KEY),
            ),
            (
                "ops-schedules",
                "api-list-schedules",
                "/v1/schedules?limit=10",
                Some(ADMIN_KEY),
            ),
        ] {
            let binary = target_dir().join(profile).join(bootstrap);
            let Ok(metadata) = binary.metadata() else {
                println!("| {function} ({bootstrap}) | {profile} | not built | | | |");
                continue;
            };
            let (mut cold, mut warm) = (vec![], vec![]);
            for _ in 0..5 {
                let started = Instant::now();
                let mut process = tokio::process::Command::new(&binary)
                    .envs(stack.to_vars())
                    .env("_HANDLER", function)
                    .env("AWS_LAMBDA_FUNCTION_NAME", "_")
                    .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
                    .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
                    .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt"))
                    .stdout(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .expect("function starts");
                answered(&client, &format!("{invoke}{path}"), key).await;
                cold.push(started.elapsed());
                let t = Instant::now();
                answered(&client, &format!("{invoke}{path}"), key).await;
                warm.push(t.elapsed());
                process.kill().await.expect("function stops");
            }
            let max = cold.iter().max().copied().unwrap_or_default();
            println!(
                "| {function} ({bootstrap}) | {profile} | {} | {} | {} | {} |",
                mib(metadata.len()),
                ms(percentile(&mut cold, 0.5)),
                ms(max),
                ms(percentile(&mut warm, 0.5))
            );
        }
    }
    watch.kill().await.expect("cargo lambda watch stops");
}
