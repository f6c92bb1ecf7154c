//! The holes a security review found (issue "Hardening"), one test each: four-eyes that
//! cannot be skipped or split, keys that cannot plant successors, webhooks that cannot reach
//! inside the network, secrets kept as secrets, rail reports that cannot be replayed.

use ops_tests::{payout, spawn_app, spawn_app_with, Customer, Member, TestApp, ADMIN_KEY};
use reqwest::Method;
use serde_json::{json, Value};

const LIVE_ADMIN_KEY: &str = "sk_live_platform_admin_for_tests_0000000000";

/// A production stack (with the sandbox rail, so payouts have somewhere to go).
async fn production() -> TestApp {
    spawn_app_with(|config| {
        config.environment = ops_local::Stage::Production;
        config.bootstrap_admin_key = Some(LIVE_ADMIN_KEY.into());
        config.sandbox_rail = Some(true);
    })
    .await
}

/// A customer of `app` with an admin key (every customer scope, no user), made by `platform`.
async fn customer_of(app: &TestApp, platform: &str) -> Customer {
    let id = app.post("/v1/customers", platform, json!({"name": "Acme"})).await.id();
    let scopes = ops_tests::CUSTOMER_SCOPES;
    let key = app
        .post("/v1/api_keys", platform, json!({"customer_id": id, "scopes": scopes}))
        .await;
    assert_eq!(key.status, 201, "{}", key.json());
    Customer {
        id,
        key: key.json()["secret"].as_str().unwrap().to_owned(),
    }
}

/// A user of `customer` with `roles` and a key bound to it with `scopes`, minted by `minter`.
async fn member_minted_by(app: &TestApp, customer: &Customer, minter: &str, roles: &[&str], scopes: &[&str]) -> Member {
    let user_id = app
        .post(
            &format!("/v1/customers/{}/users", customer.id),
            &customer.key,
            json!({"name": "Member", "email": format!("m-{}@acme.example", ops_tests::rand_suffix()), "roles": roles}),
        )
        .await
        .id();
    let key = app
        .post("/v1/api_keys", minter, json!({"user_id": user_id, "scopes": scopes}))
        .await;
    assert_eq!(key.status, 201, "{}", key.json());
    Member {
        user_id,
        key: key.json()["secret"].as_str().unwrap().to_owned(),
    }
}

fn floor_path(customer: &Customer) -> String {
    format!("/v1/customers/{}/approval_floors/payout", customer.id)
}

async fn put(app: &TestApp, path: &str, key: &str, body: Value) -> ops_tests::Reply {
    app.send(Method::PUT, path, Some(key), None, Some(&body)).await
}

#[tokio::test]
async fn naming_the_auto_workflow_cannot_skip_the_customers_approval_floor() {
    let app = production().await;
    let customer = customer_of(&app, LIVE_ADMIN_KEY).await;
    let maker = member_minted_by(
        &app,
        &customer,
        &customer.key,
        &["maker"],
        &["operations:read", "operations:write"],
    )
    .await;

    // A new production customer needs one approver, whatever the request names.
    let floor = app.get(&floor_path(&customer), &maker.key).await.json();
    assert_eq!(
        (floor["default"].clone(), floor["rules"][0]["then"]["action"].clone()),
        (json!(true), json!("require_approvals"))
    );
    let created = app
        .post(
            "/v1/operations",
            &maker.key,
            payout(&customer.id, "auto", &[90_000_000]),
        )
        .await
        .json();
    assert_eq!(created["status"], "pending_approval", "{created}");
    assert_eq!(created["approval_requirement"], json!({"count": 1, "role": "approver"}));
    assert_eq!(created["cause"]["actor"]["id"], "approval_floor:payout");

    // Only the customer's admin sets the floor; a maker cannot lower it.
    let by_maker = put(
        &app,
        &floor_path(&customer),
        &maker.key,
        json!({"rules": [{"then": {"action": "approve"}}]}),
    )
    .await;
    assert_eq!(by_maker.error(403)["code"], "missing_scope");
    let bad_type = put(
        &app,
        &format!("/v1/customers/{}/approval_floors/loan", customer.id),
        &customer.key,
        json!({"rules": [{"then": {"action": "approve"}}]}),
    )
    .await;
    assert_eq!(bad_type.error(400)["param"], "type");

    // Two approvals above a million, none below: the stricter of floor and workflow decides.
    let saved = put(
        &app,
        &floor_path(&customer),
        &customer.key,
        json!({"rules": [
            {"when": {"total_amount": {"gte": 1_000_000}}, "then": {"action": "require_approvals", "count": 2, "role": "approver"}},
            {"then": {"action": "approve"}}]}),
    )
    .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    assert_eq!(
        (saved.json()["default"].clone(), saved.json()["version"].clone()),
        (json!(false), json!(1))
    );
    let small = app
        .post("/v1/operations", &maker.key, payout(&customer.id, "auto", &[5_000]))
        .await
        .json();
    assert_eq!(small["status"], "approved");
    let large_auto = app
        .post("/v1/operations", &maker.key, payout(&customer.id, "auto", &[2_000_000]))
        .await
        .json();
    let large_two_step = app
        .post(
            "/v1/operations",
            &maker.key,
            payout(&customer.id, "two_step", &[2_000_000]),
        )
        .await
        .json();
    for large in [large_auto, large_two_step] {
        assert_eq!(large["status"], "pending_approval");
        assert_eq!(large["approval_requirement"]["count"], 2, "{large}");
    }
    // A floor that rejects rejects, even under auto.
    put(&app, &floor_path(&customer), &customer.key, json!({"rules": [{"when": {"total_amount": {"gte": 1_000_000}}, "then": {"action": "reject", "reason": "over the limit"}}]})).await;
    let refused = app
        .post("/v1/operations", &maker.key, payout(&customer.id, "auto", &[2_000_000]))
        .await
        .json();
    assert_eq!(
        (refused["status"].clone(), refused["cause"]["code"].clone()),
        (json!("rejected"), json!("approval_floor_rejected"))
    );
}

