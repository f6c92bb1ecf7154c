//! The API's wire shapes: how each of the domain's values looks in a response. The domain's
//! values carry no `object` names, no list envelopes, and every field they store; here each gets
//! its name, lists their envelope, and what is never shown (key hashes, where signing secrets
//! are kept) is left out.

use ops_domain::access::{ApiKey, Customer, Environment, Scope, User};
use ops_domain::approvals::{ApprovalFloor, Workflow};
use ops_domain::calendars::{Calendar, NextCutoff, RailCutoffs};
use ops_domain::cause::Cause;
use ops_domain::desk::board::Board;
use ops_domain::desk::charts::Charts;
use ops_domain::desk::WorkItem;
use ops_domain::event::Event;
use ops_domain::files::File;
use ops_domain::idempotency::KeyHold;
use ops_domain::ids::{ApiKeyId, CustomerId, OperationId, UserId};
use ops_domain::ledger::{Account, Movement};
use ops_domain::limits::PayoutLimitsView;
use ops_domain::operations::Operation;
use ops_domain::ports::AuditEntry;
use ops_domain::reconciliations::{Reconciliation, ReconciliationLine, ReconciliationRules, StatementPreview};
use ops_domain::schedules::{Backfilled, Occurrence, Schedule, UpcomingOccurrence};
use ops_domain::service::{Issued, Page};
use ops_domain::transactions::{BankFile, Transaction};
use ops_domain::webhooks::{Delivery, EndpointStatus, WebhookEndpoint};
use serde::Serialize;
use time::OffsetDateTime;

/// A value as the API shows it.
pub trait Wire {
    fn wire(&self) -> impl Serialize + '_;
}

/// A resource's fields under its `object` name.
#[derive(Serialize)]
struct Named<'a, T> {
    object: &'static str,
    #[serde(flatten)]
    fields: &'a T,
}

fn named<'a, T>(object: &'static str, fields: &'a T) -> Named<'a, T> {
    Named { object, fields }
}

macro_rules! named {
    ($($type:ty => $object:literal),* $(,)?) => {
        $(impl Wire for $type {
            fn wire(&self) -> impl Serialize + '_ {
                named($object, self)
            }
        })*
    };
}

named! {
    Customer => "customer",
    User => "user",
    Transaction => "transaction",
    Workflow => "workflow",
    ApprovalFloor => "approval_floor",
    Delivery => "webhook_delivery",
    Schedule => "schedule",
    Occurrence => "schedule_occurrence",
    UpcomingOccurrence => "schedule_upcoming_occurrence",
    Backfilled => "schedule_backfill",
    Account => "account",
    Movement => "movement",
    WorkItem => "work_item",
    Board => "board",
    Charts => "charts",
    File => "file",
    Reconciliation => "reconciliation",
    ReconciliationLine => "reconciliation_line",
    ReconciliationRules => "reconciliation_rules",
    Calendar => "calendar",
    RailCutoffs => "rail_cutoffs",
    NextCutoff => "next_cutoff",
    BankFile => "bank_file",
    PayoutLimitsView => "payout_limits",
}

/// An operation, with who must still approve it, in order.
#[derive(Serialize)]
struct ShownOperation<'a> {
    object: &'static str,
    #[serde(flatten)]
    fields: &'a Operation,
    /// The chain's first step, as before chains had more than one.
    approval_requirement: Option<&'a ops_domain::approvals::ApprovalRequirement>,
    approvals_needed: Vec<ops_domain::operations::NeededApproval>,
}

fn shown(operation: &Operation) -> ShownOperation<'_> {
    ShownOperation {
        object: "operation",
        fields: operation,
        approval_requirement: operation.approval_chain.first(),
        approvals_needed: operation.approvals_needed(),
    }
}

impl Wire for Operation {
    fn wire(&self) -> impl Serialize + '_ {
        shown(self)
    }
}

/// A dry run's answer: what the statement would do, each line as its list shows it.
impl Wire for StatementPreview {
    fn wire(&self) -> impl Serialize + '_ {
        #[derive(Serialize)]
        struct Preview<'a> {
            object: &'static str,
            dry_run: bool,
            rail: &'a str,
            format: ops_domain::rail::StatementFormat,
            period: ops_domain::rail::Period,
            statement_lines: u32,
            outcomes: ops_domain::reconciliations::OutcomeCounts,
            rules_version: u64,
            balances: &'a [ops_domain::reconciliations::BalanceCheck],
            lines: Vec<Named<'a, ReconciliationLine>>,
        }
        Preview {
            object: "reconciliation_preview",
            dry_run: true,
            rail: &self.rail,
            format: self.format,
            period: self.period,
            statement_lines: self.statement_lines,
            outcomes: self.outcomes,
            rules_version: self.rules_version,
            balances: &self.balances,
            lines: self
                .lines
                .iter()
                .map(|line| named("reconciliation_line", line))
                .collect(),
        }
    }
}

