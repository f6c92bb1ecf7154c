//! The operations API as HTTP handlers. The local server mounts [`router`] whole; each Lambda
//! function mounts the same handlers for its own route.

mod access;
pub mod deadline;
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

/// An endpoint's route: its method, its path and the handler mounted there.
type Route = (&'static str, &'static str, MethodRouter<App>);

/// The Lambda bootstrap that serves an endpoint. The schedules' endpoints have their own: they
/// carry the IANA time-zone database (`chrono-tz`'s tables and their relocations, about 1.7 MB
/// of a bootstrap), which no other endpoint needs. Each bootstrap holds the code of its own
/// endpoints and not the other's, so that each stays under the 8 MiB a function's file may
/// take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrap {
    Api,
    Schedules,
}

impl Bootstrap {
    /// The binary's name (`template.yaml`'s `Binary`).
    pub fn binary(self) -> &'static str {
        match self {
            Bootstrap::Api => "ops-api",
            Bootstrap::Schedules => "ops-schedules",
        }
    }
}

/// `Some(route)` where the endpoint's bootstrap is the one asked for: the other's handlers are
/// then never referenced from that bootstrap's code, and the linker leaves them out.
macro_rules! served_by {
    (Api, Api, $route:expr) => {
        Some($route)
    };
    (Schedules, Schedules, $route:expr) => {
        Some($route)
    };
    ($bootstrap:ident, $asked:ident, $route:expr) => {
        None
    };
}

/// A handler marked `query` reads its own query parameters (and refuses those it does not
/// know); any other is refused a query string whole, rather than answering as if a filter it
/// ignores had been applied.
macro_rules! query_rule {
    ($handler:expr, query) => {
        $handler
    };
    ($handler:expr) => {
        $handler.route_layer(axum::middleware::from_fn(extract::refuse_query))
    };
}

/// Declares the endpoints once: the enum, the list of all of them, each one's bootstrap and
/// route.
macro_rules! endpoints {
    ($($name:ident => ($bootstrap:ident, $method:literal, $path:literal, $handler:expr $(, $query:ident)?)),* $(,)?) => {
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

            /// The bootstrap whose functions serve it.
            pub fn bootstrap(self) -> Bootstrap {
                match self {
                    $(Endpoint::$name => Bootstrap::$bootstrap),*
                }
            }

            /// The route's method, path and handler.
            fn route(self) -> Route {
                use handlers::*;
                match self {
                    $(Endpoint::$name => ($method, $path, query_rule!($handler $(, $query)?))),*
                }
            }

            /// The route, if the API's bootstrap serves it.
            fn api_route(self) -> Option<Route> {
                use handlers::*;
                match self {
                    $(Endpoint::$name => served_by!($bootstrap, Api, ($method, $path, query_rule!($handler $(, $query)?)))),*
                }
            }

            /// The route, if the schedules' bootstrap serves it.
            fn schedules_route(self) -> Option<Route> {
                use handlers::*;
                match self {
                    $(Endpoint::$name => served_by!($bootstrap, Schedules, ($method, $path, query_rule!($handler $(, $query)?)))),*
                }
            }
        }
    };
}

