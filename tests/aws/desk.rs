//! The desk on DynamoDB: work items opened by the table's stream, claimed by racing operators
//! one conditional write each.

use crate::spawn_aws_app;
use aws_sdk_dynamodb::types::AttributeValue;
use ops_tests::payout;
use serde_json::json;
use std::collections::HashSet;
use time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stream_opens_approvals_items_and_concurrent_claimers_never_share_one() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let mut waiting = vec![];
    for amount in [1_000, 2_000, 3_000] {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[amount]))
            .await;
        assert_eq!(created.json()["status"], "pending_approval", "{}", created.json());
        waiting.push(created.id());
    }
    app.settle(Duration::seconds(1), 1).await;
    let open = app
        .get("/v1/work_items?queue=approvals&status=open", &acme.key)
        .await
        .json();
    let subjects: Vec<&str> = open["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["subject"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, waiting, "oldest due first");

    let claimers = futures_util::future::join_all(
        (0..8).map(|_| app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"])),
    )
    .await;
    let claims = futures_util::future::join_all(
        claimers
            .iter()
            .map(|c| app.post("/v1/work_items/claim", &c.key, json!({"queue": "approvals"}))),
    )
    .await;
    let won: Vec<String> = claims
        .iter()
        .filter(|c| c.status == 200)
        .map(|c| c.json()["subject"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        won.iter().collect::<HashSet<_>>(),
        waiting.iter().collect::<HashSet<_>>(),
        "{:?}",
        claims.iter().map(|c| c.json()).collect::<Vec<_>>()
    );
    assert_eq!(won.len(), 3, "each item claimed once");

    // Deciding closes the item through the stream.
    let decided = app
        .post(
            &format!("/v1/operations/{}/approve", waiting[0]),
            &claimers[0].key,
            json!({}),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.json());
    app.settle(Duration::seconds(1), 1).await;
    let done = app
        .get("/v1/work_items?queue=approvals&status=done", &acme.key)
        .await
        .json();
    assert_eq!(done["data"][0]["subject"]["id"], waiting[0].as_str(), "{done}");

    // The board kept count on DynamoDB as the changes happened.
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_str(),
            board["queues"]["approvals"]["open"].as_i64()
        ),
        (Some(2), Some("5000"), Some(2)),
        "{board:#}"
    );
    let platform = app.get("/v1/board", ops_tests::ADMIN_KEY).await.json();
    assert!(
        platform["pending_approval"]["count"].as_i64().unwrap() >= 2,
        "{platform:#}"
    );
}

/// An approval made before the stream opened its operation's item is on the item when it
/// opens, and a signer who held the item hands it back with their signature on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approvals_item_knows_who_signed_before_and_after_it_opened() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let three = json!({"rules": [{"then": {"action": "require_approvals", "count": 3, "role": "approver"}}]});
    app.put_workflow(&acme.key, "three", three).await;
    let mut approvers = vec![];
    for _ in 0..3 {
        approvers.push(
            app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
                .await,
        );
    }
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "three", &[1_000]))
        .await;
    let approve = format!("/v1/operations/{}/approve", created.id());
    let early = app.post(&approve, &approvers[0].key, json!({})).await;
    assert_eq!(early.json()["status"], "pending_approval", "{}", early.json());
    app.settle(Duration::seconds(1), 1).await;

    let claim = json!({"queue": "approvals"});
    let refused = app.post("/v1/work_items/claim", &approvers[0].key, claim.clone()).await;
    assert_eq!(refused.error(404)["param"], "queue");
    let held = app
        .post("/v1/work_items/claim", &approvers[1].key, claim.clone())
        .await
        .json();
    assert_eq!(held["subject_decided_by"], json!([approvers[0].user_id]), "{held}");
    let second = app.post(&approve, &approvers[1].key, json!({})).await;
    assert_eq!(second.json()["status"], "pending_approval", "{}", second.json());
    let item = app
        .get(&format!("/v1/work_items/{}", held["id"].as_str().unwrap()), &acme.key)
        .await
        .json();
    assert_eq!(
        (item["status"].as_str(), item["subject_decided_by"].clone()),
        (Some("open"), json!([approvers[0].user_id, approvers[1].user_id]))
    );
    let last = app.post("/v1/work_items/claim", &approvers[2].key, claim).await.json();
    assert_eq!(last["id"], held["id"]);
}