/// An entry of a history (an operation's, a key's, an endpoint's, a workflow's: only ever
/// shown in its list, so without the operation's id).
#[derive(Serialize)]
struct HistoryEntry<'a> {
    entity_type: &'a str,
    entity_id: &'a str,
    action: &'a str,
    from: &'a Option<String>,
    to: &'a Option<String>,
    cause: &'a Cause,
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: &'a Option<serde_json::Value>,
}

impl Wire for AuditEntry {
    fn wire(&self) -> impl Serialize + '_ {
        HistoryEntry {
            entity_type: &self.entity_type,
            entity_id: &self.entity_id,
            action: &self.action,
            from: &self.from,
            to: &self.to,
            cause: &self.cause,
            at: self.at,
            details: &self.details,
        }
    }
}

/// An event is already the signed document webhooks deliver, `object` included.
impl Wire for Event {
    fn wire(&self) -> impl Serialize + '_ {
        self
    }
}

/// An API key without its secret's hash.
#[derive(Serialize)]
struct ApiKeyShown<'a> {
    id: &'a str,
    object: &'static str,
    name: &'a Option<String>,
    customer_id: &'a Option<CustomerId>,
    user_id: &'a Option<UserId>,
    environment: Environment,
    scopes: &'a [Scope],
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    expires_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    revoked_at: Option<OffsetDateTime>,
    created_by: &'a Option<String>,
    rotated_to: &'a Option<ApiKeyId>,
}

impl Wire for ApiKey {
    fn wire(&self) -> impl Serialize + '_ {
        ApiKeyShown {
            id: &self.id,
            object: "api_key",
            name: &self.name,
            customer_id: &self.customer_id,
            user_id: &self.user_id,
            environment: self.environment,
            scopes: &self.scopes,
            created_at: self.created_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
            created_by: &self.created_by,
            rotated_to: &self.rotated_to,
        }
    }
}

/// A webhook endpoint without where its signing secrets are kept.
#[derive(Serialize)]
struct EndpointShown<'a> {
    id: &'a str,
    object: &'static str,
    customer_id: &'a Option<CustomerId>,
    url: &'a str,
    description: &'a Option<String>,
    events: &'a [String],
    retry_policy: &'a ops_domain::webhooks::RetryPolicy,
    breaker: &'a ops_domain::webhooks::Breaker,
    rate_limit: Option<u32>,
    ordering: ops_domain::webhooks::DeliveryOrder,
    status: EndpointStatus,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    environment: Environment,
    version: u64,
}

impl Wire for WebhookEndpoint {
    fn wire(&self) -> impl Serialize + '_ {
        EndpointShown {
            id: &self.id,
            object: "webhook_endpoint",
            customer_id: &self.customer_id,
            url: &self.url,
            description: &self.description,
            events: &self.events,
            retry_policy: &self.retry_policy,
            breaker: &self.breaker,
            rate_limit: self.rate_limit,
            ordering: self.ordering,
            status: self.status,
            created_at: self.created_at,
            environment: self.environment,
            version: self.version,
        }
    }
}

/// An endpoint's health as the API shows it: the success rate worked out, the counts it is
/// worked out from left out.
#[derive(Serialize)]
struct HealthShown<'a> {
    object: &'static str,
    webhook_endpoint_id: &'a str,
    success_rate: Option<f64>,
    consecutive_failures: u32,
    #[serde(with = "time::serde::rfc3339::option")]
    failing_since: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    last_success_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    last_failure_at: Option<OffsetDateTime>,
    /// The highest warning level sent for the failures in a row (0: none).
    warned_at_percent: u8,
}

impl Wire for ops_domain::webhooks::EndpointHealth {
    fn wire(&self) -> impl Serialize + '_ {
        HealthShown {
            object: "webhook_endpoint_health",
            webhook_endpoint_id: &self.endpoint_id,
            success_rate: self.success_rate(),
            consecutive_failures: self.consecutive_failures,
            failing_since: self.failing_since,
            last_success_at: self.last_success_at,
            last_failure_at: self.last_failure_at,
            warned_at_percent: self.warned,
        }
    }
}

