//! One function per route. Each reads the request, calls one use case and shapes the answer.

use crate::duplicates::{read_json, BodyJson};
use crate::error::ApiError;
use crate::extract::{
    parse, query_pairs, Caller, CsvBody, JsonBody, PathId, PathParam, PathParams, RawBody, STATEMENT_BODY_BYTES,
};
use crate::idempotency::{create_once, json_response, replayed, run_once, stored};
use crate::wire::{to_json, Wire};
use crate::App;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ops_domain::access::require_platform_admin;
use ops_domain::access::{CustomerStatus, Scope};
use ops_domain::approvals::WorkflowDefinition;
use ops_domain::desk::{Assignee, Queue, WorkItemQuery, WorkItemStatus};
use ops_domain::files::{FileQuery, UploadFile};
use ops_domain::idempotency::{fingerprint_bytes, Once};
use ops_domain::ids::ReconciliationId;
use ops_domain::ids::{
    AccountId, ApiKeyId, CustomerId, DeliveryId, EventId, FileId, IdKind, MovementId, OperationId, ScheduleId,
    TransactionId, TypedId, UserId, WebhookEndpointId, WorkItemId,
};
use ops_domain::ledger::AccountQuery;
use ops_domain::money::Currency;
use ops_domain::operations::OperationQuery;
use ops_domain::operations::{Decision, OperationStatus, OperationType};
use ops_domain::schedules::ScheduleQuery;
use ops_domain::webhooks::{EventQuery, RecoverWebhookEndpoint};
use ops_domain::DomainError;

type Answer = Result<Response, ApiError>;

fn ok(value: impl Wire) -> Answer {
    Ok(json_response(StatusCode::OK, to_json(&value)))
}

pub async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
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

pub async fn create_customer(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        require_platform_admin(&caller),
        &headers,
        "/v1/customers",
        &body,
        |ticket| app.service.create_customer(&caller, command, ticket),
    )
    .await
}

pub async fn create_user(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(customer_id): PathParam,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    let path = format!("/v1/customers/{customer_id}/users");
    create_once(
        &app,
        &caller,
        caller.require(Scope::UsersManage),
        &headers,
        &path,
        &body,
        |ticket| app.service.create_user(&caller, &customer_id, command, ticket),
    )
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

pub async fn user_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParams(customer_id, user_id): PathParams,
) -> Answer {
    ok(app.service.user_history(&caller, &customer_id, &user_id).await?)
}

pub async fn create_api_key(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::UsersManage),
        &headers,
        "/v1/api_keys",
        &body,
        |ticket| app.service.create_api_key(&caller, command, ticket),
    )
    .await
}

/// Rotation makes a key, so an `Idempotency-Key` makes retries safe; without one each call
/// rotates again.
pub async fn rotate_api_key(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ApiKeyId>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    if headers.contains_key("idempotency-key") {
        let path = format!("/v1/api_keys/{id}/rotate");
        // A key may rotate itself; rotating another takes users:manage, replays included.
        let permission = match caller.key.id == id {
            true => Ok(()),
            false => caller.require(Scope::UsersManage),
        };
        return create_once(&app, &caller, permission, &headers, &path, &body, |ticket| {
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

pub async fn get_workflow(State(app): State<App>, Caller(caller): Caller, PathParam(name): PathParam) -> Answer {
    ok(app.service.get_workflow(&caller, &name).await?)
}

pub async fn workflow_history(State(app): State<App>, Caller(caller): Caller, PathParam(name): PathParam) -> Answer {
    ok(app.service.workflow_history(&caller, &name).await?)
}

pub async fn put_workflow(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(name): PathParam,
    JsonBody(body): JsonBody,
) -> Answer {
    let definition: WorkflowDefinition = parse(&body)?;
    ok(app.service.put_workflow(&caller, &name, definition).await?)
}

pub async fn create_operation(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &headers,
        "/v1/operations",
        &body,
        |ticket| app.service.create_operation(&caller, command, ticket),
    )
    .await
}

pub async fn get_operation(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<OperationId>) -> Answer {
    ok(app.service.get_operation(&caller, &id).await?)
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
            "starting_after" if item.matches(&value) => params.starting_after = Some(value),
            "starting_after" => return Err(bad("invalid_id", format!("'{value}' is not a {} id.", item.prefix()))),
            "limit" => match value.parse::<usize>() {
                Ok(limit) if (1..=100).contains(&limit) => params.limit = limit,
                _ => return Err(bad("invalid_limit", "limit is an integer from 1 to 100.".into())),
            },
            _ => params.filters.push((name, value)),
        }
    }
    Ok(params)
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
            "limit" => match value.parse::<usize>() {
                Ok(value) if (1..=100).contains(&value) => limit = value,
                _ => return Err(bad("invalid_limit", "limit is an integer from 1 to 100.".into())),
            },
            "starting_after" => match Id::parse(&value) {
                Some(id) => starting_after = Some(id),
                None => return Err(bad("invalid_id", format!("'{value}' is not a {} id.", Id::RESOURCE))),
            },
            _ => given.push((name, value)),
        }
    }
    Ok((starting_after, limit, given))
}

