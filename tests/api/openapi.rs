//! The OpenAPI document cannot drift from the code: its routes are exactly the router's, and
//! real responses carry every field its schemas require.

use ops_api::Endpoint;
use ops_tests::receiver::Receiver;
use ops_tests::{payout, spawn_app, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The document as written, which the binary holds deflated.
fn document() -> Value {
    serde_json::from_str(include_str!("../../functions/api/openapi.json")).unwrap()
}

#[tokio::test]
async fn the_document_is_served_and_lists_exactly_the_routed_endpoints() {
    let app = spawn_app().await;
    let served = app
        .client
        .get(format!("{}/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    let served: Value = served.json().await.unwrap();
    assert_eq!(served, document());
    assert_eq!(served["openapi"], "3.1.0");

    let documented: BTreeSet<(String, String)> = served["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, methods)| {
            methods
                .as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = Endpoint::ALL
        .iter()
        .map(|e| e.method_and_path())
        .map(|(m, p)| (m.to_owned(), p.to_owned()))
        .collect();
    assert_eq!(documented, routed);

    // Each endpoint's declared method is the one its handler answers.
    for endpoint in Endpoint::ALL {
        let (method, path) = endpoint.method_and_path();
        let url = format!("{}{}", app.base, path.replace("{id}", "x_1").replace("{name}", "auto"));
        let reply = app.client.request(method.parse().unwrap(), &url).send().await.unwrap();
        assert_ne!(reply.status(), 405, "{method} {path}");
        let body: Value = reply.json().await.unwrap_or(json!({}));
        assert_ne!(body["error"]["code"], "unknown_route", "{method} {path}");
    }
    let webhooks = served["webhooks"].as_object().unwrap();
    assert!(webhooks.contains_key("transaction.confirmed") && webhooks.contains_key("operation.created"));
}

/// The event types a webhook endpoint subscribes to and `GET /v1/events?type=` filters by are
/// exactly the ones the service emits.
#[test]
fn the_documented_event_types_are_the_emitted_ones() {
    let doc = document();
    let emitted: BTreeSet<String> = ops_domain::event::event_types().collect();
    let webhooks: BTreeSet<String> = doc["webhooks"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(webhooks, emitted);
    let filter = doc["paths"]["/v1/events"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "type")
        .unwrap();
    let filterable: BTreeSet<String> = serde_json::from_value(filter["schema"]["enum"].clone()).unwrap();
    assert_eq!(filterable, emitted);
}

/// Every link names an operation that exists and a path or query parameter that operation
/// takes, fed from the id of what the source answered (or of its page's first entry): the
/// fuzzer's chains (`scripts/test`) and generated clients follow them.
#[test]
fn every_link_leads_to_a_parameter_of_an_existing_operation() {
    let doc = document();
    let mut operations = std::collections::BTreeMap::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for operation in methods.as_object().unwrap().values() {
            operations.insert(
                operation["operationId"].as_str().unwrap().to_owned(),
                (path.clone(), operation),
            );
        }
    }
    let mut links = 0;
    for (source, (_, operation)) in &operations {
        for (code, response) in operation["responses"].as_object().unwrap() {
            for (name, link) in response["links"].as_object().into_iter().flatten() {
                let at = format!("{source} {code} {name}");
                let target = link["operationId"].as_str().unwrap();
                let (path, target_operation) = operations
                    .get(target)
                    .unwrap_or_else(|| panic!("{at}: no operation {target}"));
                for (parameter, expression) in link["parameters"].as_object().unwrap() {
                    match parameter.split_once('.').unwrap() {
                        ("path", name) => {
                            assert!(path.contains(&format!("{{{name}}}")), "{at}: {target} has no {name}")
                        }
                        ("query", name) => assert!(
                            target_operation["parameters"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .any(|p| p["in"] == "query" && p["name"] == name),
                            "{at}: {target} has no query parameter {name}"
                        ),
                        (place, _) => panic!("{at}: a link into the {place}"),
                    }
                    let schema = &response["content"]["application/json"]["schema"];
                    match expression.as_str().unwrap() {
                        // A list's first entry: the answer is a page.
                        "$response.body#/data/0/id" => assert!(schema.to_string().contains("data"), "{at}"),
                        "$response.body#/id" => {
                            let name = schema["$ref"]
                                .as_str()
                                .unwrap()
                                .trim_start_matches("#/components/schemas/");
                            let id = &doc["components"]["schemas"][name]["properties"]["id"];
                            assert!(id.is_object(), "{at}: {name} has no id");
                        }
                        other => panic!("{at}: {other}"),
                    }
                    links += 1;
                }
            }
        }
    }
    assert!(links >= 30, "only {links} links");
}

fn assert_has_required(schema_name: &str, value: &Value) {
    let doc = document();
    let schema = &doc["components"]["schemas"][schema_name];
    for field in schema["required"]
        .as_array()
        .unwrap_or_else(|| panic!("no schema {schema_name}"))
    {
        let field = field.as_str().unwrap();
        assert!(
            value.get(field).is_some(),
            "{schema_name} lacks the required {field}: {value}"
        );
    }
    for (field, _) in value.as_object().unwrap() {
        assert!(
            schema["properties"].get(field).is_some(),
            "{schema_name}.{field} is not documented"
        );
    }
}

#[tokio::test]
async fn real_responses_match_their_schemas() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let receiver = Receiver::start(0).await;
    let endpoint = app
        .post("/v1/webhook_endpoints", &customer.key, json!({"url": receiver.url}))
        .await
        .json();
    assert_has_required("WebhookEndpoint", &endpoint);
    let user = app
        .post(
            &format!("/v1/customers/{}/users", customer.id),
            &customer.key,
            json!({"name": "Ana", "email": "ana@acme.example", "roles": ["maker"]}),
        )
        .await
        .json();
    assert_has_required("User", &user);
    let key = app
        .post("/v1/api_keys", &customer.key, json!({"scopes": ["operations:read"]}))
        .await
        .json();
    assert_has_required("ApiKey", &key);
    let customer_object = app
        .post("/v1/customers", ADMIN_KEY, json!({"name": "Schema"}))
        .await
        .json();
    assert_has_required("Customer", &customer_object);
    let operation = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[1_000]))
        .await
        .json();
    assert_has_required("Operation", &operation);
    app.settle(time::Duration::seconds(30), 3).await;
    let id = operation["id"].as_str().unwrap();
    let txn = app
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json()["data"][0]
        .clone();
    assert_has_required("Transaction", &txn);
    let history = app
        .get(&format!("/v1/operations/{id}/history"), &customer.key)
        .await
        .json();
    assert_has_required("HistoryEntry", &history["data"][0]);
    let events = app.get("/v1/events?limit=100", &customer.key).await.json();
    for event in events["data"].as_array().unwrap() {
        assert_has_required("Event", event);
        let data = if event["type"].as_str().unwrap().starts_with("transaction.") {
            "TransactionEventData"
        } else {
            "OperationEventData"
        };
        assert_has_required(data, &event["data"]);
        let deliveries = app.deliveries(&customer.key, event["id"].as_str().unwrap()).await;
        assert_has_required("Delivery", &deliveries[0]);
    }
    let workflow = app.get("/v1/workflows/two_step", &customer.key).await.json();
    assert_has_required("Workflow", &workflow);
    let error = app.get("/v1/operations/op_missing", &customer.key).await.json();
    assert_has_required("Error", &error);
}

/// Free text (names, reasons, references, idempotency keys …) is refused with control
/// characters, bidirectional controls or invisible characters in it; the document says so, so
/// generated clients and fuzzers know.
#[test]
fn every_free_text_input_documents_that_control_characters_are_refused() {
    const NO_CONTROL_CHARACTERS: &str =
        r"^[^\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]*$";
    let doc = document();
    fn walk<'a>(doc: &'a Value, schema: &'a Value, at: String, texts: &mut Vec<(String, &'a Value)>) {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/schemas/");
            return walk(doc, &doc["components"]["schemas"][name], format!("{at}->{name}"), texts);
        }
        let is_string = schema["type"] == "string" || schema["type"] == json!(["string", "null"]);
        if is_string && schema.get("maxLength").is_some() && schema.get("format").is_none() {
            texts.push((at.clone(), schema));
        }
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            walk(doc, property, format!("{at}.{name}"), texts);
        }
        if let Some(items) = schema.get("items") {
            walk(doc, items, format!("{at}[]"), texts);
        }
        for alternatives in ["oneOf", "anyOf", "allOf"] {
            for alternative in schema[alternatives].as_array().into_iter().flatten() {
                walk(doc, alternative, at.clone(), texts);
            }
        }
    }
    let mut texts = vec![];
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let at = format!("{method} {path}");
            walk(
                &doc,
                &operation["requestBody"]["content"]["application/json"]["schema"],
                at.clone(),
                &mut texts,
            );
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                walk(
                    &doc,
                    &parameter["schema"],
                    format!("{at} {}", parameter["name"]),
                    &mut texts,
                );
            }
        }
    }
    let mut free_text = 0;
    for (at, schema) in texts {
        // Fields with a pattern of their own (currency, rail, workflow …) allow a few
        // characters only; every other one refuses control characters.
        let pattern = schema["pattern"].as_str();
        assert!(
            pattern.is_some(),
            "{at} accepts control characters in the document: {schema}"
        );
        free_text += usize::from(pattern == Some(NO_CONTROL_CHARACTERS));
    }
    assert!(free_text >= 17, "only {free_text} free-text inputs found");
}
