//! The pipeline makes the DynamoDB requests the design needs and no more: the counts the bench
//! prints (BENCHMARKS.md), held here so that a step that starts reading again shows up.

use crate::spawn_aws_app;
use ops_tests::payout;
use ops_tests::receiver::Receiver;
use ops_tests::requests::{self, settle, Steps, WriteUnitsSince, DESIGN_MINIMUM};
use serde_json::json;

/// Write units of a one-item two-step payout's lifecycle (BENCHMARKS.md has them by kind of
/// item): a step that starts writing bigger items, or more of them, or index entries a write
/// does not change, or events and audit entries written inside a transaction again, fails
/// the test.
///
/// Besides the return sweeps' positions, which each poll round writes however many payouts
/// it checks: [`RETURN_SWEEP_UNITS`]; and apart from the desk's counter updates (`update`),
/// which the test's four payouts share as the bench's twenty do (a payout alone writes 6):
/// 1.5 when each of the desk's three waves merges the four payouts' moves into one
/// transaction. A full-suite run once wrote 2.0: one wave's moves were committed in two
/// transactions (the desk saw them in two batches, or its merged transaction was refused and
/// committed move by move). With them, a lifecycle is held to the cost round's goal:
/// [`WRITE_UNITS_GOAL`]. Both were set before endpoints kept their health, which is held apart
/// as the counters are: [`ENDPOINT_HEALTH_UNITS`].
/// Since operations are found by value, [`LOOKUP_WRITE_UNITS`] more; since the board has
/// charts, [`TALLY_WRITE_UNITS`] more.
const WRITE_UNITS_PER_LIFECYCLE: f64 = 58.0 + LOOKUP_WRITE_UNITS + TALLY_WRITE_UNITS;
/// The cost round's goal for a one-item payout's lifecycle, counter updates included; and the
/// lookup's entries and the charts' counts, which came after it.
const WRITE_UNITS_GOAL: f64 = 60.0 + LOOKUP_WRITE_UNITS + TALLY_WRITE_UNITS;
/// An endpoint's health is written once a send batch, whatever the batch holds: 0.25 a payout
/// when the four payouts' deliveries are sent in one batch, 0.5 when the queue hands them over
/// in two (a full-suite run did), and never more than one a delivery.
const ENDPOINT_HEALTH_UNITS: f64 = 1.0;
/// What the charts' hourly counts cost a payout: its transaction's making and its confirmation
/// each add to an hour's counter in their own changeset (two units each, in a transaction:
/// [`TALLY_COUNTER_UNITS`]), and each of those changesets, the transaction's document written
/// alone before (its events and audit entries through its outbox), is now a transaction of two:
/// one unit more for each document.
const TALLY_WRITE_UNITS: f64 = TALLY_COUNTER_UNITS + 2.0;
const TALLY_COUNTER_UNITS: f64 = 4.0;
/// The entries that find an operation by value: its item's reference and its beneficiary's id
/// when it is made, its transaction's rail reference when the rail takes it; one plain put of
/// one unit each, outside any transaction (in one, each would cost two).
const LOOKUP_WRITE_UNITS: f64 = 3.0;
/// The sweeps' positions, shared by the payouts a round checks (0.3 to 1.75 a payout here).
const RETURN_SWEEP_UNITS: f64 = 2.0;
/// An operation's four writes and its index entries: twelve, of which eight are its two status
/// lists moving twice (into approved, which is kept in processing's list, and into completed;
/// a list of approved's own made it sixteen, 21 units). Each write is one unit, the create's
/// too (it was two, in a transaction with the idempotency key's record: 17): its document is
/// deflated against the dictionary of typical documents, which keeps it far from 1 KiB
/// (deflated alone, the bench's lifecycle had one write cross it: 22).
const OPERATION_WRITE_UNITS: f64 = 16.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_lifecycle_step_makes_no_more_requests_than_the_design_needs() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let receiver = Receiver::start(0).await;
    app.subscribe(&customer.key, &receiver.url, &["operation.completed"])
        .await;
    let store = &app.parts.store;
    let spent = WriteUnitsSince::now(store);
    let payouts = 4;
    let mut steps = Steps::default();
    let mut ids = vec![];
    for _ in 0..payouts {
        let create = app.post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[123_400]),
        );
        ids.push(steps.measure("POST /v1/operations", store, create).await.id());
    }
    for id in &ids {
        let path = format!("/v1/operations/{id}/approve");
        let approve = app.post(&path, &approver.key, json!({}));
        let approved = steps.measure("POST /v1/operations/{id}/approve", store, approve).await;
        assert_eq!(approved.status, 200);
    }
    settle(&app.driver, &app.clock, store, &mut steps).await;
    assert_eq!(
        receiver.received().len(),
        payouts,
        "every payout completed and its customer told"
    );

    assert_eq!(
        steps.counted.len(),
        DESIGN_MINIMUM.len(),
        "every step ran: {:?}",
        steps.counted
    );
    let per_payout = |n: u64| n as f64 / payouts as f64;
    let (units, conflicted, by_kind) = spent.per_payout(store, payouts);
    eprintln!("write units per lifecycle: {units}, and {conflicted} lost in races; by kind, both: {by_kind:?}");
    let (units, sweeps) = apart_from_sweeps(units, &by_kind);
    let counters = by_kind.get("update").copied().unwrap_or_default();
    let health = by_kind.get("endpoint_health").copied().unwrap_or_default();
    let units = units - health;
    assert!(
        units - counters <= WRITE_UNITS_PER_LIFECYCLE
            && units <= WRITE_UNITS_GOAL
            && sweeps <= RETURN_SWEEP_UNITS
            && (0.25..=ENDPOINT_HEALTH_UNITS).contains(&health),
        "a lifecycle wrote {units} write units ({counters} of them for counters), {sweeps} for sweeps and {health} for its endpoint's health, more than {WRITE_UNITS_PER_LIFECYCLE} besides counters, {WRITE_UNITS_GOAL} in all, {RETURN_SWEEP_UNITS} or {ENDPOINT_HEALTH_UNITS}: {by_kind:?}"
    );
    assert_eq!(by_kind.get("operation"), Some(&OPERATION_WRITE_UNITS), "{by_kind:?}");
    assert_eq!(by_kind.get("finding"), Some(&LOOKUP_WRITE_UNITS), "{by_kind:?}");
    assert_eq!(
        by_kind.get("idempotency"),
        Some(&1.0),
        "the create's key record written on its own, before its operation, not with it in a transaction: {by_kind:?}"
    );
    assert_eq!(
        by_kind.get("event"),
        Some(&16.0),
        "eight events, each in one index: {by_kind:?}"
    );
    assert_eq!(
        by_kind.get("transaction"),
        Some(&9.0),
        "four writes (made, claimed, submitted, confirmed; the first and the last in a transaction with their hour's count) and three index entries (into the poll schedule and out, into the confirmations), none in a list of its operation's: {by_kind:?}"
    );
    assert_eq!(
        by_kind.get("tally"),
        Some(&TALLY_COUNTER_UNITS),
        "the hour's count of payouts made and of payouts confirmed, a submission not counted: {by_kind:?}"
    );
    for (step, counted) in &steps.counted {
        let (minimum, _) = requests::minimum(step);
        let minimum = f64::from(minimum);
        match *step {
            "stream-webhook-dispatch" => {
                assert_eq!(per_payout(counted.writes), minimum, "one delivery each: {counted:?}");
                // The customer's and the platform's lists, and the endpoints found in one batch.
                let lookups = counted.requests - counted.writes;
                assert!(
                    lookups <= 3 * counted.rounds,
                    "endpoints are looked up once a batch (the customer's and the platform's), not once an event: {counted:?}"
                );
            }
            "queue-webhook-send" => {
                // One attempt each, and the endpoint's health once a batch.
                assert_eq!(
                    per_payout(counted.writes - counted.rounds),
                    minimum,
                    "one attempt each: {counted:?}"
                );
                // Once a batch: its deliveries and their events (a batch read each), its endpoint
                // and its endpoint's health.
                let reads = counted.requests - counted.writes;
                assert!(
                    (4..=4 * counted.rounds).contains(&reads),
                    "a batch's deliveries, events, endpoint and its health are read once a batch, not once a delivery: {counted:?}"
                );
            }
            // The settling task `transaction.submitted` routes reads the operation and its
            // transactions (two requests): it can move an operation out of needs_attention,
            // and the event does not say which it is in.
            "queue-rail-submit" => assert_eq!(per_payout(counted.requests), minimum + 2.0, "{step}: {counted:?}"),
            // A return sweep reads the transactions it found and records where it got to
            // once a round (each check finds the payouts in a round or a few), not once a payout.
            "schedule-status-poll" => {
                let sweeps = counted.requests as f64 - minimum * payouts as f64;
                assert!(
                    (2.0..=2.0 * 4.0 * 3.0).contains(&sweeps),
                    "{step}: {sweeps} requests besides the confirmations: {counted:?}"
                );
            }
            // Every writer lived: its outbox names only what is already there.
            "stream-outbox" => {
                assert_eq!(counted.writes, 0, "{step}: {counted:?}");
                assert_eq!(per_payout(counted.requests), minimum, "{step}: {counted:?}");
            }
            // The moves of a batch's payouts are written together: fewer writes than moves.
            "stream-desk" => {
                assert_eq!(
                    per_payout(counted.requests - counted.writes),
                    minimum,
                    "{step}: {counted:?}"
                );
                assert!(counted.writes < 3 * payouts as u64, "{step}: {counted:?}");
            }
            _ => assert_eq!(per_payout(counted.requests), minimum, "{step}: {counted:?}"),
        }
    }
}