#[tokio::test]
async fn a_key_minted_by_the_operations_creator_cannot_decide_on_it() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let approver_id = app
        .post(
            &format!("/v1/customers/{}/users", customer.id),
            &customer.key,
            json!({"name": "Abe", "email": "abe@acme.example", "roles": ["approver"]}),
        )
        .await
        .id();
    // The admin key creates an operation, then mints a key in the approver's name.
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[5_000]),
        )
        .await
        .id();
    let in_their_name = app
        .post(
            "/v1/api_keys",
            &customer.key,
            json!({"user_id": approver_id, "scopes": ["operations:approve"]}),
        )
        .await
        .json();
    assert_eq!(
        in_their_name["created_by"],
        app.get("/v1/api_keys", &customer.key).await.json()["data"][1]["id"]
    );
    let decision = app
        .post(
            &format!("/v1/operations/{id}/approve"),
            in_their_name["secret"].as_str().unwrap(),
            json!({}),
        )
        .await;
    assert_eq!(decision.error(403)["code"], "key_minted_by_creator");

    // A maker who can mint keys cannot sign for the approver either.
    let maker = app
        .add_member(
            &customer,
            &["maker"],
            &["operations:write", "users:manage", "operations:approve"],
        )
        .await;
    let by_maker = app
        .post("/v1/operations", &maker.key, payout(&customer.id, "two_step", &[5_001]))
        .await
        .id();
    let minted = app
        .post(
            "/v1/api_keys",
            &maker.key,
            json!({"user_id": approver_id, "scopes": ["operations:approve"]}),
        )
        .await
        .json();
    assert_eq!(minted["created_by"], maker.user_id.as_str());
    let decision = app
        .post(
            &format!("/v1/operations/{by_maker}/approve"),
            minted["secret"].as_str().unwrap(),
            json!({}),
        )
        .await;
    assert_eq!(decision.error(403)["code"], "key_minted_by_creator");
    for op in [&id, &by_maker] {
        let still = app.get(&format!("/v1/operations/{op}"), &customer.key).await.json();
        assert_eq!(
            (still["status"].clone(), still["approvals"].clone()),
            (json!("pending_approval"), json!([]))
        );
    }
    // The approver's own key (minted by the platform here) still decides.
    let approver_key = app
        .post(
            "/v1/api_keys",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "user_id": approver_id, "scopes": ["operations:approve"]}),
        )
        .await
        .json();
    let approved = app
        .post(
            &format!("/v1/operations/{by_maker}/approve"),
            approver_key["secret"].as_str().unwrap(),
            json!({}),
        )
        .await;
    assert_eq!(approved.json()["status"], "approved");
}

