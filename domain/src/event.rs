//! Events: one per state change (and `operation.created`), committed with the change (in its
//! SQLite transaction; on DynamoDB, from the changed entity's outbox, never lost), then
//! streamed to their consumers.
//! An event is also the signed document webhooks deliver, so it is built here in
//! its wire shape, `object` names included.

use crate::access::{Customer, Environment};
use crate::cause::Cause;
use crate::desk::WorkItem;
use crate::files::File;
use crate::ids::{CustomerId, EventId};
use crate::ledger::{Account, Movement};
use crate::operations::{Operation, OperationStatus};
use crate::reconciliations::Reconciliation;
use crate::schedules::{Occurrence, Schedule};
use crate::transactions::{Transaction, TransactionStatus};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

pub use crate::event_data::EventData;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: crate::ids::EventId,
    pub object: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
    pub environment: Environment,
    pub api_version: String,
    /// The customer the event concerns; webhook endpoints of that customer receive it.
    pub customer_id: crate::ids::CustomerId,
    pub data: EventData,
}

impl Event {
    pub(crate) fn new(
        id: EventId,
        kind: String,
        customer_id: &CustomerId,
        environment: Environment,
        at: OffsetDateTime,
        data: EventData,
    ) -> Event {
        Event {
            id,
            object: "event".into(),
            kind,
            created: at.unix_timestamp(),
            environment,
            api_version: "v1".into(),
            customer_id: customer_id.clone(),
            data,
        }
    }

    /// The operation the event is of, if any (an operation's and its transactions' events).
    pub fn operation_id(&self) -> Option<crate::ids::OperationId> {
        self.data
            .text("operation_id")
            .and_then(|id| crate::ids::OperationId::parse(&id))
    }

    /// `operation.created` and the event of the status an operation was created in: the same
    /// document, written once.
    pub fn of_new_operation(created: EventId, in_status: EventId, operation: &Operation) -> [Event; 2] {
        let created = Event::of_operation(created, "created", operation);
        let in_status = Event {
            id: in_status,
            kind: format!("operation.{}", operation.status.as_str()),
            ..created.clone()
        };
        [created, in_status]
    }

    /// `operation.<status>` (or `operation.created`) with the operation as it now is.
    pub fn of_operation(id: EventId, kind: &str, operation: &Operation) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            operation_id: &'a crate::ids::OperationId,
            customer_id: &'a CustomerId,
            status: OperationStatus,
            cause: &'a Cause,
            #[serde(rename = "type")]
            kind: crate::operation_type::OperationType,
            currency: &'a crate::money::Currency,
            total_amount: i64,
            object: Snapshot<'a, Operation>,
        }
        let data = EventData::of(&Data {
            operation_id: &operation.id,
            customer_id: &operation.customer_id,
            status: operation.status,
            cause: &operation.cause,
            kind: operation.kind,
            currency: &operation.currency,
            total_amount: operation.total_amount,
            object: snapshot("operation", operation),
        });
        Event::new(
            id,
            format!("operation.{kind}"),
            &operation.customer_id,
            operation.environment,
            operation.updated_at,
            data,
        )
    }

    /// `transaction.<status>`; its data carries the seed's six fields at the top level.
    pub fn of_transaction(id: EventId, transaction: &Transaction) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            transaction_id: &'a crate::ids::TransactionId,
            operation_id: &'a crate::ids::OperationId,
            rail: &'a str,
            rail_reference: &'a Option<String>,
            amount: &'a crate::money::Amount,
            currency: &'a crate::money::Currency,
            status: TransactionStatus,
            cause: &'a Cause,
            item_id: &'a crate::ids::ItemId,
            customer_id: &'a CustomerId,
            #[serde(skip_serializing_if = "Option::is_none")]
            end_to_end_id: &'a Option<String>,
        }
        let data = EventData::of(&Data {
            transaction_id: &transaction.id,
            operation_id: &transaction.operation_id,
            rail: &transaction.rail,
            rail_reference: &transaction.rail_reference,
            amount: &transaction.amount,
            currency: &transaction.currency,
            status: transaction.status,
            cause: &transaction.cause,
            item_id: &transaction.item_id,
            customer_id: &transaction.customer_id,
            end_to_end_id: &transaction.end_to_end_id,
        });
        let kind = format!("transaction.{}", transaction.status.as_str());
        Event::new(
            id,
            kind,
            &transaction.customer_id,
            transaction.environment,
            transaction.updated_at,
            data,
        )
    }
}

