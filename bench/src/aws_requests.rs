//! DynamoDB and SQS requests, write units and cost per payout lifecycle on the emulator.

use crate::lifecycles::{LIST_ALL, LIST_NONE};
use futures_util::future::join_all;
use ops_tests::receiver::Receiver;
use ops_tests::requests::{self, settle, Steps, DESIGN_MINIMUM};
use ops_tests::{payout, Api, ADMIN_KEY};
use serde_json::json;
use std::time::Duration;

/// Requests per lifecycle on the AWS adapters (against the emulator the endpoint names), and
/// what 1,000 payouts would cost at on-demand prices. Returns the stack it measured on.
pub(crate) async fn aws_round_trips() -> ops_runtime::deployment::Settings {
    use ops_domain::access::Environment;
    use std::sync::Arc;
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-{}", std::process::id());
    let settings = ops_runtime::provision::provision(&config, &stack, Environment::Test, None)
        .await
        .expect("stack");
    let clock = Arc::new(ops_tests::TestClock::default());
    let (service, parts) = settings.service_with(&config, clock.clone()).await.expect("service");
    parts.store.meter().count_index_entries_exactly();
    let stack_settings = settings.clone();
    let service = Arc::new(service);
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    let api = crate::serve(service.clone()).await;
    let driver = parts.driver(&config, service.clone()).await.expect("trigger driver");
    let receiver = Receiver::start(0).await;
    let customer = api.create_customer().await;
    let approver = api.add_member(&customer, &["approver"], &["operations:approve"]).await;
    api.subscribe(&customer.key, &receiver.url, &["operation.completed"])
        .await;
    let mut setup = Steps::default();
    settle(&driver, &clock, &parts.store, &mut setup).await;
    let (requests, (transactions, items), puts, units, sqs) = (
        parts.store.meter().requests(),
        parts.store.meter().transactions(),
        parts.store.meter().single_writes(),
        parts.store.meter().write_units(),
        parts.queue.requests(),
    );
    let units_by_kind = parts.store.meter().write_units_by_kind();
    let lifecycles = 20u64;
    let mut steps = Steps::default();
    let mut ids = vec![];
    for _ in 0..lifecycles {
        let made = steps.measure("POST /v1/operations", &parts.store, async {
            api.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[123_400]),
            )
            .await
            .id()
        });
        ids.push(made.await);
    }
    for id in &ids {
        let path = format!("/v1/operations/{id}/approve");
        let approved = steps.measure("POST /v1/operations/{id}/approve", &parts.store, async {
            api.post(&path, &approver.key, json!({})).await
        });
        assert_eq!(approved.await.status, 200);
    }
    settle(&driver, &clock, &parts.store, &mut steps).await;
    let per = |n: u64| n as f64 / lifecycles as f64;
    let dynamo = per(parts.store.meter().requests() - requests - steps.schedule_queries);
    let (tx, written) = (
        per(parts.store.meter().transactions().0 - transactions),
        per(parts.store.meter().transactions().1 - items),
    );
    let single = per(parts.store.meter().single_writes() - puts);
    let write_units = per(parts.store.meter().write_units() - units);
    let queue = per(parts.queue.requests() - sqs);
    for id in &ids {
        assert_eq!(
            api.get(&format!("/v1/operations/{id}"), &customer.key).await.json()["status"],
            "completed"
        );
    }
    assert_eq!(receiver.received().len(), ids.len(), "one operation.completed each");
    // On-demand prices (us-east-1): $0.625 per million write units, $0.125 per million read
    // units, SQS $0.40 per million requests. Every DynamoDB request but a write is counted
    // as one read unit (items here are under 4 KB).
    let reads = dynamo - tx - single;
    let cost = 1000.0 * (write_units * 0.625e-6 + reads * 0.125e-6 + queue * 0.40e-6);
    println!();
    println!("| on the AWS adapters (emulator), per payout lifecycle | measured |");
    println!("|---|---|");
    println!(
        "| DynamoDB requests (besides the poll schedule's {} queries and each served rail's return sweeps a round) | {dynamo:.1} |",
        ops_infra::aws::SHARDS
    );
    println!("| of which TransactWriteItems | {tx:.1} ({written:.1} items) |");
    println!("| of which single-item writes (a changeset of one put, an idempotency claim) | {single:.1} |");
    println!("| write units (items by size, transactions doubled, index entries) | {write_units:.1} |");
    println!("| SQS requests (pump: receive, delete, send) | {queue:.1} |");
    println!("| DynamoDB + SQS cost per 1,000 payouts, on demand | ${cost:.4} |");

    println!();
    println!("| item written (its `entity`) | write units per payout lifecycle |");
    println!("|---|---|");
    for (kind, total) in parts.store.meter().write_units_by_kind() {
        let spent = total - units_by_kind.get(&kind).copied().unwrap_or(0);
        if spent > 0 {
            println!("| {kind} | {:.1} |", per(spent));
        }
    }

    println!();
    println!("| on the AWS adapters (emulator), per payout lifecycle: step | DynamoDB requests | of which writes | the design's minimum | what the minimum is |");
    println!("|---|---|---|---|---|");
    for (step, counted) in &steps.counted {
        let (minimum, needs) = requests::minimum(step);
        println!(
            "| {step} | {:.1} | {:.1} | {minimum} | {needs} |",
            per(counted.requests),
            per(counted.writes)
        );
    }
    let minimum: u32 = DESIGN_MINIMUM.iter().map(|(_, minimum, _)| minimum).sum();
    println!("| all steps | {dynamo:.1} | {:.1} | {minimum} | |", tx + single);
    Lifecycles {
        api: &api,
        driver: &driver,
        clock: &clock,
        store: &parts.store,
        customer: &customer,
        approver: &approver,
    }
    .by_kind()
    .await;

    // No request path grows with history: the DynamoDB requests one lookup or create makes
    // stay the same as the table fills (the emulator's own latency does grow: it scans).
    println!();
    println!("| AWS adapters: stored operations | DynamoDB requests per GET /v1/operations/{{id}} | per {LIST_ALL} | per {LIST_NONE} | per POST /v1/operations | per GET /v1/board |");
    println!("|---|---|---|---|---|---|");
    let mut stored = lifecycles as usize;
    let create = || {
        api.post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[5_000]),
        )
    };
    for target in [250usize, 1_000] {
        for chunk in (stored..target).collect::<Vec<_>>().chunks(8) {
            join_all(chunk.iter().map(|_| create())).await;
        }
        stored = target;
        let per_request = |before: u64| (parts.store.meter().requests() - before) as f64 / 10.0;
        let before = parts.store.meter().requests();
        for _ in 0..10 {
            api.get(&format!("/v1/operations/{}", ids[0]), &customer.key).await;
        }
        let get = per_request(before);
        let before = parts.store.meter().requests();
        for _ in 0..10 {
            api.get(LIST_ALL, &customer.key).await;
        }
        let list = per_request(before);
        let before = parts.store.meter().requests();
        for _ in 0..10 {
            api.get(LIST_NONE, &customer.key).await;
        }
        let rare = per_request(before);
        let before = parts.store.meter().requests();
        for _ in 0..10 {
            create().await;
        }
        let made = per_request(before);
        stored += 10;
        // The desk counts the first batch made (approvals waiting), so the board has a column
        // and a queue to read; draining the stream again would stall the emulator, and the
        // board's reads are the same whatever its counters say.
        if target == 250 {
            let desk = ops_runtime::driver::Trigger::Stream(ops_runtime::driver::StreamConsumer::Desk);
            while driver.round(desk).await.expect("desk round") > 0 {}
        }
        let before = parts.store.meter().requests();
        for _ in 0..10 {
            let answer = api.get("/v1/board", &customer.key).await;
            assert!(answer.json()["pending_approval"]["count"].as_i64() >= Some(200));
        }
        let board = per_request(before);
        println!("| {target} | {get:.1} | {list:.1} | {rare:.1} | {made:.1} | {board:.1} |");
    }
    platform_board_by_customers(&api, &parts.store).await;
    stack_settings
}

