//! Webhook endpoints changed in place: moved to a new URL or given other event types, their
//! secrets kept.

use ops_tests::receiver::{signature_is_valid, Receiver};
use ops_tests::{payout, spawn_app, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use time::Duration;

#[tokio::test]
async fn an_endpoint_moved_keeps_its_secret_and_takes_its_retries_to_the_new_url() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let broken = Receiver::start(usize::MAX).await;
    let created = app.subscribe(&customer.key, &broken.url, &["operation.created"]).await;
    let (id, secret) = (created["id"].as_str().unwrap(), created["secret"].as_str().unwrap());
    let path = format!("/v1/webhook_endpoints/{id}");
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    app.drain().await;
    assert_eq!(broken.requests(), 1, "the first attempt went to the broken URL");

    let fixed = Receiver::start(0).await;
    let moved = app.post(&path, &customer.key, json!({"url": fixed.url})).await;
    assert_eq!(moved.status, 200, "{}", moved.json());
    let moved = moved.json();
    assert_eq!(
        (moved["url"].as_str(), moved["version"].as_u64()),
        (Some(fixed.url.as_str()), Some(2))
    );
    assert!(moved.get("secret").is_none(), "a move shows no secret");
    assert_eq!(
        moved["events"],
        json!(["operation.created"]),
        "what it receives is kept"
    );

    // The retry (a minute on) goes to the new URL, signed with the secret the endpoint had.
    app.settle(Duration::minutes(2), 2).await;
    let received = fixed.received();
    assert_eq!((received.len(), broken.requests()), (1, 1));
    assert!(signature_is_valid(&received[0].signature, &received[0].body, secret));
    let event_id = received[0].json()["id"].as_str().unwrap().to_owned();
    let delivery = &app.deliveries(&customer.key, &event_id).await[0];
    assert_eq!(delivery["status"], "delivered", "{delivery}");
    assert_eq!(delivery["url"], fixed.url.as_str(), "where it was delivered");
    // The first attempt names where it went; the second went to the delivery's `url`.
    let attempts: Vec<_> = delivery["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["status_code"].clone(), a["url"].clone()))
        .collect();
    assert_eq!(attempts, [(json!(503), json!(broken.url)), (json!(200), json!(null))]);

    // Other event types: the next operation's `operation.created` is not sent.
    let retyped = app
        .post(&path, &customer.key, json!({"events": ["operation.approved"]}))
        .await
        .json();
    assert_eq!(retyped["events"], json!(["operation.approved"]));
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[6]))
        .await;
    app.drain().await;
    assert_eq!(fixed.received().len(), 1);

    // The same values again change nothing.
    let again = app
        .post(
            &path,
            &customer.key,
            json!({"url": fixed.url, "events": ["operation.approved"]}),
        )
        .await
        .json();
    assert_eq!(again["version"], retyped["version"]);
    assert_eq!(app.get(&path, &customer.key).await.json()["url"], fixed.url.as_str());

    // Each change has its audit entry, saying what it was and who made it; the no-op has none.
    let entries = app.history(&path, &customer.key).await;
    let actions: Vec<_> = entries
        .iter()
        .map(|e| (e["action"].as_str(), e["cause"]["code"].as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            (Some("created"), Some("webhook_endpoint_created")),
            (Some("updated"), Some("webhook_endpoint_updated")),
            (Some("updated"), Some("webhook_endpoint_updated")),
        ]
    );
    let moved_cause = entries[1]["cause"]["message"].as_str().unwrap();
    assert!(
        moved_cause.contains(&fixed.url) && moved_cause.contains(&broken.url),
        "{moved_cause}"
    );
    assert!(
        entries.iter().all(|e| e["cause"]["actor"]["id"].is_string()),
        "{entries:?}"
    );
}

