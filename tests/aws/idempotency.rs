//! Idempotency keys on DynamoDB, where a create writes its key's record first and its operation
//! next, each on its own: the record holds the key, and counts as done only once the
//! operation it names exists.

use crate::{spawn_aws_app, AwsApp};
use ops_infra::aws::AfterKeyRecord;
use ops_tests::{payout, the_one_created};
use time::Duration;

async fn operations_of(app: &AwsApp, key: &str) -> Vec<String> {
    let list = app.get("/v1/operations?limit=100", key).await.json();
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The kill test of the key-first write: the writer dies after the key's record, before the
/// operation. Nothing is created; the key is in use (409) while the record's lock lasts, whatever
/// is retried under it, then free: the retry creates exactly one operation, whose response is
/// replayed byte for byte, also once its lock has long passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_whose_writer_dies_after_its_key_holds_the_key_until_its_lock_passes() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let body = payout(&customer.id, "auto", &[2_500]);

    app.parts.store.faults().after_key_record(AfterKeyRecord::Die);
    let died = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &body)
        .await;
    let error = died.error(500);
    assert_eq!(error["code"], "internal_error");
    // What the client is told is what happens next: retry under the key, maybe told it is in use.
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Retry with the same Idempotency-Key") && message.contains("in use"),
        "{message}"
    );
    app.parts.store.faults().after_key_record(AfterKeyRecord::GoOn);

    let retried = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &body)
        .await;
    assert_eq!(retried.error(409)["code"], "idempotency_key_in_use");
    let other = payout(&customer.id, "auto", &[2_501]);
    let reused = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &other)
        .await;
    assert_eq!(reused.error(422)["code"], "idempotency_key_reused");
    assert!(
        operations_of(&app, &customer.key).await.is_empty(),
        "nothing was created"
    );

    app.clock.advance(Duration::seconds(61));
    let made = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &body)
        .await;
    assert_eq!(made.status.as_u16(), 201, "{}", made.json());
    assert!(!made.headers.contains_key("idempotent-replayed"));
    let again = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &body)
        .await;
    assert_eq!((again.status.as_u16(), again.bytes == made.bytes), (201, true));
    assert_eq!(again.headers["idempotent-replayed"], "true");

    // Past the record's lock, a record whose operation exists is still that request's answer.
    app.clock.advance(Duration::seconds(120));
    let later = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &body)
        .await;
    assert_eq!((later.status.as_u16(), later.bytes == made.bytes), (201, true));
    assert_eq!(later.headers["idempotent-replayed"], "true");
    let reused = app
        .post_keyed("/v1/operations", &customer.key, "dies-midway", &other)
        .await;
    assert_eq!(reused.error(422)["code"], "idempotency_key_reused");
    assert_eq!(operations_of(&app, &customer.key).await, [made.id()]);
}

/// A writer stalled after its key's record past its deadline never writes the operation, even
/// once the stall ends: the record's lock outlasts the deadline, so no retry can have taken the
/// key over by then. Stalled within its deadline, a create completes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_stalled_past_its_deadline_after_its_key_never_writes_its_operation() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let body = payout(&customer.id, "auto", &[3_100]);
    let store = &app.parts.store;
    store
        .faults()
        .shorten_entity_deadline(std::time::Duration::from_millis(1_500));

    store
        .faults()
        .after_key_record(AfterKeyRecord::Stall(std::time::Duration::from_millis(100)));
    let slow = app.post_keyed("/v1/operations", &customer.key, "slow", &body).await;
    assert_eq!(slow.status.as_u16(), 201, "{}", slow.json());

    store
        .faults()
        .after_key_record(AfterKeyRecord::Stall(std::time::Duration::from_millis(2_500)));
    let stalled = app.post_keyed("/v1/operations", &customer.key, "stalled", &body).await;
    assert_eq!(stalled.error(500)["code"], "internal_error");
    store.faults().after_key_record(AfterKeyRecord::GoOn);
    // Past the end of the stall: had the writer gone on, its operation would be there now.
    tokio::time::sleep(std::time::Duration::from_millis(2_000)).await;
    assert_eq!(operations_of(&app, &customer.key).await, [slow.id()]);
    let retried = app.post_keyed("/v1/operations", &customer.key, "stalled", &body).await;
    assert_eq!(retried.error(409)["code"], "idempotency_key_in_use");

    app.clock.advance(Duration::seconds(61));
    let made = app.post_keyed("/v1/operations", &customer.key, "stalled", &body).await;
    assert_eq!(made.status.as_u16(), 201, "{}", made.json());
    let mut made_ids = operations_of(&app, &customer.key).await;
    made_ids.sort();
    let mut expected = vec![slow.id(), made.id()];
    expected.sort();
    assert_eq!(made_ids, expected);
}

/// Twenty requests racing with one key create one operation: each is that operation's answer
/// or told the key is in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_creates_with_one_key_make_one_operation() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let body = payout(&customer.id, "auto", &[777]);
    let replies = futures_util::future::join_all(
        (0..20).map(|_| app.post_keyed("/v1/operations", &customer.key, "burst", &body)),
    )
    .await;
    let created = the_one_created(&replies);
    assert_eq!(operations_of(&app, &customer.key).await, [created]);
}
