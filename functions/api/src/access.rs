//! The outermost layer of every router: each request's id, the line it leaves in the log, and
//! the headers every answer carries.

use crate::extract::{AllowanceSlot, ClientAddress};
use axum::extract::Request;
use axum::http::header::{CACHE_CONTROL, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use ops_domain::access::Principal;
use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
use std::sync::LazyLock;
use std::time::Instant;
use tracing::field::{display, Empty};
use tracing::Instrument;

tokio::task_local! {
    static REQUEST_ID: String;
}

static REQUEST_IDS: LazyLock<UlidGenerator> = LazyLock::new(UlidGenerator::default);

/// The id of the request being answered (empty outside one).
pub(crate) fn request_id() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_default()
}

/// Names the authenticated caller in the request's log lines: its key's id, and its customer
/// and user where it has them (never the secret).
pub(crate) fn record_caller(principal: &Principal) {
    let span = tracing::Span::current();
    span.record("key", display(&principal.key.id));
    if let Some(customer) = &principal.key.customer_id {
        span.record("customer", display(customer));
    }
    if let Some(user) = &principal.user {
        span.record("user", display(&user.id));
    }
}

/// Gives every request an id, echoed in the `Request-Id` header and in error bodies, and
/// carried by every line logged while it is answered, so a customer's support ticket points at
/// its lines: the last, target `ops_api::access`, says what was answered and how long it took.
/// Keeps every answer out of caches (`Cache-Control: no-store`: answers hold balances,
/// customers' data and, once, new secrets) and from being read as anything but its declared
/// type (`X-Content-Type-Options: nosniff`). An answer to a key held to a rate says how much
/// of it is left ([`rate_limit_headers`]).
pub async fn identify(mut request: Request, next: Next) -> Response {
    let id = REQUEST_IDS.new_id(IdKind::Request);
    let started = Instant::now();
    let span = tracing::info_span!("request", id = %id, key = Empty, customer = Empty, user = Empty);
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let client = request.extensions().get::<ClientAddress>().map(|ClientAddress(ip)| *ip);
    let allowance = AllowanceSlot::default();
    request.extensions_mut().insert(allowance.clone());
    let mut response = REQUEST_ID
        .scope(id.clone(), next.run(request))
        .instrument(span.clone())
        .await;
    tracing::info!(
        target: "ops_api::access",
        parent: &span,
        %method,
        %path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_micros() as f64 / 1000.0,
        client = client.map(display),
        "answered"
    );
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&id) {
        headers.insert("request-id", value);
    }
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Some(allowance) = allowance.0.get() {
        rate_limit_headers(headers, allowance.limit, allowance.remaining);
    }
    response
}

/// `RateLimit-Limit`, `-Remaining` and `-Reset` (the IETF httpapi draft's fields, as GitHub
/// and Stripe-like APIs send them): the requests a second the key may make, how many are left
/// in this second, and the seconds until the next, always 1 (windows are whole seconds).
pub(crate) fn rate_limit_headers(headers: &mut HeaderMap, limit: u32, remaining: u32) {
    headers.insert("ratelimit-limit", HeaderValue::from(limit));
    headers.insert("ratelimit-remaining", HeaderValue::from(remaining));
    headers.insert("ratelimit-reset", HeaderValue::from_static("1"));
}
