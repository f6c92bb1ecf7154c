use ops_tests::{payout, spawn_app, ADMIN_KEY};
use reqwest::Method;
use serde_json::json;

async fn put(app: &ops_tests::TestApp, name: &str, key: &str, definition: serde_json::Value) -> ops_tests::Reply {
    app.send(
        Method::PUT,
        &format!("/v1/workflows/{name}"),
        Some(key),
        None,
        Some(&definition),
    )
    .await
}

#[tokio::test]
async fn rules_decide_by_amount_currency_and_rail_and_the_customer_overrides_the_platform() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let approvers = [
        app.add_member(&acme, &["approver"], &["operations:approve"]).await,
        app.add_member(&acme, &["approver"], &["operations:approve"]).await,
    ];

    // The platform's "payroll": small payouts pass, big ones need two approvers, huge ones
    // are refused.
    let platform = put(&app, "payroll", ADMIN_KEY, json!({"description": "PSP default", "rules": [
        {"when": {"total_amount": {"gte": 100_000_000}}, "then": {"action": "reject", "reason": "over the platform limit"}},
        {"when": {"item_amount": {"gte": 1_000_000}}, "then": {"action": "require_approvals", "count": 2, "role": "approver"}},
        {"when": {"currency": ["CLP"], "rail": ["psp-local:sandbox"]}, "then": {"action": "approve"}},
    ]})).await;
    assert_eq!(platform.status, 200, "{}", platform.json());
    assert_eq!(platform.json()["owner"], json!({"type": "platform"}));
    assert_eq!(platform.json()["version"], 1);

    let small = app
        .post(
            "/v1/operations",
            &acme.key,
            payout(&acme.id, "payroll", &[5_000, 7_000]),
        )
        .await
        .json();
    assert_eq!(
        (small["status"].as_str(), small["cause"]["code"].as_str()),
        (Some("approved"), Some("workflow_approved"))
    );
    let huge = app
        .post(
            "/v1/operations",
            &acme.key,
            payout(&acme.id, "payroll", &[99_000_000, 2_000_000]),
        )
        .await
        .json();
    assert_eq!(huge["status"], "rejected");
    assert!(huge["cause"]["message"]
        .as_str()
        .unwrap()
        .contains("over the platform limit"));
    let mut usd = payout(&acme.id, "payroll", &[10]);
    usd["currency"] = json!("USD");
    let unmatched = app.post("/v1/operations", &acme.key, usd).await.json();
    assert_eq!(
        (unmatched["status"].as_str(), unmatched["cause"]["code"].as_str()),
        (Some("rejected"), Some("workflow_rejected"))
    );

    // Two distinct approvers are needed for a big item.
    let big = app
        .post(
            "/v1/operations",
            &acme.key,
            payout(&acme.id, "payroll", &[10, 1_500_000]),
        )
        .await
        .json();
    assert_eq!(big["status"], "pending_approval");
    assert_eq!(big["approval_requirement"], json!({"count": 2, "role": "approver"}));
    let id = big["id"].as_str().unwrap();
    let one = app
        .post(&format!("/v1/operations/{id}/approve"), &approvers[0].key, json!({}))
        .await
        .json();
    assert_eq!(
        (one["status"].as_str(), one["approvals"].as_array().unwrap().len()),
        (Some("pending_approval"), 1)
    );
    let twice = app
        .post(&format!("/v1/operations/{id}/approve"), &approvers[0].key, json!({}))
        .await;
    assert_eq!(twice.error(409)["code"], "already_decided");
    let two = app
        .post(&format!("/v1/operations/{id}/approve"), &approvers[1].key, json!({}))
        .await
        .json();
    assert_eq!(two["status"], "approved");
    let history = app.history(&format!("/v1/operations/{id}"), &acme.key).await;
    let actions: Vec<&str> = history.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["created", "approval_recorded", "status_changed"]);

    // Acme's own "payroll" overrides the platform's for Acme only; editing applies to new
    // operations only.
    let own = put(
        &app,
        "payroll",
        &acme.key,
        json!({"rules": [{"then": {"action": "require_approvals", "count": 1, "role": "approver"}}]}),
    )
    .await;
    assert_eq!(own.json()["owner"], json!({"type": "customer", "id": acme.id}));
    let seen_by_acme = app.get("/v1/workflows/payroll", &acme.key).await.json();
    assert_eq!(seen_by_acme["owner"]["type"], "customer");
    let seen_by_globex = app.get("/v1/workflows/payroll", &globex.key).await.json();
    assert_eq!(seen_by_globex["owner"]["type"], "platform");
    let acme_small = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "payroll", &[5_000]))
        .await
        .json();
    assert_eq!(acme_small["status"], "pending_approval");
    let globex_small = app
        .post("/v1/operations", &globex.key, payout(&globex.id, "payroll", &[5_000]))
        .await
        .json();
    assert_eq!(globex_small["status"], "approved");
    let old = app
        .get(&format!("/v1/operations/{}", small["id"].as_str().unwrap()), &acme.key)
        .await
        .json();
    assert_eq!(old["status"], "approved");
    let updated = put(
        &app,
        "payroll",
        &acme.key,
        json!({"rules": [{"then": {"action": "approve"}}]}),
    )
    .await
    .json();
    assert_eq!(updated["version"], 2);

    // Built-ins are visible and can be overridden like any other name.
    let builtin = app.get("/v1/workflows/two_step", &acme.key).await.json();
    assert_eq!(builtin["owner"], json!({"type": "builtin"}));
}

