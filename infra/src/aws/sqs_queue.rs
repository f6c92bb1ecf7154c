//! The queue port on SQS. Lambda event source mappings receive and delete in the cloud; its
//! [`QueueConsumer`] side lets local mode pump the same queues itself.

use crate::QueueConsumer;
use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry};
use aws_sdk_sqs::Client;

use ops_domain::ports::{Queue, QueueError, QueueMessage, QueueName, MAX_RECEIVES};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq)]
pub struct QueueUrls {
    pub submissions: String,
    pub webhooks: String,
    pub files: String,
}

pub struct SqsQueue {
    client: Client,
    urls: QueueUrls,
    /// Receipt handles of received messages, by message id, until they are acknowledged.
    receipts: Mutex<HashMap<String, String>>,
    /// Each queue's dead-letter queue, looked up once.
    dead_letter_urls: Mutex<HashMap<QueueName, String>>,
    /// Requests sent, for the benchmark.
    requests: AtomicU64,
}

fn unavailable(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> QueueError {
    QueueError::new(e)
}

/// An SQS call that failed, with the whole chain of causes in its message.
fn failed(e: impl std::error::Error + Send + Sync + 'static) -> QueueError {
    unavailable(e)
}

impl SqsQueue {
    pub fn new(client: Client, urls: QueueUrls) -> SqsQueue {
        SqsQueue {
            client,
            urls,
            receipts: Mutex::default(),
            dead_letter_urls: Mutex::default(),
            requests: AtomicU64::new(0),
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Creates the stack's queues, `<name>-submissions`, `<name>-webhooks` and `<name>-files`, each with a
    /// dead-letter queue, the way `template.yaml` declares them (for emulators and tests).
    pub async fn create_queues(client: &Client, name: &str) -> Result<QueueUrls, QueueError> {
        Ok(QueueUrls {
            submissions: queue_with_dead_letters(client, &format!("{name}-submissions")).await?,
            webhooks: queue_with_dead_letters(client, &format!("{name}-webhooks")).await?,
            files: queue_with_dead_letters(client, &format!("{name}-files")).await?,
        })
    }

    /// The dead-letter queue named in `queue`'s redrive policy.
    async fn dead_letter_url(&self, queue: QueueName) -> Result<String, QueueError> {
        if let Some(url) = self
            .dead_letter_urls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&queue)
        {
            return Ok(url.clone());
        }
        let attributes = self
            .client
            .get_queue_attributes()
            .queue_url(self.request_to(queue))
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .send()
            .await
            .map_err(failed)?;
        let policy: serde_json::Value = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
            .and_then(|p| serde_json::from_str(p).ok())
            .ok_or_else(|| unavailable("the queue has no redrive policy"))?;
        // arn:aws:sqs:<region>:<account>:<name>
        let arn: Vec<&str> = policy["deadLetterTargetArn"]
            .as_str()
            .unwrap_or_default()
            .split(':')
            .collect();
        let [.., account, name] = arn[..] else {
            return Err(unavailable("the redrive policy names no queue"));
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let found = self
            .client
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(failed)?;
        let url = found
            .queue_url()
            .map(str::to_owned)
            .ok_or_else(|| unavailable("no dead-letter queue url"))?;
        self.dead_letter_urls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(queue, url.clone());
        Ok(url)
    }

    async fn receive_at(
        &self,
        url: &str,
        max: usize,
        visibility: time::Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let received = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .visibility_timeout(visibility.whole_seconds() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(failed)?;
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

    async fn delete_at(&self, url: &str, message_id: &str) -> Result<(), QueueError> {
        let receipt = self
            .receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(message_id);
        let Some(receipt) = receipt else { return Ok(()) };
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// The queue's URL for a request about to be sent (and counted).
    fn request_to(&self, queue: QueueName) -> &str {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.url_of(queue)
    }

    fn url_of(&self, queue: QueueName) -> &str {
        match queue {
            QueueName::Submissions => &self.urls.submissions,
            QueueName::Webhooks => &self.urls.webhooks,
            QueueName::Files => &self.urls.files,
        }
    }
}

async fn queue_with_dead_letters(client: &Client, name: &str) -> Result<String, QueueError> {
    let dead_letters = client
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .send()
        .await
        .map_err(failed)?;
    let dead_letters_url = dead_letters
        .queue_url()
        .ok_or_else(|| unavailable("no dead-letter queue url"))?;
    let attributes = client
        .get_queue_attributes()
        .queue_url(dead_letters_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(failed)?;
    let dead_letters_arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .ok_or_else(|| unavailable("no dead-letter queue arn"))?;
    let redrive =
        serde_json::json!({"deadLetterTargetArn": dead_letters_arn, "maxReceiveCount": MAX_RECEIVES.to_string()});
    let queue = client
        .create_queue()
        .queue_name(name)
        .set_attributes(Some(HashMap::from([
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
            (QueueAttributeName::VisibilityTimeout, "30".into()),
        ])))
        .send()
        .await
        .map_err(failed)?;
    Ok(queue.queue_url().ok_or_else(|| unavailable("no queue url"))?.to_owned())
}

#[async_trait]
impl Queue for SqsQueue {
    /// The lane is the message's group: on a standard queue, SQS's fair queues deliver the
    /// messages of a group with a backlog after those of the other groups, so one customer's
    /// backlog does not hold back another's next message.
    async fn send(&self, queue: QueueName, lane: &str, body: String, delay: time::Duration) -> Result<(), QueueError> {
        let seconds = delay
            .clamp(time::Duration::ZERO, ops_domain::ports::MAX_QUEUE_DELAY)
            .whole_seconds() as i32;
        self.client
            .send_message()
            .queue_url(self.request_to(queue))
            .message_body(body)
            .delay_seconds(seconds)
            .set_message_group_id((!lane.is_empty()).then(|| lane.to_owned()))
            .send()
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// In SQS's batches of ten; an entry the batch refused fails the send (the caller sends
    /// again, and a message sent twice is taken as any redelivery).
    async fn send_all(&self, queue: QueueName, messages: Vec<(String, String)>) -> Result<(), QueueError> {
        for batch in messages.chunks(10) {
            let entries = batch
                .iter()
                .enumerate()
                .map(|(n, (lane, body))| {
                    SendMessageBatchRequestEntry::builder()
                        .id(n.to_string())
                        .message_body(body)
                        .set_message_group_id((!lane.is_empty()).then(|| lane.clone()))
                        .build()
                        .map_err(failed)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let sent = self
                .client
                .send_message_batch()
                .queue_url(self.request_to(queue))
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(failed)?;
            if let Some(refused) = sent.failed().first() {
                return Err(unavailable(format!(
                    "SQS refused a batched message: {} {}",
                    refused.code(),
                    refused.message().unwrap_or_default()
                )));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl QueueConsumer for SqsQueue {
    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: time::Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        let url = self.url_of(queue).to_owned();
        self.receive_at(&url, max, visibility).await
    }

    async fn ack(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError> {
        let url = self.url_of(queue).to_owned();
        self.delete_at(&url, message_id).await
    }

    async fn receive_dead_letters(
        &self,
        queue: QueueName,
        max: usize,
        visibility: time::Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        let url = self.dead_letter_url(queue).await?;
        self.receive_at(&url, max, visibility).await
    }

    async fn ack_dead_letter(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError> {
        let url = self.dead_letter_url(queue).await?;
        self.delete_at(&url, message_id).await
    }

    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<String>, QueueError> {
        let url = self.dead_letter_url(queue).await?;
        let received = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .map_err(failed)?;
        Ok(received
            .messages()
            .iter()
            .filter_map(|m| m.body().map(str::to_owned))
            .collect())
    }
}
