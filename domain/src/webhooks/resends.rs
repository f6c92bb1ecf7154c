//! Events and their deliveries read back, and sent again: one event to its endpoints, or an
//! endpoint's failed deliveries.

use crate::access::{Principal, Scope};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{DeliveryId, EventId, OperationId, WebhookEndpointId};
use crate::service::{customer_scope, Page, Service};
use crate::webhooks::{Delivery, EventQuery, WebhookEndpoint};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;

/// The most failed deliveries one recover resends: each is a few store requests, and the call
/// answers well within an API function's timeout.
const RECOVER_BATCH: usize = 50;

fn optional_time(value: Option<String>, param: &str) -> Result<Option<time::OffsetDateTime>, DomainError> {
    value
        .map(|text| crate::validate::rfc3339_time(&text, param))
        .transpose()
}

/// How many events one recover resends at a time.
const RESENDS_IN_FLIGHT: usize = 8;

/// Failed deliveries a recover with a range looks through at most, for those in its range.
const RECOVER_SCAN: usize = 1_000;

/// What a recover resends: every failed delivery not yet resent, or those whose event came in
/// a range (an empty or absent body resends them all).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverWebhookEndpoint {
    /// RFC 3339: the first moment of the range, included.
    pub from: Option<String>,
    /// RFC 3339: its last moment, included.
    pub to: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResendEvent {
    pub endpoint_id: Option<String>,
}

impl Service {
    // ---- events -----------------------------------------------------------------------

