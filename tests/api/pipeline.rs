use ops_domain::ports::{Changeset, Clock, Commit, QueueName, Write};
use ops_domain::transactions::{TransactionStatus, TransactionStore};
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::receiver::{signature_is_valid, Receiver};
use ops_tests::{payout, spawn_app, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use time::Duration;

async fn endpoint(app: &TestApp, key: &str, url: &str) -> String {
    let secret = app.subscribe(key, url, &["*"]).await["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(secret.starts_with("whsec_"));
    secret
}

async fn transactions(app: &TestApp, key: &str, operation_id: &str) -> Vec<Value> {
    let list = app
        .get(&format!("/v1/transactions?operation_id={operation_id}"), key)
        .await
        .json();
    list["data"].as_array().unwrap_or_else(|| panic!("{list}")).clone()
}

async fn all_events(app: &TestApp, key: &str) -> Vec<Value> {
    let mut events = vec![];
    let mut after = String::new();
    loop {
        let page = app.get(&format!("/v1/events?limit=100{after}"), key).await.json();
        let data = page["data"].as_array().unwrap().clone();
        after = format!(
            "&starting_after={}",
            data.last().map(|e| e["id"].as_str().unwrap()).unwrap_or("")
        );
        events.extend(data);
        if page["has_more"] != true {
            return events;
        }
    }
}

#[tokio::test]
async fn every_magic_amount_reaches_its_documented_outcome_and_every_event_arrives_signed() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let secret = endpoint(&app, &customer.key, &receiver.url).await;

    // Ending → (final transaction status, cause code of that status).
    let outcomes: [(i64, &str, &str); 7] = [
        (10_000, "confirmed", "confirmed_by_rail"),
        (10_001, "failed", "rail_rejected_account_closed"),
        (10_002, "failed", "rail_failed_insufficient_funds"),
        (10_003, "confirmed", "confirmed_by_rail"),
        (10_004, "confirmed", "confirmed_by_rail"),
        (10_005, "confirmed", "confirmed_by_rail"),
        (10_006, "returned", "rail_returned_beneficiary_returned"),
    ];
    let amounts: Vec<i64> = outcomes.iter().map(|o| o.0).collect();
    let operation = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &amounts))
        .await
        .json();
    let id = operation["id"].as_str().unwrap();
    app.settle(Duration::seconds(30), 20).await;

    let txns = transactions(&app, &customer.key, id).await;
    assert_eq!(txns.len(), outcomes.len(), "one transaction per item");
    for (amount, status, cause) in outcomes {
        let txn = txns.iter().find(|t| t["amount"] == amount).unwrap();
        assert_eq!(
            (txn["status"].as_str(), txn["cause"]["code"].as_str()),
            (Some(status), Some(cause)),
            "amount {amount}: {txn}"
        );
    }
    let by_amount = |amount: i64| txns.iter().find(|t| t["amount"] == amount).unwrap().clone();
    assert_eq!(
        by_amount(10_003)["submit_attempts"],
        3,
        "two transient errors, then accepted"
    );
    assert!(
        by_amount(10_005)["status_polls"].as_u64().unwrap() >= 4,
        "late confirmation came by polling"
    );

    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "partially_completed");
    assert_eq!(operation["cause"]["code"], "some_transactions_failed");
    assert!(operation["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["transaction_id"].as_str().unwrap().starts_with("txn_")));

    // The unknown one went through `unknown` and was resolved by asking, never by resending.
    let history = app
        .get(&format!("/v1/operations/{id}/history"), &customer.key)
        .await
        .json();
    let timeout_txn = by_amount(10_004)["id"].as_str().unwrap().to_owned();
    let path: Vec<&str> = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["entity_id"] == timeout_txn.as_str())
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert_eq!(path, ["pending", "unknown", "confirmed"]);
    for entry in history["data"].as_array().unwrap() {
        assert!(
            entry["cause"]["code"].is_string() && entry["cause"]["actor"]["type"].is_string(),
            "{entry}"
        );
    }
    let ledger = app.sandbox().await;
    assert!(ledger.iter().all(|e| e.duplicate_submits == 0), "{ledger:?}");
    let timed_out = ledger.iter().find(|e| e.transaction_id == timeout_txn).unwrap();
    assert_eq!(timed_out.submit_calls, 1, "an unknown outcome is never resubmitted");

    // Every event of the customer reached the receiver, signed with the endpoint's secret.
    let events = all_events(&app, &customer.key).await;
    let received = receiver.received();
    for delivery in &received {
        assert!(
            signature_is_valid(&delivery.signature, &delivery.body, &secret),
            "bad signature: {}",
            delivery.signature
        );
    }
    let received_ids: BTreeSet<String> = received
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    let event_ids: BTreeSet<String> = events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(received_ids, event_ids);
    let confirmed = received
        .iter()
        .map(|r| r.json())
        .find(|e| e["type"] == "transaction.confirmed")
        .expect("a transaction.confirmed event");
    for field in [
        "transaction_id",
        "operation_id",
        "rail",
        "rail_reference",
        "amount",
        "currency",
    ] {
        assert!(
            !confirmed["data"][field].is_null(),
            "transaction.confirmed lacks {field}: {confirmed}"
        );
    }
    assert_eq!(
        (
            confirmed["object"].as_str(),
            confirmed["api_version"].as_str(),
            confirmed["environment"].as_str()
        ),
        (Some("event"), Some("v1"), Some("test"))
    );
    let types: BTreeSet<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for expected in [
        "operation.created",
        "operation.approved",
        "operation.processing",
        "operation.partially_completed",
        "transaction.pending",
        "transaction.submitted",
        "transaction.unknown",
        "transaction.confirmed",
        "transaction.failed",
        "transaction.returned",
    ] {
        assert!(types.contains(expected), "no {expected} in {types:?}");
    }
}

