//! The ledger's invariants under random sequences of creates, approvals, rail outcomes
//! (confirmed, failed, returned, unknown then resolved), duplicate stream deliveries and
//! crashes, checked after every step: each movement balanced, the ledger zero-sum, each
//! account's balances equal to its movements summed from scratch, no available balance below
//! zero; the customer's account agrees with what became of each payout, collection and
//! transfer; and the operations board's counters equal a recount.

use ops_domain::event::Event;
use ops_tests::{payout, spawn_app_with, Customer, TestApp, ADMIN_KEY};
use proptest::prelude::*;
use serde_json::{json, Value};
use time::Duration;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Payout,
    Collection,
    /// To the supplier's account.
    Transfer,
}

#[derive(Debug, Clone)]
enum Step {
    /// An operation whose items end in the sandbox's outcome digits, auto-approved or waiting
    /// for a second signature.
    Create {
        kind: Kind,
        outcomes: Vec<i64>,
        two_step: bool,
    },
    ApproveOldestPending,
    /// The pipeline runs while the clock moves (submissions, polls, return checks).
    Run,
    /// The last events are delivered to the transition consumer again.
    Redeliver,
    /// The server dies and comes back on the same data.
    Crash,
    /// An operator resolves every transaction left in needs_attention.
    ResolveStuck {
        confirm: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    // 00 confirms, 01 is refused at submit, 02 fails later, 04 is unknown then confirmed,
    // 06 is returned, 08 is unknown then needs an operator.
    let outcome = prop::sample::select(vec![0i64, 1, 2, 4, 6, 8]);
    let kind = prop_oneof![3 => Just(Kind::Payout), 1 => Just(Kind::Collection), 1 => Just(Kind::Transfer)];
    prop_oneof![
        3 => (kind, prop::collection::vec(outcome, 1..4), any::<bool>())
            .prop_map(|(kind, outcomes, two_step)| Step::Create { kind, outcomes, two_step }),
        2 => Just(Step::ApproveOldestPending),
        3 => Just(Step::Run),
        1 => Just(Step::Redeliver),
        1 => Just(Step::Crash),
        1 => any::<bool>().prop_map(|confirm| Step::ResolveStuck { confirm }),
    ]
}

struct World {
    /// Taken out and put back by a crash.
    app: Option<TestApp>,
    acme: Customer,
    approver: String,
    /// Another customer's account, where transfers go.
    supplier_account: String,
    created: usize,
}

async fn list(app: &TestApp, key: &str, path: &str) -> Vec<Value> {
    let mut all = vec![];
    let mut after: Option<String> = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let page_path = match &after {
            Some(id) => format!("{path}{separator}limit=100&starting_after={id}"),
            None => format!("{path}{separator}limit=100"),
        };
        let page = app.get(&page_path, key).await;
        assert_eq!(page.status, 200, "{page_path}: {}", page.json());
        let page = page.json();
        let data = page["data"].as_array().unwrap().clone();
        after = data.last().map(|item| item["id"].as_str().unwrap().to_owned());
        all.extend(data);
        if page["has_more"] != true {
            return all;
        }
    }
}

async fn check_invariants(app: &TestApp) {
    let accounts = list(app, ADMIN_KEY, "/v1/accounts?currency=CLP").await;
    let mut posted_sum = 0;
    let mut pending_sum = 0;
    for account in &accounts {
        let id = account["id"].as_str().unwrap();
        let balances = &account["balances"];
        let (mut posted, mut pending_debits, mut pending_credits) = (0i64, 0i64, 0i64);
        for movement in list(app, ADMIN_KEY, &format!("/v1/accounts/{id}/movements")).await {
            let entries = movement["entries"].as_array().unwrap();
            assert_eq!(entries[0]["amount"], entries[1]["amount"], "unbalanced: {movement}");
            for entry in entries.iter().filter(|e| e["account_id"] == id) {
                let amount = entry["amount"].as_i64().unwrap();
                let signed = if entry["direction"] == "credit" {
                    amount
                } else {
                    -amount
                };
                match movement["status"].as_str().unwrap() {
                    "posted" => posted += signed,
                    "pending" if signed < 0 => pending_debits -= signed,
                    "pending" => pending_credits += signed,
                    _ => {}
                }
            }
        }
        assert_eq!(
            (
                balances["posted"].as_i64().unwrap(),
                balances["pending_debits"].as_i64().unwrap(),
                balances["pending_credits"].as_i64().unwrap()
            ),
            (posted, pending_debits, pending_credits),
            "account {id}'s balances are its movements summed"
        );
        if account["kind"] == "customer" {
            assert!(balances["available"].as_i64().unwrap() >= 0, "{account}");
        }
        posted_sum += posted;
        pending_sum += posted + pending_credits - pending_debits;
    }
    assert_eq!((posted_sum, pending_sum), (0, 0), "the ledger sums to zero");
}

