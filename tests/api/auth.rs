use ops_tests::{payout, spawn_app, spawn_app_with, Reply, TestApp, ADMIN_KEY};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn missing_malformed_unknown_and_other_environment_keys_are_refused() {
    let app = spawn_app().await;
    let cases = [
        (None, "missing_api_key"),
        (
            Some("sk_test_0000000000000000000000000000000000000000"),
            "invalid_api_key",
        ),
        (Some("pk_test_whatever"), "invalid_api_key"),
        // The same admin key, minted for production: refused before any lookup.
        (
            Some("sk_live_platform_admin_for_tests_0000000000"),
            "api_key_wrong_environment",
        ),
    ];
    for (key, code) in cases {
        let reply = app.send(Method::GET, "/v1/operations", key, None, None).await;
        let error = reply.error(401);
        assert_eq!(
            (error["type"].as_str(), error["code"].as_str()),
            (Some("authentication_error"), Some(code)),
            "{key:?}"
        );
    }
    let raw = app
        .client
        .get(format!("{}/v1/operations", app.base))
        .header("Authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 401);
}

#[tokio::test]
async fn keys_are_shown_once_and_stored_only_as_hashes() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let created = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json();
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("sk_test_"));
    assert_eq!(created["object"], "api_key");
    assert_eq!(created["environment"], "test");
    assert_eq!(created["customer_id"], customer.id.as_str());
    assert!(created.get("secret_hash").is_none());
    let database = std::fs::read(app.data_dir.path().join("ops-test.sqlite")).unwrap();
    let wal = std::fs::read(app.data_dir.path().join("ops-test.sqlite-wal")).unwrap_or_default();
    let needle = secret.as_bytes();
    for bytes in [&database, &wal] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "a secret reached the disk"
        );
    }
}

#[tokio::test]
async fn rotation_keeps_the_old_key_until_its_expiry_and_revocation_is_immediate() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let first = app
        .post(
            "/v1/api_keys",
            &customer.key,
            json!({"name": "Payroll integration", "scopes": ["operations:read"]}),
        )
        .await
        .json();
    assert_eq!(first["name"], "Payroll integration");
    let (old_id, old_secret) = (first["id"].as_str().unwrap(), first["secret"].as_str().unwrap());
    for (name, code) in [
        (json!(" "), "parameter_invalid_empty"),
        (json!("x".repeat(101)), "string_too_long"),
    ] {
        let refused = app
            .post(
                "/v1/api_keys",
                &customer.key,
                json!({"name": name, "scopes": ["operations:read"]}),
            )
            .await;
        let error = refused.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some("name"), Some(code))
        );
    }

    // Default overlap: both keys work.
    let rotated = app
        .post(&format!("/v1/api_keys/{old_id}/rotate"), &customer.key, json!({}))
        .await;
    assert_eq!(rotated.status, 201, "{}", rotated.json());
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, old_secret);
    assert_eq!(app.get("/v1/operations", old_secret).await.status, 200);
    assert_eq!(app.get("/v1/operations", &new_secret).await.status, 200);
    assert_eq!(rotated.json()["scopes"], json!(["operations:read"]));
    // The successor keeps the name, so a list still says what each key is for.
    assert_eq!(rotated.json()["name"], "Payroll integration");
    let listed = app.get("/v1/api_keys?limit=100", &customer.key).await.json();
    let named: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["name"] == "Payroll integration")
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(named, [rotated.json()["id"].as_str().unwrap(), old_id]);
    let history = app.history(&format!("/v1/api_keys/{old_id}"), &customer.key).await;
    assert_eq!(history[0]["cause"]["message"], "API key 'Payroll integration' created");

    // Ending the overlap now: the old key gets api_key_expired.
    let second = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json();
    let rotated_now = app
        .post(
            &format!("/v1/api_keys/{}/rotate", second["id"].as_str().unwrap()),
            &customer.key,
            json!({"expires_in": 0}),
        )
        .await;
    assert_eq!(rotated_now.status, 201);
    let expired = app.get("/v1/operations", second["secret"].as_str().unwrap()).await;
    assert_eq!(expired.error(401)["code"], "api_key_expired");
    let bad_overlap = app
        .post(
            &format!("/v1/api_keys/{old_id}/rotate"),
            &customer.key,
            json!({"expires_in": -1}),
        )
        .await;
    assert_eq!(bad_overlap.error(400)["param"], "expires_in");

    let new_id = rotated.json()["id"].as_str().unwrap().to_owned();
    let revoked = app.delete(&format!("/v1/api_keys/{new_id}"), &customer.key).await;
    assert_eq!(revoked.status, 200);
    assert!(revoked.json()["revoked_at"].is_string());
    assert_eq!(
        app.get("/v1/operations", &new_secret).await.error(401)["code"],
        "api_key_revoked"
    );
}