#[tokio::test]
async fn retries_run_out_into_needs_attention_and_an_operator_resolves_it() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[20_007, 20_008]),
        )
        .await
        .id();
    app.settle(Duration::seconds(30), 20).await;
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(
        (operation["status"].as_str(), operation["cause"]["code"].as_str()),
        (Some("needs_attention"), Some("transaction_needs_attention"))
    );
    let txns = transactions(&app, &customer.key, &id).await;
    let busy = txns.iter().find(|t| t["amount"] == 20_007).unwrap();
    let lost = txns.iter().find(|t| t["amount"] == 20_008).unwrap();
    assert_eq!(
        (busy["status"].as_str(), busy["cause"]["code"].as_str()),
        (Some("needs_attention"), Some("submit_retries_exhausted"))
    );
    assert_eq!(busy["submit_attempts"], 5);
    assert_eq!(
        (lost["status"].as_str(), lost["cause"]["code"].as_str()),
        (Some("needs_attention"), Some("rail_has_no_record"))
    );

    // Operator actions need the platform; a possibly-submitted transaction cannot be retried.
    let busy_id = busy["id"].as_str().unwrap();
    let lost_id = lost["id"].as_str().unwrap();
    assert_eq!(
        app.post(&format!("/v1/transactions/{busy_id}/retry"), &customer.key, json!({}))
            .await
            .error(403)["code"],
        "operator_required"
    );
    let unsafe_retry = app
        .post(&format!("/v1/transactions/{lost_id}/retry"), ADMIN_KEY, json!({}))
        .await;
    assert_eq!(unsafe_retry.error(409)["code"], "possibly_submitted");
    let retried = app
        .post(
            &format!("/v1/transactions/{busy_id}/retry"),
            ADMIN_KEY,
            json!({"reason": "rail back up"}),
        )
        .await
        .json();
    assert_eq!(
        (retried["status"].as_str(), retried["cause"]["code"].as_str()),
        (Some("pending"), Some("operator_retry"))
    );
    let bad = app
        .post(
            &format!("/v1/transactions/{lost_id}/resolve"),
            ADMIN_KEY,
            json!({"status": "paid", "reason": "x"}),
        )
        .await;
    assert_eq!(bad.error(400)["param"], "status");
    let resolved = app
        .post(
            &format!("/v1/transactions/{lost_id}/resolve"),
            ADMIN_KEY,
            json!({"status": "failed", "reason": "rail confirms it never arrived"}),
        )
        .await
        .json();
    assert_eq!(
        (resolved["status"].as_str(), resolved["cause"]["actor"]["type"].as_str()),
        (Some("failed"), Some("operator"))
    );
    app.settle(Duration::seconds(30), 20).await;
    // The retried one keeps failing (its amount always gets transient errors), so the
    // operation is back to needs_attention, with the resolution on record.
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "needs_attention");
    let history = app
        .get(&format!("/v1/operations/{id}/history"), &customer.key)
        .await
        .json();
    let codes: Vec<&str> = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cause"]["code"].as_str().unwrap())
        .collect();
    for code in ["operator_retry", "operator_resolution", "transactions_in_progress"] {
        assert!(codes.contains(&code), "{code} missing from {codes:?}");
    }
}

