//! The queue port on SQS. Lambda event source mappings receive and delete in the cloud;
//! [`SqsQueue::receive`] and [`SqsQueue::ack`] let local mode pump the same queues itself.

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use aws_sdk_sqs::Client;
use ops_domain::pipeline::MAX_QUEUE_DELAY;
use ops_domain::ports::{Queue, QueueMessage, QueueName, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq)]
pub struct QueueUrls {
    pub submissions: String,
    pub webhooks: String,
}

pub struct SqsQueue {
    client: Client,
    urls: QueueUrls,
    /// Receipt handles of received messages, by message id, until they are acknowledged.
    receipts: Mutex<HashMap<String, String>>,
    /// Requests sent, for the benchmark.
    requests: AtomicU64,
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

impl SqsQueue {
    pub fn new(client: Client, urls: QueueUrls) -> SqsQueue {
        SqsQueue {
            client,
            urls,
            receipts: Mutex::default(),
            requests: AtomicU64::new(0),
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The queue's URL for a request about to be sent (and counted).
    fn request_to(&self, queue: QueueName) -> &str {
        self.requests.fetch_add(1, Ordering::Relaxed);
        match queue {
            QueueName::Submissions => &self.urls.submissions,
            QueueName::Webhooks => &self.urls.webhooks,
        }
    }

    pub async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: time::Duration,
    ) -> Result<Vec<QueueMessage>, StoreError> {
        let received = self
            .client
            .receive_message()
            .queue_url(self.request_to(queue))
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .visibility_timeout(visibility.whole_seconds() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        let mut receipts = self.receipts.lock().unwrap_or_else(|e| e.into_inner());
        Ok(received
            .messages()
            .iter()
            .filter_map(|m| {
                let id = m.message_id()?.to_owned();
                receipts.insert(id.clone(), m.receipt_handle()?.to_owned());
                let receive_count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                Some(QueueMessage {
                    id,
                    body: m.body()?.to_owned(),
                    receive_count,
                })
            })
            .collect())
    }

    pub async fn ack(&self, queue: QueueName, message_id: &str) -> Result<(), StoreError> {
        let receipt = self
            .receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(message_id);
        let Some(receipt) = receipt else { return Ok(()) };
        self.client
            .delete_message()
            .queue_url(self.request_to(queue))
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(())
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, queue: QueueName, body: String, delay: time::Duration) -> Result<(), StoreError> {
        let seconds = delay.clamp(time::Duration::ZERO, MAX_QUEUE_DELAY).whole_seconds() as i32;
        self.client
            .send_message()
            .queue_url(self.request_to(queue))
            .message_body(body)
            .delay_seconds(seconds)
            .send()
            .await
            .map_err(|e| unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(())
    }
}
