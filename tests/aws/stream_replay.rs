//! A stream batch that failed for good (its retries ran out, and Lambda put a note of it on the
//! stream failures queue) is replayed by `stream-replay` once its cause is fixed: its records
//! are read back from the stream and handed to the consumer that failed them, once however
//! often the note comes; a note it cannot replay stays on the queue, with why.

use crate::spawn_aws_app;
use ops_domain::ports::QueueName;
use ops_runtime::driver::Trigger;
use ops_runtime::replay::StreamReplay;
use ops_tests::payout;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_failed_for_good_is_replayed_through_the_consumer_that_failed_it() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    // An approved payout whose events the transition consumer never took: its batch failed.
    let created = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await;
    assert_eq!(created.status, 201);
    let operation = created.id();
    let transactions = format!("/v1/transactions?operation_id={operation}");
    let listed = |answer: &ops_tests::Reply| answer.json()["data"].as_array().unwrap().len();
    assert_eq!(listed(&app.get(&transactions, &customer.key).await), 0);

    // The note Lambda's on-failure destination writes for that batch: the stream so far.
    let stream_arn = app.parts.store.stream_arn().await.unwrap();
    let streams = aws_sdk_dynamodbstreams::Client::new(&app.config);
    let described = streams.describe_stream().stream_arn(&stream_arn).send().await.unwrap();
    let shard = described.stream_description().unwrap().shards()[0]
        .shard_id()
        .unwrap()
        .to_owned();
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&stream_arn)
        .shard_id(&shard)
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap()
        .shard_iterator
        .unwrap();
    let records = streams.get_records().shard_iterator(iterator).send().await.unwrap();
    let sequence = |at: usize| {
        records.records()[at]
            .dynamodb()
            .unwrap()
            .sequence_number()
            .unwrap()
            .to_owned()
    };
    let stack = app.settings.table.trim_end_matches("-table").to_owned();
    let note = |function: &str| {
        json!({
            "requestContext": {"requestId": "d1b5a1e0", "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 11,
                               "functionArn": format!("arn:aws:lambda:us-east-1:123456789012:function:{stack}-{function}")},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0", "timestamp": "2026-11-30T06:00:00.000Z",
            "DDBStreamBatchInfo": {"shardId": shard, "startSequenceNumber": sequence(0),
                                   "endSequenceNumber": sequence(records.records().len() - 1),
                                   "approximateArrivalOfFirstRecord": "2026-11-30T05:59:00Z",
                                   "approximateArrivalOfLastRecord": "2026-11-30T05:59:01Z",
                                   "batchSize": records.records().len(), "streamArn": stream_arn}
        })
        .to_string()
    };
    let sqs = aws_sdk_sqs::Client::new(&app.config);
    let queue_url = sqs
        .create_queue()
        .queue_name(format!("{stack}-stream-failures"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let send = |body: String| sqs.send_message().queue_url(&queue_url).message_body(body).send();
    send(note("stream-transition")).await.unwrap();
    // Notes it cannot replay: one of a function that reads no stream, one that is no note.
    send(note("queue-rail-submit")).await.unwrap();
    send("{\"not\": \"a note\"}".into()).await.unwrap();

    let replay = StreamReplay::new(
        &app.config,
        queue_url.clone(),
        app.service.clone(),
        app.parts.store.clone(),
    );
    let done = replay.run().await.unwrap();
    assert_eq!(done.replayed.len(), 1, "{done:?}");
    assert_eq!(done.replayed[0].function, "stream-transition");
    assert!(
        done.replayed[0].records >= 2,
        "the operation's events at least: {done:?}"
    );
    // The consumer routed the operation's making to its customer's lane, where it is made.
    let submissions = Trigger::Queue(QueueName::Submissions);
    while app.driver.round(submissions).await.unwrap() > 0 {}
    assert_eq!(listed(&app.get(&transactions, &customer.key).await), 1);
    let reasons: Vec<&str> = done.left.iter().map(|left| left.reason.as_str()).collect();
    assert_eq!(reasons.len(), 2, "{done:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.ends_with("-queue-rail-submit is no stream function of this stack")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("not a note of a failed stream batch")),
        "{reasons:?}"
    );
    // The replayed note is gone; the two it could not replay stay, visible to the next run.
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let count = |name| {
        let attributes = attributes.attributes().unwrap();
        attributes[&name].parse::<usize>().unwrap()
    };
    assert_eq!(
        (
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages),
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        ),
        (2, 0)
    );

    // The same batch noted again (a second failure of the same records): replayed, and the
    // consumer, idempotent, makes nothing twice.
    send(note("stream-transition")).await.unwrap();
    let again = replay.run().await.unwrap();
    assert_eq!((again.replayed.len(), again.left.len()), (1, 2), "{again:?}");
    while app.driver.round(submissions).await.unwrap() > 0 {}
    assert_eq!(listed(&app.get(&transactions, &customer.key).await), 1);
}
