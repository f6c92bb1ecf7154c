//! Accounts and movements: a funded account pays out through holds that post, void and
//! reverse with the rail's outcome; money that is not there never reaches a rail.

use ops_domain::ledger::MAX_TRANSFER_ITEMS;
use ops_tests::{payout, spawn_app, Customer, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use time::Duration;

async fn open_account(app: &TestApp, customer: &Customer, currency: &str) -> String {
    let opened = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": currency}),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.json());
    let account = opened.json();
    assert_eq!(
        (account["object"].as_str(), account["kind"].as_str()),
        (Some("account"), Some("customer"))
    );
    account["id"].as_str().unwrap().to_owned()
}

async fn fund(app: &TestApp, account: &str, amount: i64) {
    let funded = app
        .post(
            &format!("/v1/accounts/{account}/adjustments"),
            ADMIN_KEY,
            json!({"amount": amount, "direction": "credit", "reason": "wire received"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    assert_eq!(funded.json()["status"], "posted");
}

/// `(posted, pending, available)` of an account.
async fn balances(app: &TestApp, key: &str, account: &str) -> (i64, i64, i64) {
    let reply = app.get(&format!("/v1/accounts/{account}"), key).await;
    assert_eq!(reply.status, 200, "{}", reply.json());
    let b = &reply.json()["balances"];
    (
        b["posted"].as_i64().unwrap(),
        b["pending"].as_i64().unwrap(),
        b["available"].as_i64().unwrap(),
    )
}

/// The account's movements (up to 100), newest first.
async fn movements_of(app: &TestApp, key: &str, account: &str) -> Vec<Value> {
    let reply = app
        .get(&format!("/v1/accounts/{account}/movements?limit=100"), key)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.json());
    reply.json()["data"].as_array().unwrap().clone()
}

/// Every CLP account's posted and pending balances sum to zero (the ledger is double entry).
async fn assert_zero_sum(app: &TestApp) {
    let accounts = app.get("/v1/accounts?currency=CLP&limit=100", ADMIN_KEY).await.json()["data"]
        .as_array()
        .unwrap()
        .clone();
    let sum = |field: &str| {
        accounts
            .iter()
            .map(|a| a["balances"][field].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!((sum("posted"), sum("pending")), (0, 0), "{accounts:#?}");
}

async fn transactions_of(app: &TestApp, key: &str, operation: &Value) -> Vec<Value> {
    let id = operation["id"].as_str().unwrap();
    let reply = app.get(&format!("/v1/transactions?operation_id={id}"), key).await;
    assert_eq!(reply.status, 200, "{}", reply.json());
    reply.json()["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_funded_payout_holds_on_approval_then_posts_voids_and_reverses_with_the_rail() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    assert_eq!(balances(&app, &acme.key, &account).await, (0, 0, 0));
    fund(&app, &account, 1_000_000).await;
    assert_eq!(
        balances(&app, &acme.key, &account).await,
        (1_000_000, 1_000_000, 1_000_000)
    );

    // Confirmed, failed after submit (…02), confirmed then returned (…06).
    let created = app
        .post(
            "/v1/operations",
            &acme.key,
            payout(&acme.id, "auto", &[100_000, 200_002, 300_006]),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let operation = created.json();
    assert_eq!(operation["status"], "approved");
    assert_eq!(
        operation["source_account_id"],
        account.as_str(),
        "the customer's CLP account by default"
    );
    assert_eq!(
        balances(&app, &acme.key, &account).await,
        (1_000_000, 400_000 - 8, 400_000 - 8),
        "approval held the whole total"
    );
    assert_zero_sum(&app).await;

    app.settle(Duration::minutes(2), 30).await;
    let statuses: Vec<String> = transactions_of(&app, &acme.key, &operation)
        .await
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        statuses.contains(&"returned".to_string()) && statuses.contains(&"failed".to_string()),
        "{statuses:?}"
    );
    // Only the confirmed 100,000 left the account: the failure voided its hold, the return
    // posted the reverse.
    assert_eq!(balances(&app, &acme.key, &account).await, (900_000, 900_000, 900_000));
    assert_zero_sum(&app).await;

    let movements = movements_of(&app, &acme.key, &account).await;
    let count = |status: &str| movements.iter().filter(|m| m["status"] == status).count();
    assert_eq!(
        (count("posted"), count("voided"), count("pending")),
        (4, 1, 0),
        "{movements:#?}"
    );
    for movement in &movements {
        let entries = movement["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0]["amount"], entries[1]["amount"], "debits equal credits");
        assert_eq!(
            (entries[0]["direction"].as_str(), entries[1]["direction"].as_str()),
            (Some("debit"), Some("credit"))
        );
        assert!(movement["cause"]["code"].is_string());
    }
    // The returned item's hold was posted, then reversed by a movement named after it.
    let returned_item = operation["items"][2]["id"].as_str().unwrap();
    let reversal_id = format!("mov_{}r", returned_item.trim_start_matches("itm_"));
    let reversal = movements
        .iter()
        .find(|m| m["id"] == reversal_id.as_str())
        .unwrap_or_else(|| panic!("the return's reversal {reversal_id} is listed: {movements:#?}"));
    assert_eq!(reversal["status"], "posted");
    assert_eq!(reversal["entries"][0]["amount"], 300_006);
    assert_eq!(
        reversal["entries"][1]["account_id"],
        account.as_str(),
        "the reversal credits the customer"
    );

    // Each movement change is an event.
    let events = app.get("/v1/events?type=movement.voided", &acme.key).await.json();
    assert_eq!(events["data"].as_array().unwrap().len(), 1, "{events}");
}

#[tokio::test]
async fn money_that_is_not_there_never_reaches_a_rail() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    fund(&app, &account, 50_000).await;
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[30_000, 30_000]))
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let operation = created.json();
    assert_eq!(operation["status"], "failed");
    assert_eq!(operation["cause"]["code"], "insufficient_funds");
    app.settle(Duration::minutes(1), 5).await;
    assert!(
        transactions_of(&app, &acme.key, &operation).await.is_empty(),
        "no transaction is made"
    );
    assert!(app.sandbox().await.is_empty(), "the rail never heard of it");
    assert_eq!(balances(&app, &acme.key, &account).await, (50_000, 50_000, 50_000));
    let history = app
        .get(
            &format!("/v1/operations/{}/history", operation["id"].as_str().unwrap()),
            &acme.key,
        )
        .await
        .json();
    let last = history["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["from"].as_str(), last["to"].as_str()),
        (Some("approved"), Some("failed"))
    );
}

#[tokio::test]
async fn two_approvals_racing_for_the_last_funds_have_exactly_one_winner() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    fund(&app, &account, 1_000).await;
    let mut pending = vec![];
    for _ in 0..4 {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[600]))
            .await;
        assert_eq!(created.json()["status"], "pending_approval");
        pending.push(created.json()["id"].as_str().unwrap().to_owned());
    }
    let approvers = futures_util::future::join_all(
        (0..4).map(|_| app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"])),
    )
    .await;
    let paths: Vec<String> = pending
        .iter()
        .map(|id| format!("/v1/operations/{id}/approve"))
        .collect();
    let decisions = futures_util::future::join_all(
        paths
            .iter()
            .zip(&approvers)
            .map(|(path, approver)| app.post(path, &approver.key, json!({}))),
    )
    .await;
    let mut outcomes: Vec<String> = decisions
        .iter()
        .map(|d| {
            assert_eq!(d.status, 200, "{}", d.json());
            format!(
                "{}:{}",
                d.json()["status"].as_str().unwrap(),
                d.json()["cause"]["code"].as_str().unwrap()
            )
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [
            "approved:approved_by_approver",
            "failed:insufficient_funds",
            "failed:insufficient_funds",
            "failed:insufficient_funds"
        ]
    );
    assert_eq!(balances(&app, &acme.key, &account).await, (1_000, 400, 400));
}

#[tokio::test]
async fn cancelling_an_approved_payout_releases_its_holds() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    fund(&app, &account, 10_000).await;
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[4_000, 5_000]))
        .await;
    let id = created.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(balances(&app, &acme.key, &account).await.2, 1_000);
    let cancelled = app
        .post(&format!("/v1/operations/{id}/cancel"), &acme.key, json!({}))
        .await;
    assert_eq!(cancelled.json()["status"], "cancelled", "{}", cancelled.json());
    assert_eq!(balances(&app, &acme.key, &account).await, (10_000, 10_000, 10_000));
    assert_zero_sum(&app).await;
}