endpoints! {
    Health => (Api, "GET", "/health", get(health)),
    OpenApi => (Api, "GET", "/v1/openapi.json", get(openapi)),
    CreateCustomer => (Api, "POST", "/v1/customers", post(create_customer)),
    ListCustomers => (Api, "GET", "/v1/customers", get(list_customers), query),
    GetCustomer => (Api, "GET", "/v1/customers/{id}", get(get_customer)),
    UpdateCustomer => (Api, "POST", "/v1/customers/{id}", post(update_customer)),
    CustomerHistory => (Api, "GET", "/v1/customers/{id}/history", get(customer_history)),
    CreateUser => (Api, "POST", "/v1/customers/{id}/users", post(create_user)),
    ListUsers => (Api, "GET", "/v1/customers/{id}/users", get(list_users), query),
    GetUser => (Api, "GET", "/v1/customers/{id}/users/{user_id}", get(get_user)),
    UpdateUser => (Api, "POST", "/v1/customers/{id}/users/{user_id}", post(update_user)),
    UserHistory => (Api, "GET", "/v1/customers/{id}/users/{user_id}/history", get(user_history)),
    DelegateApprovals => (Api, "PUT", "/v1/customers/{id}/users/{user_id}/delegation", put(delegate_approvals)),
    EndDelegation => (Api, "DELETE", "/v1/customers/{id}/users/{user_id}/delegation", delete(end_delegation)),
    CreateApiKey => (Api, "POST", "/v1/api_keys", post(create_api_key)),
    ListApiKeys => (Api, "GET", "/v1/api_keys", get(list_api_keys), query),
    RevokeApiKey => (Api, "DELETE", "/v1/api_keys/{id}", delete(revoke_api_key)),
    RotateApiKey => (Api, "POST", "/v1/api_keys/{id}/rotate", post(rotate_api_key)),
    ApiKeyHistory => (Api, "GET", "/v1/api_keys/{id}/history", get(api_key_history)),
    GetApprovalFloor => (Api, "GET", "/v1/customers/{id}/approval_floors/{type}", get(get_approval_floor)),
    PutApprovalFloor => (Api, "PUT", "/v1/customers/{id}/approval_floors/{type}", put(put_approval_floor)),
    ApprovalFloorHistory => (Api, "GET", "/v1/customers/{id}/approval_floors/{type}/history", get(approval_floor_history)),
    GetPayoutLimits => (Api, "GET", "/v1/customers/{id}/payout_limits", get(get_payout_limits)),
    PutPayoutLimits => (Api, "PUT", "/v1/customers/{id}/payout_limits", put(put_payout_limits)),
    ListWorkflows => (Api, "GET", "/v1/workflows", get(list_workflows), query),
    GetWorkflow => (Api, "GET", "/v1/workflows/{name}", get(get_workflow), query),
    PutWorkflow => (Api, "PUT", "/v1/workflows/{name}", put(put_workflow), query),
    WorkflowHistory => (Api, "GET", "/v1/workflows/{name}/history", get(workflow_history), query),
    CreateOperation => (Api, "POST", "/v1/operations", post(create_operation)),
    ListOperations => (Api, "GET", "/v1/operations", get(list_operations), query),
    GetOperation => (Api, "GET", "/v1/operations/{id}", get(get_operation)),
    ApproveOperations => (Api, "POST", "/v1/operations/approve", post(approve_operations)),
    RejectOperations => (Api, "POST", "/v1/operations/reject", post(reject_operations)),
    ApproveOperation => (Api, "POST", "/v1/operations/{id}/approve", post(approve_operation)),
    RejectOperation => (Api, "POST", "/v1/operations/{id}/reject", post(reject_operation)),
    CancelOperation => (Api, "POST", "/v1/operations/{id}/cancel", post(cancel_operation)),
    ReverseOperation => (Api, "POST", "/v1/operations/{id}/reversal", post(reverse_operation)),
    OperationHistory => (Api, "GET", "/v1/operations/{id}/history", get(operation_history)),
    OperationDeliveries => (Api, "GET", "/v1/operations/{id}/deliveries", get(operation_deliveries), query),
    ListTransactions => (Api, "GET", "/v1/transactions", get(list_transactions), query),
    GetTransaction => (Api, "GET", "/v1/transactions/{id}", get(get_transaction)),
    RetryTransaction => (Api, "POST", "/v1/transactions/{id}/retry", post(retry_transaction)),
    ResolveTransaction => (Api, "POST", "/v1/transactions/{id}/resolve", post(resolve_transaction)),
    CancelTransaction => (Api, "POST", "/v1/transactions/{id}/cancel", post(cancel_transaction)),
    GetBankFile => (Api, "GET", "/v1/bank_files/{id}", get(get_bank_file), query),
    ListEvents => (Api, "GET", "/v1/events", get(list_events), query),
    GetEvent => (Api, "GET", "/v1/events/{id}", get(get_event)),
    EventDeliveries => (Api, "GET", "/v1/events/{id}/deliveries", get(event_deliveries)),
    ResendEvent => (Api, "POST", "/v1/events/{id}/resend", post(resend_event)),
    CreateWebhookEndpoint => (Api, "POST", "/v1/webhook_endpoints", post(create_webhook_endpoint)),
    ListWebhookEndpoints => (Api, "GET", "/v1/webhook_endpoints", get(list_webhook_endpoints), query),
    GetWebhookEndpoint => (Api, "GET", "/v1/webhook_endpoints/{id}", get(get_webhook_endpoint)),
    UpdateWebhookEndpoint => (Api, "POST", "/v1/webhook_endpoints/{id}", post(update_webhook_endpoint)),
    DeleteWebhookEndpoint => (Api, "DELETE", "/v1/webhook_endpoints/{id}", delete(delete_webhook_endpoint)),
    WebhookEndpointHistory => (Api, "GET", "/v1/webhook_endpoints/{id}/history", get(webhook_endpoint_history)),
    RotateWebhookSecret => (Api, "POST", "/v1/webhook_endpoints/{id}/rotate_secret", post(rotate_webhook_secret)),
    RecoverWebhookEndpoint => (Api, "POST", "/v1/webhook_endpoints/{id}/recover", post(recover_webhook_endpoint)),
    EnableWebhookEndpoint => (Api, "POST", "/v1/webhook_endpoints/{id}/enable", post(enable_webhook_endpoint)),
    WebhookEndpointHealth => (Api, "GET", "/v1/webhook_endpoints/{id}/health", get(webhook_endpoint_health)),
    WebhookEndpointFailedDeliveries => (Api, "GET", "/v1/webhook_endpoints/{id}/failed_deliveries", get(webhook_endpoint_failed_deliveries), query),
    RailReport => (Api, "POST", "/v1/rail_reports", post(rail_report)),
    CreateSchedule => (Schedules, "POST", "/v1/schedules", post(create_schedule)),
    ListSchedules => (Schedules, "GET", "/v1/schedules", get(list_schedules), query),
    GetSchedule => (Schedules, "GET", "/v1/schedules/{id}", get(get_schedule)),
    DeleteSchedule => (Schedules, "DELETE", "/v1/schedules/{id}", delete(delete_schedule)),
    PauseSchedule => (Schedules, "POST", "/v1/schedules/{id}/pause", post(pause_schedule)),
    ResumeSchedule => (Schedules, "POST", "/v1/schedules/{id}/resume", post(resume_schedule)),
    ScheduleOccurrences => (Schedules, "GET", "/v1/schedules/{id}/occurrences", get(schedule_occurrences), query),
    BackfillSchedule => (Schedules, "POST", "/v1/schedules/{id}/backfill", post(backfill_schedule)),
    CreateAccount => (Api, "POST", "/v1/accounts", post(create_account)),
    ListAccounts => (Api, "GET", "/v1/accounts", get(list_accounts), query),
    GetAccount => (Api, "GET", "/v1/accounts/{id}", get(get_account)),
    AccountMovements => (Api, "GET", "/v1/accounts/{id}/movements", get(account_movements), query),
    AdjustAccount => (Api, "POST", "/v1/accounts/{id}/adjustments", post(adjust_account)),
    Board => (Api, "GET", "/v1/board", get(board), query),
    Charts => (Api, "GET", "/v1/charts", get(charts), query),
    BoardPage => (Api, "GET", "/board", get(board_page)),
    ConsolePage => (Api, "GET", "/console", get(console_page)),
    ListWorkItems => (Api, "GET", "/v1/work_items", get(list_work_items), query),
    ClaimWorkItem => (Api, "POST", "/v1/work_items/claim", post(claim_work_item)),
    GetWorkItem => (Api, "GET", "/v1/work_items/{id}", get(get_work_item)),
    AssignWorkItem => (Api, "POST", "/v1/work_items/{id}/assign", post(assign_work_item)),
    ReleaseWorkItem => (Api, "POST", "/v1/work_items/{id}/release", post(release_work_item)),
    ResolveWorkItem => (Api, "POST", "/v1/work_items/{id}/resolve", post(resolve_work_item)),
    UploadFile => (Api, "POST", "/v1/files", post(upload_file), query),
    ListFiles => (Api, "GET", "/v1/files", get(list_files), query),
    GetFile => (Api, "GET", "/v1/files/{id}", get(get_file)),
    FileStatusReport => (Api, "GET", "/v1/files/{id}/status_report", get(file_status_report), query),
    ImportStatement => (Api, "POST", "/v1/reconciliations", post(import_statement)),
    ListReconciliations => (Api, "GET", "/v1/reconciliations", get(list_reconciliations), query),
    GetReconciliation => (Api, "GET", "/v1/reconciliations/{id}", get(get_reconciliation)),
    ReconciliationLines => (Api, "GET", "/v1/reconciliations/{id}/lines", get(reconciliation_lines), query),
    CreateCalendar => (Schedules, "POST", "/v1/calendars", post(create_calendar)),
    GetCalendar => (Schedules, "GET", "/v1/calendars/{id}", get(get_calendar)),
    ImportHolidays => (Schedules, "POST", "/v1/calendars/{id}/holidays", post(import_holidays)),
    PutRailCutoffs => (Schedules, "PUT", "/v1/rails/{rail}/cutoffs", put(put_rail_cutoffs)),
    NextCutoff => (Schedules, "GET", "/v1/rails/{rail}/next_cutoff", get(next_cutoff), query),
    GetReconciliationRules => (Api, "GET", "/v1/reconciliation_rules/{rail}", get(get_reconciliation_rules)),
    PutReconciliationRules => (Api, "PUT", "/v1/reconciliation_rules/{rail}", put(put_reconciliation_rules)),
    ReconciliationRulesHistory => (Api, "GET", "/v1/reconciliation_rules/{rail}/history", get(reconciliation_rules_history)),
    OperationsReport => (Api, "GET", "/v1/reports/operations", get(operations_report), query),
    TransactionsReport => (Api, "GET", "/v1/reports/transactions", get(transactions_report), query),
    MovementsReport => (Api, "GET", "/v1/reports/movements", get(movements_report), query),
}

