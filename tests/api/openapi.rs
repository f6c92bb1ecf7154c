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

/// The event types a webhook endpoint subscribes to (besides `*`) and `GET /v1/events?type=`
/// filters by are exactly the ones the service emits.
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
    let mut subscribable = emitted.clone();
    subscribable.insert("*".into());
    for request in ["CreateWebhookEndpointRequest", "UpdateWebhookEndpointRequest"] {
        let events = &doc["components"]["schemas"][request]["properties"]["events"]["items"]["enum"];
        let documented: BTreeSet<String> = serde_json::from_value(events.clone()).unwrap();
        assert_eq!(documented, subscribable, "{request}");
    }
}

/// Every link names an operation that exists and a path or query parameter that operation
/// takes, fed from the id of what the source answered (or of its page's first entry): the
/// fuzzer's chains (`scripts/test`) and generated clients follow them.
/// Every operation says what it does, as a reader of the rendered reference needs it.
#[test]
fn every_operation_says_what_it_does() {
    let doc = document();
    let mut silent = vec![];
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let said = [&operation["summary"], &operation["description"]]
                .iter()
                .any(|text| text.as_str().is_some_and(|text| text.len() >= 10));
            if operation.is_object() && !said {
                silent.push(format!("{method} {path}"));
            }
        }
    }
    assert!(silent.is_empty(), "no description: {silent:?}");
}

#[test]
fn the_documented_currencies_are_the_ones_the_service_takes() {
    let doc = document();
    let documented: Vec<&str> = doc["components"]["schemas"]["Currency"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|code| code.as_str().unwrap())
        .collect();
    let taken: Vec<&str> = ops_domain::money::Currency::known_codes().collect();
    assert_eq!(documented, taken);
    // Every currency field refers to that list rather than a pattern of its own.
    let text = doc.to_string();
    assert!(!text.contains("[A-Z]{3}"), "a currency documented by pattern");
    assert!(text.matches("#/components/schemas/Currency").count() >= 6);
}

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
    for (field, value) in value.as_object().unwrap() {
        assert!(
            schema["properties"].get(field).is_some(),
            "{schema_name}.{field} is not documented"
        );
        // An id has the shape the document gives it.
        if let (Some(pattern), Some(id)) = (schema["properties"][field]["pattern"].as_str(), value.as_str()) {
            if field == "id" || field.ends_with("_id") {
                let shape = regex_lite::Regex::new(pattern).unwrap();
                assert!(
                    shape.is_match(id),
                    "{schema_name}.{field} {id} does not match {pattern}"
                );
            }
        }
    }
}

/// Every id an answer holds says its kind's prefix, so a generated client can type it; those
/// that are not the service's ids (a history entry names an entity of any kind, a statement
/// line the bank's reference, a line or a transaction its customer's end-to-end id) are the
/// only ones without.
#[test]
fn every_id_an_answer_holds_documents_its_kind() {
    let doc = document();
    let mut unshaped = vec![];
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if name.ends_with("Request") {
            continue;
        }
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            if (field == "id" || field.ends_with("_id")) && property.get("pattern").is_none() {
                unshaped.push(format!("{name}.{field}"));
            }
        }
    }
    assert_eq!(
        unshaped,
        [
            "HistoryEntry.entity_id",
            "ReconciliationLine.end_to_end_id",
            "ReconciliationLine.statement_transaction_id",
            "Transaction.end_to_end_id",
            "TransactionEventData.end_to_end_id"
        ]
    );
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
        let data = match event["type"].as_str().unwrap().split('.').next() {
            Some("transaction") => "TransactionEventData",
            Some("customer") => "CustomerEventData",
            _ => "OperationEventData",
        };
        assert_has_required(data, &event["data"]);
        if event["type"] == "customer.created" {
            continue; // made before the customer's endpoint: delivered to none
        }
        let deliveries = app.deliveries(&customer.key, event["id"].as_str().unwrap()).await;
        assert_has_required("Delivery", &deliveries[0]);
    }
    let workflow = app.get("/v1/workflows/two_step", &customer.key).await.json();
    assert_has_required("Workflow", &workflow);
    let error = app.get("/v1/operations/op_missing", &customer.key).await.json();
    assert_has_required("Error", &error);
}

