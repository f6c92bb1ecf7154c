//! Accounts and movements on DynamoDB: holds placed with the approval in one
//! `TransactWriteItems`, settled by the stream's outcomes, never overdrawing a hot account.

use crate::{spawn_aws_app, AwsApp};
use ops_tests::{payout, Customer, ADMIN_KEY};
use serde_json::json;
use time::Duration;

async fn funded_account(app: &AwsApp, customer: &Customer, amount: i64) -> String {
    let opened = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.json());
    let account = opened.id();
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