#[tokio::test]
async fn a_leaked_key_cannot_plant_a_successor_that_outlives_its_revocation() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let leaked = app
        .post(
            "/v1/api_keys",
            &customer.key,
            json!({"scopes": ["operations:read", "users:manage"]}),
        )
        .await
        .json();
    let (leaked_id, leaked_secret) = (leaked["id"].as_str().unwrap(), leaked["secret"].as_str().unwrap());

    // The thief rotates the leaked key once; it cannot rotate it again.
    let planted = app
        .post(&format!("/v1/api_keys/{leaked_id}/rotate"), leaked_secret, json!({}))
        .await
        .json();
    let again = app
        .post(&format!("/v1/api_keys/{leaked_id}/rotate"), leaked_secret, json!({}))
        .await;
    assert_eq!(again.error(409)["code"], "api_key_already_rotated");
    // The successor rotates on.
    let (planted_id, planted_secret) = (planted["id"].as_str().unwrap(), planted["secret"].as_str().unwrap());
    let second = app
        .post(&format!("/v1/api_keys/{planted_id}/rotate"), planted_secret, json!({}))
        .await
        .json();
    let second_secret = second["secret"].as_str().unwrap();
    assert_eq!(app.get("/v1/operations", second_secret).await.status, 200);

    // The owner lists the customer's keys (never a secret) and finds every one of them.
    let listed = app.get("/v1/api_keys", &customer.key).await.json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    for id in [leaked_id, planted_id, second["id"].as_str().unwrap()] {
        assert!(ids.contains(&id), "{id} not listed in {listed}");
    }
    assert!(listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k.get("secret").is_none() && k.get("secret_hash").is_none()));
    assert_eq!(
        listed["data"][0]["created_by"], planted_id,
        "newest first, with who minted it"
    );
    // A page at a time, each starting after the last one listed.
    let mut paged = vec![];
    let mut page = app.get("/v1/api_keys?limit=2", &customer.key).await.json();
    for _ in 0..ids.len() {
        let data = page["data"].as_array().unwrap();
        paged.extend(data.iter().map(|k| k["id"].as_str().unwrap().to_owned()));
        if page["has_more"] != true {
            break;
        }
        let last = data.last().unwrap()["id"].as_str().unwrap();
        page = app
            .get(&format!("/v1/api_keys?limit=2&starting_after={last}"), &customer.key)
            .await
            .json();
    }
    assert_eq!(paged, ids, "the pages hold the list, in its order");
    assert!(ids.len() > 2, "more than one page: {ids:?}");

    // Revoking the leaked key revokes every key it was rotated into.
    let revoked = app.delete(&format!("/v1/api_keys/{leaked_id}"), &customer.key).await;
    assert_eq!(revoked.status, 200);
    for secret in [leaked_secret, planted_secret, second_secret] {
        assert_eq!(
            app.get("/v1/operations", secret).await.error(401)["code"],
            "api_key_revoked"
        );
    }
    // Another customer's keys are not listed.
    let other = app.create_customer().await;
    let peek = app
        .get(&format!("/v1/api_keys?customer_id={}", customer.id), &other.key)
        .await;
    assert_eq!(peek.error(404)["param"], "customer_id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deactivation_racing_a_role_change_is_never_undone() {
    ops_tests::scenarios::a_deactivation_racing_a_role_change_is_never_undone(&spawn_app().await.api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotations_and_revocations_at_once_leave_no_successor_live() {
    ops_tests::scenarios::rotations_and_revocations_at_once_leave_no_successor_live(&spawn_app().await.api).await;
}

#[tokio::test]
async fn production_webhooks_only_reach_public_https_receivers() {
    let app = production().await;
    let customer = customer_of(&app, LIVE_ADMIN_KEY).await;
    for url in [
        "http://hooks.example.com/",
        "https://hooks.example.com:8080/",
        "https://127.0.0.1/",
        "https://127.1/",
        "https://2130706433/",
        "https://0x7f000001/",
        "https://0.0.0.0/",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.1.2.3/",
        "https://192.168.0.10/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[fd12::1]/",
        "https://localhost/",
        "https://user:password@hooks.example.com/",
        "https://@",
        "https://hooks.example.com:99999/",
    ] {
        let refused = app
            .post("/v1/webhook_endpoints", &customer.key, json!({"url": url}))
            .await;
        assert_eq!(refused.error(400)["param"], "url", "{url}");
    }
    let unknown_type = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "https://hooks.example.com/ops", "events": ["transaction.confirmed", "operation.zzz"]}),
        )
        .await;
    assert_eq!(unknown_type.error(400)["param"], "events[1]");
    let created = app
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "https://hooks.example.com/ops", "events": ["operation.approved"]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let listed = app.get("/v1/webhook_endpoints", &customer.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);

    // A production stack cannot be started with local targets allowed; a test stack can turn
    // them off.
    let refused = ops_local::build(
        &ops_local::Config {
            environment: ops_local::Stage::Production,
            bootstrap_admin_key: None,
            webhook_allow_local: Some(true),
            ..ops_tests::config(tempfile::tempdir().unwrap().keep())
        },
        std::sync::Arc::new(ops_domain::ports::SystemClock),
    )
    .await;
    assert!(refused.is_err_and(|e| e.to_string().contains("OPS_WEBHOOK_ALLOW_LOCAL")));
    let strict_test = spawn_app_with(|config| config.webhook_allow_local = Some(false)).await;
    let customer = strict_test.create_customer().await;
    let local = strict_test
        .post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(local.error(400)["param"], "url");
}

