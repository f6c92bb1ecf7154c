use ops_tests::{payout, spawn_app, Customer, ADMIN_KEY};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn two_step_story_from_maker_to_approved_with_causes_in_history() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let maker = app
        .add_member(
            &customer,
            &["maker", "approver"],
            &["operations:read", "operations:write", "operations:approve"],
        )
        .await;
    let approver = app
        .add_member(&customer, &["approver"], &["operations:read", "operations:approve"])
        .await;

    let created = app
        .post(
            "/v1/operations",
            &maker.key,
            payout(&customer.id, "two_step", &[150_000, 275_000]),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let op = created.json();
    let id = op["id"].as_str().unwrap();
    assert!(id.starts_with("op_"));
    assert_eq!(op["status"], "pending_approval");
    assert_eq!(op["cause"]["code"], "approval_required");
    assert_eq!(op["total_amount"], 425_000);
    assert_eq!(op["created_by"], maker.user_id.as_str());
    assert!(op["items"][0]["id"].as_str().unwrap().starts_with("itm_"));

    // The maker holds the approver role, and still cannot approve their own operation.
    let own = app
        .post(&format!("/v1/operations/{id}/approve"), &maker.key, json!({}))
        .await;
    assert_eq!(own.error(403)["code"], "self_approval_forbidden");

    let approved = app
        .post(
            &format!("/v1/operations/{id}/approve"),
            &approver.key,
            json!({"comment": "checked against payroll"}),
        )
        .await;
    assert_eq!(approved.status, 200, "{}", approved.json());
    let approved = approved.json();
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["cause"]["code"], "approved_by_approver");
    assert_eq!(
        approved["cause"]["actor"],
        json!({"type": "user", "id": approver.user_id})
    );
    assert_eq!(approved["approvals"][0]["user_id"], approver.user_id.as_str());
    assert_eq!(approved["approvals"][0]["comment"], "checked against payroll");

    // Approving again is a state error.
    let again = app
        .post(&format!("/v1/operations/{id}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(again.error(409)["type"], "state_error");

    let fetched = app.get(&format!("/v1/operations/{id}"), &maker.key).await.json();
    assert_eq!(fetched["status"], "approved");

    let history = app
        .get(&format!("/v1/operations/{id}/history"), &maker.key)
        .await
        .json();
    let entries = history["data"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{history}");
    assert_eq!(
        (entries[0]["from"].clone(), entries[0]["to"].clone()),
        (json!(null), json!("pending_approval"))
    );
    assert_eq!(entries[0]["cause"]["code"], "approval_required");
    assert_eq!(entries[0]["cause"]["actor"]["id"], "workflow:two_step");
    assert_eq!(
        (entries[1]["from"].clone(), entries[1]["to"].clone()),
        (json!("pending_approval"), json!("approved"))
    );
    assert_eq!(entries[1]["cause"]["actor"]["id"], approver.user_id.as_str());
    assert!(entries.iter().all(|e| e["at"].is_string()));
}

#[tokio::test]
async fn auto_workflow_approves_at_once_and_the_approved_operation_can_be_cancelled_once() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let op = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await
        .json();
    assert_eq!(op["status"], "approved");
    assert_eq!(op["cause"]["code"], "workflow_approved");
    let id = op["id"].as_str().unwrap();

    let cancelled = app
        .post(
            &format!("/v1/operations/{id}/cancel"),
            &customer.key,
            json!({"reason": "duplicate payroll"}),
        )
        .await
        .json();
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["cause"]["message"], "duplicate payroll");
    let again = app
        .post(&format!("/v1/operations/{id}/cancel"), &customer.key, json!({}))
        .await;
    let error = again.error(409);
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("state_error"), Some("invalid_transition"))
    );
    let approve_cancelled = app
        .post(&format!("/v1/operations/{id}/approve"), &customer.key, json!({}))
        .await;
    assert_eq!(approve_cancelled.error(409)["type"], "state_error");

    // A blank reason is no reason: the cause says what happened instead of nothing.
    let other = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await
        .id();
    let cancelled = app
        .post(
            &format!("/v1/operations/{other}/cancel"),
            &customer.key,
            json!({"reason": " \u{a0} "}),
        )
        .await
        .json();
    assert_eq!(cancelled["cause"]["message"], "Cancelled on request", "{cancelled}");
}

