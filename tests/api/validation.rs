use ops_tests::{payout, spawn_app, ADMIN_KEY};
use serde_json::{json, Value};

/// Replaces the value at `pointer` (a JSON pointer) in `body`, or removes it for `None`.
fn edit(mut body: Value, pointer: &str, value: Option<Value>) -> Value {
    let (parent, field) = pointer.rsplit_once('/').unwrap();
    let target = body.pointer_mut(parent).unwrap_or_else(|| panic!("no {parent}"));
    match (target, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(field.into(), v);
        }
        (Value::Object(map), None) => {
            map.remove(field);
        }
        (Value::Array(list), Some(v)) => list[field.parse::<usize>().unwrap()] = v,
        (other, _) => panic!("cannot edit {other}"),
    }
    body
}

#[tokio::test]
async fn malformed_operations_get_a_precise_4xx_naming_the_field() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let good = payout(&customer.id, "auto", &[1000, 2000]);
    let long = "x".repeat(600);
    let cases: Vec<(Value, u16, &str)> = vec![
        (edit(good.clone(), "/type", None), 400, "type"),
        (edit(good.clone(), "/type", Some(json!("refund"))), 400, "type"),
        (edit(good.clone(), "/type", Some(json!(3))), 400, "type"),
        (edit(good.clone(), "/currency", None), 400, "currency"),
        (edit(good.clone(), "/currency", Some(json!("clp"))), 400, "currency"),
        (edit(good.clone(), "/currency", Some(json!("XYZ"))), 400, "currency"),
        (edit(good.clone(), "/currency", Some(json!(["CLP"]))), 400, "currency"),
        (edit(good.clone(), "/workflow", None), 400, "workflow"),
        (
            edit(good.clone(), "/workflow", Some(json!("no_such_workflow"))),
            400,
            "workflow",
        ),
        (
            edit(good.clone(), "/workflow", Some(json!("Two Step!"))),
            400,
            "workflow",
        ),
        (edit(good.clone(), "/items", None), 400, "items"),
        (edit(good.clone(), "/items", Some(json!([]))), 400, "items"),
        (edit(good.clone(), "/items", Some(json!({"a": 1}))), 400, "items"),
        (
            edit(good.clone(), "/items/1", Some(json!("not an item"))),
            400,
            "items[1]",
        ),
        (edit(good.clone(), "/items/1/amount", None), 400, "items[1].amount"),
        (
            edit(good.clone(), "/items/1/amount", Some(json!(0))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/1/amount", Some(json!(-100))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/1/amount", Some(json!(12.5))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/1/amount", Some(json!("100"))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/1/amount", Some(json!(1_000_000_000_000i64))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/1/amount", Some(json!(1e30))),
            400,
            "items[1].amount",
        ),
        (
            edit(good.clone(), "/items/0/beneficiary", None),
            400,
            "items[0].beneficiary",
        ),
        (
            edit(good.clone(), "/items/0/beneficiary/id", Some(json!(""))),
            400,
            "items[0].beneficiary.id",
        ),
        (
            edit(good.clone(), "/items/0/beneficiary/id_type", Some(json!("R U T"))),
            400,
            "items[0].beneficiary.id_type",
        ),
        (
            edit(good.clone(), "/items/0/destination/rail", Some(json!("swift"))),
            400,
            "items[0].destination.rail",
        ),
        (
            edit(
                good.clone(),
                "/items/0/destination/rail",
                Some(json!("psp-local:unknown")),
            ),
            400,
            "items[0].destination.rail",
        ),
        (
            edit(good.clone(), "/items/0/destination/account", None),
            400,
            "items[0].destination.account",
        ),
        (
            edit(good.clone(), "/items/0/reference", Some(json!(long))),
            400,
            "items[0].reference",
        ),
        (
            edit(good.clone(), "/items/0/colour", Some(json!("blue"))),
            400,
            "items[0].colour",
        ),
        (edit(good.clone(), "/priority", Some(json!("high"))), 400, "priority"),
        (
            edit(good.clone(), "/metadata", Some(json!({"note": 5}))),
            400,
            "metadata[note]",
        ),
        (
            edit(good.clone(), "/metadata", Some(json!({"note": long}))),
            400,
            "metadata[note]",
        ),
        (
            edit(good.clone(), "/customer_id", Some(json!("cus_doesnotexist"))),
            404,
            "customer_id",
        ),
        (edit(good.clone(), "/customer_id", Some(json!(42))), 400, "customer_id"),
        (json!([1, 2, 3]), 400, "body"),
        (json!("payout"), 400, "body"),
    ];
    assert!(cases.len() >= 30);
    for (body, status, param) in cases {
        let reply = app.post("/v1/operations", &customer.key, body.clone()).await;
        let error = reply.error(status);
        assert_eq!(error["param"], param, "{body}");
        assert_eq!(error["type"], "invalid_request_error");
    }
    // None of those wrote anything.
    assert_eq!(app.get("/v1/operations", &customer.key).await.json()["data"], json!([]));
}

