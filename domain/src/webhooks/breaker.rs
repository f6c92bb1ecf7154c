//! The circuit breaker of webhook endpoints: each batch's attempts counted in the endpoint's
//! health, warnings and the endpoint disabled as its [`Breaker`] says, and an endpoint enabled
//! again sending what waited, in its events' order, paced.

use super::{
    Breaker, DeliveryStatus, EndpointHealth, EndpointStatus, Outcome, Tripped, WebhookEndpoint, WARNING_LEVELS,
};
use crate::access::{Principal, Scope};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{DeliveryId, EventId, WebhookEndpointId};
use crate::ports::{Changeset, QueueTask, StoreError, Write};
use crate::service::Service;
use serde::Deserialize;
use time::Duration;

/// How fast the deliveries that waited go once their endpoint is enabled again, when it sets
/// no rate limit of its own: a backlog after an outage does not flood the receiver.
pub const RELEASED_PER_SECOND: i64 = 10;
/// Waiting deliveries one release task sends on; it queues itself again for the rest.
const RELEASE_BATCH: usize = 100;
/// An endpoint's listed deliveries (failed ones too) one release task looks through.
const RELEASE_SCAN: usize = 500;
/// Read-change-write rounds of an endpoint's health before a batch gives up counting.
const HEALTH_ATTEMPTS: usize = 5;

/// `POST /v1/webhook_endpoints/{id}/enable`: no fields.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnableWebhookEndpoint {}

impl Service {
    /// Counts a batch's attempts to `endpoint` in its health, and acts on what the breaker
    /// says: a warning (an event for the platform and, at the first level, an exceptions work
    /// item), or the endpoint disabled (an event, a work item). A success after warnings
    /// closes the warning's item. Lost races are read again; a count that keeps losing is
    /// logged and left to the next batch.
    pub(super) async fn record_health(&self, endpoint: &WebhookEndpoint, outcomes: &[Outcome]) {
        for _ in 0..HEALTH_ATTEMPTS {
            match self.try_record_health(endpoint, outcomes).await {
                Ok(true) => return,
                Ok(false) => continue,
                Err(error) => {
                    tracing::warn!(endpoint = %endpoint.id, %error, "an endpoint's health was not counted");
                    return;
                }
            }
        }
        tracing::warn!(endpoint = %endpoint.id, "an endpoint's health kept changing; this batch is not counted");
    }

