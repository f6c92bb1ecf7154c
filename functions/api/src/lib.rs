//! The operations API as HTTP handlers. The local server mounts [`router`] whole; each Lambda
//! function mounts the same handlers for its own route.

pub mod error;
mod extract;
mod handlers;
mod idempotency;

use axum::routing::{get, post};
use axum::Router;
use ops_domain::service::Service;
use std::sync::Arc;

pub use error::ApiError;

/// Shared state of every handler: the use cases and their ports.
#[derive(Clone)]
pub struct App {
    pub service: Arc<Service>,
}

/// Every route of the API.
pub fn router(app: App) -> Router {
    use handlers::*;
    Router::new()
        .route("/health", get(health))
        .route("/v1/customers", post(create_customer))
        .route("/v1/customers/{id}/users", post(create_user))
        .route("/v1/api_keys", post(create_api_key))
        .route("/v1/api_keys/{id}", axum::routing::delete(revoke_api_key))
        .route("/v1/api_keys/{id}/rotate", post(rotate_api_key))
        .route("/v1/workflows/{name}", get(get_workflow).put(put_workflow))
        .route("/v1/operations", post(create_operation).get(list_operations))
        .route("/v1/operations/{id}", get(get_operation))
        .route("/v1/operations/{id}/approve", post(approve_operation))
        .route("/v1/operations/{id}/reject", post(reject_operation))
        .route("/v1/operations/{id}/cancel", post(cancel_operation))
        .route("/v1/operations/{id}/history", get(operation_history))
        .route("/v1/transactions", get(list_transactions))
        .route("/v1/transactions/{id}", get(get_transaction))
        .route("/v1/transactions/{id}/retry", post(retry_transaction))
        .route("/v1/transactions/{id}/resolve", post(resolve_transaction))
        .route("/v1/events", get(list_events))
        .route("/v1/events/{id}", get(get_event))
        .route("/v1/events/{id}/deliveries", get(event_deliveries))
        .route("/v1/events/{id}/resend", post(resend_event))
        .route(
            "/v1/webhook_endpoints",
            post(create_webhook_endpoint).get(list_webhook_endpoints),
        )
        .route(
            "/v1/webhook_endpoints/{id}",
            get(get_webhook_endpoint).delete(delete_webhook_endpoint),
        )
        .route("/v1/webhook_endpoints/{id}/rotate_secret", post(rotate_webhook_secret))
        .route("/v1/rail_reports", post(rail_report))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(error::with_request_id))
        .with_state(app)
}
