//! The desk on DynamoDB: work items opened by the table's stream, claimed by racing operators
//! one conditional write each.

use crate::spawn_aws_app;
use ops_tests::payout;
use serde_json::json;
use std::collections::HashSet;
use time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stream_opens_approvals_items_and_concurrent_claimers_never_share_one() {
    let app = spawn_aws_app().await;
    let acme = app.create_customer().await;
    let mut waiting = vec![];
    for amount in [1_000, 2_000, 3_000] {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[amount]))
            .await;
        assert_eq!(created.json()["status"], "pending_approval", "{}", created.json());
        waiting.push(created.id());
    }
    app.settle(Duration::seconds(1), 1).await;
    let open = app
        .get("/v1/work_items?queue=approvals&status=open", &acme.key)
        .await
        .json();
    let subjects: Vec<&str> = open["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["subject"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, waiting, "oldest due first");

    let claimers = futures_util::future::join_all(
        (0..8).map(|_| app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"])),
    )
    .await;
    let claims = futures_util::future::join_all(
        claimers
            .iter()
            .map(|c| app.post("/v1/work_items/claim", &c.key, json!({"queue": "approvals"}))),
    )
    .await;
    let won: Vec<String> = claims
        .iter()
        .filter(|c| c.status == 200)
        .map(|c| c.json()["subject"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        won.iter().collect::<HashSet<_>>(),
        waiting.iter().collect::<HashSet<_>>(),
        "{:?}",
        claims.iter().map(|c| c.json()).collect::<Vec<_>>()
    );
    assert_eq!(won.len(), 3, "each item claimed once");

    // Deciding closes the item through the stream.
    let decided = app
        .post(
            &format!("/v1/operations/{}/approve", waiting[0]),
            &claimers[0].key,
            json!({}),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.json());
    app.settle(Duration::seconds(1), 1).await;
    let done = app
        .get("/v1/work_items?queue=approvals&status=done", &acme.key)
        .await
        .json();
    assert_eq!(done["data"][0]["subject"]["id"], waiting[0].as_str(), "{done}");

    // The board kept count on DynamoDB as the changes happened.
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_i64(),
            board["queues"]["approvals"]["open"].as_i64()
        ),
        (Some(2), Some(5_000), Some(2)),
        "{board:#}"
    );
    let platform = app.get("/v1/board", ops_tests::ADMIN_KEY).await.json();
    assert!(
        platform["pending_approval"]["count"].as_i64().unwrap() >= 2,
        "{platform:#}"
    );
}