#[tokio::test]
async fn an_endpoint_update_is_validated_and_scoped_to_its_owner() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let created = app.subscribe(&customer.key, "http://127.0.0.1:9/hook", &["*"]).await;
    let path = format!("/v1/webhook_endpoints/{}", created["id"].as_str().unwrap());
    for (body, param) in [
        (json!({}), "url"),
        (json!({"url": "ftp://x"}), "url"),
        (json!({"url": ""}), "url"),
        (json!({"url": "http://127.0.0.1/ok#section"}), "url"),
        (json!({"events": []}), "events"),
        (
            json!({"url": "http://127.0.0.1/ok", "events": ["payment.made"]}),
            "events[0]",
        ),
        (json!({"customer_id": "cus_1"}), "customer_id"),
        (json!({"description": " "}), "description"),
        (json!({"description": "d".repeat(201)}), "description"),
    ] {
        let error = app.post(&path, &customer.key, body.clone()).await.error(400);
        assert_eq!(error["param"], param, "{body}: {error}");
    }
    assert_eq!(
        app.get(&path, &customer.key).await.json()["url"],
        "http://127.0.0.1:9/hook",
        "a refused update changes nothing, though its url was valid"
    );

    // A description says what the endpoint is for; "" removes it. Each change is in its history.
    let described = app
        .post(&path, &customer.key, json!({"description": "Ledger sync"}))
        .await
        .json();
    assert_eq!(described["description"], "Ledger sync");
    let cleared = app.post(&path, &customer.key, json!({"description": ""})).await.json();
    assert_eq!(cleared["description"], json!(null));
    let made = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "http://127.0.0.1:9/other", "description": "Refunds desk"}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["description"], "Refunds desk");
    let blank = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "http://127.0.0.1:9/x", "description": ""}),
        )
        .await;
    assert_eq!(blank.error(400)["param"], "description");

    let other = app.create_customer().await;
    let foreign = app.post(&path, &other.key, json!({"url": "http://127.0.0.1/x"})).await;
    assert_eq!(foreign.error(404)["code"], "resource_missing");
    let history = format!("{path}/history");
    assert_eq!(
        app.get(&history, &other.key).await.error(404)["code"],
        "resource_missing"
    );
    let deleted = app.delete(&path, &customer.key).await;
    assert_eq!(deleted.status, 200);
    let gone = app
        .post(&path, &customer.key, json!({"url": "http://127.0.0.1/x"}))
        .await;
    assert_eq!(gone.error(404)["code"], "resource_missing");

    // A deleted endpoint's history is still there, the refused updates absent from it.
    let entries = app.history(&path, &customer.key).await;
    let actions: Vec<_> = entries.iter().map(|e| e["action"].as_str()).collect();
    assert_eq!(
        actions,
        [Some("created"), Some("updated"), Some("updated"), Some("deleted")]
    );
    assert_eq!(
        (
            entries[1]["cause"]["message"].as_str(),
            entries[2]["cause"]["message"].as_str()
        ),
        (
            Some("Webhook endpoint updated: description 'Ledger sync'"),
            Some("Webhook endpoint updated: description removed")
        )
    );
}

/// A customer says it gets no webhooks: the platform's operator lists that customer's
/// endpoints (it may make them for the customer too), as the customer sees them; its own list
/// stays the platform's, and a customer's key sees no other customer's.
#[tokio::test]
async fn the_platform_lists_a_customers_endpoints_by_naming_the_customer() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let own = app.subscribe(&acme.key, "http://127.0.0.1:9/acme", &["*"]).await;
    let made_for = app
        .post(
            "/v1/webhook_endpoints",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "url": "http://127.0.0.1:9/made-for-acme"}),
        )
        .await
        .json();
    let platforms = app.subscribe(ADMIN_KEY, "http://127.0.0.1:9/platform", &["*"]).await;
    app.subscribe(&globex.key, "http://127.0.0.1:9/globex", &["*"]).await;
    let deleted = app.subscribe(&acme.key, "http://127.0.0.1:9/gone", &["*"]).await;
    let gone = format!("/v1/webhook_endpoints/{}", deleted["id"].as_str().unwrap());
    assert_eq!(app.delete(&gone, &acme.key).await.status, 200);

    let ids = |listed: serde_json::Value| -> Vec<String> {
        let mut ids: Vec<String> = listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut acmes = vec![
        own["id"].as_str().unwrap().to_owned(),
        made_for["id"].as_str().unwrap().to_owned(),
    ];
    acmes.sort();
    let query = format!("/v1/webhook_endpoints?customer_id={}", acme.id);
    assert_eq!(ids(app.get(&query, ADMIN_KEY).await.json()), acmes);
    assert_eq!(ids(app.get("/v1/webhook_endpoints", &acme.key).await.json()), acmes);
    assert_eq!(ids(app.get(&query, &acme.key).await.json()), acmes);
    assert_eq!(
        ids(app.get("/v1/webhook_endpoints", ADMIN_KEY).await.json()),
        [platforms["id"].as_str().unwrap()]
    );
    assert_eq!(ids(app.get(&query, &globex.key).await.json()), Vec::<String>::new());
    let stray = app.get("/v1/webhook_endpoints?customer=x", ADMIN_KEY).await;
    assert_eq!(stray.error(400)["param"], "customer");
}

