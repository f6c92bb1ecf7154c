//! The operations desk: work items opened and closed by the state changes themselves, claimed,
//! assigned and released by operators, never handed to two claimers.

use ops_tests::{payout, spawn_app, spawn_app_with, Customer, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::HashSet;
use time::Duration;

async fn items(app: &TestApp, key: &str, filter: &str) -> Vec<Value> {
    let reply = app.get(&format!("/v1/work_items?limit=100&{filter}"), key).await;
    assert_eq!(reply.status, 200, "{}", reply.json());
    reply.json()["data"].as_array().unwrap().clone()
}

async fn waiting_payout(app: &TestApp, customer: &Customer, amount: i64) -> String {
    let created = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[amount]),
        )
        .await;
    assert_eq!(created.json()["status"], "pending_approval", "{}", created.json());
    created.id()
}

#[tokio::test]
async fn an_operation_waiting_for_approval_is_an_approvals_item_until_it_is_decided() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let id = waiting_payout(&app, &acme, 1_000).await;
    app.drain().await;

    let open = items(&app, &acme.key, "queue=approvals&status=open").await;
    assert_eq!(open.len(), 1, "{open:#?}");
    let item = &open[0];
    assert_eq!(
        (
            item["object"].as_str(),
            item["subject"]["type"].as_str(),
            item["subject"]["id"].as_str(),
            item["required_role"].as_str(),
            item["kind"].as_str()
        ),
        (
            Some("work_item"),
            Some("operation"),
            Some(id.as_str()),
            Some("approver"),
            Some("approval")
        )
    );
    // A second delivery of every event opens nothing more.
    let events: Vec<ops_domain::event::Event> = app.get("/v1/events?limit=20", ADMIN_KEY).await.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|e| serde_json::from_value(e.clone()).unwrap())
        .collect();
    app.driver().service().handle_desk_events(&events).await;
    assert_eq!(items(&app, &acme.key, "queue=approvals").await.len(), 1);

    let approved = app
        .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(approved.status, 200, "{}", approved.json());
    app.drain().await;
    let item_id = item["id"].as_str().unwrap();
    let done = app.get(&format!("/v1/work_items/{item_id}"), &acme.key).await.json();
    assert_eq!(
        (done["status"].as_str(), done["resolution"]["cause"]["code"].as_str()),
        (Some("done"), approved.json()["cause"]["code"].as_str()),
        "closed with the approval's cause"
    );
    assert!(items(&app, &acme.key, "queue=approvals&status=open").await.is_empty());
    // Opening and closing are the operation's history too, each with its cause.
    let history = app.get(&format!("/v1/operations/{id}/history"), &acme.key).await.json();
    let work_item_changes: Vec<&str> = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["entity_type"] == "work_item")
        .map(|entry| entry["action"].as_str().unwrap())
        .collect();
    assert_eq!(work_item_changes, ["opened", "closed"]);
    let events = app.get("/v1/events?type=work_item.closed", &acme.key).await.json();
    assert_eq!(events["data"][0]["data"]["work_item_id"], item_id);

    // Another customer sees none of it.
    let other = app.create_customer().await;
    assert!(items(&app, &other.key, "").await.is_empty());
    assert_eq!(
        app.get(&format!("/v1/work_items/{item_id}"), &other.key).await.status,
        404
    );
}

