//! Stream → webhook dispatch and queue → webhook send: one delivery per interested endpoint,
//! attempted until the receiver takes it or its retries run out.

use crate::error::DomainError;
use crate::event::Event;
use crate::ids::{DeliveryId, EventId, WebhookEndpointId};
use crate::ports::{
    signals, BatchOutcome, Changeset, QueueMessage, QueueTask, Signal, StoreError, Write, MAX_QUEUE_DELAY,
};
use crate::service::{jitter, Service};
use crate::webhooks::{
    health, signature, Attempt, Delivery, DeliveryOrder, DeliveryStatus, EndpointStatus, HeldBack, Posted,
    WebhookEndpoint,
};
use futures_util::future::join_all;
use futures_util::stream::{self, StreamExt};
use sha2::{Digest, Sha256};
use std::collections::hash_map::{Entry, HashMap};
use time::Duration;

/// Webhook posts one batch keeps open at once.
const SENDS_IN_FLIGHT: usize = 10;

/// Delivery ids are derived from event and endpoint, so dispatching twice makes one delivery.
fn delivery_id(event_id: &EventId, endpoint_id: &WebhookEndpointId) -> DeliveryId {
    let digest = Sha256::digest(format!("{event_id}/{endpoint_id}"));
    DeliveryId::from(format!("whd_{}", &hex::encode(digest)[..26]))
}

impl Service {
    // ---- stream → webhook dispatch ------------------------------------------------------

    pub async fn handle_webhook_events(&self, events: &[Event]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        if let (Some(bus), Some(first)) = (&self.bus, events.first()) {
            if let Err(error) = bus.publish(events).await {
                tracing::warn!(%error, "publishing to the event bus failed; the batch comes again");
                outcome.failed.push(first.id.to_string());
                return outcome;
            }
        }
        // A batch mostly holds one customer's events: its endpoints are looked up once.
        let mut endpoints_of: HashMap<&str, Vec<WebhookEndpoint>> = HashMap::new();
        for event in events {
            let dispatched = async {
                let endpoints = match endpoints_of.entry(&event.customer_id) {
                    Entry::Occupied(found) => found.into_mut(),
                    Entry::Vacant(slot) => {
                        slot.insert(self.store.webhook_endpoints_for(Some(&event.customer_id)).await?)
                    }
                };
                self.dispatch_to(event, endpoints, None).await
            };
            if let Err(error) = dispatched.await {
                tracing::warn!(event = %event.id, %error, "webhook dispatch failed; the event comes again");
                outcome.failed.push(event.id.to_string());
                break;
            }
        }
        outcome
    }

    /// Makes one delivery per interested endpoint and queues it. `fresh` gives new delivery
    /// ids (a resend); otherwise ids derive from event and endpoint, so a second dispatch of
    /// the same event finds its deliveries made and only queues them again.
    pub(crate) async fn dispatch_to(
        &self,
        event: &Event,
        endpoints: &[WebhookEndpoint],
        fresh: Option<&str>,
    ) -> Result<Vec<Delivery>, DomainError> {
        let mut made = vec![];
        for endpoint in endpoints {
            if !endpoint.wants(&event.kind, &event.customer_id)
                || fresh.is_some_and(|only| only != "*" && endpoint.id != only)
            {
                continue;
            }
            let now = self.now();
            let id = match fresh {
                Some(_) => DeliveryId::new(&*self.ids),
                None => delivery_id(&event.id, &endpoint.id),
            };
            // A disabled endpoint's delivery waits, listed by its endpoint, to be sent in order
            // when the endpoint is enabled again.
            let waits = endpoint.status == EndpointStatus::Disabled;
            let operation_id = event.operation_id();
            let in_line_of = match endpoint.ordering {
                DeliveryOrder::PerOperation => operation_id.clone(),
                DeliveryOrder::None => None,
            };
            let delivery = Delivery {
                id,
                event_id: event.id.clone(),
                endpoint_id: endpoint.id.clone(),
                url: endpoint.url.clone(),
                status: if waits {
                    DeliveryStatus::Waiting
                } else {
                    DeliveryStatus::Pending
                },
                attempts: vec![],
                next_attempt_at: (!waits).then_some(now),
                created_at: now,
                follow_up: None,
                in_line_of,
                operation_id,
                version: 1,
            };
            let mut changes = Changeset::default();
            changes.push(Write::InsertDelivery(delivery.clone()));
            match self.store.commit(changes).await {
                Ok(()) => {}
                Err(StoreError::Conflict) => {
                    // Made by an earlier dispatch of the event: one finished since stays out
                    // of its line, which it left.
                    if delivery.in_line_of.is_some() {
                        if let Some(stored) = self.store.delivery(&delivery.id).await? {
                            if stored.status.is_finished() {
                                made.push(stored);
                                continue;
                            }
                        }
                    }
                }
                Err(other) => return Err(other.into()),
            }
            // One behind an earlier event's delivery is queued when that one is done.
            if !self.join_line(&delivery).await? || waits {
                made.push(delivery);
                continue;
            }
            let task = QueueTask::SendWebhook {
                delivery_id: delivery.id.clone(),
            };
            self.enqueue(task, &delivery.endpoint_id, Duration::ZERO).await?;
            made.push(delivery);
        }
        Ok(made)
    }