#[tokio::test]
async fn a_rejection_by_an_approver_rejects_with_the_reason() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let id = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[9_999]),
        )
        .await
        .id();
    let missing_reason = app
        .post(&format!("/v1/operations/{id}/reject"), &approver.key, json!({}))
        .await;
    assert_eq!(missing_reason.error(400)["param"], "reason");
    let rejected = app
        .post(
            &format!("/v1/operations/{id}/reject"),
            &approver.key,
            json!({"reason": "unknown beneficiary"}),
        )
        .await
        .json();
    assert_eq!(rejected["status"], "rejected");
    assert!(rejected["cause"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown beneficiary"));
}

#[tokio::test]
async fn concurrent_approve_and_reject_have_exactly_one_winner_and_a_consistent_audit() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let approver = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let rejecter = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    for _ in 0..5 {
        let id = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[500]),
            )
            .await
            .id();
        let approve_path = format!("/v1/operations/{id}/approve");
        let reject_path = format!("/v1/operations/{id}/reject");
        let (empty, reason) = (json!({}), json!({"reason": "duplicate"}));
        // Both decisions are only possible from pending_approval: one must lose.
        let (approve, reject) = tokio::join!(
            app.send(Method::POST, &approve_path, Some(&approver.key), None, Some(&empty)),
            app.send(Method::POST, &reject_path, Some(&rejecter.key), None, Some(&reason)),
        );
        let statuses = [approve.status.as_u16(), reject.status.as_u16()];
        assert!(statuses == [200, 409] || statuses == [409, 200], "{statuses:?}");
        let loser = if approve.status == 200 { &reject } else { &approve };
        assert_eq!(loser.error(409)["type"], "state_error");
        let winner = if approve.status == 200 { "approved" } else { "rejected" };
        let final_state = app.get(&format!("/v1/operations/{id}"), &customer.key).await.json();
        assert_eq!(final_state["status"], winner);
        let tos = app.path_of(&customer.key, &id, &id).await;
        assert_eq!(
            tos,
            ["pending_approval", winner],
            "one audit entry per change, only the winner's"
        );
    }
}

#[tokio::test]
async fn racing_approvals_and_cancellations_leave_one_outcome_each_with_its_audit_and_event() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let first = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let second = app.add_member(&customer, &["approver"], &["operations:approve"]).await;
    let mut ids = vec![];
    for _ in 0..5 {
        let id = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[700]),
            )
            .await
            .id();
        // One signature is needed: of two approvers signing at once, one is too late.
        let approve = format!("/v1/operations/{id}/approve");
        let (a, b) = tokio::join!(
            app.post(&approve, &first.key, json!({})),
            app.post(&approve, &second.key, json!({})),
        );
        let mut statuses = [a.status.as_u16(), b.status.as_u16()];
        statuses.sort();
        assert_eq!(statuses, [200, 409]);
        let late = if a.status == 200 { &b } else { &a };
        assert_eq!(late.error(409)["type"], "state_error");

        // Three cancellations of the approved operation at once: exactly one cancels it.
        let cancel = format!("/v1/operations/{id}/cancel");
        let cancels =
            futures_util::future::join_all((0..3).map(|_| app.post(&cancel, &customer.key, json!({"reason": "typo"}))))
                .await;
        let won: Vec<_> = cancels.iter().filter(|r| r.status == 200).collect();
        assert_eq!(
            won.len(),
            1,
            "{:?}",
            cancels.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        for lost in cancels.iter().filter(|r| r.status != 200) {
            assert_eq!(lost.error(409)["type"], "state_error");
        }

        let tos = app.path_of(&customer.key, &id, &id).await;
        assert_eq!(tos, ["pending_approval", "approved", "cancelled"]);
        ids.push(id);
    }
    // Every change has exactly one event, and no losing request left one behind.
    let events = app.get("/v1/events?limit=100", &customer.key).await.json();
    for id in &ids {
        let kinds: Vec<&str> = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["data"]["operation_id"] == id.as_str())
            .map(|event| event["type"].as_str().unwrap())
            .rev()
            .collect();
        assert_eq!(
            kinds,
            [
                "operation.created",
                "operation.pending_approval",
                "operation.approved",
                "operation.cancelled"
            ]
        );
    }
}

