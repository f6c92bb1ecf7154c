//! The operations API as HTTP handlers. The local server mounts [`router`] whole; each Lambda
//! function mounts the same handlers for its own route.

mod body;
mod duplicates;
pub mod error;
mod extract;
mod handlers;
mod idempotency;
mod report;
pub mod spill;
pub mod wire;

use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;
use ops_domain::service::Service;
use std::sync::Arc;

pub use error::ApiError;
pub use extract::ClientAddress;

/// Shared state of every handler: the use cases and their ports.
#[derive(Clone)]
pub struct App {
    pub service: Arc<Service>,
}

/// Declares the endpoints once: the enum, the list of all of them, and each one's route.
macro_rules! endpoints {
    ($($name:ident => ($method:literal, $path:literal, $handler:expr $(,)?)),* $(,)?) => {
        /// One API endpoint: one Lambda function in the cloud, one route of the local server.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Endpoint {
            $($name),*
        }

        impl Endpoint {
            pub const ALL: &'static [Endpoint] = &[$(Endpoint::$name),*];

            /// The endpoint's name as written above (`CreateOperation`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Endpoint::$name => stringify!($name)),*
                }
            }

            /// The route's method, path and handler.
            fn route(self) -> (&'static str, &'static str, MethodRouter<App>) {
                use handlers::*;
                match self {
                    $(Endpoint::$name => ($method, $path, $handler)),*
                }
            }
        }
    };
}

endpoints! {
    Health => ("GET", "/health", get(health)),
    OpenApi => ("GET", "/v1/openapi.json", get(openapi)),
    CreateCustomer => ("POST", "/v1/customers", post(create_customer)),
    CreateUser => ("POST", "/v1/customers/{id}/users", post(create_user)),
    CreateApiKey => ("POST", "/v1/api_keys", post(create_api_key)),
    ListApiKeys => ("GET", "/v1/api_keys", get(list_api_keys)),
    RevokeApiKey => ("DELETE", "/v1/api_keys/{id}", delete(revoke_api_key)),
    RotateApiKey => ("POST", "/v1/api_keys/{id}/rotate", post(rotate_api_key)),
    ApiKeyHistory => ("GET", "/v1/api_keys/{id}/history", get(api_key_history)),
    GetApprovalFloor => ("GET", "/v1/customers/{id}/approval_floors/{type}", get(get_approval_floor)),
    PutApprovalFloor => ("PUT", "/v1/customers/{id}/approval_floors/{type}", put(put_approval_floor)),
    ApprovalFloorHistory => ("GET", "/v1/customers/{id}/approval_floors/{type}/history", get(approval_floor_history)),
    GetWorkflow => ("GET", "/v1/workflows/{name}", get(get_workflow)),
    PutWorkflow => ("PUT", "/v1/workflows/{name}", put(put_workflow)),
    WorkflowHistory => ("GET", "/v1/workflows/{name}/history", get(workflow_history)),
    CreateOperation => ("POST", "/v1/operations", post(create_operation)),
    ListOperations => ("GET", "/v1/operations", get(list_operations)),
    GetOperation => ("GET", "/v1/operations/{id}", get(get_operation)),
    ApproveOperations => ("POST", "/v1/operations/approve", post(approve_operations)),
    RejectOperations => ("POST", "/v1/operations/reject", post(reject_operations)),
    ApproveOperation => ("POST", "/v1/operations/{id}/approve", post(approve_operation)),
    RejectOperation => ("POST", "/v1/operations/{id}/reject", post(reject_operation)),
    CancelOperation => ("POST", "/v1/operations/{id}/cancel", post(cancel_operation)),
    OperationHistory => ("GET", "/v1/operations/{id}/history", get(operation_history)),
    ListTransactions => ("GET", "/v1/transactions", get(list_transactions)),
    GetTransaction => ("GET", "/v1/transactions/{id}", get(get_transaction)),
    RetryTransaction => ("POST", "/v1/transactions/{id}/retry", post(retry_transaction)),
    ResolveTransaction => ("POST", "/v1/transactions/{id}/resolve", post(resolve_transaction)),
    ListEvents => ("GET", "/v1/events", get(list_events)),
    GetEvent => ("GET", "/v1/events/{id}", get(get_event)),
    EventDeliveries => ("GET", "/v1/events/{id}/deliveries", get(event_deliveries)),
    ResendEvent => ("POST", "/v1/events/{id}/resend", post(resend_event)),
    CreateWebhookEndpoint => ("POST", "/v1/webhook_endpoints", post(create_webhook_endpoint)),
    ListWebhookEndpoints => ("GET", "/v1/webhook_endpoints", get(list_webhook_endpoints)),
    GetWebhookEndpoint => ("GET", "/v1/webhook_endpoints/{id}", get(get_webhook_endpoint)),
    UpdateWebhookEndpoint => ("POST", "/v1/webhook_endpoints/{id}", post(update_webhook_endpoint)),
    DeleteWebhookEndpoint => ("DELETE", "/v1/webhook_endpoints/{id}", delete(delete_webhook_endpoint)),
    WebhookEndpointHistory => ("GET", "/v1/webhook_endpoints/{id}/history", get(webhook_endpoint_history)),
    RotateWebhookSecret => ("POST", "/v1/webhook_endpoints/{id}/rotate_secret", post(rotate_webhook_secret)),
    RecoverWebhookEndpoint => ("POST", "/v1/webhook_endpoints/{id}/recover", post(recover_webhook_endpoint)),
    RailReport => ("POST", "/v1/rail_reports", post(rail_report)),
    CreateSchedule => ("POST", "/v1/schedules", post(create_schedule)),
    ListSchedules => ("GET", "/v1/schedules", get(list_schedules)),
    GetSchedule => ("GET", "/v1/schedules/{id}", get(get_schedule)),
    DeleteSchedule => ("DELETE", "/v1/schedules/{id}", delete(delete_schedule)),
    PauseSchedule => ("POST", "/v1/schedules/{id}/pause", post(pause_schedule)),
    ResumeSchedule => ("POST", "/v1/schedules/{id}/resume", post(resume_schedule)),
    ScheduleOccurrences => ("GET", "/v1/schedules/{id}/occurrences", get(schedule_occurrences)),
    CreateAccount => ("POST", "/v1/accounts", post(create_account)),
    ListAccounts => ("GET", "/v1/accounts", get(list_accounts)),
    GetAccount => ("GET", "/v1/accounts/{id}", get(get_account)),
    AccountMovements => ("GET", "/v1/accounts/{id}/movements", get(account_movements)),
    AdjustAccount => ("POST", "/v1/accounts/{id}/adjustments", post(adjust_account)),
    Board => ("GET", "/v1/board", get(board)),
    BoardPage => ("GET", "/board", get(board_page)),
    ListWorkItems => ("GET", "/v1/work_items", get(list_work_items)),
    ClaimWorkItem => ("POST", "/v1/work_items/claim", post(claim_work_item)),
    GetWorkItem => ("GET", "/v1/work_items/{id}", get(get_work_item)),
    AssignWorkItem => ("POST", "/v1/work_items/{id}/assign", post(assign_work_item)),
    ReleaseWorkItem => ("POST", "/v1/work_items/{id}/release", post(release_work_item)),
    ResolveWorkItem => ("POST", "/v1/work_items/{id}/resolve", post(resolve_work_item)),
    UploadFile => ("POST", "/v1/files", post(upload_file)),
    ListFiles => ("GET", "/v1/files", get(list_files)),
    GetFile => ("GET", "/v1/files/{id}", get(get_file)),
    ImportStatement => ("POST", "/v1/reconciliations", post(import_statement)),
    GetReconciliation => ("GET", "/v1/reconciliations/{id}", get(get_reconciliation)),
    ReconciliationLines => ("GET", "/v1/reconciliations/{id}/lines", get(reconciliation_lines)),
    OperationsReport => ("GET", "/v1/reports/operations", get(operations_report)),
    TransactionsReport => ("GET", "/v1/reports/transactions", get(transactions_report)),
    MovementsReport => ("GET", "/v1/reports/movements", get(movements_report)),
}

