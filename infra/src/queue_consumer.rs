//! The receiving side of the queues. In the cloud, Lambda's event source mappings receive and
//! delete; local mode and the tests do it themselves, on either implementation, through this
//! trait.

use async_trait::async_trait;
use ops_domain::ports::{Queue, QueueError, QueueMessage, QueueName};
use time::Duration;

#[async_trait]
pub trait QueueConsumer: Queue {
    /// Up to `max` (at most ten on SQS) visible messages, each hidden for `visibility` while it
    /// is handled. A message already received [`MAX_RECEIVES`](ops_domain::ports::MAX_RECEIVES)
    /// times goes to the dead-letter queue instead.
    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError>;

    /// Deletes a handled message; acknowledging it again does nothing.
    async fn ack(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError>;

    /// Deletes a batch's handled messages (the embedded queue in one store transaction).
    async fn ack_all(&self, queue: QueueName, message_ids: &[&str]) -> Result<(), QueueError> {
        for id in message_ids {
            self.ack(queue, id).await?;
        }
        Ok(())
    }

    /// Bodies of messages in `queue`'s dead-letter queue (up to ten on SQS), left in it.
    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<String>, QueueError>;

    /// Up to `max` visible messages of `queue`'s dead-letter queue, each hidden for
    /// `visibility` while it is handled (the dead-letter function's event source in the cloud).
    async fn receive_dead_letters(
        &self,
        queue: QueueName,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError>;

    /// Deletes a handled dead letter; acknowledging it again does nothing.
    async fn ack_dead_letter(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError>;
}