#[tokio::test]
async fn recovering_an_endpoint_resends_its_failed_deliveries_once_in_event_order() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // Three deliveries fail for good (nine attempts each): two payouts made, the first cancelled.
    let receiver = Receiver::start(27).await;
    let endpoint = app
        .subscribe(
            &customer.key,
            &receiver.url,
            &["operation.created", "operation.cancelled"],
        )
        .await;
    app.never_disable(&customer.key, &endpoint).await;
    let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap());
    let operations = app.two_step_payouts(&customer, [5, 6]).await;
    let cancelled = app
        .post(
            &format!("/v1/operations/{}/cancel", operations[0]),
            &customer.key,
            json!({}),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.json());
    app.settle(Duration::hours(1), 80).await;
    assert_eq!((receiver.requests(), receiver.received().len()), (27, 0));
    assert_eq!(app.open_exceptions().await.len(), 3);

    // Its owner sees what failed, oldest event first, page by page, each with its attempts.
    let failed = format!("{path}/failed_deliveries");
    let first = app.get(&format!("{failed}?limit=2"), &customer.key).await.json();
    assert_eq!(first["has_more"], true, "{first:#}");
    let last_listed = first["data"][1]["id"].as_str().unwrap();
    let rest = app
        .get(&format!("{failed}?starting_after={last_listed}"), &customer.key)
        .await
        .json();
    assert_eq!(rest["has_more"], false, "{rest:#}");
    let listed: Vec<_> = [&first, &rest]
        .iter()
        .flat_map(|page| page["data"].as_array().unwrap().clone())
        .collect();
    let mut subscribed: Vec<Value> = vec![];
    for kind in ["operation.created", "operation.cancelled"] {
        let events = app.get(&format!("/v1/events?type={kind}"), &customer.key).await.json();
        subscribed.extend(events["data"].as_array().unwrap().iter().rev().map(|e| e["id"].clone()));
    }
    assert_eq!(
        listed.iter().map(|d| d["event_id"].clone()).collect::<Vec<_>>(),
        subscribed,
        "the created events, then the cancellation"
    );
    assert!(
        listed
            .iter()
            .all(|d| d["status"] == "failed" && d["attempts"].as_array().unwrap().len() == 9),
        "{listed:#?}"
    );

    // The endpoint stops taking cancellations; then its owner recovers it.
    let narrowed = app
        .post(&path, &customer.key, json!({"events": ["operation.created"]}))
        .await;
    assert_eq!(narrowed.status, 200, "{}", narrowed.json());
    let recovered = app.post(&format!("{path}/recover"), &customer.key, json!({})).await;
    assert_eq!(recovered.status, 200, "{}", recovered.json());
    let recovered = recovered.json();
    assert_eq!(recovered["has_more"], false);
    let resent: Vec<&str> = recovered["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(resent.len(), 2, "{recovered:#}");
    let resent_events: Vec<Value> = recovered["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event_id"].clone())
        .collect();
    assert_eq!(resent_events, subscribed[..2], "the created events, oldest first");
    app.drain().await;
    let bodies: Vec<_> = receiver.received().iter().map(|r| r.json()).collect();
    // Resent in that order, they may still arrive in either: senders post side by side.
    let mut sent: Vec<(&str, &str)> = bodies
        .iter()
        .map(|b| (b["type"].as_str().unwrap(), b["data"]["object"]["id"].as_str().unwrap()))
        .collect();
    sent.sort();
    let mut created = [
        ("operation.created", operations[0].as_str()),
        ("operation.created", operations[1].as_str()),
    ];
    created.sort();
    assert_eq!(sent, created, "each created event once; the cancellation not sent");

    // Each failed delivery says what became of it, and its exceptions item is closed for it.
    let mut outcomes = vec![];
    for body in &bodies {
        let deliveries = app.deliveries(&customer.key, body["id"].as_str().unwrap()).await;
        let failed = deliveries.iter().find(|d| d["status"] == "failed").unwrap();
        assert_eq!(failed["follow_up"]["outcome"], "resent", "{failed:#}");
        assert!(resent.contains(&failed["follow_up"]["delivery_id"].as_str().unwrap()));
        outcomes.push(failed["follow_up"]["delivery_id"].clone());
    }
    assert_ne!(outcomes[0], outcomes[1]);
    assert!(app.open_exceptions().await.is_empty(), "every item closed");
    let events = app
        .get("/v1/events?type=operation.cancelled", &customer.key)
        .await
        .json();
    let cancellation = events["data"][0]["id"].as_str().unwrap();
    let not_resent = app.deliveries(&customer.key, cancellation).await;
    assert_eq!(not_resent.len(), 1);
    assert_eq!(not_resent[0]["follow_up"]["outcome"], "not_resent", "{not_resent:#?}");

    // Nothing is left to recover: a second call resends nothing.
    let again = app.post(&format!("{path}/recover"), &customer.key, json!({})).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["data"], json!([]));
    app.drain().await;
    assert_eq!(receiver.received().len(), 2);
    let left = app.get(&failed, &customer.key).await.json();
    assert_eq!(left["data"], json!([]), "every failure followed up");
    // A page starts at a delivery followed up since as where it was.
    let after_resent = app
        .get(&format!("{failed}?starting_after={last_listed}"), &customer.key)
        .await;
    assert_eq!(after_resent.status, 200, "{}", after_resent.json());

    // Fenced as the endpoint is, and a body with anything in it is refused by name.
    let other = app.create_customer().await;
    let foreign = app.post(&format!("{path}/recover"), &other.key, json!({})).await;
    assert_eq!(foreign.error(404)["code"], "resource_missing");
    let unknown = app
        .post(
            &format!("{path}/recover"),
            &customer.key,
            json!({"since": "2026-11-01"}),
        )
        .await;
    assert_eq!(unknown.error(400)["param"], "since");
    let foreign = app.get(&failed, &other.key).await;
    assert_eq!(foreign.error(404)["code"], "resource_missing");
    let elsewhere = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    let not_its_own = app
        .get(
            &format!(
                "/v1/webhook_endpoints/{}/failed_deliveries?starting_after={last_listed}",
                elsewhere["id"].as_str().unwrap()
            ),
            &customer.key,
        )
        .await;
    let error = not_its_own.error(400);
    assert_eq!(
        (&error["param"], &error["code"]),
        (&json!("starting_after"), &json!("resource_missing"))
    );
    let malformed = app.get(&format!("{failed}?starting_after=op_1"), &customer.key).await;
    assert_eq!(malformed.error(400)["code"], "invalid_id");
}