#[tokio::test]
async fn claims_hand_out_the_oldest_item_once_and_leases_run_out() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let first = waiting_payout(&app, &acme, 1_000).await;
    let second = waiting_payout(&app, &acme, 2_000).await;
    app.drain().await;
    let alice = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let bob = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let maker = app
        .add_member(&acme, &["maker"], &["operations:read", "operations:approve"])
        .await;

    let claim = |key: String| {
        let app = &app;
        async move {
            app.post("/v1/work_items/claim", &key, json!({"queue": "approvals"}))
                .await
        }
    };
    let alices = claim(alice.key.clone()).await;
    assert_eq!(alices.status, 200, "{}", alices.json());
    let alices = alices.json();
    assert_eq!(
        (
            alices["subject"]["id"].as_str(),
            alices["status"].as_str(),
            alices["assignee"].as_str()
        ),
        (Some(first.as_str()), Some("claimed"), Some(alice.user_id.as_str())),
        "the oldest first"
    );
    assert_eq!(claim(bob.key.clone()).await.json()["subject"]["id"], second.as_str());
    let empty = claim(bob.key.clone()).await;
    assert_eq!(empty.error(404)["param"], "queue");
    // Without the role the item needs, nothing is claimable.
    assert_eq!(claim(maker.key.clone()).await.status, 404);
    let mine = items(&app, &alice.key, "assignee=me").await;
    assert_eq!(mine.len(), 1);
    assert!(items(&app, &acme.key, "assignee=unassigned").await.is_empty());

    // Only the holder releases; the item goes back to the queue.
    let alices_id = alices["id"].as_str().unwrap();
    let release = format!("/v1/work_items/{alices_id}/release");
    assert_eq!(
        app.post(&release, &bob.key, json!({})).await.error(403)["code"],
        "not_holder"
    );
    let released = app.post(&release, &alice.key, json!({})).await.json();
    assert_eq!(
        (released["status"].as_str(), released["assignee"].as_str()),
        (Some("open"), None)
    );
    assert_eq!(claim(alice.key.clone()).await.json()["id"], alices_id);

    // A lease that ran out puts the item back for anyone.
    app.clock.advance(ops_domain::desk::CLAIM_LEASE + Duration::seconds(1));
    let taken_over = claim(bob.key.clone()).await.json();
    assert_eq!(taken_over["id"], alices_id);
    assert_eq!(taken_over["assignee"], bob.user_id.as_str());
}

#[tokio::test]
async fn an_approval_is_neither_claimed_by_nor_assigned_to_its_operations_creator() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let maker_approver = app
        .add_member(
            &acme,
            &["maker", "approver"],
            &["operations:read", "operations:write", "operations:approve"],
        )
        .await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let created = app
        .post(
            "/v1/operations",
            &maker_approver.key,
            payout(&acme.id, "two_step", &[1_000]),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    app.drain().await;
    let item = items(&app, &acme.key, "queue=approvals").await[0].clone();
    assert_eq!(item["subject_created_by"], maker_approver.user_id.as_str());

    // Holding it, the creator would keep it from those who may decide it.
    let claim = |key: String| {
        let app = &app;
        async move {
            app.post("/v1/work_items/claim", &key, json!({"queue": "approvals"}))
                .await
        }
    };
    assert_eq!(claim(maker_approver.key.clone()).await.error(404)["param"], "queue");
    let assign = format!("/v1/work_items/{}/assign", item["id"].as_str().unwrap());
    let refused = app
        .post(&assign, &acme.key, json!({"user_id": maker_approver.user_id}))
        .await;
    assert_eq!(refused.error(400)["code"], "creator_cannot_decide");
    let claimed = claim(approver.key.clone()).await;
    assert_eq!(claimed.status, 200, "{}", claimed.json());
    assert_eq!(claimed.json()["assignee"], approver.user_id.as_str());
}

