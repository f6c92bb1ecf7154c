//! Holds on one hot account, and what a funded payout's create costs on DynamoDB.

use crate::local_server;
use futures_util::future::join_all;
use ops_tests::{payout, Api, ADMIN_KEY};
use serde_json::json;
use std::time::Instant;

/// Opens a CLP account for a new customer of `api` and funds it.
async fn funded_customer(api: &Api, amount: i64) -> (ops_tests::Customer, String) {
    let customer = api.create_customer().await;
    let account = api
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await
        .id();
    let funded = api
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": amount, "direction": "credit", "reason": "bench"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    (customer, account)
}

/// Auto-approved one-item payouts from `clients` concurrent clients, all drawing on one
/// account: each create places a hold on that account in its approval's changeset.
/// Returns holds per second, after checking none was lost or doubled.
async fn hot_account_round(api: &Api, clients: usize, per_client: usize) -> f64 {
    let (customer, account) = funded_customer(api, 1_000_000_000).await;
    let started = Instant::now();
    join_all((0..clients).map(|_| async {
        for _ in 0..per_client {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
                .await;
            assert_eq!(made.json()["status"], "approved", "{}", made.json());
        }
    }))
    .await;
    let elapsed = started.elapsed();
    let balances = api.get(&format!("/v1/accounts/{account}"), &customer.key).await.json()["balances"].clone();
    let holds = (clients * per_client) as i64;
    assert_eq!(balances["pending_debits"], holds * 1_000, "every hold once: {balances}");
    holds as f64 / elapsed.as_secs_f64()
}

/// Holds one account sustains locally (SQLite) at 8 and 64 concurrent clients, and the
/// DynamoDB requests and write units a funded payout's create takes beside an unfunded one.
pub(crate) async fn ledger_holds(emulator: bool) {
    println!();
    println!("### Hot account: holds on one account (local mode, SQLite, pipeline off)");
    println!();
    println!("| concurrent clients | holds | holds per second |");
    println!("|---:|---:|---:|");
    let (_server, api, _data) = local_server(false).await;
    for (clients, per_client) in [(8, 50), (64, 8)] {
        let rate = hot_account_round(&api, clients, per_client).await;
        println!("| {clients} | {} | {rate:.0} |", clients * per_client);
    }
    if emulator {
        ledger_requests().await;
    }
}

/// DynamoDB requests and write units of one auto-approved payout create, funded from an
/// account (its hold, the hold's audit entry and event, and the balance update ride in the
/// approval's transaction) and unfunded.
async fn ledger_requests() {
    use ops_domain::access::Environment;
    use std::sync::Arc;
    let config = ops_infra::aws::load_config().await;
    let stack = format!("bench-ledger-{}", std::process::id());
    let mut settings = ops_runtime::provision::provision(&config, &stack, Environment::Test, None)
        .await
        .expect("stack");
    // Back-to-back creates from one key: the request limit would refuse them.
    settings.rate_limit = 0;
    let clock = Arc::new(ops_tests::TestClock::default());
    let (service, parts) = settings.service_with(&config, clock).await.expect("service");
    parts.store.meter().count_index_entries_exactly();
    let service = Arc::new(service);
    service.bootstrap_admin_key(ADMIN_KEY).await.unwrap();
    let api = crate::serve(service).await;
    let (funded, _) = funded_customer(&api, 1_000_000_000).await;
    let unfunded = api.create_customer().await;
    println!();
    println!("### Hot account on DynamoDB: one auto-approved one-item payout create (emulator, rate limit off)");
    println!();
    println!("| payout | DynamoDB requests | write units |");
    println!("|---|---:|---:|");
    for (label, customer) in [
        ("drawing on an account (hold placed)", &funded),
        ("no account", &unfunded),
    ] {
        // The first create of each opens nothing new; measure the next ten.
        api.post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
            .await;
        let (requests, units) = (parts.store.meter().requests(), parts.store.meter().write_units());
        for _ in 0..10 {
            let made = api
                .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
                .await;
            assert_eq!(made.json()["status"], "approved", "{}", made.json());
        }
        println!(
            "| {label} | {:.1} | {:.1} |",
            (parts.store.meter().requests() - requests) as f64 / 10.0,
            (parts.store.meter().write_units() - units) as f64 / 10.0
        );
    }
}
