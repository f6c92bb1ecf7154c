//! Runs the trigger functions without Lambda: reads the table's DynamoDB stream and the SQS
//! queues the way event source mappings do (the stream filtered to new events, batches, partial
//! failures retried) and hands the very same Lambda event payloads to [`crate::triggers`]. Local
//! mode against AWS endpoints and the emulator tests use it.

use crate::triggers;
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use ops_domain::ports::{QueueMessage, QueueName};
use ops_domain::service::Service;
use ops_infra::aws::SqsQueue;
use ops_infra::QueueConsumer;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamConsumer {
    Transition,
    WebhookDispatch,
}

impl StreamConsumer {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamConsumer::Transition => "stream-transition",
            StreamConsumer::WebhookDispatch => "stream-webhook-dispatch",
        }
    }
}

pub struct Pump {
    service: Arc<Service>,
    queue: Arc<SqsQueue>,
    streams: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    /// Last handled sequence number per consumer and shard.
    checkpoints: Mutex<HashMap<(StreamConsumer, String), String>>,
    /// How long a received message stays hidden (the function's timeout in the cloud).
    visibility: time::Duration,
}

/// A stream attribute as Lambda's JSON shows it (`{"S": …}`); only the kinds this table
/// writes on event items.
fn attribute_json(value: &AttributeValue) -> Option<Value> {
    match value {
        AttributeValue::S(s) => Some(json!({ "S": s })),
        AttributeValue::N(n) => Some(json!({ "N": n })),
        AttributeValue::Bool(b) => Some(json!({ "BOOL": b })),
        _ => None,
    }
}

fn image_json(image: Option<&HashMap<String, AttributeValue>>) -> Value {
    let map: Map<String, Value> = image
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), attribute_json(v)?)))
        .collect();
    Value::Object(map)
}

/// Whether the record passes the event source mapping's filter: inserts of event items.
fn is_new_event(record: &Record) -> bool {
    let entity = record
        .dynamodb()
        .and_then(|d| d.new_image())
        .and_then(|i| i.get("entity"))
        .and_then(|v| v.as_s().ok());
    record.event_name().map(|n| n.as_str()) == Some("INSERT") && entity.map(String::as_str) == Some("event")
}

/// The Lambda payload for stream records.
pub fn stream_payload(records: &[Record], stream_arn: &str) -> Result<StreamEvent, serde_json::Error> {
    let records: Vec<Value> = records
        .iter()
        .map(|r| {
            let change = r.dynamodb();
            json!({
                "eventID": r.event_id(),
                "eventName": r.event_name().map(|n| n.as_str()),
                "eventSource": "aws:dynamodb",
                "eventVersion": "1.1",
                "awsRegion": r.aws_region().unwrap_or("us-east-1"),
                "eventSourceARN": stream_arn,
                "dynamodb": {
                    "ApproximateCreationDateTime": 0,
                    "Keys": image_json(change.and_then(|c| c.keys())),
                    "NewImage": image_json(change.and_then(|c| c.new_image())),
                    "SequenceNumber": change.and_then(|c| c.sequence_number()),
                    "SizeBytes": change.and_then(|c| c.size_bytes()).unwrap_or(0),
                    "StreamViewType": "NEW_IMAGE",
                },
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records }))
}

/// The Lambda payload for queue messages.
pub fn queue_payload(messages: &[QueueMessage]) -> Result<SqsEvent, serde_json::Error> {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "messageId": m.id,
                "body": m.body,
                "attributes": {"ApproximateReceiveCount": m.receive_count.to_string()},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records }))
}

impl Pump {
    pub fn new(
        service: Arc<Service>,
        queue: Arc<SqsQueue>,
        streams: aws_sdk_dynamodbstreams::Client,
        stream_arn: String,
    ) -> Pump {
        Pump {
            service,
            queue,
            streams,
            stream_arn,
            checkpoints: Mutex::default(),
            visibility: time::Duration::seconds(30),
        }
    }

    pub fn with_visibility(mut self, visibility: time::Duration) -> Pump {
        self.visibility = visibility;
        self
    }

    /// One round over every trigger; returns how many items were handed to handlers.
    pub async fn tick(&self) -> Result<usize, Error> {
        let mut handled = 0;
        for consumer in [StreamConsumer::Transition, StreamConsumer::WebhookDispatch] {
            handled += self.pump_stream(consumer).await?;
        }
        for queue in [QueueName::Submissions, QueueName::Webhooks] {
            handled += self.pump_queue(queue).await?;
        }
        handled += self.poll_rails().await?;
        Ok(handled)
    }

    /// What the status-poll schedule does: asks the rails about the transactions due.
    pub async fn poll_rails(&self) -> Result<usize, Error> {
        let answer = triggers::status_poll(&self.service).await?;
        Ok(answer["polled"].as_u64().unwrap_or(0) as usize)
    }

    pub async fn pump_stream(&self, consumer: StreamConsumer) -> Result<usize, Error> {
        let described = self
            .streams
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await?;
        let shards: Vec<String> = described
            .stream_description()
            .map(|d| {
                d.shards()
                    .iter()
                    .filter_map(|s| s.shard_id().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut handled = 0;
        for shard in shards {
            let after = self
                .checkpoints
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(consumer, shard.clone()))
                .cloned();
            let mut request = self
                .streams
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(&shard);
            request = match &after {
                Some(sequence) => request
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(sequence),
                None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let Some(iterator) = request.send().await?.shard_iterator().map(str::to_owned) else {
                continue;
            };
            let batch = self
                .streams
                .get_records()
                .shard_iterator(iterator)
                .limit(100)
                .send()
                .await?;
            let records = batch.records();
            let Some(last) = records
                .last()
                .and_then(|r| r.dynamodb())
                .and_then(|d| d.sequence_number())
            else {
                continue;
            };
            let events: Vec<Record> = records.iter().filter(|r| is_new_event(r)).cloned().collect();
            let payload = stream_payload(&events, &self.stream_arn)?;
            let response = match consumer {
                StreamConsumer::Transition => triggers::transition(&self.service, payload).await,
                StreamConsumer::WebhookDispatch => triggers::webhook_dispatch(&self.service, payload).await,
            };
            // Like Lambda with ReportBatchItemFailures: resume at the first failed record.
            let checkpoint = match response
                .batch_item_failures
                .first()
                .and_then(|f| f.item_identifier.clone())
            {
                Some(failed) => records
                    .iter()
                    .filter_map(|r| r.dynamodb().and_then(|d| d.sequence_number()))
                    .take_while(|s| *s != failed)
                    .last()
                    .map(str::to_owned)
                    .or(after),
                None => Some(last.to_owned()),
            };
            if let Some(sequence) = checkpoint {
                self.checkpoints
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((consumer, shard), sequence);
            }
            handled += events.len() - response.batch_item_failures.len().min(events.len());
        }
        Ok(handled)
    }

    pub async fn pump_queue(&self, queue: QueueName) -> Result<usize, Error> {
        let messages = self.queue.receive(queue, 10, self.visibility).await?;
        if messages.is_empty() {
            return Ok(0);
        }
        let payload = queue_payload(&messages)?;
        let response = match queue {
            QueueName::Submissions => triggers::rail_submit(&self.service, payload).await,
            QueueName::Webhooks => triggers::webhook_send(&self.service, payload).await,
        };
        for message in &messages {
            if !response
                .batch_item_failures
                .iter()
                .any(|f| f.item_identifier == message.id)
            {
                self.queue.ack(queue, &message.id).await?;
            }
        }
        Ok(messages.len())
    }
}
