//! Reversals: a completed collection refunded by a payout of its own, through its workflow,
//! linked both ways, partial by item or amount, never more than moved.

use crate::{Api, Customer};
use futures_util::future::join_all;
use ops_runtime::driver::Driver;
use serde_json::{json, Value};

fn collection(customer: &Customer, amounts: &[i64]) -> Value {
    let items: Vec<Value> = amounts
        .iter()
        .enumerate()
        .map(|(i, amount)| {
            json!({"beneficiary": {"id_type": "RUT", "id": format!("1111111-{i}")},
                   "destination": {"rail": "psp-local:sandbox", "account": format!("00077777{i}")},
                   "amount": amount, "reference": format!("invoice {i}")})
        })
        .collect();
    json!({"customer_id": customer.id, "type": "collection", "currency": "CLP", "workflow": "auto", "items": items})
}

async fn reverse(app: &Api, customer: &Customer, id: &str, body: Value) -> crate::Reply {
    app.post(&format!("/v1/operations/{id}/reversal"), &customer.key, body)
        .await
}

async fn posted(app: &Api, customer: &Customer, account: &str) -> i64 {
    let read = app.get(&format!("/v1/accounts/{account}"), &customer.key).await.json();
    read["balances"]["posted"].as_i64().unwrap_or_else(|| panic!("{read}"))
}

pub async fn a_collection_is_reversed_by_item_or_amount_never_past_what_moved(
    app: &Api,
    driver: &Driver,
    clock: &crate::TestClock,
) {
    let settle = || crate::settle(driver, clock, time::Duration::seconds(30), 6);
    let customer = app.create_customer().await;
    let account = app.open_account(&customer, "CLP", 0).await;
    let collected = app
        .post(
            "/v1/operations",
            &customer.key,
            collection(&customer, &[30_000, 20_000]),
        )
        .await;
    assert_eq!(collected.status, 201, "{}", collected.json());
    let id = collected.id();
    let items: Vec<String> = collected.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let early = reverse(app, &customer, &id, json!({"reason": "refund"})).await;
    assert_eq!(early.error(409)["code"], "operation_not_reversible");
    settle().await;
    let completed = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(completed["status"], "completed", "{completed}");
    assert_eq!(posted(app, &customer, &account).await, 50_000);

    // A payout (of a customer without an account) cannot be recalled.
    let other = app.create_customer().await;
    let payout = app
        .post("/v1/operations", &other.key, crate::payout(&other.id, "auto", &[1_000]))
        .await;
    settle().await;
    let recall = reverse(app, &other, &payout.id(), json!({"reason": "sent by mistake"})).await;
    assert_eq!(recall.error(409)["code"], "recall_not_supported");
    let no_reason = reverse(app, &customer, &id, json!({})).await;
    assert_eq!(no_reason.error(400)["param"], "reason");

    // Part of the first item: a payout back to its payer, from the account it credited.
    let first = reverse(
        app,
        &customer,
        &id,
        json!({"items": [{"item_id": items[0], "amount": 10_000}], "reason": "refund"}),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.json());
    let refund = first.json();
    assert_eq!(
        (
            &refund["type"],
            &refund["source_account_id"],
            &refund["items"][0]["destination"]
        ),
        (&json!("payout"), &json!(account), &completed["items"][0]["destination"]),
        "{refund}"
    );
    assert_eq!(
        refund["reversal_of"],
        json!({"operation_id": id, "items": [{"item_id": items[0], "amount": 10_000}], "reason": "refund"})
    );
    let linked = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(linked["reversals"], json!([refund["id"]]));

    // 20,000 of the first item are left: 25,000 of it is refused, naming where.
    let over = reverse(
        app,
        &customer,
        &id,
        json!({"items": [{"item_id": items[0], "amount": 25_000}], "reason": "refund"}),
    )
    .await;
    assert_eq!(
        (&over.error(400)["param"], &over.error(400)["code"]),
        (&json!("items[0].amount"), &json!("reversal_exceeds_moved"))
    );
    let unknown = reverse(
        app,
        &customer,
        &id,
        json!({"items": [{"item_id": "itm_nope"}], "reason": "refund"}),
    )
    .await;
    assert_eq!(unknown.error(400)["param"], "items[0].item_id");

    // An amount is taken from the items in order: 20,000 of the first, 15,000 of the second.
    let spread = reverse(
        app,
        &customer,
        &id,
        json!({"amount": 35_000, "reason": "contract ended"}),
    )
    .await;
    assert_eq!(spread.status, 201, "{}", spread.json());
    assert_eq!(
        spread.json()["reversal_of"]["items"],
        json!([{"item_id": items[0], "amount": 20_000}, {"item_id": items[1], "amount": 15_000}])
    );
    settle().await;
    assert_eq!(
        posted(app, &customer, &account).await,
        5_000,
        "50,000 in, 45,000 sent back"
    );

    // A reversal through a workflow that waits, then rejected: what it asked is left again.
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let waits = reverse(
        app,
        &customer,
        &id,
        json!({"amount": 5_000, "reason": "rest", "workflow": "two_step"}),
    )
    .await;
    assert_eq!(waits.json()["status"], "pending_approval", "{}", waits.json());
    let meanwhile = reverse(app, &customer, &id, json!({"amount": 1, "reason": "rest"})).await;
    assert_eq!(
        meanwhile.error(400)["code"],
        "reversal_exceeds_moved",
        "a pending reversal counts"
    );
    let rejected = app
        .post(
            &format!("/v1/operations/{}/reject", waits.id()),
            &approver.key,
            json!({"reason": "wrong amount"}),
        )
        .await;
    assert_eq!(rejected.json()["status"], "rejected", "{}", rejected.json());
    // The last 5,000, asked twice at once: one reversal is made, the other refused.
    let racing =
        join_all((0..2).map(|_| reverse(app, &customer, &id, json!({"amount": 5_000, "reason": "rest"})))).await;
    let made = racing.iter().filter(|r| r.status == 201).count();
    assert_eq!(made, 1, "{:?}", racing.iter().map(|r| r.json()).collect::<Vec<_>>());
    let refused = racing.iter().find(|r| r.status != 201).unwrap();
    assert_eq!(refused.error(400)["code"], "reversal_exceeds_moved");
    let nothing_left = reverse(app, &customer, &id, json!({"reason": "again"})).await;
    assert_eq!(nothing_left.error(400)["code"], "reversal_exceeds_moved");
    let history = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(history["reversals"].as_array().unwrap().len(), 4, "{history}");
}