#[tokio::test]
async fn accounts_refuse_bad_input_precisely_and_write_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let other = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    let others = open_account(&app, &other, "CLP").await;
    let usd = open_account(&app, &acme, "USD").await;
    fund(&app, &account, 1_000).await;

    let again = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "currency": "CLP"}),
        )
        .await;
    let refused = again.error(409);
    assert_eq!(
        (refused["code"].as_str(), refused["param"].as_str()),
        (Some("account_exists"), Some("currency"))
    );
    let by_customer = app
        .post(
            "/v1/accounts",
            &acme.key,
            json!({"customer_id": acme.id, "currency": "EUR"}),
        )
        .await;
    by_customer.error(403);
    let bad_currency = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "currency": "XXX"}),
        )
        .await;
    assert_eq!(bad_currency.error(400)["param"], "currency");
    let blank_name = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": acme.id, "currency": "EUR", "name": " "}),
        )
        .await;
    assert_eq!(blank_name.error(400)["param"], "name");

    let with_source = |source: &str| {
        let mut body = payout(&acme.id, "auto", &[100]);
        body["source_account_id"] = json!(source);
        body
    };
    let malformed = app.post("/v1/operations", &acme.key, with_source("op_123")).await;
    assert_eq!(malformed.error(400)["param"], "source_account_id");
    let foreign = app.post("/v1/operations", &acme.key, with_source(&others)).await;
    assert_eq!(foreign.error(404)["param"], "source_account_id");
    let mismatch = app.post("/v1/operations", &acme.key, with_source(&usd)).await;
    assert_eq!(
        (
            mismatch.error(400)["param"].as_str(),
            mismatch.error(400)["code"].as_str()
        ),
        (Some("source_account_id"), Some("currency_mismatch"))
    );
    assert_eq!(
        app.get("/v1/operations", &acme.key).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        0
    );

    let adjust =
        |amount: Value, direction: &str| json!({"amount": amount, "direction": direction, "reason": "correction"});
    let path = format!("/v1/accounts/{account}/adjustments");
    for (body, param) in [
        (adjust(json!(0), "credit"), "amount"),
        (adjust(json!(1_000_000_000_000i64), "credit"), "amount"),
        (adjust(json!(5), "sideways"), "direction"),
        (json!({"amount": 5, "direction": "credit"}), "reason"),
    ] {
        let refused = app.post(&path, ADMIN_KEY, body.clone()).await;
        assert_eq!(refused.error(400)["param"], param, "{body}");
    }
    let overdraw = app.post(&path, ADMIN_KEY, adjust(json!(1_001), "debit")).await;
    assert_eq!(overdraw.error(409)["code"], "insufficient_funds");
    let by_customer = app.post(&path, &acme.key, adjust(json!(5), "credit")).await;
    by_customer.error(403);
    assert_eq!(balances(&app, &acme.key, &account).await, (1_000, 1_000, 1_000));

    // Another customer's account does not exist for this one.
    app.get(&format!("/v1/accounts/{others}"), &acme.key).await.error(404);
    app.get(&format!("/v1/accounts/{others}/movements"), &acme.key)
        .await
        .error(404);
    let listed = app
        .get(&format!("/v1/accounts?customer_id={}", other.id), &acme.key)
        .await
        .json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 0);
    let own = app.get("/v1/accounts", &acme.key).await.json();
    assert_eq!(
        own["data"].as_array().unwrap().len(),
        2,
        "its CLP and USD accounts, not the platform's"
    );
}

