use crate::spawn_aws_app;
use ops_domain::ports::{Clock, Queue, QueueName};
use ops_domain::transactions::TransactionStore;
use ops_infra::QueueConsumer;
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::receiver::{signature_is_valid, Receiver};
use ops_tests::{payout, ADMIN_KEY};
use serde_json::json;
use std::collections::BTreeSet;
use time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payout_runs_its_whole_lifecycle_on_the_aws_adapters() {
    let app = spawn_aws_app().await;
    // The PSP's own systems listen on the bus: route every event into a queue to read them.
    let events_client = aws_sdk_eventbridge::Client::new(&app.config);
    let sqs = aws_sdk_sqs::Client::new(&app.config);
    let tap = sqs
        .create_queue()
        .queue_name(format!("{}-tap", app.settings.table))
        .send()
        .await
        .unwrap();
    let tap_url = tap.queue_url().unwrap().to_owned();
    let tap_arn = format!("arn:aws:sqs:us-east-1:123456789012:{}-tap", app.settings.table);
    let bus = app.settings.event_bus.clone().unwrap();
    events_client
        .put_rule()
        .name("tap")
        .event_bus_name(&bus)
        .event_pattern(r#"{"source":["payment-operations"]}"#)
        .send()
        .await
        .unwrap();
    let target = aws_sdk_eventbridge::types::Target::builder()
        .id("tap")
        .arn(&tap_arn)
        .build()
        .unwrap();
    events_client
        .put_targets()
        .rule("tap")
        .event_bus_name(&bus)
        .targets(target)
        .send()
        .await
        .unwrap();

    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    // Made at a wrong address and moved to the receiver: what it receives below came by the move.
    let endpoint = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "http://127.0.0.1:9/typo"}),
        )
        .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.json());
    let secret = endpoint.json()["secret"].as_str().unwrap().to_owned();
    let moved = app
        .post(
            &format!("/v1/webhook_endpoints/{}", endpoint.id()),
            &customer.key,
            json!({"url": receiver.url}),
        )
        .await;
    assert_eq!(
        (moved.status.as_u16(), moved.json()["url"].as_str()),
        (200, Some(receiver.url.as_str()))
    );
    let history = app
        .history(&format!("/v1/webhook_endpoints/{}", endpoint.id()), &customer.key)
        .await;
    let actions: Vec<&str> = history.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["created", "updated"]);
    let approver = app
        .add_member(&customer, &["approver"], &["operations:approve", "operations:read"])
        .await;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[80_000, 80_002]),
        )
        .await
        .id();
    let approved = app
        .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(approved.json()["status"], "approved");

    // stream → transactions → SQS → sandbox rail → status polls → confirmed / failed
    app.settle(Duration::seconds(30), 6).await;
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "partially_completed", "{operation}");
    let txns = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json();
    let statuses: BTreeSet<&str> = txns["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, BTreeSet::from(["confirmed", "failed"]));
    let ledger = app.parts.sandbox.as_ref().unwrap().entries().await;
    assert!(
        ledger.iter().all(|e| e.submit_calls == 1 && e.duplicate_submits == 0),
        "{ledger:?}"
    );

    // Every event arrived over HTTP, signed; the bus got them too.
    let history = app
        .get(&format!("/v1/operations/{id}/history"), &customer.key)
        .await
        .json();
    let received = receiver.received();
    assert!(received
        .iter()
        .all(|r| signature_is_valid(&r.signature, &r.body, &secret)));
    let types: BTreeSet<String> = received
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    for expected in [
        "operation.created",
        "operation.pending_approval",
        "operation.approved",
        "operation.processing",
        "transaction.submitted",
        "transaction.confirmed",
        "transaction.failed",
        "operation.partially_completed",
    ] {
        assert!(types.contains(expected), "{expected} not received: {types:?}");
    }
    let audited = history["data"].as_array().unwrap().len();
    // The customer's making is dispatched after its endpoint was made, so it arrives too.
    let of_the_customer = received
        .iter()
        .filter(|r| r.json()["type"] == "customer.created")
        .count();
    assert_eq!(
        (received.len() - of_the_customer, of_the_customer),
        (audited + 1, 1),
        "one event per audited change, plus operation.created"
    );
    let confirmed = received
        .iter()
        .map(|r| r.json())
        .find(|e| e["type"] == "transaction.confirmed")
        .unwrap();
    for field in [
        "transaction_id",
        "operation_id",
        "rail",
        "rail_reference",
        "amount",
        "currency",
    ] {
        assert!(!confirmed["data"][field].is_null(), "{field} missing: {confirmed}");
    }
    let mut on_bus = 0;
    for _ in 0..10 {
        let got = sqs
            .receive_message()
            .queue_url(&tap_url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        on_bus += got.messages().len();
        if got.messages().is_empty() {
            break;
        }
    }
    assert_eq!(on_bus, received.len(), "every event was also put on the bus");

    // Keys and idempotency work on DynamoDB too.
    let body = payout(&customer.id, "auto", &[5]);
    let first = app
        .post_keyed("/v1/operations", &customer.key, "aws-replay", &body)
        .await;
    let again = app
        .post_keyed("/v1/operations", &customer.key, "aws-replay", &body)
        .await;
    assert_eq!((first.status.as_u16(), again.bytes == first.bytes), (201, true));
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(
        app.get("/v1/operations", "sk_test_nobody_000000000000000000000000")
            .await
            .error(401)["code"],
        "invalid_api_key"
    );
    assert_eq!(
        app.get("/v1/operations?limit=100", ADMIN_KEY).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_that_keeps_failing_ends_in_the_dead_letter_queue() {
    let app = spawn_aws_app().await;
    let driver = app.driver.clone().with_visibility(Duration::ZERO);
    // A submission for a transaction that does not exist fails every time.
    app.parts
        .queue
        .send(
            QueueName::Submissions,
            "cus_nobody",
            r#"{"transaction_id":"txn_01doesnotexist"}"#.into(),
            Duration::ZERO,
        )
        .await
        .unwrap();
    for _ in 0..8 {
        driver.round(Trigger::Queue(QueueName::Submissions)).await.unwrap();
    }
    let dead = app.parts.queue.dead_letters(QueueName::Submissions).await.unwrap();
    assert_eq!(dead.len(), 1, "the poisoned message is in the dead-letter queue");
    assert!(dead[0].contains("txn_01doesnotexist"));
    assert!(app
        .parts
        .queue
        .receive(QueueName::Submissions, 10, Duration::ZERO)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operation_with_more_items_than_one_dynamodb_transaction_takes_completes() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let amounts: Vec<i64> = (0..40).map(|i| 100_000 + i * 100).collect();
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &amounts))
        .await
        .id();
    app.settle(Duration::seconds(30), 6).await;
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{}", operation["cause"]);
    let txns = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json();
    assert_eq!(txns["data"].as_array().unwrap().len(), 40);
    let ledger = app.parts.sandbox.as_ref().unwrap().entries().await;
    assert_eq!(ledger.len(), 40);
    assert!(ledger.iter().all(|e| e.submit_calls == 1));
}

/// In the cloud the submit worker and the status poll are separate functions, each with its
/// own `/tmp`: the sandbox rail keeps its ledger in the stack's table, so the poll function
/// (built here from the stack's variables, as Lambda starts it) finds what the worker sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_poll_function_finds_what_the_submit_function_sent_to_the_sandbox() {
    let app = spawn_aws_app().await;
    let variables: std::collections::HashMap<_, _> = app.settings.to_vars().into_iter().collect();
    let settings = ops_runtime::deployment::Settings::from_vars(|name| variables.get(name).cloned()).unwrap();
    assert!(settings.sandbox_rail, "a test stack serves the sandbox");
    let (poll_function, _) = settings.service_with(&app.config, app.clock.clone()).await.unwrap();

    let customer = app.create_customer().await;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[15_000, 15_005]),
        )
        .await
        .id();
    for _ in 0..8 {
        for trigger in Trigger::ALL.into_iter().filter(|t| *t != Trigger::StatusPoll) {
            while app.driver.round(trigger).await.unwrap() > 0 {}
        }
        poll_function.poll_rails().await.unwrap();
        app.clock.advance(Duration::seconds(30));
    }
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{operation}");
    let ledger = app.parts.sandbox.as_ref().unwrap().entries().await;
    assert_eq!(ledger.len(), 2);
    assert!(
        ledger.iter().all(|e| e.submit_calls == 1 && e.status_calls >= 1),
        "{ledger:?}"
    );
}

