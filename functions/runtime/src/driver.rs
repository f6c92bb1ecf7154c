//! The one trigger driver: what Lambda's event source mappings and schedules do in the cloud,
//! for local mode (over the embedded stream and queues) and for local mode against AWS or the
//! emulator (over the table's DynamoDB stream and SQS). Each trigger hands its batch to the
//! same consumer a Lambda function calls ([`StreamConsumer::consume`], [`consume_queue`]) and
//! acknowledges only what the consumer reports as done.

use async_trait::async_trait;
use ops_domain::event::Event;
use ops_domain::ports::{BatchOutcome, QueueMessage, QueueName};
use ops_domain::service::Service;
use ops_infra::QueueConsumer;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The consumers of the change stream, each with its own checkpoint (one event source
/// mapping each in the cloud).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamConsumer {
    /// Transactions, submissions, settlement.
    Transition,
    /// Webhook deliveries and the event bus.
    WebhookDispatch,
    /// Work items opened and closed as their subjects change.
    Desk,
}

impl StreamConsumer {
    pub const ALL: [StreamConsumer; 3] = [
        StreamConsumer::Transition,
        StreamConsumer::WebhookDispatch,
        StreamConsumer::Desk,
    ];

    /// The function that consumes the stream in the cloud.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamConsumer::Transition => "stream-transition",
            StreamConsumer::WebhookDispatch => "stream-webhook-dispatch",
            StreamConsumer::Desk => "stream-desk",
        }
    }

    /// Hands a batch of events to this consumer's use case.
    pub async fn consume(self, service: &Service, events: &[Event]) -> BatchOutcome {
        match self {
            StreamConsumer::Transition => service.handle_transition_events(events).await,
            StreamConsumer::WebhookDispatch => service.handle_webhook_events(events).await,
            StreamConsumer::Desk => service.handle_desk_events(events).await,
        }
    }
}

/// Hands a batch of messages to the use case that consumes `queue`.
pub async fn consume_queue(service: &Service, queue: QueueName, messages: &[QueueMessage]) -> BatchOutcome {
    match queue {
        QueueName::Submissions => service.handle_submissions(messages).await,
        QueueName::Webhooks => service.handle_webhook_sends(messages).await,
        QueueName::Files => service.handle_file_splits(messages).await,
    }
}

/// Everything that makes the pipeline move; one Lambda function each in the cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    Stream(StreamConsumer),
    Queue(QueueName),
    /// The status-poll schedule.
    StatusPoll,
    /// Schedules' occurrences: EventBridge Scheduler invoking `schedule-fire` in the cloud,
    /// the due index here.
    ScheduleTimer,
    /// The dead-letter queues, whose messages become exceptions work items.
    DeadLetters,
    /// On AWS, the events and audit entries a writer left in its entity's outbox and died
    /// before writing (the embedded store commits them together, so it has none).
    Outbox,
    /// Signing secrets no webhook endpoint names any more, deleted (daily in the cloud,
    /// hourly here): upkeep, not a step of the pipeline, so [`Driver::tick`] leaves it out.
    SecretSweep,
}

/// How often local mode sweeps signing secrets no endpoint names.
const SECRET_SWEEP_EVERY: Duration = Duration::from_secs(3600);

impl Trigger {
    pub const ALL: [Trigger; 11] = [
        Trigger::Stream(StreamConsumer::Transition),
        Trigger::Stream(StreamConsumer::WebhookDispatch),
        Trigger::Stream(StreamConsumer::Desk),
        Trigger::Queue(QueueName::Submissions),
        Trigger::Queue(QueueName::Webhooks),
        Trigger::Queue(QueueName::Files),
        Trigger::StatusPoll,
        Trigger::ScheduleTimer,
        Trigger::DeadLetters,
        Trigger::Outbox,
        Trigger::SecretSweep,
    ];

    /// The function that runs this trigger in the cloud.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Stream(consumer) => consumer.as_str(),
            Trigger::Queue(QueueName::Submissions) => "queue-rail-submit",
            Trigger::Queue(QueueName::Webhooks) => "queue-webhook-send",
            Trigger::Queue(QueueName::Files) => "queue-file-split",
            Trigger::StatusPoll => "schedule-status-poll",
            Trigger::ScheduleTimer => "schedule-fire",
            Trigger::DeadLetters => "queue-dead-letters",
            Trigger::Outbox => "stream-outbox",
            Trigger::SecretSweep => "schedule-secret-sweep",
        }
    }
}

/// Events read from one shard of the change stream for one consumer, each with its position.
pub struct StreamBatch {
    pub shard: String,
    pub events: Vec<(String, Event)>,
    /// The position of the last record read (non-event records included), where the
    /// checkpoint moves when every event was handled.
    pub last: String,
}

