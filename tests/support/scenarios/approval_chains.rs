//! Approval chains: a workflow's tiers by amount, the strictest that matches deciding, each
//! tier's steps signed in order, a step that names its signers taking only them.

use crate::{payout, Api, Customer, Member};
use ops_runtime::driver::Driver;
use reqwest::Method;
use serde_json::{json, Value};

async fn approve(app: &Api, member: &Member, id: &str) -> crate::Reply {
    app.post(&format!("/v1/operations/{id}/approve"), &member.key, json!({}))
        .await
}

/// The approvals item of operation `id` (the open one, or any with `status: None`).
pub(crate) async fn approvals_item(app: &Api, customer: &Customer, id: &str, status: Option<&str>) -> Value {
    let filter = status.map_or(String::new(), |status| format!("&status={status}"));
    let items = app
        .get(
            &format!("/v1/work_items?queue=approvals{filter}&limit=100"),
            &customer.key,
        )
        .await
        .json();
    let found = items["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{items}"))
        .iter()
        .find(|item| item["subject"]["id"] == id)
        .cloned();
    found.unwrap_or_else(|| panic!("no approvals item for {id}: {items}"))
}

/// The role the open approvals item of `id` asks of whoever claims it.
async fn item_role(app: &Api, customer: &Customer, id: &str) -> Value {
    approvals_item(app, customer, id, Some("open")).await["required_role"].clone()
}

/// `(count, role)` of each approval the operation still waits for, in order.
fn needed(operation: &Value) -> Vec<(u64, String)> {
    operation["approvals_needed"]
        .as_array()
        .unwrap_or_else(|| panic!("{operation}"))
        .iter()
        .map(|n| (n["count"].as_u64().unwrap(), n["role"].as_str().unwrap().to_owned()))
        .collect()
}

pub async fn a_tiered_chain_is_signed_in_order_by_the_roles_and_users_it_names(app: &Api, driver: &Driver) {
    let customer = app.create_customer().await;
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let treasurer = app.add_member(&customer, &["treasury"], &["operations:approve"]).await;
    let mut named = vec![];
    for _ in 0..3 {
        named.push(app.add_member(&customer, &["treasury"], &["operations:approve"]).await);
    }
    let named_ids: Vec<&str> = named.iter().map(|m| m.user_id.as_str()).collect();

    // Tiers written in any order: the strictest that matches decides.
    let tiers = json!({"match": "strictest", "rules": [
        {"when": {"total_amount": {"gte": 50_000_001}}, "then": {"action": "require_approvals", "steps": [
            {"count": 1, "role": "approver"},
            {"count": 2, "role": "treasury", "users": named_ids}]}},
        {"when": {}, "then": {"action": "require_approvals", "count": 1, "role": "approver"}},
        {"when": {"total_amount": {"gte": 1_000_001}}, "then": {"action": "require_approvals", "steps": [
            {"count": 1, "role": "approver"}, {"count": 1, "role": "treasury"}]}},
    ]});
    let put = app
        .send(
            Method::PUT,
            "/v1/workflows/tiers",
            Some(&customer.key),
            None,
            Some(&tiers),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.json());
    assert_eq!(put.json()["match"], "strictest");

    let small = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "tiers", &[500_000]),
        )
        .await
        .json();
    assert_eq!(needed(&small), [(1, "approver".to_owned())], "{small}");
    assert_eq!(small["decided_by_rule"], json!({"by": "workflow:tiers", "rule": 1}));

    // Above 1,000,000: an approver, then treasury, in that order.
    let large = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "tiers", &[2_000_000]),
        )
        .await
        .json();
    let id = large["id"].as_str().unwrap();
    assert_eq!(
        needed(&large),
        [(1, "approver".to_owned()), (1, "treasury".to_owned())],
        "{large}"
    );
    assert_eq!(large["decided_by_rule"]["rule"], 2);
    assert_eq!(large["approval_requirement"], json!({"count": 1, "role": "approver"}));
    assert!(large["cause"]["message"]
        .as_str()
        .unwrap()
        .ends_with("1 approval(s) by role approver, then 1 by role treasury"));
    crate::drain(driver).await;
    assert_eq!(item_role(app, &customer, id).await, "approver");
    let early = approve(app, &treasurer, id).await;
    assert_eq!(early.error(403)["code"], "role_required");
    let first = approve(app, &approver, id).await;
    assert_eq!(first.status, 200, "{}", first.json());
    assert_eq!(first.json()["status"], "pending_approval");
    assert_eq!(needed(&first.json()), [(1, "treasury".to_owned())]);
    // Whoever claims the item next must hold the next step's role.
    assert_eq!(item_role(app, &customer, id).await, "treasury");
    let done = approve(app, &treasurer, id).await.json();
    assert_eq!(
        (&done["status"], &done["cause"]["code"]),
        (&json!("approved"), &json!("approved_by_approver"))
    );

    // Above 50,000,000: an approver, then two of three named treasurers.
    let huge = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "tiers", &[60_000_000]),
        )
        .await
        .json();
    let id = huge["id"].as_str().unwrap();
    assert_eq!(huge["approvals_needed"][1]["users"], json!(named_ids), "{huge}");
    assert_eq!(approve(app, &approver, id).await.status, 200);
    let unnamed = approve(app, &treasurer, id).await;
    assert_eq!(unnamed.error(403)["code"], "named_signer_required");
    let second = approve(app, &named[2], id).await.json();
    assert_eq!(needed(&second), [(1, "treasury".to_owned())]);
    let third = approve(app, &named[0], id).await.json();
    assert_eq!(third["status"], "approved", "{third}");
    let signers: Vec<&str> = third["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(signers, [approver.user_id.as_str(), named_ids[2], named_ids[0]]);

    // A step that could never be signed is refused where it is written.
    let never = json!({"rules": [{"when": {}, "then": {"action": "require_approvals", "steps": [
        {"count": 1, "role": "approver"}, {"count": 3, "role": "treasury", "users": &named_ids[..2]}]}}]});
    let refused = app
        .send(
            Method::PUT,
            "/v1/workflows/never",
            Some(&customer.key),
            None,
            Some(&never),
        )
        .await;
    assert_eq!(
        (&refused.error(400)["param"], &refused.error(400)["code"]),
        (&json!("rules[0].then.steps[1].users"), &json!("invalid_users"))
    );
}

