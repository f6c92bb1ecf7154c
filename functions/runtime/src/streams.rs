//! The change streams the [`Driver`](crate::driver::Driver) reads: the embedded event log
//! (local mode) and the table's DynamoDB stream (local mode against AWS or the emulator). The
//! DynamoDB records go through the very payload Lambda would hand the function, and are read
//! back by the same code the function runs ([`crate::triggers::stream_events`]).

use crate::driver::{ChangeStream, Error, StreamBatch, StreamConsumer};
use crate::triggers;
use async_trait::async_trait;
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use ops_domain::event::Event;
use ops_infra::aws::{stream_images, DynamoStore};
use ops_infra::embedded::SqliteStore;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// Events (or outboxes) handed to a consumer at once: the event source mappings' batch size.
const BATCH: usize = 100;
/// Records one read of a shard takes (GetRecords' most). A busy table writes many records
/// that are no event (items, audit entries, index rows), which a mapping's filter drops
/// before it batches: reading a hundred at a time made each consumer's round cost three
/// requests for a score of events, and the stream's readers fell behind a busy customer's file.
const READ: usize = 1000;

/// Of the records one read took, those a mapping's filter lets through, at most a batch of
/// them, and the position up to which the read is handled once they are.
fn filtered_batch(records: Vec<Record>, last: String, passes: fn(&Record) -> bool) -> (Vec<Record>, String) {
    let mut passed: Vec<Record> = records.into_iter().filter(passes).collect();
    if passed.len() <= BATCH {
        return (passed, last);
    }
    passed.truncate(BATCH);
    let at = passed
        .last()
        .and_then(|r| r.dynamodb())
        .and_then(|d| d.sequence_number())
        .map(str::to_owned);
    (passed, at.unwrap_or(last))
}

/// The embedded event log: one shard, positions are its sequence numbers.
pub struct EmbeddedStream {
    store: SqliteStore,
    /// Each consumer's checkpoint, read from the database at its first read, then kept here as
    /// it moves.
    checkpoints: Mutex<HashMap<StreamConsumer, i64>>,
    /// The last batch read from the log, and the checkpoint it was read after. Every event
    /// between the two is in it, so a consumer whose checkpoint lies in that span takes the
    /// rest of the batch from here: the three consumers read the same log, and an event is
    /// read and parsed once rather than once per consumer.
    recent: Mutex<(i64, Vec<(i64, Event)>)>,
}

impl EmbeddedStream {
    pub fn new(store: SqliteStore) -> EmbeddedStream {
        EmbeddedStream {
            store,
            checkpoints: Mutex::default(),
            recent: Mutex::default(),
        }
    }

    async fn checkpoint(&self, consumer: StreamConsumer) -> Result<i64, Error> {
        if let Some(seq) = self
            .checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&consumer)
        {
            return Ok(*seq);
        }
        let seq = self.store.stream_checkpoint(checkpoint_name(consumer)).await?;
        let mut checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        Ok(*checkpoints.entry(consumer).or_insert(seq))
    }

    /// The events after `after` in the last batch read, if that batch covers them.
    fn recent_after(&self, after: i64) -> Option<Vec<(i64, Event)>> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let (read_after, events) = &*recent;
        let covered = *read_after <= after && events.last().is_some_and(|(last, _)| *last > after);
        covered.then(|| events.iter().filter(|(seq, _)| *seq > after).cloned().collect())
    }
}

/// The checkpoints' names in the database (kept from the first versions, so an existing data
/// directory resumes where it stopped).
fn checkpoint_name(consumer: StreamConsumer) -> &'static str {
    match consumer {
        StreamConsumer::Transition => "transitions",
        StreamConsumer::WebhookDispatch => "webhooks",
        StreamConsumer::Desk => "desk",
    }
}

#[async_trait]
impl ChangeStream for EmbeddedStream {
    async fn read(&self, consumer: StreamConsumer) -> Result<Vec<StreamBatch>, Error> {
        let after = self.checkpoint(consumer).await?;
        let batch = match self.recent_after(after) {
            Some(batch) => batch,
            None => {
                let batch = self.store.stream_after(after, BATCH).await?;
                *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = (after, batch.clone());
                batch
            }
        };
        let Some((last, _)) = batch.last() else {
            return Ok(vec![]);
        };
        Ok(vec![StreamBatch {
            shard: String::new(),
            last: last.to_string(),
            events: batch.into_iter().map(|(seq, event)| (seq.to_string(), event)).collect(),
        }])
    }

    async fn advance(&self, consumer: StreamConsumer, _shard: &str, position: &str) -> Result<(), Error> {
        let seq: i64 = position.parse()?;
        self.store.advance_checkpoint(checkpoint_name(consumer), seq).await?;
        let mut checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let kept = checkpoints.entry(consumer).or_insert(seq);
        *kept = (*kept).max(seq);
        Ok(())
    }
}

