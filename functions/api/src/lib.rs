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
        .route(
            "/v1/operations",
            post(create_operation).get(list_operations),
        )
        .route("/v1/operations/{id}", get(get_operation))
        .route("/v1/operations/{id}/approve", post(approve_operation))
        .route("/v1/operations/{id}/reject", post(reject_operation))
        .route("/v1/operations/{id}/cancel", post(cancel_operation))
        .route("/v1/operations/{id}/history", get(operation_history))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(error::with_request_id))
        .with_state(app)
}
