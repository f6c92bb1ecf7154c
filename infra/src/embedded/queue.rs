//! Queues in the SQLite file, with SQS's semantics: delay, visibility timeout, receive count,
//! and a dead-letter queue after too many receives.

use super::sqlite_store::{unavailable, CachedExecute, SqliteStore};
use crate::QueueConsumer;
use async_trait::async_trait;
use ops_domain::ports::{Clock, Queue, QueueError, QueueMessage, QueueName, MAX_RECEIVES};
use rusqlite::params;
use std::sync::Arc;
use time::Duration;

#[derive(Clone)]
pub struct SqliteQueue {
    store: SqliteStore,
    clock: Arc<dyn Clock>,
}

fn dead_letter_name(queue: QueueName) -> String {
    format!("{}-dlq", queue.as_str())
}

impl SqliteQueue {
    pub fn new(store: SqliteStore, clock: Arc<dyn Clock>) -> SqliteQueue {
        SqliteQueue { store, clock }
    }

    fn now_ms(&self) -> i64 {
        (self.clock.now().unix_timestamp_nanos() / 1_000_000) as i64
    }

    /// Makes the messages of `queue` a previous process received and never finished visible
    /// again. Local mode is one process: at its start no message is being handled, so one
    /// hidden by a receive belongs to a process that died; SQS would show it again after its
    /// visibility timeout, this shows it at once. Only for a queue whose consumer needs no
    /// time to pass (a file's split); the submissions consumer tells a dead worker's claim
    /// from a live one by the time since it, so its messages keep their timeout. Delayed
    /// messages (never received) keep their delay.
    pub async fn release_in_flight(&self, queue: QueueName) -> Result<usize, QueueError> {
        let now = self.now_ms();
        self.store
            .with(move |c| {
                c.run(
                    "UPDATE queue_messages SET visible_at = ?1
                     WHERE queue = ?2 AND visible_at > ?1 AND receive_count > 0",
                    params![now, queue.as_str()],
                )
                .map_err(unavailable)
            })
            .await
            .map_err(QueueError::new)
    }

    /// Bodies of every message waiting in `queue`, visible or not.
    pub async fn waiting(&self, queue: QueueName) -> Result<Vec<String>, QueueError> {
        self.depth_query(
            "SELECT body FROM queue_messages WHERE queue = ?1 ORDER BY id",
            queue.as_str().to_owned(),
        )
        .await
    }

    async fn depth_query(&self, sql: &'static str, queue: String) -> Result<Vec<String>, QueueError> {
        self.store
            .with(move |c| {
                let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
                let rows = statement.query_map([queue], |row| row.get(0)).map_err(unavailable)?;
                rows.collect::<Result<_, _>>().map_err(unavailable)
            })
            .await
            .map_err(QueueError::new)
    }
}

#[async_trait]
impl Queue for SqliteQueue {
    async fn send(&self, queue: QueueName, lane: &str, body: String, delay: Duration) -> Result<(), QueueError> {
        let visible_at = self.now_ms() + delay.whole_milliseconds().max(0) as i64;
        let lane = lane.to_owned();
        self.store
            .with(move |c| {
                c.run(
                    "INSERT INTO queue_messages (queue, lane, body, visible_at) VALUES (?1, ?2, ?3, ?4)",
                    params![queue.as_str(), lane, body, visible_at],
                )
                .map_err(unavailable)?;
                Ok(())
            })
            .await
            .map_err(QueueError::new)
    }

    async fn send_all(&self, queue: QueueName, messages: Vec<(String, String)>) -> Result<(), QueueError> {
        let visible_at = self.now_ms();
        self.store
            .with(move |c| {
                let tx = c.transaction().map_err(unavailable)?;
                for (lane, body) in messages {
                    tx.run(
                        "INSERT INTO queue_messages (queue, lane, body, visible_at) VALUES (?1, ?2, ?3, ?4)",
                        params![queue.as_str(), lane, body, visible_at],
                    )
                    .map_err(unavailable)?;
                }
                tx.commit().map_err(unavailable)
            })
            .await
            .map_err(QueueError::new)
    }
}