#[tokio::test]
async fn a_collection_credits_the_account_when_the_rail_confirms_and_a_return_takes_it_back() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let account = open_account(&app, &acme, "CLP").await;
    let mut body = payout(&acme.id, "auto", &[50_000, 60_006]);
    body["type"] = json!("collection");
    let created = app.post("/v1/operations", &acme.key, body.clone()).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let operation = created.json();
    assert_eq!(
        operation["destination_account_id"],
        account.as_str(),
        "the customer's CLP account by default"
    );
    assert_eq!(
        balances(&app, &acme.key, &account).await,
        (0, 0, 0),
        "nothing is credited before the rail confirms"
    );

    app.settle(Duration::minutes(2), 30).await;
    let transactions = transactions_of(&app, &acme.key, &operation).await;
    assert!(
        transactions.iter().all(|t| t["direction"] == "debit"),
        "the rail is told to collect: {transactions:?}"
    );
    // The first collected and stayed; the second was collected, then returned.
    assert_eq!(balances(&app, &acme.key, &account).await, (50_000, 50_000, 50_000));
    assert_zero_sum(&app).await;
    let movements = app
        .get(&format!("/v1/accounts/{account}/movements"), &acme.key)
        .await
        .json();
    assert_eq!(
        movements["data"].as_array().unwrap().len(),
        3,
        "two credits and one reversal: {movements}"
    );

    // Each flow names only the account it moves money on.
    body["source_account_id"] = json!(account);
    let refused = app.post("/v1/operations", &acme.key, body).await;
    assert_eq!(
        (
            refused.error(400)["param"].as_str(),
            refused.error(400)["code"].as_str()
        ),
        (Some("source_account_id"), Some("not_supported_for_type"))
    );
    let mut payout_body = payout(&acme.id, "auto", &[100]);
    payout_body["destination_account_id"] = json!(account);
    let refused = app.post("/v1/operations", &acme.key, payout_body).await;
    assert_eq!(refused.error(400)["param"], "destination_account_id");
}