#[tokio::test]
async fn an_approval_short_of_enough_hands_the_item_back_to_the_next_approver() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let three = json!({"rules": [{"then": {"action": "require_approvals", "count": 3, "role": "approver"}}]});
    app.put_workflow(&acme.key, "three", three).await;
    let [first, second, third] =
        [(); 3].map(|_| app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"]));
    let (first, second, third) = (first.await, second.await, third.await);
    let claim = |key: String| {
        let app = &app;
        async move {
            app.post("/v1/work_items/claim", &key, json!({"queue": "approvals"}))
                .await
        }
    };
    let created = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "three", &[1_000]))
        .await;
    assert_eq!(created.json()["status"], "pending_approval", "{}", created.json());
    let id = created.id();
    app.drain().await;

    let held = claim(first.key.clone()).await.json();
    assert_eq!(held["assignee"], first.user_id.as_str());
    let approved = app
        .post(&format!("/v1/operations/{id}/approve"), &first.key, json!({}))
        .await;
    assert_eq!(approved.json()["status"], "pending_approval", "{}", approved.json());

    // Back in the queue at once, for anyone but the one who has signed.
    let item = app
        .get(&format!("/v1/work_items/{}", held["id"].as_str().unwrap()), &acme.key)
        .await
        .json();
    assert_eq!(
        (
            item["status"].as_str(),
            item["assignee"].as_str(),
            item["cause"]["code"].as_str()
        ),
        (Some("open"), None, Some("approval_recorded"))
    );
    assert_eq!(item["subject_decided_by"], json!([first.user_id]));
    assert_eq!(
        item["cause"]["message"],
        format!("Approved by {} (1 of 3 approval(s))", first.user_id),
        "said as the deciding approval's cause is"
    );
    assert_eq!(claim(first.key.clone()).await.error(404)["param"], "queue");
    let assign = format!("/v1/work_items/{}/assign", item["id"].as_str().unwrap());
    let refused = app.post(&assign, &acme.key, json!({"user_id": first.user_id})).await;
    assert_eq!(refused.error(400)["code"], "already_decided");

    // An approval by someone who does not hold it leaves the holder's lease.
    let taken = claim(second.key.clone()).await.json();
    assert_eq!(taken["id"], item["id"]);
    let approve = format!("/v1/operations/{id}/approve");
    let approved = app.post(&approve, &third.key, json!({})).await;
    assert_eq!(approved.json()["status"], "pending_approval", "{}", approved.json());
    let item_path = assign.replace("/assign", "");
    let still_held = app.get(&item_path, &acme.key).await.json();
    assert_eq!(
        (still_held["status"].as_str(), still_held["assignee"].as_str()),
        (Some("claimed"), Some(second.user_id.as_str()))
    );
    assert_eq!(still_held["subject_decided_by"], json!([first.user_id, third.user_id]));
    let approved = app.post(&approve, &second.key, json!({})).await;
    assert_eq!(approved.json()["status"], "approved", "{}", approved.json());
    app.drain().await;
    let done = app.get(&item_path, &acme.key).await.json();
    assert_eq!(done["status"], "done");
}

#[tokio::test]
async fn many_concurrent_claimers_never_get_the_same_item() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    for amount in 1..=6 {
        waiting_payout(&app, &acme, amount * 1_000).await;
    }
    app.drain().await;
    let claimers = futures_util::future::join_all(
        (0..16).map(|_| app.add_member(&acme, &["approver"], &["operations:read", "operations:approve"])),
    )
    .await;
    let claims = futures_util::future::join_all(
        claimers
            .iter()
            .map(|c| app.post("/v1/work_items/claim", &c.key, json!({"queue": "approvals"}))),
    )
    .await;
    let won: Vec<String> = claims
        .iter()
        .filter(|c| c.status == 200)
        .map(|c| c.json()["id"].as_str().unwrap().to_owned())
        .collect();
    let unique: HashSet<&String> = won.iter().collect();
    assert_eq!((won.len(), unique.len()), (6, 6), "each item claimed once: {won:?}");
    assert!(
        claims.iter().filter(|c| c.status != 200).all(|c| c.status == 404),
        "the others find the queue empty"
    );
}