#[async_trait]
impl QueueConsumer for SqliteQueue {
    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        self.receive_from(
            queue.as_str().to_owned(),
            Some(dead_letter_name(queue)),
            max,
            visibility,
        )
        .await
    }

    async fn ack(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError> {
        self.delete(queue.as_str().to_owned(), message_id).await
    }

    async fn ack_all(&self, queue: QueueName, message_ids: &[&str]) -> Result<(), QueueError> {
        let ids = message_ids
            .iter()
            .map(|id| id.parse::<i64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(QueueError::new)?;
        let name = queue.as_str();
        // Lost in a power cut, a deletion only means the message comes again, which every
        // consumer takes as any redelivery.
        self.store
            .with_unsynced(move |c| {
                let tx = c.transaction().map_err(unavailable)?;
                for id in ids {
                    tx.run(
                        "DELETE FROM queue_messages WHERE id = ?1 AND queue = ?2",
                        params![id, name],
                    )
                    .map_err(unavailable)?;
                }
                tx.commit().map_err(unavailable)
            })
            .await
            .map_err(QueueError::new)
    }

    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<String>, QueueError> {
        self.depth_query(
            "SELECT body FROM queue_messages WHERE queue = ?1 ORDER BY id",
            dead_letter_name(queue),
        )
        .await
    }

    async fn receive_dead_letters(
        &self,
        queue: QueueName,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        self.receive_from(dead_letter_name(queue), None, max, visibility).await
    }

    async fn ack_dead_letter(&self, queue: QueueName, message_id: &str) -> Result<(), QueueError> {
        self.delete(dead_letter_name(queue), message_id).await
    }
}

impl SqliteQueue {
    /// Receives from the queue called `name`; a message received too often moves to
    /// `dead_letters` (a dead-letter queue itself has none: its messages stay).
    async fn receive_from(
        &self,
        name: String,
        dead_letters: Option<String>,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        let now = self.now_ms();
        let hidden_until = now + visibility.whole_milliseconds() as i64;
        // Lost in a power cut, a receive only makes the message visible again, sooner.
        self.store
            .with_unsynced(move |c| {
                let tx = c
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(unavailable)?;
                let candidates = in_turns(&tx, &name, now, max).map_err(unavailable)?;
                let mut received = vec![];
                for (id, body, count) in candidates {
                    if let Some(dead_letters) = dead_letters.as_ref().filter(|_| count >= MAX_RECEIVES) {
                        // Counted afresh in the dead-letter queue, as SQS does.
                        tx.run(
                            "UPDATE queue_messages SET queue = ?2, visible_at = ?3, receive_count = 0 WHERE id = ?1",
                            params![id, dead_letters, now],
                        )
                        .map_err(unavailable)?;
                        tracing::error!(queue = %name, message = id, "message moved to the dead-letter queue");
                        continue;
                    }
                    tx.run(
                        "UPDATE queue_messages SET visible_at = ?2, receive_count = receive_count + 1 WHERE id = ?1",
                        params![id, hidden_until],
                    )
                    .map_err(unavailable)?;
                    received.push(QueueMessage {
                        id: id.to_string(),
                        body,
                        receive_count: count + 1,
                    });
                }
                tx.commit().map_err(unavailable)?;
                Ok(received)
            })
            .await
            .map_err(QueueError::new)
    }

    async fn delete(&self, name: String, message_id: &str) -> Result<(), QueueError> {
        let id: i64 = message_id.parse().map_err(QueueError::new)?;
        self.store
            .with_unsynced(move |c| {
                c.run(
                    "DELETE FROM queue_messages WHERE id = ?1 AND queue = ?2",
                    params![id, name],
                )
                .map_err(unavailable)?;
                Ok(())
            })
            .await
            .map_err(QueueError::new)
    }
}

/// Up to `max` visible messages of `queue`, the lanes taking turns: each lane's oldest, then
/// each one's next, and so on, the lane whose oldest waited longest first. One lane's backlog
/// of thousands is thus never ahead of another lane's one message. The lanes are found by
/// stepping through the lane index, one seek a lane, however long each lane is.
fn in_turns(c: &rusqlite::Connection, queue: &str, now: i64, max: usize) -> rusqlite::Result<Vec<(i64, String, u32)>> {
    let lanes: Vec<String> = {
        let mut statement = c.prepare_cached(
            "WITH RECURSIVE lanes(lane) AS (
                 SELECT min(lane) FROM queue_messages WHERE queue = ?1
                 UNION ALL
                 SELECT (SELECT min(lane) FROM queue_messages WHERE queue = ?1 AND lane > lanes.lane)
                 FROM lanes WHERE lane IS NOT NULL)
             SELECT lane FROM lanes WHERE lane IS NOT NULL",
        )?;
        let rows = statement.query_map(params![queue], |row| row.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut oldest_of_each = vec![];
    {
        let mut statement = c.prepare_cached(
            "SELECT id, body, receive_count, visible_at FROM queue_messages
             WHERE queue = ?1 AND lane = ?2 AND visible_at <= ?3 ORDER BY visible_at, id LIMIT ?4",
        )?;
        for lane in lanes {
            let rows = statement.query_map(params![queue, lane, now, max as i64], |row| {
                Ok(((row.get(0)?, row.get(1)?, row.get(2)?), row.get::<_, i64>(3)?))
            })?;
            let waiting: Vec<((i64, String, u32), i64)> = rows.collect::<Result<_, _>>()?;
            if let Some(first) = waiting.first().map(|(message, visible_at)| (*visible_at, message.0)) {
                oldest_of_each.push((first, waiting.into_iter().map(|(message, _)| message)));
            }
        }
    }
    oldest_of_each.sort_by_key(|(first, _)| *first);
    let mut lanes: Vec<_> = oldest_of_each.into_iter().map(|(_, messages)| messages).collect();
    let mut taken = vec![];
    while taken.len() < max && !lanes.is_empty() {
        lanes.retain_mut(|lane| match lane.next() {
            Some(message) if taken.len() < max => {
                taken.push(message);
                true
            }
            _ => false,
        });
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ops_domain::ports::SystemClock;

    #[tokio::test]
    async fn a_message_a_dead_process_received_is_delivered_again_at_start_and_a_delayed_one_waits() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
        let queue = SqliteQueue::new(store, Arc::new(SystemClock));
        queue
            .send(QueueName::Files, "cus_a", "in flight".into(), Duration::ZERO)
            .await
            .unwrap();
        let received = queue.receive(QueueName::Files, 10, Duration::hours(1)).await.unwrap();
        assert_eq!(received.len(), 1);
        queue
            .send(QueueName::Files, "cus_a", "delayed".into(), Duration::hours(1))
            .await
            .unwrap();
        assert!(queue
            .receive(QueueName::Files, 10, Duration::hours(1))
            .await
            .unwrap()
            .is_empty());

        queue
            .send(QueueName::Submissions, "cus_a", "submission".into(), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            queue
                .receive(QueueName::Submissions, 10, Duration::hours(1))
                .await
                .unwrap()
                .len(),
            1
        );

        assert_eq!(queue.release_in_flight(QueueName::Files).await.unwrap(), 1);
        assert!(queue
            .receive(QueueName::Submissions, 10, Duration::hours(1))
            .await
            .unwrap()
            .is_empty());
        let again = queue.receive(QueueName::Files, 10, Duration::hours(1)).await.unwrap();
        let bodies: Vec<&str> = again.iter().map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["in flight"]);
        assert_eq!(again[0].receive_count, 2);
    }

    /// One lane's backlog of thousands does not hold back another lane's message: each
    /// receive takes the lanes in turns, oldest lane first, and a lane's own order is kept.
    #[tokio::test]
    async fn lanes_take_turns_and_keep_their_own_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
        let queue = SqliteQueue::new(store, Arc::new(SystemClock));
        let submissions = QueueName::Submissions;
        for n in 0..2_000 {
            queue
                .send(submissions, "cus_big", format!("big {n}"), Duration::ZERO)
                .await
                .unwrap();
        }
        queue
            .send(submissions, "cus_small", "small 0".into(), Duration::ZERO)
            .await
            .unwrap();
        queue
            .send(submissions, "cus_small", "small 1".into(), Duration::ZERO)
            .await
            .unwrap();
        // Delayed: not visible, so it takes no turn.
        queue
            .send(submissions, "cus_late", "late".into(), Duration::hours(1))
            .await
            .unwrap();
        let bodies = |messages: Vec<ops_domain::ports::QueueMessage>| -> Vec<String> {
            messages.into_iter().map(|m| m.body).collect()
        };
        let first = bodies(queue.receive(submissions, 3, Duration::hours(1)).await.unwrap());
        assert_eq!(first, ["big 0", "small 0", "big 1"]);
        let next = bodies(queue.receive(submissions, 4, Duration::hours(1)).await.unwrap());
        assert_eq!(next, ["big 2", "small 1", "big 3", "big 4"]);
        let rest = bodies(queue.receive(submissions, 10, Duration::hours(1)).await.unwrap());
        assert_eq!(rest, (5..15).map(|n| format!("big {n}")).collect::<Vec<_>>());
    }
}
