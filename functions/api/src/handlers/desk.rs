//! The work queues and the operations board.

use super::*;
use crate::error::ApiError;
use crate::extract::{parse, query_pairs, Caller, JsonBody, PathId};
use crate::App;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use ops_domain::desk::{Assignee, Queue, WorkItemQuery, WorkItemStatus};
use ops_domain::ids::{CustomerId, IdKind, WorkItemId};
use ops_domain::DomainError;

/// Work items oldest due first: `queue`, `status`, `assignee` (`me`, `unassigned` or an id) and
/// `customer_id` filters.
pub async fn list_work_items(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::WorkItem, &["queue", "status", "assignee"])?;
    let mut query = WorkItemQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(WorkItemId::from),
        limit: params.limit,
        ..WorkItemQuery::default()
    };
    for (name, value) in params.filters {
        let bad = |code, message: String| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "queue" => {
                query.queue = Some(Queue::parse(&value).ok_or_else(|| {
                    bad(
                        "invalid_queue",
                        format!("Unknown queue '{value}'; the queues are approvals and exceptions."),
                    )
                })?)
            }
            "status" => {
                query.status = Some(
                    WorkItemStatus::parse(&value)
                        .ok_or_else(|| bad("invalid_status", format!("Unknown status '{value}'.")))?,
                )
            }
            _ => {
                query.assignee = Some(match value.as_str() {
                    "me" => Assignee::Holder(caller.actor().id),
                    "unassigned" => Assignee::Unassigned,
                    id if IdKind::User.matches(id) || IdKind::ApiKey.matches(id) => Assignee::Holder(id.to_owned()),
                    _ => {
                        return Err(bad(
                            "invalid_assignee",
                            format!("'{value}' is not me, unassigned, or a user id."),
                        ))
                    }
                })
            }
        }
    }
    ok(app.service.list_work_items(&caller, query).await?)
}

pub async fn get_work_item(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<WorkItemId>) -> Answer {
    ok(app.service.get_work_item(&caller, &id).await?)
}

pub async fn claim_work_item(State(app): State<App>, Caller(caller): Caller, JsonBody(body): JsonBody) -> Answer {
    ok(app.service.claim_work_item(&caller, parse(&body)?).await?)
}

pub async fn assign_work_item(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WorkItemId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.assign_work_item(&caller, &id, parse(&body)?).await?)
}

pub async fn release_work_item(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WorkItemId>,
) -> Answer {
    ok(app.service.release_work_item(&caller, &id).await?)
}

/// Works an exceptions item by its subject's remedy: redrive, resend or acknowledge.
pub async fn resolve_work_item(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WorkItemId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.resolve_work_item(&caller, &id, parse(&body)?).await?)
}

/// The operations board: a customer's (`customer_id`, or the caller's own), or the platform's.
pub async fn board(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    ok(app.service.board(&caller, customer_of(raw.as_deref())?).await?)
}

/// The `customer_id` a query names, if any.
fn customer_of(raw: Option<&str>) -> Result<Option<CustomerId>, ApiError> {
    let mut customer_id = None;
    for (name, value) in query_pairs(raw, &["customer_id"])? {
        if !IdKind::Customer.matches(&value) {
            return Err(DomainError::invalid(name, "invalid_id", format!("'{value}' is not a customer id.")).into());
        }
        customer_id = Some(CustomerId::from(value));
    }
    Ok(customer_id)
}

/// The board's charts: a customer's (`customer_id`, or the caller's own), or the platform's.
pub async fn charts(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    ok(app.service.charts(&caller, customer_of(raw.as_deref())?).await?)
}

/// The operations console: one HTML page (its script reads the API with the key the operator
/// types, kept in the tab's session only). The page needs no key; everything it shows does.
pub async fn console_page() -> Response {
    use axum::http::header;
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, crate::console_policy()),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        crate::CONSOLE_PAGE,
    )
        .into_response()
}

/// The board's old address: the console, which holds the board, moved.
pub async fn board_page() -> Response {
    axum::response::Redirect::permanent("/console").into_response()
}