#[tokio::test]
async fn assignment_needs_the_role_and_the_customer_and_bad_input_writes_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    waiting_payout(&app, &acme, 1_000).await;
    app.drain().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let maker = app.add_member(&acme, &["maker"], &["operations:read"]).await;
    let other = app.create_customer().await;
    let stranger = app.add_member(&other, &["approver"], &["operations:read"]).await;
    let departed = app.add_member(&acme, &["approver"], &["operations:read"]).await;
    app.deactivate(&acme, &departed.user_id).await;
    let item = items(&app, &acme.key, "queue=approvals").await[0].clone();
    let assign = format!("/v1/work_items/{}/assign", item["id"].as_str().unwrap());

    for (body, status, param, code) in [
        (json!({"user_id": maker.user_id}), 400, "user_id", "role_missing"),
        (json!({"user_id": departed.user_id}), 400, "user_id", "user_deactivated"),
        (json!({"user_id": stranger.user_id}), 404, "user_id", "resource_missing"),
        (json!({"user_id": "op_1"}), 400, "user_id", "invalid_user_id"),
        (json!({}), 400, "user_id", "parameter_missing"),
    ] {
        let refused = app.post(&assign, &acme.key, body).await;
        let error = refused.error(status);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{error}"
        );
    }
    let bad_queue = app
        .post("/v1/work_items/claim", &acme.key, json!({"queue": "lunch"}))
        .await;
    assert_eq!(bad_queue.error(400)["code"], "invalid_queue");
    let exceptions = app
        .post("/v1/work_items/claim", &acme.key, json!({"queue": "exceptions"}))
        .await;
    assert_eq!(exceptions.error(403)["code"], "platform_only");
    // A key with no user could not decide the item it held, so it may not claim one.
    for key in [acme.key.as_str(), ADMIN_KEY] {
        let userless = app
            .post("/v1/work_items/claim", key, json!({"queue": "approvals"}))
            .await;
        assert_eq!(userless.error(403)["code"], "user_required");
    }
    let filter = app.get("/v1/work_items?assignee=someone", &acme.key).await;
    assert_eq!(filter.error(400)["param"], "assignee");
    assert_eq!(
        app.get(&format!("/v1/work_items?customer_id={}", other.id), &acme.key)
            .await
            .json()["data"],
        json!([]),
        "another customer's filter finds nothing"
    );
    // Nothing above changed the item.
    let unchanged = app
        .get(&format!("/v1/work_items/{}", item["id"].as_str().unwrap()), &acme.key)
        .await
        .json();
    assert_eq!(unchanged, item);

    let assigned = app.post(&assign, &acme.key, json!({"user_id": approver.user_id})).await;
    assert_eq!(assigned.status, 200, "{}", assigned.json());
    assert_eq!(
        (assigned.json()["status"].as_str(), assigned.json()["assignee"].as_str()),
        (Some("claimed"), Some(approver.user_id.as_str()))
    );
    assert_eq!(items(&app, &approver.key, "assignee=me").await.len(), 1);
}

