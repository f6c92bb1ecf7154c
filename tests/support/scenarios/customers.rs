//! Customers: the platform's list and each customer's own view, suspension and
//! reactivation, metadata.

use crate::{Api, ADMIN_KEY};
use serde_json::{json, Value};

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
