//! Each trigger handler fed its sample payload from `events/`.

use crate::spawn_aws_app;
use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use ops_domain::ids::{EventId, OperationId};
use ops_domain::operations::OperationStore;
use ops_domain::ports::QueueName;
use ops_domain::webhooks::WebhookStore;
use ops_runtime::driver::StreamConsumer;
use ops_tests::ADMIN_KEY;
use tower::ServiceExt;

fn sample(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_payload_reaches_its_handler() {
    let app = spawn_aws_app().await;
    // API Gateway → the endpoint's router, exactly as lambda_http hands it over.
    app.service
        .bootstrap_admin_key("sk_test_sample_platform_admin_key_000000000")
        .await
        .unwrap();
    let health = lambda_http::request::from_str(&sample("api-gateway-health.json")).unwrap();
    let answer = ops_api::router_for(
        ops_api::App {
            service: app.service.clone(),
        },
        &[ops_api::Endpoint::Health],
    )
    .oneshot(health)
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let create = lambda_http::request::from_str(&sample("api-gateway-create-operation.json")).unwrap();
    let router = ops_api::router_for(
        ops_api::App {
            service: app.service.clone(),
        },
        &[ops_api::Endpoint::CreateOperation],
    );
    let answer = router.clone().oneshot(create).await.unwrap();
    assert_eq!(
        answer.status(),
        404,
        "the sample's customer does not exist on a fresh stack"
    );
    let body = axum::body::to_bytes(axum::body::Body::new(answer.into_body()), 1 << 20)
        .await
        .unwrap();
    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["param"], "customer_id");
    // A function serves only its own endpoint.
    let other = lambda_http::request::from_str(&sample("api-gateway-health.json")).unwrap();
    assert_eq!(router.oneshot(other).await.unwrap().status(), 404);
    let _ = ADMIN_KEY;

    // DynamoDB stream → every stream consumer: the event record is read, the other
    // record skipped, and nothing fails (the operation is unknown to this stack).
    let stream: StreamEvent = serde_json::from_str(&sample("dynamodb-stream-new-events.json")).unwrap();
    let events = ops_runtime::triggers::stream_events(&stream).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].0.as_str(), events[0].1.kind.as_str()),
        ("111", "operation.approved")
    );
    for consumer in StreamConsumer::ALL {
        assert!(
            ops_runtime::triggers::stream(&app.service, consumer, stream.clone())
                .await
                .batch_item_failures
                .is_empty(),
            "{consumer:?}"
        );
    }

    // DynamoDB stream → outbox: an operation's record (its move to completed) whose writer
    // died before writing its event and audit entry. Both are written, once however often the
    // record comes.
    let outbox: StreamEvent = serde_json::from_str(&sample("dynamodb-stream-outbox.json")).unwrap();
    let event_id = EventId::from("evt_01m883cgxv100djx0gby47nv74");
    let operation_id = OperationId::from("op_01m883cfye0vntdc8rvhwmc99e");
    assert!(app.parts.store.event(&event_id).await.unwrap().is_none());
    for _ in 0..2 {
        let response = ops_runtime::triggers::outbox(&app.parts.store, &outbox).await;
        assert!(response.batch_item_failures.is_empty());
        let event = app
            .parts
            .store
            .event(&event_id)
            .await
            .unwrap()
            .expect("the event written");
        assert_eq!(event.kind, "operation.completed");
        assert_eq!(event.data.text("operation_id").as_deref(), Some(operation_id.as_str()));
        let history = app.parts.store.operation_history(&operation_id).await.unwrap();
        let moves: Vec<_> = history.iter().map(|e| (e.from.as_deref(), e.to.as_deref())).collect();
        assert_eq!(moves, [(Some("processing"), Some("completed"))]);
    }

    // SQS → rail submit: the unknown transaction is a batch item failure, and so is the task
    // of a version this deployment does not read (refused by name, kept for the dead-letter
    // queue, never misread).
    let submissions: SqsEvent = serde_json::from_str(&sample("sqs-rail-submit.json")).unwrap();
    let response = ops_runtime::triggers::queue(&app.service, QueueName::Submissions, submissions).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "11111111-1111-1111-1111-111111111111",
            "22222222-2222-2222-2222-222222222222"
        ]
    );
    let response_json = serde_json::to_value(&response).unwrap();
    assert_eq!(
        response_json["batchItemFailures"][0]["itemIdentifier"],
        "11111111-1111-1111-1111-111111111111"
    );

    // SQS → webhook send: a delivery that no longer exists is done with.
    let sends: SqsEvent = serde_json::from_str(&sample("sqs-webhook-send.json")).unwrap();
    assert!(ops_runtime::triggers::queue(&app.service, QueueName::Webhooks, sends)
        .await
        .batch_item_failures
        .is_empty());

    // SQS → file split: a file this stack never had is done with.
    let splits: SqsEvent = serde_json::from_str(&sample("sqs-file-split.json")).unwrap();
    assert!(ops_runtime::triggers::queue(&app.service, QueueName::Files, splits)
        .await
        .batch_item_failures
        .is_empty());

    // SQS dead-letter queues → exceptions: the dead letter about nothing stored is dropped,
    // the task this deployment cannot read stays where it is.
    let dead: SqsEvent = serde_json::from_str(&sample("sqs-dead-letters.json")).unwrap();
    let response = ops_runtime::triggers::dead_letters(&app.service, dead).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["44444444-4444-4444-4444-444444444444"]);

    // Schedule → status poll.
    let _: serde_json::Value = serde_json::from_str(&sample("schedule-status-poll.json")).unwrap();
    assert_eq!(
        ops_runtime::triggers::status_poll(&app.service).await.unwrap()["polled"],
        0
    );
}
