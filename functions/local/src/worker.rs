//! Local mode's trigger loop: what Lambda event source mappings and schedules do in the
//! cloud. It feeds the same handlers from the embedded change stream, the embedded queues
//! and a timer, acknowledging only what the handlers report as done.

use crate::loops;
use ops_domain::event::Event;
use ops_domain::ports::{BatchOutcome, QueueName};
use ops_domain::service::Service;
use ops_infra::embedded::{SqliteQueue, SqliteStore};
use ops_infra::QueueConsumer;
use std::sync::Arc;
use std::time::Duration;

const STREAM_BATCH: usize = 100;
const QUEUE_BATCH: usize = 10;
/// How long a loop rests when its trigger had nothing to do: SQLite answers an empty read in
/// microseconds.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// Webhook sends run side by side, as concurrent invocations of the function do in the cloud.
const WEBHOOK_SENDERS: usize = 4;

#[derive(Clone)]
pub struct Worker {
    service: Arc<Service>,
    store: SqliteStore,
    queue: SqliteQueue,
}

/// The stream consumers, each with its own checkpoint (like two event source mappings).
#[derive(Clone, Copy, Debug)]
pub enum Subscription {
    Transitions,
    Webhooks,
}

impl Subscription {
    fn name(self) -> &'static str {
        match self {
            Subscription::Transitions => "transitions",
            Subscription::Webhooks => "webhooks",
        }
    }
}

impl Worker {
    pub fn new(service: Arc<Service>, store: SqliteStore, queue: SqliteQueue) -> Worker {
        Worker { service, store, queue }
    }

    pub fn queue(&self) -> &SqliteQueue {
        &self.queue
    }

    pub fn store(&self) -> &SqliteStore {
        &self.store
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// Runs every trigger in a loop of its own, webhook sends in several.
    pub async fn run(self) {
        let mut triggers = vec![];
        for subscription in [Subscription::Transitions, Subscription::Webhooks] {
            let round = move |worker: Worker| async move { worker.pump_stream(subscription).await };
            triggers.push(loops::trigger(subscription.name(), IDLE_WAIT, self.clone(), round));
        }
        let senders = std::iter::repeat_n(QueueName::Webhooks, WEBHOOK_SENDERS);
        for queue in std::iter::once(QueueName::Submissions).chain(senders) {
            let round = move |worker: Worker| async move { worker.pump_queue(queue).await };
            triggers.push(loops::trigger(queue.as_str(), IDLE_WAIT, self.clone(), round));
        }
        let poll = |service: Arc<Service>| async move { service.poll_rails().await };
        triggers.push(loops::trigger("status-poll", IDLE_WAIT, self.service.clone(), poll));
        loops::run(triggers).await
    }

    /// One round over every trigger; returns how many items it handled.
    pub async fn tick(&self) -> Result<usize, ops_domain::ports::StoreError> {
        let mut handled = 0;
        for subscription in [Subscription::Transitions, Subscription::Webhooks] {
            handled += self.pump_stream(subscription).await?;
        }
        for queue in [QueueName::Submissions, QueueName::Webhooks] {
            handled += self.pump_queue(queue).await?;
        }
        handled += self.service.poll_rails().await.unwrap_or_else(|error| {
            tracing::warn!(%error, "status poll failed");
            0
        });
        Ok(handled)
    }

    /// Hands a stream batch to its consumer; the checkpoint stops before the first failure,
    /// so that event and everything after it come again.
    pub async fn pump_stream(&self, subscription: Subscription) -> Result<usize, ops_domain::ports::StoreError> {
        let batch = self.store.stream_batch(subscription.name(), STREAM_BATCH).await?;
        let Some((last, _)) = batch.last() else { return Ok(0) };
        let events: Vec<Event> = batch.iter().map(|(_, e)| e.clone()).collect();
        let outcome = self.handle_stream(subscription, &events).await;
        let checkpoint = match outcome.failed.first() {
            Some(failed) => batch
                .iter()
                .take_while(|(_, e)| &e.id != failed)
                .last()
                .map(|(seq, _)| *seq),
            None => Some(*last),
        };
        if let Some(seq) = checkpoint {
            self.store.advance_checkpoint(subscription.name(), seq).await?;
        }
        Ok(batch.len() - outcome.failed.len().min(batch.len()))
    }

    pub async fn handle_stream(&self, subscription: Subscription, events: &[Event]) -> BatchOutcome {
        match subscription {
            Subscription::Transitions => self.service.handle_transition_events(events).await,
            Subscription::Webhooks => self.service.handle_webhook_events(events).await,
        }
    }

    /// Receives a batch, hands it to its consumer and deletes what was handled; failed
    /// messages reappear after their visibility timeout.
    pub async fn pump_queue(&self, queue: QueueName) -> Result<usize, ops_domain::ports::StoreError> {
        let visibility = match queue {
            QueueName::Submissions => time::Duration::seconds(30),
            QueueName::Webhooks => time::Duration::seconds(120),
        };
        let messages = self.queue.receive(queue, QUEUE_BATCH, visibility).await?;
        if messages.is_empty() {
            return Ok(0);
        }
        let outcome = match queue {
            QueueName::Submissions => self.service.handle_submissions(&messages).await,
            QueueName::Webhooks => self.service.handle_webhook_sends(&messages).await,
        };
        for message in messages.iter().filter(|m| !outcome.failed.contains(&m.id)) {
            self.queue.ack(queue, &message.id).await?;
        }
        Ok(messages.len())
    }
}