/// A submission that reached the SQS dead-letter queue becomes an exceptions item (what the
/// dead-letter function does), leaves the queue, and a redrive sends it back, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_letter_on_sqs_is_an_exception_until_it_is_redriven() {
    use ops_domain::ports::{Queue, QueueName, MAX_RECEIVES};
    use ops_infra::QueueConsumer;
    use ops_runtime::driver::Trigger;
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[1_000]))
        .await;
    app.settle(Duration::seconds(30), 6).await;
    let operation = app
        .get(&format!("/v1/operations/{}", created.id()), &acme.key)
        .await
        .json();
    let transaction_id = operation["items"][0]["transaction_id"].as_str().unwrap().to_owned();

    let queue = &app.parts.queue;
    let body = json!({"task": "submit_transaction.v1", "transaction_id": transaction_id}).to_string();
    queue
        .send(QueueName::Submissions, &acme.id, body.clone(), Duration::ZERO)
        .await
        .unwrap();
    for _ in 0..=MAX_RECEIVES {
        queue.receive(QueueName::Submissions, 10, Duration::ZERO).await.unwrap();
    }
    assert_eq!(
        queue.dead_letters(QueueName::Submissions).await.unwrap(),
        [body.as_str()]
    );

    assert_eq!(app.driver.round(Trigger::DeadLetters).await.unwrap(), 1);
    assert!(queue.dead_letters(QueueName::Submissions).await.unwrap().is_empty());
    // Counted in the EMF metrics the alarms watch, and in the minute's levels.
    ops_runtime::triggers::status_poll(&app.service).await.unwrap();
    let metrics = app.metrics.documents();
    let value = |name: &str| metrics.iter().find(|m| m.get(name).is_some()).map(|m| m[name].clone());
    assert_eq!(
        (value("DeadLetters"), value("ExceptionsOpen"), value("NeedsAttention")),
        (Some(json!(1.0)), Some(json!(1.0)), Some(json!(0.0))),
        "{metrics:#?}"
    );
    assert!(metrics
        .iter()
        .all(|m| m["_aws"]["CloudWatchMetrics"][0]["Namespace"] == ops_infra::aws::NAMESPACE));
    let open = app
        .get("/v1/work_items?queue=exceptions&status=open", ops_tests::ADMIN_KEY)
        .await
        .json();
    let item = &open["data"][0];
    assert_eq!(
        (
            item["kind"].as_str(),
            item["message"].as_str(),
            item["customer_id"].as_str()
        ),
        (Some("dead_letter"), Some(body.as_str()), Some(acme.id.as_str())),
        "{open:#}"
    );
    let redriven = app
        .post(
            &format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap()),
            ops_tests::ADMIN_KEY,
            json!({}),
        )
        .await;
    assert_eq!(
        redriven.json()["resolution"]["cause"]["code"],
        "redriven",
        "{}",
        redriven.json()
    );
    let back = queue
        .receive(QueueName::Submissions, 10, Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(
        back.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        [body.as_str()]
    );
}

