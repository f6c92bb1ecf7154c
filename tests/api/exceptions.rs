//! Exceptions that are no operation's or transaction's state: a webhook delivery whose retries
//! ran out, a message that reached a dead-letter queue. Each is a work item from the change
//! that made it until its remedy (resend, redrive) closes it.

use ops_domain::ports::{Queue, QueueName};
use ops_infra::QueueConsumer;
use ops_tests::receiver::Receiver;
use ops_tests::{payout, spawn_app, ADMIN_KEY};
use serde_json::json;
use time::Duration;

#[tokio::test]
async fn a_delivery_whose_retries_ran_out_is_an_exception_until_it_is_resent() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    // Two deliveries, nine attempts each, all refused; what comes after is taken.
    let receiver = Receiver::start(18).await;
    let endpoint = app.subscribe(&acme.key, &receiver.url, &["operation.created"]).await;
    app.never_disable(&acme.key, &endpoint).await;
    for amount in [5, 6] {
        app.post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[amount]))
            .await;
    }
    app.settle(Duration::hours(1), 80).await;
    assert_eq!(receiver.requests(), 18);

    let items = app.open_exceptions().await;
    assert_eq!(items.len(), 2, "{items:#?}");
    let mut deliveries = vec![];
    for item in &items {
        assert_eq!(
            (
                item["kind"].as_str(),
                item["subject"]["type"].as_str(),
                item["customer_id"].as_str(),
                item["cause"]["code"].as_str()
            ),
            (
                Some("webhook_delivery_failed"),
                Some("delivery"),
                Some(acme.id.as_str()),
                Some("webhook_delivery_failed")
            ),
            "{item:#}"
        );
        assert!(
            item["cause"]["message"]
                .as_str()
                .unwrap()
                .contains("failed after 9 attempts; the last answer was HTTP 503"),
            "{item:#}"
        );
        deliveries.push(item["subject"]["id"].as_str().unwrap().to_owned());
    }
    let board = app.get("/v1/board", ADMIN_KEY).await.json();
    assert_eq!(board["queues"]["exceptions"]["open"], 2, "{board:#}");

    // The customer resends the first delivery's event itself: its item closes, naming the
    // new delivery.
    let events = app.get("/v1/events?type=operation.created", &acme.key).await.json();
    let mut first_event = None;
    for event in events["data"].as_array().unwrap() {
        let id = event["id"].as_str().unwrap();
        if app.deliveries(&acme.key, id).await[0]["id"] == deliveries[0].as_str() {
            first_event = Some(event.clone());
        }
    }
    let first_event = first_event.expect("the first delivery's event");
    let event_id = first_event["id"].as_str().unwrap();
    let resent = app
        .post(&format!("/v1/events/{event_id}/resend"), &acme.key, json!({}))
        .await;
    assert_eq!(resent.status, 200, "{}", resent.json());
    app.drain().await;
    let first = items
        .iter()
        .find(|i| i["subject"]["id"] == deliveries[0].as_str())
        .unwrap();
    let closed = app
        .get(&format!("/v1/work_items/{}", first["id"].as_str().unwrap()), ADMIN_KEY)
        .await
        .json();
    let resend_id = resent.json()["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            closed["status"].as_str(),
            closed["resolution"]["cause"]["code"].as_str()
        ),
        (Some("done"), Some("resent")),
        "{closed:#}"
    );
    assert!(closed["resolution"]["cause"]["message"]
        .as_str()
        .unwrap()
        .contains(&resend_id));

    // The other is worked from the desk: a customer may not, the platform's operator may.
    let second = items
        .iter()
        .find(|i| i["subject"]["id"] == deliveries[1].as_str())
        .unwrap();
    let resolve = format!("/v1/work_items/{}/resolve", second["id"].as_str().unwrap());
    let refused = app.post(&resolve, &acme.key, json!({})).await;
    assert_eq!(refused.error(403)["code"], "platform_only");
    let resolved = app
        .post(&resolve, ADMIN_KEY, json!({"reason": "receiver is back"}))
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json());
    assert_eq!(resolved.json()["resolution"]["cause"]["code"], "resent");
    app.drain().await;
    assert_eq!(receiver.requests(), 20, "each resend delivered once");
    assert!(app.open_exceptions().await.is_empty());
    let again = app.post(&resolve, ADMIN_KEY, json!({})).await;
    assert_eq!(again.error(409)["code"], "invalid_transition");
}