/// What the customer's account must show given what happened to its operations: every
/// confirmed payout transaction posted, every live one (or an approved item not yet a
/// transaction) held, failed and returned ones nothing; every confirmed collection credited;
/// every completed transfer moved to the supplier.
async fn check_against_operations(world: &World, funded: i64) {
    let (app, acme) = (world.app.as_ref().unwrap(), &world.acme);
    let (mut spent, mut held, mut collected, mut transferred) = (0i64, 0i64, 0i64, 0i64);
    for operation in list(app, &acme.key, "/v1/operations").await {
        let status = operation["status"].as_str().unwrap();
        if matches!(status, "pending_approval" | "rejected" | "cancelled") {
            continue;
        }
        let total = operation["total_amount"].as_i64().unwrap();
        match operation["type"].as_str().unwrap() {
            "transfer" if status == "completed" => transferred += total,
            "transfer" => assert_eq!(status, "failed", "a transfer is posted or refused at once"),
            _ => {}
        }
        let id = operation["id"].as_str().unwrap();
        let collection = operation["type"] == "collection";
        let transactions = app
            .get(&format!("/v1/transactions?operation_id={id}"), &acme.key)
            .await
            .json();
        let transactions = transactions["data"].as_array().unwrap();
        for item in operation["items"].as_array().unwrap() {
            let amount = item["amount"].as_i64().unwrap();
            match transactions.iter().find(|t| t["item_id"] == item["id"]) {
                // Nothing is credited before the rail confirms a collection.
                Some(t) if collection => collected += if t["status"] == "confirmed" { amount } else { 0 },
                Some(t) => match t["status"].as_str().unwrap() {
                    "confirmed" => spent += amount,
                    "failed" | "returned" => {}
                    _ => held += amount,
                },
                // Approved and held, its transaction not made yet.
                None if !collection && matches!(status, "approved" | "processing") => held += amount,
                None => {}
            }
        }
    }
    let account = &list(app, &acme.key, "/v1/accounts").await[0];
    let balances = &account["balances"];
    assert_eq!(
        (
            balances["posted"].as_i64().unwrap(),
            balances["pending_debits"].as_i64().unwrap()
        ),
        (funded - spent + collected - transferred, held),
        "the account follows its operations' outcomes"
    );
    let supplier = app
        .get(&format!("/v1/accounts/{}", world.supplier_account), ADMIN_KEY)
        .await;
    assert_eq!(
        supplier.json()["balances"]["posted"].as_i64().unwrap(),
        transferred,
        "the supplier holds what was transferred"
    );
}