#[tokio::test]
async fn a_key_made_to_expire_stops_by_itself_and_rotating_it_does_not_extend_it() {
    use ops_domain::ports::Clock;
    use time::format_description::well_known::Rfc3339;
    use time::{Duration, OffsetDateTime};
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let now = app.clock.now();
    let text = |at: OffsetDateTime| at.format(&Rfc3339).unwrap();
    let time_of = |value: &serde_json::Value| OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap();
    let create = |expires_at: String| {
        app.post(
            "/v1/api_keys",
            &customer.key,
            json!({"scopes": ["operations:read"], "expires_at": expires_at}),
        )
    };
    for (expires_at, code) in [
        (text(now - Duration::minutes(1)), "out_of_range"),
        (text(now + Duration::days(3 * 366 + 1)), "out_of_range"),
        ("next month".to_string(), "invalid_time"),
    ] {
        let refused = create(expires_at.clone()).await.error(400);
        assert_eq!(
            (&refused["param"], &refused["code"]),
            (&json!("expires_at"), &json!(code)),
            "{expires_at}"
        );
    }

    let ends = now + Duration::days(30);
    let made = create(text(ends)).await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(time_of(&made.json()["expires_at"]), ends);
    let (id, secret) = (
        made.json()["id"].as_str().unwrap().to_owned(),
        made.json()["secret"].as_str().unwrap().to_owned(),
    );
    assert_eq!(app.get("/v1/operations", &secret).await.status, 200);

    // Rotated with the default overlap of a day: the successor keeps the expiry the key was
    // made with, and the old key stops after the overlap.
    let rotated = app
        .post(&format!("/v1/api_keys/{id}/rotate"), &customer.key, json!({}))
        .await;
    assert_eq!(rotated.status, 201, "{}", rotated.json());
    assert_eq!(time_of(&rotated.json()["expires_at"]), ends);
    let successor = rotated.json()["secret"].as_str().unwrap().to_owned();
    app.clock.advance(Duration::days(2));
    assert_eq!(
        app.get("/v1/operations", &secret).await.error(401)["code"],
        "api_key_expired"
    );
    assert_eq!(app.get("/v1/operations", &successor).await.status, 200);
    app.clock.advance(Duration::days(28));
    assert_eq!(
        app.get("/v1/operations", &successor).await.error(401)["code"],
        "api_key_expired"
    );

    let history = app.history(&format!("/v1/api_keys/{id}"), &customer.key).await;
    assert_eq!(
        history[0]["cause"]["message"],
        format!("API key created, to expire at {}", text(ends)),
        "{history:?}"
    );
}

#[tokio::test]
async fn a_keys_history_says_who_minted_rotated_and_revoked_it_after_it_is_revoked_too() {
    ops_tests::scenarios::a_keys_history_names_each_change_and_its_actor(&spawn_app().await.api).await;
}

#[tokio::test]
async fn a_users_roles_and_status_apply_from_their_next_request_and_are_in_their_history() {
    ops_tests::scenarios::a_users_roles_and_status_apply_from_their_next_request(&spawn_app().await.api).await;
}

#[tokio::test]
async fn a_customers_users_each_have_an_email_of_their_own() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let users = format!("/v1/customers/{}/users", acme.id);
    let ana = json!({"name": "Ana", "email": "ana@acme.example", "roles": ["maker"]});
    let made = app.post(&users, &acme.key, ana.clone()).await;
    assert_eq!(made.status, 201, "{}", made.json());
    // The same person again, as an approver who could sign what she makes.
    let again = json!({"name": "Ana B.", "email": "ANA@Acme.Example", "roles": ["approver"]});
    let refused = app.post(&users, &acme.key, again.clone()).await.error(409);
    assert_eq!(
        (refused["code"].as_str(), refused["param"].as_str()),
        (Some("email_in_use"), Some("email")),
        "{refused}"
    );
    let listed = app.get(&users, &acme.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    // Deactivated, she still holds it: making her active again is how she comes back.
    let path = format!("{users}/{}", made.id());
    let deactivated = app.post(&path, &acme.key, json!({"status": "deactivated"})).await;
    assert_eq!(deactivated.status, 200, "{}", deactivated.json());
    app.post(&users, &acme.key, again.clone()).await.error(409);
    // Another customer's user may have it.
    let globex = app.create_customer().await;
    let theirs = app
        .post(&format!("/v1/customers/{}/users", globex.id), &globex.key, again)
        .await;
    assert_eq!(theirs.status, 201, "{}", theirs.json());
}

