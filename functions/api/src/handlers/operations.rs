//! Operations: create, read, list, decide, cancel, history.

use super::*;
use crate::error::ApiError;
use crate::extract::{parse, Caller, CreateBody, JsonBody, PathId};
use crate::idempotency::create_once;
use crate::wire::Decided;
use crate::App;
use axum::extract::{RawQuery, State};
use ops_domain::access::Scope;
use ops_domain::ids::{CustomerId, IdKind, OperationId};
use ops_domain::operations::{Decision, OperationStatus, OperationType};
use ops_domain::operations::{FindBy, OperationFind, OperationQuery, MAX_FINDING_VALUE};
use ops_domain::service::Page;
use ops_domain::DomainError;

pub async fn create_operation(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &request,
        |ticket| app.service.create_operation(&caller, command, ticket),
    )
    .await
}

/// A reversal makes an operation, so an `Idempotency-Key` makes retries safe, as for a create.
pub async fn reverse_operation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
    request: CreateBody,
) -> Answer {
    let command = parse(&request.body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &request,
        |ticket| app.service.reverse_operation(&caller, &id, command, ticket),
    )
    .await
}

pub async fn get_operation(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<OperationId>) -> Answer {
    ok(app.service.get_operation(&caller, &id).await?)
}

pub async fn list_operations(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(
        raw.as_deref(),
        IdKind::Operation,
        &[
            "status",
            "type",
            "created_from",
            "created_to",
            "amount_min",
            "amount_max",
            "rail_reference",
            "item_reference",
            "beneficiary_id",
        ],
    )?;
    let lookup = params
        .filters
        .iter()
        .find_map(|(name, value)| FindBy::parse(name).map(|by| (by, name, value)));
    if let Some((by, name, value)) = lookup {
        if let Some((other, _)) = params.filters.iter().find(|(other, _)| other != name) {
            return Err(DomainError::invalid(
                other.clone(),
                "invalid_filter",
                format!("{name} is an exact lookup: it takes no other filter than customer_id."),
            )
            .into());
        }
        let value = ops_domain::text::required_text(Some(value.clone()), name, MAX_FINDING_VALUE)?;
        let find = OperationFind {
            by,
            value,
            customer_id: params.customer_id.map(CustomerId::from),
            after: None,
            limit: params.limit,
        };
        let starting_after = params.starting_after.map(OperationId::from);
        return ok(app.service.find_operations(&caller, find, starting_after).await?);
    }
    let mut query = OperationQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        limit: params.limit,
        starting_after: params.starting_after.map(OperationId::from),
        ..Default::default()
    };
    let mut created_to = None;
    for (name, value) in params.filters {
        let bad = |code, message: String| ApiError::from(DomainError::invalid(name.clone(), code, message));
        let instant = || {
            time::OffsetDateTime::parse(&value, &time::format_description::well_known::Rfc3339).map_err(|_| {
                bad(
                    "invalid_time",
                    format!("{name} is an RFC 3339 time, like 2026-12-07T00:00:00Z."),
                )
            })
        };
        let minor_units = || {
            value.parse::<i64>().ok().filter(|amount| *amount >= 0).ok_or_else(|| {
                bad(
                    "invalid_amount",
                    format!("{name} is a whole number of minor units, 0 or more."),
                )
            })
        };
        match name.as_str() {
            "status" => {
                let status = OperationStatus::parse(&value)
                    .ok_or_else(|| bad("invalid_status", format!("Unknown status '{value}'.")))?;
                query.status = Some(status);
            }
            "created_from" => query.created_from = Some(IdKind::Operation.first_made_at(instant()?).into()),
            "created_to" => created_to = Some(instant()?),
            "amount_min" => query.min_amount = Some(minor_units()?),
            "amount_max" => query.max_amount = Some(minor_units()?),
            _ => {
                let kind = OperationType::parse(&value)
                    .ok_or_else(|| bad("invalid_type", format!("Unknown type '{value}'.")))?;
                query.kind = Some(kind);
            }
        }
    }
    if let (Some(min), Some(max)) = (query.min_amount, query.max_amount) {
        if min > max {
            let message = "amount_max is below amount_min: no operation is in that range.";
            return Err(DomainError::invalid("amount_max", "invalid_amount", message).into());
        }
    }
    // Made before `created_to`: below the first id made then, as a page is below its start.
    if let Some(to) = created_to {
        let bound = OperationId::from(IdKind::Operation.first_made_at(to));
        if query.created_from.as_ref().is_some_and(|from| *from >= bound) {
            let message = "created_to is not after created_from: no operation is in that window.";
            return Err(DomainError::invalid("created_to", "invalid_time", message).into());
        }
        query.starting_after = Some(match query.starting_after.take() {
            Some(after) if after < bound => after,
            _ => bound,
        });
    }
    ok(app.service.list_operations(&caller, query).await?)
}

pub async fn approve_operation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.approve_operation(&caller, &id, parse(&body)?).await?)
}

pub async fn reject_operation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.reject_operation(&caller, &id, parse(&body)?).await?)
}

/// Each id's answer: its status code and the operation decided, or the error that refused it.
async fn decide_many(
    app: &App,
    caller: &ops_domain::access::Principal,
    decision: Decision,
    body: &serde_json::Value,
) -> Answer {
    let answers = app.service.decide_many(caller, decision, parse(body)?).await?;
    let decided = answers
        .into_iter()
        .map(|(id, answer)| Decided {
            id,
            answer: answer.map_err(|error| {
                let (status, body) = ApiError::from(error).into_status_and_body();
                (status.as_u16(), body)
            }),
        })
        .collect();
    ok(Page::all(decided))
}

pub async fn approve_operations(State(app): State<App>, Caller(caller): Caller, JsonBody(body): JsonBody) -> Answer {
    decide_many(&app, &caller, Decision::Approved, &body).await
}

pub async fn reject_operations(State(app): State<App>, Caller(caller): Caller, JsonBody(body): JsonBody) -> Answer {
    decide_many(&app, &caller, Decision::Rejected, &body).await
}

pub async fn cancel_operation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.cancel_operation(&caller, &id, parse(&body)?).await?)
}

pub async fn operation_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
) -> Answer {
    ok(app.service.operation_history(&caller, &id).await?)
}