#[tokio::test]
async fn a_receiver_that_is_down_for_a_while_still_gets_every_event_and_attempts_are_logged() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(10).await;
    let secret = endpoint(&app, &customer.key, &receiver.url).await;
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[30_000]))
        .await
        .id();
    app.settle(Duration::seconds(30), 10).await;
    assert!(receiver.requests() >= 7, "first attempts were made");
    // The retry schedule is 1 m, 5 m, 30 m …: move the clock through it.
    app.settle(Duration::minutes(10), 12).await;

    let events = all_events(&app, &customer.key).await;
    let received: BTreeMap<String, usize> = receiver.received().iter().fold(BTreeMap::new(), |mut seen, r| {
        assert!(signature_is_valid(&r.signature, &r.body, &secret));
        *seen.entry(r.json()["id"].as_str().unwrap().to_owned()).or_default() += 1;
        seen
    });
    assert_eq!(received.len(), events.len(), "every event arrived");
    assert_eq!(
        app.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
        "completed"
    );
    let mut failed_attempts = 0;
    for event in &events {
        let deliveries = app.deliveries(&customer.key, event["id"].as_str().unwrap()).await;
        let delivery = &deliveries[0];
        assert_eq!(delivery["status"], "delivered", "{delivery}");
        let attempts = delivery["attempts"].as_array().unwrap();
        assert_eq!(attempts.last().unwrap()["status_code"], 200);
        failed_attempts += attempts.iter().filter(|a| a["status_code"] == 503).count();
    }
    assert_eq!(failed_attempts, 10, "each refused request is in the delivery log");
}

#[tokio::test]
async fn secret_rotation_signs_with_both_secrets_during_the_overlap_and_resend_delivers_again() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let created = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    let (endpoint_id, old_secret) = (
        created["id"].as_str().unwrap().to_owned(),
        created["secret"].as_str().unwrap().to_owned(),
    );
    assert!(created.get("_secrets").is_none(), "secret names are not shown");
    let rotated = app
        .post(
            &format!("/v1/webhook_endpoints/{endpoint_id}/rotate_secret"),
            &customer.key,
            json!({"expires_in": 3600}),
        )
        .await
        .json();
    let new_secret = rotated["secret"].as_str().unwrap().to_owned();
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    app.drain().await;
    let first = receiver.received();
    assert_eq!(first.len(), 1, "only the subscribed type");
    assert_eq!(first[0].signature.matches("v1=").count(), 2);
    assert!(signature_is_valid(&first[0].signature, &first[0].body, &old_secret));
    assert!(signature_is_valid(&first[0].signature, &first[0].body, &new_secret));

    // After the overlap only the new secret signs; a resend makes a fresh delivery.
    app.clock.advance(Duration::hours(2));
    let event_id = first[0].json()["id"].as_str().unwrap().to_owned();
    let resent = app
        .post(&format!("/v1/events/{event_id}/resend"), &customer.key, json!({}))
        .await;
    assert_eq!(resent.status, 200, "{}", resent.json());
    app.drain().await;
    let second = receiver.received();
    assert_eq!(second.len(), 2);
    assert_eq!(second[1].body, first[0].body, "the same event");
    assert_eq!(second[1].signature.matches("v1=").count(), 1);
    assert!(signature_is_valid(&second[1].signature, &second[1].body, &new_secret));
    assert!(!signature_is_valid(&second[1].signature, &second[1].body, &old_secret));
    assert_eq!(app.deliveries(&customer.key, &event_id).await.len(), 2);
}

