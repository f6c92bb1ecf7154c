//! Deliveries in order per operation, for an endpoint that asks for it: an event of an
//! operation is sent only once the earlier events of that operation were delivered to the
//! endpoint or finally failed. Other operations' deliveries are not held back.
//!
//! The order is the store's, not the queue's: each (endpoint, operation) has a line, one small
//! versioned record listing its unfinished deliveries by event id (ids sort in the order
//! events were made). A delivery is queued when it is first in its line; one behind is left
//! alone, and the delivery before it, once finished, leaves the line and queues the next.
//! Retries keep their place: a delivery waiting for its next try stays first, and those
//! behind it wait with it.

use crate::error::DomainError;
use crate::ids::{DeliveryId, EventId, OperationId, WebhookEndpointId};
use crate::ports::{Changeset, QueueTask, StoreError, Write};
use crate::service::Service;
use crate::webhooks::{Delivery, DeliveryStatus};
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use time::Duration;

/// Whether an endpoint's deliveries keep the order of each operation's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOrder {
    /// Each delivery is sent as soon as it can be (the fastest).
    #[default]
    None,
    /// An operation's events one after another, in the order they were made.
    PerOperation,
}

impl DeliveryOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOrder::None => "none",
            DeliveryOrder::PerOperation => "per_operation",
        }
    }
}

/// The unfinished deliveries of one operation's events to one endpoint, by event id: the
/// first is the one that may be sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryLine {
    pub endpoint_id: WebhookEndpointId,
    pub operation_id: OperationId,
    pub waiting: Vec<InLine>,
    pub version: u64,
}

/// A delivery in a line, and the event whose place it keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InLine {
    pub event_id: EventId,
    pub delivery_id: DeliveryId,
}

impl DeliveryLine {
    fn new(endpoint_id: &WebhookEndpointId, operation_id: &OperationId) -> DeliveryLine {
        DeliveryLine {
            endpoint_id: endpoint_id.clone(),
            operation_id: operation_id.clone(),
            waiting: vec![],
            version: 0,
        }
    }

    fn first(&self) -> Option<&DeliveryId> {
        self.waiting.first().map(|first| &first.delivery_id)
    }

    /// Puts the delivery in its event's place; `false` if it already has one.
    fn join(&mut self, delivery: &Delivery) -> bool {
        if self.waiting.iter().any(|w| w.delivery_id == delivery.id) {
            return false;
        }
        let place = self
            .waiting
            .partition_point(|w| (&w.event_id, &w.delivery_id) < (&delivery.event_id, &delivery.id));
        self.waiting.insert(
            place,
            InLine {
                event_id: delivery.event_id.clone(),
                delivery_id: delivery.id.clone(),
            },
        );
        true
    }

    fn leave(&mut self, delivery_id: &DeliveryId) -> bool {
        let before = self.waiting.len();
        self.waiting.retain(|w| &w.delivery_id != delivery_id);
        self.waiting.len() != before
    }
}

/// A delivery to take out of its line.
#[derive(Clone)]
struct Leaving {
    endpoint_id: WebhookEndpointId,
    operation_id: OperationId,
    delivery_id: DeliveryId,
}

/// Reads and versioned writes one change of a line may take while others change it too.
const LINE_ATTEMPTS: usize = 8;

impl Service {
    /// Puts a new delivery in its line; whether it is first (and so to be sent now).
    pub(super) async fn join_line(&self, delivery: &Delivery) -> Result<bool, DomainError> {
        let Some(operation_id) = &delivery.in_line_of else {
            return Ok(true);
        };
        self.change_line(&delivery.endpoint_id, operation_id, |line| line.join(delivery))
            .await
            .map(|line| line.first() == Some(&delivery.id))
    }

    /// Whether a due delivery may be sent now: first in its line once the finished
    /// deliveries before it (whose workers stopped before they left it) are taken out.
    pub(super) async fn first_in_line(&self, delivery: &Delivery) -> Result<bool, DomainError> {
        let Some(operation_id) = &delivery.in_line_of else {
            return Ok(true);
        };
        let mut line = self.line(&delivery.endpoint_id, operation_id).await?;
        if !line.waiting.iter().any(|w| w.delivery_id == delivery.id) {
            line = self
                .change_line(&delivery.endpoint_id, operation_id, |line| line.join(delivery))
                .await?;
        }
        loop {
            match line.first() {
                Some(first) if first == &delivery.id => return Ok(true),
                None => return Ok(true),
                Some(first) => {
                    let finished = match self.store.delivery(first).await? {
                        Some(before) => before.status.is_finished(),
                        None => true,
                    };
                    if !finished {
                        return Ok(false);
                    }
                    let first = first.clone();
                    line = self
                        .change_line(&delivery.endpoint_id, operation_id, |line| line.leave(&first))
                        .await?;
                }
            }
        }
    }

    /// Takes finished deliveries out of their lines and queues each one now first (a
    /// delivery waiting for its disabled endpoint stays for the endpoint's release). A batch's
    /// lines are read side by side and written together; one that changed meanwhile is read
    /// and written again on its own. Done after the attempts are recorded; a worker that stops
    /// between the two leaves its messages unacknowledged, and a message's next receipt finds
    /// its delivery finished and does this again.
    pub(super) async fn leave_lines(&self, finished: &[&Delivery]) -> Result<(), DomainError> {
        let mut leaving: Vec<Leaving> = finished
            .iter()
            .filter_map(|d| {
                d.in_line_of.as_ref().map(|operation_id| Leaving {
                    endpoint_id: d.endpoint_id.clone(),
                    operation_id: operation_id.clone(),
                    delivery_id: d.id.clone(),
                })
            })
            .collect();
        // A line whose next delivery is finished too (one joined again by a second dispatch
        // of its event) or gone is taken on past it: each round takes something out.
        while !leaving.is_empty() {
            leaving = self.leave_once(&leaving).await?;
        }
        Ok(())
    }