impl Endpoint {
    /// `(method, path)` as routed, e.g. `("POST", "/v1/operations")`.
    pub fn method_and_path(self) -> (&'static str, &'static str) {
        let (method, path, _) = self.route();
        (method, path)
    }
}

/// The live operations board, as served at `GET /board`.
pub const BOARD_PAGE: &str = include_str!("../board.html");

/// The OpenAPI 3.1 document of this API (`openapi.json`), as served at `GET /v1/openapi.json`.
/// The binary holds it deflated (`build.rs`); it is inflated at the first call.
pub fn openapi() -> &'static str {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let deflated = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.deflated"));
        let document = miniz_oxide::inflate::decompress_to_vec(deflated).expect("build.rs deflated it");
        String::from_utf8(document).expect("openapi.json is UTF-8")
    })
}

/// A router serving `endpoints`, with the error shape for anything else.
pub fn router_for(app: App, endpoints: &[Endpoint]) -> Router {
    let mut routes: Vec<(&'static str, MethodRouter<App>)> = vec![];
    for endpoint in endpoints {
        let (_, path, handler) = endpoint.route();
        // Endpoints sharing a path (GET and POST /v1/operations) share one method router.
        match routes.iter_mut().find(|(p, _)| *p == path) {
            Some((_, existing)) => *existing = std::mem::take(existing).merge(handler),
            None => routes.push((path, handler)),
        }
    }
    routes
        .into_iter()
        .fold(Router::new(), |router, (path, handler)| router.route(path, handler))
        .fallback(handlers::unknown_route)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(axum::middleware::from_fn(error::with_request_id))
        .with_state(app)
}

/// A router serving `endpoints` within a Lambda function: answers over its payload limit are
/// spilled to the blob store behind a short-lived link.
pub fn lambda_router_for(app: App, endpoints: &[Endpoint], limit: usize) -> Router {
    router_for(app.clone(), endpoints).layer(axum::middleware::from_fn_with_state(
        (app, limit),
        spill::spill_large_answers,
    ))
}

/// Every route of the API (the local server).
pub fn router(app: App) -> Router {
    router_for(app, Endpoint::ALL)
}