impl Event {
    /// `file.<status>` (accepted, processing, completed) with the file as it now is.
    pub fn of_file(id: EventId, file: &File) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            file_id: &'a crate::ids::FileId,
            customer_id: &'a CustomerId,
            status: &'a crate::files::FileStatus,
            cause: &'a Cause,
            object: Snapshot<'a, File>,
        }
        let data = EventData::of(&Data {
            file_id: &file.id,
            customer_id: &file.customer_id,
            status: &file.status,
            cause: &file.cause,
            object: snapshot("file", file),
        });
        Event::new(
            id,
            format!("file.{}", file.status.as_str()),
            &file.customer_id,
            file.environment,
            file.updated_at,
            data,
        )
    }

    /// `schedule.<change>` (created, paused, resumed, ended, deleted) with the schedule as it
    /// now is.
    pub fn of_schedule(id: EventId, change: &str, schedule: &Schedule) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            schedule_id: &'a crate::ids::ScheduleId,
            customer_id: &'a CustomerId,
            status: &'a crate::schedules::ScheduleStatus,
            cause: &'a Cause,
            object: Snapshot<'a, Schedule>,
        }
        let data = EventData::of(&Data {
            schedule_id: &schedule.id,
            customer_id: &schedule.customer_id,
            status: &schedule.status,
            cause: &schedule.cause,
            object: snapshot("schedule", schedule),
        });
        Event::new(
            id,
            format!("schedule.{change}"),
            &schedule.customer_id,
            schedule.environment,
            schedule.updated_at,
            data,
        )
    }

    /// `schedule.occurrence_missed` or `schedule.occurrence_skipped`: an occurrence that made
    /// no operation, with why.
    pub fn of_occurrence(id: EventId, schedule: &Schedule, occurrence: &Occurrence) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            schedule_id: &'a crate::ids::ScheduleId,
            customer_id: &'a CustomerId,
            #[serde(with = "time::serde::rfc3339")]
            scheduled_at: OffsetDateTime,
            status: &'a crate::schedules::OccurrenceStatus,
            reason: &'a Option<String>,
            object: Snapshot<'a, Occurrence>,
        }
        let data = EventData::of(&Data {
            schedule_id: &schedule.id,
            customer_id: &schedule.customer_id,
            scheduled_at: occurrence.scheduled_at,
            status: &occurrence.status,
            reason: &occurrence.reason,
            object: snapshot("schedule_occurrence", occurrence),
        });
        Event::new(
            id,
            format!("schedule.occurrence_{}", occurrence.status.as_str()),
            &schedule.customer_id,
            schedule.environment,
            occurrence.recorded_at,
            data,
        )
    }
}

impl Event {
    /// `account.created`, with the account.
    pub fn of_account(id: EventId, account: &Account, cause: &Cause) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            account_id: &'a crate::ids::AccountId,
            customer_id: &'a Option<CustomerId>,
            kind: &'a crate::ledger::AccountKind,
            currency: &'a crate::money::Currency,
            cause: &'a Cause,
            object: Snapshot<'a, Account>,
        }
        let data = EventData::of(&Data {
            account_id: &account.id,
            customer_id: &account.customer_id,
            kind: &account.kind,
            currency: &account.currency,
            cause,
            object: snapshot("account", account),
        });
        let customer = account
            .customer_id
            .clone()
            .unwrap_or_else(|| CustomerId::from(PLATFORM));
        Event::new(
            id,
            "account.created".into(),
            &customer,
            account.environment,
            cause.at,
            data,
        )
    }

    /// `movement.<status>` (pending, posted, voided) with the movement as it now is.
    pub fn of_movement(id: EventId, movement: &Movement, environment: Environment) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            movement_id: &'a crate::ids::MovementId,
            customer_id: &'a Option<CustomerId>,
            operation_id: &'a Option<crate::ids::OperationId>,
            transaction_id: &'a Option<crate::ids::TransactionId>,
            status: &'a crate::ledger::MovementStatus,
            currency: &'a crate::money::Currency,
            amount: crate::money::Amount,
            cause: &'a Cause,
            object: Snapshot<'a, Movement>,
        }
        let data = EventData::of(&Data {
            movement_id: &movement.id,
            customer_id: &movement.customer_id,
            operation_id: &movement.operation_id,
            transaction_id: &movement.transaction_id,
            status: &movement.status,
            currency: &movement.currency,
            amount: movement.amount(),
            cause: &movement.cause,
            object: snapshot("movement", movement),
        });
        let customer = movement
            .customer_id
            .clone()
            .unwrap_or_else(|| CustomerId::from(PLATFORM));
        Event::new(
            id,
            format!("movement.{}", movement.status.as_str()),
            &customer,
            environment,
            movement.cause.at,
            data,
        )
    }
}