/// The outbox's kill test. A change of one operation, transaction or work item is
/// one write of the entity, carrying its events and audit entries, which the writer writes
/// next. Here every writer dies right after the entity's write (`keep` = 0), or after the
/// first of the rest (`keep` = 1): the stream's outbox consumer alone writes what is missing.
/// The payout still runs to the end, its approvals item opens and closes, and every event and
/// audit entry exists once, is delivered once, and a consumer that reads the whole stream
/// again writes nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payout_completes_when_every_writer_dies_after_its_entity() {
    for keep in [0, 1] {
        let app = spawn_aws_app().await;
        let customer = app.create_customer().await;
        let receiver = Receiver::start(0).await;
        app.subscribe(&customer.key, &receiver.url, &["*"]).await;
        let approver = app
            .add_member(&customer, &["approver"], &["operations:approve", "operations:read"])
            .await;
        app.parts.store.faults().crash_after_entity_writes(keep);
        let id = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[10_000]),
            )
            .await
            .id();
        let history_of = || async {
            let history = app
                .get(&format!("/v1/operations/{id}/history"), &customer.key)
                .await
                .json();
            // The operation's and its transactions' entries (the desk's work items add theirs).
            let entries: Vec<serde_json::Value> = history["data"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["entity_type"] == "operation" || e["entity_type"] == "transaction")
                .cloned()
                .collect();
            entries
        };
        let events_of = || async {
            let events = app.get("/v1/events?limit=100", &customer.key).await.json();
            let ids: Vec<String> = events["data"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["data"]["operation_id"] == id.as_str())
                .map(|e| e["type"].as_str().unwrap().to_owned())
                .collect();
            ids
        };
        // The approvals item's entries: the desk writes it with an outbox as well.
        let desk_history = || async {
            let history = app.history(&format!("/v1/operations/{id}"), &customer.key).await;
            let mut actions: Vec<String> = history
                .iter()
                .filter(|e| e["entity_type"] == "work_item")
                .map(|e| e["action"].as_str().unwrap().to_owned())
                .collect();
            actions.sort();
            actions
        };
        // The writer died after the operation: its events are not written, nor (keep = 0) its
        // audit entry.
        assert_eq!(history_of().await.len(), keep, "keep {keep}");
        assert!(events_of().await.is_empty(), "keep {keep}");
        let (app_ref, key) = (&app, &customer.key);
        let found_by = move |lookup: String| async move {
            let found = app_ref.get(&format!("/v1/operations?{lookup}"), key).await.json();
            let ids: Vec<String> = found["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_owned())
                .collect();
            ids
        };
        assert!(
            found_by("beneficiary_id=7654321-0".into()).await.is_empty(),
            "keep {keep}: the lookup's entries went with the writer"
        );
        // The outbox consumer writes the operation's events; the desk then opens the approvals
        // item and dies after it too: the item is there, its entry not (keep = 0), its event not.
        while app.driver.round(Trigger::Outbox).await.unwrap() > 0 {}
        assert_eq!(
            found_by("beneficiary_id=7654321-0".into()).await,
            [id.to_string()],
            "keep {keep}"
        );
        assert_eq!(
            found_by("item_reference=salary%200".into()).await,
            [id.to_string()],
            "keep {keep}"
        );
        while app.driver.round(Trigger::Stream(StreamConsumer::Desk)).await.unwrap() > 0 {}
        let open = app
            .get("/v1/work_items?queue=approvals&status=open", &customer.key)
            .await
            .json();
        assert_eq!(open["data"].as_array().map(Vec::len), Some(1), "keep {keep}: {open}");
        assert_eq!(desk_history().await.len(), keep, "keep {keep}");
        let events = app.get("/v1/events?limit=100", &customer.key).await.json();
        let desk_events = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("work_item.")))
            .count();
        assert_eq!(desk_events, 0, "keep {keep}");
        app.settle(Duration::seconds(1), 1).await;
        assert_eq!(
            history_of().await.len(),
            1,
            "the outbox consumer wrote the entry, keep {keep}"
        );
        let approved = app
            .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
            .await;
        assert_eq!(approved.json()["status"], "approved", "keep {keep}");

        app.settle(Duration::seconds(30), 6).await;
        let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
        assert_eq!(operation["status"], "completed", "keep {keep}: {operation}");
        let expected = [
            "operation.created",
            "operation.pending_approval",
            "operation.approved",
            "operation.processing",
            "transaction.pending",
            "transaction.submitted",
            "transaction.confirmed",
            "operation.completed",
        ];
        // The payout's own events (the desk's work item adds its `work_item.*`).
        let delivered = || {
            let mut types: Vec<String> = receiver
                .received()
                .iter()
                .map(|r| r.json()["type"].as_str().unwrap().to_owned())
                .filter(|t| t.starts_with("operation.") || t.starts_with("transaction."))
                .collect();
            types.sort();
            types
        };
        let mut all = expected.map(String::from).to_vec();
        all.sort();
        assert_eq!(delivered(), all, "each event delivered once, keep {keep}");
        let desk_delivered = || {
            let mut types: Vec<String> = receiver
                .received()
                .iter()
                .map(|r| r.json()["type"].as_str().unwrap().to_owned())
                .filter(|t| t.starts_with("work_item."))
                .collect();
            types.sort();
            types
        };
        assert_eq!(desk_history().await, ["closed", "opened"], "keep {keep}");
        assert_eq!(
            desk_delivered(),
            ["work_item.closed", "work_item.opened"],
            "keep {keep}"
        );
        let received = receiver.received().len();
        let mut listed = events_of().await;
        listed.sort();
        assert_eq!(listed, all, "each event stored once, keep {keep}");
        let history = history_of().await;
        assert_eq!(history.len(), expected.len() - 1, "one entry a change, keep {keep}");
        let transactions = app
            .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
            .await
            .json();
        let rail_reference = transactions["data"][0]["rail_reference"].as_str().unwrap();
        assert_eq!(
            found_by(format!("rail_reference={rail_reference}")).await,
            [id.to_string()],
            "keep {keep}: the submission's entry, written by the outbox consumer"
        );

        // The whole stream read again, as after a consumer's crash: nothing more is written.
        let again = app.parts.driver(&app.config, app.service.clone()).await.unwrap();
        while again.round(Trigger::Outbox).await.unwrap() > 0 {}
        app.settle(Duration::seconds(30), 2).await;
        assert_eq!(history_of().await, history, "keep {keep}");
        assert_eq!(desk_history().await, ["closed", "opened"], "keep {keep}");
        let mut listed = events_of().await;
        listed.sort();
        assert_eq!(listed, all, "keep {keep}");
        assert_eq!(
            receiver.received().len(),
            received,
            "nothing delivered again, keep {keep}"
        );
        let ledger = app.parts.sandbox.as_ref().unwrap().entries().await;
        assert!(ledger.iter().all(|e| e.submit_calls == 1), "{ledger:?}");
    }
}

