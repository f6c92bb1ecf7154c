//! Scenarios told through the API alone, run on both backends: the embedded store
//! (`tests/api`) and the AWS adapters on the emulator (`tests/aws`).

use crate::{Api, ADMIN_KEY};
use serde_json::{json, Value};

/// Who minted, rotated and revoked a key, each in its history (and its successor's), read after
/// the keys are revoked; fenced as the keys are.
pub async fn a_keys_history_names_each_change_and_its_actor(app: &Api) {
    let customer = app.create_customer().await;
    let minted = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json();
    let (first, first_secret) = (minted["id"].as_str().unwrap(), minted["secret"].as_str().unwrap());
    let path = format!("/v1/api_keys/{first}");
    // The key rotates itself; the customer's admin key then revokes it, and its successor with it.
    let rotated = app.post(&format!("{path}/rotate"), first_secret, json!({})).await;
    assert_eq!(rotated.status, 201, "{}", rotated.json());
    let second = rotated.json()["id"].as_str().unwrap().to_owned();
    let revoked = app.delete(&path, &customer.key).await;
    assert_eq!(revoked.status, 200);

    let summary = |entries: Vec<Value>| {
        entries
            .iter()
            .map(|e| {
                assert_eq!(e["entity_type"], "api_key");
                let field = |name: &str| e[name].as_str().unwrap_or_else(|| panic!("{e}")).to_owned();
                let cause = |name: &str| e["cause"][name].as_str().unwrap_or_else(|| panic!("{e}")).to_owned();
                (
                    field("entity_id"),
                    field("action"),
                    cause("code"),
                    e["cause"]["actor"]["id"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let first_history = summary(app.history(&path, &customer.key).await);
    assert_eq!(first_history.len(), 3, "{first_history:?}");
    assert_eq!(
        first_history
            .iter()
            .map(|(id, action, code, _)| (id.as_str(), action.as_str(), code.as_str()))
            .collect::<Vec<_>>(),
        [
            (first, "created", "api_key_created"),
            (first, "rotated", "api_key_rotated"),
            (first, "revoked", "api_key_revoked"),
        ]
    );
    assert_eq!(first_history[1].3, first, "the key rotated itself");
    assert_eq!(
        first_history[0].3, first_history[2].3,
        "the admin key minted and revoked it"
    );
    let second_history = summary(app.history(&format!("/v1/api_keys/{second}"), &customer.key).await);
    assert_eq!(
        second_history
            .iter()
            .map(|(id, action, code, _)| (id.as_str(), action.as_str(), code.as_str()))
            .collect::<Vec<_>>(),
        [
            (second.as_str(), "created", "api_key_rotated"),
            (second.as_str(), "revoked", "api_key_revoked"),
        ]
    );

    // Another customer's admin sees no such key; a key without users:manage reads no other key's.
    let other = app.create_customer().await;
    let history = format!("{path}/history");
    assert_eq!(
        app.get(&history, &other.key).await.error(404)["code"],
        "resource_missing"
    );
    let reader = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json();
    let reader_secret = reader["secret"].as_str().unwrap();
    assert_eq!(
        app.get(&history, reader_secret).await.error(403)["code"],
        "missing_scope"
    );
    // A key reads its own.
    let own = app
        .history(
            &format!("/v1/api_keys/{}", reader["id"].as_str().unwrap()),
            reader_secret,
        )
        .await;
    assert_eq!(own.len(), 1);
}

/// A customer's admin lists its users, changes one's roles, deactivates and reactivates them:
/// each change applies from the user's key's next request and is in the user's history with
/// what the user then was; another customer cannot see or change them.
pub async fn a_users_roles_and_status_apply_from_their_next_request(app: &Api) {
    let customer = app.create_customer().await;
    let member = app
        .add_member(&customer, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let users = format!("/v1/customers/{}/users", customer.id);
    let user_path = format!("{users}/{}", member.user_id);
    let listed = app.get(&users, &customer.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        (&listed["data"][0]["id"], &listed["data"][0]["status"]),
        (&json!(member.user_id), &json!("active"))
    );
    assert_eq!(app.get("/v1/operations", &member.key).await.status, 200);

    let changed = app.post(&user_path, &customer.key, json!({"roles": ["viewer"]})).await;
    assert_eq!(changed.status, 200, "{}", changed.json());
    assert_eq!(changed.json()["roles"], json!(["viewer"]));
    let deactivated = app
        .post(&user_path, &customer.key, json!({"status": "deactivated"}))
        .await;
    assert_eq!(deactivated.json()["status"], "deactivated");
    assert_eq!(app.get(&user_path, &customer.key).await.json(), deactivated.json());
    let refused = app.get("/v1/operations", &member.key).await.error(401);
    assert_eq!(refused["code"], "user_deactivated");
    assert_eq!(
        app.get(&users, &customer.key).await.json()["data"][0]["status"],
        "deactivated"
    );
    let reactivated = app.post(&user_path, &customer.key, json!({"status": "active"})).await;
    assert_eq!(reactivated.json()["status"], "active");
    assert_eq!(app.get("/v1/operations", &member.key).await.status, 200);

    let history = app.history(&user_path, &customer.key).await;
    let steps: Vec<_> = history
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["cause"]["code"].as_str().unwrap(),
                e["details"]["roles"].clone(),
                e["details"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("created", "user_created", json!(["approver"]), "active"),
            ("updated", "user_updated", json!(["viewer"]), "active"),
            ("deactivated", "user_deactivated", json!(["viewer"]), "deactivated"),
            ("reactivated", "user_reactivated", json!(["viewer"]), "active"),
        ]
    );

    // Nothing to change is a 400 naming what to give; so is a status that does not exist.
    let empty = app.post(&user_path, &customer.key, json!({})).await.error(400);
    assert_eq!(empty["code"], "parameter_missing");
    let unknown = app
        .post(&user_path, &customer.key, json!({"status": "gone"}))
        .await
        .error(400);
    assert_eq!(unknown["param"], "status", "{unknown}");
    // A key cannot shut out its own user.
    let admin = app.add_member(&customer, &["admin"], &["users:manage"]).await;
    let own = format!("{users}/{}", admin.user_id);
    let own_refused = app
        .post(&own, &admin.key, json!({"status": "deactivated"}))
        .await
        .error(409);
    assert_eq!(own_refused["code"], "user_is_caller");
    assert_eq!(
        app.get(&users, &admin.key).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // A page at a time, newest first: the admin, then the member.
    let first = app.get(&format!("{users}?limit=1"), &admin.key).await.json();
    assert_eq!(
        (&first["data"][0]["id"], &first["has_more"]),
        (&json!(admin.user_id), &json!(true)),
        "{first}"
    );
    let next = app
        .get(&format!("{users}?limit=1&starting_after={}", admin.user_id), &admin.key)
        .await
        .json();
    assert_eq!(
        (&next["data"][0]["id"], &next["has_more"]),
        (&json!(member.user_id), &json!(false)),
        "{next}"
    );
    let malformed = app
        .get(&format!("{users}?starting_after=key_1"), &admin.key)
        .await
        .error(400);
    assert_eq!(
        (&malformed["param"], &malformed["code"]),
        (&json!("starting_after"), &json!("invalid_id"))
    );

    // Another customer's key sees neither the list nor the user, and cannot reach the user
    // through its own customer either.
    let other = app.create_customer().await;
    assert_eq!(app.get(&users, &other.key).await.error(404)["param"], "customer_id");
    assert_eq!(app.get(&user_path, &other.key).await.status, 404);
    assert_eq!(
        app.post(&user_path, &other.key, json!({"status": "deactivated"}))
            .await
            .status,
        404
    );
    let through_own = format!("/v1/customers/{}/users/{}", other.id, member.user_id);
    assert_eq!(
        app.post(&through_own, &other.key, json!({"status": "deactivated"}))
            .await
            .status,
        404
    );
    assert_eq!(app.get(&format!("{through_own}/history"), &other.key).await.status, 404);
    assert_eq!(app.get("/v1/operations", &member.key).await.status, 200);
}

/// The platform lists its customers newest first, a page at a time, and reads any; a
/// customer's key reads its own record only and cannot list the others.
pub async fn customers_are_listed_for_the_platform_and_each_reads_its_own(app: &Api) {
    let made = [
        app.create_customer().await,
        app.create_customer().await,
        app.create_customer().await,
    ];
    // Other tests may make customers meanwhile: the three are read in order among them.
    let page = app
        .get(
            &format!("/v1/customers?limit=100&starting_after={}", made[2].id),
            ADMIN_KEY,
        )
        .await
        .json();
    let listed: Vec<&str> = page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let at = |id: &str| listed.iter().position(|listed| *listed == id);
    assert!(at(&made[2].id).is_none(), "a page starts after its start");
    assert!(
        at(&made[1].id).unwrap() < at(&made[0].id).unwrap(),
        "newest first: {listed:?}"
    );
    let one = app.get("/v1/customers?limit=1", ADMIN_KEY).await.json();
    assert_eq!(
        (one["data"].as_array().unwrap().len(), &one["has_more"]),
        (1, &json!(true))
    );

    let own = format!("/v1/customers/{}", made[0].id);
    let read = app.get(&own, &made[0].key).await;
    assert_eq!(read.status, 200, "{}", read.json());
    assert_eq!(
        (&read.json()["object"], &read.json()["name"], &read.json()["status"]),
        (&json!("customer"), &json!("Acme Payroll"), &json!("active"))
    );
    assert_eq!(app.get(&own, ADMIN_KEY).await.json(), read.json());
    assert_eq!(app.get(&own, &made[1].key).await.error(404)["code"], "resource_missing");
    let refused = app.get("/v1/customers", &made[0].key).await.error(403);
    assert_eq!(refused["code"], "platform_only");
    let malformed = app
        .get("/v1/customers?starting_after=usr_1", ADMIN_KEY)
        .await
        .error(400);
    assert_eq!(
        (&malformed["param"], &malformed["code"]),
        (&json!("starting_after"), &json!("invalid_id"))
    );

    // One status's customers, as a list of their own: a suspension moves a customer into the
    // suspended list and out of the active one.
    let suspension = json!({"status": "suspended", "reason": "Offboarding"});
    let suspended = app
        .post(&format!("/v1/customers/{}", made[1].id), ADMIN_KEY, suspension)
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.json());
    let ids_in = |status: &'static str| async move {
        let page = app
            .get(&format!("/v1/customers?status={status}&limit=100"), ADMIN_KEY)
            .await
            .json();
        let listed: Vec<String> = page["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"))
            .iter()
            .inspect(|c| assert_eq!(c["status"], status, "{c}"))
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        listed
    };
    let (suspended, active) = (ids_in("suspended").await, ids_in("active").await);
    assert!(
        suspended.contains(&made[1].id) && !active.contains(&made[1].id),
        "{suspended:?}"
    );
    assert!(
        active.contains(&made[0].id) && active.contains(&made[2].id),
        "{active:?}"
    );
    let unknown = app.get("/v1/customers?status=closed", ADMIN_KEY).await.error(400);
    assert_eq!(
        (&unknown["param"], &unknown["code"]),
        (&json!("status"), &json!("invalid_status"))
    );
}

/// A platform admin suspends a customer: its keys are refused from their next request, with
/// nothing else changed, while the platform still reads it and acts for it; reactivated, the
/// keys work again. Each change is in the customer's history with its reason, and an event.
pub async fn a_suspended_customers_keys_are_refused_until_it_is_reactivated(app: &Api) {
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let path = format!("/v1/customers/{}", acme.id);
    let payout = crate::payout(&acme.id, "two_step", &[1_000]);
    assert_eq!(app.post("/v1/operations", &acme.key, payout.clone()).await.status, 201);

    // Only a platform admin changes a customer; bad changes are refused by field.
    let own = app
        .post(&path, &acme.key, json!({"status": "suspended"}))
        .await
        .error(403);
    assert_eq!(own["code"], "platform_admin_required");
    for (body, param) in [
        (json!({}), "status"),
        (json!({"status": "closed"}), "status"),
        (json!({"name": " "}), "name"),
        (json!({"status": "suspended", "reason": "x".repeat(501)}), "reason"),
        (json!({"status": "suspended", "until": "tomorrow"}), "until"),
    ] {
        let refused = app.post(&path, ADMIN_KEY, body.clone()).await.error(400);
        assert_eq!(refused["param"], param, "{body}: {refused}");
    }
    let missing = app
        .post(
            "/v1/customers/cus_0000000000000000000000000",
            ADMIN_KEY,
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(missing.status, 404, "{}", missing.json());
    assert_eq!(app.get(&path, &acme.key).await.json()["status"], "active");

    let suspended = app
        .post(
            &path,
            ADMIN_KEY,
            json!({"status": "suspended", "reason": "Fraud review"}),
        )
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.json());
    assert_eq!(suspended.json()["status"], "suspended");
    for refused in [
        app.get("/v1/operations", &acme.key).await,
        app.post("/v1/operations", &acme.key, payout.clone()).await,
        app.get(&path, &acme.key).await,
    ] {
        assert_eq!(refused.error(403)["code"], "customer_suspended");
    }
    assert_eq!(
        app.get("/v1/operations", &globex.key).await.status,
        200,
        "another customer's keys work"
    );
    // The platform still reads the customer, lists it, and acts for it.
    assert_eq!(app.get(&path, ADMIN_KEY).await.json()["status"], "suspended");
    let listed = app.get("/v1/customers?limit=100", ADMIN_KEY).await.json();
    let entry = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == acme.id.as_str())
        .cloned();
    assert_eq!(entry.map(|c| c["status"].clone()), Some(json!("suspended")), "{listed}");
    assert_eq!(app.post("/v1/operations", ADMIN_KEY, payout.clone()).await.status, 201);
    // Suspending it again changes nothing and records nothing.
    let again = app.post(&path, ADMIN_KEY, json!({"status": "suspended"})).await;
    assert_eq!(again.json()["status"], "suspended");

    let reactivated = app
        .post(
            &path,
            ADMIN_KEY,
            json!({"status": "active", "reason": "Review closed", "name": "Acme Ltd"}),
        )
        .await;
    assert_eq!(reactivated.status, 200, "{}", reactivated.json());
    let read = app.get(&path, &acme.key).await;
    assert_eq!(read.status, 200, "{}", read.json());
    assert_eq!(
        (&read.json()["status"], &read.json()["name"]),
        (&json!("active"), &json!("Acme Ltd"))
    );
    assert_eq!(app.post("/v1/operations", &acme.key, payout).await.status, 201);
    let renamed = app.post(&path, ADMIN_KEY, json!({"name": "Acme Group"})).await;
    assert_eq!(
        (&renamed.json()["name"], &renamed.json()["version"]),
        (&json!("Acme Group"), &json!(4)),
        "made, suspended, reactivated, renamed: a repeated suspension is no version"
    );

    // The history is the platform's: who changed what, when and why.
    let history = format!("{path}/history");
    assert_eq!(app.get(&history, &acme.key).await.error(403)["code"], "platform_only");
    let entries: Vec<(String, String, String)> = app
        .history(&path, ADMIN_KEY)
        .await
        .iter()
        .map(|e| {
            assert_eq!(e["entity_type"], "customer", "{e}");
            (
                e["action"].as_str().unwrap().to_owned(),
                e["cause"]["code"].as_str().unwrap().to_owned(),
                e["details"]["status"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let expected = [
        ("created", "customer_created", "-"),
        ("suspended", "customer_suspended", "suspended"),
        ("reactivated", "customer_reactivated", "active"),
        ("updated", "customer_updated", "active"),
    ];
    assert_eq!(
        entries,
        expected.map(|(a, c, s)| (a.to_owned(), c.to_owned(), s.to_owned())),
    );
    let reasons: Vec<String> = app
        .history(&path, ADMIN_KEY)
        .await
        .iter()
        .map(|e| e["cause"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons[1], "Customer suspended. Reason: Fraud review");

    // Each change is an event too, newest first, for the customer's endpoints and the platform's.
    let events = app
        .get(&format!("/v1/events?customer_id={}&limit=100", acme.id), ADMIN_KEY)
        .await
        .json();
    let changes: Vec<(&str, &str, &str)> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("customer."))
        .map(|e| {
            let data = &e["data"];
            assert_eq!(
                (&data["customer_id"], &data["object"]["object"]),
                (&json!(acme.id), &json!("customer"))
            );
            (
                e["type"].as_str().unwrap(),
                data["status"].as_str().unwrap(),
                data["cause"]["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("customer.updated", "active", "customer_updated"),
            ("customer.reactivated", "active", "customer_reactivated"),
            ("customer.suspended", "suspended", "customer_suspended"),
            ("customer.created", "active", "customer_created"),
        ],
        "{events}"
    );
    assert_eq!(
        reasons[2],
        "Customer reactivated: name Acme Ltd (was Acme Payroll). Reason: Review closed"
    );
}

/// A customer keeps the PSP's own keys for it (metadata), given when it is made; a change
/// merges them key by key, an empty value removing one, and is in the customer's history.
pub async fn a_customers_metadata_is_kept_and_merged(app: &Api) {
    let made = app
        .post(
            "/v1/customers",
            ADMIN_KEY,
            json!({"name": "Initech", "metadata": {"crm_id": "C-42", "segment": "payroll"}}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    assert_eq!(made.json()["metadata"], json!({"crm_id": "C-42", "segment": "payroll"}));
    let path = format!("/v1/customers/{}", made.id());

    let changed = app
        .post(&path, ADMIN_KEY, json!({"metadata": {"segment": "", "tier": "gold"}}))
        .await;
    assert_eq!(changed.status, 200, "{}", changed.json());
    assert_eq!(changed.json()["metadata"], json!({"crm_id": "C-42", "tier": "gold"}));
    assert_eq!(
        app.get(&path, ADMIN_KEY).await.json()["metadata"],
        changed.json()["metadata"]
    );
    // The same metadata again changes nothing.
    let again = app.post(&path, ADMIN_KEY, json!({"metadata": {"tier": "gold"}})).await;
    assert_eq!(again.json()["version"], 2);

    let too_many: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    for (body, param) in [
        (json!({"metadata": {"": "x"}}), "metadata"),
        (json!({"metadata": too_many}), "metadata"),
        (json!({"metadata": {"note": "a\u{0007}b"}}), "metadata[note]"),
    ] {
        let refused = app.post(&path, ADMIN_KEY, body.clone()).await.error(400);
        assert_eq!(refused["param"], param, "{body}: {refused}");
    }
    let refused = app
        .post("/v1/customers", ADMIN_KEY, json!({"name": "X", "metadata": {"": "x"}}))
        .await
        .error(400);
    assert_eq!(refused["param"], "metadata");

    let history = app.history(&path, ADMIN_KEY).await;
    let messages: Vec<&str> = history
        .iter()
        .map(|e| e["cause"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["Customer created", "Customer updated: metadata"]);
    assert_eq!(
        history[1]["details"]["metadata"],
        json!({"crm_id": "C-42", "tier": "gold"})
    );
}

/// Creates at once cannot take a customer past its sixteen endpoints: each counts itself in
/// the customer's count in its own commit, and of two that read the same count one is refused
/// and reads again. Deletes at once each count themselves out, so the room they make is exact.
pub async fn creates_at_once_never_take_a_customer_past_its_endpoint_limit(app: &Api) {
    let customer = app.create_customer().await;
    let url = "http://127.0.0.1:9/hook";
    let create = || {
        app.post(
            "/v1/webhook_endpoints",
            &customer.key,
            json!({"url": url, "events": ["operation.created"]}),
        )
    };
    let mut made = vec![];
    for _ in 0..12 {
        let created = create().await;
        assert_eq!(created.status, 201, "{}", created.json());
        made.push(created.id());
    }
    let live = || async {
        let listed = app.get("/v1/webhook_endpoints", &customer.key).await.json();
        listed["data"].as_array().unwrap().len()
    };

    let at_once = futures_util::future::join_all((0..8).map(|_| create())).await;
    let statuses: Vec<u16> = at_once.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 4, "{statuses:?}");
    // A create that lost a race reads again: it loses only to a create that counted itself
    // in, so it is at most four times refused a commit before the count is full.
    for refused in at_once.iter().filter(|r| r.status != 201) {
        assert_eq!(refused.error(409)["code"], "endpoint_limit_reached");
    }
    assert_eq!(live().await, 16);

    let paths: Vec<String> = made[..3]
        .iter()
        .map(|id| format!("/v1/webhook_endpoints/{id}"))
        .collect();
    let deleted = futures_util::future::join_all(paths.iter().map(|path| app.delete(path, &customer.key))).await;
    assert!(deleted.iter().all(|r| r.status == 200), "deletes at once all land");
    let refill = futures_util::future::join_all((0..5).map(|_| create())).await;
    assert_eq!(refill.iter().filter(|r| r.status == 201).count(), 3);
    assert_eq!(live().await, 16);
}

/// Rotations that once stored a new secret under a name an older one had left free, writing
/// over a secret still signing through its overlap: the first secret ends at once, the second
/// signs on for an hour beside the third. A secret no endpoint signs with is deleted from the
/// backend's secret store (`stored` counts the endpoint's there); `deliver` sends what is due.
pub async fn each_rotation_keeps_the_secret_it_retires_and_deletes_what_no_longer_signs<D, S>(
    app: &Api,
    deliver: impl Fn() -> D,
    stored: impl Fn(String) -> S,
) where
    D: std::future::Future<Output = ()>,
    S: std::future::Future<Output = usize>,
{
    let customer = app.create_customer().await;
    let receiver = crate::receiver::Receiver::start(0).await;
    let endpoint = app
        .subscribe(&customer.key, &receiver.url, &["operation.created"])
        .await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    assert_eq!(stored(id.clone()).await, 1);
    let rotate = |expires_in: i64| {
        let path = format!("/v1/webhook_endpoints/{id}/rotate_secret");
        let key = customer.key.clone();
        async move {
            let rotated = app.post(&path, &key, json!({ "expires_in": expires_in })).await;
            assert_eq!(rotated.status, 200, "{}", rotated.json());
            rotated.json()["secret"].as_str().unwrap().to_owned()
        }
    };
    let second = rotate(0).await;
    assert_eq!(stored(id.clone()).await, 1, "the secret ended at once is deleted");
    let third = rotate(3600).await;
    assert_eq!(stored(id.clone()).await, 2, "the second signs on beside the third");

    let operation = crate::payout(&customer.id, "two_step", &[5]);
    assert_eq!(app.post("/v1/operations", &customer.key, operation).await.status, 201);
    deliver().await;
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].signature.matches("v1=").count(), 2);
    for secret in [&second, &third] {
        assert!(
            crate::receiver::signature_is_valid(&received[0].signature, &received[0].body, secret),
            "each live secret signs"
        );
    }

    let deleted = app.delete(&format!("/v1/webhook_endpoints/{id}"), &customer.key).await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    assert_eq!(stored(id).await, 0, "a deleted endpoint's secrets are deleted");
}

/// A key rotated many times at once (a thief racing its owner, or itself) plants one
/// successor: every other rotation is refused, none written over the first, so revoking the
/// key revokes every key it was rotated into. A revocation racing rotations of a key reads the
/// chain again when one lands first: no successor outlives it either.
pub async fn rotations_and_revocations_at_once_leave_no_successor_live(app: &Api) {
    let customer = app.create_customer().await;
    let mint = || async {
        let minted = app
            .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
            .await
            .json();
        (
            minted["id"].as_str().unwrap().to_owned(),
            minted["secret"].as_str().unwrap().to_owned(),
        )
    };
    // `by` rotates key `id` `count` times at once; the ids and secrets of the keys that landed.
    // Each refused rotation says why: it lost the race, found the key rotated or revoked.
    let rotations = |id: String, by: String, count: usize| async move {
        let path = format!("/v1/api_keys/{id}/rotate");
        let answers = futures_util::future::join_all((0..count).map(|_| app.post(&path, &by, json!({})))).await;
        let mut minted = vec![];
        for answer in answers {
            if answer.status == 201 {
                minted.push((answer.id(), answer.json()["secret"].as_str().unwrap().to_owned()));
                continue;
            }
            let code = answer.error(409)["code"].as_str().unwrap().to_owned();
            assert!(
                ["conflict", "api_key_already_rotated", "api_key_inactive"].contains(&code.as_str()),
                "{code}"
            );
        }
        minted
    };

    let (raced, raced_secret) = mint().await;
    let planted = rotations(raced.clone(), raced_secret.clone(), 8).await;
    assert_eq!(planted.len(), 1, "one rotation of eight at once lands");
    let mut minted = vec![raced.clone(), planted[0].0.clone()];
    // Ten keys, each revoked while its owner rotates it six times at once: in some of these
    // races a rotation lands between the revocation's read and its commit.
    for _ in 0..10 {
        let (revoked, _) = mint().await;
        let revoked_path = format!("/v1/api_keys/{revoked}");
        let (planted_beside_revocation, revocation) = tokio::join!(
            rotations(revoked.clone(), customer.key.clone(), 6),
            app.delete(&revoked_path, &customer.key)
        );
        assert_eq!(revocation.status, 200, "{}", revocation.json());
        assert!(planted_beside_revocation.len() <= 1);
        minted.push(revoked);
        minted.extend(planted_beside_revocation.into_iter().map(|(id, _)| id));
    }

    let revoke = app.delete(&format!("/v1/api_keys/{raced}"), &customer.key).await;
    assert_eq!(revoke.status, 200, "{}", revoke.json());
    for secret in [raced_secret, planted[0].1.clone()] {
        assert_eq!(
            app.get("/v1/operations", &secret).await.error(401)["code"],
            "api_key_revoked"
        );
    }
    // Every key the customer holds but its own first one is revoked: none was planted unseen.
    let listed = app.get("/v1/api_keys?limit=100", &customer.key).await.json();
    let live: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["revoked_at"].is_null())
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(!minted.contains(&live[0]["id"].as_str().unwrap().to_owned()));
    assert_eq!(listed["has_more"], false);
}

/// A deactivation and a role change of one user at once, by two admins: whichever lands second
/// was made from the user as they were before the first, and is refused as a conflict to
/// retry, so a user whose deactivation was answered stays deactivated.
pub async fn a_deactivation_racing_a_role_change_is_never_undone(app: &Api) {
    let customer = app.create_customer().await;
    let member = app.add_member(&customer, &["approver"], &["operations:read"]).await;
    let path = format!("/v1/customers/{}/users/{}", customer.id, member.user_id);
    let mut conflicts = 0;
    for round in 0..10 {
        let roles = if round % 2 == 0 {
            json!(["viewer"])
        } else {
            json!(["approver"])
        };
        let (deactivated, changed) = tokio::join!(
            app.post(&path, &customer.key, json!({"status": "deactivated"})),
            app.post(&path, &customer.key, json!({ "roles": roles }))
        );
        for answer in [&deactivated, &changed] {
            if answer.status != 200 {
                assert_eq!(answer.error(409)["code"], "conflict");
                conflicts += 1;
            }
        }
        let now = app.get(&path, &customer.key).await.json();
        if deactivated.status == 200 {
            assert_eq!(now["status"], "deactivated", "round {round}: {now}");
            assert_eq!(
                app.get("/v1/operations", &member.key).await.error(401)["code"],
                "user_deactivated"
            );
        }
        if changed.status == 200 {
            assert_eq!(now["roles"], roles, "round {round}: {now}");
        }
        let reactivated = app.post(&path, &customer.key, json!({"status": "active"})).await;
        assert_eq!(reactivated.status, 200, "{}", reactivated.json());
    }
    // Most rounds race: one at least was refused.
    assert!(conflicts > 0);
}

/// Rotations and changes of one webhook endpoint at once: each lands or is refused as a
/// conflict to retry (never a server error), and a rotation that lost keeps no secret stored:
/// the endpoint's secrets in the store (`stored` counts them) are the first and one for each
/// rotation that landed.
pub async fn changes_of_an_endpoint_at_once_conflict_and_keep_no_stray_secret<S>(
    app: &Api,
    stored: impl Fn(String) -> S,
) where
    S: std::future::Future<Output = usize>,
{
    let customer = app.create_customer().await;
    let endpoint = app
        .subscribe(&customer.key, "http://127.0.0.1:9/hook", &["operation.created"])
        .await;
    let path = format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap());
    let (mut landed, mut lost) = (0, 0);
    // Rounds until one rotation has lost a race (the first round nearly always has one).
    for _ in 0..5 {
        let rotate = format!("{path}/rotate_secret");
        let rotations = (0..6).map(|_| app.post(&rotate, &customer.key, json!({"expires_in": 3600})));
        for answer in futures_util::future::join_all(rotations).await {
            match answer.status.as_u16() {
                200 => landed += 1,
                _ => {
                    assert_eq!(answer.error(409)["code"], "conflict");
                    lost += 1;
                }
            }
        }
        if lost > 0 {
            break;
        }
    }
    assert!(lost > 0 && landed > 0, "{landed} landed, {lost} lost");
    assert_eq!(stored(endpoint["id"].as_str().unwrap().to_owned()).await, 1 + landed);

    let urls: Vec<String> = (0..6).map(|n| format!("http://127.0.0.1:9/hook-{n}")).collect();
    let updates = urls
        .iter()
        .map(|url| app.post(&path, &customer.key, json!({"url": url})));
    let mut updated = vec![];
    for (url, answer) in urls.iter().zip(futures_util::future::join_all(updates).await) {
        match answer.status.as_u16() {
            200 => updated.push(url.clone()),
            _ => assert_eq!(answer.error(409)["code"], "conflict"),
        }
    }
    let now = app.get(&path, &customer.key).await.json();
    assert!(
        updated.contains(&now["url"].as_str().unwrap().to_owned()),
        "{now} of {updated:?}"
    );
}