#[tokio::test]
async fn a_recover_resends_an_event_that_failed_twice_to_its_endpoint_once() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // The event's first delivery is still being retried when it is resent: both fail for good.
    let receiver = Receiver::start(2 * 9).await;
    let endpoint = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap());
    app.two_step_payouts(&customer, [5]).await;
    app.drain().await;
    let events = app.get("/v1/events?type=operation.created", &customer.key).await.json();
    let event_id = events["data"][0]["id"].as_str().unwrap().to_owned();
    let resent = app
        .post(&format!("/v1/events/{event_id}/resend"), &customer.key, json!({}))
        .await;
    assert_eq!(resent.status, 200, "{}", resent.json());
    app.settle(Duration::hours(1), 80).await;
    assert_eq!((receiver.requests(), receiver.received().len()), (18, 0));
    let failed = app
        .get(&format!("{path}/failed_deliveries"), &customer.key)
        .await
        .json();
    let failed_events: Vec<_> = failed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event_id"].clone())
        .collect();
    assert_eq!(failed_events, [json!(event_id), json!(event_id)], "{failed:#}");

    let recovered = app.post(&format!("{path}/recover"), &customer.key, json!({})).await;
    assert_eq!(recovered.status, 200, "{}", recovered.json());
    let recovered = recovered.json();
    assert_eq!(recovered["data"].as_array().unwrap().len(), 1, "{recovered:#}");
    app.drain().await;
    assert_eq!(receiver.received().len(), 1, "the event received once");
    let follow_ups: Vec<_> = app
        .deliveries(&customer.key, &event_id)
        .await
        .into_iter()
        .filter(|d| d["status"] == "failed")
        .map(|d| (d["follow_up"]["outcome"].clone(), d["follow_up"]["delivery_id"].clone()))
        .collect();
    let by_recovery = (json!("resent"), recovered["data"][0]["id"].clone());
    assert_eq!(
        follow_ups,
        [by_recovery.clone(), by_recovery],
        "both followed up by the one resend"
    );
    assert!(app.open_exceptions().await.is_empty(), "both items closed");
}