#[tokio::test]
async fn lists_are_newest_first_filtered_paged_and_scoped_to_the_customer() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let other = app.create_customer().await;
    let mut ids = vec![];
    for i in 0..7 {
        let workflow = if i % 2 == 0 { "auto" } else { "two_step" };
        ids.push(
            app.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, workflow, &[100 + i]),
            )
            .await
            .id(),
        );
    }
    app.post("/v1/operations", &other.key, payout(&other.id, "auto", &[1]))
        .await
        .id();
    ids.reverse();

    let first = app.get("/v1/operations?limit=3", &customer.key).await.json();
    assert_eq!(first["object"], "list");
    assert_eq!(first["has_more"], true);
    let page_ids = |page: &serde_json::Value| {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(page_ids(&first), ids[0..3]);
    let second = app
        .get(
            &format!("/v1/operations?limit=3&starting_after={}", ids[2]),
            &customer.key,
        )
        .await
        .json();
    assert_eq!(page_ids(&second), ids[3..6]);
    let last = app
        .get(
            &format!("/v1/operations?limit=3&starting_after={}", ids[5]),
            &customer.key,
        )
        .await
        .json();
    assert_eq!(
        (page_ids(&last), last["has_more"].clone()),
        (ids[6..].to_vec(), json!(false))
    );

    let pending = app
        .get("/v1/operations?status=pending_approval", &customer.key)
        .await
        .json();
    assert_eq!(pending["data"].as_array().unwrap().len(), 3);
    assert!(pending["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["status"] == "pending_approval"));

    // A customer never sees another's operations, even when asking for them.
    let others = app
        .get(&format!("/v1/operations?customer_id={}", other.id), &customer.key)
        .await
        .json();
    assert_eq!(others["data"], json!([]));
    // The platform sees everyone's, and filters by customer.
    let all = app.get("/v1/operations?limit=100", ADMIN_KEY).await.json();
    assert_eq!(all["data"].as_array().unwrap().len(), 8);
    let theirs = app
        .get(&format!("/v1/operations?customer_id={}", other.id), ADMIN_KEY)
        .await
        .json();
    assert_eq!(theirs["data"].as_array().unwrap().len(), 1);
}

/// An operator with a rail's reference, an item's reference or a beneficiary's id finds the
/// operations that carry it: the customer its own, the platform every customer's, a page at a
/// time; a lookup mixed with a filter, or empty, is refused naming the parameter.
#[tokio::test]
async fn operations_are_found_by_rail_reference_item_reference_and_beneficiary() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let other = app.create_customer().await;
    let made = |customer: &Customer, workflow: &'static str, reference: &'static str| {
        let mut body = payout(&customer.id, workflow, &[100, 200]);
        body["items"][0]["reference"] = reference.into();
        body["items"][1]["beneficiary"]["id"] = "11111111-1".into();
        (body, customer.key.clone())
    };
    let mut ids = vec![];
    for (body, key) in [
        made(&customer, "auto", "INV-7"),
        made(&customer, "two_step", "INV-7"),
        made(&other, "two_step", "INV-7"),
    ] {
        ids.push(app.post("/v1/operations", &key, body).await.id());
    }
    let found = |query: String, key: String| {
        let app = &app;
        async move {
            let page = app.get(&format!("/v1/operations?{query}"), &key).await.json();
            let ids: Vec<String> = page["data"]
                .as_array()
                .unwrap_or_else(|| panic!("{page}"))
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_owned())
                .collect();
            (ids, page["has_more"] == true)
        }
    };
    let key = customer.key.clone();
    let (mine, theirs) = (vec![ids[1].to_string(), ids[0].to_string()], ids[2].to_string());
    assert_eq!(
        found("item_reference=INV-7".into(), key.clone()).await,
        (mine.clone(), false)
    );
    assert_eq!(
        found("beneficiary_id=11111111-1".into(), key.clone()).await,
        (mine.clone(), false)
    );
    // The pending one too: an item's values find it from the moment it is made.
    assert_eq!(found("item_reference=salary%201".into(), key.clone()).await.0.len(), 2);
    assert!(found("item_reference=INV-8".into(), key.clone()).await.0.is_empty());
    // Another customer's key, or asking for another customer, finds only its own.
    assert_eq!(
        found("item_reference=INV-7".into(), other.key.clone()).await.0,
        [theirs]
    );
    let asked = format!("item_reference=INV-7&customer_id={}", other.id);
    assert!(found(asked, key.clone()).await.0.is_empty());
    // The platform finds every customer's, grouped by customer, a page at a time.
    let (first, more) = found("item_reference=INV-7&limit=2".into(), ADMIN_KEY.into()).await;
    assert!(more);
    let next = format!("item_reference=INV-7&limit=2&starting_after={}", first[1]);
    let (rest, more) = found(next, ADMIN_KEY.into()).await;
    let mut all = [first, rest].concat();
    assert!(!more);
    all.sort();
    let mut every: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    every.sort();
    assert_eq!(all, every);

    // The auto-approved one's transactions reach the rail: its references find it.
    app.settle(time::Duration::seconds(30), 6).await;
    let transactions = app
        .get(&format!("/v1/transactions?operation_id={}", ids[0]), &key)
        .await
        .json();
    assert_eq!(transactions["data"].as_array().unwrap().len(), 2, "{transactions}");
    for transaction in transactions["data"].as_array().unwrap() {
        let reference = transaction["rail_reference"].as_str().unwrap();
        let query = format!("rail_reference={reference}");
        assert_eq!(found(query, key.clone()).await.0, [ids[0].to_string()]);
    }
    assert!(found("rail_reference=nothing".into(), key.clone()).await.0.is_empty());

    for (query, param) in [
        ("item_reference=INV-7&status=completed", "status"),
        ("rail_reference=a&beneficiary_id=b", "beneficiary_id"),
        ("item_reference=", "item_reference"),
    ] {
        let refused = app.get(&format!("/v1/operations?{query}"), &key).await;
        assert_eq!(refused.status, 400, "{query}");
        assert_eq!(refused.json()["error"]["param"], param, "{query}");
    }
}