fn file_holds(path: &std::path::Path, needle: &str) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn secrets_stay_secret_at_rest_and_the_data_directory_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let app = spawn_app_with(|config| config.data_dir = data.clone()).await;
    let customer = app.create_customer().await;
    let endpoint = app.subscribe(&customer.key, "http://127.0.0.1:9/hook", &["*"]).await;
    let signing_secret = endpoint["secret"].as_str().unwrap().to_owned();
    app.post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await;
    app.drain().await;

    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    for file in [
        "ops-test.sqlite",
        "ops-test.sqlite-wal",
        "api-key-pepper",
        "rail-sandbox-test.sqlite",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    for file in ["ops-test.sqlite", "ops-test.sqlite-wal"] {
        let path = data.join(file);
        assert!(
            !file_holds(&path, &signing_secret),
            "the webhook signing secret is in clear in {file}"
        );
        assert!(
            !file_holds(&path, ops_tests::RAIL_SECRET),
            "the rail secret is in {file}"
        );
    }

    // Without OPS_RAIL_SECRET after a restart, nothing verifies rail reports any more.
    let app = app.restart_with(|config| config.rail_secret = None).await;
    let report = app
        .client
        .post(format!("{}/v1/rail_reports", app.base))
        .header("X-Service-Signature", "t=1,v1=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(report.status(), 401);
    let error: Value = report.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rail_reports_disabled");
    // The sealed signing secret still signs after the restart (same pepper).
    assert_eq!(app.get("/v1/webhook_endpoints", &customer.key).await.status, 200);
}

async fn send_report(app: &TestApp, report: &Value) -> reqwest::Response {
    send_report_bytes(app, serde_json::to_vec(report).unwrap()).await
}

async fn send_report_bytes(app: &TestApp, body: Vec<u8>) -> reqwest::Response {
    app.client
        .post(format!("{}/v1/rail_reports", app.base))
        .header("X-Service-Signature", ops_tests::sign_rail_report(&app.clock, &body))
        .body(body)
        .send()
        .await
        .unwrap()
}

/// An auto-approved one-item payout of `amount`, paid and confirmed: its id and transaction.
async fn confirmed_payout(app: &TestApp, customer: &Customer, amount: i64) -> (String, Value) {
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[amount]))
        .await
        .id();
    app.settle(time::Duration::seconds(5), 3).await;
    let txn = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json()["data"][0]
        .clone();
    assert_eq!(txn["status"], "confirmed");
    (id, txn)
}