#[tokio::test]
async fn malformed_bodies_headers_queries_and_routes_are_4xx() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let url = format!("{}/v1/operations", app.base);
    let raw = |body: Vec<u8>, content_type: &'static str| {
        app.client
            .post(&url)
            .bearer_auth(&customer.key)
            .header("Idempotency-Key", format!("raw-{}", ops_tests::rand_suffix()))
            .header("Content-Type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(Vec<u8>, &str, u16, &str)> = vec![
        (b"{\"type\": ".to_vec(), "application/json", 400, "invalid_json"),
        (b"not json".to_vec(), "application/json", 400, "invalid_json"),
        (vec![0xff, 0xfe, 0x00], "application/json", 400, "invalid_json"),
        (
            b"type=payout".to_vec(),
            "application/x-www-form-urlencoded",
            415,
            "unsupported_media_type",
        ),
        (vec![b' '; 1024 * 1024 + 10], "application/json", 413, "body_too_large"),
    ];
    for (body, content_type, status, code) in cases {
        let reply = raw(body, content_type).await.unwrap();
        assert_eq!(reply.status(), status);
        let error: Value = reply.json().await.unwrap();
        assert_eq!(error["error"]["code"], code);
    }

    for (query, param) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("status=done", "status"),
        ("type=refund", "type"),
        ("starting_after=cus_123", "starting_after"),
        // Not an id the list gave: it would sort past every id and restart the list.
        ("starting_after=op_nope", "starting_after"),
        ("starting_after=op_01ARZ3NDEKTSV4RRFFQ69G5FAV", "starting_after"),
        ("customer_id=op_1", "customer_id"),
        ("colour=blue", "colour"),
        ("limit=10&limit=20", "limit"),
        ("status=approved&type=payout&status=rejected", "status"),
    ] {
        let reply = app.get(&format!("/v1/operations?{query}"), &customer.key).await;
        assert_eq!(reply.error(400)["param"], param, "{query}");
    }
    // A repeated parameter is refused as a body's repeated key is: which would win is a guess.
    let repeated = app.get("/v1/operations?limit=10&limit=20", &customer.key).await;
    assert_eq!(repeated.error(400)["code"], "parameter_repeated");
    // The error object's keys come in the design's order, as every other object's do.
    let text = String::from_utf8(repeated.bytes.clone()).unwrap();
    let keys: Vec<usize> = ["type", "code", "message", "param", "request_id"]
        .iter()
        .map(|key| {
            text.find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("{key} in {text}"))
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");

    for path in [
        "/v1/operations/op_doesnotexist",
        "/v1/operations/not-an-id",
        "/v1/operations/op_x/history",
        "/v1/workflows/nope",
        "/v1/unknown",
    ] {
        assert_eq!(
            app.get(path, &customer.key).await.error(404)["type"],
            "invalid_request_error",
            "{path}"
        );
    }
    let bad_encoding = app.get("/v1/operations/%FF%FE", &customer.key).await;
    assert_eq!(bad_encoding.error(400)["param"], "path");
    let wrong_method = app
        .send(
            reqwest::Method::PATCH,
            "/v1/operations",
            Some(&customer.key),
            None,
            None,
        )
        .await;
    assert_eq!(wrong_method.error(405)["code"], "method_not_allowed");

    // Other resources name their fields too.
    let user_cases = [
        (json!({"email": "a@b.io", "roles": ["maker"]}), "name"),
        (
            json!({"name": "A", "email": "not-an-email", "roles": ["maker"]}),
            "email",
        ),
        (json!({"name": "A", "email": "a@b.io", "roles": []}), "roles"),
        (json!({"name": "A", "email": "a@b.io", "roles": ["boss"]}), "roles[0]"),
    ];
    for (body, param) in user_cases {
        let reply = app
            .post(
                &format!("/v1/customers/{}/users", customer.id),
                &customer.key,
                body.clone(),
            )
            .await;
        assert_eq!(reply.error(400)["param"], param, "{body}");
    }
    let key_cases = [
        (json!({}), "scopes"),
        (json!({"scopes": []}), "scopes"),
        (json!({"scopes": ["operations:everything"]}), "scopes[0]"),
    ];
    for (body, param) in key_cases {
        assert_eq!(
            app.post("/v1/api_keys", &customer.key, body.clone()).await.error(400)["param"],
            param,
            "{body}"
        );
    }
    let no_user = app
        .post(
            "/v1/api_keys",
            &customer.key,
            json!({"scopes": ["operations:read"], "user_id": "usr_nobody"}),
        )
        .await;
    assert_eq!(no_user.error(404)["param"], "user_id");
    assert_eq!(
        app.post("/v1/customers", ADMIN_KEY, json!({"name": ""}))
            .await
            .error(400)["param"],
        "name"
    );
    assert_eq!(
        app.post("/v1/customers", ADMIN_KEY, json!({"name": 7}))
            .await
            .error(400)["param"],
        "name"
    );
}

/// An operation is stored as one document (one DynamoDB item, at most 400 KB): a body that is
/// valid field by field but too large to store is a 400 naming `items`, and nothing is made;
/// a full thousand items with ordinary fields fits.
#[tokio::test]
async fn an_operation_too_large_to_store_is_refused_before_anything_is_made() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let mut largest = payout(&customer.id, "auto", &[1_000; 1_000]);
    for item in largest["items"].as_array_mut().unwrap() {
        item["beneficiary"]["id"] = json!("9".repeat(64));
        item["destination"]["account"] = json!("0".repeat(64));
        item["reference"] = json!("r".repeat(140));
    }
    let refused = app.post("/v1/operations", &customer.key, largest).await;
    assert_eq!(refused.status, 400, "{}", refused.json());
    assert_eq!(refused.json()["error"]["param"], "items");
    assert_eq!(refused.json()["error"]["code"], "operation_too_large");
    let listed = app.get("/v1/operations", &customer.key).await.json();
    assert_eq!(listed["data"], json!([]));

    let ordinary = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[1_000; 1_000]),
        )
        .await;
    assert_eq!(ordinary.status, 201, "{}", ordinary.json());
}
