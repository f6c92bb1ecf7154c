//! Transactions, and the rail reports that move them.

use super::*;
use crate::duplicates::{read_json, BodyJson};
use crate::error::ApiError;
use crate::extract::{parse, Caller, JsonBody, PathId, RawBody};
use crate::idempotency::{json_response, replayed, stored};
use crate::wire::to_json;
use crate::App;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use ops_domain::idempotency::Once;
use ops_domain::ids::{BankFileId, CustomerId, IdKind, OperationId, TransactionId};
use ops_domain::transactions::TransactionStatus;
use ops_domain::DomainError;

/// `GET /v1/transactions?operation_id=<op>`: an operation's; or, across operations,
/// `?status=unknown|needs_attention[&customer_id=][&limit=][&starting_after=]`.
pub async fn list_transactions(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Transaction, &["operation_id", "status"])?;
    let operation = params.filters.iter().find(|(name, _)| name == "operation_id");
    let status = params.filters.iter().find(|(name, _)| name == "status");
    match (operation, status) {
        (Some((_, raw)), None) => {
            let paged = params.starting_after.is_some() || params.customer_id.is_some();
            if paged {
                let param = if params.customer_id.is_some() {
                    "customer_id"
                } else {
                    "starting_after"
                };
                let message = "An operation's transactions come in one page, with no other parameter.";
                return Err(DomainError::invalid(param, "invalid_filter", message).into());
            }
            let operation_id =
                OperationId::parse(raw).ok_or_else(|| DomainError::not_found("operation", raw.clone()))?;
            ok(app.service.list_transactions(&caller, &operation_id).await?)
        }
        (None, Some((_, raw))) => {
            let status = TransactionStatus::parse(raw)
                .ok_or_else(|| DomainError::invalid("status", "invalid_status", format!("Unknown status '{raw}'.")))?;
            let page = app
                .service
                .watched_transactions(
                    &caller,
                    status,
                    params.customer_id.map(CustomerId::from),
                    params.starting_after.map(TransactionId::from),
                    params.limit,
                )
                .await?;
            ok(page)
        }
        (Some(_), Some(_)) => {
            Err(DomainError::invalid("status", "invalid_filter", "Give operation_id or status, not both.").into())
        }
        (None, None) => Err(DomainError::missing("operation_id").into()),
    }
}

pub async fn get_transaction(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<TransactionId>,
) -> Answer {
    ok(app.service.get_transaction(&caller, &id).await?)
}

/// `POST /v1/transactions/{id}/cancel`: takes a transaction out of its file rail's file before
/// the cut-off.
pub async fn cancel_transaction(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<TransactionId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.cancel_transaction(&caller, &id, parse(&body)?).await?)
}

/// `GET /v1/bank_files/{id}[?format=pain.001]`: a file rail's file, or the pain.001 it is.
pub async fn get_bank_file(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<BankFileId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let pairs = query_pairs(raw.as_deref(), &["format"])?;
    match pairs.first().map(|(_, value)| value.as_str()) {
        None => ok(app.service.get_bank_file(&caller, &id).await?),
        Some("pain.001") => {
            let pain001 = app.service.bank_file_content(&caller, &id).await?;
            Ok((
                [(axum::http::header::CONTENT_TYPE, "application/xml; charset=utf-8")],
                pain001,
            )
                .into_response())
        }
        Some(other) => Err(DomainError::invalid(
            "format",
            "invalid_format",
            format!("A bank file is JSON, or its pain.001 with format=pain.001; not '{other}'."),
        )
        .into()),
    }
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