#[tokio::test]
async fn a_transaction_needing_an_operator_is_an_exceptions_item_until_it_is_resolved() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let id = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[20_008]))
        .await
        .id();
    app.settle(Duration::seconds(30), 20).await;
    let open = items(&app, ADMIN_KEY, "queue=exceptions&status=open").await;
    let subjects: Vec<(&str, &str)> = open
        .iter()
        .map(|i| (i["subject"]["type"].as_str().unwrap(), i["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        subjects.iter().collect::<HashSet<_>>(),
        [
            ("operation", "operation_needs_attention"),
            ("transaction", "transaction_needs_attention")
        ]
        .iter()
        .collect::<HashSet<_>>(),
        "{open:#?}"
    );
    let claimed = app
        .post("/v1/work_items/claim", ADMIN_KEY, json!({"queue": "exceptions"}))
        .await;
    assert_eq!(claimed.status, 200, "{}", claimed.json());

    let transaction = open.iter().find(|i| i["subject"]["type"] == "transaction").unwrap();
    let txn_id = transaction["subject"]["id"].as_str().unwrap();
    let resolved = app
        .post(
            &format!("/v1/transactions/{txn_id}/resolve"),
            ADMIN_KEY,
            json!({"status": "failed", "reason": "the rail has no record"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json());
    app.settle(Duration::seconds(30), 3).await;
    let left = items(&app, ADMIN_KEY, "queue=exceptions&status=open").await;
    let claimed_left = items(&app, ADMIN_KEY, "queue=exceptions&status=claimed").await;
    assert!(
        left.is_empty() && claimed_left.is_empty(),
        "{left:#?} {claimed_left:#?}"
    );
    let operation = app.get(&format!("/v1/operations/{id}"), &acme.key).await.json();
    assert_eq!(operation["status"], "failed");
}

#[tokio::test]
async fn bulk_decisions_answer_per_id_and_one_refusal_undoes_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let maker = app
        .add_member(&acme, &["maker"], &["operations:read", "operations:write"])
        .await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let first = waiting_payout(&app, &acme, 1_000).await;
    let second = waiting_payout(&app, &acme, 2_000).await;
    let by_maker = app
        .post("/v1/operations", &maker.key, payout(&acme.id, "two_step", &[3_000]))
        .await
        .id();
    let other = app.create_customer().await;
    let theirs = waiting_payout(&app, &other, 4_000).await;

    let decided = app
        .post(
            "/v1/operations/approve",
            &approver.key,
            json!({"ids": [first, theirs, second], "comment": "payroll checked"}),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.json());
    let answers = decided.json()["data"].as_array().unwrap().clone();
    let outcome: Vec<(&str, i64)> = answers
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["status"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        outcome,
        [(first.as_str(), 200), (theirs.as_str(), 404), (second.as_str(), 200)]
    );
    assert_eq!(answers[0]["operation"]["status"], "approved");
    assert_eq!(answers[1]["error"]["code"], "resource_missing");
    // The list and each operation in it are written as every other list and operation are:
    // `object` first, the operation as its own endpoint shows it.
    let text = String::from_utf8(decided.bytes.clone()).unwrap();
    assert!(
        text.starts_with(&format!(
            "{{\"object\":\"list\",\"data\":[{{\"id\":\"{first}\",\"status\":200,\"operation\":{{\"object\":\"operation\",\"id\":\"{first}\","
        )),
        "{text}"
    );
    assert_eq!(
        answers[0]["operation"],
        app.get(&format!("/v1/operations/{first}"), &approver.key).await.json()
    );
    assert_eq!(
        app.get(&format!("/v1/operations/{theirs}"), &other.key).await.json()["status"],
        "pending_approval",
        "another customer's operation is untouched"
    );
    // Deciding again: each answer says why, as the single endpoint would.
    let again = app
        .post("/v1/operations/approve", &approver.key, json!({"ids": [first]}))
        .await
        .json();
    assert_eq!(again["data"][0]["status"], 409, "{again}");

    let rejected = app
        .post(
            "/v1/operations/reject",
            &approver.key,
            json!({"ids": [by_maker], "reason": "duplicate of last month's"}),
        )
        .await
        .json();
    assert_eq!(rejected["data"][0]["operation"]["status"], "rejected", "{rejected}");

    for (path, body, param, code) in [
        ("/v1/operations/approve", json!({}), "ids", "parameter_missing"),
        ("/v1/operations/approve", json!({"ids": []}), "ids", "invalid_length"),
        (
            "/v1/operations/approve",
            json!({"ids": ["txn_1"]}),
            "ids[0]",
            "invalid_id",
        ),
        (
            "/v1/operations/approve",
            json!({"ids": [first, first]}),
            "ids[1]",
            "duplicate_id",
        ),
        (
            "/v1/operations/reject",
            json!({"ids": [first]}),
            "reason",
            "parameter_missing",
        ),
    ] {
        let refused = app.post(path, &approver.key, body).await;
        let error = refused.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{error}"
        );
    }
    let too_many: Vec<String> = (0..101).map(|i| format!("op_{i}")).collect();
    let refused = app
        .post("/v1/operations/approve", &approver.key, json!({"ids": too_many}))
        .await;
    assert_eq!(refused.error(400)["code"], "invalid_length");
    let no_scope = app
        .post("/v1/operations/approve", &maker.key, json!({"ids": [second]}))
        .await;
    assert_eq!(no_scope.error(403)["code"], "missing_scope");
}

#[tokio::test]
async fn the_board_counts_each_column_and_queue_as_the_changes_happen() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let waiting = waiting_payout(&app, &acme, 1_000).await;
    waiting_payout(&app, &acme, 2_500).await;
    app.post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[20_008]))
        .await;
    app.drain().await;
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(board["object"], "board");
    assert_eq!(
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_str(),
            board["queues"]["approvals"]["open"].as_i64(),
            board["queues"]["approvals"]["past_due"].as_i64()
        ),
        (Some(2), Some("3500"), Some(2), Some(0)),
        "{board:#}"
    );
    assert!(board["pending_approval"]["oldest_age_seconds"].as_i64().unwrap() >= 0);
    assert_eq!(board["in_progress"]["count"], 1, "{board:#}");

    // Approving one moves it; past the approvals SLA the other is overdue; the lost
    // transaction ends up needing an operator.
    app.post(&format!("/v1/operations/{waiting}/approve"), &approver.key, json!({}))
        .await;
    app.settle(Duration::hours(1), 5).await;
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(
        (
            board["pending_approval"]["count"].as_i64(),
            board["queues"]["approvals"]["open"].as_i64(),
            board["queues"]["approvals"]["past_due"].as_i64(),
            board["needs_attention"]["count"].as_i64(),
            board["in_progress"]["count"].as_i64()
        ),
        (Some(1), Some(1), Some(1), Some(1), Some(0)),
        "{board:#}"
    );
    assert!(board["pending_approval"]["oldest_age_seconds"].as_i64().unwrap() >= 5 * 3600);

    // The platform sees every customer; a customer only itself.
    let other = app.create_customer().await;
    waiting_payout(&app, &other, 7_000).await;
    app.drain().await;
    let platform = app.get("/v1/board", ADMIN_KEY).await.json();
    assert_eq!(platform["pending_approval"]["count"], 2, "{platform:#}");
    let theirs = app.get(&format!("/v1/board?customer_id={}", other.id), &acme.key).await;
    assert_eq!(theirs.error(404)["param"], "customer_id");
    assert_eq!(
        app.get("/v1/board?customer_id=op_1", &acme.key).await.error(400)["code"],
        "invalid_id"
    );
}