#[tokio::test]
async fn bad_definitions_and_missing_scope_are_refused() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let cases = [
        (json!({}), "rules"),
        (json!({"rules": []}), "rules"),
        (json!({"rules": [{}]}), "rules[0].then"),
        (
            json!({"rules": [{"then": {"action": "escalate"}}]}),
            "rules[0].then.action",
        ),
        (
            json!({"rules": [{"then": {"action": "reject"}}]}),
            "rules[0].then.reason",
        ),
        (
            json!({"rules": [{"then": {"action": "require_approvals", "count": 11, "role": "approver"}}]}),
            "rules[0].then.count",
        ),
        (
            json!({"rules": [{"then": {"action": "require_approvals", "count": 1, "role": "ceo"}}]}),
            "rules[0].then.role",
        ),
        (
            json!({"rules": [{"then": {"action": "require_approvals", "count": "two", "role": "approver"}}]}),
            "rules[0].then.count",
        ),
        (
            json!({"rules": [{"then": {"action": "require_approvals", "count": 1}}]}),
            "rules[0].then.role",
        ),
        (
            json!({"rules": [{"then": {"action": "approve", "reason": "fine"}}]}),
            "rules[0].then.reason",
        ),
        (
            json!({"rules": [{"then": {"action": "approve", "colour": "red"}}]}),
            "rules[0].then.colour",
        ),
        (
            json!({"rules": [{"when": {"amount": 5}, "then": {"action": "approve"}}]}),
            "rules[0].when.amount",
        ),
        (
            json!({"rules": [{"when": {"currency": ["ABC"]}, "then": {"action": "approve"}}]}),
            "rules[0].when.currency[0]",
        ),
        (
            json!({"rules": [{"when": {"total_amount": {"gte": 10, "lte": 1}}, "then": {"action": "approve"}}]}),
            "rules[0].when.total_amount",
        ),
        // A rule on a rail no adapter serves would never match: the approvals it was written
        // to require would silently not be.
        (
            json!({"rules": [{"when": {"rail": ["psp-local:sandbx"]}, "then": {"action": "require_approvals", "count": 2, "role": "approver"}}]}),
            "rules[0].when.rail[0]",
        ),
    ];
    for (definition, param) in cases {
        let reply = put(&app, "mine", &customer.key, definition.clone()).await;
        assert_eq!(reply.error(400)["param"], param, "{definition}");
    }
    let bad_name = put(
        &app,
        "Bad%20Name",
        &customer.key,
        json!({"rules": [{"then": {"action": "approve"}}]}),
    )
    .await;
    assert_eq!(bad_name.error(400)["param"], "name");
    let never_saved = app.get("/v1/workflows/mine", &customer.key).await;
    assert_eq!(never_saved.status, 404, "{}", never_saved.json());
    let reader = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = put(
        &app,
        "mine",
        &reader,
        json!({"rules": [{"then": {"action": "approve"}}]}),
    )
    .await;
    assert_eq!(denied.error(403)["code"], "missing_scope");
}