/// A workflow's `approval_ttl`: an operation whose approvals have not all come by then is
/// `expired` at the timer's next round, with its cause, its event and its approvals item
/// closed; one approved in time stays approved, and a late approval is refused.
pub async fn approvals_not_given_in_time_expire(app: &Api, driver: &Driver, clock: &crate::TestClock) {
    use ops_runtime::driver::Trigger;
    let customer = app.create_customer().await;
    let approvers = [
        app.add_member(&customer, &["approver"], &["operations:approve"]).await,
        app.add_member(&customer, &["approver"], &["operations:approve"]).await,
    ];
    let definition = json!({"approval_ttl": 3600, "rules": [
        {"when": {}, "then": {"action": "require_approvals", "count": 2, "role": "approver"}}]});
    let put = app
        .send(
            Method::PUT,
            "/v1/workflows/hourly",
            Some(&customer.key),
            None,
            Some(&definition),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.json());
    assert_eq!(put.json()["approval_ttl"], 3600);
    let too_short = json!({"approval_ttl": 60, "rules": [{"when": {}, "then": {"action": "approve"}}]});
    let refused = app
        .send(
            Method::PUT,
            "/v1/workflows/hasty",
            Some(&customer.key),
            None,
            Some(&too_short),
        )
        .await;
    assert_eq!(
        (&refused.error(400)["param"], &refused.error(400)["code"]),
        (&json!("approval_ttl"), &json!("out_of_range"))
    );

    let create = || {
        app.post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "hourly", &[10_000]),
        )
    };
    let (late, in_time) = (create().await.json(), create().await.json());
    let expires_at = time::OffsetDateTime::parse(
        late["approval_expires_at"].as_str().unwrap_or_else(|| panic!("{late}")),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let created_at = time::OffsetDateTime::parse(
        late["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(expires_at.unix_timestamp() - created_at.unix_timestamp(), 3600);
    let (late_id, in_time_id) = (late["id"].as_str().unwrap(), in_time["id"].as_str().unwrap());
    for approver in &approvers {
        assert_eq!(approve(app, approver, in_time_id).await.status, 200);
    }
    assert_eq!(approve(app, &approvers[0], late_id).await.status, 200);
    crate::drain(driver).await;

    // Not yet: a round a minute before changes nothing.
    clock.advance(time::Duration::minutes(59));
    driver.round(Trigger::StatusPoll).await.unwrap();
    let waiting = app
        .get(&format!("/v1/operations/{late_id}"), &customer.key)
        .await
        .json();
    assert_eq!(waiting["status"], "pending_approval");
    clock.advance(time::Duration::minutes(2));
    driver.round(Trigger::StatusPoll).await.unwrap();
    let expired = app
        .get(&format!("/v1/operations/{late_id}"), &customer.key)
        .await
        .json();
    assert_eq!(
        (
            &expired["status"],
            &expired["cause"]["code"],
            &expired["cause"]["actor"]["type"]
        ),
        (&json!("expired"), &json!("approval_expired"), &json!("system")),
        "{expired}"
    );
    assert!(expired["cause"]["message"]
        .as_str()
        .unwrap()
        .contains("1 of 2 approval(s)"));
    assert_eq!(expired["approvals_needed"], json!([]));
    let refused = approve(app, &approvers[1], late_id).await;
    assert_eq!(refused.error(409)["code"], "operation_not_pending_approval");
    let kept = app
        .get(&format!("/v1/operations/{in_time_id}"), &customer.key)
        .await
        .json();
    assert_ne!(kept["status"], "expired", "{kept}");
    // Another round finds nothing more to expire.
    driver.round(Trigger::StatusPoll).await.unwrap();
    let history = app.history(&format!("/v1/operations/{late_id}"), &customer.key).await;
    assert_eq!(
        history.iter().filter(|entry| entry["to"] == "expired").count(),
        1,
        "{history:?}"
    );

    // Its event is sent and its approvals item closes with the expiry's cause.
    crate::drain(driver).await;
    let events = app
        .get("/v1/events?type=operation.expired&limit=10", &customer.key)
        .await
        .json();
    assert_eq!(events["data"][0]["data"]["operation_id"], late_id, "{events}");
    let item = approvals_item(app, &customer, late_id, None).await;
    assert_eq!(
        (&item["status"], &item["cause"]["code"]),
        (&json!("done"), &json!("approval_expired")),
        "{item}"
    );
}

/// A named signer hands their place to a colleague of their role for a period: the delegate
/// signs for them (`on_behalf_of`), once per place, never their own operation, only while the
/// delegation lasts, and each delegation and its end is on the delegator's history.
pub async fn a_named_signer_delegates_their_place_for_a_period(app: &Api) {
    let customer = app.create_customer().await;
    let mut named = vec![];
    for _ in 0..3 {
        named.push(app.add_member(&customer, &["treasury"], &["operations:approve"]).await);
    }
    let delegate = app
        .add_member(&customer, &["treasury"], &["operations:approve", "operations:write"])
        .await;
    let outsider = app.add_member(&customer, &["treasury"], &["operations:approve"]).await;
    let viewer = app.add_member(&customer, &["viewer"], &["operations:read"]).await;
    let named_ids: Vec<&str> = named.iter().map(|m| m.user_id.as_str()).collect();
    let definition = json!({"rules": [{"when": {}, "then": {"action": "require_approvals", "count": 2,
        "role": "treasury", "users": named_ids}}]});
    let put = app
        .send(
            Method::PUT,
            "/v1/workflows/named",
            Some(&customer.key),
            None,
            Some(&definition),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.json());
    let create = |key: String| {
        let body = payout(&customer.id, "named", &[70_000]);
        async move { app.post("/v1/operations", &key, body).await }
    };
    let first = create(customer.key.clone()).await.json();
    let now = time::OffsetDateTime::parse(
        first["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let at = |offset: time::Duration| {
        (now + offset)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let path = format!("/v1/customers/{}/users/{}/delegation", customer.id, named[0].user_id);
    let delegate_to = |to: &str, mut body: Value| {
        body["to_user_id"] = json!(to);
        let (path, key) = (path.clone(), named[0].key.clone());
        async move { app.send(Method::PUT, &path, Some(&key), None, Some(&body)).await }
    };
    let a_day = json!({"ends_at": at(time::Duration::days(1)), "reason": "holiday"});
    for (to, body, code) in [
        (named[0].user_id.as_str(), a_day.clone(), "invalid_delegate"),
        (viewer.user_id.as_str(), a_day.clone(), "delegate_role_missing"),
        (
            delegate.user_id.as_str(),
            json!({"ends_at": at(-time::Duration::hours(1))}),
            "invalid_period",
        ),
        (
            delegate.user_id.as_str(),
            json!({"ends_at": at(time::Duration::days(91))}),
            "invalid_period",
        ),
    ] {
        let refused = delegate_to(to, body).await;
        assert_eq!(refused.error(400)["code"], code, "{}", refused.json());
    }
    // Another signer cannot set it for them; whoever manages the customer's users can.
    let by_peer = app
        .send(
            Method::PUT,
            &path,
            Some(&named[1].key),
            None,
            Some(&json!({"to_user_id": delegate.user_id, "ends_at": at(time::Duration::days(1))})),
        )
        .await;
    assert_eq!(by_peer.error(403)["code"], "missing_scope");
    // Not yet: a delegation that starts in an hour lets nobody sign now.
    let later = delegate_to(
        &delegate.user_id,
        json!({"starts_at": at(time::Duration::hours(1)), "ends_at": at(time::Duration::days(1))}),
    )
    .await;
    assert_eq!(later.status, 200, "{}", later.json());
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        approve(app, &delegate, id).await.error(403)["code"],
        "named_signer_required"
    );

    let given = delegate_to(&delegate.user_id, a_day.clone()).await;
    assert_eq!(given.status, 200, "{}", given.json());
    assert_eq!(given.json()["delegation"]["to_user_id"], delegate.user_id.as_str());
    assert_eq!(
        approve(app, &outsider, id).await.error(403)["code"],
        "named_signer_required"
    );
    let signed = approve(app, &delegate, id).await;
    assert_eq!(signed.status, 200, "{}", signed.json());
    assert_eq!(
        (
            &signed.json()["approvals"][0]["user_id"],
            &signed.json()["approvals"][0]["on_behalf_of"]
        ),
        (&json!(delegate.user_id), &json!(named[0].user_id))
    );
    // The place is taken: the delegator cannot sign it again.
    assert_eq!(approve(app, &named[0], id).await.error(409)["code"], "already_decided");
    let done = approve(app, &named[1], id).await.json();
    assert_eq!(done["status"], "approved", "{done}");

    // Never the delegate's own operation.
    let own = create(delegate.key.clone()).await.json();
    let own_id = own["id"].as_str().unwrap();
    assert_eq!(
        approve(app, &delegate, own_id).await.error(403)["code"],
        "self_approval_forbidden"
    );

    // Ended: the delegate signs for nobody.
    let ended = app.send(Method::DELETE, &path, Some(&named[0].key), None, None).await;
    assert_eq!(ended.status, 200, "{}", ended.json());
    assert!(ended.json().get("delegation").is_none(), "{}", ended.json());
    let again = app.send(Method::DELETE, &path, Some(&named[0].key), None, None).await;
    assert_eq!(again.error(409)["code"], "no_delegation");
    let next = create(customer.key.clone()).await.json();
    let next_id = next["id"].as_str().unwrap();
    assert_eq!(
        approve(app, &delegate, next_id).await.error(403)["code"],
        "named_signer_required"
    );

    let history = app
        .history(
            &format!("/v1/customers/{}/users/{}", customer.id, named[0].user_id),
            &customer.key,
        )
        .await;
    let actions: Vec<&str> = history.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        ["created", "delegated", "delegated", "delegation_ended"],
        "{history:?}"
    );
}