#[tokio::test]
async fn scopes_and_customers_fence_every_key() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let reader = app
        .post("/v1/api_keys", &acme.key, json!({"scopes": ["operations:read"]}))
        .await
        .json()["secret"]
        .as_str()
        .unwrap()
        .to_owned();

    // Missing scope: 403.
    let write = app
        .post("/v1/operations", &reader, payout(&acme.id, "auto", &[1]))
        .await;
    let error = write.error(403);
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("permission_error"), Some("missing_scope"))
    );
    let approve = app.post("/v1/operations/op_01abc/approve", &reader, json!({})).await;
    assert_eq!(approve.error(403)["code"], "missing_scope");
    // Only the platform creates customers.
    assert_eq!(
        app.post("/v1/customers", &acme.key, json!({"name": "x"}))
            .await
            .error(403)["code"],
        "platform_admin_required"
    );
    // A customer's key cannot grant what it lacks, nor the admin scope.
    let escalate = app
        .post("/v1/api_keys", &reader, json!({"scopes": ["operations:write"]}))
        .await;
    assert_eq!(escalate.error(403)["code"], "missing_scope");
    let admin = app.post("/v1/api_keys", &acme.key, json!({"scopes": ["admin"]})).await;
    assert_eq!(admin.error(400)["param"], "scopes[0]");

    // Another customer's objects do not exist for you: 404, never 403.
    let theirs = app
        .post("/v1/operations", &globex.key, payout(&globex.id, "two_step", &[5]))
        .await
        .id();
    for path in [
        format!("/v1/operations/{theirs}"),
        format!("/v1/operations/{theirs}/history"),
    ] {
        let error = app.get(&path, &acme.key).await.error(404);
        assert_eq!(error["code"], "resource_missing");
    }
    assert_eq!(
        app.post(&format!("/v1/operations/{theirs}/cancel"), &acme.key, json!({}))
            .await
            .error(404)["code"],
        "resource_missing"
    );
    let for_them = app
        .post("/v1/operations", &acme.key, payout(&globex.id, "auto", &[1]))
        .await;
    assert_eq!(for_them.error(404)["param"], "customer_id");
    let their_users = app
        .post(
            &format!("/v1/customers/{}/users", globex.id),
            &acme.key,
            json!({"name": "x", "email": "x@y.io", "roles": ["maker"]}),
        )
        .await;
    assert_eq!(their_users.error(404)["param"], "customer_id");
    // The platform admin reaches everyone.
    assert_eq!(
        app.get(&format!("/v1/operations/{theirs}"), ADMIN_KEY).await.status,
        200
    );
}

#[tokio::test]
async fn decisions_need_a_user_with_the_role() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let viewer = app.add_member(&customer, &["viewer"], &["operations:approve"]).await;
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[5]))
        .await
        .id();
    // The customer's key has the scope but signs for no user.
    let keyonly = app
        .post(&format!("/v1/operations/{id}/approve"), &customer.key, json!({}))
        .await;
    assert_eq!(keyonly.error(403)["code"], "user_required");
    let wrong_role = app
        .post(&format!("/v1/operations/{id}/approve"), &viewer.key, json!({}))
        .await;
    assert_eq!(wrong_role.error(403)["code"], "role_required");
    let still = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
    assert_eq!(
        (still["status"].clone(), still["approvals"].clone()),
        (json!("pending_approval"), json!([]))
    );
}

async fn send_create(app: &TestApp, key: &str, (idempotency_key, body): &(String, serde_json::Value)) -> Reply {
    app.post_keyed("/v1/operations", key, idempotency_key, body).await
}

#[tokio::test]
async fn a_key_over_its_rate_limit_is_refused_429_without_effect_and_other_keys_go_on() {
    let app = spawn_app_with(|config| config.rate_limit = 3).await;
    let customer = app.create_customer().await;
    let other = app.add_member(&customer, &["viewer"], &["operations:read"]).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let creates: Vec<(String, serde_json::Value)> = (0..8)
        .map(|i| (format!("burst-{i}"), payout(&customer.id, "auto", &[100 + i])))
        .collect();
    let replies =
        futures_util::future::join_all(creates.iter().map(|create| send_create(&app, &customer.key, create))).await;
    let other_key = app.get("/v1/operations", &other.key).await;
    assert_eq!(
        other_key.status,
        200,
        "another key is not held up: {}",
        other_key.json()
    );

    let refused: Vec<usize> = (0..replies.len()).filter(|&i| replies[i].status == 429).collect();
    let created = replies.iter().filter(|reply| reply.status == 201).count();
    assert!(
        !refused.is_empty(),
        "eight creates at once under a limit of three per second"
    );
    assert_eq!(created + refused.len(), creates.len());
    for &i in &refused {
        let error = replies[i].error(429);
        assert_eq!(
            (error["type"].as_str(), error["code"].as_str()),
            (Some("rate_limit_error"), Some("rate_limit_exceeded"))
        );
        assert_eq!(replies[i].headers["retry-after"], "1");
        assert_eq!(rate_headers(&replies[i]), ["3", "0", "1"]);
    }
    for reply in replies.iter().filter(|reply| reply.status == 201) {
        let [limit, remaining, reset] = rate_headers(reply);
        assert_eq!((limit, reset), ("3", "1"));
        assert!(["0", "1", "2"].contains(&remaining), "{remaining}");
    }

    // A refused request did nothing: its idempotency key is free, and retried after the
    // advertised second it creates the operation.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let retried = send_create(&app, &customer.key, &creates[refused[0]]).await;
    assert_eq!(retried.status, 201, "{}", retried.json());
    assert!(retried.headers.get("idempotent-replayed").is_none());
    let listed = app.get("/v1/operations?limit=100", &customer.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), created + 1);
}

