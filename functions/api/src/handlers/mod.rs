//! One function per route, in a file per area as the domain has them. Each reads the request,
//! calls one use case and shapes the answer.

mod access;
mod approvals;
mod calendars;
mod desk;
mod files;
mod ledger;
mod limits;
mod operations;
mod reconciliations;
mod reports;
mod schedules;
mod transactions;
mod webhooks;

pub use access::*;
pub use approvals::*;
pub use calendars::*;
pub use desk::*;
pub use files::*;
pub use ledger::*;
pub use limits::*;
pub use operations::*;
pub use reconciliations::*;
pub use reports::*;
pub use schedules::*;
pub use transactions::*;
pub use webhooks::*;

use crate::error::ApiError;
use crate::extract::query_pairs;
use crate::idempotency::json_response;
use crate::wire::{to_json, Wire};
use crate::App;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ops_domain::ids::{IdKind, TypedId};
use ops_domain::DomainError;

type Answer = Result<Response, ApiError>;

fn ok(value: impl Wire) -> Answer {
    Ok(json_response(StatusCode::OK, to_json(&value)))
}

/// `GET /health`: 200 `ok` while the store answers, else 503 `unavailable`.
pub async fn health(State(app): State<App>) -> (StatusCode, Json<serde_json::Value>) {
    match app.service.store_answers().await {
        true => (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))),
        false => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "unavailable"})),
        ),
    }
}

pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        crate::openapi(),
    )
        .into_response()
}

pub async fn unknown_route(uri: Uri) -> ApiError {
    ApiError::UnknownRoute(uri.path().to_owned())
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The paging parameters every list takes, and the list's own filters as given.
struct ListParams {
    customer_id: Option<String>,
    limit: usize,
    starting_after: Option<String>,
    filters: Vec<(String, String)>,
}

/// Reads `customer_id`, `limit` (1–100, default 10) and `starting_after` (an id of `item`),
/// leaving the names in `filters` to the caller; anything else is refused.
fn list_params(raw: Option<&str>, item: IdKind, filters: &[&str]) -> Result<ListParams, ApiError> {
    let mut allowed = vec!["customer_id", "limit", "starting_after"];
    allowed.extend_from_slice(filters);
    let mut params = ListParams {
        customer_id: None,
        limit: 10,
        starting_after: None,
        filters: vec![],
    };
    for (name, value) in query_pairs(raw, &allowed)? {
        let bad = |code, message: String| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "customer_id" if IdKind::Customer.matches(&value) => params.customer_id = Some(value),
            "customer_id" => return Err(bad("invalid_id", format!("'{value}' is not a customer id."))),
            "starting_after" if item.could_have_made(&value) => params.starting_after = Some(value),
            "starting_after" => return Err(bad("invalid_id", not_a_cursor(&value, item))),
            "limit" => params.limit = page_limit(&value)?,
            _ => params.filters.push((name, value)),
        }
    }
    Ok(params)
}

/// A list's `limit`: 1 to 100.
fn page_limit(value: &str) -> Result<usize, ApiError> {
    match value.parse::<usize>() {
        Ok(limit) if (1..=100).contains(&limit) => Ok(limit),
        _ => Err(DomainError::invalid("limit", "invalid_limit", "limit is an integer from 1 to 100.").into()),
    }
}

fn not_a_cursor(value: &str, item: IdKind) -> String {
    format!(
        "'{value}' is not an id this list holds: they are {}_ and a 26-character lowercase ULID, as the list gives them.",
        item.prefix()
    )
}

/// A list under one resource, paged and not filtered: `starting_after` (an `Id`) and `limit`.
fn page_of<Id: TypedId>(raw: Option<&str>) -> Result<(Option<Id>, usize), ApiError> {
    let (starting_after, limit, _) = page_filtered_by(raw, &[])?;
    Ok((starting_after, limit))
}

/// A page's start and size, and the filters given, each as it was written.
type FilteredPage<Id> = (Option<Id>, usize, Vec<(String, String)>);

/// A paged list (as [`page_of`]) that also takes the `filters` named.
fn page_filtered_by<Id: TypedId>(raw: Option<&str>, filters: &[&str]) -> Result<FilteredPage<Id>, ApiError> {
    let (mut starting_after, mut limit, mut given) = (None, 10, vec![]);
    let allowed: Vec<&str> = ["limit", "starting_after"].iter().chain(filters).copied().collect();
    for (name, value) in query_pairs(raw, &allowed)? {
        let bad = |code, message: String| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "limit" => limit = page_limit(&value)?,
            "starting_after" => match Id::parse(&value).filter(|_| Id::KIND.could_have_made(&value)) {
                Some(id) => starting_after = Some(id),
                None => return Err(bad("invalid_id", not_a_cursor(&value, Id::KIND))),
            },
            _ => given.push((name, value)),
        }
    }
    Ok((starting_after, limit, given))
}
