//! At-least-once delivery underneath, exactly-once effects on top: the same stream records and
//! queue messages handed over again and again, and handlers that "crash" after their effect
//! but before acknowledging.

use ops_domain::ports::{Queue, QueueName};
use ops_infra::QueueConsumer;
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::receiver::Receiver;
use ops_tests::{payout, spawn_app, spawn_app_with};
use serde_json::json;
use std::collections::BTreeMap;
use time::Duration;

#[tokio::test]
async fn duplicated_records_and_messages_have_no_second_effect() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let endpoint = app
        .post("/v1/webhook_endpoints", &customer.key, json!({"url": receiver.url}))
        .await;
    assert_eq!(endpoint.status, 201);
    let mut operations = vec![];
    for i in 0..5 {
        // plain, transient-then-accepted, and timeout-then-confirmed outcomes
        let amounts = [60_000 + i * 100, 60_003 + i * 100, 60_004 + i * 100];
        operations.push(
            app.post("/v1/operations", &customer.key, payout(&customer.id, "auto", &amounts))
                .await
                .id(),
        );
    }
    let driver = app.driver();
    let store = &app.embedded().store;

    // The stream: each consumer gets the first batch twice before its checkpoint moves, and
    // the regular pump then replays it a third time.
    let first: Vec<_> = store
        .stream_batch("transitions", 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(
        first.len(),
        11,
        "customer.created, then operation.created and operation.approved per operation"
    );
    for consumer in StreamConsumer::ALL {
        for _ in 0..2 {
            assert!(consumer.consume(driver.service(), &first).await.failed.is_empty());
        }
    }
    while driver.round(Trigger::Stream(StreamConsumer::Transition)).await.unwrap() > 0 {}
    // Each operation's making task came three times; its transactions are made once, and the
    // stream routes each new one to its submission.
    while driver.round(Trigger::Queue(QueueName::Submissions)).await.unwrap() > 0 {}
    while driver.round(Trigger::Stream(StreamConsumer::Transition)).await.unwrap() > 0 {}

    // The submission queue: every message handled, then "crashed" before its ack, and also
    // sent twice more.
    let messages = app
        .embedded()
        .queue
        .receive(QueueName::Submissions, 100, Duration::seconds(30))
        .await
        .unwrap();
    assert!(messages.len() >= 15, "{} submission messages", messages.len());
    for message in &messages {
        for _ in 0..2 {
            app.embedded()
                .queue
                .send(
                    QueueName::Submissions,
                    "cus_again",
                    message.body.clone(),
                    Duration::ZERO,
                )
                .await
                .unwrap();
        }
    }
    assert!(driver.service().handle_submissions(&messages).await.failed.is_empty());
    app.clock.advance(Duration::seconds(31));

    // Webhook sends: every message twice in one batch (sent side by side), then the batch
    // again, never acknowledged.
    while driver
        .round(Trigger::Stream(StreamConsumer::WebhookDispatch))
        .await
        .unwrap()
        > 0
    {}
    let webhook_messages = app
        .embedded()
        .queue
        .receive(QueueName::Webhooks, 100, Duration::seconds(120))
        .await
        .unwrap();
    assert!(
        webhook_messages.len() >= 15,
        "{} webhook messages",
        webhook_messages.len()
    );
    let doubled = [webhook_messages.clone(), webhook_messages.clone()].concat();
    driver.service().handle_webhook_sends(&doubled).await;
    driver.service().handle_webhook_sends(&webhook_messages).await;
    app.settle(Duration::seconds(30), 20).await;

    // The rail saw each transaction once (plus the documented transient refusals).
    let ledger = app.sandbox().await;
    assert_eq!(ledger.len(), 15);
    for entry in &ledger {
        assert_eq!(entry.duplicate_submits, 0, "{entry:?}");
        let expected_calls = if entry.amount % 100 == 3 { 3 } else { 1 };
        assert_eq!(entry.submit_calls, expected_calls, "{entry:?}");
        assert!(entry.accepted);
    }

    // Counts add up: one transaction per item, all confirmed, every operation completed.
    let mut transactions = 0;
    for id in &operations {
        let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
        assert_eq!(operation["status"], "completed", "{operation}");
        let txns = app
            .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
            .await
            .json();
        let txns = txns["data"].as_array().unwrap().clone();
        assert_eq!(txns.len(), 3);
        assert!(txns.iter().all(|t| t["status"] == "confirmed"));
        transactions += txns.len();
    }
    assert_eq!(transactions, 15);

    // No state change has two events, and every state change in the audit has its event.
    let mut events = vec![];
    let mut after = String::new();
    loop {
        let page = app
            .get(&format!("/v1/events?limit=100{after}"), &customer.key)
            .await
            .json();
        let data = page["data"].as_array().unwrap().clone();
        after = format!("&starting_after={}", data.last().unwrap()["id"].as_str().unwrap());
        events.extend(data);
        if page["has_more"] != true {
            break;
        }
    }
    // The customer's making is in the customer's history, not an operation's.
    events.retain(|e| e["type"] != "customer.created");
    let mut per_change: BTreeMap<(String, String), usize> = BTreeMap::new();
    for event in &events {
        let entity = event["data"]["transaction_id"]
            .as_str()
            .or(event["data"]["operation_id"].as_str())
            .unwrap();
        *per_change
            .entry((entity.to_owned(), event["type"].as_str().unwrap().to_owned()))
            .or_default() += 1;
    }
    assert!(per_change.values().all(|n| *n == 1), "{per_change:?}");
    let mut audited_changes = 0;
    for id in &operations {
        let history = app
            .get(&format!("/v1/operations/{id}/history"), &customer.key)
            .await
            .json();
        for entry in history["data"].as_array().unwrap() {
            if entry["action"] == "approval_recorded" {
                continue;
            }
            audited_changes += 1;
            let key = (
                entry["entity_id"].as_str().unwrap().to_owned(),
                format!(
                    "{}.{}",
                    entry["entity_type"].as_str().unwrap(),
                    entry["to"].as_str().unwrap()
                ),
            );
            assert_eq!(per_change.get(&key), Some(&1), "no event for audited change {key:?}");
        }
    }
    let created_events = per_change
        .keys()
        .filter(|(_, kind)| kind == "operation.created")
        .count();
    assert_eq!(
        audited_changes + created_events,
        events.len(),
        "no event without its audit entry"
    );

    // Each event has one delivery and reached the receiver once.
    let received: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    for event in &events {
        let id = event["id"].as_str().unwrap();
        assert_eq!(app.deliveries(&customer.key, id).await.len(), 1, "{id}");
        assert_eq!(received.iter().filter(|r| *r == id).count(), 1, "{id}");
    }
}

