//! Four-eyes through everything a person sets up or hands on: a schedule's payouts are the
//! person's who set it up (or resumed it), and a key is fenced from its creator's operations
//! however many mints and rotations lie between them.

use ops_domain::ports::Clock;
use ops_tests::{payout, spawn_app, Customer, TestApp};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A schedule of `customer` (made with `key`) paying one two-step payout an hour.
async fn hourly_two_step_payout(app: &TestApp, key: &str) -> String {
    let mut body = payout("cus_unused", "two_step", &[250_000]);
    body.as_object_mut().unwrap().remove("customer_id");
    let created = app
        .post(
            "/v1/schedules",
            key,
            json!({"expression": "rate(1 hour)", "operation": body}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    created.id()
}

/// Moves the clock past the schedule's next run and lets the occurrence make its operation:
/// that operation.
async fn fire(app: &TestApp, key: &str, schedule: &str) -> Value {
    let shown = app.get(&format!("/v1/schedules/{schedule}"), key).await.json();
    let next = OffsetDateTime::parse(shown["next_run_at"].as_str().unwrap(), &Rfc3339).unwrap();
    app.clock.advance(next - app.clock.now() + time::Duration::seconds(30));
    app.drain().await;
    let occurrences = app
        .get(&format!("/v1/schedules/{schedule}/occurrences?limit=1"), key)
        .await
        .json();
    let occurrence = &occurrences["data"][0];
    assert_eq!(occurrence["status"], "created", "{occurrence}");
    let id = occurrence["operation_id"].as_str().unwrap();
    app.get(&format!("/v1/operations/{id}"), key).await.json()
}

async fn approve(app: &TestApp, key: &str, operation: &Value) -> ops_tests::Reply {
    let id = operation["id"].as_str().unwrap();
    app.post(&format!("/v1/operations/{id}/approve"), key, json!({})).await
}

/// A user of `customer` with the approver role, and a key in their name minted by `minter`.
async fn approver_minted_by(app: &TestApp, customer: &Customer, minter: &str) -> String {
    let user = app
        .post(
            &format!("/v1/customers/{}/users", customer.id),
            &customer.key,
            json!({"name": "Abe", "email": format!("abe-{}@acme.example", ops_tests::rand_suffix()), "roles": ["approver"]}),
        )
        .await
        .id();
    let key = app
        .post(
            "/v1/api_keys",
            minter,
            json!({"user_id": user, "scopes": ["operations:read", "operations:approve"]}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.json());
    key.json()["secret"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_schedules_payouts_are_their_makers_so_the_maker_cannot_approve_or_be_handed_them() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let both = app
        .add_member(
            &acme,
            &["maker", "approver"],
            &["operations:read", "operations:write", "operations:approve"],
        )
        .await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let schedule = hourly_two_step_payout(&app, &both.key).await;

    let operation = fire(&app, &acme.key, &schedule).await;
    assert_eq!(operation["status"], "pending_approval", "{operation}");
    assert_eq!(operation["created_by"], both.user_id.as_str());
    assert_eq!(operation["cause"]["actor"], json!({"type": "schedule", "id": schedule}));
    assert_eq!(
        approve(&app, &both.key, &operation).await.error(403)["code"],
        "self_approval_forbidden"
    );
    // The desk neither hands the maker the approval nor lets them claim it.
    let items = app
        .get("/v1/work_items?queue=approvals&limit=10", &acme.key)
        .await
        .json();
    let item = &items["data"][0];
    assert_eq!(item["subject_created_by"], both.user_id.as_str());
    assert_ne!(item["assignee"], both.user_id.as_str());
    let claimed = app
        .post("/v1/work_items/claim", &both.key, json!({"queue": "approvals"}))
        .await;
    assert_eq!(claimed.error(404)["param"], "queue");

    let approved = approve(&app, &approver.key, &operation).await;
    assert_eq!(approved.json()["status"], "approved", "{}", approved.json());
}

#[tokio::test]
async fn a_resumed_schedules_payouts_are_the_resumers() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let scopes = ["operations:read", "operations:write", "operations:approve"];
    let maker = app.add_member(&acme, &["maker", "approver"], &scopes).await;
    let resumer = app.add_member(&acme, &["maker", "approver"], &scopes).await;
    let schedule = hourly_two_step_payout(&app, &maker.key).await;

    for change in ["pause", "resume"] {
        let changed = app
            .post(&format!("/v1/schedules/{schedule}/{change}"), &resumer.key, json!({}))
            .await;
        assert_eq!(changed.status, 200, "{}", changed.json());
    }
    let operation = fire(&app, &acme.key, &schedule).await;
    assert_eq!(operation["created_by"], resumer.user_id.as_str());
    assert_eq!(
        approve(&app, &resumer.key, &operation).await.error(403)["code"],
        "self_approval_forbidden"
    );
}

#[tokio::test]
async fn an_admin_key_cannot_approve_its_schedules_payouts_through_a_key_it_mints() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let schedule = hourly_two_step_payout(&app, &acme.key).await;
    let in_their_name = approver_minted_by(&app, &acme, &acme.key).await;

    let operation = fire(&app, &acme.key, &schedule).await;
    assert_eq!(
        approve(&app, &in_their_name, &operation).await.error(403)["code"],
        "key_minted_by_creator"
    );
}

#[tokio::test]
async fn keys_descending_from_the_creator_through_rotations_and_mints_cannot_decide() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[5_000]))
        .await
        .json();
    let own_id = app.get("/v1/api_keys", &acme.key).await.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["customer_id"] == acme.id.as_str() && key["user_id"].is_null())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The creating key's rotated successor mints an approver key.
    let successor = app
        .post(&format!("/v1/api_keys/{own_id}/rotate"), &acme.key, json!({}))
        .await;
    assert_eq!(successor.status, 201, "{}", successor.json());
    let successor = successor.json()["secret"].as_str().unwrap().to_owned();
    let through_rotation = approver_minted_by(&app, &acme, &successor).await;
    assert_eq!(
        approve(&app, &through_rotation, &created).await.error(403)["code"],
        "key_minted_by_creator"
    );

    // A key the creator minted mints a key that mints the approver key.
    let mut minter = successor;
    for _ in 0..2 {
        let child = app
            .post(
                "/v1/api_keys",
                &minter,
                json!({"scopes": ["users:manage", "operations:read", "operations:approve"]}),
            )
            .await;
        assert_eq!(child.status, 201, "{}", child.json());
        minter = child.json()["secret"].as_str().unwrap().to_owned();
    }
    let two_mints_down = approver_minted_by(&app, &acme, &minter).await;
    assert_eq!(
        approve(&app, &two_mints_down, &created).await.error(403)["code"],
        "key_minted_by_creator"
    );

    let untouched = app
        .get(
            &format!("/v1/operations/{}", created["id"].as_str().unwrap()),
            &acme.key,
        )
        .await
        .json();
    assert_eq!(untouched["approvals"], json!([]));
    // An approver whose key does not descend from the creator still decides.
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    assert_eq!(
        approve(&app, &approver.key, &created).await.json()["status"],
        "approved"
    );
}
