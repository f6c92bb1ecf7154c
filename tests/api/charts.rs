//! The board's charts: transactions per hour by status and rail, pending approvals by the share
//! of their SLA used, exceptions opened and closed per day; a customer's own, or the platform's.

use ops_tests::{payout, spawn_app_with, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use time::Duration;

/// The charts' transactions per hour, summed over the window: (direction, rail, status) → count.
fn transactions(charts: &Value) -> BTreeMap<(String, String, String), i64> {
    let per_hour = &charts["transactions_per_hour"];
    assert_eq!(per_hour["hours"].as_array().unwrap().len(), 24, "{charts:#}");
    per_hour["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| {
            let text = |name: &str| line[name].as_str().unwrap().to_owned();
            let counts = line["counts"].as_array().unwrap();
            assert_eq!(counts.len(), 24);
            let total = counts.iter().map(|c| c.as_i64().unwrap()).sum();
            ((text("direction"), text("rail"), text("status")), total)
        })
        .collect()
}

fn summed(charts: &Value, list: &str) -> i64 {
    let counts = charts["exceptions_per_day"][list].as_array().unwrap();
    assert_eq!(counts.len(), 14, "{charts:#}");
    counts.iter().map(|c| c.as_i64().unwrap()).sum()
}

async fn charts(app: &TestApp, key: &str) -> Value {
    let reply = app.get("/v1/charts", key).await;
    assert_eq!(reply.status, 200, "{}", reply.json());
    let charts = reply.json();
    assert_eq!(charts["object"], "charts");
    charts
}

#[tokio::test]
async fn charts_count_each_transaction_change_and_each_exception_once() {
    let app = spawn_app_with(|_| {}).await;
    let acme = app.create_customer().await;
    // Two payouts the rail takes, one it refuses, one it loses (an exception until resolved).
    let mut operations = vec![];
    for amounts in [&[1_000, 2_000, 3_001][..], &[20_008]] {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "auto", amounts))
            .await;
        operations.push(created.id());
    }
    app.settle(Duration::seconds(30), 20).await;
    let lost = app
        .get("/v1/transactions?status=needs_attention", &acme.key)
        .await
        .json();
    let lost = lost["data"][0]["id"]
        .as_str()
        .expect("a transaction needs an operator")
        .to_owned();
    let resolved = app
        .post(
            &format!("/v1/transactions/{lost}/resolve"),
            ADMIN_KEY,
            json!({"status": "failed", "reason": "the rail has no record"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json());
    app.settle(Duration::seconds(30), 3).await;

    // Each transaction's history is what the chart counts: one count per status it reached,
    // a submission aside (every transaction passes through it).
    let mut reached: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for operation in &operations {
        let history = app
            .get(&format!("/v1/operations/{operation}/history"), &acme.key)
            .await
            .json();
        for entry in history["data"].as_array().unwrap() {
            if entry["entity_type"] == "transaction" && !entry["to"].is_null() && entry["to"] != "submitted" {
                let key = (
                    "credit".into(),
                    "psp-local:sandbox".into(),
                    entry["to"].as_str().unwrap().into(),
                );
                *reached.entry(key).or_default() += 1;
            }
        }
    }
    let status = |status: &str| ("credit".to_owned(), "psp-local:sandbox".to_owned(), status.to_owned());
    assert_eq!(reached.get(&status("pending")), Some(&4), "{reached:?}");
    assert_eq!(reached.get(&status("failed")), Some(&2), "{reached:?}");
    let theirs = charts(&app, &acme.key).await;
    assert_eq!(transactions(&theirs), reached, "{theirs:#}");
    // The lost payout's operation and transaction each opened an exception, and each closed.
    assert_eq!(
        (summed(&theirs, "opened"), summed(&theirs, "closed")),
        (2, 2),
        "{theirs:#}"
    );

    // Counted once: the pipeline running again adds nothing.
    app.settle(Duration::minutes(1), 3).await;
    assert_eq!(transactions(&charts(&app, &acme.key).await), reached);

    // The platform's charts add every customer's; a customer sees only its own.
    let other = app.create_customer().await;
    app.post("/v1/operations", &other.key, payout(&other.id, "auto", &[5_000]))
        .await;
    app.settle(Duration::seconds(30), 10).await;
    let platform = transactions(&charts(&app, ADMIN_KEY).await);
    assert_eq!(platform[&status("pending")], 5, "{platform:?}");
    assert_eq!(transactions(&charts(&app, &acme.key).await), reached);
    let refused = app
        .get(&format!("/v1/charts?customer_id={}", other.id), &acme.key)
        .await;
    assert_eq!(refused.error(404)["param"], "customer_id");
    assert_eq!(
        app.get("/v1/charts?customer_id=op_1", &acme.key).await.error(400)["code"],
        "invalid_id"
    );

    // An hour past the window's end, it is out of the chart.
    app.clock.advance(Duration::hours(25));
    let later = charts(&app, &acme.key).await;
    assert!(transactions(&later).is_empty(), "{later:#}");
    assert_eq!(summed(&later, "opened"), 2, "fourteen days of exceptions");
}

#[tokio::test]
async fn pending_approvals_are_charted_by_the_share_of_their_sla_used() {
    let app = spawn_app_with(|config| config.approvals_sla_minutes = 100).await;
    let acme = app.create_customer().await;
    // Waiting 110, 85, 60 and 25 minutes of a 100-minute SLA when the chart is read.
    for (amount, wait) in [(1_000, 25), (2_000, 25), (3_000, 35), (4_000, 25)] {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[amount]))
            .await;
        assert_eq!(created.json()["status"], "pending_approval");
        app.drain().await;
        app.clock.advance(Duration::minutes(wait));
    }
    let ageing = &charts(&app, &acme.key).await["approvals_ageing"];
    assert_eq!(
        ageing,
        &json!({"sla_minutes": 100, "open": 4, "under_half": 1, "half_to_80": 1, "over_80": 1,
                "past_due": 1, "capped": false}),
    );
    let other = app.create_customer().await;
    assert_eq!(charts(&app, &other.key).await["approvals_ageing"]["open"], 0);
    assert_eq!(charts(&app, ADMIN_KEY).await["approvals_ageing"]["open"], 4);
}