#[tokio::test]
async fn a_poisoned_message_goes_to_the_dead_letter_queue_after_five_receives() {
    let app = spawn_app().await;
    let queue = &app.embedded().queue;
    queue
        .send(
            QueueName::Webhooks,
            "whe_x",
            "{\"delivery_id\":\"whd_x\"}".into(),
            Duration::ZERO,
        )
        .await
        .unwrap();
    for receive in 1..=5 {
        let got = queue
            .receive(QueueName::Webhooks, 10, Duration::seconds(10))
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].receive_count, receive);
        // Invisible until its visibility timeout passes.
        assert!(queue
            .receive(QueueName::Webhooks, 10, Duration::seconds(10))
            .await
            .unwrap()
            .is_empty());
        app.clock.advance(Duration::seconds(11));
    }
    assert!(queue
        .receive(QueueName::Webhooks, 10, Duration::seconds(10))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        queue.dead_letters(QueueName::Webhooks).await.unwrap(),
        ["{\"delivery_id\":\"whd_x\"}"]
    );
    assert!(queue.waiting(QueueName::Webhooks).await.unwrap().is_empty());
}

/// The background pipeline runs each trigger on its own, as the cloud's functions do: while
/// one customer's receiver hangs on its webhooks, another customer's payout still goes
/// through the rail to completion, and its own webhooks arrive. (The hanging deliveries are
/// fewer than local mode's eight senders, each of which one can hold for its timeout, and than
/// the sender's forty places: with more, the other customer's webhooks would wait for a sender
/// or a place, though never its payout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_receiver_holds_up_nobody_elses_payout() {
    let app = spawn_app_with(|config| {
        config.worker = true;
        config.webhook_timeout_ms = 60_000;
    })
    .await;
    let stuck = app.create_customer().await;
    let hanging = Receiver::start(0).await;
    hanging.hang();
    app.subscribe(&stuck.key, &hanging.url, &["operation.created", "operation.completed"])
        .await;
    let created = app
        .post("/v1/operations", &stuck.key, payout(&stuck.id, "auto", &[10_000]))
        .await;
    assert_eq!(created.status, 201);

    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    app.subscribe(&customer.key, &receiver.url, &["operation.completed"])
        .await;
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[20_000]))
        .await
        .id();
    // The first status poll is due 2 s after submission on the test's clock; a pipeline held
    // by the hanging receiver would sit for its 60 s timeout per webhook.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while receiver.received().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the payout was held up");
        app.clock.advance(Duration::seconds(5));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed");
    assert!(
        hanging.requests() > 0,
        "the hanging receiver was being called all along"
    );
    assert!(hanging.received().is_empty());
}