impl Event {
    /// `reconciliation.completed`, with its counts per outcome; the platform's endpoints
    /// receive it (a statement spans customers).
    pub fn of_reconciliation(id: EventId, reconciliation: &Reconciliation) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            reconciliation_id: &'a crate::ids::ReconciliationId,
            rail: &'a str,
            outcomes: &'a crate::reconciliations::OutcomeCounts,
            cause: &'a Cause,
            object: Snapshot<'a, Reconciliation>,
        }
        let data = EventData::of(&Data {
            reconciliation_id: &reconciliation.id,
            rail: &reconciliation.rail,
            outcomes: &reconciliation.outcomes,
            cause: &reconciliation.cause,
            object: snapshot("reconciliation", reconciliation),
        });
        Event::new(
            id,
            "reconciliation.completed".into(),
            &CustomerId::from(PLATFORM),
            reconciliation.environment,
            reconciliation.created_at,
            data,
        )
    }
}

impl Event {
    /// `work_item.<change>` (opened, claimed, assigned, released, closed) with the item as it
    /// now is.
    pub fn of_work_item(id: EventId, change: &str, item: &WorkItem) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            work_item_id: &'a crate::ids::WorkItemId,
            customer_id: &'a CustomerId,
            queue: crate::desk::Queue,
            status: crate::desk::WorkItemStatus,
            subject: &'a crate::desk::Subject,
            assignee: &'a Option<String>,
            cause: &'a Cause,
            object: Snapshot<'a, WorkItem>,
        }
        let data = EventData::of(&Data {
            work_item_id: &item.id,
            customer_id: &item.customer_id,
            queue: item.queue,
            status: item.status,
            subject: &item.subject,
            assignee: &item.assignee,
            cause: &item.cause,
            object: snapshot("work_item", item),
        });
        Event::new(
            id,
            format!("work_item.{change}"),
            &item.customer_id,
            item.environment,
            item.cause.at,
            data,
        )
    }
}

impl Event {
    /// `customer.<change>` (created, updated, suspended, reactivated) with the customer as it
    /// now is; the customer's endpoints receive it, and the platform's.
    pub fn of_customer(
        id: EventId,
        change: &str,
        customer: &Customer,
        cause: &Cause,
        environment: Environment,
    ) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            customer_id: &'a CustomerId,
            status: &'a crate::access::CustomerStatus,
            cause: &'a Cause,
            object: Snapshot<'a, Customer>,
        }
        let data = EventData::of(&Data {
            customer_id: &customer.id,
            status: &customer.status,
            cause,
            object: snapshot("customer", customer),
        });
        Event::new(
            id,
            format!("customer.{change}"),
            &customer.id,
            environment,
            cause.at,
            data,
        )
    }
}

impl Event {
    /// `webhook_endpoint.<change>` (failing, disabled, enabled): an endpoint's breaker warning
    /// at a level, opening, or the endpoint enabled again, with its health; the platform's
    /// endpoints receive it.
    pub fn of_endpoint_health(
        id: EventId,
        change: &str,
        endpoint: &crate::webhooks::WebhookEndpoint,
        health: &crate::webhooks::EndpointHealth,
        cause: &Cause,
    ) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            webhook_endpoint_id: &'a crate::ids::WebhookEndpointId,
            owner: &'a Option<CustomerId>,
            url: &'a str,
            consecutive_failures: u32,
            failures_that_disable: u32,
            success_rate: Option<f64>,
            cause: &'a Cause,
        }
        let data = EventData::of(&Data {
            webhook_endpoint_id: &endpoint.id,
            owner: &endpoint.customer_id,
            url: &endpoint.url,
            consecutive_failures: health.consecutive_failures,
            failures_that_disable: endpoint.breaker.failures,
            success_rate: health.success_rate(),
            cause,
        });
        Event::new(
            id,
            format!("webhook_endpoint.{change}"),
            &CustomerId::from(PLATFORM),
            endpoint.environment,
            cause.at,
            data,
        )
    }
}

/// The changes of an endpoint's health that are events.
pub const WEBHOOK_ENDPOINT_EVENTS: [&str; 3] = ["failing", "disabled", "enabled"];

/// The changes of a customer that are events.
pub const CUSTOMER_EVENTS: [&str; 4] = ["created", "updated", "suspended", "reactivated"];

