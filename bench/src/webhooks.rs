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
/// same concurrency (four loops, each keeping ten posts open), and next to the consumer's own
/// sender posting them signed with nothing read or recorded (the floor for the consumer).
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
    api.subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
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