/// A customer's board counters in a currency are one item, and the platform's board adds up
/// every customer's. Counters kept before that still count: a customer's in its own partition
/// (one item per currency, or earlier one per bucket), and the platform's own sums.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_board_adds_up_counters_of_every_form() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    for customer in [&acme, &globex] {
        let created = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[1_000]),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.json());
    }
    app.settle(Duration::seconds(1), 1).await;
    let s = |text: &str| AttributeValue::S(text.to_owned());
    let number = |value: i64| AttributeValue::N(value.to_string());
    let dynamo = aws_sdk_dynamodb::Client::new(&app.config);
    let counters_before = [
        // A customer's, one item per bucket.
        (
            format!("BOARD#{}", acme.id),
            "column:pending_approval#CLP",
            2,
            500,
            true,
        ),
        // A customer's, one item per currency.
        (format!("BOARD#{}", acme.id), "COUNTS#CLP", 1, 200, false),
        // The platform's (which held every customer's as well).
        ("BOARD#PLATFORM#3".to_owned(), "COUNTS#CLP", 7, 9_000, false),
    ];
    for (pk, sk, count, amount, one_bucket) in counters_before {
        let mut put = dynamo
            .put_item()
            .table_name(&app.settings.table)
            .item("PK", s(&pk))
            .item("SK", s(sk))
            .item("entity", s("board_counter"))
            .item("currency", s("CLP"));
        put = if one_bucket {
            put.item("bucket", s("column:pending_approval"))
                .item("count", number(count))
                .item("amount", number(amount))
        } else {
            put.item("count|column:pending_approval", number(count))
                .item("amount|column:pending_approval", number(amount))
        };
        put.send().await.unwrap();
    }
    fn pending(board: &serde_json::Value) -> (Option<i64>, Option<&str>) {
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_str(),
        )
    }
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(pending(&board), (Some(4), Some("1700")), "{board:#}");
    let board = app.get("/v1/board", &globex.key).await.json();
    assert_eq!(pending(&board), (Some(1), Some("1000")), "{board:#}");
    // Both customers' counters now, and the platform's sums from before.
    let platform = app.get("/v1/board", ops_tests::ADMIN_KEY).await.json();
    assert_eq!(pending(&platform), (Some(9), Some("11000")), "{platform:#}");
}

/// A desk batch takes a subject's events in waves (its first event in the first, its second in
/// the second); when a wave fails, the batch reports the first event in stream order not done,
/// so the stream's checkpoint stops there. The next round takes that event and what follows
/// again: the board counts every change once, the one that failed included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_desk_wave_that_fails_is_taken_again_and_every_change_counts_once() {
    use ops_runtime::driver::{StreamConsumer, Trigger};
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    // Taken by the stream's desk consumer in one batch: first.created and second.created in
    // the first wave, first.approved in the second.
    let mut made = vec![];
    for amount in [1_000, 2_000] {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[amount]))
            .await;
        assert_eq!(created.status, 201, "{}", created.json());
        made.push(created.id());
    }
    let approved = app
        .post(&format!("/v1/operations/{}/approve", made[0]), &approver.key, json!({}))
        .await;
    assert_eq!(approved.status, 200, "{}", approved.json());
    let board_now = || async {
        let board = app.get("/v1/board", &acme.key).await.json();
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_str().map(str::to_owned),
            board["queues"]["approvals"]["open"].as_i64(),
        )
    };
    let desk = Trigger::Stream(StreamConsumer::Desk);

    app.parts.store.faults().fail_derived_commits_after(1);
    app.driver.round(desk).await.expect("the desk's round");
    // The first wave is in: the board shows both operations waiting for approval, not yet the
    // approval (an approvals item opens only for an operation still waiting when planned).
    assert_eq!(board_now().await, (Some(2), Some("3000".to_owned()), Some(1)));

    app.parts.store.faults().fail_derived_commits_after(usize::MAX);
    while app.driver.round(desk).await.expect("the desk's round") > 0 {}
    assert_eq!(board_now().await, (Some(1), Some("2000".to_owned()), Some(1)));
    // Taken once more from the start, the stream changes nothing.
    app.settle(Duration::seconds(1), 2).await;
    assert_eq!(board_now().await, (Some(1), Some("2000".to_owned()), Some(1)));
}
