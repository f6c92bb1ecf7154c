//! Idempotent creates at the edge: the `Idempotency-Key` header read and checked,
//! the request fingerprinted, and the domain's protocol ([`Service::once`]) run with this
//! edge's wire shape as the response it stores and replays byte for byte.
//!
//! [`Service::once`]: ops_domain::service::Service::once

use crate::error::ApiError;
use crate::extract::CreateBody;
use crate::wire::{to_json, Stored};
use crate::App;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ops_domain::access::Principal;
use ops_domain::idempotency::{self, IdempotencyClaim, Once, StoredResponse, Ticket};
use ops_domain::DomainError;
use std::future::Future;

const MAX_KEY_LENGTH: usize = 255;
const HEADER: &str = "Idempotency-Key";

pub fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// A stored answer sent again, marked as such.
pub fn replayed(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = json_response(status, stored.body);
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

/// The request's `Idempotency-Key`: present, and 1 to 255 printable characters.
fn idempotency_key(headers: &HeaderMap) -> Result<String, DomainError> {
    let key = headers
        .get("idempotency-key")
        .map(|v| v.to_str().unwrap_or("\u{0}"))
        .ok_or_else(|| {
            DomainError::invalid(
                HEADER,
                "idempotency_key_missing",
                "This request creates a resource: send an Idempotency-Key header.",
            )
        })?;
    if key.is_empty()
        || key.len() > MAX_KEY_LENGTH
        || key
            .chars()
            .any(|c| c.is_control() || ops_domain::validate::is_invisible_or_bidi(c))
    {
        return Err(DomainError::invalid(
            HEADER,
            "idempotency_key_invalid",
            format!("{HEADER} must be 1 to {MAX_KEY_LENGTH} printable characters."),
        ));
    }
    Ok(key.to_owned())
}

/// `status` and the wire shape of `made` (its secret withheld), as a replay will send them.
pub fn stored<T: Stored>(status: StatusCode) -> impl Fn(&T) -> StoredResponse + Send + 'static {
    move |made| StoredResponse {
        status: status.as_u16(),
        body: made.stored_json(),
    }
}

/// Runs `create` at most once per idempotency key and request, answering 201 with what it
/// made. `permission` (the caller's right to create) is settled before anything, a replay
/// included: a stored response is no way around a permission. The request's path as routed
/// and its body are what the key stands for.
pub async fn create_once<T, F, Fut, const LIMIT: usize>(
    app: &App,
    principal: &Principal,
    permission: Result<(), DomainError>,
    request: &CreateBody<LIMIT>,
    create: F,
) -> Result<Response, ApiError>
where
    T: Stored,
    F: FnOnce(Option<Ticket<T>>) -> Fut,
    Fut: Future<Output = Result<T, DomainError>>,
{
    let fingerprint = idempotency::fingerprint("POST", &request.path, &request.body);
    run_once(
        app,
        principal,
        permission,
        &request.headers,
        fingerprint,
        StatusCode::CREATED,
        create,
    )
    .await
}

/// [`create_once`] for any request, identified by `fingerprint`, answering `status`.
pub async fn run_once<T, F, Fut>(
    app: &App,
    principal: &Principal,
    permission: Result<(), DomainError>,
    headers: &HeaderMap,
    fingerprint: String,
    status: StatusCode,
    create: F,
) -> Result<Response, ApiError>
where
    T: Stored,
    F: FnOnce(Option<Ticket<T>>) -> Fut,
    Fut: Future<Output = Result<T, DomainError>>,
{
    permission?;
    let claim = IdempotencyClaim {
        scope: principal.idempotency_scope(),
        key: idempotency_key(headers)?,
        fingerprint,
        now: app.service.clock.now(),
    };
    let once = app
        .service
        .once(
            claim,
            T::KEY_HOLD,
            stored(status),
            DomainError::IdempotencyKeyReused,
            |ticket| create(Some(ticket)),
        )
        .await?;
    Ok(match once {
        Once::Done(made) => json_response(status, to_json(&made)),
        Once::Replayed(stored) => replayed(stored),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        let with = |key: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("idempotency-key", HeaderValue::from_str(key).unwrap());
            idempotency_key(&headers)
        };
        assert!(idempotency_key(&HeaderMap::new()).is_err());
        assert!(with("").is_err());
        assert!(with(&"k".repeat(256)).is_err());
        assert!(with("a\tb").is_err());
        assert_eq!(with("order-42").unwrap(), "order-42");
    }
}