pub async fn list_operations(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Operation, &["status", "type"])?;
    let mut query = OperationQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        limit: params.limit,
        starting_after: params.starting_after.map(OperationId::from),
        ..Default::default()
    };
    for (name, value) in params.filters {
        let bad = |code, message: String| ApiError::from(DomainError::invalid(name.clone(), code, message));
        if name == "status" {
            let status = OperationStatus::parse(&value)
                .ok_or_else(|| bad("invalid_status", format!("Unknown status '{value}'.")))?;
            query.status = Some(status);
        } else {
            let kind =
                OperationType::parse(&value).ok_or_else(|| bad("invalid_type", format!("Unknown type '{value}'.")))?;
            query.kind = Some(kind);
        }
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
    let data: Vec<serde_json::Value> = answers
        .into_iter()
        .map(|(id, answer)| match answer {
            Ok(operation) => serde_json::json!({
                "id": id,
                "status": 200,
                "operation": serde_json::from_slice::<serde_json::Value>(&to_json(&operation)).expect("our own JSON"),
            }),
            Err(error) => {
                let (status, error) = ApiError::from(error).status_and_body();
                serde_json::json!({"id": id, "status": status.as_u16(), "error": error})
            }
        })
        .collect();
    Ok(Json(serde_json::json!({"object": "list", "data": data, "has_more": false})).into_response())
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

pub async fn list_events(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Event, &["type"])?;
    let query = EventQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        limit: params.limit,
        starting_after: params.starting_after.map(EventId::from),
        kind: params.filters.into_iter().map(|(_, value)| value).next(),
    };
    if let Some(kind) = query
        .kind
        .as_deref()
        .filter(|k| !ops_domain::event::event_types().any(|t| t == *k))
    {
        return Err(DomainError::invalid("type", "invalid_event_type", format!("Unknown event type '{kind}'.")).into());
    }
    ok(app.service.list_events(&caller, query).await?)
}

pub async fn get_event(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<EventId>) -> Answer {
    ok(app.service.get_event(&caller, &id).await?)
}

pub async fn event_deliveries(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<EventId>) -> Answer {
    ok(app.service.event_deliveries(&caller, &id).await?)
}

pub async fn resend_event(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<EventId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.resend_event(&caller, &id, parse(&body)?).await?)
}

pub async fn recover_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
    JsonBody(body): JsonBody,
) -> Answer {
    let RecoverWebhookEndpoint {} = parse(&body)?;
    ok(app.service.recover_webhook_endpoint(&caller, &id).await?)
}

/// `GET /v1/webhook_endpoints/{id}/failed_deliveries[?starting_after=<delivery>][&limit=]`.
pub async fn webhook_endpoint_failed_deliveries(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (starting_after, limit) = page_of::<DeliveryId>(raw.as_deref())?;
    ok(app
        .service
        .failed_deliveries(&caller, &id, starting_after, limit)
        .await?)
}