    // ---- queue → webhook send -----------------------------------------------------------

    /// Sends a batch side by side, ten posts open at a time, the next starting as one ends: a
    /// receiver that hangs keeps one of the ten places, and the batch's recording waits for
    /// it, for at most the sender's timeout. Once a receiver has stalled, the sender holds it
    /// to a few posts, and while others are sent to, to its share of the sender's places
    /// ([`HeldBack`]): the rest are queued again unattempted. A delivery named
    /// twice in one batch is sent once (the first message stands for both).
    /// The batch's attempts are then recorded together, each in its own changeset
    /// ([`crate::ports::Commit::commit_each`]: one store transaction for the batch locally).
    pub async fn handle_webhook_sends(&self, messages: &[QueueMessage]) -> BatchOutcome {
        let mut deliveries = std::collections::HashSet::new();
        let mut sends = vec![];
        let mut failed = vec![];
        for message in messages {
            match QueueTask::parse(&message.body) {
                Ok(QueueTask::SendWebhook { delivery_id }) if deliveries.insert(delivery_id.clone()) => {
                    sends.push((message, delivery_id))
                }
                Ok(QueueTask::SendWebhook { .. }) => {}
                Ok(QueueTask::ReleaseWaiting { endpoint_id, after }) => {
                    if let Err(error) = self.release_waiting(&endpoint_id, after.as_ref()).await {
                        tracing::warn!(message = %message.id, %error, "releasing waiting deliveries failed; the message comes again");
                        failed.push(message.id.clone());
                    }
                }
                Ok(other) => {
                    tracing::error!(message = %message.id, task = ?other, "a task of another queue dropped from the webhooks queue")
                }
                Err(error) => {
                    // Kept for its dead-letter queue, where a deployment that reads it can redrive it.
                    tracing::error!(message = %message.id, %error, "unreadable webhook message left for the dead-letter queue");
                    failed.push(message.id.clone());
                }
            }
        }
        // The batch's due deliveries first, read together with their events, then each
        // endpoint they go to (read once for the batch), then the sends: at most
        // SENDS_IN_FLIGHT posts are open at a time, and the next starts as soon as one ends, so
        // a slow receiver takes one place, not a round.
        let ids: Vec<DeliveryId> = sends.iter().map(|(_, id)| id.clone()).collect();
        let mut found: HashMap<DeliveryId, (Delivery, Option<String>)> = match self.store.deliveries_to_send(&ids).await
        {
            Ok(found) => found.into_iter().map(|(d, body)| (d.id.clone(), (d, body))).collect(),
            Err(error) => {
                tracing::warn!(%error, "webhook sends failed; the batch comes again");
                failed.extend(sends.iter().map(|(message, _)| message.id.clone()));
                return BatchOutcome { failed };
            }
        };
        // Checked side by side: an ordered delivery's check reads its line.
        let found: Vec<_> = sends
            .iter()
            .filter_map(|(message, delivery_id)| found.remove(delivery_id).map(|(d, body)| (*message, d, body)))
            .collect();
        let checked = join_all(found.into_iter().map(|(message, delivery, body)| async move {
            let event_id = delivery.event_id.clone();
            (message, event_id, self.due_now(delivery).await, body)
        }))
        .await;
        let mut due = Vec::with_capacity(checked.len());
        for (message, event_id, checked, body) in checked {
            match (checked, body) {
                (Ok(Some(delivery)), Some(body)) => due.push((message, delivery, body.into_bytes())),
                (Ok(None), _) => {}
                (Ok(Some(_)), None) => {
                    tracing::warn!(message = %message.id, event = %event_id, "webhook send failed, its event is missing; the message comes again");
                    failed.push(message.id.clone());
                }
                (Err(error), _) => {
                    tracing::warn!(message = %message.id, %error, "webhook send failed; the message comes again");
                    failed.push(message.id.clone());
                }
            }
        }
        let now = self.now();
        let endpoints: std::collections::HashSet<WebhookEndpointId> =
            due.iter().map(|(_, d, _)| d.endpoint_id.clone()).collect();
        let signers: HashMap<WebhookEndpointId, Result<Signer, String>> =
            join_all(endpoints.into_iter().map(|id| async move {
                let signer = self.signer(&id, now).await.map_err(|e| e.to_string());
                (id, signer)
            }))
            .await
            .into_iter()
            .collect();
        let mut posts = Vec::with_capacity(due.len());
        // Deliveries over their endpoint's rate limit this second wait, unattempted, a second
        // or more each (so those refused together spread over the seconds to come).
        let mut over_limit = vec![];
        let mut refused: HashMap<WebhookEndpointId, u32> = HashMap::new();
        for (message, delivery, body) in due {
            if let Ok(Signer {
                endpoint: Some(endpoint),
                ..
            }) = &signers[&delivery.endpoint_id]
            {
                if let Some(limit) = endpoint.rate_limit {
                    if !self.paced(&endpoint.id, limit, now).await {
                        let place = refused.entry(endpoint.id.clone()).or_default();
                        let wait = Duration::seconds(1 + i64::from(*place / limit));
                        *place += 1;
                        over_limit.push((message, Attempted::held_back(delivery, now, wait)));
                        continue;
                    }
                }
            }
            match &signers[&delivery.endpoint_id] {
                Ok(signer) => posts.push(async move {
                    let attempted = self.attempt_webhook(&delivery, body, signer, now).await;
                    (message, delivery, attempted)
                }),
                Err(error) => {
                    tracing::warn!(message = %message.id, %error, "webhook send failed; the message comes again");
                    failed.push(message.id.clone());
                }
            }
        }
        let attempted: Vec<_> = stream::iter(posts).buffer_unordered(SENDS_IN_FLIGHT).collect().await;
        let mut recorded = over_limit;
        for (message, delivery, attempt) in attempted {
            match attempt {
                Ok(Ok(attempt)) => recorded.push((message, attempt)),
                Ok(Err(HeldBack { retry_in })) => {
                    // Its receiver stopped answering: the delivery waits, its attempts uncounted,
                    // and says until when.
                    let wait = Duration::try_from(retry_in).unwrap_or(MAX_QUEUE_DELAY);
                    recorded.push((message, Attempted::held_back(delivery, now, wait)));
                }
                Err(error) => {
                    tracing::warn!(message = %message.id, %error, "webhook send failed; the message comes again");
                    failed.push(message.id.clone());
                }
            }
        }
        let changesets = recorded
            .iter_mut()
            .map(|(_, attempt)| std::mem::take(&mut attempt.changes))
            .collect();
        let results = self.store.commit_each(changesets).await;
        let mut outcomes: HashMap<WebhookEndpointId, Vec<health::Outcome>> = HashMap::new();
        for ((_, attempt), result) in recorded.iter().zip(&results) {
            if let (Ok(()), Some(outcome)) = (result, attempt.outcome) {
                outcomes
                    .entry(attempt.delivery.endpoint_id.clone())
                    .or_default()
                    .push(outcome);
            }
        }
        for (endpoint_id, outcomes) in &outcomes {
            if let Some(Ok(Signer {
                endpoint: Some(endpoint),
                ..
            })) = signers.get(endpoint_id)
            {
                self.record_health(endpoint, outcomes).await;
            }
        }
        // Finished deliveries leave their operations' lines together (one store transaction
        // locally); if that fails, their messages come again and leave them then.
        let finished: Vec<&Delivery> = recorded
            .iter()
            .zip(&results)
            .filter(|((_, attempt), result)| result.is_ok() && attempt.delivery.status.is_finished())
            .map(|((_, attempt), _)| &attempt.delivery)
            .collect();
        if let Err(error) = self.leave_lines(&finished).await {
            tracing::warn!(%error, "finished deliveries did not leave their lines; their messages come again");
            let ids: std::collections::HashSet<&DeliveryId> = finished.iter().map(|d| &d.id).collect();
            failed.extend(
                recorded
                    .iter()
                    .filter(|(_, attempt)| ids.contains(&attempt.delivery.id))
                    .map(|(message, _)| message.id.clone()),
            );
        }
        for ((message, attempt), result) in recorded.into_iter().zip(results) {
            let outcome = match result {
                Ok(()) => self.after_attempt(&attempt).await,
                // Another worker recorded this attempt (or deferral) first; its record stands.
                Err(StoreError::Conflict) => Ok(()),
                Err(other) => Err(other.into()),
            };
            if let Err(error) = outcome {
                tracing::warn!(message = %message.id, %error, "webhook send failed; the message comes again");
                failed.push(message.id.clone());
            }
        }
        BatchOutcome { failed }
    }

