//! DynamoDB requests counted by the step of a payout's lifecycle that made them, next to the
//! fewest the design allows: the bench prints them, a test holds the pipeline to them.

use crate::TestClock;
use ops_domain::ports::QueueName;
use ops_infra::aws::DynamoStore;
use ops_runtime::driver::{Driver, Trigger};

/// The fewest DynamoDB requests each step of a one-item payout's lifecycle can make under the
/// design: every state change one changeset with its audit entry and event, and a read of
/// each fact that must be current when it is acted on.
pub const DESIGN_MINIMUM: [(&str, u32, &str); 9] = [
    ("POST /v1/operations", 10, "the key by its hash; the key's and its customer's count this second (rate limit, one item); its customer (a suspended one's keys are refused); the customer's and the platform's definitions of the workflow (either may exist) with the customer's approval floor, in one batch; the customer's account in the currency (a payout draws on it if it exists); the customer's payout limits (how many beneficiaries one payout may pay; and, approved at once, its limits); the idempotency key's record (read: the key is free); the key's record, completed and naming the operation (on its own, not in a transaction with it: half the write units, one request more); the operation, its outbox naming its events and audit entry; the events and the entry, in one batch"),
    ("POST /v1/operations/{id}/approve", 8, "the key; its and its customer's count this second; its user (roles as they are now) and its customer (suspended or not), side by side; the operation; the customer's payout limits (none here: with a limit in the currency, its counters too, in one batch); the operation written with its outbox; its event and audit entry, in one batch"),
    ("stream-transition", 0, "none: it only routes each change to a task in its customer's lane on the submissions queue (one send a batch)"),
    ("stream-webhook-dispatch", 1, "the delivery made; the endpoints are looked up once per customer in a batch (two index queries and one read of the endpoints found)"),
    ("stream-desk", 12, "reads, and the moves' writes shared by a batch's payouts: the board: on each operation event (created, pending_approval, approved, processing, completed) the operation's entry, and a move on each change of column (into pending_approval, into in_progress, off the board: a payout alone writes each in its own transaction; a batch's moves of a wave are one transaction, each customer's counters updated once in it); the work items: on created and pending_approval the operation (already decided here, so nothing opens), on each event that may leave a queue's state (approved, processing, completed; a transaction's pending and confirmed) its subject's open item, if any"),
    ("queue-rail-submit", 14, "the making task, on operation.approved: the operation, the move to processing, the transaction made (each a write of the entity, then its event and audit entry in one batch); the submit task: the transaction, the rail's cut-off settings (none here; a rail with cut-offs adds its calendar), the claim recorded before the rail is called, the outcome, then its event and audit entry in one batch; the settling task, on transaction.confirmed: the operation, its transactions (one batch read of the ids its items name), the completion (the operation, then its event and entry)"),
    ("queue-webhook-send", 1, "the attempt; and once a batch its deliveries and their events (two batch reads), each endpoint it sends to, and that endpoint's health read and written"),
    ("schedule-status-poll", 2, "one versioned write per answer: the confirmation (then its event and audit entry in one batch); the four return checks write nothing (each is a sweep over the rail's confirmations: its queries are the schedule's, and it reads the transactions it found and records where it got to once a round, not once a payout)"),
    ("stream-outbox", 7, "for each of the seven changes written with an outbox, one batch read of the events and audit entries it names; nothing is written when every writer lived"),
];

