//! Customers, their users and API keys.

use super::*;
use crate::extract::{parse, Caller, CreateBody, JsonBody, PathId, PathParam, PathParams};
use crate::idempotency::{create_once, json_response};
use crate::wire::to_json;
use crate::App;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use ops_domain::access::require_platform_admin;
use ops_domain::access::{CustomerStatus, Scope};
use ops_domain::ids::{ApiKeyId, CustomerId, IdKind, UserId};
use ops_domain::DomainError;

pub async fn create_customer(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, require_platform_admin(&caller), &request, |ticket| {
        app.service.create_customer(&caller, command, ticket)
    })
    .await
}

pub async fn create_user(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(customer_id): PathParam,
    request: CreateBody,
) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, caller.require(Scope::UsersManage), &request, |ticket| {
        app.service.create_user(&caller, &customer_id, command, ticket)
    })
    .await
}

pub async fn list_customers(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let (starting_after, limit, filters) = page_filtered_by::<CustomerId>(raw.as_deref(), &["status"])?;
    let mut status = None;
    for (name, value) in filters {
        let unknown = || format!("Unknown status '{value}': active or suspended.");
        status =
            Some(CustomerStatus::parse(&value).ok_or_else(|| DomainError::invalid(name, "invalid_status", unknown()))?);
    }
    ok(app
        .service
        .list_customers(&caller, status, starting_after, limit)
        .await?)
}

pub async fn get_customer(State(app): State<App>, Caller(caller): Caller, PathParam(id): PathParam) -> Answer {
    ok(app.service.get_customer(&caller, &id).await?)
}

pub async fn update_customer(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(id): PathParam,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.update_customer(&caller, &id, parse(&body)?).await?)
}

pub async fn customer_history(State(app): State<App>, Caller(caller): Caller, PathParam(id): PathParam) -> Answer {
    ok(app.service.customer_history(&caller, &id).await?)
}

pub async fn list_users(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(customer_id): PathParam,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (starting_after, limit) = page_of::<UserId>(raw.as_deref())?;
    ok(app
        .service
        .list_users(&caller, &customer_id, starting_after, limit)
        .await?)
}

pub async fn get_user(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
) -> Answer {
    ok(app.service.get_user(&caller, &customer_id, &user_id).await?)
}

pub async fn update_user(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app
        .service
        .update_user(&caller, &customer_id, &user_id, parse(&body)?)
        .await?)
}

/// Hands the user's named approval places to a colleague for a period.
pub async fn delegate_approvals(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app
        .service
        .delegate_approvals(&caller, &customer_id, &user_id, parse(&body)?)
        .await?)
}

pub async fn end_delegation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
) -> Answer {
    ok(app.service.end_delegation(&caller, &customer_id, &user_id).await?)
}

pub async fn user_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
) -> Answer {
    ok(app.service.user_history(&caller, &customer_id, &user_id).await?)
}

pub async fn create_api_key(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, caller.require(Scope::UsersManage), &request, |ticket| {
        app.service.create_api_key(&caller, command, ticket)
    })
    .await
}

/// Rotation makes a key, so an `Idempotency-Key` makes retries safe; without one each call
/// rotates again.
pub async fn rotate_api_key(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ApiKeyId>,
    request: CreateBody,
) -> Answer {
    let command = parse(&request.body)?;
    if request.headers.contains_key("idempotency-key") {
        // A key may rotate itself; rotating another takes users:manage, replays included.
        let permission = match caller.key.id == id {
            true => Ok(()),
            false => caller.require(Scope::UsersManage),
        };
        return create_once(&app, &caller, permission, &request, |ticket| {
            app.service.rotate_api_key(&caller, &id, command, ticket)
        })
        .await;
    }
    let created = app.service.rotate_api_key(&caller, &id, command, None).await?;
    Ok(json_response(StatusCode::CREATED, to_json(&created)))
}

pub async fn revoke_api_key(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ApiKeyId>) -> Answer {
    ok(app.service.revoke_api_key(&caller, &id).await?)
}

pub async fn api_key_history(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ApiKeyId>) -> Answer {
    ok(app.service.api_key_history(&caller, &id).await?)
}

pub async fn list_api_keys(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::ApiKey, &[])?;
    let starting_after = params.starting_after.map(ApiKeyId::from);
    ok(app
        .service
        .list_api_keys(&caller, params.customer_id, starting_after, params.limit)
        .await?)
}