    /// Whether one more delivery to `endpoint_id` fits its `limit` this second (counted across
    /// every sender). A count that cannot be made holds the delivery back, as over the limit.
    async fn paced(&self, endpoint_id: &WebhookEndpointId, limit: u32, now: time::OffsetDateTime) -> bool {
        let limits = crate::ports::Limits {
            member: limit,
            group: u32::MAX,
        };
        match self
            .webhook_pace
            .admit("webhook-endpoints", endpoint_id, now.unix_timestamp(), limits)
            .await
        {
            Ok(admission) => admission.admitted,
            Err(error) => {
                tracing::warn!(endpoint = %endpoint_id, %error, "an endpoint's rate was not counted; its delivery waits");
                false
            }
        }
    }

    /// The delivery if it is due now; `None` if there is nothing to send (done, or not due:
    /// then its message is queued again for when it is).
    async fn due_now(&self, delivery: Delivery) -> Result<Option<Delivery>, DomainError> {
        if delivery.status.is_finished() {
            // Its worker may have stopped before it left its line (a message comes again
            // only when the work after the attempt was not done).
            self.leave_lines(&[&delivery]).await?;
            return Ok(None);
        }
        if delivery.status != DeliveryStatus::Pending {
            return Ok(None);
        }
        let now = self.now();
        if let Some(due) = delivery.next_attempt_at.filter(|due| *due > now) {
            // Not yet (a duplicate message, or a wait longer than a queue can hold).
            let task = QueueTask::SendWebhook {
                delivery_id: delivery.id.clone(),
            };
            self.enqueue(task, &delivery.endpoint_id, due - now).await?;
            return Ok(None);
        }
        if !self.first_in_line(&delivery).await? {
            // Behind an earlier event's delivery, which queues it once it is done.
            return Ok(None);
        }
        Ok(Some(delivery))
    }