impl Endpoint {
    /// `(method, path)` as routed, e.g. `("POST", "/v1/operations")`.
    pub fn method_and_path(self) -> (&'static str, &'static str) {
        let (method, path, _) = self.route();
        (method, path)
    }
}

/// The operations console, as served at `GET /console`: `console/console.html` with uPlot's
/// script and style sheet written in (`build.rs`).
pub const CONSOLE_PAGE: &str = include_str!(concat!(env!("OUT_DIR"), "/console.html"));

/// The console's Content-Security-Policy: its scripts and style sheets (its own and uPlot's)
/// allowed by their SHA-256, so no other script or style runs (no `'unsafe-inline'`, no
/// `'unsafe-eval'`); nothing loaded from anywhere; the API its only connection.
pub fn console_policy() -> &'static str {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        let digests = |element: &str| {
            let (open, close) = (format!("<{element}>"), format!("</{element}>"));
            let mut sources = vec![];
            let mut rest = CONSOLE_PAGE;
            while let Some(at) = rest.find(&open) {
                let body = &rest[at + open.len()..];
                let end = body.find(&close).expect("each element closes");
                let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&body[..end]));
                sources.push(format!("'sha256-{digest}'"));
                rest = &body[end..];
            }
            sources.join(" ")
        };
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
             form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
            digests("script"),
            digests("style")
        )
    })
}

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
    identified(router_of(app, endpoints.iter().map(|endpoint| endpoint.route())))
}