#[tokio::test]
async fn a_recover_resends_fifty_failed_deliveries_a_call_and_says_when_more_are_left() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // Fifty-one deliveries fail for good, nine attempts each; what comes after is taken.
    let receiver = Receiver::start(51 * 9).await;
    let endpoint = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    app.never_disable(&customer.key, &endpoint).await;
    let recover = format!("/v1/webhook_endpoints/{}/recover", endpoint["id"].as_str().unwrap());
    app.two_step_payouts(&customer, 1..=51).await;
    app.settle(Duration::hours(1), 80).await;
    assert_eq!((receiver.requests(), receiver.received().len()), (51 * 9, 0));

    let mut calls = vec![];
    for _ in 0..3 {
        let page = app.post(&recover, &customer.key, json!({})).await.json();
        calls.push((
            page["data"].as_array().unwrap().len(),
            page["has_more"].as_bool().unwrap(),
        ));
    }
    assert_eq!(calls, [(50, true), (1, false), (0, false)]);
    app.drain().await;
    let amounts: std::collections::BTreeSet<u64> = receiver
        .received()
        .iter()
        .map(|r| r.json()["data"]["object"]["items"][0]["amount"].as_u64().unwrap())
        .collect();
    assert_eq!(amounts, (1..=51).collect(), "each event received once");
    assert_eq!(receiver.received().len(), 51);
}

#[tokio::test]
async fn a_customer_keeps_at_most_sixteen_endpoints_and_a_deleted_one_makes_room() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let mut made = vec![];
    for _ in 0..16 {
        let endpoint = app
            .subscribe(&customer.key, &receiver.url, &["operation.created"])
            .await;
        made.push(endpoint["id"].as_str().unwrap().to_owned());
    }
    let create = || {
        app.post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": receiver.url, "events": ["operation.created"]}),
        )
    };
    let refused = create().await.error(409);
    assert_eq!(refused["code"], "endpoint_limit_reached", "{refused}");
    // Another customer's endpoints are its own to count.
    let other = app.create_customer().await;
    app.subscribe(&other.key, &receiver.url, &["operation.created"]).await;

    let deleted = app
        .delete(&format!("/v1/webhook_endpoints/{}", made[0]), &customer.key)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    assert_eq!(create().await.status, 201);
    // An event goes to the sixteen kept, once each; none to the deleted one.
    app.post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    app.drain().await;
    assert_eq!(receiver.received().len(), 16);
}