/// Write units of the same payout, with no webhook delivery, when its approval waits in the
/// approvals queue: the desk opens a work item, and closes it with the decision (BENCHMARKS.md
/// has them by kind), besides the return sweeps'. Four payouts' runs gave 79.5 (81 while each
/// move on the board updated its counters in a transaction of its own, 83 while the create
/// wrote its idempotency key's record in a transaction with its operation, 84 while a transaction
/// had an entry in its operation's list of them, 88 while approved
/// operations had a status list of their own, 89 before documents were deflated against the
/// dictionary); and the lookup's entries and the charts' counts since.
const WRITE_UNITS_WAITING_FOR_APPROVAL: f64 = 79.5 + LOOKUP_WRITE_UNITS + TALLY_WRITE_UNITS;

/// A payout a person approves after the desk's round: the approvals item's opening and
/// closing carry their `work_item.*` events and audit entries in the item's outbox, so those
/// are plain writes (one unit an item, and an event's index entry), not a transaction's two;
/// and each is counted on the board in the same update as its operation's move.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payout_waiting_in_the_approvals_queue_writes_its_items_events_after_the_item() {
    use ops_runtime::driver::{StreamConsumer, Trigger};
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let store = &app.parts.store;
    let spent = WriteUnitsSince::now(store);
    let payouts = 4;
    let mut ids = vec![];
    for _ in 0..payouts {
        let made = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[123_400]),
            )
            .await;
        ids.push(made.id());
    }
    while app.driver.round(Trigger::Stream(StreamConsumer::Desk)).await.unwrap() > 0 {}
    let open = app
        .get("/v1/work_items?queue=approvals&status=open", &customer.key)
        .await
        .json();
    assert_eq!(open["data"].as_array().map(Vec::len), Some(payouts), "{open}");
    // Each item's queue was counted in the update of its operation's move into the column.
    let board = app.get("/v1/board", &customer.key).await.json();
    assert_eq!(board["queues"]["approvals"]["open"], payouts, "{board}");
    assert_eq!(board["pending_approval"]["count"], payouts, "{board}");
    assert_eq!(
        board["pending_approval"]["amount"]["CLP"],
        (123_400 * payouts).to_string(),
        "{board}"
    );
    for id in &ids {
        let approved = app
            .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
            .await;
        assert_eq!(approved.status, 200);
    }
    settle(&app.driver, &app.clock, store, &mut Steps::default()).await;
    let done = app
        .get("/v1/work_items?queue=approvals&status=done", &customer.key)
        .await
        .json();
    assert_eq!(done["data"].as_array().map(Vec::len), Some(payouts), "{done}");
    let board = app.get("/v1/board", &customer.key).await.json();
    assert_eq!(board["queues"]["approvals"]["open"], 0, "{board}");
    assert_eq!(board["pending_approval"]["count"], 0, "{board}");
    assert_eq!(board["in_progress"]["count"], 0, "{board}");

    let (units, _, by_kind) = spent.per_payout(store, payouts);
    eprintln!("write units per lifecycle waiting for approval: {units}; by kind: {by_kind:?}");
    // The lifecycle's eight events and seven entries, and the item's two of each, all plain:
    // 20 and 9 (22 and 11 with the item's in its transaction).
    assert_eq!(by_kind.get("event"), Some(&20.0), "{by_kind:?}");
    assert_eq!(by_kind.get("audit"), Some(&9.0), "{by_kind:?}");
    // Three moves between columns, each one update of the customer's counters in a
    // transaction (the item's opening and closing counted in two of them), shared by the
    // payouts whose moves the desk takes in one batch (6 if none did).
    let updates = by_kind.get("update").copied().unwrap_or_default();
    assert!((1.5..6.0).contains(&updates), "{by_kind:?}");
    assert_eq!(by_kind.get("operation"), Some(&OPERATION_WRITE_UNITS), "{by_kind:?}");
    let (units, sweeps) = apart_from_sweeps(units, &by_kind);
    // The counters' updates vary with how the desk's rounds batch the moves (held above to
    // their range); the rest is held to the figure less the fewest updates.
    assert!(
        units - updates <= WRITE_UNITS_WAITING_FOR_APPROVAL - 1.5 && sweeps <= RETURN_SWEEP_UNITS,
        "a lifecycle waiting for approval wrote {units} write units ({updates} of them the counters' updates) and {sweeps} for sweeps, more than {WRITE_UNITS_WAITING_FOR_APPROVAL} and {RETURN_SWEEP_UNITS}: {by_kind:?}"
    );
}

/// A ten-item payout's create (a payroll's lines): its operation's item stays within one
/// kilobyte (one unit, written after the idempotency key's record; one for each of its four
/// index entries) because its document is deflated against the dictionary
/// of typical documents. Deflated alone, an operation of six items or more crosses 1 KiB
/// here, and its item takes four units.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ten_item_payouts_operation_is_written_as_one_kilobyte() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let store = &app.parts.store;
    let spent = WriteUnitsSince::now(store);
    let amounts: Vec<i64> = (1..=10).map(|line| line * 101_000).collect();
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &amounts),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let (_, _, by_kind) = spent.per_payout(store, 1);
    assert_eq!(by_kind.get("operation"), Some(&5.0), "{by_kind:?}");
}

/// A lifecycle's units besides the return sweeps' positions, and those.
fn apart_from_sweeps(units: f64, by_kind: &std::collections::BTreeMap<String, f64>) -> (f64, f64) {
    let sweeps = by_kind.get("return_sweep").copied().unwrap_or_default();
    (units - sweeps, sweeps)
}