    /// One round of [`Service::record_health`]: false when another batch changed it first.
    async fn try_record_health(&self, endpoint: &WebhookEndpoint, outcomes: &[Outcome]) -> Result<bool, DomainError> {
        let now = self.now();
        let mut health = self
            .store
            .endpoint_health(&endpoint.id)
            .await?
            .unwrap_or_else(|| EndpointHealth::new(endpoint.id.clone(), now));
        let warned_before = health.warned;
        let tripped = health.record(outcomes, &endpoint.breaker);
        health.version += 1;
        let mut changes = Changeset::default();
        match tripped {
            Some(Tripped::Warning { from, to }) => {
                let failing = |level: u8| {
                    Cause::new(
                        "webhook_endpoint_failing",
                        format!(
                            "{} failed attempts in a row to {} (past {level} % of the {} that disable it)",
                            health.consecutive_failures, endpoint.url, endpoint.breaker.failures
                        ),
                        Actor::system(),
                        now,
                    )
                };
                // Each level passed is told, the lowest first, even when one batch passes two.
                for level in WARNING_LEVELS.into_iter().filter(|l| *l > from && *l <= to) {
                    changes.push(Write::Event(Event::of_endpoint_health(
                        EventId::new(&*self.ids),
                        "failing",
                        endpoint,
                        &health,
                        &failing(level),
                    )));
                }
                let cause = failing(to);
                if !self.endpoint_exception_open(endpoint.id.as_str()).await? {
                    self.endpoint_exception(
                        &mut changes,
                        endpoint,
                        "webhook_endpoint_failing",
                        endpoint.id.to_string(),
                        cause,
                    );
                }
            }
            Some(Tripped::Disable { gone }) if endpoint.status == EndpointStatus::Enabled => {
                let Some(mut disabled) = self.store.webhook_endpoint(&endpoint.id).await? else {
                    return Ok(true);
                };
                let message = match gone {
                    true => format!("{} answered 410 Gone: disabled until it is enabled again", endpoint.url),
                    false => format!(
                        "{} failed attempts in a row over {} hours or more: disabled until it is enabled again",
                        health.consecutive_failures, endpoint.breaker.over_hours
                    ),
                };
                let code = if gone {
                    "webhook_endpoint_gone"
                } else {
                    "webhook_endpoint_breaker_opened"
                };
                let cause = Cause::new(code, message, Actor::system(), now);
                disabled.status = EndpointStatus::Disabled;
                disabled.version += 1;
                changes.push(Write::Audit(crate::ports::AuditEntry::new(
                    "webhook_endpoint",
                    &disabled.id,
                    "disabled",
                    cause.clone(),
                )));
                changes.push(Write::Event(Event::of_endpoint_health(
                    EventId::new(&*self.ids),
                    "disabled",
                    &disabled,
                    &health,
                    &cause,
                )));
                let subject = format!("{}:disabled", disabled.id);
                self.endpoint_exception(&mut changes, &disabled, "webhook_endpoint_disabled", subject, cause);
                changes.push(Write::PutWebhookEndpoint(disabled));
            }
            _ => {}
        }
        changes.push(Write::PutEndpointHealth(health.clone()));
        match self.store.commit(changes).await {
            Ok(()) => {}
            Err(StoreError::Conflict) => return Ok(false),
            Err(other) => return Err(other.into()),
        }
        if warned_before > 0 && health.warned == 0 {
            let cause = Cause::new(
                "webhook_endpoint_answering",
                format!("{} took a delivery again", endpoint.url),
                Actor::system(),
                now,
            );
            self.close_endpoint_exception(endpoint.id.as_str(), cause).await?;
        }
        Ok(true)
    }

    /// An endpoint's health, for its owner (or the platform).
    pub async fn webhook_endpoint_health(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<EndpointHealth, DomainError> {
        let endpoint = self.visible_endpoint(principal, id).await?;
        Ok(self
            .store
            .endpoint_health(&endpoint.id)
            .await?
            .unwrap_or_else(|| EndpointHealth::new(endpoint.id.clone(), endpoint.created_at)))
    }

    /// Enables a disabled endpoint again (audited, with an event; its failures in a row start
    /// again from none and its disabled item closes), and sends what waited for it, in its
    /// events' order, [`RELEASED_PER_SECOND`] a second. Enabling an enabled endpoint changes
    /// nothing but sends on any that still wait.
    pub async fn enable_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<WebhookEndpoint, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let mut endpoint = self.visible_endpoint(principal, id).await?;
        if endpoint.status == EndpointStatus::Disabled {
            let now = self.now();
            let cause = Cause::new(
                "webhook_endpoint_enabled",
                "Enabled again on request; what waited is sent in order",
                principal.actor(),
                now,
            );
            let mut health = self
                .store
                .endpoint_health(&endpoint.id)
                .await?
                .unwrap_or_else(|| EndpointHealth::new(endpoint.id.clone(), now));
            health.consecutive_failures = 0;
            health.failing_since = None;
            health.warned = 0;
            health.version += 1;
            endpoint.status = EndpointStatus::Enabled;
            endpoint.version += 1;
            let mut changes = Changeset::default();
            changes.push(Write::Audit(crate::ports::AuditEntry::new(
                "webhook_endpoint",
                &endpoint.id,
                "enabled",
                cause.clone(),
            )));
            changes.push(Write::Event(Event::of_endpoint_health(
                EventId::new(&*self.ids),
                "enabled",
                &endpoint,
                &health,
                &cause,
            )));
            changes.push(Write::PutWebhookEndpoint(endpoint.clone()));
            changes.push(Write::PutEndpointHealth(health));
            self.store.commit(changes).await.map_err(|e| self.commit_error(e))?;
            self.close_endpoint_exception(&format!("{}:disabled", endpoint.id), cause.clone())
                .await?;
            self.close_endpoint_exception(endpoint.id.as_str(), cause).await?;
        }
        let task = QueueTask::ReleaseWaiting {
            endpoint_id: endpoint.id.clone(),
            after: None,
        };
        self.enqueue(task, &endpoint.id, Duration::ZERO).await?;
        Ok(endpoint)
    }

