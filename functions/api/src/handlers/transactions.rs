//! Transactions, and the rail reports that move them.

use super::*;
use crate::duplicates::{read_json, BodyJson};
use crate::error::ApiError;
use crate::extract::{parse, query_pairs, Caller, JsonBody, PathId, RawBody};
use crate::idempotency::{json_response, replayed, stored};
use crate::wire::to_json;
use crate::App;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use ops_domain::idempotency::Once;
use ops_domain::ids::{OperationId, TransactionId};
use ops_domain::DomainError;

pub async fn list_transactions(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let pairs = query_pairs(raw.as_deref(), &["operation_id"])?;
    let raw = pairs
        .into_iter()
        .map(|(_, value)| value)
        .next()
        .ok_or_else(|| DomainError::missing("operation_id"))?;
    let operation_id = OperationId::parse(&raw).ok_or_else(|| DomainError::not_found("operation", raw))?;
    ok(app.service.list_transactions(&caller, &operation_id).await?)
}

pub async fn get_transaction(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<TransactionId>,
) -> Answer {
    ok(app.service.get_transaction(&caller, &id).await?)
}

pub async fn retry_transaction(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<TransactionId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.retry_transaction(&caller, &id, parse(&body)?).await?)
}

pub async fn resolve_transaction(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<TransactionId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.resolve_transaction(&caller, &id, parse(&body)?).await?)
}

/// Signed by the connectivity layer (no API key): the signature covers the exact bytes.
pub async fn rail_report(State(app): State<App>, headers: HeaderMap, RawBody(bytes): RawBody) -> Answer {
    let header = headers
        .get(ops_domain::webhooks::signature::HEADER)
        .and_then(|v| v.to_str().ok());
    let parse_report = || {
        let value = read_json(&bytes).map_err(|error| match error {
            BodyJson::Invalid(e) => {
                DomainError::invalid("body", "invalid_json", format!("The body is not valid JSON: {e}"))
            }
            BodyJson::RepeatedKey(path) => crate::extract::repeated_key(path),
        })?;
        parse(&value).map_err(|e| match e {
            ApiError::Domain(domain) => domain,
            other => DomainError::invalid("body", "invalid_body", other.to_string()),
        })
    };
    let answer = app
        .service
        .accept_rail_report(header, &bytes, parse_report, stored(StatusCode::OK))
        .await?;
    Ok(match answer {
        Once::Done(transaction) => json_response(StatusCode::OK, to_json(&transaction)),
        Once::Replayed(stored) => replayed(stored),
    })
}