/// DynamoDB requests, and writes among them, by the step of a lifecycle that made them.
#[derive(Default)]
pub struct Steps {
    pub counted: Vec<(&'static str, Counted)>,
    /// The status-poll schedule's queries of its shards: its cost, once a minute in the
    /// cloud whatever the traffic, not a lifecycle's.
    pub schedule_queries: u64,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct Counted {
    pub requests: u64,
    pub writes: u64,
    /// Times the step ran and made a request (for a stream consumer: the batches it handled).
    pub rounds: u64,
}

fn counted(store: &DynamoStore) -> Counted {
    Counted {
        requests: store.meter().requests() - store.meter().poll_queries(),
        writes: store.meter().transactions().0 + store.meter().single_writes(),
        rounds: 0,
    }
}

/// The design's minimum for `step`, and what it consists of.
pub fn minimum(step: &str) -> (u32, &'static str) {
    DESIGN_MINIMUM.iter().find(|(name, ..)| *name == step).map_or_else(
        || panic!("{step} has no minimum"),
        |(_, minimum, needs)| (*minimum, *needs),
    )
}

impl Steps {
    /// Runs `work`, adding the requests it made to `step`'s count.
    pub async fn measure<T>(
        &mut self,
        step: &'static str,
        store: &DynamoStore,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let (before, polled) = (counted(store), store.meter().poll_queries());
        let answer = work.await;
        let after = counted(store);
        self.schedule_queries += store.meter().poll_queries() - polled;
        let entry = match self.counted.iter().position(|(name, _)| *name == step) {
            Some(at) => &mut self.counted[at].1,
            None => {
                self.counted.push((step, Counted::default()));
                &mut self.counted.last_mut().unwrap().1
            }
        };
        entry.requests += after.requests - before.requests;
        entry.writes += after.writes - before.writes;
        entry.rounds += u64::from(after.requests > before.requests);
        answer
    }
}

/// Runs the triggers one at a time, counting each one's requests, until every payout has
/// gone through: six 30 s steps see each completed, the long ones run its return checks out
/// (1 min, 10 min, 1 h and 24 h after confirmation), so each lifecycle is counted whole.
pub async fn settle(driver: &Driver, clock: &TestClock, store: &DynamoStore, steps: &mut Steps) {
    let minutes = time::Duration::minutes;
    let mut advances = vec![time::Duration::seconds(30); 6];
    advances.extend([minutes(10), minutes(60), minutes(24 * 60), time::Duration::ZERO]);
    for advance in advances {
        loop {
            let mut handled = 0;
            // Neither the schedule timer (in the cloud the Scheduler fires it), the files
            // queue, nor the dead-letter queues (which a lifecycle that goes well never
            // reaches) is its step.
            let steps_of_a_payout = |t: &Trigger| {
                !matches!(
                    t,
                    Trigger::ScheduleTimer
                        | Trigger::DeadLetters
                        | Trigger::Queue(QueueName::Files)
                        | Trigger::SecretSweep
                )
            };
            for trigger in Trigger::ALL.into_iter().filter(steps_of_a_payout) {
                handled += steps
                    .measure(trigger.as_str(), store, driver.round(trigger))
                    .await
                    .expect("trigger round");
            }
            if handled == 0 {
                break;
            }
        }
        clock.advance(advance);
    }
}

/// The write units a store spends from now on (a changeset refused in a race, then drafted
/// again, counted apart: that is the run's timing, not the design), in all and by the kind of
/// item written.
pub struct WriteUnitsSince {
    units: u64,
    conflicted: u64,
    by_kind: std::collections::BTreeMap<String, u64>,
}

impl WriteUnitsSince {
    pub fn now(store: &DynamoStore) -> WriteUnitsSince {
        WriteUnitsSince {
            units: store.meter().write_units(),
            conflicted: store.meter().conflicted_write_units(),
            by_kind: store.meter().write_units_by_kind(),
        }
    }

    /// Units each of `payouts` spent since: all of them but those lost in races, those lost
    /// in races, and every kind of item written (both).
    pub fn per_payout(
        &self,
        store: &DynamoStore,
        payouts: usize,
    ) -> (f64, f64, std::collections::BTreeMap<String, f64>) {
        let per = |n: u64| n as f64 / payouts as f64;
        let conflicted = store.meter().conflicted_write_units() - self.conflicted;
        let by_kind = store
            .meter()
            .write_units_by_kind()
            .into_iter()
            .map(|(kind, total)| {
                let spent = per(total - self.by_kind.get(&kind).copied().unwrap_or(0));
                (kind, spent)
            })
            .filter(|(_, units)| *units > 0.0)
            .collect();
        (
            per(store.meter().write_units() - self.units - conflicted),
            per(conflicted),
            by_kind,
        )
    }
}
