//! Webhook delivery throughput against a plain reqwest loop.

use crate::local_server;
use crate::measure::{ms, Usage};
use futures_util::future::join_all;
use futures_util::StreamExt;
use ops_tests::receiver::Receiver;
use std::time::{Duration, Instant};

/// Webhook delivery throughput (local mode): 20,000 events' deliveries sent by the webhook
/// consumer as local mode runs it (eight senders taking batches of fifty, each keeping up to
/// ten posts open, forty open at most in all: each delivery read, its endpoint's secrets
/// read, signed, posted, its attempt recorded with the retry bookkeeping), next to a plain
/// reqwest loop posting the same bodies, unsigned, to a receiver of the same kind with the
/// same concurrency (four loops, each keeping ten posts open), next to the consumer's own
/// sender posting them signed with nothing read or recorded, and next to the least a durable
/// delivery must do ([`least_durable_deliveries`]: the floor for any design that records each
/// attempt, as the limit is for creates).
/// `WEBHOOK_ORDERING=per_operation` has the endpoint take each operation's events in order
/// (each delivery then joins, checks and leaves its operation's line).
/// `WEBHOOK_RECEIVER_MS` makes the receivers answer after that many milliseconds, as one
/// across a network would (default 0: at once); `WEBHOOK_RECEIVER_VARIES=1` makes that the
/// mean of waits spread evenly from none to twice it.
pub(crate) async fn webhook_deliveries() {
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
    let endpoint = api
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    if let Ok(ordering) = std::env::var("WEBHOOK_ORDERING") {
        let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().expect("its id"));
        let ordered = api
            .post(&path, &customer.key, serde_json::json!({"ordering": ordering}))
            .await;
        assert_eq!(ordered.status, 200, "{}", ordered.json());
    }
    crate::two_step_payouts(&api, &customer, count).await;
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
    let bodies_for_floor = bodies.clone();
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
    let (floor_took, floor_cpu) = {
        let receiver = receiver_like_this().await;
        let used = least_durable_deliveries(bodies_for_floor, &receiver.url, SENDERS * IN_FLIGHT).await;
        assert_eq!(receiver.received().len(), count);
        used
    };
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
    row(
        "the least durable delivery (the plain loop's posts, signed; each body read from SQLite, each attempt appended, one synchronous commit a batch)",
        floor_took,
        floor_cpu,
    );
    row("the webhook consumer (signed, attempt recorded)", service, service_cpu);
}