/// A change stream with a checkpoint per consumer: the embedded event log, or the table's
/// DynamoDB stream.
#[async_trait]
pub trait ChangeStream: Send + Sync {
    /// The next records after `consumer`'s checkpoint, one batch per shard that has any.
    async fn read(&self, consumer: StreamConsumer) -> Result<Vec<StreamBatch>, Error>;
    /// Everything up to `position` in `shard` is handled by `consumer`.
    async fn advance(&self, consumer: StreamConsumer, shard: &str, position: &str) -> Result<(), Error>;
    /// Completes the outboxes of the records written since the last call (see
    /// [`Trigger::Outbox`]); answers how many records it read.
    async fn complete_outboxes(&self) -> Result<usize, Error> {
        Ok(0)
    }
}

/// How the driver paces itself.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Rest after a round that found nothing to do (or failed).
    pub idle: Duration,
    /// Rest after a status poll that found nothing due.
    pub poll_idle: Duration,
    /// How long a received message stays hidden while it is handled (the function's timeout).
    pub submissions_visibility: time::Duration,
    pub webhooks_visibility: time::Duration,
    pub files_visibility: time::Duration,
    /// Webhook sends side by side, as concurrent invocations of the function run in the cloud.
    /// Locally more batches than the sender has places for
    /// ([`ops_infra::webhook_sender::MAX_OPEN_POSTS`]): while one reads or records its batch,
    /// or waits for its slowest receiver, the others' posts take its places.
    pub webhook_senders: usize,
    /// Submission rounds side by side, as concurrent invocations of the submit function run in
    /// the cloud (up to its `RailSubmitConcurrency`): a batch of large operations' making
    /// tasks holds one of them, not the queue.
    pub submission_consumers: usize,
    /// Webhook messages one send round takes (each round keeps at most ten posts open): a
    /// larger batch shares its receive, its attempts' sync and its deletion among more sends.
    pub webhook_batch: usize,
    /// How long the desk's consumer gathers events after a round that found some, as an event
    /// source mapping's batching window does: the board and work items are derived views, and
    /// a round's events commit together, so a busy stream costs the writer a transaction a
    /// window rather than one an event.
    pub desk_window: Duration,
}

impl Pace {
    /// SQLite answers an empty read in microseconds.
    pub const EMBEDDED: Pace = Pace {
        idle: Duration::from_millis(100),
        poll_idle: Duration::from_millis(100),
        submissions_visibility: time::Duration::seconds(30),
        webhooks_visibility: time::Duration::seconds(120),
        files_visibility: time::Duration::seconds(120),
        webhook_senders: 8,
        // SQLite makes a large operation's share of transactions in milliseconds.
        submission_consumers: 1,
        webhook_batch: 50,
        desk_window: Duration::from_millis(20),
    };
    /// Every empty round is a few requests to the endpoint; one poll query per shard a second
    /// is plenty (the cloud's schedule is a minute).
    pub const AWS: Pace = Pace {
        idle: Duration::from_millis(200),
        poll_idle: Duration::from_secs(1),
        submissions_visibility: time::Duration::seconds(30),
        webhooks_visibility: time::Duration::seconds(30),
        files_visibility: time::Duration::seconds(120),
        webhook_senders: 1,
        submission_consumers: 4,
        // SQS hands out ten at most.
        webhook_batch: QUEUE_BATCH,
        // Every round is requests to the emulator: gathering saves none of them.
        desk_window: Duration::ZERO,
    };
}

/// Runs the triggers over a change stream and queues.
#[derive(Clone)]
pub struct Driver {
    service: Arc<Service>,
    stream: Arc<dyn ChangeStream>,
    queue: Arc<dyn QueueConsumer>,
    pace: Pace,
}

const QUEUE_BATCH: usize = 10;

impl Driver {
    pub fn new(
        service: Arc<Service>,
        stream: Arc<dyn ChangeStream>,
        queue: Arc<dyn QueueConsumer>,
        pace: Pace,
    ) -> Driver {
        Driver {
            service,
            stream,
            queue,
            pace,
        }
    }

