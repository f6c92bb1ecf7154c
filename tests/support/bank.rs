//! A bank's connectivity layer for a file rail, served by the test over real HTTP: it takes a
//! cut-off's pain.001 at `/files`, says whether it has a file at `/files/status`, answers
//! status inquiries `pending` (the bank's word comes in its pain.002 and camt.054 files), and
//! counts instructions sent to it one by one, which a file rail never sends. Every handover's
//! bytes are kept in order, so a test sees each file the bank got, and how often.

use crate::receiver::signature_is_valid;
use crate::RAIL_SECRET;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Json;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Layer {
    handovers: Mutex<Vec<(String, Vec<u8>)>>,
    instructions: AtomicU32,
    bad_signatures: AtomicU32,
    /// How long a handover's answer takes, after the file is taken.
    answer_after_ms: AtomicU64,
}

pub struct Bank {
    /// The rail's base URL, for `OPS_HTTP_RAILS` (`rail_id=file+<base>`).
    pub base: String,
    layer: Arc<Layer>,
}

impl Bank {
    pub async fn start() -> Bank {
        let layer = Arc::new(Layer::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/bank", listener.local_addr().unwrap());
        let router = axum::Router::new()
            .route("/bank/files", post(take_file))
            .route("/bank/files/status", post(file_status))
            .route("/bank/status", post(status))
            .route("/bank/submit", post(submit))
            .with_state(layer.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Bank { base, layer }
    }

    /// Each handover the bank got, in order: the file's id and its bytes.
    pub fn handovers(&self) -> Vec<(String, Vec<u8>)> {
        self.layer.handovers.lock().unwrap().clone()
    }

    /// The distinct files the bank got, by id, each with every transaction id it holds.
    pub fn files(&self) -> BTreeMap<String, Vec<String>> {
        self.handovers()
            .into_iter()
            .map(|(id, bytes)| (id, instruction_ids(&String::from_utf8(bytes).unwrap())))
            .collect()
    }

    /// Instructions sent one by one, and requests whose signature was wrong.
    pub fn misuse(&self) -> (u32, u32) {
        (
            self.layer.instructions.load(Ordering::SeqCst),
            self.layer.bad_signatures.load(Ordering::SeqCst),
        )
    }

    /// Makes the bank answer a handover `ms` after taking its file.
    pub fn answer_after(&self, ms: u64) {
        self.layer.answer_after_ms.store(ms, Ordering::SeqCst);
    }
}

/// The `InstrId`s of a pain.001, in order: the service's transaction ids.
pub fn instruction_ids(pain001: &str) -> Vec<String> {
    pain001
        .split("<InstrId>")
        .skip(1)
        .map(|rest| rest.split("</InstrId>").next().unwrap().to_owned())
        .collect()
}

fn signed(layer: &Layer, headers: &HeaderMap, body: &[u8]) -> bool {
    let header = headers
        .get("x-service-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let ok = signature_is_valid(header, body, RAIL_SECRET);
    if !ok {
        layer.bad_signatures.fetch_add(1, Ordering::SeqCst);
    }
    ok
}

async fn take_file(
    State(layer): State<Arc<Layer>>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let id = query.get("file_id").cloned().unwrap_or_default();
    layer.handovers.lock().unwrap().push((id.clone(), body.to_vec()));
    let wait = layer.answer_after_ms.load(Ordering::SeqCst);
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
    (
        StatusCode::OK,
        Json(json!({"result": "accepted", "rail_reference": format!("BANK-{id}")})),
    )
}

async fn file_status(State(layer): State<Arc<Layer>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    let asked: Value = serde_json::from_slice(&body).unwrap();
    let id = asked["file_id"].as_str().unwrap_or_default();
    let has = layer.handovers.lock().unwrap().iter().any(|(taken, _)| taken == id);
    let answer = match has {
        true => json!({"state": "received", "rail_reference": format!("BANK-{id}")}),
        false => json!({"state": "not_found"}),
    };
    (StatusCode::OK, Json(answer))
}

async fn status(State(layer): State<Arc<Layer>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    if !signed(&layer, &headers, &body) {
        return (StatusCode::UNAUTHORIZED, Json(json!({})));
    }
    (StatusCode::OK, Json(json!({"state": "pending"})))
}

async fn submit(State(layer): State<Arc<Layer>>) -> (StatusCode, Json<Value>) {
    layer.instructions.fetch_add(1, Ordering::SeqCst);
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": "this bank takes files only"})),
    )
}
