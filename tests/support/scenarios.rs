//! Scenarios told through the API alone, run on both backends: the embedded store
//! (`tests/api`) and the AWS adapters on the emulator (`tests/aws`).

use crate::Api;
use reqwest::Method;
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
    let revoked = app.send(Method::DELETE, &path, Some(&customer.key), None, None).await;
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