/// The table's DynamoDB stream, read shard by shard the way an event source mapping does
/// (filtered to new events), with the checkpoints in memory.
pub struct DynamoStream {
    client: aws_sdk_dynamodbstreams::Client,
    arn: String,
    /// The table's store, whose entities' outboxes `stream-outbox` completes.
    store: DynamoStore,
    /// Last handled sequence number per consumer (`None`: the outbox's) and shard.
    checkpoints: Mutex<HashMap<(Option<StreamConsumer>, String), String>>,
}

impl DynamoStream {
    pub fn new(client: aws_sdk_dynamodbstreams::Client, arn: String, store: DynamoStore) -> DynamoStream {
        DynamoStream {
            client,
            arn,
            store,
            checkpoints: Mutex::default(),
        }
    }

    fn checkpoint(&self, consumer: Option<StreamConsumer>, shard: &str) -> Option<String> {
        let checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        checkpoints.get(&(consumer, shard.to_owned())).cloned()
    }

    fn set_checkpoint(&self, consumer: Option<StreamConsumer>, shard: &str, position: &str) {
        let mut checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        checkpoints.insert((consumer, shard.to_owned()), position.to_owned());
    }

    /// The next records of `shard` after `consumer`'s checkpoint, and the last one's position.
    async fn records(
        &self,
        consumer: Option<StreamConsumer>,
        shard: &str,
    ) -> Result<(Vec<Record>, Option<String>), Error> {
        let mut request = self.client.get_shard_iterator().stream_arn(&self.arn).shard_id(shard);
        request = match self.checkpoint(consumer, shard) {
            Some(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(sequence),
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let Some(iterator) = request.send().await?.shard_iterator().map(str::to_owned) else {
            return Ok((vec![], None));
        };
        let read = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(READ as i32)
            .send()
            .await?;
        let last = read
            .records()
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|d| d.sequence_number())
            .map(str::to_owned);
        Ok((read.records().to_vec(), last))
    }

    async fn shards(&self) -> Result<Vec<String>, Error> {
        let described = self.client.describe_stream().stream_arn(&self.arn).send().await?;
        Ok(described
            .stream_description()
            .map(|d| {
                d.shards()
                    .iter()
                    .filter_map(|s| s.shard_id().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

#[async_trait]
impl ChangeStream for DynamoStream {
    async fn read(&self, consumer: StreamConsumer) -> Result<Vec<StreamBatch>, Error> {
        let mut batches = vec![];
        for shard in self.shards().await? {
            let (records, Some(last)) = self.records(Some(consumer), &shard).await? else {
                continue;
            };
            let (new_events, last) = filtered_batch(records, last, is_new_event);
            let events = triggers::stream_events(&stream_payload(&new_events, &self.arn)?)
                .map_err(|sequence| format!("unreadable event record {sequence} in shard {shard}"))?;
            batches.push(StreamBatch { shard, events, last });
        }
        Ok(batches)
    }

    async fn advance(&self, consumer: StreamConsumer, shard: &str, position: &str) -> Result<(), Error> {
        self.set_checkpoint(Some(consumer), shard, position);
        Ok(())
    }

    /// What `stream-outbox`'s event source mapping hands it: records of items carrying an
    /// outbox; the checkpoint stops before the first that failed.
    async fn complete_outboxes(&self) -> Result<usize, Error> {
        let mut read = 0;
        for shard in self.shards().await? {
            let (records, Some(last)) = self.records(None, &shard).await? else {
                continue;
            };
            read += records.len();
            let (carrying, last) = filtered_batch(records, last, carries_outbox);
            let response = triggers::outbox(&self.store, &stream_payload(&carrying, &self.arn)?).await;
            match response.batch_item_failures.first() {
                None => self.set_checkpoint(None, &shard, &last),
                Some(failed) => {
                    let failed = failed.item_identifier.as_deref();
                    let handled = carrying
                        .iter()
                        .filter_map(|r| r.dynamodb().and_then(|d| d.sequence_number()))
                        .take_while(|sequence| Some(*sequence) != failed)
                        .last();
                    if let Some(position) = handled {
                        self.set_checkpoint(None, &shard, position);
                    }
                    return Err(format!("the outbox of record {failed:?} was not completed").into());
                }
            }
        }
        Ok(read)
    }
}

/// Whether the record passes `stream-outbox`'s filter: an item written with an outbox.
pub(crate) fn carries_outbox(record: &Record) -> bool {
    stream_images::carries_outbox(record.dynamodb().and_then(|d| d.new_image()))
}

/// A stream attribute as Lambda's JSON shows it (`{"S": …}`, binary in base64); only the
/// kinds this table writes on event items.
fn attribute_json(value: &AttributeValue) -> Option<Value> {
    use base64::Engine;
    match value {
        AttributeValue::S(s) => Some(json!({ "S": s })),
        AttributeValue::B(b) => Some(json!({ "B": base64::engine::general_purpose::STANDARD.encode(b.as_ref()) })),
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
pub(crate) fn is_new_event(record: &Record) -> bool {
    record.event_name().map(|n| n.as_str()) == Some("INSERT")
        && stream_images::is_event_item(record.dynamodb().and_then(|d| d.new_image()))
}

/// The Lambda payload for stream records.
pub(crate) fn stream_payload(records: &[Record], stream_arn: &str) -> Result<StreamEvent, serde_json::Error> {
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