#[tokio::test]
async fn webhook_endpoints_are_validated_and_scoped() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    for (body, param) in [
        (json!({}), "url"),
        (json!({"url": "ftp://x"}), "url"),
        (json!({"url": "http://127.0.0.1/x#section"}), "url"),
        (json!({"url": "http://127.0.0.1/x#"}), "url"),
        (json!({"url": "http://127.0.0.1/x", "events": []}), "events"),
        (
            json!({"url": "http://127.0.0.1/x", "events": ["payment.made"]}),
            "events[0]",
        ),
    ] {
        assert_eq!(
            app.post("/v1/webhook_endpoints", &customer.key, body.clone())
                .await
                .error(400)["param"],
            param,
            "{body}"
        );
    }
    let reader = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        app.post("/v1/webhook_endpoints", &reader, json!({"url": "http://127.0.0.1/x"}))
            .await
            .error(403)["code"],
        "missing_scope"
    );
}

#[tokio::test]
async fn signed_rail_reports_update_transactions_and_unsigned_ones_are_refused() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // Late confirmation: the rail reports it before any poll would see it.
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[40_005]))
        .await
        .id();
    app.drain().await;
    let txn = transactions(&app, &customer.key, &id).await[0].clone();
    assert_eq!(txn["status"], "submitted");
    let body = serde_json::to_vec(&json!({"id": "rpt_1", "rail": "psp-local:sandbox", "transaction_id": txn["id"], "state": "confirmed", "rail_reference": txn["rail_reference"]})).unwrap();
    let url = format!("{}/v1/rail_reports", app.base);
    let signature = ops_tests::sign_rail_report(&app.clock, &body);

    let unsigned = app.client.post(&url).body(body.clone()).send().await.unwrap();
    assert_eq!(unsigned.status(), 401);
    let forged = app
        .client
        .post(&url)
        .header("X-Service-Signature", signature.replace("v1=", "v1=0"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let accepted = app
        .client
        .post(&url)
        .header("X-Service-Signature", &signature)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    let reported: Value = accepted.json().await.unwrap();
    assert_eq!(
        (reported["status"].as_str(), reported["cause"]["code"].as_str()),
        (Some("confirmed"), Some("confirmed_by_rail"))
    );
    assert!(reported["cause"]["message"].as_str().unwrap().contains("rpt_1"));
    // The same report again changes nothing.
    let again = app
        .client
        .post(&url)
        .header("X-Service-Signature", &signature)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    app.drain().await;
    let history = app
        .get(&format!("/v1/operations/{id}/history"), &customer.key)
        .await
        .json();
    let confirmations = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["to"] == "confirmed")
        .count();
    assert_eq!(confirmations, 1);
    assert_eq!(
        app.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
        "completed"
    );
}

#[tokio::test]
async fn a_delivery_that_never_succeeds_is_failed_after_the_whole_schedule() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(usize::MAX).await;
    app.subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    // 1 m + 5 m + 30 m + 2 h + 5 h + 10 h + 10 h + 24 h, each up to 10 % longer, in steps of an
    // hour: at most 61 steps; 80 leave room.
    app.settle(Duration::hours(1), 80).await;
    let event = &all_events(&app, &customer.key)
        .await
        .into_iter()
        .find(|e| e["type"] == "operation.created")
        .unwrap();
    let deliveries = app.deliveries(&customer.key, event["id"].as_str().unwrap()).await;
    let delivery = &deliveries[0];
    assert_eq!(delivery["status"], "failed", "{delivery}");
    assert_eq!(
        delivery["attempts"].as_array().unwrap().len(),
        9,
        "the first try and eight retries"
    );
    assert!(delivery["next_attempt_at"].is_null());
    assert_eq!(receiver.requests(), 9);
}

#[tokio::test]
async fn a_slow_receiver_times_out_and_gets_the_event_on_a_later_attempt() {
    let app = ops_tests::spawn_app_with(|config| config.webhook_timeout_ms = 300).await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    receiver.slow_first(1);
    app.subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    app.drain().await;
    let event = all_events(&app, &customer.key)
        .await
        .into_iter()
        .find(|e| e["type"] == "operation.created")
        .unwrap();
    let event_id = event["id"].as_str().unwrap();
    let first = app.deliveries(&customer.key, event_id).await;
    let attempt = &first[0]["attempts"][0];
    assert!(
        attempt["status_code"].is_null() && attempt["error"].as_str().unwrap().contains("no answer"),
        "{attempt}"
    );
    assert_eq!(first[0]["status"], "pending");
    app.settle(Duration::minutes(2), 2).await;
    let delivery = &app.deliveries(&customer.key, event_id).await[0];
    assert_eq!(delivery["status"], "delivered", "{delivery}");
    assert_eq!(delivery["attempts"].as_array().unwrap().len(), 2);
    // The slow answer may still have arrived: delivery is at least once, never lost.
    tokio::time::sleep(ops_tests::receiver::SLOW).await;
    let arrivals = receiver
        .received()
        .iter()
        .filter(|r| r.json()["id"] == event["id"])
        .count();
    assert!((1..=2).contains(&arrivals), "{arrivals}");
}