pub async fn create_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::WebhooksManage),
        &headers,
        "/v1/webhook_endpoints",
        &body,
        |ticket| app.service.create_webhook_endpoint(&caller, command, ticket),
    )
    .await
}

pub async fn list_webhook_endpoints(State(app): State<App>, Caller(caller): Caller) -> Answer {
    ok(app.service.list_webhook_endpoints(&caller).await?)
}

pub async fn get_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
) -> Answer {
    ok(app.service.get_webhook_endpoint(&caller, &id).await?)
}

pub async fn delete_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
) -> Answer {
    ok(app.service.delete_webhook_endpoint(&caller, &id).await?)
}

pub async fn webhook_endpoint_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
) -> Answer {
    ok(app.service.webhook_endpoint_history(&caller, &id).await?)
}

pub async fn update_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.update_webhook_endpoint(&caller, &id, parse(&body)?).await?)
}

pub async fn rotate_webhook_secret(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
    JsonBody(body): JsonBody,
) -> Answer {
    ok(app.service.rotate_webhook_secret(&caller, &id, parse(&body)?).await?)
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

pub async fn create_schedule(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &headers,
        "/v1/schedules",
        &body,
        |ticket| app.service.create_schedule(&caller, command, ticket),
    )
    .await
}

pub async fn list_schedules(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Schedule, &[])?;
    let query = ScheduleQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(ScheduleId::from),
        limit: params.limit,
    };
    ok(app.service.list_schedules(&caller, query).await?)
}

pub async fn get_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.get_schedule(&caller, &id).await?)
}

pub async fn delete_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.delete_schedule(&caller, &id).await?)
}

pub async fn pause_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.pause_schedule(&caller, &id).await?)
}

pub async fn resume_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.resume_schedule(&caller, &id).await?)
}

/// A schedule's occurrences, newest first; `before` (RFC 3339) pages back in time.
pub async fn schedule_occurrences(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ScheduleId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let mut limit = 10;
    let mut before = None;
    for (name, value) in query_pairs(raw.as_deref(), &["limit", "before"])? {
        let bad = |code, message: &str| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "limit" => match value.parse::<usize>() {
                Ok(value) if (1..=100).contains(&value) => limit = value,
                _ => return Err(bad("invalid_limit", "limit is an integer from 1 to 100.")),
            },
            _ => match time::OffsetDateTime::parse(&value, &time::format_description::well_known::Rfc3339) {
                Ok(at) => before = Some(at),
                Err(_) => return Err(bad("invalid_time", "before is an RFC 3339 time.")),
            },
        }
    }
    ok(app.service.schedule_occurrences(&caller, &id, before, limit).await?)
}

pub async fn create_account(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        require_platform_admin(&caller),
        &headers,
        "/v1/accounts",
        &body,
        |ticket| app.service.create_account(&caller, command, ticket),
    )
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
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    let path = format!("/v1/accounts/{id}/adjustments");
    create_once(
        &app,
        &caller,
        require_platform_admin(&caller),
        &headers,
        &path,
        &body,
        |ticket| app.service.adjust_account(&caller, &id, command, ticket),
    )
    .await
}

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
    let mut customer_id = None;
    for (name, value) in query_pairs(raw.as_deref(), &["customer_id"])? {
        if !IdKind::Customer.matches(&value) {
            return Err(DomainError::invalid(name, "invalid_id", format!("'{value}' is not a customer id.")).into());
        }
        customer_id = Some(CustomerId::from(value));
    }
    ok(app.service.board(&caller, customer_id).await?)
}

/// The live board: one HTML page (its script reads the API with the key the operator types,
/// kept in the tab's session only). The page needs no key; everything it shows does.
pub async fn board_page() -> Response {
    use axum::http::header;
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        crate::BOARD_PAGE,
    )
        .into_response()
}

