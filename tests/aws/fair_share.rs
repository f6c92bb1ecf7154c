//! Fair share on the AWS adapters: the table's stream only routes each change to a task in
//! its customer's lane, each queue message carries that lane as its message group, and SQS's
//! fair queues (the emulator does what their documentation says) deliver a quiet customer's
//! message ahead of a noisy customer's backlog.

use crate::spawn_aws_app;
use ops_domain::ports::QueueName;
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::payout;

#[tokio::test]
async fn a_quiet_customers_payout_is_submitted_ahead_of_a_noisy_customers_backlog() {
    let app = spawn_aws_app().await;
    let busy = app.create_customer().await;
    let quiet = app.create_customer().await;
    let transition = Trigger::Stream(StreamConsumer::Transition);
    let submissions = Trigger::Queue(QueueName::Submissions);

    let large = app
        .post("/v1/operations", &busy.key, payout(&busy.id, "auto", &[1_000; 400]))
        .await;
    assert_eq!(large.status, 201, "{}", large.json());
    while app.driver.round(transition).await.unwrap() > 0 {}
    // Its transactions are made 25 at a time, each making task queueing the next, then routed
    // by the stream to their submission: a backlog of 400 in the busy customer's lane.
    while app.driver.round(submissions).await.unwrap() > 0 {}
    while app.driver.round(transition).await.unwrap() > 0 {}
    // The busy customer's messages have been taking the consumers' time.
    for _ in 0..2 {
        assert_eq!(app.driver.round(submissions).await.unwrap(), 10);
    }

    let single = app
        .post("/v1/operations", &quiet.key, payout(&quiet.id, "auto", &[2_000]))
        .await
        .id();
    while app.driver.round(transition).await.unwrap() > 0 {}
    let made = || async {
        let page = app
            .get(&format!("/v1/transactions?operation_id={single}"), &quiet.key)
            .await
            .json();
        page["data"].as_array().unwrap().clone()
    };
    // The stream only routed it: its transaction is made in its customer's turn.
    assert!(made().await.is_empty());
    // With some 380 of the busy customer's messages ahead of them, one round of the
    // submissions queue (ten messages) reaches the quiet customer's making, and one more,
    // after the stream routed the new transaction, its submission.
    app.driver.round(submissions).await.unwrap();
    assert_eq!(made().await[0]["status"], "pending");
    while app.driver.round(transition).await.unwrap() > 0 {}
    app.driver.round(submissions).await.unwrap();
    assert_eq!(made().await[0]["status"], "submitted");
}