/// Every text input of the document's requests (bodies and parameters), named by where it is.
fn text_inputs(doc: &Value) -> Vec<(String, Value)> {
    fn walk(doc: &Value, schema: &Value, at: String, texts: &mut Vec<(String, Value)>) {
        if let Some(reference) = schema["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/schemas/");
            return walk(doc, &doc["components"]["schemas"][name], format!("{at}->{name}"), texts);
        }
        let is_string = schema["type"] == "string" || schema["type"] == json!(["string", "null"]);
        if is_string && schema.get("maxLength").is_some() && schema.get("format").is_none() {
            texts.push((at.clone(), schema.clone()));
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
                doc,
                &operation["requestBody"]["content"]["application/json"]["schema"],
                at.clone(),
                &mut texts,
            );
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                walk(
                    doc,
                    &parameter["schema"],
                    format!("{at} {}", parameter["name"]),
                    &mut texts,
                );
            }
        }
    }
    texts
}

/// The characters no free text may hold: control, bidirectional and invisible ones.
const REFUSED_CHARACTERS: &str =
    r"\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff";

/// Free text (names, reasons, references, idempotency keys …) is refused with control
/// characters, bidirectional controls or invisible characters in it; the document says so, so
/// generated clients and fuzzers know.
#[test]
fn every_free_text_input_documents_that_control_characters_are_refused() {
    let free_text_pattern = format!("^[^{REFUSED_CHARACTERS}]*$");
    let not_blank_pattern = not_blank_pattern();
    let mut free_text = 0;
    for (at, schema) in text_inputs(&document()) {
        // Fields with a pattern of their own (currency, rail, workflow …) allow a few
        // characters only; every other one refuses control characters.
        let pattern = schema["pattern"].as_str();
        assert!(
            pattern.is_some(),
            "{at} accepts control characters in the document: {schema}"
        );
        free_text += usize::from(pattern == Some(&free_text_pattern) || pattern == Some(&not_blank_pattern));
    }
    assert!(free_text >= 17, "only {free_text} free-text inputs found");
}

/// Free text that must hold something besides spaces: the refused characters around one that
/// is neither one of them nor a space.
fn not_blank_pattern() -> String {
    format!("^[^{REFUSED_CHARACTERS}]*[^\\s{REFUSED_CHARACTERS}][^{REFUSED_CHARACTERS}]*$")
}