/// `POST /v1/files?workflow=…[&customer_id=…][&allow_duplicate=true]` with a CSV body:
/// validated whole, answered `202` with the file accepted (its operations follow).
pub async fn upload_file(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    CsvBody(bytes): CsvBody,
) -> Answer {
    let mut command = UploadFile::default();
    let pairs = query_pairs(raw.as_deref(), &["workflow", "customer_id", "allow_duplicate"])?;
    for (name, value) in &pairs {
        match name.as_str() {
            "workflow" => command.workflow = Some(value.clone()),
            "customer_id" => command.customer_id = Some(value.clone()),
            _ => {
                command.allow_duplicate = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(DomainError::invalid(
                            "allow_duplicate",
                            "parameter_invalid",
                            "allow_duplicate is true or false.",
                        )
                        .into())
                    }
                }
            }
        }
    }
    // The query is part of the request a key stands for: the same bytes for another workflow
    // are another request.
    let mut query: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
    query.sort();
    let fingerprint = fingerprint_bytes("POST", &format!("/v1/files?{}", query.join("&")), &bytes);
    command.bytes = bytes.to_vec();
    run_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &headers,
        fingerprint,
        StatusCode::ACCEPTED,
        |ticket| app.service.upload_file(&caller, command, ticket),
    )
    .await
}

pub async fn list_files(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::File, &[])?;
    let query = FileQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(FileId::from),
        limit: params.limit,
    };
    ok(app.service.list_files(&caller, query).await?)
}

pub async fn get_file(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<FileId>) -> Answer {
    ok(app.service.get_file(&caller, &id).await?)
}

/// `POST /v1/reconciliations {rail, statement (base64), format, period?}`: the statement
/// matched now; the answer is the reconciliation with its counts per outcome.
pub async fn import_statement(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody<STATEMENT_BODY_BYTES>,
) -> Answer {
    let command = parse(&body)?;
    create_once(
        &app,
        &caller,
        require_platform_admin(&caller),
        &headers,
        "/v1/reconciliations",
        &body,
        |ticket| app.service.import_statement(&caller, command, ticket),
    )
    .await
}

pub async fn get_reconciliation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ReconciliationId>,
) -> Answer {
    ok(app.service.get_reconciliation(&caller, &id).await?)
}

/// `GET /v1/reconciliations/{id}/lines[?outcome=][&starting_after=<line number>][&limit=]`.
pub async fn reconciliation_lines(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ReconciliationId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (mut outcome, mut after, mut limit) = (None, None, 10);
    for (name, value) in query_pairs(raw.as_deref(), &["outcome", "starting_after", "limit"])? {
        let bad = |code, message: &str| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "outcome" => {
                outcome = Some(serde_json::from_value(value.clone().into()).map_err(|_| {
                    bad(
                        "invalid_outcome",
                        "outcome is matched, mismatched, unmatched or missing.",
                    )
                })?)
            }
            "starting_after" => {
                after = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| bad("invalid_line", "starting_after is a line number."))?,
                )
            }
            _ => match value.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => limit = n,
                _ => return Err(bad("invalid_limit", "limit is an integer from 1 to 100.")),
            },
        }
    }
    ok(app
        .service
        .reconciliation_lines(&caller, &id, outcome, after, limit)
        .await?)
}

/// `GET /v1/reports/operations?from=&to=[&customer_id=][&format=csv|json]`, streamed.
pub async fn operations_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service.report_page(&caller, &query, before.as_deref()).await
    })
    .await
}

/// `GET /v1/reports/transactions?from=&to=[&customer_id=][&format=csv|json]`: the
/// transactions of the period's operations, streamed.
pub async fn transactions_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service
            .transactions_report_page(&caller, &query, before.as_deref())
            .await
    })
    .await
}

/// `GET /v1/reports/movements?from=&to=&customer_id=[&format=csv|json]`: the movements on a
/// customer's accounts in the period, streamed.
pub async fn movements_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service
            .movements_report_page(&caller, &query, before.as_deref())
            .await
    })
    .await
}