#[tokio::test]
async fn a_workflows_and_a_floors_history_keep_each_versions_rules_and_who_saved_it() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let one_approver = json!({"rules": [{"then": {"action": "require_approvals", "count": 1, "role": "approver"}}]});
    let two_approvers = json!({"description": "stricter", "rules": [
        {"then": {"action": "require_approvals", "count": 2, "role": "approver"}}
    ]});
    for definition in [&one_approver, &two_approvers] {
        let saved = put(&app, "payroll", &acme.key, definition.clone()).await;
        assert_eq!(saved.status, 200, "{}", saved.json());
    }
    let platform = put(&app, "payroll", ADMIN_KEY, one_approver.clone()).await;
    assert_eq!(platform.status, 200, "{}", platform.json());

    // Acme's own workflow: each version with the rules it saved, oldest first.
    let history = app.history("/v1/workflows/payroll", &acme.key).await;
    let versions: Vec<_> = history
        .iter()
        .map(|e| {
            assert_eq!(
                (e["entity_type"].as_str(), e["cause"]["code"].as_str()),
                (Some("workflow"), Some("workflow_saved"))
            );
            (
                e["action"].clone(),
                e["details"]["version"].clone(),
                e["details"]["rules"][0]["then"]["count"].clone(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [
            (json!("created"), json!(1), json!(1)),
            (json!("updated"), json!(2), json!(2))
        ]
    );
    assert_eq!(history[1]["details"]["description"], "stricter");
    // Globex has none of its own: the platform's applies, and so does its history.
    let platform_history = app.history("/v1/workflows/payroll", &globex.key).await;
    assert_eq!(platform_history.len(), 1);
    assert_eq!(platform_history[0]["entity_id"], "platform:payroll");
    // A built-in workflow was never saved; an unknown one is a 404.
    assert!(app.history("/v1/workflows/two_step", &acme.key).await.is_empty());
    let unknown = app.get("/v1/workflows/nonesuch/history", &acme.key).await;
    assert_eq!(unknown.error(404)["code"], "resource_missing");

    // A floor's history: empty while the default applies, then each saved version.
    let floor = format!("/v1/customers/{}/approval_floors/payout", acme.id);
    assert!(app.history(&floor, &acme.key).await.is_empty());
    let saved = app
        .send(Method::PUT, &floor, Some(&acme.key), None, Some(&two_approvers))
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    let floor_history = app.history(&floor, &acme.key).await;
    assert_eq!(floor_history.len(), 1);
    assert_eq!(
        (
            floor_history[0]["entity_type"].as_str(),
            floor_history[0]["details"]["version"].as_u64(),
            floor_history[0]["details"]["rules"][0]["then"]["count"].as_u64()
        ),
        (Some("approval_floor"), Some(1), Some(2))
    );
    // Another customer reads no floor of Acme's.
    let foreign = app.get(&format!("{floor}/history"), &globex.key).await;
    assert_eq!(foreign.error(404)["param"], "customer_id");
}

#[tokio::test]
async fn the_workflows_a_caller_can_name_are_listed_by_name_as_they_resolve_for_it() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let approve = json!({"rules": [{"then": {"action": "approve"}}]});
    let names = |listed: &serde_json::Value| -> Vec<(String, String)> {
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                let owner = w["owner"]["id"].as_str().or(w["owner"]["type"].as_str());
                (w["name"].as_str().unwrap().to_owned(), owner.unwrap().to_owned())
            })
            .collect()
    };
    let builtin = |name: &str| (name.to_owned(), "builtin".to_owned());
    let list = |query: &'static str, key: String| {
        let app = &app;
        async move { app.get(&format!("/v1/workflows{query}"), &key).await.json() }
    };
    assert_eq!(
        names(&list("", acme.key.clone()).await),
        [builtin("auto"), builtin("two_step")]
    );

    // The platform overrides `auto` and adds `payroll`; acme overrides `payroll`, adds its own
    // and sets a floor, which is not a workflow an operation names; globex adds one of its own.
    for (key, name) in [
        (ADMIN_KEY, "auto"),
        (ADMIN_KEY, "payroll"),
        (acme.key.as_str(), "payroll"),
        (acme.key.as_str(), "zz-urgent"),
        (globex.key.as_str(), "globex-only"),
    ] {
        assert_eq!(put(&app, name, key, approve.clone()).await.status, 200);
    }
    let floor = format!("/v1/customers/{}/approval_floors/payout", acme.id);
    let saved = app
        .send(Method::PUT, &floor, Some(&acme.key), None, Some(&approve))
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());

    let mine = |name: &str| (name.to_owned(), acme.id.clone());
    let platform = |name: &str| (name.to_owned(), "platform".to_owned());
    let all = list("", acme.key.clone()).await;
    assert_eq!(
        names(&all),
        [
            platform("auto"),
            mine("payroll"),
            builtin("two_step"),
            mine("zz-urgent")
        ]
    );
    assert_eq!(all["has_more"], false);
    // A page at a time, each name once.
    let first = list("?limit=2", acme.key.clone()).await;
    assert_eq!(names(&first), [platform("auto"), mine("payroll")]);
    assert_eq!(first["has_more"], true);
    let second = list("?limit=2&starting_after=payroll", acme.key.clone()).await;
    assert_eq!(names(&second), [builtin("two_step"), mine("zz-urgent")]);
    assert_eq!(second["has_more"], false);
    // The platform sees its own and the built-in ones, no customer's; naming a customer, it
    // sees them as they resolve for that customer, as the customer does.
    assert_eq!(
        names(&list("", ADMIN_KEY.to_owned()).await),
        [platform("auto"), platform("payroll"), builtin("two_step")]
    );
    let as_acme = app
        .get(&format!("/v1/workflows?customer_id={}", acme.id), ADMIN_KEY)
        .await
        .json();
    assert_eq!(names(&as_acme), names(&all));
    let as_globex = app
        .get(&format!("/v1/workflows?customer_id={}&limit=2", globex.id), ADMIN_KEY)
        .await
        .json();
    assert_eq!(
        names(&as_globex),
        [platform("auto"), ("globex-only".to_owned(), globex.id.clone())]
    );
    // A customer's key may name only its own customer.
    let own = app
        .get(&format!("/v1/workflows?customer_id={}", acme.id), &acme.key)
        .await
        .json();
    assert_eq!(names(&own), names(&all));
    let foreign = app
        .get(&format!("/v1/workflows?customer_id={}", globex.id), &acme.key)
        .await;
    assert_eq!(foreign.error(404)["param"], "customer_id");
    let missing = app.get("/v1/workflows?customer_id=cus_nobody", ADMIN_KEY).await;
    assert_eq!(missing.error(404)["param"], "customer_id");

    let bad = app.get("/v1/workflows?starting_after=Pay%20Roll", &acme.key).await;
    assert_eq!(bad.error(400)["param"], "starting_after");

    // Naming one that is not there says where the names are.
    let unknown = app
        .post("/v1/operations", &globex.key, payout(&globex.id, "payroll-eu", &[100]))
        .await;
    assert_eq!(
        unknown.error(400)["message"],
        format!(
            "No workflow named 'payroll-eu' for {0}; GET /v1/workflows?customer_id={0} lists those it can name.",
            globex.id
        )
    );
}