/// What a payout's lifecycle on the emulator takes: the API, the trigger driver and its clock,
/// the store (which counts write units), a customer and its approver.
struct Lifecycles<'a> {
    api: &'a Api,
    driver: &'a ops_runtime::driver::Driver,
    clock: &'a ops_tests::TestClock,
    store: &'a ops_infra::aws::DynamoStore,
    customer: &'a ops_tests::Customer,
    approver: &'a ops_tests::Member,
}

impl Lifecycles<'_> {
    /// The lifecycle above is approved before the desk's first round, so its approvals item
    /// never opens; a payout a person approves later waits in the approvals queue first. What
    /// that lifecycle writes, by kind of item; and what a payroll's payout of ten lines writes.
    async fn by_kind(&self) {
        self.written("a payout whose approval waits in the approvals queue", &[123_400], true)
            .await;
        let lines: Vec<i64> = (1..=10).map(|line| line * 12_340).collect();
        self.written("a payout of ten lines, approved before the desk's round", &lines, false)
            .await;
    }

    /// Ten payouts of `lines` made, approved and run to the end (with `desk_first`, after the
    /// desk's rounds opened an approvals item for each): the write units of one, by kind.
    async fn written(&self, label: &str, lines: &[i64], desk_first: bool) {
        use ops_runtime::driver::{StreamConsumer, Trigger};
        let Lifecycles {
            api,
            driver,
            clock,
            store,
            customer,
            approver,
        } = self;
        let payouts = 10;
        let spent = ops_tests::requests::WriteUnitsSince::now(store);
        let mut ids = vec![];
        for _ in 0..payouts {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", lines))
                .await;
            ids.push(made.id());
        }
        if desk_first {
            while driver
                .round(Trigger::Stream(StreamConsumer::Desk))
                .await
                .expect("desk round")
                > 0
            {}
            let open = api
                .get("/v1/work_items?queue=approvals&status=open", &customer.key)
                .await
                .json();
            assert_eq!(open["data"].as_array().map(Vec::len), Some(payouts), "{open}");
        }
        for id in &ids {
            let approved = api
                .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
                .await;
            assert_eq!(approved.status, 200);
        }
        settle(driver, clock, store, &mut Steps::default()).await;
        let (write_units, lost_in_races, by_kind) = spent.per_payout(store, payouts);
        println!();
        println!("| on the AWS adapters (emulator), {label}: item written (its `entity`) | write units per payout lifecycle |");
        println!("|---|---|");
        for (kind, units) in by_kind {
            println!("| {kind} | {units:.1} |");
        }
        println!("| all (and {lost_in_races:.1} more lost in races) | {write_units:.1} |");
    }
}