    /// One round of [`Self::leave_lines`]: what is now first in a line and finished too.
    async fn leave_once(&self, leaving: &[Leaving]) -> Result<Vec<Leaving>, DomainError> {
        let read = join_all(leaving.iter().map(|l| self.line(&l.endpoint_id, &l.operation_id))).await;
        let mut lines = Vec::with_capacity(leaving.len());
        let mut changesets = vec![];
        for (left, line) in leaving.iter().zip(read) {
            let mut line = line?;
            let changed = line.leave(&left.delivery_id);
            if changed {
                line.version += 1;
                let mut changes = Changeset::default();
                changes.push(Write::PutDeliveryLine(line.clone()));
                changesets.push(changes);
            }
            lines.push((line, changed));
        }
        let mut written = self.store.commit_each(changesets).await.into_iter();
        let mut firsts = Vec::with_capacity(lines.len());
        for (left, (line, changed)) in leaving.iter().zip(lines) {
            let line = match changed.then(|| written.next()).flatten() {
                None | Some(Ok(())) => line,
                Some(Err(StoreError::Conflict)) => {
                    self.change_line(&left.endpoint_id, &left.operation_id, |line| {
                        line.leave(&left.delivery_id)
                    })
                    .await?
                }
                Some(Err(other)) => return Err(other.into()),
            };
            if let Some(first) = line.first() {
                firsts.push(Leaving {
                    delivery_id: first.clone(),
                    ..left.clone()
                });
            }
        }
        let nexts = join_all(firsts.iter().map(|first| self.store.delivery(&first.delivery_id))).await;
        let mut again = vec![];
        for (first, next) in firsts.into_iter().zip(nexts) {
            match next? {
                Some(next) if next.status == DeliveryStatus::Pending => {
                    let due = next.next_attempt_at.map_or(Duration::ZERO, |at| at - self.now());
                    let task = QueueTask::SendWebhook { delivery_id: next.id };
                    self.enqueue(task, &first.endpoint_id, due.max(Duration::ZERO)).await?;
                }
                // Waiting for its disabled endpoint: the endpoint's release sends it.
                Some(next) if next.status == DeliveryStatus::Waiting => {}
                Some(_) | None => again.push(first),
            }
        }
        Ok(again)
    }

    async fn line(
        &self,
        endpoint_id: &WebhookEndpointId,
        operation_id: &OperationId,
    ) -> Result<DeliveryLine, DomainError> {
        Ok(self
            .store
            .delivery_line(endpoint_id, operation_id)
            .await?
            .unwrap_or_else(|| DeliveryLine::new(endpoint_id, operation_id)))
    }

    /// Applies `change` to the line as stored, read again after each conflict; the line as
    /// it then is (unwritten when `change` changed nothing).
    async fn change_line(
        &self,
        endpoint_id: &WebhookEndpointId,
        operation_id: &OperationId,
        change: impl Fn(&mut DeliveryLine) -> bool,
    ) -> Result<DeliveryLine, DomainError> {
        let change = &change;
        let busy = || {
            Err(StoreError::unavailable(format!(
                "the delivery line of {operation_id} at {endpoint_id} kept changing"
            ))
            .into())
        };
        self.retry_on_conflict(LINE_ATTEMPTS, busy, move || async move {
            let mut line = self.line(endpoint_id, operation_id).await?;
            if !change(&mut line) {
                return Ok((line, Changeset::default()));
            }
            line.version += 1;
            let mut changes = Changeset::default();
            changes.push(Write::PutDeliveryLine(line.clone()));
            Ok((line, changes))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(event: &str, id: &str) -> Delivery {
        let now = time::OffsetDateTime::UNIX_EPOCH;
        Delivery {
            id: id.into(),
            event_id: event.into(),
            endpoint_id: "whe_1".into(),
            url: "https://example.com".into(),
            status: DeliveryStatus::Pending,
            attempts: vec![],
            next_attempt_at: Some(now),
            created_at: now,
            follow_up: None,
            in_line_of: Some("op_1".into()),
            operation_id: Some("op_1".into()),
            version: 1,
        }
    }

    #[test]
    fn a_line_keeps_event_order_whatever_order_deliveries_join_it() {
        let mut line = DeliveryLine::new(&"whe_1".into(), &"op_1".into());
        assert!(line.join(&delivery("evt_03", "whd_c")));
        assert!(line.join(&delivery("evt_01", "whd_a")));
        assert!(line.join(&delivery("evt_02", "whd_b")));
        assert!(!line.join(&delivery("evt_02", "whd_b")), "joined once");
        let order: Vec<&str> = line.waiting.iter().map(|w| w.delivery_id.as_str()).collect();
        assert_eq!(order, ["whd_a", "whd_b", "whd_c"]);
        assert!(line.leave(&"whd_a".into()));
        assert!(!line.leave(&"whd_a".into()));
        assert_eq!(line.first().map(|d| d.as_str()), Some("whd_b"));
    }

    #[test]
    fn the_order_is_read_as_snake_case_and_none_by_default() {
        assert_eq!(DeliveryOrder::default(), DeliveryOrder::None);
        for order in [DeliveryOrder::None, DeliveryOrder::PerOperation] {
            let read: DeliveryOrder = serde_json::from_str(&format!("\"{}\"", order.as_str())).unwrap();
            assert_eq!(read, order);
        }
    }
}