#[tokio::test]
async fn a_rail_report_takes_effect_once_and_its_fields_are_bounded() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // Confirmed, then the rail reports a return: a replay of that report must not return twice.
    let (id, txn) = confirmed_payout(&app, &customer, 40_000).await;
    let report = json!({"id": "rpt_return_1", "rail": "psp-local:sandbox", "transaction_id": txn["id"], "state": "returned", "code": "account_closed"});

    let first = send_report(&app, &report).await;
    assert_eq!(first.status(), 200);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "returned");
    let events_before = app.get("/v1/events?limit=100", &customer.key).await.json()["data"]
        .as_array()
        .unwrap()
        .len();
    let replay = send_report(&app, &report).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap(), first);
    app.drain().await;
    let events_after = app.get("/v1/events?limit=100", &customer.key).await.json()["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(events_before, events_after, "a replayed report emitted events");
    let path = app.path_of(&customer.key, &id, txn["id"].as_str().unwrap()).await;
    assert_eq!(path.iter().filter(|s| *s == "returned").count(), 1);

    // Another report under a used id is refused; a report needs an id; fields are bounded.
    let mut reused = report.clone();
    reused["state"] = json!("confirmed");
    let reused = send_report(&app, &reused).await;
    assert_eq!(reused.status(), 409);
    let refused = reused.json::<Value>().await.unwrap()["error"].clone();
    assert_eq!(
        (refused["code"].as_str(), refused["param"].as_str()),
        (Some("rail_report_id_reused"), Some("id"))
    );
    for (field, value, param) in [
        ("id", Value::Null, "id"),
        ("code", json!("x".repeat(200_000)), "code"),
        ("code", json!("a b"), "code"),
        ("reason", json!("r".repeat(501)), "reason"),
        ("rail_reference", json!("r".repeat(129)), "rail_reference"),
    ] {
        let mut bad = report.clone();
        bad["id"] = json!(format!("rpt_bad_{param}_{}", value.to_string().len()));
        if value.is_null() {
            bad.as_object_mut().unwrap().remove(field);
        } else {
            bad[field] = value;
        }
        let refused = send_report(&app, &bad).await;
        assert_eq!(refused.status(), 400, "{field}");
        assert_eq!(refused.json::<Value>().await.unwrap()["error"]["param"], param);
    }

    // A signed body that repeats a key, or is not JSON, is refused for what is wrong with it.
    let twice = format!(
        r#"{{"id": "rpt_twice", "rail": "psp-local:sandbox", "transaction_id": "{}", "state": "returned", "state": "confirmed"}}"#,
        txn["id"].as_str().unwrap()
    );
    for (body, code, param) in [
        (twice, "duplicate_key", "state"),
        (r#"{"id": "rpt_cut", "state": "#.to_owned(), "invalid_json", "body"),
    ] {
        let refused = send_report_bytes(&app, body.into_bytes()).await;
        assert_eq!(refused.status(), 400, "{code}");
        let error = refused.json::<Value>().await.unwrap()["error"].clone();
        assert_eq!(
            (error["code"].as_str(), error["param"].as_str()),
            (Some(code), Some(param))
        );
    }
}

#[tokio::test]
async fn a_customers_resend_goes_to_its_own_endpoints_only() {
    use ops_tests::receiver::Receiver;
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let (platform_hook, own_hook) = (Receiver::start(0).await, Receiver::start(0).await);
    app.subscribe(ADMIN_KEY, &platform_hook.url, &["operation.created"])
        .await;
    app.subscribe(&customer.key, &own_hook.url, &["operation.created"])
        .await;
    app.post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await;
    app.drain().await;
    let events = app.get("/v1/events?type=operation.created", &customer.key).await.json();
    let event_id = events["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!((platform_hook.requests(), own_hook.requests()), (1, 1));

    let resent = app
        .post(&format!("/v1/events/{event_id}/resend"), &customer.key, json!({}))
        .await;
    assert_eq!(resent.json()["data"].as_array().unwrap().len(), 1, "{}", resent.json());
    app.drain().await;
    assert_eq!(
        (platform_hook.requests(), own_hook.requests()),
        (1, 2),
        "the customer's resend reached the platform"
    );
}

#[tokio::test]
async fn an_idempotent_replay_needs_the_scope_the_original_needed() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let reader = app.add_member(&customer, &["viewer"], &["operations:read"]).await;
    let body = payout(&customer.id, "auto", &[1_000]);
    let created = app
        .post_keyed("/v1/operations", &customer.key, "payroll-1", &body)
        .await;
    assert_eq!(created.status, 201);
    let replayed_to_reader = app.post_keyed("/v1/operations", &reader.key, "payroll-1", &body).await;
    assert_eq!(replayed_to_reader.error(403)["code"], "missing_scope");

    // The same for a rotation: only the key itself or a key manager may see it again.
    let other = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .id();
    let path = format!("/v1/api_keys/{other}/rotate");
    let rotated = app
        .send(
            Method::POST,
            &path,
            Some(&customer.key),
            Some("rotate-1"),
            Some(&json!({})),
        )
        .await;
    assert_eq!(rotated.status, 201);
    let replayed = app
        .send(
            Method::POST,
            &path,
            Some(&reader.key),
            Some("rotate-1"),
            Some(&json!({})),
        )
        .await;
    assert_eq!(replayed.error(403)["code"], "missing_scope");
}

#[tokio::test]
async fn repeated_json_keys_and_invisible_or_bidi_characters_are_refused() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let other = app.create_customer().await;
    let body = format!(
        r#"{{"customer_id": "{}", "type": "payout", "currency": "CLP", "workflow": "auto", "customer_id": "{}",
            "items": [{{"beneficiary": {{"id_type": "RUT", "id": "1"}}, "destination": {{"rail": "psp-local:sandbox", "account": "1"}}, "amount": 5}}]}}"#,
        other.id, customer.id
    );
    let refused = app
        .client
        .post(format!("{}/v1/operations", app.base))
        .bearer_auth(&customer.key)
        .header("Idempotency-Key", "dup-1")
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(
        (error["error"]["code"].as_str(), error["error"]["param"].as_str()),
        (Some("duplicate_key"), Some("customer_id"))
    );
    assert_eq!(app.get("/v1/operations", &customer.key).await.json()["data"], json!([]));

    let mut reversed = payout(&customer.id, "auto", &[5]);
    reversed["items"][0]["reference"] = json!("invoice \u{202E}fdp.exe");
    let refused = app.post("/v1/operations", &customer.key, reversed).await;
    assert_eq!(refused.error(400)["param"], "items[0].reference");
    let zero_width = app
        .post("/v1/customers", ADMIN_KEY, json!({"name": "Acme\u{200B}"}))
        .await;
    assert_eq!(zero_width.error(400)["param"], "name");
}