/// The text inputs the document says must not be blank are those the service refuses blank,
/// with a 400 naming the field (the rest of the document's texts may be blank).
#[tokio::test]
async fn texts_documented_as_not_blank_are_refused_blank() {
    let not_blank_pattern = not_blank_pattern();
    let documented: BTreeSet<String> = text_inputs(&document())
        .into_iter()
        .filter(|(_, schema)| schema["pattern"].as_str() == Some(&not_blank_pattern))
        .map(|(at, _)| at)
        .collect();
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let blank = json!("  \u{a0} ");
    let member = app.add_member(&customer, &["viewer"], &["operations:read"]).await;
    let pending = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "two_step", &[5_000]),
        )
        .await
        .id();
    let approved = app
        .post("/v1/operations", &customer.key, payout(&customer.id, "auto", &[5_000]))
        .await
        .id();
    app.drain().await;
    let transactions = app
        .get(&format!("/v1/transactions?operation_id={approved}"), &customer.key)
        .await
        .json();
    let transaction = transactions["data"][0]["id"].as_str().unwrap().to_owned();
    let account = app
        .post(
            "/v1/accounts",
            ADMIN_KEY,
            json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await;
    assert_eq!(account.status, 201, "{}", account.json());
    let mut with_blank_beneficiary = payout(&customer.id, "auto", &[5_000]);
    with_blank_beneficiary["items"][0]["beneficiary"]["id"] = blank.clone();
    let mut with_blank_account = payout(&customer.id, "auto", &[5_000]);
    with_blank_account["items"][0]["destination"]["account"] = blank.clone();
    let schedule = |operation: Value, expression: Value| {
        let mut operation = operation;
        operation.as_object_mut().unwrap().remove("customer_id");
        json!({"expression": expression, "operation": operation})
    };
    let reject_rule = json!({"rules": [{"then": {"action": "reject", "reason": blank}}]});
    // (where the document has the field, the request, the field the 400 must name)
    let cases: Vec<(&str, String, &str, Value, &str)> = vec![
        (
            "post /v1/customers->CreateCustomerRequest.name",
            "/v1/customers".to_string(),
            ADMIN_KEY,
            json!({"name": blank}),
            "name",
        ),
        (
            "post /v1/webhook_endpoints->CreateWebhookEndpointRequest.description",
            "/v1/webhook_endpoints".to_string(),
            &customer.key,
            json!({"url": "http://127.0.0.1:9/hook", "description": blank}),
            "description",
        ),
        (
            "post /v1/api_keys->CreateApiKeyRequest.name",
            "/v1/api_keys".to_string(),
            &customer.key,
            json!({"name": blank, "scopes": ["operations:read"]}),
            "name",
        ),
        (
            "post /v1/customers/{id}->UpdateCustomerRequest.name",
            format!("/v1/customers/{}", customer.id),
            ADMIN_KEY,
            json!({"name": blank}),
            "name",
        ),
        (
            "post /v1/customers/{id}/users->CreateUserRequest.name",
            format!("/v1/customers/{}/users", customer.id),
            &customer.key,
            json!({"name": blank, "email": "ana@example.com", "roles": ["viewer"]}),
            "name",
        ),
        (
            "post /v1/customers/{id}/users/{user_id}->UpdateUserRequest.name",
            format!("/v1/customers/{}/users/{}", customer.id, member.user_id),
            &customer.key,
            json!({"name": blank}),
            "name",
        ),
        (
            "post /v1/operations->CreateOperationRequest.items[].beneficiary.id",
            "/v1/operations".to_string(),
            &customer.key,
            with_blank_beneficiary.clone(),
            "items[0].beneficiary.id",
        ),
        (
            "post /v1/operations->CreateOperationRequest.items[].destination.account",
            "/v1/operations".to_string(),
            &customer.key,
            with_blank_account.clone(),
            "items[0].destination.account",
        ),
        (
            "post /v1/operations/{id}/reject->RejectRequest.reason",
            format!("/v1/operations/{pending}/reject"),
            &customer.key,
            json!({"reason": blank}),
            "reason",
        ),
        (
            "post /v1/operations/reject->BulkRejectRequest.reason",
            "/v1/operations/reject".to_string(),
            &customer.key,
            json!({"ids": [pending], "reason": blank}),
            "reason",
        ),
        (
            "post /v1/schedules->CreateScheduleRequest.expression",
            "/v1/schedules".to_string(),
            &customer.key,
            schedule(payout(&customer.id, "auto", &[5_000]), blank.clone()),
            "expression",
        ),
        (
            "post /v1/schedules->CreateScheduleRequest.operation.items[].beneficiary.id",
            "/v1/schedules".to_string(),
            &customer.key,
            schedule(with_blank_beneficiary, json!("rate(1 days)")),
            "operation.items[0].beneficiary.id",
        ),
        (
            "post /v1/schedules->CreateScheduleRequest.operation.items[].destination.account",
            "/v1/schedules".to_string(),
            &customer.key,
            schedule(with_blank_account, json!("rate(1 days)")),
            "operation.items[0].destination.account",
        ),
        (
            "post /v1/accounts/{id}/adjustments->AdjustAccountRequest.reason",
            format!("/v1/accounts/{}/adjustments", account.id()),
            ADMIN_KEY,
            json!({"amount": 100, "direction": "credit", "reason": blank}),
            "reason",
        ),
        (
            "post /v1/transactions/{id}/resolve->ResolveTransactionRequest.reason",
            format!("/v1/transactions/{transaction}/resolve"),
            ADMIN_KEY,
            json!({"status": "confirmed", "reason": blank}),
            "reason",
        ),
        (
            "put /v1/workflows/{name}->PutWorkflowRequest.rules[]->Rule.then.reason",
            "/v1/workflows/blank_reason".to_string(),
            &customer.key,
            reject_rule.clone(),
            "rules[0].then.reason",
        ),
        (
            "put /v1/customers/{id}/approval_floors/{type}->PutWorkflowRequest.rules[]->Rule.then.reason",
            format!("/v1/customers/{}/approval_floors/payout", customer.id),
            &customer.key,
            reject_rule,
            "rules[0].then.reason",
        ),
    ];
    let mut tested = BTreeSet::new();
    for (n, (at, path, key, body, param)) in cases.into_iter().enumerate() {
        let method = if at.starts_with("put ") {
            reqwest::Method::PUT
        } else {
            reqwest::Method::POST
        };
        let reply = app
            .send(method, &path, Some(key), Some(&format!("blank-{n}")), Some(&body))
            .await;
        let error = reply.json();
        assert_eq!(
            (reply.status.as_u16(), error["error"]["param"].as_str()),
            (400, Some(param)),
            "{at}: {error}"
        );
        tested.insert(at.to_string());
    }
    // A rail report, signed with the rail's secret rather than sent with a key.
    let report = serde_json::to_vec(
        &json!({"id": blank, "rail": "psp-local:sandbox", "transaction_id": transaction, "state": "confirmed"}),
    )
    .unwrap();
    let reply = app
        .client
        .post(format!("{}/v1/rail_reports", app.base))
        .header("X-Service-Signature", ops_tests::sign_rail_report(&app.clock, &report))
        .body(report)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 400);
    let error: Value = reply.json().await.unwrap();
    assert_eq!(error["error"]["param"], "id", "{error}");
    tested.insert("post /v1/rail_reports->RailReportRequest.id".into());
    // A query's text: the rail a list of reconciliations is of.
    let reply = app.get("/v1/reconciliations?rail=%20%C2%A0%20", ADMIN_KEY).await;
    assert_eq!(reply.error(400)["param"], "rail");
    tested.insert("get /v1/reconciliations \"rail\"".into());
    for lookup in ["rail_reference", "item_reference", "beneficiary_id"] {
        let reply = app
            .get(&format!("/v1/operations?{lookup}=%20%C2%A0%20"), ADMIN_KEY)
            .await;
        assert_eq!(reply.error(400)["param"], lookup);
        tested.insert(format!("get /v1/operations \"{lookup}\""));
    }
    assert_eq!(documented, tested);
}