/// Return checks are sweeps over a rail's confirmations by time (a check used to
/// move the transaction's entry in the poll schedule, three write units each). The rail is
/// asked at every check, a return is found by the first, and a transaction that stays
/// confirmed is not written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn return_checks_ask_the_rail_and_write_only_a_return() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[16_000, 16_006]),
        )
        .await
        .id();
    let transaction = |amount: i64| {
        let app = &app;
        let (key, id) = (&customer.key, &id);
        async move {
            let list = app
                .get(&format!("/v1/transactions?operation_id={id}"), key)
                .await
                .json();
            let data = list["data"].as_array().unwrap_or_else(|| panic!("{list}")).clone();
            data.into_iter().find(|t| t["amount"] == amount).unwrap()
        }
    };
    // Submitted and confirmed, before the first check is due (a minute after).
    for _ in 0..10 {
        app.settle(Duration::seconds(5), 1).await;
    }
    let confirmed = transaction(16_000).await;
    assert_eq!(confirmed["status"], "confirmed", "{confirmed}");

    for wait in [
        Duration::minutes(1),
        Duration::minutes(10),
        Duration::hours(1),
        Duration::hours(24),
    ] {
        app.settle(wait, 2).await;
    }
    let returned = transaction(16_006).await;
    assert_eq!(
        (returned["status"].as_str(), returned["cause"]["code"].as_str()),
        (Some("returned"), Some("rail_returned_beneficiary_returned")),
        "{returned}"
    );
    assert_eq!(transaction(16_000).await, confirmed, "the checks wrote nothing to it");
    let ledger = app.parts.sandbox.as_ref().unwrap().entries().await;
    let asked = |amount: i64| ledger.iter().find(|e| e.amount == amount).unwrap().status_calls;
    assert_eq!(
        asked(16_000),
        1 + 4,
        "confirmed by the first status call, then the four checks"
    );
    assert_eq!(asked(16_006), 2, "returned at the first check, and not asked again");

    // A rail quiet for more than a day: each sweep moves up to its window's end, not to stay
    // where the last confirmation was and read through ever more days.
    app.settle(Duration::days(2), 2).await;
    let now = app.clock.now();
    for (check, wait) in ops_domain::transactions::RETURN_CHECKS.iter().enumerate() {
        let sweep = app
            .parts
            .store
            .return_sweep("psp-local:sandbox", check)
            .await
            .unwrap()
            .unwrap();
        assert!(
            now - *wait - sweep.confirmed_at < Duration::days(3),
            "check {check} is at {}",
            sweep.confirmed_at
        );
    }
}

