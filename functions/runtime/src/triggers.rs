//! The trigger functions' handlers: Lambda events in, the domain's consumers called, partial
//! batch failures out (`ReportBatchItemFailures`).

use crate::driver::{consume_queue, StreamConsumer};
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use ops_domain::event::Event;
use ops_domain::ports::{BatchOutcome, QueueMessage, QueueName};
use ops_domain::schedules::FireSchedule;
use ops_domain::service::Service;
use ops_infra::aws::{stream_images, DynamoStore};

/// The domain events carried by a stream batch, with the sequence number of each record.
/// Records that are not events (the event source mapping's filter lets none through) are
/// skipped; an unreadable event record is reported as failed rather than dropped.
pub fn stream_events(batch: &StreamEvent) -> Result<Vec<(String, Event)>, String> {
    let mut events = vec![];
    for record in &batch.records {
        let sequence = record.change.sequence_number.clone().unwrap_or_default();
        if record.event_name != "INSERT" {
            continue;
        }
        match stream_images::event_of(&record.change.new_image) {
            None => continue,
            Some(Ok(event)) => events.push((sequence, event)),
            Some(Err(error)) => {
                tracing::error!(%sequence, %error, "unreadable event record");
                return Err(sequence);
            }
        }
    }
    Ok(events)
}

/// stream → `stream-outbox`: writes the events and audit entries an item's outbox holds
/// and the table lacks (its writer died before it wrote them). Records are handled in order;
/// the first that fails is reported, so it and those after it come again.
pub async fn outbox(store: &DynamoStore, batch: &StreamEvent) -> DynamoDbEventResponse {
    for record in &batch.records {
        let sequence = record.change.sequence_number.clone().unwrap_or_default();
        let outcome = match stream_images::outbox_of(&record.change.new_image) {
            Ok(Some(found)) => store.complete_outbox(&found).await.map_err(|e| e.to_string()),
            Ok(None) => Ok(0),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(0) => {}
            Ok(written) => tracing::info!(%sequence, written, "completed an outbox its writer left"),
            Err(error) => {
                tracing::error!(%sequence, %error, "an outbox was not completed");
                return failed_from(sequence);
            }
        }
    }
    DynamoDbEventResponse::default()
}

fn stream_response(events: &[(String, Event)], outcome: BatchOutcome) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    for failed in outcome.failed {
        if let Some((sequence, _)) = events.iter().find(|(_, e)| e.id == failed) {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(sequence.clone());
            response.batch_item_failures.push(failure);
        }
    }
    response
}

fn failed_from(sequence: String) -> DynamoDbEventResponse {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = Some(sequence);
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures.push(failure);
    response
}

/// stream → `consumer` (transition, or webhook dispatch and the event bus)
pub async fn stream(service: &Service, consumer: StreamConsumer, batch: StreamEvent) -> DynamoDbEventResponse {
    match stream_events(&batch) {
        Ok(events) => {
            let plain: Vec<Event> = events.iter().map(|(_, e)| e.clone()).collect();
            stream_response(&events, consumer.consume(service, &plain).await)
        }
        Err(sequence) => failed_from(sequence),
    }
}

pub fn queue_messages(batch: &SqsEvent) -> Vec<QueueMessage> {
    batch
        .records
        .iter()
        .map(|m| QueueMessage {
            id: m.message_id.clone().unwrap_or_default(),
            body: m.body.clone().unwrap_or_default(),
            receive_count: m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        })
        .collect()
}

fn queue_response(outcome: BatchOutcome) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for id in outcome.failed {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// SQS → the queue's consumer (rail submit, or webhook send)
pub async fn queue(service: &Service, queue: QueueName, batch: SqsEvent) -> SqsBatchResponse {
    queue_response(consume_queue(service, queue, &queue_messages(&batch)).await)
}

/// SQS dead-letter queues → exceptions work items
pub async fn dead_letters(service: &Service, batch: SqsEvent) -> SqsBatchResponse {
    queue_response(service.handle_dead_letters(&queue_messages(&batch)).await)
}

/// How long one status-poll invocation keeps taking rounds (the function times out at 30 s);
/// what is still due then waits for the next minute.
const POLL_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

/// schedule → the signing secrets no webhook endpoint names, deleted; answers how many.
pub async fn secret_sweep(service: &Service) -> Result<serde_json::Value, String> {
    let deleted = service.sweep_signing_secrets().await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({ "deleted": deleted }))
}

/// schedule → status poll: reports the operator levels, expires the approvals past their
/// time, then asks the rails about every transaction whose poll is due, round after round,
/// until none is or the budget is spent.
pub async fn status_poll(service: &Service) -> Result<serde_json::Value, String> {
    // The minute's operator levels first: a poll that runs long still reports them.
    if let Err(error) = service.record_operator_levels().await {
        tracing::warn!(%error, "the operator levels were not recorded");
    }
    // Nor does an expiry that fails hold back the poll: the next minute expires it.
    let expired = service.expire_approvals().await.unwrap_or_else(|error| {
        tracing::warn!(%error, "the approvals past their time were not expired");
        0
    });
    let started = std::time::Instant::now();
    let mut polled = 0;
    loop {
        let round = service.poll_rails().await.map_err(|e| e.to_string())?;
        polled += round;
        if round == 0 || started.elapsed() > POLL_BUDGET {
            break;
        }
    }
    Ok(serde_json::json!({ "polled": polled, "expired": expired }))
}

/// EventBridge Scheduler → schedule fire: records the occurrence the Scheduler names (and
/// any it never fired), each once however often it is delivered.
pub async fn schedule_fire(service: &Service, payload: serde_json::Value) -> Result<serde_json::Value, String> {
    let fire: FireSchedule = serde_json::from_value(payload).map_err(|e| format!("not a schedule firing: {e}"))?;
    let recorded = service.fire_schedule(&fire).await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({ "recorded": recorded }))
}
