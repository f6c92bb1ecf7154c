//! Stream batches that failed for good, replayed once their cause is fixed. After a batch's
//! retries run out (`template.yaml`: ten, halving the batch), Lambda puts a note of it on the
//! stream failures queue (which function failed, the shard and the first and last sequence
//! numbers: not the records) and `StreamFailuresAlarm` fires. The records stay in the stream
//! for 24 hours. `stream-replay`, invoked by hand, reads each note's records back and hands
//! them to the consumer that failed them, through the handler its function runs; the
//! consumers are idempotent, so the records of the batch they had already taken change
//! nothing twice. A note whose records are all handled is deleted; any other stays, with why.

use crate::deployment::{system_clock, Settings};
use crate::driver::{Error, StreamConsumer, Trigger};
use crate::streams::{carries_outbox, is_new_event, stream_payload};
use crate::triggers;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use ops_domain::service::Service;
use ops_infra::aws::{DynamoStore, SdkConfig};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::sync::Arc;

/// The environment variable naming the stream failures queue (set on `stream-replay` only).
pub const FAILURES_QUEUE_URL: &str = "STREAM_FAILURES_QUEUE_URL";

/// How long a note read by a replay is hidden (a function's longest run), so that it reads each
/// note once.
const NOTE_HIDDEN_SECONDS: i32 = 900;