/// An event is an item of the platform's list (its shard's partition, sorted by id), so only
/// its customer's list is an index entry. An event written before that, at its own key and
/// listed by the platform's index, still reads by id and shows in both lists, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_written_at_their_former_key_still_read_and_list() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    app.post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[1_000]))
        .await;
    app.settle(Duration::seconds(1), 1).await;
    let newer = app.get("/v1/events", &acme.key).await.json();
    let newer: Vec<serde_json::Value> = newer["data"].as_array().unwrap().clone();
    assert!(!newer.is_empty(), "the payout's events are written");

    // The oldest possible id, in the form and at the keys of before.
    let mut former = newer[0].clone();
    let id = "evt_00000000000000000000000000";
    former["id"] = json!(id);
    let s = |text: &str| AttributeValue::S(text.to_owned());
    aws_sdk_dynamodb::Client::new(&app.config)
        .put_item()
        .table_name(&app.settings.table)
        .item("PK", s(&format!("EVT#{id}")))
        .item("SK", s("EVT"))
        .item("entity", s("event"))
        .item("doc", s(&former.to_string()))
        .item("type", s(former["type"].as_str().unwrap()))
        .item("GSI1PK", s(&format!("CUSEVTS#{}", acme.id)))
        .item("GSI1SK", s(id))
        .item("GSI3PK", s("EVTS#0"))
        .item("GSI3SK", s(id))
        .send()
        .await
        .unwrap();

    assert_eq!(app.get(&format!("/v1/events/{id}"), &acme.key).await.json(), former);
    let expected: Vec<String> = newer
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .chain([id.to_owned()])
        .collect();
    assert_eq!(ids(app.get("/v1/events?limit=100", &acme.key).await.json()), expected);
    let platform = ids(app.get("/v1/events?limit=100", ADMIN_KEY).await.json());
    assert_eq!(
        platform, expected,
        "the platform's list: the shards' items, then the former entry"
    );
    let page = ids(app
        .get(&format!("/v1/events?limit=2&starting_after={}", expected[0]), ADMIN_KEY)
        .await
        .json());
    assert_eq!(page, expected[1..].iter().take(2).cloned().collect::<Vec<_>>());
}