/// A batch keeps ten posts open and starts the next as one ends: a receiver that hangs keeps
/// one place, and the rest of its batch is sent meanwhile (not after the hang times out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_hangs_keeps_one_place_and_the_rest_of_its_batch_is_sent_meanwhile() {
    let app = ops_tests::spawn_app_with(|config| config.webhook_timeout_ms = 60_000).await;
    let customer = app.create_customer().await;
    let hanging = Receiver::start(0).await;
    hanging.hang_first(1);
    let answering = Receiver::start(0).await;
    for receiver in [&hanging, &answering] {
        app.subscribe(&customer.key, &receiver.url, &["operation.created"])
            .await;
    }
    for _ in 0..6 {
        app.post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[5_000]),
        )
        .await;
    }
    let dispatch = Trigger::Stream(StreamConsumer::WebhookDispatch);
    while app.driver().round(dispatch).await.unwrap() > 0 {}
    // Twelve deliveries in one round (local mode takes fifty), the one that hangs among the
    // first ten: every other one arrives while it still hangs.
    let round = app.driver().round(Trigger::Queue(QueueName::Webhooks));
    let others_arrived = async {
        while hanging.received().len() + answering.received().len() < 11 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = others_arrived => {}
        handled = round => panic!("the round ended ({handled:?}) before the other deliveries arrived"),
        _ = tokio::time::sleep(std::time::Duration::from_secs(20)) => panic!(
            "{} of the other 11 deliveries arrived while one receiver hung",
            hanging.received().len() + answering.received().len()
        ),
    }
    assert_eq!(
        hanging.requests(),
        6,
        "the hanging receiver's one request and its five others"
    );
}

/// Two customers, one whose receiver hangs and one whose receiver answers, on a service whose
/// webhook timeout is two seconds (and no rate limit: these tests create hundreds).
struct HangingAndAnswering {
    app: TestApp,
    gone: ops_tests::Customer,
    other: ops_tests::Customer,
    hanging: Receiver,
    answering: Receiver,
}

const SHORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
const SEND: Trigger = Trigger::Queue(QueueName::Webhooks);

impl HangingAndAnswering {
    async fn start() -> HangingAndAnswering {
        let app = ops_tests::spawn_app_with(|config| {
            config.webhook_timeout_ms = SHORT_TIMEOUT.as_millis() as u64;
            config.rate_limit = 0;
        })
        .await;
        let (gone, other) = (app.create_customer().await, app.create_customer().await);
        let hanging = Receiver::start(0).await;
        hanging.hang();
        let answering = Receiver::start(0).await;
        app.subscribe(&gone.key, &hanging.url, &["operation.created"]).await;
        app.subscribe(&other.key, &answering.url, &["operation.created"]).await;
        HangingAndAnswering {
            app,
            gone,
            other,
            hanging,
            answering,
        }
    }

    /// `count` payouts of `customer`'s, their deliveries queued.
    async fn create(&self, customer: &ops_tests::Customer, count: usize) {
        for _ in 0..count {
            let body = payout(&customer.id, "two_step", &[5_000]);
            self.app.post("/v1/operations", &customer.key, body).await.id();
        }
        let dispatch = Trigger::Stream(StreamConsumer::WebhookDispatch);
        while self.app.driver().round(dispatch).await.unwrap() > 0 {}
    }

    /// How long after `started` the answering receiver had `count` deliveries (at most five
    /// timeouts).
    async fn answered(&self, count: usize, started: std::time::Instant) -> std::time::Duration {
        while self.answering.received().len() < count && started.elapsed() < SHORT_TIMEOUT * 5 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        started.elapsed()
    }
}