#[tokio::test]
async fn a_late_delivery_of_an_event_whose_item_was_closed_opens_nothing_and_blocks_nothing() {
    use ops_domain::desk::{Queue, WorkItemTransition};
    use ops_domain::ports::{Changeset, Commit, Write};
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    // 20_007: the rail is busy at every submit, so the transaction needs an operator, twice.
    app.post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[20_007]))
        .await;
    app.settle(Duration::seconds(30), 20).await;
    let first = items(&app, ADMIN_KEY, "queue=exceptions&status=open").await;
    let transaction = first.iter().find(|i| i["subject"]["type"] == "transaction").unwrap();
    let txn_id = transaction["subject"]["id"].as_str().unwrap().to_owned();
    let entered: Vec<ops_domain::event::Event> = app
        .get("/v1/events?type=transaction.needs_attention", ADMIN_KEY)
        .await
        .json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_value(e.clone()).unwrap())
        .collect();
    let retried = app
        .post(&format!("/v1/transactions/{txn_id}/retry"), ADMIN_KEY, json!({}))
        .await;
    assert_eq!(retried.status, 200, "{}", retried.json());
    app.settle(Duration::seconds(30), 20).await;
    // Back in needs_attention: its second item is open. Close it behind the consumer's back,
    // as if the consumer had not reached the second entering event yet.
    let store = &app.embedded().store;
    let mut second = ops_domain::desk::DeskStore::open_work_item(store, Queue::Exceptions, &txn_id)
        .await
        .unwrap()
        .expect("the second item");
    assert_ne!(second.id.as_str(), transaction["id"].as_str().unwrap());
    let now = time::OffsetDateTime::now_utc();
    let cause = ops_domain::cause::Cause::new("test", "test", ops_domain::cause::Actor::system(), now);
    second.apply(WorkItemTransition::Close(cause), now).unwrap();
    store
        .commit(Changeset {
            writes: vec![Write::UpdateWorkItem(second)],
        })
        .await
        .unwrap();

    // The first entering event comes again: its item exists (done), so it opens nothing, and
    // the stream moves on instead of retrying it forever.
    let outcome = app.driver().service().handle_desk_events(&entered).await;
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
}