/// `RateLimit-Limit`, `-Remaining` and `-Reset` of an answer.
fn rate_headers(reply: &Reply) -> [&str; 3] {
    ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"].map(|name| {
        reply
            .headers
            .get(name)
            .map(|value| value.to_str().unwrap())
            .unwrap_or_else(|| panic!("no {name}"))
    })
}

/// Each answer tells its key the room it has left this second, so a client paces itself
/// before it is refused; a service that limits nothing sends none.
#[tokio::test]
async fn each_answer_says_how_many_requests_the_key_has_left_this_second() {
    let app = spawn_app_with(|config| config.rate_limit = 3).await;
    let customer = app.create_customer().await;
    // At the start of a wall-clock second, so the four reads fall in one window.
    let into = time::OffsetDateTime::now_utc().nanosecond();
    tokio::time::sleep(std::time::Duration::from_nanos(
        u64::from(1_000_000_000 - into) + 20_000_000,
    ))
    .await;
    let mut seen = vec![];
    for _ in 0..4 {
        let reply = app.get("/v1/operations", &customer.key).await;
        seen.push((reply.status.as_u16(), rate_headers(&reply).map(str::to_owned)));
    }
    let told = |status: u16, remaining: &str| (status, ["3", remaining, "1"].map(str::to_owned));
    assert_eq!(seen, [told(200, "2"), told(200, "1"), told(200, "0"), told(429, "0")]);

    let unlimited = spawn_app_with(|config| config.rate_limit = 0).await;
    let customer = unlimited.create_customer().await;
    let reply = unlimited.get("/v1/operations", &customer.key).await;
    assert_eq!(reply.status, 200);
    assert!(reply.headers.get("ratelimit-limit").is_none());
}

#[tokio::test]
async fn customers_are_listed_for_the_platform_and_each_reads_its_own() {
    ops_tests::scenarios::customers_are_listed_for_the_platform_and_each_reads_its_own(&spawn_app().await.api).await;
}

#[tokio::test]
async fn a_suspended_customers_keys_are_refused_until_it_is_reactivated() {
    ops_tests::scenarios::a_suspended_customers_keys_are_refused_until_it_is_reactivated(&spawn_app().await.api).await;
}

#[tokio::test]
async fn a_customers_metadata_is_kept_and_merged() {
    ops_tests::scenarios::a_customers_metadata_is_kept_and_merged(&spawn_app().await.api).await;
}

/// A new deployment has no key to make keys with: its first platform admin key is minted once
/// (the stack's `first-platform-key` function), its secret shown that once, and works as the
/// platform's admin; once the platform has a key, no second is minted that way.
#[tokio::test]
async fn a_new_deployments_first_platform_key_is_minted_once() {
    let app = spawn_app_with(|config| config.bootstrap_admin_key = None).await;
    let service = app.driver().service().clone();
    // Two invocations at once (a retried deploy step, two operators): one key, one secret.
    let (first, second) = tokio::join!(service.first_platform_key(), service.first_platform_key());
    let (minted, refused): (Vec<_>, Vec<_>) = [first, second].into_iter().partition(Result::is_ok);
    assert_eq!((minted.len(), refused.len()), (1, 1), "{refused:?}");
    let (id, secret) = minted.into_iter().next().unwrap().unwrap();
    assert!(secret.starts_with("sk_test_"), "{secret}");
    let created = app.post("/v1/customers", &secret, json!({"name": "First Ltd"})).await;
    assert_eq!(created.status, 201, "{}", created.json());
    let listed = app.get("/v1/api_keys", &secret).await.json();
    assert_eq!(listed["data"][0]["id"], id.as_str());
    assert_eq!(listed["data"][0]["scopes"], json!(["admin"]));

    let refused = service.first_platform_key().await.unwrap_err();
    assert!(
        matches!(
            refused,
            ops_domain::DomainError::InvalidState {
                code: "platform_key_exists",
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        app.get("/v1/api_keys", &secret).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