/// Under the customer's collection reserve a confirmed collection's money is pending, not
/// spendable, until the rail's last return check (a day after confirmation) finds it still
/// there; a return before then voids it, so the account never goes below zero for it.
#[tokio::test]
async fn a_reserved_collection_is_spendable_only_once_the_last_return_check_found_it() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let reserved = app
        .post(
            &format!("/v1/customers/{}", acme.id),
            ADMIN_KEY,
            json!({"collection_reserve": "return_checks", "reason": "new merchant, card collections"}),
        )
        .await;
    assert_eq!(reserved.status, 200, "{}", reserved.json());
    assert_eq!(reserved.json()["collection_reserve"], "return_checks");
    let account = open_account(&app, &acme, "CLP").await;
    let mut body = payout(&acme.id, "auto", &[50_000, 60_006]);
    body["type"] = json!("collection");
    assert_eq!(app.post("/v1/operations", &acme.key, body).await.status, 201);

    // Both confirmed, the second then returned (as in the test without a reserve): the
    // returned one is voided, the other waits.
    app.settle(Duration::minutes(2), 30).await;
    assert_eq!(balances(&app, &acme.key, &account).await, (0, 50_000, 0));
    assert_zero_sum(&app).await;
    let mut spend = payout(&acme.id, "auto", &[100]);
    spend["source_account_id"] = json!(account);
    let refused = app.post("/v1/operations", &acme.key, spend.clone()).await.json();
    assert_eq!(
        (&refused["status"], &refused["cause"]["code"]),
        (&json!("failed"), &json!("insufficient_funds")),
        "reserved money is not spendable"
    );

    // A day on, the last return check finds the first still there: it is posted, once.
    app.settle(Duration::hours(1), 26).await;
    assert_eq!(balances(&app, &acme.key, &account).await, (50_000, 50_000, 50_000));
    app.settle(Duration::hours(1), 26).await;
    assert_eq!(balances(&app, &acme.key, &account).await, (50_000, 50_000, 50_000));
    assert_zero_sum(&app).await;
    let movements = movements_of(&app, &acme.key, &account).await;
    let count = |status: &str| movements.iter().filter(|m| m["status"] == status).count();
    assert_eq!((count("posted"), count("voided")), (1, 1), "{movements:#?}");
    let spent = app.post("/v1/operations", &acme.key, spend).await.json();
    assert_eq!(spent["status"], "approved", "{spent}");

    // The customer's history says who set the reserve and why.
    let history = app
        .get(&format!("/v1/customers/{}/history", acme.id), ADMIN_KEY)
        .await
        .json();
    let change = history["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(change["details"]["collection_reserve"], "return_checks", "{history}");
    assert!(
        change["cause"]["message"].as_str().unwrap().contains("new merchant"),
        "{change}"
    );
}