    /// Posts a due delivery (`body`: its event's JSON as stored), signed with its endpoint's
    /// live secrets, and returns what recording the attempt writes (or that the sender held
    /// it back: then nothing was attempted). A delivery held back for longer than its retries
    /// would have taken has run out of them: it fails, with an attempt saying why.
    async fn attempt_webhook(
        &self,
        delivery: &Delivery,
        body: Vec<u8>,
        signer: &Signer,
        now: time::OffsetDateTime,
    ) -> Result<Result<Attempted, HeldBack>, DomainError> {
        let mut out_of_time = false;
        let mut updated = delivery.clone();
        let policy = signer.endpoint.as_ref().map(|e| e.retry_policy).unwrap_or_default();
        if signer
            .endpoint
            .as_ref()
            .is_some_and(|e| e.status == EndpointStatus::Disabled)
        {
            // Its endpoint was disabled since it was queued: it waits, unattempted.
            updated.status = DeliveryStatus::Waiting;
            updated.next_attempt_at = None;
            updated.version += 1;
            let mut changes = Changeset::default();
            changes.push(Write::UpdateDelivery(updated.clone()));
            return Ok(Ok(Attempted {
                delivery: updated,
                changes,
                at: now,
                outcome: None,
            }));
        }
        let Posted { answer, took } = match &signer.endpoint {
            Some(endpoint) if endpoint.status == EndpointStatus::Enabled && !signer.secrets.is_empty() => {
                let refs: Vec<&str> = signer.secrets.iter().map(String::as_str).collect();
                let header = signature::header(&refs, now.unix_timestamp(), &body);
                // Where the endpoint is now: an owner who moved it wants its retries there.
                match self.webhooks.post(&endpoint.url, &header, body).await {
                    Ok(posted) => {
                        updated.move_to(&endpoint.url);
                        posted
                    }
                    Err(held_back) if now - delivery.created_at < policy.max_age() => return Ok(Err(held_back)),
                    Err(_) => {
                        out_of_time = true;
                        Posted::not_sent(
                            "not sent: its receiver had stopped answering, and stayed away for as long as its endpoint's retries take".to_string(),
                        )
                    }
                }
            }
            _ => Posted::not_sent("the endpoint was deleted".to_string()),
        };
        let attempt = Attempt {
            at: now,
            status_code: answer.as_ref().ok().copied(),
            error: answer.as_ref().err().cloned(),
            duration_ms: took.as_millis() as u64,
            url: None,
        };
        let delivered = matches!(answer, Ok(200..=299));
        // A post that was made counts in its endpoint's health (not one never sent).
        let outcome = (took > std::time::Duration::ZERO || answer.is_ok()).then_some(health::Outcome {
            at: now,
            delivered,
            gone: answer == Ok(410),
        });
        updated.attempts.push(attempt);
        updated.version += 1;
        if delivered {
            updated.status = DeliveryStatus::Delivered;
            updated.next_attempt_at = None;
        } else if out_of_time {
            updated.status = DeliveryStatus::Failed;
            updated.next_attempt_at = None;
        } else {
            match policy.next_wait(updated.attempts.len() - 1, now - delivery.created_at, jitter()) {
                Some(wait) => updated.next_attempt_at = Some(now + wait),
                None => {
                    updated.status = DeliveryStatus::Failed;
                    updated.next_attempt_at = None;
                }
            }
        }
        let mut changes = Changeset::default();
        if updated.status == DeliveryStatus::Failed {
            // Its retries ran out: an operator's to resend, in the same changeset. Only then is
            // the event read whole, for its customer.
            let event = self
                .store
                .event(&delivery.event_id)
                .await?
                .ok_or_else(|| StoreError::unavailable(format!("event {} missing", delivery.event_id)))?;
            self.delivery_failed(&mut changes, &updated, &event.customer_id);
        }
        changes.push(Write::UpdateDelivery(updated.clone()));
        Ok(Ok(Attempted {
            delivery: updated,
            changes,
            at: now,
            outcome,
        }))
    }

