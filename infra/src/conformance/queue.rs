//! The queue port's behaviour, with its receiving side: each implementation's tests call
//! [`run_all`] with fresh, empty queues. Time passes for real (a few seconds in all): SQS keeps
//! its own clock.

use crate::QueueConsumer;
use ops_domain::ports::{QueueMessage, QueueName, MAX_RECEIVES};
use std::time::Duration as Wait;
use time::Duration;

pub async fn run_all(queue: &dyn QueueConsumer) {
    a_message_comes_back_until_it_is_acknowledged(queue).await;
    a_batch_holds_no_more_than_asked(queue).await;
    a_delayed_message_waits(queue).await;
    a_message_received_too_often_is_dead_lettered(queue).await;
}

/// Longer than the one-second timeouts and delays below (SQS counts in whole seconds).
const PAST_ONE_SECOND: Wait = Wait::from_millis(1_500);

fn bodies(messages: &[QueueMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.body.as_str()).collect()
}

async fn a_message_comes_back_until_it_is_acknowledged(queue: &dyn QueueConsumer) {
    let submissions = QueueName::Submissions;
    let hidden = Duration::seconds(1);
    queue
        .send(submissions, "cus_conformance", "first".into(), Duration::ZERO)
        .await
        .unwrap();
    let received = queue.receive(submissions, 10, hidden).await.unwrap();
    assert_eq!(bodies(&received), ["first"]);
    assert_eq!(received[0].receive_count, 1);
    assert!(
        queue.receive(submissions, 10, hidden).await.unwrap().is_empty(),
        "a received message is hidden while it is handled"
    );

    tokio::time::sleep(PAST_ONE_SECOND).await;
    let again = queue.receive(submissions, 10, hidden).await.unwrap();
    assert_eq!(bodies(&again), ["first"], "an unacknowledged message comes back");
    assert_eq!(
        (again[0].id.as_str(), again[0].receive_count),
        (received[0].id.as_str(), 2)
    );
    queue.ack(submissions, &again[0].id).await.unwrap();
    queue
        .ack(submissions, &again[0].id)
        .await
        .expect("acknowledging twice does nothing");

    tokio::time::sleep(PAST_ONE_SECOND).await;
    assert!(
        queue.receive(submissions, 10, hidden).await.unwrap().is_empty(),
        "an acknowledged message never comes back"
    );
}

async fn a_batch_holds_no_more_than_asked(queue: &dyn QueueConsumer) {
    let submissions = QueueName::Submissions;
    for body in ["a", "b", "c"] {
        queue
            .send(submissions, "cus_conformance", body.into(), Duration::ZERO)
            .await
            .unwrap();
    }
    let mut seen = vec![];
    loop {
        let batch = queue.receive(submissions, 2, Duration::seconds(30)).await.unwrap();
        if batch.is_empty() {
            break;
        }
        assert!(batch.len() <= 2, "asked for two, got {}", batch.len());
        let ids: Vec<&str> = batch.iter().map(|m| m.id.as_str()).collect();
        queue.ack_all(submissions, &ids).await.unwrap();
        // Again: nothing.
        queue.ack_all(submissions, &ids).await.unwrap();
        seen.extend(batch.into_iter().map(|m| m.body));
    }
    seen.sort();
    assert_eq!(seen, ["a", "b", "c"], "each message once");
}

async fn a_delayed_message_waits(queue: &dyn QueueConsumer) {
    let webhooks = QueueName::Webhooks;
    queue
        .send(webhooks, "cus_conformance", "later".into(), Duration::seconds(1))
        .await
        .unwrap();
    assert!(queue
        .receive(webhooks, 10, Duration::seconds(30))
        .await
        .unwrap()
        .is_empty());
    tokio::time::sleep(PAST_ONE_SECOND).await;
    let received = queue.receive(webhooks, 10, Duration::seconds(30)).await.unwrap();
    assert_eq!(bodies(&received), ["later"], "visible once its delay has passed");
    queue.ack(webhooks, &received[0].id).await.unwrap();
}

async fn a_message_received_too_often_is_dead_lettered(queue: &dyn QueueConsumer) {
    let webhooks = QueueName::Webhooks;
    queue
        .send(webhooks, "cus_conformance", "poison".into(), Duration::ZERO)
        .await
        .unwrap();
    let mut first_id = None;
    for receives in 1..=MAX_RECEIVES {
        // A handler that fails it every time: it is never acknowledged.
        let received = queue.receive(webhooks, 10, Duration::ZERO).await.unwrap();
        assert_eq!(bodies(&received), ["poison"], "receive {receives}");
        first_id.get_or_insert(received[0].id.clone());
        assert_eq!(received[0].receive_count, receives);
        tokio::time::sleep(Wait::from_millis(20)).await;
    }
    assert!(
        queue.receive(webhooks, 10, Duration::ZERO).await.unwrap().is_empty(),
        "after {MAX_RECEIVES} receives it is no longer handed out"
    );
    assert_eq!(queue.dead_letters(webhooks).await.unwrap(), ["poison"]);
    assert!(queue.dead_letters(QueueName::Submissions).await.unwrap().is_empty());

    // The dead-letter consumer receives it under the same id, and acknowledging removes it.
    let dead = queue
        .receive_dead_letters(webhooks, 10, Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(
        (bodies(&dead), Some(&dead[0].id) == first_id.as_ref()),
        (vec!["poison"], true)
    );
    assert!(
        queue
            .receive_dead_letters(webhooks, 10, Duration::seconds(30))
            .await
            .unwrap()
            .is_empty(),
        "hidden while it is handled"
    );
    queue.ack_dead_letter(webhooks, &dead[0].id).await.unwrap();
    assert!(queue.dead_letters(webhooks).await.unwrap().is_empty());
}
