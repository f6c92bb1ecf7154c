//! Accounts and their movements.

use super::*;
use crate::error::ApiError;
use crate::extract::{parse, Caller, CreateBody, PathId};
use crate::idempotency::create_once;
use crate::App;
use axum::extract::{RawQuery, State};
use ops_domain::access::require_platform_admin;
use ops_domain::ids::{AccountId, CustomerId, IdKind, MovementId};
use ops_domain::ledger::AccountQuery;
use ops_domain::money::Currency;
use ops_domain::DomainError;

pub async fn create_account(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, require_platform_admin(&caller), &request, |ticket| {
        app.service.create_account(&caller, command, ticket)
    })
    .await
}

pub async fn list_accounts(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Account, &["currency"])?;
    let mut query = AccountQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(AccountId::from),
        limit: params.limit,
        ..AccountQuery::default()
    };
    for (name, value) in params.filters {
        let currency = Currency::parse(&value).ok_or_else(|| {
            ApiError::from(DomainError::invalid(
                name,
                "invalid_currency",
                format!("'{value}' is not an ISO 4217 currency."),
            ))
        })?;
        query.currency = Some(currency);
    }
    ok(app.service.list_accounts(&caller, query).await?)
}

pub async fn get_account(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<AccountId>) -> Answer {
    ok(app.service.get_account(&caller, &id).await?)
}

/// The movements on an account, newest first.
pub async fn account_movements(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<AccountId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (starting_after, limit) = page_of::<MovementId>(raw.as_deref())?;
    ok(app
        .service
        .account_movements(&caller, &id, starting_after, limit)
        .await?)
}

pub async fn adjust_account(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<AccountId>,
    request: CreateBody,
) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, require_platform_admin(&caller), &request, |ticket| {
        app.service.adjust_account(&caller, &id, command, ticket)
    })
    .await
}