/// A customer made is an event: the platform's endpoints hear of it, signed, with the customer
/// as it was made (it has no endpoints of its own yet).
#[tokio::test]
async fn a_new_customer_reaches_the_platforms_endpoints_signed() {
    let app = spawn_app().await;
    let platform = Receiver::start(0).await;
    let endpoint = app
        .subscribe(ops_tests::ADMIN_KEY, &platform.url, &["customer.created"])
        .await;
    let customer = app.create_customer().await;
    app.drain().await;

    let received = platform.received();
    assert_eq!(received.len(), 1, "one event for one new customer");
    let secret = endpoint["secret"].as_str().unwrap();
    assert!(signature_is_valid(&received[0].signature, &received[0].body, secret));
    let event = received[0].json();
    assert_eq!(
        (
            &event["type"],
            &event["data"]["customer_id"],
            &event["data"]["status"],
            &event["data"]["cause"]["code"],
            &event["data"]["object"]["name"],
        ),
        (
            &json!("customer.created"),
            &json!(customer.id),
            &json!("active"),
            &json!("customer_created"),
            &json!("Acme Payroll")
        ),
        "{event}"
    );
    let listed = app.get("/v1/events?type=customer.created", &customer.key).await.json();
    assert_eq!(listed["data"][0]["id"], event["id"], "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoints_event_types_are_kept_once_each() {
    ops_tests::scenarios::an_endpoints_event_types_are_kept_once_each(&spawn_app().await.api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creates_at_once_never_take_a_customer_past_its_endpoint_limit() {
    ops_tests::scenarios::creates_at_once_never_take_a_customer_past_its_endpoint_limit(&spawn_app().await.api).await;
}

/// A customer whose endpoints were all made before counts were kept (written to the store
/// directly here, with no count) is counted from its list by its next create or delete: the
/// limit holds from the first, and a delete makes room for exactly one.
#[tokio::test]
async fn endpoints_made_before_counts_were_kept_are_counted_by_the_next_change() {
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::webhooks::{EndpointStatus, WebhookEndpoint};
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let writes = (0..16)
        .map(|n| {
            Write::PutWebhookEndpoint(WebhookEndpoint {
                id: format!("whe_{n:026}").as_str().into(),
                customer_id: Some(customer.id.as_str().into()),
                url: "http://127.0.0.1:9/hook".into(),
                description: None,
                events: vec!["operation.created".into()],
                retry_policy: Default::default(),
                breaker: Default::default(),
                rate_limit: None,
                ordering: Default::default(),
                status: EndpointStatus::Enabled,
                secrets: vec![],
                created_at: time::OffsetDateTime::now_utc(),
                environment: ops_domain::access::Environment::Test,
                version: 1,
            })
        })
        .collect();
    app.embedded().store.commit(Changeset { writes }).await.unwrap();
    let create = || {
        app.post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "http://127.0.0.1:9/hook", "events": ["operation.created"]}),
        )
    };
    assert_eq!(create().await.error(409)["code"], "endpoint_limit_reached");
    let deleted = app
        .delete(&format!("/v1/webhook_endpoints/whe_{:026}", 0), &customer.key)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    assert_eq!(create().await.status, 201);
    assert_eq!(create().await.error(409)["code"], "endpoint_limit_reached");
}

/// How many signing secrets of an endpoint the app's SQLite file holds.
fn stored_secrets(app: &TestApp) -> impl Fn(String) -> std::future::Ready<usize> {
    let database = app.data_dir.path().join("ops-test.sqlite");
    move |endpoint_id: String| {
        let connection = rusqlite::Connection::open(&database).unwrap();
        let pattern = format!("webhook/{endpoint_id}/%");
        let count: i64 = connection
            .query_row("SELECT count(*) FROM secrets WHERE name LIKE ?1", [pattern], |row| {
                row.get(0)
            })
            .unwrap();
        std::future::ready(count as usize)
    }
}

#[tokio::test]
async fn each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs() {
    let app = spawn_app().await;
    ops_tests::scenarios::each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs(
        &app,
        || app.drain(),
        stored_secrets(&app),
    )
    .await;
}

