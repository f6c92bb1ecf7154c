//! Holds that expire: a payout's `hold_ttl` bounds how long its funds stay held while it
//! waits for its rail; a transaction not handed to the rail by then fails (`hold_expired`),
//! its hold is voided with that cause, and the operation fails with it.

use crate::{payout, Api};
use ops_domain::ports::Clock;
use ops_runtime::driver::Driver;
use serde_json::{json, Value};
use time::Duration;

/// `(posted, available)` of an account.
async fn balances(app: &Api, key: &str, account: &str) -> (i64, i64) {
    let read = app.get(&format!("/v1/accounts/{account}"), key).await.json();
    let balances = &read["balances"];
    (
        balances["posted"].as_i64().unwrap(),
        balances["available"].as_i64().unwrap_or_else(|| panic!("{read}")),
    )
}

pub async fn a_hold_that_expires_before_the_rail_window_fails_its_payout(
    app: &Api,
    driver: &Driver,
    clock: &crate::TestClock,
) {
    let customer = app.create_customer().await;
    let account = app.open_account(&customer, "CLP", 100_000).await;
    // The sandbox rail keeps one cut-off, 15:00 UTC, and waits after it for the next window.
    app.set_sandbox_cutoffs(
        json!({"name": "Weekdays", "timezone": "UTC"}),
        json!({"cutoffs": ["15:00"], "after_last_cutoff": "wait"}),
    )
    .await;

    let with_ttl = |ttl: Value| {
        let mut body = payout(&customer.id, "auto", &[30_000]);
        body["hold_ttl"] = ttl;
        body
    };
    let too_short = app.post("/v1/operations", &customer.key, with_ttl(json!(10))).await;
    assert_eq!(
        (&too_short.error(400)["param"], &too_short.error(400)["code"]),
        (&json!("hold_ttl"), &json!("out_of_range"))
    );
    let unfunded = app.create_customer().await;
    let mut no_account = payout(&unfunded.id, "auto", &[30_000]);
    no_account["hold_ttl"] = json!(3600);
    let refused = app.post("/v1/operations", &unfunded.key, no_account).await;
    assert_eq!(refused.error(400)["code"], "no_hold", "no hold, nothing to expire");

    // A Friday at 16:00: after the day's cut-off, so the payout waits until Monday; its hold
    // lasts an hour.
    let now = clock.now();
    let days_to_friday = (5 + 7 - i64::from(now.weekday().number_from_monday())) % 7 + 7;
    let friday = (now.date() + Duration::days(days_to_friday))
        .with_hms(16, 0, 0)
        .unwrap()
        .assume_utc();
    clock.advance(friday - now);
    let made = app.post("/v1/operations", &customer.key, with_ttl(json!(3600))).await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(
        (&made.json()["status"], &made.json()["hold_ttl"]),
        (&json!("approved"), &json!(3600))
    );
    let id = made.id();
    crate::settle(driver, clock, Duration::minutes(10), 3).await;
    let transactions = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json();
    let waiting = &transactions["data"][0];
    assert_eq!(waiting["status"], "pending", "{waiting}");
    assert!(waiting["hold_expires_at"].is_string(), "{waiting}");
    assert_eq!(
        balances(app, &customer.key, &account).await,
        (100_000, 70_000),
        "held while it waits"
    );

    // An hour after: the poll finds it, and it fails without the rail asked.
    crate::settle(driver, clock, Duration::minutes(10), 5).await;
    let transaction = app
        .get(
            &format!("/v1/transactions/{}", waiting["id"].as_str().unwrap()),
            &customer.key,
        )
        .await
        .json();
    assert_eq!(
        (
            &transaction["status"],
            &transaction["cause"]["code"],
            &transaction["submit_attempts"]
        ),
        (&json!("failed"), &json!("hold_expired"), &json!(0)),
        "{transaction}"
    );
    assert_eq!(
        balances(app, &customer.key, &account).await,
        (100_000, 100_000),
        "the hold is voided"
    );
    let movements = app
        .get(&format!("/v1/accounts/{account}/movements"), &customer.key)
        .await
        .json();
    let hold = movements["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["status"] == "voided")
        .unwrap_or_else(|| panic!("no voided hold: {movements}"));
    assert_eq!(hold["cause"]["code"], "hold_expired", "{hold}");
    let operation = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(
        (&operation["status"], &operation["cause"]["code"]),
        (&json!("failed"), &json!("hold_expired")),
        "{operation}"
    );
}