/// A `type` filter reads a bounded stretch of a list a request (it is not a key): a page may
/// come back short, even empty, with `has_more` and the `next_starting_after` to go on from,
/// and following the pages finds every event of the type once, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_type_filtered_page_may_stop_short_and_says_where_to_go_on() {
    let app = spawn_aws_app().await;
    app.parts.store.limit_filtered_reads(2);
    let acme = app.create_customer().await;
    for _ in 0..3 {
        app.post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[1_000]))
            .await;
    }
    app.settle(Duration::seconds(1), 1).await;
    let every = app.get("/v1/events?limit=100", &acme.key).await.json();
    let expected: Vec<String> = every["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "operation.created")
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(expected.len(), 3, "{every:#}");

    let (mut found, mut after, mut stopped_short) = (Vec::<String>::new(), String::new(), false);
    for page in 0.. {
        assert!(page < 50, "paging does not end");
        let mut path = "/v1/events?type=operation.created&limit=10".to_owned();
        if !after.is_empty() {
            path.push_str(&format!("&starting_after={after}"));
        }
        let page = app.get(&path, &acme.key).await.json();
        let ids: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        found.extend(ids.iter().cloned());
        if page["has_more"] != json!(true) {
            assert!(page.get("next_starting_after").is_none(), "{page:#}");
            break;
        }
        after = match page["next_starting_after"].as_str() {
            Some(next) => {
                stopped_short = true;
                next.to_owned()
            }
            None => ids.last().cloned().expect("a full page has items"),
        };
    }
    assert_eq!(found, expected);
    assert!(stopped_short, "a page stopped at the read budget");
}

