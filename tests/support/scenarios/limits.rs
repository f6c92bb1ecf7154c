//! Payout limits: set by the platform, checked when a payout is approved (in the changeset
//! that approves it, so approvals racing on one day never pass it), held for one more approval
//! or refused over it, with warnings at 50, 80 and 100 % as events and exceptions items.

use crate::{payout, Api, Customer, Member, ADMIN_KEY};
use futures_util::future::join_all;
use ops_runtime::driver::Driver;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;

async fn set_limits(app: &Api, customer: &Customer, limits: Value) -> crate::Reply {
    put_limits(app, customer, json!({"limits": limits})).await
}

async fn put_limits(app: &Api, customer: &Customer, body: Value) -> crate::Reply {
    let path = format!("/v1/customers/{}/payout_limits", customer.id);
    app.send(Method::PUT, &path, Some(ADMIN_KEY), None, Some(&body)).await
}

/// Asserts `operation` waits for one more approval, held by `limit` for `reason`.
fn assert_held(operation: &Value, limit: &str, reason: &str) {
    assert_eq!(
        (
            &operation["status"],
            &operation["limit_hold"]["limit"],
            &operation["limit_hold"]["reason"]
        ),
        (&json!("pending_approval"), &json!(limit), &json!(reason)),
        "{operation}"
    );
}

async fn limits_of(app: &Api, customer: &Customer) -> Value {
    let read = app
        .get(&format!("/v1/customers/{}/payout_limits", customer.id), &customer.key)
        .await;
    assert_eq!(read.status, 200, "{}", read.json());
    read.json()
}

/// Approves `id` as `member`, again while the answer is a conflict (a client's retry, a few
/// times: the service retries too, so a conflict that lasts is a failure).
async fn approve(app: &Api, member: &Member, id: &str) -> Value {
    for _ in 0..20 {
        let approved = app
            .post(&format!("/v1/operations/{id}/approve"), &member.key, json!({}))
            .await;
        if approved.status == 409 && approved.json()["error"]["code"] == "conflict" {
            continue;
        }
        assert_eq!(approved.status, 200, "{}", approved.json());
        return approved.json();
    }
    panic!("approving {id} conflicted twenty times");
}

/// The percents of the customer's `payout_limit.warning` events for its daily counter.
async fn daily_warnings(app: &Api, customer: &Customer) -> Vec<u64> {
    let page = app
        .get("/v1/events?type=payout_limit.warning&limit=100", &customer.key)
        .await
        .json();
    let mut percents: Vec<u64> = page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .filter(|event| event["data"]["limit"] == "daily")
        .map(|event| event["data"]["percent"].as_u64().unwrap())
        .collect();
    percents.sort();
    percents
}

/// The shares of `ceiling` that `used` reached.
fn reached(used: i64, ceiling: i64) -> Vec<u64> {
    [50, 80, 100]
        .into_iter()
        .filter(|percent| used >= (ceiling * percent + 99) / 100)
        .map(|percent| percent as u64)
        .collect()
}