/// No answer may be kept by a cache between the service and its client (a shared proxy, a
/// browser's disk): answers hold balances and customers' data, and a new key's secret. Each
/// kind of answer says so, errors and unknown routes included, and none may be sniffed into
/// another type.
#[tokio::test]
async fn no_answer_may_be_cached_or_sniffed() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let key = app
        .post(
            "/v1/api_keys",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "scopes": ["operations:read"]}),
        )
        .await;
    assert!(key.json()["secret"].is_string());
    let answers = [
        key,
        app.get("/v1/customers", ADMIN_KEY).await,
        app.get("/v1/customers", "sk_test_not_a_key_at_all_000000000000").await,
        app.get("/v1/nowhere", ADMIN_KEY).await,
        app.get("/v1/customers?stray=1", ADMIN_KEY).await,
        app.get("/console", "").await,
        app.get("/v1/openapi.json", "").await,
    ];
    for answer in answers {
        assert_eq!(answer.headers["cache-control"], "no-store", "{}", answer.status);
        assert_eq!(answer.headers["x-content-type-options"], "nosniff", "{}", answer.status);
    }
}

/// Waits until a new wall-clock second has just begun, so a burst falls inside one second.
async fn start_of_a_second() {
    let now = time::OffsetDateTime::now_utc();
    let left = 1_000_000_000 - now.nanosecond() as u64;
    tokio::time::sleep(std::time::Duration::from_nanos(left + 5_000_000)).await;
}

#[tokio::test]
async fn a_customers_keys_share_one_budget_and_failed_authentications_are_limited_per_address() {
    let app = spawn_app_with(|config| config.rate_limit = 2).await;
    // Setting up under a limit of two a second: each request waits for its turn.
    let patiently = |path: &'static str, body: Value| {
        let app = &app;
        async move {
            loop {
                let reply = app.post(path, ADMIN_KEY, body.clone()).await;
                if reply.status != 429 {
                    return reply;
                }
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
        }
    };
    let customer_id = patiently("/v1/customers", json!({"name": "Acme"})).await.id();
    let mut keys = vec![];
    for _ in 0..5 {
        let key = patiently(
            "/v1/api_keys",
            json!({"customer_id": customer_id, "scopes": ["operations:read"]}),
        )
        .await;
        keys.push(key.json()["secret"].as_str().unwrap().to_owned());
    }
    // Five keys, two requests each, in one second: the customer's budget is four keys' worth.
    // Sent side by side, so the burst stays inside one second even on a loaded machine.
    start_of_a_second().await;
    let statuses =
        futures_util::future::join_all(keys.iter().chain(keys.iter()).map(|key| app.get("/v1/operations", key))).await;
    let refused: Vec<_> = statuses.iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        refused.len(),
        2,
        "{:?}",
        statuses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(refused[0].json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("customer"));

    // A flood of wrong keys from one address is cut off, and within that second even a good
    // key from it waits; the next second it is served again.
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    start_of_a_second().await;
    let wrong = "sk_test_0000000000000000000000000000000000000000";
    let replies = futures_util::future::join_all((0..25).map(|_| app.get("/v1/operations", wrong))).await;
    let codes: Vec<String> = replies
        .iter()
        .map(|reply| reply.json()["error"]["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| *c == "invalid_api_key").count(),
        20,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| *c == "too_many_failed_authentications").count(),
        5
    );
    assert_eq!(app.get("/v1/operations", &customer.key).await.status, 429);
    start_of_a_second().await;
    assert_eq!(app.get("/v1/operations", &customer.key).await.status, 200);
}