/// A receiver that stops answering keeps two of the process's places (its probes), not all
/// of them: once one of its posts has timed out, its backlog waits with no attempt counted,
/// and another customer's deliveries behind it are sent at once instead of after its
/// timeouts. Nothing waits for ever: once the receiver answers, its backlog arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_stops_answering_does_not_hold_up_another_customers_deliveries() {
    let both = HangingAndAnswering::start().await;
    let (app, hanging, answering) = (&both.app, &both.hanging, &both.answering);
    both.create(&both.gone, 1).await;
    app.driver().round(SEND).await.unwrap();
    assert_eq!(hanging.requests(), 1, "its first post timed out");

    // Thirty of its deliveries queued ahead of five of another customer's, in one round of
    // fifty (ten posts open at a time).
    both.create(&both.gone, 30).await;
    both.create(&both.other, 5).await;
    // The round runs to its end (its probes' attempts are recorded) beside the watch.
    let started = std::time::Instant::now();
    let (handled, others_took) = tokio::join!(app.driver().round(SEND), both.answered(5, started));
    assert_eq!(handled.unwrap(), 35);
    assert_eq!(answering.received().len(), 5);
    assert!(
        others_took < SHORT_TIMEOUT * 3 / 4,
        "the other customer's deliveries took {others_took:?}, as long as the held receiver's posts took to time out"
    );
    while app.driver().round(SEND).await.unwrap() > 0 {}
    assert_eq!(hanging.requests(), 3, "only its two probes reached it");
    let events: Vec<Value> = all_events(app, &both.gone.key)
        .await
        .into_iter()
        .filter(|e| e["type"] == "operation.created")
        .collect();
    assert_eq!(events.len(), 31);
    let mut attempts = vec![];
    for event in &events {
        let delivery = &app.deliveries(&both.gone.key, event["id"].as_str().unwrap()).await[0];
        assert_eq!(delivery["status"], "pending", "{delivery}");
        attempts.push(delivery["attempts"].as_array().unwrap().len());
        // Each says when it is tried next: a minute away for those held back (the hold's
        // length), as for the probes whose attempt failed.
        let at = |field: &str| {
            time::OffsetDateTime::parse(
                delivery[field].as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap()
        };
        assert!(
            at("next_attempt_at") - at("created_at") > Duration::seconds(30),
            "{delivery}"
        );
    }
    assert_eq!(
        attempts.iter().filter(|n| **n == 0).count(),
        28,
        "the deliveries held back were not attempted: {attempts:?}"
    );

    // It answers again: its next probe ends the hold, and its backlog arrives.
    hanging.answer_again();
    app.settle(Duration::minutes(2), 3).await;
    for event in &events {
        let delivery = &app.deliveries(&both.gone.key, event["id"].as_str().unwrap()).await[0];
        assert_eq!(delivery["status"], "delivered", "{delivery}");
    }
    assert_eq!(hanging.received().len(), 31);
}

/// A receiver that hangs is held only once a post to it has timed out. Before that, its
/// backlog in local mode's concurrent senders could fill every place the process has; while
/// the process posts to more than one receiver it keeps places for the others, so another
/// customer's deliveries queued behind the backlog arrive at once, not after the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_hangs_with_a_backlog_leaves_places_for_others_before_it_times_out() {
    use ops_infra::webhook_sender::{holds::HELD_PLACES, holds::SHARE, MAX_OPEN_POSTS};
    let both = HangingAndAnswering::start().await;
    let (app, hanging, answering) = (&both.app, &both.hanging, &both.answering);
    // The process has just posted to the other receiver.
    both.create(&both.other, 1).await;
    app.driver().round(SEND).await.unwrap();
    assert_eq!(answering.received().len(), 1);

    // Four rounds of fifty of the hanging receiver's deliveries (ten posts open in each: all
    // of the process's places) queued ahead of five of the other customer's, taken by five
    // senders at once, as local mode's run side by side.
    both.create(&both.gone, 4 * 50).await;
    both.create(&both.other, 5).await;
    let started = std::time::Instant::now();
    let (handled, (others_took, hanging_by_then)) = tokio::join!(
        futures_util::future::join_all((0..5).map(|_| app.driver().round(SEND))),
        async {
            let took = both.answered(6, started).await;
            (took, hanging.requests())
        }
    );
    let handled: usize = handled.into_iter().map(Result::unwrap).sum();
    assert_eq!(handled, 205);
    assert_eq!(answering.received().len(), 6);
    assert!(
        others_took < SHORT_TIMEOUT * 3 / 4,
        "the other customer's deliveries took {others_took:?}, as long as the hanging receiver's posts took to time out"
    );
    assert!(
        hanging_by_then <= SHARE,
        "{hanging_by_then} posts to it: more than its share of the {MAX_OPEN_POSTS} places"
    );
    // Its share was taken, and the rest handed back. Once those time out it is held: a
    // round's deliveries still waiting for a place may probe it then, no more than a held
    // receiver's places.
    let posted = hanging.requests();
    assert!(
        (SHARE..=SHARE + HELD_PLACES).contains(&posted),
        "{posted} posts to it in all"
    );

    // It answers again: its backlog arrives, each delivery once.
    hanging.answer_again();
    app.settle(Duration::minutes(2), 3).await;
    assert_eq!(hanging.received().len(), 200);
}

