use ops_tests::{payout, spawn_app, the_one_created, Customer, Reply, TestApp, ADMIN_KEY};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn a_repeated_request_is_replayed_byte_for_byte() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let body = payout(&customer.id, "two_step", &[10_000]);
    let first = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("payroll-2026-11"),
            Some(&body),
        )
        .await;
    assert_eq!(first.status, 201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let second = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("payroll-2026-11"),
            Some(&body),
        )
        .await;
    assert_eq!(second.status, 201);
    assert_eq!(second.headers["idempotent-replayed"], "true");
    assert_eq!(second.bytes, first.bytes);
    let list = app.get("/v1/operations", &customer.key).await.json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_reused_key_with_another_body_is_refused_and_creates_nothing() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let first = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("k-1"),
            Some(&payout(&customer.id, "auto", &[1])),
        )
        .await;
    assert_eq!(first.status, 201);
    let other = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("k-1"),
            Some(&payout(&customer.id, "auto", &[2])),
        )
        .await;
    let error = other.error(422);
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("idempotency_error"), Some("idempotency_key_reused"))
    );
    // The same key on another endpoint is another request too.
    let elsewhere = app
        .send(
            Method::POST,
            "/v1/api_keys",
            Some(&customer.key),
            Some("k-1"),
            Some(&json!({"scopes": ["operations:read"]})),
        )
        .await;
    assert_eq!(elsewhere.error(422)["code"], "idempotency_key_reused");
    // So is the same key and body on one route for another resource: the path as routed,
    // its ids included, is part of what the key stands for.
    let user = json!({"name": "Ana", "email": "ana@acme.example", "roles": ["maker"]});
    let users_of = |id: &str| format!("/v1/customers/{id}/users");
    let other = app.create_customer().await;
    let made = app
        .send(
            Method::POST,
            &users_of(&customer.id),
            Some(ADMIN_KEY),
            Some("u-1"),
            Some(&user),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    let for_another = app
        .send(
            Method::POST,
            &users_of(&other.id),
            Some(ADMIN_KEY),
            Some("u-1"),
            Some(&user),
        )
        .await;
    assert_eq!(for_another.error(422)["code"], "idempotency_key_reused");
    assert_eq!(
        app.get("/v1/operations", &customer.key).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn keys_are_scoped_per_customer() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let a = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&acme.key),
            Some("shared"),
            Some(&payout(&acme.id, "auto", &[1])),
        )
        .await;
    let b = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&globex.key),
            Some("shared"),
            Some(&payout(&globex.id, "auto", &[1])),
        )
        .await;
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (201, 201));
    assert_ne!(a.id(), b.id());
}

#[tokio::test]
async fn twenty_concurrent_requests_with_one_key_create_exactly_one_operation() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let body = payout(&customer.id, "auto", &[777]);
    let replies = futures_util::future::join_all((0..20).map(|_| {
        app.send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("burst"),
            Some(&body),
        )
    }))
    .await;
    let created = the_one_created(&replies);
    let list = app.get("/v1/operations?limit=100", &customer.key).await.json();
    assert_eq!(list["data"][0]["id"], created.as_str());
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "exactly one operation exists"
    );
}

#[tokio::test]
async fn a_request_refused_before_any_effect_leaves_the_key_free() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let bad = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("fix-me"),
            Some(&payout(&customer.id, "no_such_flow", &[1])),
        )
        .await;
    assert_eq!(bad.error(400)["param"], "workflow");
    let fixed = app
        .send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some("fix-me"),
            Some(&payout(&customer.id, "auto", &[1])),
        )
        .await;
    assert_eq!(fixed.status, 201, "{}", fixed.json());
}

/// Local mode's background sweep deletes records past their 24 h, as DynamoDB's TTL does on
/// AWS, so the SQLite file does not keep every response it ever sent.
#[tokio::test]
async fn records_past_their_retention_are_deleted_by_the_background_sweep() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    async fn create(app: &TestApp, customer: &Customer, key: &str) -> Reply {
        let body = payout(&customer.id, "auto", &[1]);
        app.send(
            Method::POST,
            "/v1/operations",
            Some(&customer.key),
            Some(key),
            Some(&body),
        )
        .await
    }
    assert_eq!(create(&app, &customer, "day-one").await.status, 201);
    app.clock.advance(time::Duration::hours(25));
    let fresh = create(&app, &customer, "day-two").await;
    assert_eq!(fresh.status, 201);
    let database = app.data_dir.path().join("ops-test.sqlite");
    let keys = || -> Vec<String> {
        let connection = rusqlite::Connection::open(&database).unwrap();
        let mut statement = connection.prepare("SELECT key FROM idempotency ORDER BY key").unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    // The customer's and its keys' creates are remembered too, from before the clock moved.
    let before = keys();
    assert!(
        before.len() > 2 && before.contains(&"day-one".to_string()),
        "{before:?}"
    );

    let app = app.restart_with(|config| config.worker = true).await;
    let mut left = keys();
    for _ in 0..100 {
        if left == ["day-two"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = keys();
    }
    assert_eq!(left, ["day-two"]);
    let again = create(&app, &customer, "day-two").await;
    assert_eq!((again.status, again.bytes), (fresh.status, fresh.bytes));
}

#[tokio::test]
async fn creates_require_a_valid_idempotency_key() {
    let app = spawn_app().await;
    let missing = app
        .send(
            Method::POST,
            "/v1/customers",
            Some(ADMIN_KEY),
            None,
            Some(&json!({"name": "x"})),
        )
        .await;
    let error = missing.error(400);
    assert_eq!(
        (error["code"].as_str(), error["param"].as_str()),
        (Some("idempotency_key_missing"), Some("Idempotency-Key"))
    );
    let too_long = "k".repeat(256);
    let long = app
        .send(
            Method::POST,
            "/v1/customers",
            Some(ADMIN_KEY),
            Some(&too_long),
            Some(&json!({"name": "x"})),
        )
        .await;
    assert_eq!(long.error(400)["code"], "idempotency_key_invalid");
}

#[tokio::test]
async fn replays_of_key_creation_withhold_the_secret() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let body = json!({"scopes": ["operations:read"]});
    let first = app
        .send(
            Method::POST,
            "/v1/api_keys",
            Some(&customer.key),
            Some("key-1"),
            Some(&body),
        )
        .await
        .json();
    let replay = app
        .send(
            Method::POST,
            "/v1/api_keys",
            Some(&customer.key),
            Some("key-1"),
            Some(&body),
        )
        .await;
    assert_eq!(replay.status, 201);
    assert_eq!(replay.json()["id"], first["id"]);
    assert!(first["secret"].as_str().unwrap().len() > 20);
    assert_eq!(replay.json()["secret"], "sk_test_…withheld");
}