/// Lambda's note of a stream batch its on-failure destination received.
#[derive(Deserialize)]
struct FailureNote {
    #[serde(rename = "requestContext")]
    request: NoteRequest,
    #[serde(rename = "DDBStreamBatchInfo")]
    batch: BatchInfo,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NoteRequest {
    function_arn: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BatchInfo {
    shard_id: String,
    start_sequence_number: String,
    end_sequence_number: String,
    stream_arn: String,
}

/// What a replay did: the function's answer.
#[derive(Debug, Default, Serialize)]
pub struct Replay {
    pub replayed: Vec<Replayed>,
    pub left: Vec<Left>,
}

/// A note whose records were handled, and deleted.
#[derive(Debug, Serialize)]
pub struct Replayed {
    /// The stream function that had failed them (`stream-transition` …).
    pub function: &'static str,
    pub shard: String,
    /// The records of the batch its consumer takes (its event source mapping's filter).
    pub records: usize,
}

/// A note left on the queue, and why.
#[derive(Debug, Serialize)]
pub struct Left {
    pub message_id: String,
    pub reason: String,
}

/// The stream functions whose batches can fail for good: each stream consumer, and the outbox.
const STREAM_FUNCTIONS: [Trigger; 4] = [
    Trigger::Stream(StreamConsumer::Transition),
    Trigger::Stream(StreamConsumer::WebhookDispatch),
    Trigger::Stream(StreamConsumer::Desk),
    Trigger::Outbox,
];

/// The replay: the failures queue it reads, the stream it reads back, and the consumers it
/// hands records to.
pub struct StreamReplay {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    streams: aws_sdk_dynamodbstreams::Client,
    service: Arc<Service>,
    store: DynamoStore,
}

impl StreamReplay {
    pub fn new(config: &SdkConfig, queue_url: String, service: Arc<Service>, store: DynamoStore) -> StreamReplay {
        StreamReplay {
            sqs: aws_sdk_sqs::Client::new(config),
            queue_url,
            streams: aws_sdk_dynamodbstreams::Client::new(config),
            service,
            store,
        }
    }

    /// As the `stream-replay` function runs it: over the stack its environment names.
    pub async fn from_env() -> Result<StreamReplay, Error> {
        let queue_url = std::env::var(FAILURES_QUEUE_URL).map_err(|_| format!("{FAILURES_QUEUE_URL} is not set"))?;
        let config = ops_infra::aws::lambda_config()?;
        let (service, parts) = Settings::from_env()?.service_with(&config, system_clock()).await?;
        Ok(StreamReplay::new(&config, queue_url, Arc::new(service), parts.store))
    }

    /// Replays every note on the queue, once each. The notes left are visible again at its
    /// end, for the next run once their cause is fixed.
    pub async fn run(&self) -> Result<Replay, Error> {
        let mut replay = Replay::default();
        let mut left_receipts = vec![];
        loop {
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .visibility_timeout(NOTE_HIDDEN_SECONDS)
                .send()
                .await?;
            if received.messages().is_empty() {
                for receipt in left_receipts {
                    self.sqs
                        .change_message_visibility()
                        .queue_url(&self.queue_url)
                        .receipt_handle(receipt)
                        .visibility_timeout(0)
                        .send()
                        .await?;
                }
                return Ok(replay);
            }
            for message in received.messages() {
                match self.replay_note(message.body().unwrap_or_default()).await {
                    Ok(replayed) => {
                        self.sqs
                            .delete_message()
                            .queue_url(&self.queue_url)
                            .receipt_handle(message.receipt_handle().unwrap_or_default())
                            .send()
                            .await?;
                        tracing::info!(
                            function = replayed.function,
                            records = replayed.records,
                            "replayed a failed stream batch"
                        );
                        replay.replayed.push(replayed);
                    }
                    Err(reason) => {
                        let message_id = message.message_id().unwrap_or_default().to_owned();
                        tracing::warn!(%message_id, %reason, "a failed stream batch was not replayed");
                        replay.left.push(Left { message_id, reason });
                        left_receipts.extend(message.receipt_handle().map(str::to_owned));
                    }
                }
            }
        }
    }

    async fn replay_note(&self, body: &str) -> Result<Replayed, String> {
        let note: FailureNote =
            serde_json::from_str(body).map_err(|e| format!("not a note of a failed stream batch: {e}"))?;
        let function_name = note.request.function_arn.rsplit(':').next().unwrap_or_default();
        let function = STREAM_FUNCTIONS
            .into_iter()
            .find(|f| function_name.ends_with(&format!("-{}", f.as_str())))
            .ok_or_else(|| format!("{function_name} is no stream function of this stack"))?;
        let records = self
            .records(&note.batch)
            .await
            .map_err(|e| format!("its records could not be read back from the stream (kept 24 hours): {e}"))?;
        let taken: Vec<Record> = match function {
            Trigger::Outbox => records.into_iter().filter(carries_outbox).collect(),
            _ => records.into_iter().filter(is_new_event).collect(),
        };
        let payload = stream_payload(&taken, &note.batch.stream_arn).map_err(|e| e.to_string())?;
        let response = match function {
            Trigger::Stream(consumer) => triggers::stream(&self.service, consumer, payload).await,
            _ => triggers::outbox(&self.store, &payload).await,
        };
        if let Some(failed) = response.batch_item_failures.first() {
            let at = failed.item_identifier.as_deref().unwrap_or_default();
            return Err(format!("{} failed again, at record {at}", function.as_str()));
        }
        Ok(Replayed {
            function: function.as_str(),
            shard: note.batch.shard_id,
            records: taken.len(),
        })
    }

    /// The records of the shard from the batch's first sequence number to its last.
    async fn records(&self, batch: &BatchInfo) -> Result<Vec<Record>, Error> {
        let mut iterator = self
            .streams
            .get_shard_iterator()
            .stream_arn(&batch.stream_arn)
            .shard_id(&batch.shard_id)
            .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
            .sequence_number(&batch.start_sequence_number)
            .send()
            .await?
            .shard_iterator
            .ok_or("the shard is closed and read to its end")?;
        let mut records = vec![];
        loop {
            let read = self.streams.get_records().shard_iterator(&iterator).send().await?;
            for record in read.records() {
                let sequence = record.dynamodb().and_then(|d| d.sequence_number()).unwrap_or_default();
                if sequence_order(sequence, &batch.end_sequence_number) == Ordering::Greater {
                    return Ok(records);
                }
                records.push(record.clone());
            }
            // An open shard answers no records once it is read to its newest; a closed one, no
            // next iterator once it is read to its end.
            match read.next_shard_iterator {
                Some(next) if !read.records().is_empty() => iterator = next,
                _ => return Ok(records),
            }
        }
    }
}

/// Sequence numbers are decimal numbers too long for an integer: the longer is the later.
fn sequence_order(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_order_as_numbers() {
        assert_eq!(sequence_order("99", "100"), Ordering::Less);
        assert_eq!(
            sequence_order("1100000000017454423010", "1100000000017454423009"),
            Ordering::Greater
        );
        assert_eq!(sequence_order("42", "42"), Ordering::Equal);
    }

    #[test]
    fn lambdas_note_of_a_failed_batch_is_read() {
        // As Lambda's on-failure destination writes it for a DynamoDB stream.
        let note: FailureNote = serde_json::from_str(
            r#"{"requestContext": {"requestId": "316aa6d0", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:ops-test-stream-desk", "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 11},
                "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
                "version": "1.0", "timestamp": "2026-11-30T00:13:49.717Z",
                "DDBStreamBatchInfo": {"shardId": "shardId-00000001573689847184-864758bb", "startSequenceNumber": "800000000003126276362", "endSequenceNumber": "800000000003126276370", "approximateArrivalOfFirstRecord": "2026-11-30T00:13:19Z", "approximateArrivalOfLastRecord": "2026-11-30T00:13:19Z", "batchSize": 9, "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/ops-test-table/stream/2026-11-30T00:00:00.000"}}"#,
        )
        .unwrap();
        assert!(note.request.function_arn.ends_with("-stream-desk"));
        assert_eq!(note.batch.end_sequence_number, "800000000003126276370");
    }
}