#[tokio::test]
async fn each_queues_sla_is_the_deployments_setting() {
    let app = ops_tests::spawn_app_with(|config| config.approvals_sla_minutes = 10).await;
    let acme = app.create_customer().await;
    waiting_payout(&app, &acme, 1_000).await;
    app.drain().await;
    let item = &items(&app, &acme.key, "queue=approvals").await[0];
    let (created, due) = (item["created_at"].as_str().unwrap(), item["due_at"].as_str().unwrap());
    let parse = |at| time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap();
    // Due ten minutes after it opened (in whole seconds, which the stores sort by).
    let sla = parse(due) - parse(created);
    assert!(sla > Duration::seconds(599) && sla <= Duration::minutes(10), "{item:#}");

    let past_due = |board: Value| board["queues"]["approvals"]["past_due"].as_i64();
    assert_eq!(past_due(app.get("/v1/board", &acme.key).await.json()), Some(0));
    app.clock.advance(Duration::minutes(11));
    assert_eq!(past_due(app.get("/v1/board", &acme.key).await.json()), Some(1));
}

/// A desk round plans what each event it read calls for and commits it together; an event
/// about an operation already planned for commits what waits first (its reads must see it).
/// So one round handles a stream in which one operation is created, waits and is approved,
/// beside another that waits.
#[tokio::test]
async fn one_desk_round_handles_several_changes_of_one_operation_among_others() {
    use ops_runtime::driver::{StreamConsumer, Trigger};
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let approver = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    let approved = waiting_payout(&app, &acme, 1_000).await;
    let waiting = waiting_payout(&app, &acme, 2_500).await;
    let reply = app
        .post(&format!("/v1/operations/{approved}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(reply.json()["status"], "approved", "{}", reply.json());

    let handled = app.driver().round(Trigger::Stream(StreamConsumer::Desk)).await.unwrap();
    assert!(handled >= 5, "created and pending_approval twice, approved: {handled}");
    let board = app.get("/v1/board", &acme.key).await.json();
    assert_eq!(
        (
            board["pending_approval"]["count"].as_i64(),
            board["pending_approval"]["amount"]["CLP"].as_str(),
            board["in_progress"]["count"].as_i64(),
            board["queues"]["approvals"]["open"].as_i64(),
        ),
        (Some(1), Some("2500"), Some(1), Some(1)),
        "{board:#}"
    );
    let open = items(&app, &acme.key, "queue=approvals&status=open").await;
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["subject"]["id"], waiting.as_str());
}

#[tokio::test]
async fn a_deactivated_users_items_go_back_to_their_queue_at_once() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    waiting_payout(&app, &acme, 1_000).await;
    waiting_payout(&app, &acme, 2_000).await;
    app.drain().await;
    let roles = ["operations:read", "operations:approve"];
    let departing = app.add_member(&acme, &["approver"], &roles).await;
    let colleague = app.add_member(&acme, &["approver"], &roles).await;
    let claim = |key: String| {
        let app = &app;
        async move {
            let claimed = app
                .post("/v1/work_items/claim", &key, json!({"queue": "approvals"}))
                .await;
            assert_eq!(claimed.status, 200, "{}", claimed.json());
            format!("/v1/work_items/{}", claimed.id())
        }
    };
    let (theirs, kept) = (claim(departing.key.clone()).await, claim(colleague.key.clone()).await);

    app.deactivate(&acme, &departing.user_id).await;
    let released = app.get(&theirs, &acme.key).await.json();
    assert_eq!(
        (&released["status"], &released["assignee"], &released["cause"]["code"]),
        (&json!("open"), &json!(null), &json!("user_deactivated")),
        "{released}"
    );
    let untouched = app.get(&kept, &acme.key).await.json();
    assert_eq!(
        (&untouched["status"], &untouched["assignee"]),
        (&json!("claimed"), &json!(colleague.user_id))
    );
    // The item is the next one's to claim.
    assert_eq!(claim(colleague.key.clone()).await, theirs);
}