/// A receiver away for longer than a delivery's retries would take: the deliveries it held
/// back (never attempted) fail then, as those attempted fail when their retries run out, each
/// with an attempt saying why and an exceptions item for an operator to resend; they are not
/// queued again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_held_back_for_longer_than_their_retries_take_fail_for_an_operator() {
    let both = HangingAndAnswering::start().await;
    let (app, hanging) = (&both.app, &both.hanging);
    both.create(&both.gone, 1).await;
    app.driver().round(SEND).await.unwrap();
    assert_eq!(hanging.requests(), 1, "its first post timed out");
    // Two probes, three held back.
    both.create(&both.gone, 5).await;
    app.driver().round(SEND).await.unwrap();
    assert_eq!(hanging.requests(), 3);

    // Still away when all six come round again, as long as their retries take: two more
    // probes (their attempts counted, their retries going on), and the four others fail.
    app.clock.advance(ops_domain::webhooks::RETRY_SPAN + Duration::hours(1));
    assert_eq!(app.driver().round(SEND).await.unwrap(), 6);
    assert_eq!(hanging.requests(), 5);
    let events: Vec<Value> = all_events(app, &both.gone.key)
        .await
        .into_iter()
        .filter(|e| e["type"] == "operation.created")
        .collect();
    let mut failed = vec![];
    for event in &events {
        let delivery = &app.deliveries(&both.gone.key, event["id"].as_str().unwrap()).await[0];
        if delivery["status"] == "failed" {
            let last = delivery["attempts"].as_array().unwrap().last().unwrap();
            assert!(
                last["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("not sent: its receiver had stopped answering"),
                "{delivery}"
            );
            assert!(delivery["next_attempt_at"].is_null(), "{delivery}");
            failed.push(delivery["id"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(delivery["status"], "pending", "{delivery}");
        }
    }
    assert_eq!(failed.len(), 4, "{events:?}");
    app.drain().await;
    let items = app.open_exceptions().await;
    let mut subjects: Vec<String> = items
        .iter()
        .filter(|item| item["kind"] == "webhook_delivery_failed")
        .map(|item| item["subject"]["id"].as_str().unwrap().to_owned())
        .collect();
    subjects.sort();
    failed.sort();
    assert_eq!(subjects, failed);
    let message = items[0]["cause"]["message"].as_str().unwrap();
    assert!(
        message.contains(" attempt")
            && message.contains("; the last answer was not sent: its receiver had stopped answering"),
        "{message}"
    );
}

/// The status poll runs once a minute in the cloud: one invocation takes round after round
/// until nothing is due, so a burst larger than one round is asked about at once, not a
/// hundred a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_status_poll_asks_about_every_due_transaction() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let burst = ops_domain::transactions::POLL_BATCH + 50;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &vec![10_000; burst]),
        )
        .await
        .id();
    let statuses = || async {
        let listed = app
            .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
            .await
            .json();
        let mut counts = BTreeMap::new();
        for transaction in listed["data"].as_array().unwrap() {
            *counts
                .entry(transaction["status"].as_str().unwrap().to_owned())
                .or_insert(0) += 1;
        }
        counts
    };
    // Made and submitted, with no status poll yet (those fall due 2 s after submission).
    let driver = app.driver();
    loop {
        let made = driver.round(Trigger::Stream(StreamConsumer::Transition)).await.unwrap();
        let submitted = driver.round(Trigger::Queue(QueueName::Submissions)).await.unwrap();
        if made + submitted == 0 {
            break;
        }
    }
    let waiting = statuses().await["submitted"];
    assert_eq!(waiting, burst, "{:?}", statuses().await);
    app.clock.advance(Duration::seconds(3));
    let answer = ops_runtime::triggers::status_poll(app.driver().service())
        .await
        .unwrap();
    assert_eq!(answer["polled"], waiting);
    assert_eq!(statuses().await, BTreeMap::from([("confirmed".to_owned(), burst)]));
    app.drain().await;
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{}", operation["cause"]);
}