    /// The same driver, hiding received messages for `visibility` (zero: redelivered at once).
    pub fn with_visibility(mut self, visibility: time::Duration) -> Driver {
        self.pace.submissions_visibility = visibility;
        self.pace.webhooks_visibility = visibility;
        self.pace.files_visibility = visibility;
        self
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// One round of one trigger; returns how many items it handled.
    pub async fn round(&self, trigger: Trigger) -> Result<usize, Error> {
        match trigger {
            Trigger::Stream(consumer) => self.stream_round(consumer).await,
            Trigger::Queue(queue) => self.queue_round(queue).await,
            Trigger::StatusPoll => Ok(self.service.poll_rails().await? + self.service.expire_approvals().await?),
            Trigger::ScheduleTimer => Ok(self.service.fire_due_schedules().await?),
            Trigger::DeadLetters => self.dead_letter_round().await,
            Trigger::Outbox => self.stream.complete_outboxes().await,
            Trigger::SecretSweep => Ok(self.service.sweep_signing_secrets().await?),
        }
    }

    /// One round of every trigger of the pipeline (the sweep of signing secrets aside);
    /// returns how many items they handled.
    pub async fn tick(&self) -> Result<usize, Error> {
        let mut handled = 0;
        for trigger in Trigger::ALL.into_iter().filter(|t| *t != Trigger::SecretSweep) {
            handled += self.round(trigger).await?;
        }
        Ok(handled)
    }

    /// Hands each shard's batch to the consumer; the checkpoint stops before the first failed
    /// event (as Lambda does with `ReportBatchItemFailures`), so it and what follows come again.
    async fn stream_round(&self, consumer: StreamConsumer) -> Result<usize, Error> {
        let mut handled = 0;
        for batch in self.stream.read(consumer).await? {
            // Moved apart, not cloned: an event carries its whole document.
            let (positions, events): (Vec<String>, Vec<Event>) = batch.events.into_iter().unzip();
            let outcome = consumer.consume(&self.service, &events).await;
            let checkpoint = match outcome.failed.first() {
                Some(failed) => positions
                    .iter()
                    .zip(&events)
                    .take_while(|(_, e)| &e.id != failed)
                    .last()
                    .map(|(position, _)| position),
                None => Some(&batch.last),
            };
            if let Some(position) = checkpoint {
                self.stream.advance(consumer, &batch.shard, position).await?;
            }
            // A batch of records none of which is an event (a busy table writes many) still
            // moved the checkpoint: count it, so a drain reads on instead of stopping there.
            let skipped_only = events.is_empty() && checkpoint.is_some();
            handled += events.len() - outcome.failed.len().min(events.len()) + usize::from(skipped_only);
        }
        Ok(handled)
    }

    /// Receives a batch, hands it to the consumer and deletes what was handled; failed
    /// messages reappear after their visibility timeout.
    async fn queue_round(&self, queue: QueueName) -> Result<usize, Error> {
        let visibility = match queue {
            QueueName::Submissions => self.pace.submissions_visibility,
            QueueName::Webhooks => self.pace.webhooks_visibility,
            QueueName::Files => self.pace.files_visibility,
        };
        let batch = match queue {
            QueueName::Webhooks => self.pace.webhook_batch,
            QueueName::Submissions | QueueName::Files => QUEUE_BATCH,
        };
        let messages = self.queue.receive(queue, batch, visibility).await?;
        if messages.is_empty() {
            return Ok(0);
        }
        let outcome = consume_queue(&self.service, queue, &messages).await;
        let handled: Vec<&str> = messages
            .iter()
            .filter(|m| !outcome.failed.contains(&m.id))
            .map(|m| m.id.as_str())
            .collect();
        self.queue.ack_all(queue, &handled).await?;
        Ok(messages.len())
    }

    /// Receives what reached each dead-letter queue, records it as work items and deletes it.
    async fn dead_letter_round(&self) -> Result<usize, Error> {
        let mut handled = 0;
        for queue in QueueName::ALL {
            let messages = self
                .queue
                .receive_dead_letters(queue, QUEUE_BATCH, self.pace.submissions_visibility)
                .await?;
            let outcome = self.service.handle_dead_letters(&messages).await;
            for message in messages.iter().filter(|m| !outcome.failed.contains(&m.id)) {
                self.queue.ack_dead_letter(queue, &message.id).await?;
                handled += 1;
            }
        }
        Ok(handled)
    }

    /// Runs each trigger in a loop of its own until dropped, as each is a function of its own
    /// in the cloud: a webhook receiver that hangs holds up webhook sends, never submissions,
    /// status polls or the other customers' payouts.
    pub async fn run(self) {
        let mut loops = JoinSet::new();
        for trigger in Trigger::ALL {
            let (idle, copies) = match trigger {
                Trigger::StatusPoll | Trigger::ScheduleTimer | Trigger::DeadLetters => (self.pace.poll_idle, 1),
                Trigger::SecretSweep => (SECRET_SWEEP_EVERY, 1),
                Trigger::Queue(QueueName::Webhooks) => (self.pace.idle, self.pace.webhook_senders.max(1)),
                Trigger::Queue(QueueName::Submissions) => (self.pace.idle, self.pace.submission_consumers.max(1)),
                _ => (self.pace.idle, 1),
            };
            let window = match trigger {
                Trigger::Stream(StreamConsumer::Desk) => self.pace.desk_window,
                _ => Duration::ZERO,
            };
            for _ in 0..copies {
                let driver = self.clone();
                loops.spawn(async move {
                    loop {
                        match driver.round(trigger).await {
                            Ok(0) => tokio::time::sleep(idle).await,
                            Ok(_) if !window.is_zero() => tokio::time::sleep(window).await,
                            Ok(_) => {}
                            Err(error) => {
                                tracing::error!(trigger = trigger.as_str(), %error, "trigger round failed");
                                tokio::time::sleep(idle).await;
                            }
                        }
                    }
                });
            }
        }
        while loops.join_next().await.is_some() {}
    }
}