#[tokio::test]
async fn a_repeated_deactivation_hands_back_what_the_first_one_left_held() {
    // A deactivation releases at most a hundred items in its request; repeating it releases
    // the rest, as it finishes a release cut short after the user's status was committed.
    let app = spawn_app_with(|config| config.rate_limit = 0).await;
    let acme = app.create_customer().await;
    for amount in 1_000..1_101 {
        waiting_payout(&app, &acme, amount).await;
    }
    app.drain().await;
    let departing = app
        .add_member(&acme, &["approver"], &["operations:read", "operations:approve"])
        .await;
    for _ in 0..101 {
        let claimed = app
            .post("/v1/work_items/claim", &departing.key, json!({"queue": "approvals"}))
            .await;
        assert_eq!(claimed.status, 200, "{}", claimed.json());
    }
    let held = format!("status=claimed&assignee={}", departing.user_id);

    app.deactivate(&acme, &departing.user_id).await;
    assert_eq!(
        items(&app, &acme.key, &held).await.len(),
        1,
        "a hundred released at once"
    );
    let user = format!("/v1/customers/{}/users/{}", acme.id, departing.user_id);
    let entries = app.history(&user, &acme.key).await.len();

    app.deactivate(&acme, &departing.user_id).await;
    assert_eq!(
        items(&app, &acme.key, &held).await.len(),
        0,
        "the repeat released the one left"
    );
    assert_eq!(
        app.history(&user, &acme.key).await.len(),
        entries,
        "the repeat changed nothing about the user"
    );
}

/// A platform key with `scopes` only (no user): its secret.
async fn platform_key(app: &TestApp, scopes: &[&str]) -> String {
    let key = app.post("/v1/api_keys", ADMIN_KEY, json!({"scopes": scopes})).await;
    assert_eq!(key.status, 201, "{}", key.json());
    key.json()["secret"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn working_an_exception_needs_the_scope_its_subject_needs_not_reading() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    // A schedule whose key is revoked skips its occurrence: an exceptions item.
    let maker = app
        .add_member(&acme, &["maker"], &["operations:read", "operations:write"])
        .await;
    let mut body = payout("cus_unused", "auto", &[1_000]);
    body.as_object_mut().unwrap().remove("customer_id");
    let schedule = app
        .post(
            "/v1/schedules",
            &maker.key,
            json!({"expression": "rate(1 hour)", "operation": body}),
        )
        .await;
    assert_eq!(schedule.status, 201, "{}", schedule.json());
    let own = schedule.json()["api_key_id"].as_str().unwrap().to_owned();
    let revoked = app.delete(&format!("/v1/api_keys/{own}"), ADMIN_KEY).await;
    assert_eq!(revoked.status, 200, "{}", revoked.json());
    app.settle(Duration::minutes(30), 4).await;
    let items = app.open_exceptions().await;
    let item = items
        .iter()
        .find(|i| i["subject"]["type"] == "occurrence")
        .unwrap_or_else(|| panic!("{items:#?}"));
    let id = item["id"].as_str().unwrap();

    let reader = platform_key(&app, &["operations:read"]).await;
    let webhooks_only = platform_key(&app, &["operations:read", "webhooks:manage"]).await;
    let claim = json!({"queue": "exceptions"});
    assert_eq!(
        app.post("/v1/work_items/claim", &reader, claim.clone())
            .await
            .error(403)["code"],
        "missing_scope"
    );
    // A webhooks operator may claim exceptions, but not this one.
    assert_eq!(
        app.post("/v1/work_items/claim", &webhooks_only, claim).await.error(404)["param"],
        "queue"
    );
    let resolve = format!("/v1/work_items/{id}/resolve");
    for key in [&reader, &webhooks_only] {
        let refused = app.post(&resolve, key, json!({"reason": "seen"})).await;
        assert_eq!(refused.error(403)["code"], "missing_scope");
        let release = app.post(&format!("/v1/work_items/{id}/release"), key, json!({})).await;
        assert_eq!(release.error(403)["code"], "missing_scope");
    }
    assert_eq!(
        app.get(&format!("/v1/work_items/{id}"), &reader).await.json()["status"],
        "open"
    );

    let operator = platform_key(&app, &["operations:read", "operations:write"]).await;
    let resolved = app
        .post(&resolve, &operator, json!({"reason": "key rotated, schedule remade"}))
        .await;
    assert_eq!(resolved.json()["status"], "done", "{}", resolved.json());
}