#[tokio::test]
async fn the_local_server_caps_headers_connections_and_slow_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app_with(|config| config.max_connections = 3).await;
    let address = app.base.trim_start_matches("http://").to_owned();

    // Headers over the cap: 431, not half a megabyte read into memory.
    let huge = app
        .client
        .get(format!("{}/v1/operations", app.base))
        .header("X-Padding", "a".repeat(500_000))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 431);

    // A connection that sends nothing holds its slot only until the header deadline.
    let mut idle = tokio::net::TcpStream::connect(&address).await.unwrap();
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 64];
    let closed = tokio::time::timeout(std::time::Duration::from_secs(15), idle.read(&mut buffer))
        .await
        .expect("an idle connection was never closed");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(12));

    // When every slot is held by connections doing nothing, they are closed at once for the
    // next client, not at their deadline; a half-sent request is answered or closed too.
    let mut idle = vec![];
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    let mut slow = tokio::net::TcpStream::connect(&address).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let served = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        reqwest::Client::new().get(format!("{}/health", app.base)).send(),
    )
    .await
    .expect("a new client waited for idle connections' deadline")
    .unwrap();
    assert_eq!(served.status(), 200);
    for mut connection in idle {
        let closed = tokio::time::timeout(std::time::Duration::from_secs(1), connection.read(&mut buffer)).await;
        assert!(matches!(closed, Ok(Ok(0) | Err(_))), "{closed:?}");
    }
}

/// Connects to `app` from `local` (any address of 127.0.0.0/8 reaches the server), with a
/// receive buffer so small that an answer of megabytes stays unsent until it is read.
async fn connect_from(app: &TestApp, local: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    socket
        .connect(app.base.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap()
}

/// Sends a GET of `path` on `stream` and reads the whole answer's first line.
async fn first_line_of_get(stream: &mut tokio::net::TcpStream, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![];
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("no answer")
        .ok();
    String::from_utf8_lossy(&answer).lines().next().unwrap_or("").to_owned()
}

// The server's threads apart from the test's: building the pages would otherwise hold up the
// test's own clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_never_read_holds_its_connection_only_until_the_write_deadline() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app_with(|config| {
        config.max_connections = 8;
        config.max_connections_per_address = 4;
        config.write_timeout_ms = 2_500;
        config.rate_limit = 0;
    })
    .await;
    let customer = app.create_customer().await;
    // A page of about 8 MB: more than the sockets between server and reader buffer.
    let amounts = vec![1_000; 1_000];
    for _ in 0..40 {
        let created = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &amounts),
            )
            .await;
        assert_eq!(created.status, 201);
    }
    let page = format!(
        "GET /v1/operations?limit=100 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        customer.key
    );
    // An address's share of connections, each asking for the page and never reading it.
    let mut stuck = vec![];
    for _ in 0..4 {
        let mut connection = connect_from(&app, "127.0.0.2").await;
        connection.write_all(page.as_bytes()).await.unwrap();
        stuck.push(connection);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // One more from that address is closed at once; another address is served meanwhile.
    let mut over = connect_from(&app, "127.0.0.2").await;
    let mut byte = [0u8; 1];
    let refused = tokio::time::timeout(Duration::from_secs(2), over.read(&mut byte)).await;

    assert!(matches!(refused, Ok(Ok(0) | Err(_))), "{refused:?}");
    let health = tokio::time::timeout(
        Duration::from_secs(2),
        reqwest::Client::new().get(format!("{}/health", app.base)).send(),
    )
    .await
    .expect("/health waited")
    .unwrap();
    assert_eq!(health.status(), 200);
    // Past the write deadline the unread answers are dropped and their connections closed:
    // the address is served again.
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    let mut again = connect_from(&app, "127.0.0.2").await;
    assert_eq!(first_line_of_get(&mut again, "/health").await, "HTTP/1.1 200 OK");
    drop(stuck);
}

