//! The HTTP rail adapter against a connectivity layer served by the test over real HTTP.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Json;
use ops_tests::receiver::signature_is_valid;
use ops_tests::{payout, spawn_app_with, RAIL_SECRET};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;
use time::Duration;

/// A PSP connectivity layer: refuses the first submit of each transaction with 503, is slow
/// (longer than the adapter waits) for amounts ending in 99, and confirms on status.
#[derive(Default)]
struct Layer {
    submits: Mutex<BTreeMap<String, u32>>,
    accepted: Mutex<BTreeMap<String, String>>,
    bad_signatures: Mutex<u32>,
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
    let calls = {
        let mut submits = layer.submits.lock().unwrap();
        let calls = submits.entry(id.clone()).or_default();
        *calls += 1;
        *calls
    };
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
    match layer.accepted.lock().unwrap().get(id) {
        Some(reference) => (
            StatusCode::OK,
            Json(json!({"state": "confirmed", "rail_reference": reference})),
        ),
        None => (StatusCode::OK, Json(json!({"state": "not_found"}))),
    }
}

#[tokio::test]
async fn a_rail_served_over_http_is_signed_retried_on_503_and_asked_after_a_timeout() {
    let layer = Arc::new(Layer::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/spei", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .route("/spei/submit", post(submit))
        .route("/spei/status", post(status))
        .with_state(layer.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let app = spawn_app_with(|config| {
        config.http_rails = vec![format!("psp-local:spei={base}")];
        config.http_rail_timeout_ms = 300;
    })
    .await;
    let customer = app.create_customer().await;
    let mut body = payout(&customer.id, "auto", &[70_000, 70_099]);
    for item in body["items"].as_array_mut().unwrap() {
        item["destination"]["rail"] = json!("psp-local:spei");
    }
    let id = app.post("/v1/operations", &customer.key, body).await.id();
    app.settle(Duration::seconds(10), 10).await;

    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(operation["status"], "completed", "{operation}");
    let txns = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json();
    let by_amount = |amount: i64| {
        txns["data"]
            .as_array()
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
    let slow_path = app.path_of(&customer.key, &id, slow["id"].as_str().unwrap()).await;
    assert_eq!(slow_path, ["pending", "unknown", "confirmed"]);
    assert_eq!(
        *layer.bad_signatures.lock().unwrap(),
        0,
        "every request was signed with the rail secret"
    );
}

#[tokio::test]
async fn http_rails_need_a_valid_spec_and_a_secret() {
    let bad = ops_local::build(
        &ops_local::Config {
            http_rails: vec!["spei=http://x".into()],
            ..ops_tests::config(tempfile::tempdir().unwrap().keep())
        },
        Arc::new(ops_domain::ports::SystemClock),
    )
    .await;
    assert!(bad.is_err());
    let no_secret = ops_local::build(
        &ops_local::Config {
            http_rails: vec!["psp-local:spei=http://x".into()],
            rail_secret: None,
            ..ops_tests::config(tempfile::tempdir().unwrap().keep())
        },
        Arc::new(ops_domain::ports::SystemClock),
    )
    .await;
    assert!(no_secret.is_err());
}