#[tokio::test]
async fn a_restarted_server_keeps_everything_it_acknowledged() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let approver = app
        .add_member(&customer, &["approver"], &["operations:approve", "operations:read"])
        .await;
    let pending = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[42]))
        .await
        .json();
    let approved_id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[43]))
        .await
        .id();
    app.post(
        &format!("/v1/operations/{approved_id}/approve"),
        &approver.key,
        json!({}),
    )
    .await;
    let replay_body = payout(&customer.id, "auto", &[44]);
    let first = app
        .post_keyed("/v1/operations", &customer.key, "restart-key", &replay_body)
        .await;

    let app = app.restart().await;

    // Keys, operations, audit and idempotency records all survived.
    let fetched = app
        .get(
            &format!("/v1/operations/{}", pending["id"].as_str().unwrap()),
            &customer.key,
        )
        .await;
    assert_eq!(fetched.json(), pending);
    let approved = app
        .get(&format!("/v1/operations/{approved_id}"), &approver.key)
        .await
        .json();
    assert_eq!(approved["status"], "approved");
    let history = app
        .get(&format!("/v1/operations/{approved_id}/history"), &customer.key)
        .await
        .json();
    assert_eq!(history["data"].as_array().unwrap().len(), 2);
    let replayed = app
        .post_keyed("/v1/operations", &customer.key, "restart-key", &replay_body)
        .await;
    assert_eq!(replayed.bytes, first.bytes);
    assert_eq!(replayed.headers["idempotent-replayed"], "true");
    // And the approver can still work after the restart.
    let next = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "two_step", &[45]))
        .await
        .id();
    let approved_after = app
        .post(&format!("/v1/operations/{next}/approve"), &approver.key, json!({}))
        .await;
    assert_eq!(approved_after.json()["status"], "approved");
}