    pub async fn get_event(&self, principal: &Principal, id: &EventId) -> Result<Event, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.store
            .event(id)
            .await?
            .filter(|e| principal.can_access(&e.customer_id))
            .ok_or_else(|| DomainError::not_found("event", id))
    }

    pub async fn list_events(&self, principal: &Principal, mut query: EventQuery) -> Result<Page<Event>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = EventQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of_listed(self.store.events(&query).await?, limit))
    }

    pub async fn event_deliveries(&self, principal: &Principal, id: &EventId) -> Result<Page<Delivery>, DomainError> {
        let event = self.get_event(principal, id).await?;
        let data = self
            .store
            .deliveries_of_event(&event.id, event.operation_id().as_ref())
            .await?;
        Ok(Page::all(self.visible_deliveries(principal, data).await?))
    }

    /// The deliveries among `deliveries` the caller may see: a customer's key those to its own
    /// endpoints (each endpoint read once), the platform's all.
    async fn visible_deliveries(
        &self,
        principal: &Principal,
        deliveries: Vec<Delivery>,
    ) -> Result<Vec<Delivery>, DomainError> {
        let Some(own) = &principal.key.customer_id else {
            return Ok(deliveries);
        };
        let mut owned = std::collections::HashMap::new();
        let mut visible = vec![];
        for delivery in deliveries {
            let mine = match owned.get(&delivery.endpoint_id) {
                Some(mine) => *mine,
                None => {
                    let endpoint = self.store.webhook_endpoint(&delivery.endpoint_id).await?;
                    let mine = endpoint.is_some_and(|e| e.customer_id.as_deref() == Some(own));
                    owned.insert(delivery.endpoint_id.clone(), mine);
                    mine
                }
            };
            if mine {
                visible.push(delivery);
            }
        }
        Ok(visible)
    }

    /// The deliveries of an operation's events, oldest event first, a page at a time: to the
    /// caller's endpoints (every endpoint's for the platform).
    pub async fn operation_deliveries(
        &self,
        principal: &Principal,
        id: &OperationId,
        starting_after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Page<Delivery>, DomainError> {
        let operation = self.get_operation(principal, id).await?;
        let after = match starting_after {
            Some(after) => Some(
                self.store
                    .delivery(&after)
                    .await?
                    .filter(|d| d.operation_id.as_ref() == Some(&operation.id))
                    .ok_or_else(|| {
                        DomainError::invalid(
                            "starting_after",
                            "invalid_id",
                            format!("{after} is no delivery of {}.", operation.id),
                        )
                    })?,
            ),
            None => None,
        };
        let read = self
            .store
            .deliveries_of_operation(&operation.id, after.as_ref(), limit + 1)
            .await?;
        let has_more = read.len() > limit;
        let read: Vec<Delivery> = read.into_iter().take(limit).collect();
        let last = read.last().map(|d| d.id.to_string());
        let data = self.visible_deliveries(principal, read).await?;
        // The platform's deliveries left out may leave a page short: it says where the next starts.
        let next_starting_after = has_more.then_some(last).flatten();
        Ok(Page {
            data,
            has_more,
            next_starting_after,
        })
    }

    pub async fn resend_event(
        &self,
        principal: &Principal,
        id: &EventId,
        command: ResendEvent,
    ) -> Result<Page<Delivery>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let event = self.get_event(principal, id).await?;
        let only = match command.endpoint_id {
            Some(endpoint_id) => {
                let missing = || {
                    DomainError::missing_reference("endpoint_id", format!("No such webhook endpoint: '{endpoint_id}'"))
                };
                let id = WebhookEndpointId::parse(&endpoint_id).ok_or_else(missing)?;
                let endpoint = self.visible_endpoint(principal, &id).await.map_err(|_| missing())?;
                endpoint.id.to_string()
            }
            None => "*".into(),
        };
        // A customer resends to its own endpoints; only the platform resends to the platform's.
        let endpoints: Vec<WebhookEndpoint> = self
            .store
            .webhook_endpoints_for(Some(&event.customer_id))
            .await?
            .into_iter()
            .filter(|e| principal.is_platform() || e.customer_id.is_some())
            .collect();
        let made = self.dispatch_to(&event, &endpoints, Some(&only)).await?;
        self.close_failed_deliveries(&event, &made, principal.actor(), None)
            .await?;
        Ok(Page::all(made))
    }

    /// `POST /v1/webhook_endpoints/{id}/recover`: after an outage longer than the retries,
    /// resends the endpoint's failed deliveries that await a follow-up, oldest event first, at
    /// most [`RECOVER_BATCH`] a call (`has_more`: call again). Each event is resent once, as a
    /// new delivery, and its failed deliveries are then marked, with their exceptions items
    /// closed: an event resent while its first delivery was still being retried can have
    /// failed twice. One the endpoint no longer takes is marked not resent. A call cut short
    /// leaves the rest listed, so calling again finishes it; an event at most resent twice
    /// then, as at-least-once delivery allows.
    pub async fn recover_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
        command: RecoverWebhookEndpoint,
    ) -> Result<Page<Delivery>, DomainError> {
        let from = optional_time(command.from, "from")?;
        let to = optional_time(command.to, "to")?;
        if let (Some(from), Some(to)) = (from, to) {
            if to < from {
                return Err(DomainError::invalid(
                    "to",
                    "end_before_start",
                    "to is at or after from.",
                ));
            }
        }
        let endpoint = self.visible_endpoint(principal, id).await?;
        let in_range = |d: &Delivery| {
            d.status == crate::webhooks::DeliveryStatus::Failed
                && from.is_none_or(|f| d.created_at >= f)
                && to.is_none_or(|t| d.created_at <= t)
        };
        // The failed deliveries in the range, oldest event first: a page at a time, for at
        // most RECOVER_SCAN of them (a call that stops there says has_more).
        let (mut failed, mut scanned, mut after) = (vec![], 0, None::<Delivery>);
        let mut has_more = loop {
            let page = self
                .store
                .failed_deliveries_of(&endpoint.id, after.as_ref(), RECOVER_BATCH + 1)
                .await?;
            let last_page = page.len() <= RECOVER_BATCH;
            scanned += page.len();
            after = page.last().cloned();
            failed.extend(page.into_iter().filter(|d| in_range(d)));
            if failed.len() > RECOVER_BATCH {
                break true;
            }
            if last_page {
                break false;
            }
            if scanned >= RECOVER_SCAN {
                break true;
            }
        };
        has_more |= failed.len() > RECOVER_BATCH;
        failed.truncate(RECOVER_BATCH);
        if from.is_some() || to.is_some() {
            let shown = |at: Option<time::OffsetDateTime>| {
                at.and_then(|at| at.format(&time::format_description::well_known::Rfc3339).ok())
                    .unwrap_or_else(|| "any time".into())
            };
            let cause = Cause::new(
                "webhook_endpoint_recovered",
                format!(
                    "Recover of the failed deliveries of events from {} to {}: {} to resend",
                    shown(from),
                    shown(to),
                    failed.len()
                ),
                principal.actor(),
                self.now(),
            );
            let entry = crate::ports::AuditEntry::new("webhook_endpoint", &endpoint.id, "recovered", cause);
            let mut changes = crate::ports::Changeset::default();
            changes.push(crate::ports::Write::Audit(entry));
            self.store.commit(changes).await?;
        }
        let mut by_event: Vec<(EventId, Vec<Delivery>)> = vec![];
        for delivery in failed {
            match by_event.iter_mut().find(|(event_id, _)| *event_id == delivery.event_id) {
                Some((_, same_event)) => same_event.push(delivery),
                None => by_event.push((delivery.event_id.clone(), vec![delivery])),
            }
        }
        let actor = principal.actor();
        // Events apart touch nothing in common: resent side by side, answered in their order.
        let resent: Vec<Vec<Delivery>> = stream::iter(by_event)
            .map(|(event_id, failed)| self.resend_for_recovery(&endpoint, event_id, failed, actor.clone()))
            .buffered(RESENDS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(Page {
            data: resent.into_iter().flatten().collect(),
            has_more,
            next_starting_after: None,
        })
    }

    /// Resends one event to a recovered endpoint, or marks its failed deliveries not resent.
    async fn resend_for_recovery(
        &self,
        endpoint: &WebhookEndpoint,
        event_id: EventId,
        failed: Vec<Delivery>,
        actor: Actor,
    ) -> Result<Vec<Delivery>, DomainError> {
        let made = match self.store.event(&event_id).await? {
            Some(event) => {
                let made = self
                    .dispatch_to(&event, std::slice::from_ref(endpoint), Some("*"))
                    .await?;
                self.close_failed_deliveries(&event, &made, actor.clone(), Some("endpoint recovered"))
                    .await?;
                made
            }
            None => vec![],
        };
        if made.is_empty() {
            let why = "Not resent: the endpoint no longer takes its event, or the event is gone.";
            for delivery in failed {
                let cause = Cause::new("nothing_to_resend", why, actor.clone(), self.now());
                self.give_up_on_delivery(delivery, cause).await?;
            }
        }
        Ok(made)
    }

    /// `GET /v1/webhook_endpoints/{id}/failed_deliveries`: the endpoint's failed deliveries
    /// that await a follow-up, what recovering it would resend, oldest event first. A page
    /// starts after a delivery of the endpoint's, listed or not (one resent since keeps its
    /// place).
    pub async fn failed_deliveries(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
        starting_after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Page<Delivery>, DomainError> {
        let endpoint = self.visible_endpoint(principal, id).await?;
        let after = match starting_after {
            Some(after) => Some(
                self.store
                    .delivery(&after)
                    .await?
                    .filter(|d| d.endpoint_id == endpoint.id)
                    .ok_or_else(|| {
                        DomainError::invalid(
                            "starting_after",
                            "resource_missing",
                            format!("No delivery {after} of this endpoint."),
                        )
                    })?,
            ),
            None => None,
        };
        // Those waiting for the endpoint to be enabled again share the list; they are not
        // failures.
        let failed = self
            .store
            .failed_deliveries_of(&endpoint.id, after.as_ref(), limit + 1)
            .await?
            .into_iter()
            .filter(|d| d.status == crate::webhooks::DeliveryStatus::Failed)
            .collect();
        Ok(Page::of(failed, limit))
    }
}