/// A transaction confirmed while return checks were polls still sits in the poll schedule
/// with its next check: its next poll takes it out, and the sweeps ask about it from then on.
#[tokio::test]
async fn a_confirmed_transaction_left_in_the_poll_schedule_leaves_it() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[17_000]))
        .await
        .id();
    for _ in 0..10 {
        app.settle(Duration::seconds(5), 1).await;
    }
    let store = &app.embedded().store;
    let operation = ops_domain::operations::OperationStore::operation(store, &id.as_str().into())
        .await
        .unwrap()
        .unwrap();
    let mut transaction = store.transactions_of_operation(&operation).await.unwrap().remove(0);
    assert_eq!(
        (transaction.status, transaction.next_poll_at),
        (TransactionStatus::Confirmed, None),
        "a confirmation leaves the poll schedule"
    );
    transaction.next_poll_at = Some(app.clock.now());
    transaction.version += 1;
    let written = Changeset {
        writes: vec![Write::UpdateTransaction(transaction.clone())],
    };
    store.commit(written).await.unwrap();

    app.settle(Duration::seconds(1), 1).await;
    let after = store.transaction(&transaction.id).await.unwrap().unwrap();
    assert_eq!(
        (after.status, after.next_poll_at, after.version),
        (TransactionStatus::Confirmed, None, transaction.version + 1)
    );
}

/// Local mode's three stream consumers share what one of them read from the event log: each
/// still takes every event once and in order, whichever reads first, however far behind the
/// others it is, however the log grows between reads, and after a restart.
#[tokio::test]
async fn the_embedded_logs_consumers_each_take_every_event_once_in_order() {
    use ops_domain::event::Event;
    use ops_domain::operations::OperationStatus;
    use ops_infra::embedded::SqliteStore;
    use ops_runtime::driver::ChangeStream;
    use ops_runtime::streams::EmbeddedStream;
    use std::collections::HashMap;

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("log.sqlite")).unwrap();
    let operation = ops_infra::conformance::store::operation("op_log", "cus_log", OperationStatus::PendingApproval);
    let mut stream = EmbeddedStream::new(store.clone());
    let mut written = vec![];
    let mut taken: HashMap<StreamConsumer, Vec<String>> = HashMap::new();
    let mut take = |stream_events: &[(String, Event)], consumer: StreamConsumer| {
        taken
            .entry(consumer)
            .or_default()
            .extend(stream_events.iter().map(|(_, e)| e.id.to_string()));
    };
    for round in 0..90usize {
        for _ in 0..round % 4 {
            let id = format!("evt_{:04}", written.len());
            let event = Event::of_operation(id.as_str().into(), "created", &operation);
            store
                .commit(Changeset {
                    writes: vec![Write::Event(event)],
                })
                .await
                .unwrap();
            written.push(id);
        }
        if round == 45 {
            // A restart: the checkpoints come from the database again.
            stream = EmbeddedStream::new(store.clone());
        }
        // An uneven turn, so the consumers fall behind each other by different amounts.
        let consumer = StreamConsumer::ALL[(round * round / 3) % 3];
        for batch in stream.read(consumer).await.unwrap() {
            // Now and then a consumer handles only the first half (the rest failed).
            let handled = if round % 5 == 0 {
                batch.events.len() / 2
            } else {
                batch.events.len()
            };
            if handled == 0 {
                continue;
            }
            take(&batch.events[..handled], consumer);
            stream
                .advance(consumer, "", &batch.events[handled - 1].0)
                .await
                .unwrap();
        }
    }
    for consumer in StreamConsumer::ALL {
        loop {
            let batches = stream.read(consumer).await.unwrap();
            if batches.is_empty() {
                break;
            }
            for batch in batches {
                take(&batch.events, consumer);
                stream.advance(consumer, "", &batch.last).await.unwrap();
            }
        }
    }
    for consumer in StreamConsumer::ALL {
        assert_eq!(taken.get(&consumer), Some(&written), "{consumer:?}");
    }
}