/// An operation approved before approved operations were kept in processing's status lists
/// is still in approved's own, under its keys of then: approved's lists find it there (the
/// customer's and the platform's), processing's does not, and the board gives its age; its
/// next move takes it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operation_left_in_approveds_former_list_is_still_listed_as_approved() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let approver = app.add_member(&acme, &["approver"], &["operations:approve"]).await;
    let made = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[1_000]))
        .await;
    let id = made.id();
    let approved = app
        .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(approved.status, 200, "{}", approved.json());

    let dynamo = aws_sdk_dynamodb::Client::new(&app.config);
    let s = |text: &str| AttributeValue::S(text.to_owned());
    let key = [("PK", s(&format!("OP#{id}"))), ("SK", s("OP"))];
    let mut get = dynamo.get_item().table_name(&app.settings.table);
    for (name, value) in key.clone() {
        get = get.key(name, value);
    }
    let item = get.send().await.unwrap().item.expect("the operation's item");
    let platform_list = item["GSI4PK"].as_s().unwrap().clone();
    assert!(platform_list.starts_with("OPSTATUS#processing#"), "{platform_list}");
    let mut update = dynamo
        .update_item()
        .table_name(&app.settings.table)
        .update_expression("SET GSI2PK = :customer, GSI4PK = :platform")
        .expression_attribute_values(":customer", s(&format!("CUSOPST#{}#approved", acme.id)))
        .expression_attribute_values(":platform", s(&platform_list.replace("#processing#", "#approved#")));
    for (name, value) in key {
        update = update.key(name, value);
    }
    update.send().await.unwrap();

    for key in [&acme.key, ADMIN_KEY] {
        let listed = app.get("/v1/operations?status=approved", key).await.json();
        assert_eq!(ids(listed), std::slice::from_ref(&id), "{key}");
        let listed = app.get("/v1/operations?status=processing", key).await.json();
        assert!(!ids(listed).contains(&id), "{key}");
    }
    // The board counts it (the desk's consumer alone: the pipeline would move it on).
    while app.driver.round(Trigger::Stream(StreamConsumer::Desk)).await.unwrap() > 0 {}
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(board["in_progress"]["count"], 1, "{board:#}");
    assert!(board["in_progress"]["oldest_age_seconds"].is_i64(), "{board:#}");

    app.settle(Duration::seconds(1), 2).await;
    let listed = app.get("/v1/operations?status=approved", &acme.key).await.json();
    assert!(ids(listed).is_empty(), "it moved on");
}

/// The ids of a list's page, in its order.
fn ids(list: serde_json::Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// `/health` answers for the store: 200 while DynamoDB answers, 503 once its table is gone;
/// a request that cannot reach the store is a 500 that says to retry under the same key, with
/// nothing of the store's error in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_and_requests_say_when_the_store_does_not_answer() {
    let app = spawn_aws_app().await;
    let health = || async {
        let reply = app
            .api
            .client
            .get(format!("{}/health", app.api.base))
            .send()
            .await
            .unwrap();
        (
            reply.status().as_u16(),
            reply.json::<serde_json::Value>().await.unwrap(),
        )
    };
    assert_eq!(health().await, (200, json!({"status": "ok"})));

    aws_sdk_dynamodb::Client::new(&app.config)
        .delete_table()
        .table_name(&app.settings.table)
        .send()
        .await
        .unwrap();
    assert_eq!(health().await, (503, json!({"status": "unavailable"})));
    let failed = app.get("/v1/operations", ADMIN_KEY).await;
    let error = failed.error(500);
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("api_error"), Some("internal_error")),
        "{error}"
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("Something went wrong on our side. Retry with the same Idempotency-Key"),
        "{message}"
    );
    assert!(!message.contains(&app.settings.table), "{message}");
}
