//! Approval floors and workflows.

use super::*;
use crate::extract::{parse, Caller, CustomerQuery, JsonBody, PathParam, PathParams};
use crate::App;
use axum::extract::RawQuery;
use axum::extract::State;
use ops_domain::approvals::{self, WorkflowDefinition};

pub async fn get_approval_floor(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, kind): PathParams,
) -> Answer {
    ok(app.service.get_approval_floor(&caller, &customer_id, &kind).await?)
}

pub async fn approval_floor_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, kind): PathParams,
) -> Answer {
    ok(app.service.approval_floor_history(&caller, &customer_id, &kind).await?)
}

pub async fn put_approval_floor(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, kind): PathParams,
    JsonBody(body): JsonBody,
) -> Answer {
    let definition: WorkflowDefinition = parse(&body)?;
    ok(app
        .service
        .put_approval_floor(&caller, &customer_id, &kind, definition)
        .await?)
}

/// `GET /v1/workflows[?customer_id=][&limit=][&starting_after=<name>]`: by name.
pub async fn list_workflows(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let (mut customer_id, mut starting_after, mut limit) = (None, None, 10);
    for (name, value) in query_pairs(raw.as_deref(), &["customer_id", "limit", "starting_after"])? {
        match name.as_str() {
            "customer_id" => customer_id = Some(value),
            "limit" => limit = page_limit(&value)?,
            _ if approvals::valid_name(&value) => starting_after = Some(value),
            _ => return Err(approvals::name_refused(&name, "invalid_workflow_name").into()),
        }
    }
    ok(app
        .service
        .list_workflows(&caller, customer_id.as_deref(), starting_after.as_deref(), limit)
        .await?)
}

pub async fn get_workflow(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(name): PathParam,
    CustomerQuery(customer_id): CustomerQuery,
) -> Answer {
    ok(app.service.get_workflow(&caller, &name, customer_id.as_deref()).await?)
}

pub async fn workflow_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(name): PathParam,
    CustomerQuery(customer_id): CustomerQuery,
) -> Answer {
    ok(app
        .service
        .workflow_history(&caller, &name, customer_id.as_deref())
        .await?)
}

pub async fn put_workflow(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(name): PathParam,
    CustomerQuery(customer_id): CustomerQuery,
    JsonBody(body): JsonBody,
) -> Answer {
    let definition: WorkflowDefinition = parse(&body)?;
    ok(app
        .service
        .put_workflow(&caller, &name, customer_id.as_deref(), definition)
        .await?)
}
