//! The HTTP rail adapter against a connectivity layer served by the test over real HTTP.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Json;
use ops_domain::ports::{Clock, QueueName};
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::receiver::signature_is_valid;
use ops_tests::{payout, spawn_app_with, Customer, TestApp, RAIL_SECRET};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;
use time::Duration;

/// A PSP connectivity layer: refuses the first submit of each transaction with 503, is slow
/// (longer than the adapter waits) for amounts ending in 99 and 97, takes amounts ending in 98
/// but answers 502 (as a proxy does whose upstream failed after passing the instruction on),
/// and confirms on status, but for amounts ending in 97, whose status it cannot answer (500).
#[derive(Default)]
struct Layer {
    submits: Mutex<BTreeMap<String, u32>>,
    accepted: Mutex<BTreeMap<String, String>>,
    unanswerable: Mutex<std::collections::BTreeSet<String>>,
    bad_signatures: Mutex<u32>,
    /// The customer's end-to-end id each instruction carried beside ours.
    end_to_end_ids: Mutex<BTreeMap<String, Value>>,
}

fn signed(layer: &Layer, headers: &HeaderMap, body: &[u8]) -> bool {
    let header = headers
        .get("x-service-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let ok = signature_is_valid(header, body, RAIL_SECRET);
    if !ok {
        *layer.bad_signatures.lock().unwrap() += 1;
    }
    ok
}

async fn submit(State(layer): State<Arc<Layer>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let instruction: Value = serde_json::from_slice(&body).unwrap();
    let id = instruction["transaction_id"].as_str().unwrap().to_owned();
    layer
        .end_to_end_ids
        .lock()
        .unwrap()
        .insert(id.clone(), instruction["end_to_end_id"].clone());
    let calls = {
        let mut submits = layer.submits.lock().unwrap();
        let calls = submits.entry(id.clone()).or_default();
        *calls += 1;
        *calls
    };
    if instruction["amount"].as_i64().unwrap() % 100 == 97 {
        layer.unanswerable.lock().unwrap().insert(id.clone());
        tokio::time::sleep(StdDuration::from_millis(800)).await;
        return (
            StatusCode::OK,
            Json(json!({"result": "accepted", "rail_reference": format!("ext-{id}")})),
        );
    }
    if instruction["amount"].as_i64().unwrap() % 100 == 98 {
        layer.accepted.lock().unwrap().insert(id.clone(), format!("ext-{id}"));
        return (StatusCode::BAD_GATEWAY, Json(json!({"error": "upstream reset"})));
    }
    if calls == 1 && instruction["amount"].as_i64().unwrap() % 100 != 99 {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"error": "busy"})));
    }
    let reference = format!("ext-{id}");
    layer.accepted.lock().unwrap().insert(id, reference.clone());
    if instruction["amount"].as_i64().unwrap() % 100 == 99 {
        tokio::time::sleep(StdDuration::from_millis(800)).await;
    }
    (
        StatusCode::OK,
        Json(json!({"result": "accepted", "rail_reference": reference})),
    )
}

async fn status(State(layer): State<Arc<Layer>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let asked: Value = serde_json::from_slice(&body).unwrap();
    let id = asked["transaction_id"].as_str().unwrap();
    if layer.unanswerable.lock().unwrap().contains(id) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "status is down"})),
        );
    }
    match layer.accepted.lock().unwrap().get(id) {
        Some(reference) => (
            StatusCode::OK,
            Json(json!({"state": "confirmed", "rail_reference": reference})),
        ),
        None => (StatusCode::OK, Json(json!({"state": "not_found"}))),
    }
}

/// Reads a statement of `transaction_id,amount` lines into the protocol's answer, under the
/// references it gave; "busy" is a 503, anything else it cannot read a 422 saying why.
async fn statements(
    State(layer): State<Arc<Layer>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    assert_eq!(query.as_deref(), Some("format=csv"));
    assert_eq!(headers["content-type"], "text/csv");
    let text = String::from_utf8_lossy(&body);
    if text.trim() == "busy" {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"error": "busy"})));
    }
    let accepted = layer.accepted.lock().unwrap();
    let mut lines = vec![];
    for (n, line) in text.lines().enumerate() {
        let Some((id, amount)) = line.split_once(',') else {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"error": format!("line {}: expected transaction_id,amount", n + 1)})),
            );
        };
        let today = time::OffsetDateTime::now_utc().date().to_string();
        lines.push(
            json!({"rail_reference": accepted.get(id).cloned().unwrap_or_default(), "transaction_id": id,
                          "amount": amount.parse::<i64>().unwrap(), "currency": "CLP", "status": "confirmed",
                          "direction": "debit", "booked_on": today}),
        );
    }
    (StatusCode::OK, Json(json!({"lines": lines})))
}