    /// The webhooks queue's release task: the next [`RELEASE_BATCH`] deliveries waiting for
    /// an enabled endpoint, after `after` in its list, go back to sending, each a tenth of a
    /// second after the one before, and the task comes again for the rest once they have gone.
    /// A list whose first [`RELEASE_SCAN`] entries are failures (not waiting) is looked
    /// through by the next task from where this one stopped, however many failures there are.
    pub(super) async fn release_waiting(
        &self,
        endpoint_id: &WebhookEndpointId,
        after: Option<&DeliveryId>,
    ) -> Result<(), DomainError> {
        let Some(endpoint) = self.store.webhook_endpoint(endpoint_id).await? else {
            return Ok(());
        };
        if endpoint.status != EndpointStatus::Enabled {
            return Ok(());
        }
        let after = match after {
            Some(id) => self.store.delivery(id).await?,
            None => None,
        };
        let listed = self
            .store
            .failed_deliveries_of(endpoint_id, after.as_ref(), RELEASE_SCAN)
            .await?;
        let scanned_all = listed.len() < RELEASE_SCAN;
        let mut looked_through = None;
        let mut waiting = Vec::with_capacity(RELEASE_BATCH);
        for delivery in listed {
            looked_through = Some(delivery.id.clone());
            if delivery.status == DeliveryStatus::Waiting {
                waiting.push(delivery);
                if waiting.len() == RELEASE_BATCH {
                    break;
                }
            }
        }
        let now = self.now();
        let per_second = endpoint.rate_limit.map_or(RELEASED_PER_SECOND, i64::from);
        let pace = Duration::seconds(1) / per_second as f64;
        let mut changesets = Vec::with_capacity(waiting.len());
        let mut released = Vec::with_capacity(waiting.len());
        for (place, mut delivery) in waiting.into_iter().enumerate() {
            let due = pace * place as f64;
            delivery.status = DeliveryStatus::Pending;
            delivery.next_attempt_at = Some(now + due);
            delivery.version += 1;
            released.push((delivery.id.clone(), due));
            let mut changes = Changeset::default();
            changes.push(Write::UpdateDelivery(delivery));
            changesets.push(changes);
        }
        let full = released.len() == RELEASE_BATCH;
        let results = self.store.commit_each(changesets).await;
        for ((delivery_id, due), result) in released.iter().zip(results) {
            match result {
                Ok(()) => {
                    let task = QueueTask::SendWebhook {
                        delivery_id: delivery_id.clone(),
                    };
                    self.enqueue(task, endpoint_id, *due).await?;
                }
                // Changed since it was listed: whatever changed it queues it.
                Err(StoreError::Conflict) => {}
                Err(other) => return Err(other.into()),
            }
        }
        if full || !scanned_all {
            // On from the last entry looked through, once those released have gone.
            let task = QueueTask::ReleaseWaiting {
                endpoint_id: endpoint_id.clone(),
                after: looked_through,
            };
            self.enqueue(task, endpoint_id, pace * released.len() as f64).await?;
        }
        Ok(())
    }
}

impl Breaker {
    /// The breaker a request sets, or the default; refused by field when out of bounds.
    pub fn chosen(asked: Option<Breaker>) -> Result<Breaker, DomainError> {
        let breaker = asked.unwrap_or_default();
        breaker.check()?;
        Ok(breaker)
    }
}
