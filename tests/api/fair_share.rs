//! Fair share: one customer's backlog never holds back another customer's next payout, on
//! the stream or on the queues.

use ops_domain::ports::QueueName;
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::{payout, spawn_app, TestApp};
use serde_json::Value;
use time::Duration;

async fn transactions_of(app: &TestApp, key: &str, operation: &str) -> Vec<Value> {
    let page = app
        .get(&format!("/v1/transactions?operation_id={operation}"), key)
        .await
        .json();
    page["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn one_customers_large_operation_does_not_hold_back_anothers_single_payout() {
    let app = spawn_app().await;
    let busy = app.create_customer().await;
    let other = app.create_customer().await;
    let transition = Trigger::Stream(StreamConsumer::Transition);
    let submissions = Trigger::Queue(QueueName::Submissions);

    let large = app
        .post("/v1/operations", &busy.key, payout(&busy.id, "auto", &[1_000; 400]))
        .await;
    assert_eq!(large.status, 201, "{}", large.json());
    while app.driver().round(transition).await.unwrap() > 0 {}
    // The stream made none of its transactions: their making waits on the queue, in the busy
    // customer's lane, as every change's work does.
    let large_made = transactions_of(&app, &busy.key, &large.id()).await;
    assert!(large_made.is_empty(), "{} made on the stream", large_made.len());
    let waiting = || async { app.embedded().queue.waiting(QueueName::Submissions).await.unwrap() };
    assert_eq!(waiting().await.len(), 1);
    // Each making task makes 25 and queues the next, until all 400 are made; then the stream
    // routes the 400 to their submission: a backlog in the busy customer's lane.
    while app.driver().round(submissions).await.unwrap() > 0 {}
    while app.driver().round(transition).await.unwrap() > 0 {}
    assert_eq!(waiting().await.len(), 400);

    let single = app
        .post("/v1/operations", &other.key, payout(&other.id, "auto", &[2_000]))
        .await
        .id();
    while app.driver().round(transition).await.unwrap() > 0 {}
    // The stream only routed it: its transaction is made in its customer's turn.
    assert!(transactions_of(&app, &other.key, &single).await.is_empty());
    // With 400 of the busy customer's messages ahead of them, one round of the submissions
    // queue (ten messages) reaches the other customer's making, and one more, after the
    // stream routed the new transaction, its submission.
    app.driver().round(submissions).await.unwrap();
    let made = transactions_of(&app, &other.key, &single).await;
    assert_eq!(made[0]["status"], "pending", "{made:?}");
    while app.driver().round(transition).await.unwrap() > 0 {}
    app.driver().round(submissions).await.unwrap();
    let made = transactions_of(&app, &other.key, &single).await;
    assert_eq!(made[0]["status"], "submitted", "{made:?}");

    // The large operation is paid whole in the end, each item once.
    app.settle(Duration::seconds(5), 30).await;
    let large = app
        .get(&format!("/v1/operations/{}", large.id()), &busy.key)
        .await
        .json();
    assert_eq!(large["status"], "completed", "{large}");
    let paid = app.sandbox().await;
    let submitted: usize = paid.iter().map(|entry| entry.submit_calls as usize).sum();
    assert_eq!(submitted, 401, "one submit per transaction");
}