/// The changes of a work item that are events.
pub const WORK_ITEM_EVENTS: [&str; 5] = ["opened", "claimed", "assigned", "released", "closed"];

/// The customer id of events about the platform's own accounts: only the platform's webhook
/// endpoints receive them.
pub const PLATFORM: &str = "platform";

/// The changes of a schedule that are events.
pub const SCHEDULE_EVENTS: [&str; 7] = [
    "created",
    "paused",
    "resumed",
    "ended",
    "deleted",
    "occurrence_missed",
    "occurrence_skipped",
];

/// A resource as an event carries it: its `object` name, then its fields.
#[derive(Serialize)]
struct Snapshot<'a, T> {
    object: &'static str,
    #[serde(flatten)]
    fields: &'a T,
}

fn snapshot<'a, T: Serialize>(object: &'static str, fields: &'a T) -> Snapshot<'a, T> {
    Snapshot { object, fields }
}

/// Every event type a webhook endpoint can subscribe to.
pub fn event_types() -> impl Iterator<Item = String> {
    let operations = std::iter::once("created")
        .chain(OperationStatus::ALL.iter().map(|s| s.as_str()))
        .map(|s| format!("operation.{s}"));
    let transactions = TransactionStatus::ALL
        .iter()
        .map(|s| format!("transaction.{}", s.as_str()));
    let schedules = SCHEDULE_EVENTS.iter().map(|change| format!("schedule.{change}"));
    let ledger = [
        "account.created",
        "movement.pending",
        "movement.posted",
        "movement.voided",
    ]
    .into_iter()
    .map(String::from);
    let desk = WORK_ITEM_EVENTS.iter().map(|change| format!("work_item.{change}"));
    let files = crate::files::FileStatus::ALL
        .iter()
        .map(|status| format!("file.{}", status.as_str()));
    let files = files.chain(std::iter::once("file.status_report".to_owned()));
    let reconciliations = std::iter::once("reconciliation.completed".to_owned());
    let customers = CUSTOMER_EVENTS.iter().map(|change| format!("customer.{change}"));
    let endpoints = WEBHOOK_ENDPOINT_EVENTS
        .iter()
        .map(|change| format!("webhook_endpoint.{change}"));
    let limits = std::iter::once(crate::limits::WARNING_EVENT.to_owned());
    operations
        .chain(limits)
        .chain(transactions)
        .chain(schedules)
        .chain(ledger)
        .chain(desk)
        .chain(files)
        .chain(reconciliations)
        .chain(customers)
        .chain(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operations_event_carries_its_facts_and_the_operation_named() {
        let operation: Operation = serde_json::from_value(serde_json::json!({
            "id": "op_1", "customer_id": "cus_1", "type": "payout", "currency": "CLP", "items": [],
            "workflow": "two_step", "status": "pending_approval",
            "cause": {"code": "workflow.approval_required", "message": "m", "actor": {"type": "system", "id": "system"}, "at": "2026-11-28T00:00:00Z"},
            "total_amount": 15000, "approvals": [], "created_by": "key_1",
            "created_at": "2026-11-28T00:00:00Z", "updated_at": "2026-11-28T00:00:00Z",
            "metadata": {}, "environment": "test", "version": 1,
        }))
        .unwrap();
        let event = Event::of_operation("evt_1".into(), "created", &operation);
        let data = event.data.to_value();
        assert_eq!(data["operation_id"], "op_1");
        assert_eq!(data["status"], "pending_approval");
        assert_eq!(data["type"], "payout");
        assert_eq!(data["total_amount"], 15000);
        assert_eq!(data["object"]["object"], "operation");
        assert_eq!(data["object"]["workflow"], "two_step");
        assert_eq!(data["cause"]["code"], "workflow.approval_required");

        // A new operation's two events, its data written once, are the two made apart.
        let [created, in_status] = Event::of_new_operation("evt_1".into(), "evt_2".into(), &operation);
        assert_eq!(created, event);
        assert_eq!(
            in_status,
            Event::of_operation("evt_2".into(), "pending_approval", &operation)
        );
        assert_eq!(in_status.kind, "operation.pending_approval");
    }

    #[test]
    fn event_types_are_the_state_changes_and_nothing_else() {
        let types: Vec<String> = event_types().collect();
        assert!(types.contains(&"operation.created".to_string()));
        assert!(types.contains(&"transaction.confirmed".to_string()));
        assert!(!types.contains(&"operation.zzz".to_string()));
    }
}
