//! API keys and users: who changed a key and how its history says so, roles and status taking
//! effect at the next request, and changes at once that must not undo each other.

use crate::Api;
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
    // Each side of the rotation says where the key went or came from.
    // The old key works on for the default overlap from the rotation.
    let went = &app.history(&path, &customer.key).await[1]["cause"];
    let until = crate::rfc3339_after(&went["at"], ops_domain::access::DEFAULT_ROTATION_OVERLAP);
    assert_eq!(
        went["message"],
        format!("Rotated to {second}; this key works until {until}").as_str()
    );
    let came = &app.history(&format!("/v1/api_keys/{second}"), &customer.key).await[0]["cause"];
    assert_eq!(came["message"], format!("Rotated from {first}").as_str());

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