/// Starts a [`Layer`] serving `psp-local:spei`; returns it and its base URL.
async fn connectivity_layer() -> (Arc<Layer>, String) {
    let layer = Arc::new(Layer::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/spei", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .route("/spei/submit", post(submit))
        .route("/spei/status", post(status))
        .route("/spei/statements", post(statements))
        .with_state(layer.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (layer, base)
}

/// The service with `psp-local:spei` served by the layer at `base`, waiting `timeout_ms` for
/// its answers (the default if `None`).
async fn served_by(base: &str, timeout_ms: Option<u64>) -> TestApp {
    spawn_app_with(|config| {
        config.http_rails = vec![format!("psp-local:spei={base}").parse().unwrap()];
        if let Some(timeout_ms) = timeout_ms {
            config.http_rail_timeout_ms = timeout_ms;
        }
    })
    .await
}

/// An auto-approved payout of `amounts`, every item to `psp-local:spei` with the customer's
/// end-to-end id `E2E-<amount>`; answers its id.
async fn spei_payout(app: &TestApp, customer: &Customer, amounts: &[i64]) -> String {
    let mut body = payout(&customer.id, "auto", amounts);
    for item in body["items"].as_array_mut().unwrap() {
        item["destination"]["rail"] = json!("psp-local:spei");
        item["end_to_end_id"] = json!(format!("E2E-{}", item["amount"]));
    }
    app.post("/v1/operations", &customer.key, body).await.id()
}

/// A 502 to a submit does not say whether the instruction got through (here it did): the
/// transaction becomes unknown and is asked about, never sent again. A 503 is the layer's
/// refusal, and is retried.
#[tokio::test]
async fn a_submit_answered_502_is_asked_about_and_never_sent_again() {
    let (layer, base) = connectivity_layer().await;
    let app = served_by(&base, None).await;
    let customer = app.create_customer().await;
    let id = spei_payout(&app, &customer, &[70_098]).await;
    app.settle(Duration::seconds(10), 10).await;

    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{operation}");
    let txn = transactions(&app, &customer.key, &id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(layer.submits.lock().unwrap()[&txn], 1, "sent once");
    assert_eq!(
        app.path_of(&customer.key, &id, &txn).await,
        ["pending", "unknown", "confirmed"]
    );
    let history = app.history(&format!("/v1/operations/{id}"), &customer.key).await;
    let unknown = history
        .iter()
        .find(|entry| entry["entity_id"] == txn.as_str() && entry["to"] == "unknown")
        .unwrap_or_else(|| panic!("{history:?}"));
    assert_eq!(unknown["cause"]["code"], "rail_outcome_unknown", "{unknown}");
    assert!(
        unknown["cause"]["message"].as_str().unwrap().contains("502"),
        "{unknown}"
    );
}

/// An unknown transaction whose rail cannot be asked about it (its status calls fail) goes to
/// an operator once it has been unknown for an hour: nobody knows whether its money moved.
/// Until then it is asked again, and never sent again.
#[tokio::test]
async fn an_unknown_transaction_the_rail_cannot_be_asked_about_goes_to_an_operator() {
    let (layer, base) = connectivity_layer().await;
    let app = served_by(&base, Some(300)).await;
    let customer = app.create_customer().await;
    let id = spei_payout(&app, &customer, &[70_097]).await;
    let transaction = || async { transactions(&app, &customer.key, &id).await[0].clone() };

    app.settle(Duration::minutes(5), 10).await;
    let waiting = transaction().await;
    assert_eq!(waiting["status"], "unknown", "asked again within the hour: {waiting}");

    app.settle(Duration::minutes(5), 4).await;
    let flagged = transaction().await;
    let txn = flagged["id"].as_str().unwrap().to_owned();
    assert_eq!(flagged["status"], "needs_attention", "{flagged}");
    assert_eq!(flagged["cause"]["code"], "rail_status_unavailable", "{flagged}");
    assert!(
        flagged["cause"]["message"].as_str().unwrap().contains("500"),
        "{flagged}"
    );
    assert_eq!(layer.submits.lock().unwrap()[&txn], 1, "sent once");
    let exceptions = app.open_exceptions().await;
    assert!(
        exceptions
            .iter()
            .any(|item| item["subject"]["id"] == txn.as_str() && item["kind"] == "transaction_needs_attention"),
        "{exceptions:?}"
    );
}

#[tokio::test]
async fn a_rail_served_over_http_is_signed_retried_on_503_and_asked_after_a_timeout() {
    let (layer, base) = connectivity_layer().await;
    let app = served_by(&base, Some(300)).await;
    let customer = app.create_customer().await;
    let id = spei_payout(&app, &customer, &[70_000, 70_099]).await;
    app.settle(Duration::seconds(10), 10).await;

    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{operation}");
    let txns = transactions(&app, &customer.key, &id).await;
    let by_amount = |amount: i64| {
        txns.as_array()
            .unwrap()
            .iter()
            .find(|t| t["amount"] == amount)
            .unwrap()
            .clone()
    };
    let retried = by_amount(70_000);
    let slow = by_amount(70_099);
    let submits = layer.submits.lock().unwrap().clone();
    assert_eq!(submits[retried["id"].as_str().unwrap()], 2, "a 503 is retried");
    assert_eq!(
        retried["rail_reference"],
        format!("ext-{}", retried["id"].as_str().unwrap())
    );
    // The slow answer timed out: the transaction became unknown and was asked about, not resent.
    assert_eq!(submits[slow["id"].as_str().unwrap()], 1);
    // Each instruction carried its customer's end-to-end id beside ours.
    let carried = layer.end_to_end_ids.lock().unwrap().clone();
    assert_eq!(carried[retried["id"].as_str().unwrap()], "E2E-70000");
    assert_eq!(retried["end_to_end_id"], "E2E-70000");
    let slow_path = app.path_of(&customer.key, &id, slow["id"].as_str().unwrap()).await;
    assert_eq!(slow_path, ["pending", "unknown", "confirmed"]);
    assert_eq!(
        *layer.bad_signatures.lock().unwrap(),
        0,
        "every request was signed with the rail secret"
    );
}

#[tokio::test]
async fn a_statement_of_an_http_rail_is_read_by_its_connectivity_layer() {
    let (layer, base) = connectivity_layer().await;
    let app = served_by(&base, None).await;
    let customer = app.create_customer().await;
    let id = spei_payout(&app, &customer, &[70_000]).await;
    app.settle(Duration::seconds(10), 10).await;
    let txn = transactions(&app, &customer.key, &id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let import = |statement: String, key: &'static str| {
        let mut body = ops_tests::statement_body("csv", statement.as_bytes());
        body["rail"] = json!("psp-local:spei");
        let app = &app;
        async move {
            app.send(
                reqwest::Method::POST,
                "/v1/reconciliations",
                Some(ops_tests::ADMIN_KEY),
                Some(key),
                Some(&body),
            )
            .await
        }
    };
    let imported = import(format!("{txn},70000"), "spei-1").await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    assert_eq!(
        imported.json()["outcomes"],
        json!({"matched": 1, "matched_with_difference": 0, "mismatched": 0, "unmatched": 0, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
    );
    // What the layer cannot read is the operator's to fix (its words shown); a busy layer is
    // the service's to retry.
    let unreadable = import("nonsense".into(), "spei-2").await.error(400);
    assert_eq!(unreadable["code"], "invalid_statement");
    assert!(
        unreadable["message"]
            .as_str()
            .unwrap()
            .contains("expected transaction_id,amount"),
        "{unreadable}"
    );
    assert_eq!(
        import("busy".into(), "spei-3").await.error(502)["code"],
        "rail_unavailable"
    );
    assert_eq!(*layer.bad_signatures.lock().unwrap(), 0);
}

#[tokio::test]
async fn http_rails_need_a_secret() {
    // A malformed entry is refused while the configuration is read (ops-local's unit tests).
    let no_secret = ops_local::build(
        &ops_local::Config {
            http_rails: vec!["psp-local:spei=http://x".parse().unwrap()],
            rail_secret: None,
            ..ops_tests::config(tempfile::tempdir().unwrap().keep())
        },
        Arc::new(ops_domain::ports::SystemClock),
    )
    .await;
    assert!(no_secret.is_err());
}

/// A transaction whose rail no adapter serves any more (the rail was taken out of the
/// configuration) is not asked about, and its poll waits ten minutes instead of heading every
/// round and crowding out the transactions that can be asked.
#[tokio::test]
async fn a_transaction_on_a_rail_no_longer_served_waits_instead_of_heading_every_poll() {
    let (_layer, base) = connectivity_layer().await;
    let app = served_by(&base, None).await;
    let customer = app.create_customer().await;
    let id = spei_payout(&app, &customer, &[70_199]).await;
    let driver = app.driver();
    while driver.round(Trigger::Stream(StreamConsumer::Transition)).await.unwrap()
        + driver.round(Trigger::Queue(QueueName::Submissions)).await.unwrap()
        > 0
    {}
    assert_eq!(transactions(&app, &customer.key, &id).await[0]["status"], "submitted");

    let app = app.restart_with(|config| config.http_rails = vec![]).await;
    app.clock.advance(Duration::seconds(3));
    let before = app.clock.now();
    assert_eq!(
        app.driver().service().poll_rails().await.unwrap(),
        0,
        "no adapter to ask"
    );
    let listed = transactions(&app, &customer.key, &id).await;
    let waiting = &listed[0];
    assert_eq!(waiting["status"], "submitted");
    let next_poll = time::OffsetDateTime::parse(
        waiting["next_poll_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!(next_poll >= before + Duration::minutes(9), "{next_poll} vs {before}");
}

async fn transactions(app: &TestApp, key: &str, operation_id: &str) -> Value {
    app.get(&format!("/v1/transactions?operation_id={operation_id}"), key)
        .await
        .json()["data"]
        .clone()
}