/// Limits are the platform's to set, refused with the field that is wrong, and read by the
/// customer with what it used; over a per-operation limit that refuses, a payout the workflow
/// approves at once is rejected with the limit as its cause; over a per-beneficiary count that
/// escalates, it waits for an admin, whom its creator's approvers cannot stand in for.
pub async fn payout_limits_refuse_or_escalate_what_would_pass_them(app: &Api, driver: &Driver) {
    let customer = app.create_customer().await;
    let own_key = app
        .send(
            Method::PUT,
            &format!("/v1/customers/{}/payout_limits", customer.id),
            Some(&customer.key),
            None,
            Some(&json!({"limits": []})),
        )
        .await;
    assert_eq!(own_key.error(403)["code"], "platform_admin_required");
    let bad = set_limits(
        app,
        &customer,
        json!([{"currency": "CLP", "daily": 0, "over_limit": {"action": "refuse"}}]),
    )
    .await;
    assert_eq!(
        (&bad.error(400)["param"], &bad.error(400)["code"]),
        (&json!("limits[0].daily"), &json!("out_of_range"))
    );
    let unknown = set_limits(
        app,
        &customer,
        json!([{"currency": "CLP", "weekly": 5, "over_limit": {"action": "refuse"}}]),
    )
    .await;
    assert_eq!(unknown.status, 400, "{}", unknown.json());
    assert_eq!(limits_of(app, &customer).await["version"], 0, "nothing half-set");

    let set = set_limits(
        app,
        &customer,
        json!([
            {"currency": "CLP", "per_operation": 500_000, "over_limit": {"action": "refuse"}},
            {"currency": "USD", "per_beneficiary_daily_count": 2, "over_limit": {"action": "escalate", "role": "admin"}}
        ]),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.json());
    assert_eq!(
        (&set.json()["object"], &set.json()["version"]),
        (&json!("payout_limits"), &json!(1))
    );

    let within = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[500_000]),
        )
        .await;
    assert_eq!(within.json()["status"], "approved", "{}", within.json());
    let over = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[500_001]),
        )
        .await;
    assert_eq!(over.status, 201, "{}", over.json());
    assert_eq!(
        (&over.json()["status"], &over.json()["cause"]["code"]),
        (&json!("rejected"), &json!("payout_limit_exceeded"))
    );
    let used = limits_of(app, &customer).await;
    let clp = &used["limits"][0];
    assert_eq!(
        (&clp["currency"], &clp["daily_used"], &clp["monthly_used"]),
        (&json!("CLP"), &json!(0), &json!(0)),
        "no sum limit, no sum kept: {used}"
    );

    // USD: the same beneficiary a third time today needs an admin's approval.
    let in_usd = |amounts: &[i64]| {
        let mut body = payout(&customer.id, "auto", amounts);
        body["currency"] = json!("USD");
        body
    };
    let mut twice = in_usd(&[100, 200]);
    twice["items"][1]["beneficiary"] = twice["items"][0]["beneficiary"].clone();
    let first = app.post("/v1/operations", &customer.key, twice).await;
    assert_eq!(first.json()["status"], "approved", "{}", first.json());
    let third = app.post("/v1/operations", &customer.key, in_usd(&[300])).await;
    let held = third.json();
    assert_eq!(
        held["approvals_needed"],
        json!([{"count": 1, "role": "admin", "for": "per_beneficiary_daily_count"}]),
        "{held}"
    );
    assert_eq!(
        (
            &held["status"],
            &held["cause"]["code"],
            &held["limit_hold"]["limit"],
            &held["limit_hold"]["role"]
        ),
        (
            &json!("pending_approval"),
            &json!("payout_limit_escalated"),
            &json!("per_beneficiary_daily_count"),
            &json!("admin")
        ),
        "{held}"
    );
    // Its approvals item asks for the role the limit names.
    crate::drain(driver).await;
    let item = super::approval_chains::approvals_item(app, &customer, &third.id(), Some("open")).await;
    assert_eq!(item["required_role"], "admin", "{item}");
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let refused = app
        .post(
            &format!("/v1/operations/{}/approve", third.id()),
            &approver.key,
            json!({}),
        )
        .await;
    assert_eq!(refused.error(403)["code"], "role_required");
    let admin = app.add_member(&customer, &["admin"], &["operations:approve"]).await;
    let approved = approve(app, &admin, &third.id()).await;
    assert_eq!(
        (&approved["status"], &approved["cause"]["code"]),
        (&json!("approved"), &json!("payout_limit_approved"))
    );
    assert_eq!(approved["approvals"][0]["for_limit"], true);
}