/// The transactions an operator watches are listed across operations: one whose outcome the
/// rail lost (unknown) is listed by status, its customer's key sees its own, and it leaves the
/// list once the rail answers; other statuses and mixed filters are refused by name.
#[tokio::test]
async fn unknown_transactions_are_listed_across_operations() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let other = app.create_customer().await;
    // The sandbox rail times out on an amount ending in 04, and has it when asked.
    let id = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[10_004]))
        .await
        .id();
    app.drain().await;
    let listed = |query: &'static str, key: String| {
        let app = &app;
        async move {
            let page = app.get(&format!("/v1/transactions?{query}"), &key).await;
            assert_eq!(page.status, 200, "{}", page.json());
            let ids: Vec<String> = page.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["operation_id"].as_str().unwrap().to_owned())
                .collect();
            ids
        }
    };
    assert_eq!(listed("status=unknown", customer.key.clone()).await, [id.as_str()]);
    assert_eq!(listed("status=unknown", ADMIN_KEY.into()).await, [id.as_str()]);
    assert!(listed("status=unknown", other.key.clone()).await.is_empty());
    assert!(listed("status=needs_attention", customer.key.clone()).await.is_empty());

    // The status poll asks the rail, which has it: confirmed, it leaves the list.
    app.settle(time::Duration::minutes(5), 6).await;
    assert!(listed("status=unknown", customer.key.clone()).await.is_empty());

    for (query, param) in [
        ("status=confirmed", "status"),
        ("status=unknown&operation_id=op_01h0000000000000000000000", "status"),
        (
            "operation_id=op_01h0000000000000000000000&customer_id=cus_1",
            "customer_id",
        ),
    ] {
        let refused = app.get(&format!("/v1/transactions?{query}"), &customer.key).await;
        assert_eq!(refused.status, 400, "{query}");
        assert_eq!(refused.json()["error"]["param"], param, "{query}");
    }
}

/// Operations are listed within a creation window and an amount range (total, in minor
/// units), with the other filters; a bad bound is refused naming it.
#[tokio::test]
async fn operations_are_listed_by_creation_window_and_amount_range() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let made = |amount: i64| {
        let (app, customer) = (&app, &customer);
        async move {
            app.post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[amount]),
            )
            .await
            .id()
        }
    };
    let first = made(100).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let between = time::OffsetDateTime::now_utc();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (second, third) = (made(200).await, made(300).await);
    let at = between
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
        .replace('+', "%2B");
    let listed = |query: String| {
        let app = &app;
        let key = customer.key.clone();
        async move {
            let page = app.get(&format!("/v1/operations?{query}"), &key).await;
            assert_eq!(page.status, 200, "{query}: {}", page.json());
            page.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed(format!("created_from={at}")).await,
        [third.as_str(), second.as_str()]
    );
    assert_eq!(listed(format!("created_to={at}")).await, [first.as_str()]);
    assert_eq!(listed("amount_min=150&amount_max=250".into()).await, [second.as_str()]);
    assert_eq!(
        listed(format!("created_from={at}&amount_max=250&status=pending_approval")).await,
        [second.as_str()]
    );
    assert_eq!(
        listed(format!("created_from={at}&limit=1&starting_after={third}")).await,
        [second]
    );
    assert_eq!(listed("amount_min=300".into()).await, [third]);

    for (query, param) in [
        ("created_from=yesterday", "created_from"),
        ("created_to=2026-13-01T00:00:00Z", "created_to"),
        (
            "created_from=2026-12-02T00:00:00Z&created_to=2026-12-01T00:00:00Z",
            "created_to",
        ),
        ("amount_min=-1", "amount_min"),
        ("amount_max=1.5", "amount_max"),
        ("amount_min=300&amount_max=200", "amount_max"),
    ] {
        let refused = app.get(&format!("/v1/operations?{query}"), &customer.key).await;
        assert_eq!(refused.status, 400, "{query}");
        assert_eq!(refused.json()["error"]["param"], param, "{query}");
    }
}