fn router_of(app: App, endpoint_routes: impl Iterator<Item = Route>) -> Router {
    let mut routes: Vec<(&'static str, MethodRouter<App>)> = vec![];
    for (_, path, handler) in endpoint_routes {
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
        .with_state(app)
}

/// The outermost layer of every router: each answer's request id and headers, those that
/// middleware built (a spilled answer's link) included.
fn identified(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(access::identify))
}

/// The router of a Lambda function of the API's bootstrap serving `endpoint`, or `None` if
/// the schedules' serves it. Answers over `limit` bytes are spilled to the blob store
/// behind a short-lived link.
pub fn api_lambda_router(app: App, endpoint: Endpoint, limit: usize) -> Option<Router> {
    endpoint.api_route().map(|route| lambda_router(app, route, limit))
}

/// The same for the schedules' bootstrap.
pub fn schedules_lambda_router(app: App, endpoint: Endpoint, limit: usize) -> Option<Router> {
    endpoint.schedules_route().map(|route| lambda_router(app, route, limit))
}

fn lambda_router(app: App, route: Route, limit: usize) -> Router {
    identified(
        router_of(app.clone(), std::iter::once(route)).layer(axum::middleware::from_fn_with_state(
            (app, limit),
            spill::spill_large_answers,
        )),
    )
}

/// Every route of the API (the local server).
pub fn router(app: App) -> Router {
    router_for(app, Endpoint::ALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_is_routed_by_its_own_bootstrap_and_by_no_other() {
        for endpoint in Endpoint::ALL.iter().copied() {
            let routed_by = |route: Option<Route>| route.map(|(method, path, _)| (method, path));
            let (api, schedules) = (routed_by(endpoint.api_route()), routed_by(endpoint.schedules_route()));
            let expected = Some(endpoint.method_and_path());
            match endpoint.bootstrap() {
                Bootstrap::Api => assert_eq!((api, schedules), (expected, None), "{endpoint:?}"),
                Bootstrap::Schedules => assert_eq!((api, schedules), (None, expected), "{endpoint:?}"),
            }
            // The schedules' bootstrap serves what keeps time (it has the time-zone database).
            let path = endpoint.method_and_path().1;
            let keeps_time = ["/v1/schedules", "/v1/calendars", "/v1/rails/"]
                .iter()
                .any(|prefix| path.starts_with(prefix));
            assert_eq!(endpoint.bootstrap() == Bootstrap::Schedules, keeps_time, "{endpoint:?}");
        }
    }

    /// The policy lets the page's own script and style and uPlot's run and nothing else: no
    /// element the hashes do not cover, no inline handler or style attribute (both need
    /// `'unsafe-inline'`).
    #[test]
    fn the_consoles_policy_covers_its_scripts_and_styles_and_nothing_inline() {
        for element in ["script", "style"] {
            assert_eq!(CONSOLE_PAGE.matches(&format!("<{element}")).count(), 2, "{element}");
            assert_eq!(CONSOLE_PAGE.matches(&format!("<{element}>")).count(), 2, "{element}");
        }
        assert!(CONSOLE_PAGE.contains("https://github.com/leeoniya/uPlot (v1.6.32)"));
        let markup = &CONSOLE_PAGE[..CONSOLE_PAGE.find("<script>").unwrap()];
        let attributes = attribute_names(markup);
        assert!(
            !attributes.iter().any(|a| a == "style" || a.starts_with("on")),
            "{attributes:?}"
        );
        let policy = console_policy();
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(policy.matches("'sha256-").count(), 4, "{policy}");
    }

    /// The attribute names of every tag in `markup`.
    fn attribute_names(markup: &str) -> Vec<String> {
        markup
            .split('<')
            .skip(1)
            .filter_map(|tag| tag.split('>').next())
            .flat_map(|tag| {
                tag.split_whitespace()
                    .skip(1)
                    .filter_map(|part| part.split('=').next())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn the_console_shows_amounts_by_the_services_own_minor_units() {
        use ops_domain::money::{NO_MINOR_UNIT, THREE_MINOR_DIGITS};
        for list in [NO_MINOR_UNIT, THREE_MINOR_DIGITS] {
            assert!(CONSOLE_PAGE.contains(&format!("\"{list}\".split(\" \")")), "{list}");
        }
    }
}