/// The platform's board adds up every customer's counters when it is read: what one read
/// takes as customers are added (each with counters in one currency, as a move writes them).
async fn platform_board_by_customers(api: &Api, store: &ops_infra::aws::DynamoStore) {
    use ops_domain::desk::board::{BoardEntry, BoardMove, Column};
    use ops_domain::money::Currency;
    use ops_domain::ports::{Changeset, Commit, Write};
    println!();
    println!("| AWS adapters: customers with board counters | DynamoDB requests per GET /v1/board (the platform's) | KB of items queried a read | read units a read, eventually consistent (at least) |");
    println!("|---|---|---|---|");
    let mut customers = 1;
    for target in [1usize, 100, 300] {
        // One at a time: the emulator serves one request at a time, and its writes slow as
        // the table grows, so a crowd of them would time out.
        for n in customers..target {
            let entry = BoardEntry {
                operation_id: format!("op_board{n:05}").into(),
                customer_id: format!("cus_board{n:05}").into(),
                currency: Currency::parse("CLP").expect("a currency"),
                amount: 5_000,
                column: Some(Column::PendingApproval),
                operation_version: 1,
                event_id: format!("evt_board{n:05}").into(),
                version: 1,
            };
            // The emulator, slowed by the table's size, now and then drops a request: asked
            // again, a write it made anyway comes back as a conflict.
            for attempt in 1.. {
                let mut changes = Changeset::default();
                changes.push(Write::MoveOnBoard(BoardMove {
                    entry: entry.clone(),
                    from: None,
                }));
                match store.commit_derived(changes).await {
                    Ok(()) | Err(ops_domain::ports::StoreError::Conflict) => break,
                    Err(other) if attempt == 5 => panic!("counted on the board: {other}"),
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        }
        customers = target;
        let (requests, bytes) = (store.meter().requests(), store.meter().queried_bytes());
        for _ in 0..10 {
            let answer = api.get("/v1/board", ADMIN_KEY).await;
            assert!(answer.json()["pending_approval"]["count"].as_i64() >= Some(target as i64));
        }
        let per_read = |n: u64| n as f64 / 10.0;
        let kb = per_read(store.meter().queried_bytes() - bytes) / 1024.0;
        println!(
            "| {target} | {:.1} | {kb:.1} | {:.1} |",
            per_read(store.meter().requests() - requests),
            kb / 4.0 / 2.0
        );
    }
}