    /// An endpoint and the values of its live secrets, read once for a batch: a batch's
    /// deliveries mostly go to the same few endpoints.
    async fn signer(&self, endpoint_id: &WebhookEndpointId, now: time::OffsetDateTime) -> Result<Signer, DomainError> {
        let endpoint = self.store.webhook_endpoint(endpoint_id).await?;
        let mut secrets = vec![];
        for secret in endpoint.iter().flat_map(|e| e.live_secrets(now)) {
            if let Some(value) = self.secrets.secret(&secret.secret_name).await? {
                secrets.push(value);
            }
        }
        Ok(Signer { endpoint, secrets })
    }

    /// What follows a recorded attempt: the failure counted, or the next try queued.
    async fn after_attempt(&self, attempted: &Attempted) -> Result<(), DomainError> {
        let delivery = &attempted.delivery;
        if delivery.status == DeliveryStatus::Failed {
            self.metrics
                .record(&[Signal::count(signals::WEBHOOK_DELIVERIES_FAILED, 1)]);
        }

        if let Some(due) = delivery.next_attempt_at {
            let task = QueueTask::SendWebhook {
                delivery_id: delivery.id.clone(),
            };
            self.enqueue(task, &delivery.endpoint_id, due - attempted.at).await?;
        }
        Ok(())
    }
}

/// An endpoint as one batch sends to it: the endpoint (if it still exists) and the values
/// of its live signing secrets.
struct Signer {
    endpoint: Option<WebhookEndpoint>,
    secrets: Vec<String>,
}

/// A delivery attempted (or held back unattempted): the delivery as it now is, and what
/// records it.
struct Attempted {
    delivery: Delivery,
    changes: Changeset,
    at: time::OffsetDateTime,
    /// What the attempt tells its endpoint's health (none if nothing was posted).
    outcome: Option<health::Outcome>,
}

impl Attempted {
    /// A delivery its sender held back: no attempt, the next one `wait` from `now`.
    fn held_back(mut delivery: Delivery, now: time::OffsetDateTime, wait: Duration) -> Attempted {
        delivery.next_attempt_at = Some(now + wait);
        delivery.version += 1;
        let mut changes = Changeset::default();
        changes.push(Write::UpdateDelivery(delivery.clone()));
        Attempted {
            delivery,
            changes,
            at: now,
            outcome: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_ids_are_stable_per_event_and_endpoint() {
        let (event, one, two) = ("evt_1".into(), "whe_1".into(), "whe_2".into());
        assert_eq!(delivery_id(&event, &one), delivery_id(&event, &one));
        assert_ne!(delivery_id(&event, &one), delivery_id(&event, &two));
        assert!(DeliveryId::parse(&delivery_id(&event, &one)).is_some());
    }
}