async fn apply(world: &mut World, step: &Step) {
    if let Step::Crash = step {
        let app = world.app.take().expect("a running app");
        world.app = Some(app.restart().await);
        return;
    }
    let app = world.app.as_ref().expect("a running app");
    match step {
        Step::Create {
            kind,
            outcomes,
            two_step,
        } => {
            world.created += 1;
            let amounts: Vec<i64> = outcomes
                .iter()
                .map(|o| 10_000 * (world.created as i64 % 7 + 1) + o)
                .collect();
            let workflow = if *two_step { "two_step" } else { "auto" };
            let mut body = payout(&world.acme.id, workflow, &amounts);
            match kind {
                Kind::Payout => {}
                Kind::Collection => body["type"] = json!("collection"),
                Kind::Transfer => {
                    body["type"] = json!("transfer");
                    for item in body["items"].as_array_mut().unwrap() {
                        item["destination"] = json!({"account_id": world.supplier_account});
                    }
                }
            }
            let created = app.post("/v1/operations", &world.acme.key, body).await;
            assert_eq!(created.status, 201, "{}", created.json());
        }
        Step::ApproveOldestPending => {
            let pending = list(app, &world.acme.key, "/v1/operations?status=pending_approval").await;
            if let Some(oldest) = pending.last() {
                let id = oldest["id"].as_str().unwrap();
                let decided = app
                    .post(&format!("/v1/operations/{id}/approve"), &world.approver, json!({}))
                    .await;
                assert_eq!(decided.status, 200, "{}", decided.json());
            }
        }
        Step::Run => app.settle(Duration::minutes(3), 4).await,
        Step::Redeliver => {
            let events: Vec<Event> = app.get("/v1/events?limit=20", ADMIN_KEY).await.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .map(|e| serde_json::from_value(e.clone()).unwrap())
                .collect();
            // Whatever it reports, a second delivery must change nothing the invariants see.
            app.driver().service().handle_transition_events(&events).await;
            app.driver().service().handle_desk_events(&events).await;
        }
        Step::Crash => unreachable!("handled above"),
        Step::ResolveStuck { confirm } => {
            for operation in list(app, &world.acme.key, "/v1/operations?status=needs_attention").await {
                let id = operation["id"].as_str().unwrap();
                let transactions = app
                    .get(&format!("/v1/transactions?operation_id={id}"), ADMIN_KEY)
                    .await
                    .json();
                for transaction in transactions["data"].as_array().unwrap() {
                    if transaction["status"] == "needs_attention" {
                        let tid = transaction["id"].as_str().unwrap();
                        let status = if *confirm { "confirmed" } else { "failed" };
                        let resolved = app
                            .post(
                                &format!("/v1/transactions/{tid}/resolve"),
                                ADMIN_KEY,
                                json!({"status": status, "reason": "checked with the rail"}),
                            )
                            .await;
                        assert_eq!(resolved.status, 200, "{}", resolved.json());
                    }
                }
            }
        }
    }
}

/// The board's counters, kept as the changes happen, equal a recount of the operations and
/// work items as they are (once the desk's consumer has caught up).
async fn check_board(app: &TestApp, acme: &Customer) {
    app.drain().await;
    let board = app.get("/v1/board", &acme.key).await.json();
    let operations = list(app, &acme.key, "/v1/operations").await;
    for (column, statuses) in [
        ("pending_approval", &["pending_approval"][..]),
        ("in_progress", &["approved", "processing"][..]),
        ("needs_attention", &["needs_attention"][..]),
    ] {
        let counted: Vec<&Value> = operations
            .iter()
            .filter(|o| statuses.contains(&o["status"].as_str().unwrap()))
            .collect();
        let amount: i64 = counted.iter().map(|o| o["total_amount"].as_i64().unwrap()).sum();
        assert_eq!(board[column]["count"], counted.len(), "{column}: {board:#}");
        assert_eq!(
            board[column]["amount"]["CLP"]
                .as_str()
                .map_or(0, |sum| sum.parse::<i64>().unwrap()),
            amount,
            "{column}: {board:#}"
        );
    }
    for queue in ["approvals", "exceptions"] {
        let open = list(
            app,
            ADMIN_KEY,
            &format!("/v1/work_items?customer_id={}&queue={queue}", acme.id),
        )
        .await
        .iter()
        .filter(|item| item["status"] != "done")
        .count();
        assert_eq!(board["queues"][queue]["open"], open, "{queue}: {board:#}");
    }
}

async fn run(steps: Vec<Step>) {
    // The checks read every account, movement and work item after each step: more requests a
    // second than a key's limit, which is not what this test is about.
    let app = spawn_app_with(|config| config.rate_limit = 1_000_000).await;
    let acme = app.create_customer().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await
        .key;
    let opened = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "currency": "CLP"}),
        )
        .await;
    let account = opened.json()["id"].as_str().unwrap().to_owned();
    let supplier = app.create_customer().await;
    let supplier_account = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": supplier.id, "currency": "CLP"}),
        )
        .await
        .id();
    let funded = app
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": 150_000, "direction": "credit", "reason": "opening balance"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    let mut world = World {
        app: Some(app),
        acme,
        approver,
        supplier_account,
        created: 0,
    };
    for step in &steps {
        apply(&mut world, step).await;
        check_invariants(world.app.as_ref().unwrap()).await;
        check_against_operations(&world, 150_000).await;
        check_board(world.app.as_ref().unwrap(), &world.acme).await;
    }
    // At the end everything settles, and the invariants still hold.
    let app = world.app.as_ref().unwrap();
    app.settle(Duration::minutes(30), 6).await;
    check_invariants(app).await;
    check_against_operations(&world, 150_000).await;
    check_board(app, &world.acme).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn the_ledger_balances_under_any_sequence_of_outcomes_duplicates_and_crashes(
        steps in prop::collection::vec(step(), 4..14)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(steps));
    }
}