/// A client that sends its headers and then its body slowly, or never, holds its connection
/// only until the body's deadline (local mode), then is answered 408 and disconnected.
#[tokio::test]
async fn a_body_not_arrived_whole_by_its_deadline_is_answered_408() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app_with(|config| config.body_read_timeout_ms = 600).await;
    let customer = app.create_customer().await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let body = payout(&customer.id, "auto", &[1000]).to_string().into_bytes();
    // Sends the body in `pieces`, `gap` apart (none when `pieces` is 0), and reads the answer
    // as it comes, to the connection's close.
    let send = |key: &'static str, pieces: usize, gap: Duration| {
        let (address, body, secret) = (address.clone(), body.clone(), customer.key.clone());
        async move {
            let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            let (mut reader, mut writer) = stream.into_split();
            let head = format!(
                "POST /v1/operations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                 Authorization: Bearer {secret}\r\nContent-Type: application/json\r\n\
                 Idempotency-Key: {key}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            writer.write_all(head.as_bytes()).await.unwrap();
            let sending = tokio::spawn(async move {
                for piece in body.chunks(body.len().div_ceil(pieces.max(1))).take(pieces) {
                    tokio::time::sleep(gap).await;
                    if writer.write_all(piece).await.is_err() {
                        break; // answered and closed before the rest was sent
                    }
                }
                writer
            });
            let mut answer = vec![];
            let read = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer)).await;
            read.expect("the server neither answered nor closed").ok();
            sending.abort();
            String::from_utf8_lossy(&answer).into_owned()
        }
    };

    // A body that arrives in pieces, within the deadline, is served.
    let whole = send("pieces-in-time", 3, Duration::from_millis(100)).await;
    assert!(whole.starts_with("HTTP/1.1 201"), "{whole}");

    // Each piece soon after the last, but the whole body late: the deadline is for the body,
    // not for the gap between two reads.
    let started = Instant::now();
    let late = send("pieces-late", 8, Duration::from_millis(200)).await;
    assert!(late.starts_with("HTTP/1.1 408"), "{late}");
    assert!(late.contains("\"code\":\"body_timeout\""), "{late}");
    assert!(started.elapsed() >= Duration::from_millis(600));

    // A body that never comes holds its connection no longer either.
    let never = send("never", 0, Duration::ZERO).await;
    assert!(never.starts_with("HTTP/1.1 408"), "{never}");

    // Only the body that arrived made an operation.
    let listed = app.get("/v1/operations", &customer.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
}

/// Behind a trusted proxy, failed authentications are limited per client it forwarded for:
/// one client's flood does not lock out another behind the same proxy, and an address forged
/// on the left of the header does not get the flooding client out. Without the setting the
/// header is the client's own claim and changes nothing.
#[tokio::test]
async fn behind_a_trusted_proxy_failed_authentications_count_per_forwarded_client() {
    let wrong = "sk_test_0000000000000000000000000000000000000000";
    let from = |app: &TestApp, key: &str, forwarded: &str| {
        let request = app
            .client
            .get(format!("{}/v1/operations", app.base))
            .bearer_auth(key)
            .header("X-Forwarded-For", forwarded);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let proxied = spawn_app_with(|config| config.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    let customer = proxied.create_customer().await;
    start_of_a_second().await;
    let flood = futures_util::future::join_all((0..25).map(|_| from(&proxied, wrong, "203.0.113.7"))).await;
    assert!(flood.contains(&429), "{flood:?}");
    assert_eq!(from(&proxied, &customer.key, "198.51.100.9, 203.0.113.7").await, 429);
    assert_eq!(from(&proxied, &customer.key, "198.51.100.9").await, 200);

    let direct = spawn_app().await;
    let customer = direct.create_customer().await;
    start_of_a_second().await;
    futures_util::future::join_all((0..25).map(|_| from(&direct, wrong, "203.0.113.7"))).await;
    assert_eq!(from(&direct, &customer.key, "198.51.100.9").await, 429);
}

#[tokio::test]
async fn a_rail_report_no_rail_could_make_is_refused_and_a_repeated_fact_is_not() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let (id, txn) = confirmed_payout(&app, &customer, 41_000).await;
    let report = |n: &str, state: &str| json!({"id": format!("rpt_possible_{n}"), "rail": "psp-local:sandbox", "transaction_id": txn["id"], "state": state, "code": "x"});
    // Confirmed money cannot have failed by a report (only come back).
    let failed = send_report(&app, &report("1", "failed")).await;
    assert_eq!(failed.status(), 409);
    let error = failed.json::<Value>().await.unwrap()["error"].clone();
    assert_eq!(error["code"], "report_contradicts_transaction", "{error}");
    // The same outcome again, or pending, tells nothing new: answered, nothing changed.
    for (n, state) in [("2", "confirmed"), ("3", "pending")] {
        let same = send_report(&app, &report(n, state)).await;
        assert_eq!(same.status(), 200, "{state}");
        assert_eq!(same.json::<Value>().await.unwrap()["status"], "confirmed");
    }
    let returned = send_report(&app, &report("4", "returned")).await;
    assert_eq!(returned.json::<Value>().await.unwrap()["status"], "returned");
    // Returned money cannot then be confirmed.
    let confirmed = send_report(&app, &report("5", "confirmed")).await;
    assert_eq!(confirmed.status(), 409);
    let path = app.path_of(&customer.key, &id, txn["id"].as_str().unwrap()).await;
    assert_eq!(path.last().map(String::as_str), Some("returned"), "{path:?}");
}