#[test]
fn every_route_that_reads_a_body_documents_how_reading_it_fails() {
    let doc = document();
    let mut bodies = 0;
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            if operation.get("requestBody").is_none() {
                continue;
            }
            bodies += 1;
            let responses = operation["responses"].as_object().unwrap();
            // Malformed, not arrived in time (local mode), too large.
            let mut failures = vec!["400", "408", "413"];
            // A rail report's signature covers its bytes as sent, whatever their type.
            if path != "/v1/rail_reports" {
                failures.push("415");
            }
            for code in failures {
                assert!(responses.contains_key(code), "{method} {path} does not document {code}");
            }
        }
    }
    assert!(bodies >= 30, "{bodies}");
}

/// `path` with ids that are well formed for their collection and name nothing.
fn well_formed(path: &str) -> String {
    let mut segments: Vec<String> = path.split('/').map(str::to_owned).collect();
    for at in 1..segments.len() {
        let prefix = match segments[at - 1].as_str() {
            "customers" => "cus",
            "users" => "usr",
            "api_keys" => "key",
            "operations" => "op",
            "transactions" => "txn",
            "events" => "evt",
            "webhook_endpoints" => "whe",
            "schedules" => "sch",
            "accounts" => "acc",
            "work_items" => "wi",
            "files" => "file",
            "reconciliations" => "rec",
            "calendars" => "cal",
            "bank_files" => "bf",
            _ => continue,
        };
        if segments[at].starts_with('{') {
            segments[at] = format!("{prefix}_{}", "0".repeat(26));
        }
    }
    segments.join("/").replace("{name}", "auto").replace("{type}", "payout")
}

