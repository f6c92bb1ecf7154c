//! Events, their deliveries and webhook endpoints.

use super::*;
use crate::extract::{parse, Caller, CreateBody, CustomerQuery, JsonBody, PathId};
use crate::idempotency::create_once;
use crate::App;
use axum::extract::{RawQuery, State};
use ops_domain::access::Scope;
use ops_domain::ids::{CustomerId, DeliveryId, EventId, IdKind, OperationId, WebhookEndpointId};
use ops_domain::webhooks::{EnableWebhookEndpoint, EventQuery, RecoverWebhookEndpoint};
use ops_domain::DomainError;

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
    let command: RecoverWebhookEndpoint = parse(&body)?;
    ok(app.service.recover_webhook_endpoint(&caller, &id, command).await?)
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

/// `GET /v1/operations/{id}/deliveries[?starting_after=<delivery>][&limit=]`.
pub async fn operation_deliveries(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<OperationId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (starting_after, limit) = page_of::<DeliveryId>(raw.as_deref())?;
    ok(app
        .service
        .operation_deliveries(&caller, &id, starting_after, limit)
        .await?)
}

pub async fn create_webhook_endpoint(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::WebhooksManage),
        &request,
        |ticket| app.service.create_webhook_endpoint(&caller, command, ticket),
    )
    .await
}

/// `GET /v1/webhook_endpoints[?customer_id=]`
pub async fn list_webhook_endpoints(
    State(app): State<App>,
    Caller(caller): Caller,
    CustomerQuery(customer_id): CustomerQuery,
) -> Answer {
    ok(app
        .service
        .list_webhook_endpoints(&caller, customer_id.map(CustomerId::from))
        .await?)
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

/// Enables a disabled endpoint again; what waited for it is sent in order, paced.
pub async fn enable_webhook_endpoint(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
    JsonBody(body): JsonBody,
) -> Answer {
    let EnableWebhookEndpoint {} = parse(&body)?;
    ok(app.service.enable_webhook_endpoint(&caller, &id).await?)
}

/// An endpoint's health: its success rate, failures in a row and last success.
pub async fn webhook_endpoint_health(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<WebhookEndpointId>,
) -> Answer {
    ok(app.service.webhook_endpoint_health(&caller, &id).await?)
}