#[tokio::test]
async fn a_dead_letter_is_an_exception_until_it_is_redriven_and_the_rail_is_asked_once() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[1_000]))
        .await;
    let operation_id = created.id();
    app.settle(Duration::minutes(1), 10).await;
    let operation = app
        .get(&format!("/v1/operations/{operation_id}"), &acme.key)
        .await
        .json();
    assert_eq!(operation["status"], "completed", "{operation:#}");
    let transaction_id = operation["items"][0]["transaction_id"].as_str().unwrap().to_owned();

    // A submission that no consumer could handle five times, and one that names nothing.
    let queue = &app.embedded().queue;
    let body = json!({"task": "submit_transaction.v1", "transaction_id": transaction_id}).to_string();
    queue
        .send(QueueName::Submissions, &acme.id, body.clone(), Duration::ZERO)
        .await
        .unwrap();
    queue
        .send(
            QueueName::Webhooks,
            "whe_x",
            "{\"delivery_id\":\"whd_x\"}".into(),
            Duration::ZERO,
        )
        .await
        .unwrap();
    for queue_name in [QueueName::Submissions, QueueName::Webhooks] {
        for _ in 0..=ops_domain::ports::MAX_RECEIVES {
            queue.receive(queue_name, 10, Duration::ZERO).await.unwrap();
        }
        assert_eq!(queue.dead_letters(queue_name).await.unwrap().len(), 1);
    }

    app.drain().await;
    for queue_name in [QueueName::Submissions, QueueName::Webhooks] {
        assert!(
            queue.dead_letters(queue_name).await.unwrap().is_empty(),
            "taken off the dead-letter queue"
        );
    }
    let items = app.open_exceptions().await;
    assert_eq!(items.len(), 1, "the one about nothing is dropped: {items:#?}");
    let item = &items[0];
    assert_eq!(
        (
            item["kind"].as_str(),
            item["subject"]["type"].as_str(),
            item["customer_id"].as_str(),
            item["message"].as_str()
        ),
        (
            Some("dead_letter"),
            Some("dead_letter"),
            Some(acme.id.as_str()),
            Some(body.as_str())
        ),
        "{item:#}"
    );
    // A customer sees its item; only the platform's operators work it.
    let theirs = app.get("/v1/work_items?queue=exceptions", &acme.key).await.json();
    assert_eq!(theirs["data"].as_array().unwrap().len(), 1);

    let resolve = format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap());
    let redriven = app.post(&resolve, ADMIN_KEY, json!({"reason": "store was down"})).await;
    assert_eq!(redriven.status, 200, "{}", redriven.json());
    assert_eq!(
        redriven.json()["resolution"]["cause"]["code"],
        "redriven",
        "{}",
        redriven.json()
    );
    assert_eq!(queue.waiting(QueueName::Submissions).await.unwrap(), [body]);
    app.drain().await;
    // The transaction was confirmed long ago: the redriven submission asks the rail nothing.
    let transaction = app
        .get(&format!("/v1/transactions/{transaction_id}"), &acme.key)
        .await
        .json();
    assert_eq!(transaction["status"], "confirmed", "{transaction:#}");
    let ledger = app.sandbox().await;
    let entry = ledger.iter().find(|e| e.transaction_id == transaction_id).unwrap();
    assert_eq!((entry.submit_calls, entry.duplicate_submits), (1, 0));
    assert!(app.open_exceptions().await.is_empty());
}

#[tokio::test]
async fn an_operations_or_transactions_item_is_resolved_through_its_own_endpoints() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    // 20_008: lost by the rail, so the transaction needs an operator.
    app.post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[20_008]))
        .await;
    app.settle(Duration::minutes(10), 30).await;
    let items = app.open_exceptions().await;
    let item = items
        .iter()
        .find(|i| i["subject"]["type"] == "transaction")
        .unwrap_or_else(|| panic!("{items:#?}"));
    let resolve = format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap());
    let refused = app.post(&resolve, ADMIN_KEY, json!({})).await;
    let error = refused.error(409);
    assert_eq!(error["code"], "resolved_by_subject");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains(item["subject"]["id"].as_str().unwrap()));
    let unknown = app.post(&resolve, ADMIN_KEY, json!({"reason": "x", "extra": 1})).await;
    assert_eq!(unknown.status, 400, "{}", unknown.json());
    let still = app
        .get(&format!("/v1/work_items/{}", item["id"].as_str().unwrap()), ADMIN_KEY)
        .await;
    assert_eq!(still.json()["status"], "open", "nothing written");
}

#[tokio::test]
async fn a_failed_delivery_to_an_endpoint_since_deleted_is_closed_with_a_reason() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let receiver = Receiver::start(usize::MAX).await;
    let endpoint = app.subscribe(&acme.key, &receiver.url, &["operation.created"]).await;
    app.post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[5]))
        .await;
    app.settle(Duration::hours(1), 80).await;
    let item = app.open_exceptions().await.pop().expect("the failed delivery's item");
    let deleted = app
        .delete(
            &format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap()),
            &acme.key,
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());

    let resolve = format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap());
    for unexplained in [json!({}), json!({"reason": "   "})] {
        let error = app.post(&resolve, ADMIN_KEY, unexplained).await.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some("reason"), Some("nothing_to_resend"))
        );
    }
    let requests = receiver.requests();
    let closed = app
        .post(
            &resolve,
            ADMIN_KEY,
            json!({"reason": "The customer removed the endpoint."}),
        )
        .await;
    assert_eq!(
        (
            closed.json()["status"].as_str(),
            closed.json()["resolution"]["cause"]["code"].as_str()
        ),
        (Some("done"), Some("acknowledged")),
        "{}",
        closed.json()
    );
    app.drain().await;
    assert_eq!(
        receiver.requests(),
        requests,
        "nothing was sent to the deleted endpoint"
    );
}
