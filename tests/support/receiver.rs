//! A real HTTP webhook receiver for tests, with its own signature check (independent of the
//! service's code) and a switch to answer 503 for a while.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub struct Received {
    pub signature: String,
    pub body: Vec<u8>,
    /// When it arrived, by the wall clock.
    pub at: std::time::SystemTime,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("webhook body is JSON")
    }
}

#[derive(Default)]
struct Inbox {
    received: Mutex<Vec<Received>>,
    requests: AtomicUsize,
    refuse_first: AtomicUsize,
    /// Requests answered only after this long, counted from the first.
    slow_first: AtomicUsize,
    /// Every request is held open and never answered.
    hangs: std::sync::atomic::AtomicBool,
    /// Requests held open and never answered, counted from the first.
    hang_first: AtomicUsize,
    /// Microseconds every request waits before its answer (a receiver across a network).
    latency_us: AtomicU64,
    /// The wait varies from request to request, from none to twice `latency_us`.
    latency_varies: std::sync::atomic::AtomicBool,
    /// Every request is answered `410 Gone`.
    gone: std::sync::atomic::AtomicBool,
}

/// How long a slow receiver takes to answer.
pub const SLOW: std::time::Duration = std::time::Duration::from_millis(1500);

pub struct Receiver {
    pub url: String,
    inbox: Arc<Inbox>,
}

async fn hook(State(inbox): State<Arc<Inbox>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = inbox.requests.fetch_add(1, Ordering::SeqCst);
    if inbox.hangs.load(Ordering::SeqCst) || n < inbox.hang_first.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    if inbox.gone.load(Ordering::SeqCst) {
        return StatusCode::GONE;
    }
    if n < inbox.refuse_first.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    if n < inbox.slow_first.load(Ordering::SeqCst) {
        tokio::time::sleep(SLOW).await;
    }
    let mut latency = inbox.latency_us.load(Ordering::Relaxed);
    if inbox.latency_varies.load(Ordering::Relaxed) {
        // Spread evenly over 0..=2× by the request's number (Knuth's multiplicative hash), so
        // every run waits the same.
        latency = latency * ((n as u64).wrapping_mul(2_654_435_761) % 2_001) / 1_000;
    }
    if latency > 0 {
        tokio::time::sleep(std::time::Duration::from_micros(latency)).await;
    }
    let signature = headers
        .get("x-service-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    inbox.received.lock().unwrap().push(Received {
        signature,
        body: body.to_vec(),
        at: std::time::SystemTime::now(),
    });
    StatusCode::OK
}

impl Receiver {
    /// Starts a receiver that answers 503 to its first `refuse_first` requests.
    pub async fn start(refuse_first: usize) -> Receiver {
        let inbox = Arc::new(Inbox::default());
        inbox.refuse_first.store(refuse_first, Ordering::SeqCst);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = axum::Router::new().route("/hook", post(hook)).with_state(inbox.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, inbox }
    }

    /// Answers `410 Gone` from now on: it wants nothing more.
    pub fn answer_gone(&self) {
        self.inbox.gone.store(true, Ordering::SeqCst);
    }

    /// Takes every request from now on, after refusing the first ones.
    pub fn answer_all(&self) {
        self.inbox.refuse_first.store(0, Ordering::SeqCst);
    }

    /// Makes the first `n` requests answer only after [`SLOW`].
    pub fn slow_first(&self, n: usize) {
        self.inbox.slow_first.store(n, Ordering::SeqCst);
    }

    /// Answers every request only after `latency`, as a receiver across a network does.
    pub fn answer_after(&self, latency: std::time::Duration) {
        self.inbox
            .latency_us
            .store(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// Answers each request after anything from none to twice `mean`, spread evenly, as a
    /// receiver across a network whose requests take more or less time does.
    pub fn answer_after_about(&self, mean: std::time::Duration) {
        self.answer_after(mean);
        self.inbox.latency_varies.store(true, Ordering::Relaxed);
    }

    /// Holds every request open without an answer, as a receiver that hangs does.
    pub fn hang(&self) {
        self.inbox.hangs.store(true, Ordering::SeqCst);
    }

    /// Answers again after [`Receiver::hang`] (requests already held stay held).
    pub fn answer_again(&self) {
        self.inbox.hangs.store(false, Ordering::SeqCst);
    }

    /// Holds the first `n` requests open without an answer; the rest are answered.
    pub fn hang_first(&self, n: usize) {
        self.inbox.hang_first.store(n, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.inbox.received.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.inbox.requests.load(Ordering::SeqCst)
    }
}

/// Verifies `X-Service-Signature: t=…,v1=…` the way a customer would: HMAC-SHA256 over
/// "<t>.<body>" keyed with the whole `whsec_` secret, any `v1` matching.
pub fn signature_is_valid(header: &str, body: &[u8], secret: &str) -> bool {
    let mut timestamp = None;
    let mut candidates = vec![];
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", t)) => timestamp = Some(t.to_owned()),
            Some(("v1", v)) => candidates.push(v.to_owned()),
            _ => {}
        }
    }
    let Some(timestamp) = timestamp else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    let expected = hex::encode(mac.finalize().into_bytes());
    candidates.contains(&expected)
}
