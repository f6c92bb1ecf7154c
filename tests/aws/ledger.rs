//! Accounts and movements on DynamoDB: holds placed with the approval in one
//! `TransactWriteItems`, settled by the stream's outcomes, never overdrawing a hot account.

use crate::{spawn_aws_app, AwsApp};
use ops_domain::ledger::{MAX_FUNDED_ITEMS, MAX_TRANSFER_ITEMS};
use ops_tests::{payout, Customer, ADMIN_KEY};
use serde_json::{json, Value};
use time::Duration;

async fn open_account(app: &AwsApp, customer: &Customer) -> String {
    let opened = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.json());
    opened.id()
}

async fn funded_account(app: &AwsApp, customer: &Customer, amount: i64) -> String {
    let account = open_account(app, customer).await;
    let funded = app
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": amount, "direction": "credit", "reason": "opening balance"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    account
}

async fn balances(app: &AwsApp, key: &str, account: &str) -> (i64, i64, i64) {
    let b = app.get(&format!("/v1/accounts/{account}"), key).await.json()["balances"].clone();
    (
        b["posted"].as_i64().unwrap(),
        b["pending"].as_i64().unwrap(),
        b["available"].as_i64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_funded_payout_holds_posts_and_voids_on_dynamodb_and_never_pays_money_that_is_not_there() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let account = funded_account(&app, &acme, 300_000).await;

    let created = app
        .post(
            "/v1/operations",
            &acme.key,
            payout(&acme.id, "auto", &[100_000, 100_002]),
        )
        .await;
    assert_eq!(created.json()["status"], "approved", "{}", created.json());
    assert_eq!(balances(&app, &acme.key, &account).await, (300_000, 99_998, 99_998));
    app.settle(Duration::seconds(30), 8).await;
    // The confirmed item posted, the failed one's hold was voided.
    assert_eq!(balances(&app, &acme.key, &account).await, (200_000, 200_000, 200_000));

    let too_much = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[200_001]))
        .await
        .json();
    assert_eq!(
        (too_much["status"].as_str(), too_much["cause"]["code"].as_str()),
        (Some("failed"), Some("insufficient_funds"))
    );
    app.settle(Duration::seconds(30), 2).await;
    let transactions = app
        .get(
            &format!("/v1/transactions?operation_id={}", too_much["id"].as_str().unwrap()),
            &acme.key,
        )
        .await
        .json();
    assert_eq!(
        transactions["data"].as_array().unwrap().len(),
        0,
        "no transaction was made"
    );

    // Eight approvals race for funds that cover three.
    let hot = app.create_customer().await;
    let hot_account = funded_account(&app, &hot, 3_500).await;
    let mut paths = vec![];
    for _ in 0..8 {
        let id = app
            .post("/v1/operations", &hot.key, payout(&hot.id, "two_step", &[1_000]))
            .await
            .id();
        paths.push(format!("/v1/operations/{id}/approve"));
    }
    let approvers = futures_util::future::join_all(
        (0..8).map(|_| app.add_member(&hot, &["approver"], &["operations:read", "operations:approve"])),
    )
    .await;
    let decisions = futures_util::future::join_all(
        paths
            .iter()
            .zip(&approvers)
            .map(|(path, approver)| app.post(path, &approver.key, json!({}))),
    )
    .await;
    let approved = decisions.iter().filter(|d| d.json()["status"] == "approved").count();
    let refused = decisions
        .iter()
        .filter(|d| d.json()["cause"]["code"] == "insufficient_funds")
        .count();
    assert_eq!(
        (approved, refused),
        (3, 5),
        "{:?}",
        decisions.iter().map(|d| d.json()).collect::<Vec<_>>()
    );
    assert_eq!(balances(&app, &hot.key, &hot_account).await, (3_500, 500, 500));
}

fn transfer(customer: &Customer, workflow: &str, destinations: &[String]) -> Value {
    let items: Vec<Value> = destinations
        .iter()
        .map(|account| json!({"destination": {"account_id": account}, "amount": 100}))
        .collect();
    json!({"customer_id": customer.id, "type": "transfer", "currency": "CLP",
           "workflow": workflow, "items": items})
}

/// The largest operations an account takes fit one `TransactWriteItems` (100 writes), whether
/// approved on create or by an approver; one item more is a 400 before anything is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_largest_funded_operations_commit_in_one_dynamodb_transaction() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let source = funded_account(&app, &acme, 1_000_000).await;
    // Every destination a different account, so every item changes its own balance.
    let mut destinations = vec![];
    for _ in 0..2 * MAX_TRANSFER_ITEMS {
        let supplier = app.create_customer().await;
        destinations.push(open_account(&app, &supplier).await);
    }
    let (first, second) = destinations.split_at(MAX_TRANSFER_ITEMS);

    let created = app
        .post("/v1/operations", &acme.key, transfer(&acme, "auto", first))
        .await;
    assert_eq!(
        (created.status.as_u16(), created.json()["status"].as_str()),
        (201, Some("completed")),
        "{}",
        created.json()
    );
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let waiting = app
        .post("/v1/operations", &acme.key, transfer(&acme, "two_step", second))
        .await
        .id();
    let approved = app
        .post(&format!("/v1/operations/{waiting}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(approved.json()["status"], "completed", "{}", approved.json());
    for account in &destinations {
        assert_eq!(balances(&app, ADMIN_KEY, account).await.0, 100, "{account}");
    }
    let spent = 100 * 2 * MAX_TRANSFER_ITEMS as i64;
    assert_eq!(balances(&app, &acme.key, &source).await.0, 1_000_000 - spent);

    let mut one_more = destinations[..MAX_TRANSFER_ITEMS].to_vec();
    one_more.push(destinations[MAX_TRANSFER_ITEMS].clone());
    let refused = app
        .post("/v1/operations", &acme.key, transfer(&acme, "auto", &one_more))
        .await;
    assert_eq!(refused.error(400)["code"], "too_many_items_for_account");

    let largest = vec![1_000; MAX_FUNDED_ITEMS];
    let held = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &largest))
        .await;
    assert_eq!(held.json()["status"], "approved", "{}", held.json());
    let held = 1_000 * MAX_FUNDED_ITEMS as i64;
    assert_eq!(
        balances(&app, &acme.key, &source).await,
        (1_000_000 - spent, 1_000_000 - spent - held, 1_000_000 - spent - held)
    );
    let too_many = payout(&acme.id, "auto", &[1_000; MAX_FUNDED_ITEMS + 1]);
    let refused = app.post("/v1/operations", &acme.key, too_many).await;
    assert_eq!(refused.error(400)["code"], "too_many_items_for_account");
}

#[tokio::test]
async fn a_hold_that_expires_before_the_rail_window_fails_its_payout() {
    let app = crate::spawn_aws_app().await;
    ops_tests::scenarios::a_hold_that_expires_before_the_rail_window_fails_its_payout(
        &app.api,
        &app.driver,
        &app.clock,
    )
    .await;
}

#[tokio::test]
async fn a_collection_is_reversed_by_item_or_amount_never_past_what_moved() {
    let app = crate::spawn_aws_app().await;
    ops_tests::scenarios::a_collection_is_reversed_by_item_or_amount_never_past_what_moved(
        &app.api,
        &app.driver,
        &app.clock,
    )
    .await;
}