#[derive(Serialize)]
struct List<'a, T> {
    object: &'static str,
    data: Vec<T>,
    has_more: bool,
    /// Only on a page that stopped short of `limit` with more after it (a `type` filter reads
    /// a bounded stretch of the list a request): the `starting_after` of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_starting_after: Option<&'a str>,
}

impl<T: Wire> Wire for Page<T> {
    fn wire(&self) -> impl Serialize + '_ {
        List {
            object: "list",
            data: self.data.iter().map(Wire::wire).collect(),
            has_more: self.has_more,
            next_starting_after: self.next_starting_after.as_deref(),
        }
    }
}

/// One operation's answer in a bulk decision: the operation as decided, or the error (its
/// status and body) that it alone was refused with.
pub struct Decided {
    pub id: OperationId,
    pub answer: Result<Operation, (u16, crate::error::ErrorObject)>,
}

#[derive(Serialize)]
struct DecidedWire<'a> {
    id: &'a OperationId,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<ShownOperation<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a crate::error::ErrorObject>,
}

impl Wire for Decided {
    fn wire(&self) -> impl Serialize + '_ {
        DecidedWire {
            id: &self.id,
            status: self.answer.as_ref().map_or_else(|(status, _)| *status, |_| 200),
            operation: self.answer.as_ref().ok().map(shown),
            error: self.answer.as_ref().err().map(|(_, error)| error),
        }
    }
}

#[derive(Serialize)]
struct WithSecret<R> {
    #[serde(flatten)]
    resource: R,
    secret: String,
}

/// A resource with the secret it was issued with: shown once, in the answer to its creation.
impl<T: Wire> Wire for Issued<T> {
    fn wire(&self) -> impl Serialize + '_ {
        WithSecret {
            resource: self.resource.wire(),
            secret: self.secret.clone(),
        }
    }
}

/// The JSON bytes of `value`'s wire shape.
pub fn to_json<T: Wire + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(&value.wire()).expect("wire shapes always serialize")
}

/// What an idempotency record keeps of an answer: the answer itself, except that a secret
/// shown once is withheld (only its prefix kept, `sk_test_…withheld`), since secrets are never
/// stored.
pub trait Stored: Wire {
    /// How a create of this holds its idempotency key: claimed first, unless the create is
    /// nothing but its changeset.
    const KEY_HOLD: KeyHold = KeyHold::ClaimFirst;

    fn stored_json(&self) -> Vec<u8> {
        to_json(self)
    }
}

impl Stored for Customer {}
impl Stored for User {}
// Creating an operation writes its changeset and nothing else, so its key goes with it.
impl Stored for Operation {
    const KEY_HOLD: KeyHold = KeyHold::InTheChangeset;
}
impl Stored for Transaction {}
impl Stored for Schedule {}
impl Stored for File {}
impl Stored for Reconciliation {}
impl Stored for Calendar {}
impl Stored for Account {}
impl Stored for Movement {}

impl<T: Wire> Stored for Issued<T> {
    fn stored_json(&self) -> Vec<u8> {
        let prefix = self.secret.rfind('_').map_or("", |end| &self.secret[..=end]);
        serde_json::to_vec(&WithSecret {
            resource: self.resource.wire(),
            secret: format!("{prefix}…withheld"),
        })
        .expect("wire shapes always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_answer_withholds_the_secret_and_keeps_the_rest() {
        let issued = Issued {
            resource: Customer {
                id: "cus_1".into(),
                name: "Acme".into(),
                status: ops_domain::access::CustomerStatus::Active,
                metadata: Default::default(),
                collection_reserve: Default::default(),
                created_at: OffsetDateTime::UNIX_EPOCH,
                version: 1,
            },
            secret: "sk_test_0123abcd".into(),
        };
        let shown: serde_json::Value = serde_json::from_slice(&to_json(&issued)).unwrap();
        let stored: serde_json::Value = serde_json::from_slice(&issued.stored_json()).unwrap();
        assert_eq!(shown["secret"], "sk_test_0123abcd");
        assert_eq!(stored["secret"], "sk_test_…withheld");
        assert_eq!(
            (shown["object"].clone(), stored["id"].clone()),
            ("customer".into(), "cus_1".into())
        );
    }
}