/// A random day of payouts approved at once, sampled many times: whatever the limit, the
/// amounts and the order approvals land in, what was approved within the daily limit never
/// passes it, the day's counter is exactly what was approved, each share of the limit reached
/// is told once, and what would pass it is refused or waits for an admin, as the limit says.
pub async fn approvals_racing_on_one_day_never_pass_its_limit(app: &Api, driver: &Driver, cases: u32) {
    let strategy = (
        100_000i64..2_000_000,
        proptest::bool::ANY,
        proptest::collection::vec(10_000i64..700_000, 3..9),
    );
    let mut runner = TestRunner::deterministic();
    for case in 0..cases {
        let (daily, refuse, amounts) = strategy.new_tree(&mut runner).unwrap().current();
        let customer = app.create_customer().await;
        let over_limit = match refuse {
            true => json!({"action": "refuse"}),
            false => json!({"action": "escalate", "role": "admin"}),
        };
        let set = set_limits(
            app,
            &customer,
            json!([{"currency": "CLP", "daily": daily, "over_limit": over_limit}]),
        )
        .await;
        assert_eq!(set.status, 200, "{}", set.json());
        let made = app.two_step_payouts(&customer, amounts.iter().copied()).await;
        let approvers =
            join_all((0..3).map(|_| app.add_member(&customer, &["approver"], &["operations:approve"]))).await;
        let decided = join_all(
            made.iter()
                .enumerate()
                .map(|(at, id)| approve(app, &approvers[at % 3], id)),
        )
        .await;

        let mut within = 0;
        for (operation, amount) in decided.iter().zip(&amounts) {
            match operation["status"].as_str().unwrap() {
                "approved" => within += amount,
                "rejected" => {
                    assert!(refuse, "{operation}");
                    assert_eq!(operation["cause"]["code"], "payout_limit_exceeded");
                }
                "pending_approval" => {
                    assert!(!refuse, "{operation}");
                    assert_eq!(operation["limit_hold"]["limit"], "daily");
                }
                other => panic!("case {case}: {other}: {operation}"),
            }
        }
        assert!(
            within <= daily,
            "case {case}: {within} approved within a daily limit of {daily}: {amounts:?}"
        );
        let mut used = limits_of(app, &customer).await["limits"][0]["daily_used"]
            .as_i64()
            .unwrap();
        assert_eq!(used, within, "case {case}: the counter holds what was approved");
        let refused_or_held = decided.iter().filter(|op| op["status"] != "approved").count();
        let smallest_left = decided
            .iter()
            .zip(&amounts)
            .filter(|(op, _)| op["status"] != "approved")
            .map(|(_, amount)| *amount)
            .min();
        if let Some(smallest) = smallest_left {
            assert!(
                within + smallest > daily,
                "case {case}: {smallest} was turned away with room for it"
            );
        }

        // Over the limit, an admin lets one through: counted, past the limit.
        if let Some((held, amount)) = decided
            .iter()
            .zip(&amounts)
            .find(|(op, _)| op["status"] == "pending_approval")
        {
            let admin = app.add_member(&customer, &["admin"], &["operations:approve"]).await;
            let approved = approve(app, &admin, held["id"].as_str().unwrap()).await;
            assert_eq!(approved["cause"]["code"], "payout_limit_approved", "{approved}");
            used += amount;
            assert_eq!(limits_of(app, &customer).await["limits"][0]["daily_used"], used);
        }
        assert_eq!(
            daily_warnings(app, &customer).await,
            reached(used, daily),
            "case {case}: each share reached told once ({used} of {daily}, {refused_or_held} turned away)"
        );
    }
    // Each warning is an exceptions item, acknowledged with a reason.
    crate::drain(driver).await;
    let items = app.open_exceptions().await;
    let warnings: Vec<&Value> = items
        .iter()
        .filter(|item| item["kind"] == "payout_limit_warning")
        .collect();
    assert!(!warnings.is_empty(), "{items:?}");
    let subjects: BTreeSet<&str> = warnings
        .iter()
        .map(|item| item["subject"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(subjects.len(), warnings.len(), "one item per counter and share");
    let path = format!("/v1/work_items/{}/resolve", warnings[0]["id"].as_str().unwrap());
    assert_eq!(
        app.post(&path, ADMIN_KEY, json!({})).await.error(400)["code"],
        "reason_required"
    );
    let closed = app
        .post(&path, ADMIN_KEY, json!({"reason": "Treasury raised the limit"}))
        .await;
    assert_eq!(
        (closed.status.as_u16(), &closed.json()["status"]),
        (200, &json!("done")),
        "{}",
        closed.json()
    );
}

/// While a customer's payee review is on, a payout to a beneficiary it never paid, or paid
/// last at another account, waits for one more approval by the role the review names; one to
/// a beneficiary paid there before goes through. A payout paying more beneficiaries than one
/// approval can review is refused when it is made.
pub async fn a_new_payee_or_a_changed_account_waits_for_one_more_approval(app: &Api) {
    let customer = app.create_customer().await;
    let set = put_limits(app, &customer, json!({"limits": [], "payee_review": {"role": "admin"}})).await;
    assert_eq!(set.status, 200, "{}", set.json());
    assert_eq!(
        set.json()["payee_review"],
        json!({"new_payee": true, "changed_account": true, "role": "admin"})
    );
    let admin = app.add_member(&customer, &["admin"], &["operations:approve"]).await;

    let first = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await;
    assert_held(&first.json(), "new_payee", "RUT:7654321-0 is paid for the first time");
    assert_eq!(approve(app, &admin, &first.id()).await["status"], "approved");

    let again = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[2_000]))
        .await;
    assert_eq!(
        again.json()["status"],
        "approved",
        "paid there before: {}",
        again.json()
    );

    let mut moved = payout(&customer.id, "two_step", &[3_000]);
    moved["items"][0]["destination"]["account"] = json!("999999999");
    let moved = app.post("/v1/operations", &customer.key, moved).await;
    assert_eq!(
        (&moved.json()["decided_by_rule"], &moved.json()["approvals_needed"]),
        (
            &json!({"by": "workflow:two_step", "rule": 0}),
            &json!([{"count": 1, "role": "approver", "for": "workflow"}])
        ),
        "{}",
        moved.json()
    );
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let signed = approve(app, &approver, &moved.id()).await;
    assert_eq!(
        signed["approvals_needed"],
        json!([{"count": 1, "role": "admin", "for": "changed_account"}]),
        "the workflow's approver given, the review's left: {signed}"
    );
    assert_held(
        &signed,
        "changed_account",
        "RUT:7654321-0 is paid at psp-local:sandbox:999999999, last at psp-local:sandbox:000123450",
    );
    let approved = approve(app, &admin, &moved.id()).await;
    assert_eq!(approved["cause"]["code"], "payout_limit_approved", "{approved}");

    let many = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1; 21]))
        .await;
    let refused = many.error(400);
    assert_eq!(
        (&refused["param"], &refused["code"]),
        (&json!("items"), &json!("too_many_beneficiaries"))
    );
}