#[tokio::test]
async fn a_transfer_posts_between_two_accounts_on_approval_with_no_rail() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let supplier = app.create_customer().await;
    let from = open_account(&app, &acme, "CLP").await;
    let to = open_account(&app, &supplier, "CLP").await;
    let usd = open_account(&app, &supplier, "USD").await;
    fund(&app, &from, 10_000).await;
    // Its items need no beneficiary: the destination is an account of the ledger.
    let transfer = |destination: &str, amount: i64| {
        json!({"customer_id": acme.id, "type": "transfer", "currency": "CLP", "workflow": "auto",
               "items": [{"destination": {"account_id": destination}, "amount": amount}]})
    };
    let created = app.post("/v1/operations", &acme.key, transfer(&to, 4_000)).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let operation = created.json();
    assert_eq!(operation["items"][0].get("beneficiary"), None, "{operation}");
    assert_eq!(
        (operation["status"].as_str(), operation["cause"]["code"].as_str()),
        (Some("completed"), Some("transfer_posted"))
    );
    assert_eq!(balances(&app, &acme.key, &from).await, (6_000, 6_000, 6_000));
    assert_eq!(balances(&app, &supplier.key, &to).await, (4_000, 4_000, 4_000));
    app.settle(Duration::minutes(1), 3).await;
    assert!(
        transactions_of(&app, &acme.key, &operation).await.is_empty(),
        "no rail, no transaction"
    );
    assert!(app.sandbox().await.is_empty());
    assert_zero_sum(&app).await;

    let short = app.post("/v1/operations", &acme.key, transfer(&to, 6_001)).await.json();
    assert_eq!(short["cause"]["code"], "insufficient_funds");
    assert_eq!(balances(&app, &acme.key, &from).await, (6_000, 6_000, 6_000));

    for (body, param, code) in [
        (transfer(&from, 1), "items[0].destination.account_id", "same_account"),
        (
            transfer(&usd, 1),
            "items[0].destination.account_id",
            "currency_mismatch",
        ),
        (
            transfer("acc_nothere", 1),
            "items[0].destination.account_id",
            "resource_missing",
        ),
        (
            transfer("op_1", 1),
            "items[0].destination.account_id",
            "invalid_account_id",
        ),
    ] {
        let refused = app.post("/v1/operations", &acme.key, body).await;
        let status = if code == "resource_missing" { 404 } else { 400 };
        let error = refused.error(status);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{error}"
        );
    }
    // Too many items is refused before any destination is looked up.
    let mut too_many = transfer("acc_nothere", 1);
    too_many["items"] = json!(vec![too_many["items"][0].clone(); MAX_TRANSFER_ITEMS + 1]);
    let refused = app.post("/v1/operations", &acme.key, too_many).await;
    assert_eq!(refused.error(400)["code"], "too_many_items_for_account");
    let mut at_a_rail = transfer(&to, 1);
    at_a_rail["items"][0]["destination"]["rail"] = json!("psp-local:sandbox");
    assert_eq!(
        app.post("/v1/operations", &acme.key, at_a_rail).await.error(400)["param"],
        "items[0].destination"
    );
    let no_account = app.create_customer().await;
    let mut without = transfer(&to, 1);
    without["customer_id"] = json!(no_account.id);
    let refused = app.post("/v1/operations", &no_account.key, without).await;
    assert_eq!(refused.error(400)["code"], "account_required");

    // A transfer may still name its beneficiary, checked and kept as a payout's is.
    let mut named = transfer(&to, 1);
    named["items"][0]["beneficiary"] = json!({"id_type": "R U T", "id": "1-9"});
    let refused = app.post("/v1/operations", &acme.key, named.clone()).await;
    assert_eq!(refused.error(400)["param"], "items[0].beneficiary.id_type");
    named["items"][0]["beneficiary"]["id_type"] = json!("RUT");
    let kept = app.post("/v1/operations", &acme.key, named).await.json();
    assert_eq!(
        (kept["status"].as_str(), &kept["items"][0]["beneficiary"]),
        (Some("completed"), &json!({"id_type": "RUT", "id": "1-9"}))
    );
}

#[tokio::test]
async fn a_hold_that_expires_before_the_rail_window_fails_its_payout() {
    let app = ops_tests::spawn_app().await;
    ops_tests::scenarios::a_hold_that_expires_before_the_rail_window_fails_its_payout(&app, app.driver(), &app.clock)
        .await;
}

#[tokio::test]
async fn a_collection_is_reversed_by_item_or_amount_never_past_what_moved() {
    let app = ops_tests::spawn_app().await;
    ops_tests::scenarios::a_collection_is_reversed_by_item_or_amount_never_past_what_moved(
        &app,
        app.driver(),
        &app.clock,
    )
    .await;
}