/// A PSP's operator sets up a customer's rules for it: a platform key defines, reads and
/// reviews a customer's workflow by naming the customer, and that workflow then decides the
/// customer's operations, and no other customer's.
#[tokio::test]
async fn the_platform_defines_a_customers_workflow_by_naming_the_customer() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let globex = app.create_customer().await;
    let reject_large = json!({"rules": [
        {"when": {"total_amount": {"gte": 1000}}, "then": {"action": "reject", "reason": "Over Acme's limit"}},
        {"then": {"action": "approve"}}
    ]});
    let at = |path: &str, customer: &str| format!("/v1/workflows/payroll{path}?customer_id={customer}");
    let saved = app
        .send(
            Method::PUT,
            &at("", &acme.id),
            Some(ADMIN_KEY),
            None,
            Some(&reject_large),
        )
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    assert_eq!(saved.json()["owner"], json!({"type": "customer", "id": acme.id}));

    // Acme reads it as its own, and the platform reads it by naming Acme; the platform's own
    // view has no `payroll`.
    assert_eq!(app.get("/v1/workflows/payroll", &acme.key).await.json()["version"], 1);
    let read = app.get(&at("", &acme.id), ADMIN_KEY).await.json();
    assert_eq!(read["owner"]["id"], acme.id);
    assert_eq!(app.get("/v1/workflows/payroll", ADMIN_KEY).await.status, 404);
    let history = app.get(&at("/history", &acme.id), ADMIN_KEY).await.json();
    let entry = &history["data"][0];
    assert_eq!(
        (&entry["action"], &entry["cause"]["actor"]["type"]),
        (&json!("created"), &json!("api_key"))
    );

    // It decides Acme's operations; Globex has no `payroll`.
    let large = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "payroll", &[1500]))
        .await;
    assert_eq!(large.json()["status"], "rejected", "{}", large.json());
    let small = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "payroll", &[500]))
        .await;
    assert_eq!(small.json()["status"], "approved");
    let elsewhere = app
        .post("/v1/operations", &globex.key, payout(&globex.id, "payroll", &[500]))
        .await;
    assert_eq!(elsewhere.error(400)["code"], "unknown_workflow");

    // A customer's key cannot define, read or review another customer's workflow, and its
    // attempt saves nothing.
    let foreign = app
        .send(
            Method::PUT,
            &at("", &acme.id),
            Some(&globex.key),
            None,
            Some(&reject_large),
        )
        .await;
    assert_eq!(foreign.error(404)["param"], "customer_id");
    assert_eq!(
        app.get(&at("", &acme.id), &globex.key).await.error(404)["param"],
        "customer_id"
    );
    assert_eq!(
        app.get(&at("/history", &acme.id), &globex.key).await.error(404)["param"],
        "customer_id"
    );
    assert_eq!(
        app.get(&at("/history", &acme.id), ADMIN_KEY).await.json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// A rule on metadata tiers payouts of one amount apart: a customer's tagged payroll waits for
/// two approvers while the same amount untagged goes through; a metadata condition with nothing
/// in it is refused where it is.
#[tokio::test]
async fn a_rule_on_metadata_tiers_payouts_of_one_amount_apart() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let saved = put(&app, "tagged", &acme.key, json!({"rules": [
        {"when": {"metadata": {"run": "payroll"}}, "then": {"action": "require_approvals", "count": 2, "role": "approver"}},
        {"when": {}, "then": {"action": "approve"}},
    ]}))
    .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    let mut payroll = payout(&acme.id, "tagged", &[50_000]);
    payroll["metadata"] = json!({"run": "payroll", "month": "2026-12"});
    let tagged = app.post("/v1/operations", &acme.key, payroll).await.json();
    assert_eq!(
        (&tagged["status"], &tagged["approval_requirement"]["count"]),
        (&json!("pending_approval"), &json!(2)),
        "{tagged}"
    );
    let mut other = payout(&acme.id, "tagged", &[50_000]);
    other["metadata"] = json!({"run": "bonus"});
    let untagged = app.post("/v1/operations", &acme.key, other).await.json();
    assert_eq!(untagged["status"], "approved", "{untagged}");

    let empty = put(
        &app,
        "tagged",
        &acme.key,
        json!({"rules": [
            {"when": {"metadata": {}}, "then": {"action": "approve"}},
        ]}),
    )
    .await;
    let refused = empty.error(400);
    assert_eq!(
        (&refused["param"], &refused["code"]),
        (&json!("rules[0].when.metadata"), &json!("invalid_metadata"))
    );
}

#[tokio::test]
async fn a_tiered_chain_is_signed_in_order_by_the_roles_and_users_it_names() {
    let app = ops_tests::spawn_app().await;
    ops_tests::scenarios::a_tiered_chain_is_signed_in_order_by_the_roles_and_users_it_names(&app, app.driver()).await;
}

#[tokio::test]
async fn approvals_not_given_in_time_expire() {
    let app = ops_tests::spawn_app().await;
    ops_tests::scenarios::approvals_not_given_in_time_expire(&app, app.driver(), &app.clock).await;
}

#[tokio::test]
async fn a_named_signer_delegates_their_place_for_a_period() {
    ops_tests::scenarios::a_named_signer_delegates_their_place_for_a_period(&ops_tests::spawn_app().await.api).await;
}