/// Every endpoint takes exactly the query parameters its document names: any other is refused
/// by name, never ignored (a filter ignored would answer as if it had been applied), and each
/// documented one is read.
#[tokio::test]
async fn every_endpoint_refuses_a_query_parameter_it_does_not_document() {
    // Several requests an endpoint, every endpoint in a row, from one key: past any rate limit.
    let app = ops_tests::spawn_app_with(|config| config.rate_limit = 0).await;
    let doc = document();
    let mut refused = 0;
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let documented: Vec<&str> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            let url = |query: &str| format!("{}{}?{query}", app.base, well_formed(path));
            let send = |query: String| {
                let request = app
                    .client
                    .request(method.to_uppercase().parse().unwrap(), url(&query))
                    .bearer_auth(ADMIN_KEY)
                    .header("Idempotency-Key", format!("stray-{method}-{path}-{query}"))
                    // The one route that takes a query and a body reads the body first.
                    .header(
                        "Content-Type",
                        if path == "/v1/files" {
                            "text/csv"
                        } else {
                            "application/json"
                        },
                    )
                    .body(if path == "/v1/files" {
                        "beneficiary_id_type\n"
                    } else {
                        "{}"
                    });
                async move {
                    let reply = request.send().await.unwrap();
                    (
                        reply.status().as_u16(),
                        reply.json::<Value>().await.unwrap_or(json!({})),
                    )
                }
            };
            assert!(
                operation["responses"].get("400").is_some(),
                "{method} {path} does not document 400"
            );
            let (status, body) = send("stray=1".into()).await;
            assert_eq!(
                (status, &body["error"]["code"], &body["error"]["param"]),
                (400, &json!("parameter_unknown"), &json!("stray")),
                "{method} {path}"
            );
            refused += 1;
            for name in documented {
                let (_, body) = send(format!("{name}=1")).await;
                assert_ne!(body["error"]["code"], "parameter_unknown", "{method} {path} ?{name}");
            }
        }
    }
    assert_eq!(refused, Endpoint::ALL.len());
}

/// A generated client groups operations by tag: each operation has one, from the document's
/// list, and every listed tag is used.
#[test]
fn every_operation_has_one_declared_tag() {
    let doc = document();
    let declared: BTreeSet<&str> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tag| {
            assert!(tag["description"].as_str().is_some_and(|d| d.len() >= 10), "{tag}");
            tag["name"].as_str().unwrap()
        })
        .collect();
    let mut used = BTreeSet::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let tags = operation["tags"].as_array().map(Vec::as_slice).unwrap_or_default();
            assert_eq!(tags.len(), 1, "{method} {path}: {tags:?}");
            let tag = tags[0].as_str().unwrap();
            assert!(declared.contains(tag), "{method} {path}: {tag} is not declared");
            used.insert(tag);
        }
    }
    assert_eq!(used, declared, "declared tags no operation uses");
}

/// Amounts reach 999,999,999,999 minor units, past a 32-bit integer: a generator that is not
/// told otherwise makes every integer 32 bits, so every integer of the document says int64.
#[test]
fn every_integer_is_declared_64_bits() {
    fn walk(value: &Value, at: String, narrow: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                let integer = match &fields.get("type") {
                    Some(Value::String(t)) => t == "integer",
                    Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
                    _ => false,
                };
                if integer && fields.get("format") != Some(&json!("int64")) {
                    narrow.push(at.clone());
                }
                for (name, field) in fields {
                    walk(field, format!("{at}/{name}"), narrow);
                }
            }
            Value::Array(values) => {
                for (n, field) in values.iter().enumerate() {
                    walk(field, format!("{at}/{n}"), narrow);
                }
            }
            _ => {}
        }
    }
    let mut narrow = vec![];
    walk(&document(), String::new(), &mut narrow);
    assert!(narrow.is_empty(), "integers without format int64: {narrow:?}");
    let amount = &document()["components"]["schemas"]["Operation"]["properties"]["total_amount"];
    assert_eq!(amount["format"], "int64");
}