#[tokio::test]
async fn rotations_in_a_row_keep_the_three_newest_secrets_signing() {
    let app = spawn_app().await;
    ops_tests::scenarios::rotations_in_a_row_keep_the_three_newest_secrets_signing(
        &app,
        || app.drain(),
        stored_secrets(&app),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret() {
    let app = spawn_app().await;
    ops_tests::scenarios::changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret(&app, stored_secrets(&app))
        .await;
}

#[tokio::test]
async fn old_signing_secrets_no_endpoint_names_are_swept() {
    let app = spawn_app().await;
    ops_tests::scenarios::old_signing_secrets_no_endpoint_names_are_swept(&app, app.driver(), &app.clock).await;
}

#[tokio::test]
async fn a_delivery_follows_its_endpoints_retry_policy_and_a_range_is_recovered_once() {
    let app = spawn_app().await;
    ops_tests::scenarios::a_delivery_follows_its_endpoints_retry_policy_and_a_range_is_recovered_once(
        &app,
        app.driver(),
        &app.clock,
        |_| async {},
    )
    .await;
}

#[tokio::test]
async fn an_endpoint_that_keeps_failing_is_disabled_and_enabled_again_sends_what_waited() {
    let app = spawn_app().await;
    ops_tests::scenarios::an_endpoint_that_keeps_failing_is_disabled_and_enabled_again_sends_what_waited(
        &app,
        app.driver(),
        &app.clock,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoints_rate_limit_spreads_its_deliveries_over_the_seconds() {
    let app = spawn_app().await;
    ops_tests::scenarios::an_endpoints_rate_limit_spreads_its_deliveries_over_the_seconds(&app, app.driver()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_endpoint_gets_each_operations_events_in_order() {
    let app = spawn_app().await;
    ops_tests::scenarios::an_ordered_endpoint_gets_each_operations_events_in_order(
        &app,
        app.driver(),
        &app.clock,
        |_| async {},
    )
    .await;
}

/// An endpoint enabled again sends what waited however many failures come before it in its
/// list: here 600 failed deliveries (written to the store directly, of events older than any
/// the API makes) sit ahead of three that wait, and one release task looks through 500.
#[tokio::test]
async fn waiting_deliveries_behind_many_failures_are_sent_when_enabled() {
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::webhooks::{Delivery, DeliveryStatus, EndpointStatus, WebhookStore};
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let made = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": receiver.url, "events": ["operation.created"]}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let endpoint_id: ops_domain::ids::WebhookEndpointId = made.id().as_str().into();
    let store = &app.embedded().store;
    let mut endpoint = store.webhook_endpoint(&endpoint_id).await.unwrap().unwrap();
    endpoint.status = EndpointStatus::Disabled;
    endpoint.version += 1;
    let now = time::OffsetDateTime::now_utc();
    let mut writes = vec![Write::PutWebhookEndpoint(endpoint)];
    writes.extend((0..600).map(|n| {
        Write::InsertDelivery(Delivery {
            id: format!("whd_{n:026}").as_str().into(),
            event_id: format!("evt_{n:026}").as_str().into(),
            endpoint_id: endpoint_id.clone(),
            url: receiver.url.clone(),
            status: DeliveryStatus::Failed,
            attempts: vec![],
            next_attempt_at: None,
            created_at: now,
            follow_up: None,
            in_line_of: None,
            operation_id: None,
            version: 1,
        })
    }));
    store.commit(Changeset { writes }).await.unwrap();
    for amount in 1..=3 {
        let made = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[amount]),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.json());
    }
    app.drain().await;
    assert_eq!(receiver.requests(), 0, "the disabled endpoint's deliveries wait");
    let enabled = app
        .post(
            &format!("/v1/webhook_endpoints/{endpoint_id}/enable"),
            &customer.key,
            json!({}),
        )
        .await;
    assert_eq!(enabled.status, 200, "{}", enabled.json());
    app.settle(time::Duration::seconds(1), 5).await;
    assert_eq!(receiver.received().len(), 3, "each that waited, once");
}

/// A delivery that finished and then stood in its line again (a second dispatch of its event
/// put it back) does not block the line: when the delivery before it finishes, the line is
/// taken on past it and the next one is sent.
#[tokio::test]
async fn a_finished_delivery_back_in_its_line_does_not_hold_the_next() {
    use ops_domain::ports::{Changeset, Commit, Write};
    use ops_domain::webhooks::{Delivery, DeliveryStatus, InLine, WebhookStore};
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(1).await;
    let made = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": receiver.url, "events": ["operation.created", "operation.pending_approval"], "ordering": "per_operation"}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let endpoint_id: ops_domain::ids::WebhookEndpointId = made.id().as_str().into();
    let operation = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await;
    assert_eq!(operation.status, 201, "{}", operation.json());
    let operation_id: ops_domain::ids::OperationId = operation.id().as_str().into();
    app.drain().await;
    assert_eq!(receiver.requests(), 1, "the first refused, the second behind it");
    let store = &app.embedded().store;
    let mut line = store.delivery_line(&endpoint_id, &operation_id).await.unwrap().unwrap();
    assert_eq!(line.waiting.len(), 2, "{line:?}");
    let (first, second) = (line.waiting[0].clone(), line.waiting[1].clone());
    let back = Delivery {
        id: format!("{}0", first.delivery_id).as_str().into(),
        event_id: format!("{}0", first.event_id).as_str().into(),
        endpoint_id: endpoint_id.clone(),
        url: receiver.url.clone(),
        status: DeliveryStatus::Delivered,
        attempts: vec![],
        next_attempt_at: None,
        created_at: time::OffsetDateTime::now_utc(),
        follow_up: None,
        in_line_of: Some(operation_id.clone()),
        operation_id: Some(operation_id.clone()),
        version: 2,
    };
    line.waiting.insert(
        1,
        InLine {
            event_id: back.event_id.clone(),
            delivery_id: back.id.clone(),
        },
    );
    line.version += 1;
    let writes = vec![Write::InsertDelivery(back), Write::PutDeliveryLine(line)];
    store.commit(Changeset { writes }).await.unwrap();
    app.settle(Duration::minutes(2), 2).await;
    let received: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        received,
        [first.event_id.to_string(), second.event_id.to_string()],
        "the retry, then the one behind the finished one"
    );
}

/// An operation's page lists the webhook deliveries of its events and its transactions':
/// oldest event first, a page at a time; a customer sees those to its own endpoints, the
/// platform every endpoint's; another customer's key finds no such operation.
#[tokio::test]
async fn an_operations_deliveries_are_listed_with_it() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let other = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    app.subscribe(&customer.key, &receiver.url, &["*"]).await;
    app.subscribe(ADMIN_KEY, &receiver.url, &["operation.completed"]).await;
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await
        .id();
    app.settle(Duration::seconds(30), 6).await;
    assert_eq!(
        app.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
        "completed"
    );

    let listed = |key: String, query: String| {
        let (app, id) = (&app, id.clone());
        async move {
            let page = app.get(&format!("/v1/operations/{id}/deliveries?{query}"), &key).await;
            assert_eq!(page.status, 200, "{}", page.json());
            page.json()
        }
    };
    let mine = listed(customer.key.clone(), "limit=100".into()).await;
    let deliveries = mine["data"].as_array().unwrap();
    let events: Vec<String> = deliveries
        .iter()
        .map(|d| d["event_id"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = events.clone();
    sorted.sort();
    assert_eq!(events, sorted, "oldest event first");
    let kinds: Vec<String> = {
        let mut kinds = vec![];
        for event in &events {
            let event = app.get(&format!("/v1/events/{event}"), &customer.key).await.json();
            kinds.push(event["type"].as_str().unwrap().to_owned());
        }
        kinds
    };
    for kind in [
        "operation.created",
        "operation.completed",
        "transaction.submitted",
        "transaction.confirmed",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    assert!(deliveries
        .iter()
        .all(|d| d["operation_id"] == id.as_str() && d["status"] == "delivered"));
    // The platform sees its own endpoint's delivery too.
    let all = listed(ADMIN_KEY.into(), "limit=100".into()).await;
    assert_eq!(all["data"].as_array().unwrap().len(), deliveries.len() + 1, "{all}");
    // A page at a time.
    let first = listed(customer.key.clone(), "limit=2".into()).await;
    assert_eq!(first["has_more"], true);
    let after = first["data"][1]["id"].as_str().unwrap();
    let next = listed(customer.key.clone(), format!("limit=100&starting_after={after}")).await;
    let paged: Vec<&Value> = first["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(next["data"].as_array().unwrap())
        .collect();
    assert_eq!(paged.len(), deliveries.len());
    assert_eq!(
        app.get(&format!("/v1/operations/{id}/deliveries"), &other.key)
            .await
            .status,
        404
    );
}
