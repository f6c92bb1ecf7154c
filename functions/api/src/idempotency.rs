//! Idempotent creates (DESIGN §3): claim the key before any effect, complete it with the
//! effect, replay the stored response byte for byte.

use crate::error::ApiError;
use crate::App;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ops_domain::access::Principal;
use ops_domain::idempotency::{self, ClaimOutcome, IdempotencyClaim, Ticket};
use ops_domain::DomainError;
use std::future::Future;

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

/// Runs `create` at most once per idempotency key and request. `create` gets the claimed key
/// to complete in its own store transaction and returns the 201 body. `permission` (the
/// caller's right to create) is settled before anything, a replay included: a stored response
/// is no way around a permission.
pub async fn create_once<F, Fut>(
    app: &App,
    principal: &Principal,
    permission: Result<(), DomainError>,
    headers: &HeaderMap,
    path: &str,
    body: &serde_json::Value,
    create: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(Option<Ticket>) -> Fut,
    Fut: Future<Output = Result<Vec<u8>, DomainError>>,
{
    permission?;
    let header = headers.get("idempotency-key").map(|v| v.to_str().unwrap_or("\u{0}"));
    let key = idempotency::check_key(header)?.to_owned();
    let store = &app.service.store;
    let claim = IdempotencyClaim {
        scope: principal.idempotency_scope(),
        key,
        fingerprint: idempotency::fingerprint("POST", path, body),
        now: app.service.clock.now(),
    };
    match store.claim_idempotency_key(&claim).await.map_err(DomainError::from)? {
        ClaimOutcome::Claimed => {
            let ticket = Ticket {
                scope: claim.scope.clone(),
                key: claim.key.clone(),
            };
            match create(Some(ticket)).await {
                Ok(body) => Ok(json_response(StatusCode::CREATED, body)),
                Err(error) => {
                    // Nothing was written: free the key so a corrected request can use it.
                    if let Err(release) = store.release_idempotency_key(&claim.scope, &claim.key).await {
                        tracing::warn!(%release, "could not release idempotency key; it frees itself after its claim timeout");
                    }
                    Err(error.into())
                }
            }
        }
        ClaimOutcome::Replay(stored) => {
            let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
            let mut response = json_response(status, stored.body);
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            Ok(response)
        }
        ClaimOutcome::InFlight => Err(DomainError::IdempotencyKeyInUse.into()),
        ClaimOutcome::Mismatch => Err(DomainError::IdempotencyKeyReused.into()),
    }
}