/// Every operation that reads the store can answer 500 (it did not answer), documented with
/// the error's schema, as a client generated from the document needs to read it.
#[test]
fn every_operation_that_reads_the_store_documents_its_500() {
    let doc = document();
    let mut checked = 0;
    for (path, methods) in doc["paths"].as_object().unwrap() {
        if ["/health", "/board", "/console", "/v1/openapi.json"].contains(&path.as_str()) {
            continue;
        }
        for (method, operation) in methods.as_object().unwrap() {
            let answer = &operation["responses"]["500"];
            assert_eq!(
                answer["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error",
                "{method} {path}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, Endpoint::ALL.len() - 4);
}

/// A rail report is authenticated by the rail's signature, declared as a security scheme (a
/// generated client then asks for it as it asks for a key), not as a plain header.
#[test]
fn the_rail_reports_signature_is_a_security_scheme() {
    let doc = document();
    let scheme = &doc["components"]["securitySchemes"]["railSignature"];
    assert_eq!((&scheme["type"], &scheme["in"]), (&json!("apiKey"), &json!("header")));
    assert_eq!(scheme["name"], "X-Service-Signature");
    let report = &doc["paths"]["/v1/rail_reports"]["post"];
    assert_eq!(report["security"], json!([{"railSignature": []}]));
}

/// Each id in a path, on every operation, is documented with the shape the service takes (its
/// kind's prefix, then letters and digits), so a client checks it before sending. On each GET,
/// an id of that shape reaches the route (an unknown one is 404) and one of another kind is
/// refused as malformed, never a 5xx.
#[tokio::test]
async fn every_path_id_documents_the_shape_the_service_takes() {
    let app = spawn_app().await;
    let doc = document();
    let (mut shapes, mut requests) = (0, 0);
    for (path, methods) in doc["paths"].as_object().unwrap() {
        let well_formed_path = well_formed(path);
        let segments: Vec<(&str, &str)> = path.split('/').zip(well_formed_path.split('/')).collect();
        for (method, operation) in methods.as_object().unwrap() {
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let name = parameter["name"].as_str().unwrap();
                if parameter["in"] != "path" || !name.ends_with("id") {
                    continue;
                }
                let (_, id) = segments
                    .iter()
                    .find(|(documented, _)| *documented == format!("{{{name}}}"))
                    .unwrap_or_else(|| panic!("{path} has no {{{name}}}"));
                let pattern = parameter["schema"]["pattern"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path}: {name} has no pattern"));
                let shape = regex_lite::Regex::new(pattern).unwrap();
                assert!(shape.is_match(id), "{method} {path}: {id} does not match {pattern}");
                let other_kind = id.replacen('_', "x_", 1);
                assert!(
                    !shape.is_match(&other_kind),
                    "{method} {path}: {pattern} takes {other_kind}"
                );
                shapes += 1;
            }
        }
        if !(methods.get("get").is_some() && path.contains("id}")) {
            continue;
        }
        let known = app.get(&well_formed_path, ADMIN_KEY).await;
        assert_eq!(known.status, 404, "GET {well_formed_path}: {}", known.json());
        let malformed = well_formed_path.replacen("_0", "x_0", 1);
        let refused = app.get(&malformed, ADMIN_KEY).await;
        assert!(
            refused.status.is_client_error(),
            "GET {malformed}: {} {}",
            refused.status,
            refused.json()
        );
        requests += 1;
    }
    assert!(shapes >= 50 && requests >= 25, "{shapes} ids, {requests} requests");
}

/// Every answer to an API key says the room it has left (`RateLimit-*`), as the document
/// tells a client: on each success and on each 429, beside `Retry-After`.
#[test]
fn every_answer_to_a_key_documents_its_rate_limit_headers() {
    let doc = document();
    for name in ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"] {
        assert_eq!(
            doc["components"]["headers"][name]["schema"]["format"], "int64",
            "{name}"
        );
    }
    let mut checked = 0;
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            if operation.get("security").is_some() {
                continue; // not answered to an API key
            }
            for (code, answer) in operation["responses"].as_object().unwrap() {
                if !(code.starts_with('2') || code == "429") {
                    continue;
                }
                for name in ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"] {
                    assert_eq!(
                        answer["headers"][name]["$ref"],
                        format!("#/components/headers/{name}"),
                        "{method} {path} {code}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 170, "{checked}");
}