/// The least a durable webhook delivery must do around the plain loop's posts, as
/// the limit is the least a create must do: the consumer's eight senders and batches
/// of fifty, each batch's deliveries read from a SQLite file (WAL, `synchronous=FULL`) in one
/// query, their bodies signed and posted with `open_posts` open at most in all, and each
/// attempt appended to a narrow table in one commit a batch on the one writer. Nothing else:
/// no queue (each sender reads on from where it stopped), no event apart from its delivery,
/// no endpoint read, no retry (an attempt that succeeded needs none). What it takes beyond the
/// plain loop is what signing and recording each attempt durably cost at the least.
async fn least_durable_deliveries(bodies: Vec<Vec<u8>>, url: &str, open_posts: usize) -> (Duration, Duration) {
    use ops_runtime::driver::Pace;
    use rusqlite::{params, Connection};
    use std::sync::{Arc, Mutex};
    const BATCH: i64 = 50;
    const POSTS_A_SENDER: usize = 10;
    let senders = Pace::EMBEDDED.webhook_senders as i64;
    let dir = tempfile::tempdir().expect("a directory for the floor's file");
    let path = dir.path().join("deliveries.db");
    let open = |path: &std::path::Path| {
        let connection = Connection::open(path).expect("the floor's file opens");
        connection
            .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;")
            .expect("pragmas");
        connection
    };
    let mut writer = open(&path);
    writer
        .execute_batch(
            "CREATE TABLE deliveries (id INTEGER PRIMARY KEY, sender INTEGER NOT NULL, body BLOB NOT NULL);
             CREATE INDEX by_sender ON deliveries (sender, id);
             CREATE TABLE attempts (delivery_id INTEGER PRIMARY KEY, answer INTEGER NOT NULL, attempted_at INTEGER NOT NULL);",
        )
        .expect("schema");
    let fill = writer.transaction().expect("fill");
    for (id, body) in bodies.iter().enumerate() {
        fill.execute(
            "INSERT INTO deliveries (id, sender, body) VALUES (?1, ?2, ?3)",
            params![id as i64, id as i64 % senders, body],
        )
        .expect("a delivery");
    }
    fill.commit().expect("filled");
    let writer = Arc::new(Mutex::new(writer));
    let open_posts = Arc::new(tokio::sync::Semaphore::new(open_posts));
    let client = reqwest::Client::new();

    let (t, cpu) = (Instant::now(), Usage::own().cpu);
    join_all((0..senders).map(|sender| {
        let (writer, open_posts, client, path) = (writer.clone(), open_posts.clone(), client.clone(), path.clone());
        async move {
            let mut reader = Some(open(&path));
            let mut after = -1_i64;
            loop {
                let connection = reader.take().expect("the sender's reader");
                let (connection, due) = tokio::task::spawn_blocking(move || {
                    let due: Vec<(i64, Vec<u8>)> = connection
                        .prepare_cached(
                            "SELECT id, body FROM deliveries WHERE sender = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
                        )
                        .expect("the due query")
                        .query_map(params![sender, after, BATCH], |row| Ok((row.get(0)?, row.get(1)?)))
                        .expect("due deliveries")
                        .collect::<Result<_, _>>()
                        .expect("due deliveries read");
                    (connection, due)
                })
                .await
                .expect("the read");
                reader = Some(connection);
                let Some((last, _)) = due.last() else { break };
                after = *last;
                let answers: Vec<(i64, u16)> = futures_util::stream::iter(due)
                    .map(|(id, body)| {
                        let (client, open_posts) = (client.clone(), open_posts.clone());
                        async move {
                            let _place = open_posts.acquire().await.expect("open");
                            let signature = ops_domain::webhooks::signature::header(
                                &["whsec_bench"],
                                time::OffsetDateTime::now_utc().unix_timestamp(),
                                &body,
                            );
                            let response = client
                                .post(url)
                                .header("content-type", "application/json")
                                .header(ops_domain::webhooks::signature::HEADER, signature)
                                .body(body)
                                .send()
                                .await
                                .expect("the floor's post");
                            (id, response.status().as_u16())
                        }
                    })
                    .buffer_unordered(POSTS_A_SENDER)
                    .collect()
                    .await;
                let writer = writer.clone();
                tokio::task::spawn_blocking(move || {
                    let mut writer = writer.lock().expect("the writer");
                    let attempts = writer.transaction().expect("a batch's commit");
                    let now = time::OffsetDateTime::now_utc().unix_timestamp();
                    for (id, answer) in answers {
                        attempts
                            .prepare_cached(
                                "INSERT INTO attempts (delivery_id, answer, attempted_at) VALUES (?1, ?2, ?3)",
                            )
                            .expect("the attempt's update")
                            .execute(params![id, answer, now])
                            .expect("an attempt recorded");
                    }
                    attempts.commit().expect("the batch's attempts committed");
                })
                .await
                .expect("the commit");
            }
        }
    }))
    .await;
    let used = (t.elapsed(), Usage::own().cpu - cpu);
    let unsent: i64 = writer
        .lock()
        .expect("the writer")
        .query_row(
            "SELECT count(*) FROM deliveries WHERE id NOT IN (SELECT delivery_id FROM attempts)",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(unsent, 0, "every delivery attempted once");
    used
}

/// Posts one body to a receiver's URL; the bench's webhook rows differ only in this.
type PostFn = std::sync::Arc<
    dyn Fn(String, Vec<u8>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;
