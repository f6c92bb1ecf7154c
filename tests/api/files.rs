//! Payroll files: validated whole, kept, and made into operations of at most
//! 1,000 items per currency by the worker, each chunk exactly once.

use ops_domain::ports::{QueueName, QueueTask};
use ops_infra::QueueConsumer;
use ops_tests::{payroll_csv, spawn_app, TestApp};
use serde_json::{json, Value};
use std::collections::HashSet;
use time::Duration;

async fn upload(app: &TestApp, key: &str, query: &str, idempotency_key: &str, bytes: Vec<u8>) -> ops_tests::Reply {
    app.upload(&format!("/v1/files?{query}"), key, idempotency_key, "text/csv", bytes)
        .await
}

/// The split the transition consumer queues for a newly accepted file, taken off its queue as
/// a worker takes it: not acknowledged, so it comes back unless the test drains it.
async fn take_split(app: &TestApp) -> Vec<ops_domain::ports::QueueMessage> {
    app.driver()
        .round(ops_runtime::driver::Trigger::Stream(
            ops_runtime::driver::StreamConsumer::Transition,
        ))
        .await
        .unwrap();
    app.embedded()
        .queue
        .receive(QueueName::Files, 10, Duration::ZERO)
        .await
        .unwrap()
}

/// The file is completed, its cause saying how its chunks went.
fn assert_completed_saying(file: &Value, message: &str) {
    assert_eq!(
        (&file["status"], &file["cause"]["code"], &file["cause"]["message"]),
        (&json!("completed"), &json!("file_completed"), &json!(message)),
        "{file}"
    );
}

/// The operations a file's chunks made, as the API shows them.
async fn operations_of(app: &TestApp, key: &str, file: &Value) -> Vec<Value> {
    let mut operations = vec![];
    for chunk in file["chunks"].as_array().unwrap() {
        let id = chunk["operation_id"].as_str().unwrap_or_else(|| panic!("{chunk}"));
        let operation = app.get(&format!("/v1/operations/{id}"), key).await;
        assert_eq!(operation.status, 200);
        operations.push(operation.json());
    }
    operations
}

#[tokio::test]
async fn a_payroll_file_becomes_operations_of_at_most_a_thousand_items_per_currency_each_through_its_workflow() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let mut lines: Vec<(i64, &str)> = (0..2_500).map(|i| (100 * (i + 1), "CLP")).collect();
    lines.extend([(1_000, "USD"), (2_000, "USD"), (3_000, "USD")]);
    let bytes = payroll_csv(&lines);

    let uploaded = upload(&app, &customer.key, "workflow=two_step", "payroll-may", bytes.clone()).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file = uploaded.json();
    assert_eq!(
        (file["object"].as_str(), file["status"].as_str()),
        (Some("file"), Some("accepted"))
    );
    assert_eq!(file["line_count"], 2_503);
    assert_eq!(file["totals"][0]["amount"], (1..=2_500).map(|i| 100 * i).sum::<i64>());
    assert_eq!(file["totals"][1]["amount"], 6_000);
    let planned: Vec<(String, u64)> = file["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["currency"].as_str().unwrap().to_owned(), c["lines"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        planned,
        [
            ("CLP".into(), 1000),
            ("CLP".into(), 1000),
            ("CLP".into(), 500),
            ("USD".into(), 3)
        ]
    );

    // The same request again is the same file.
    let replayed = upload(&app, &customer.key, "workflow=two_step", "payroll-may", bytes.clone()).await;
    assert_eq!((replayed.status.as_u16(), replayed.id()), (202, uploaded.id()));
    assert_eq!(replayed.headers["idempotent-replayed"], "true");

    app.drain().await;
    let file = app
        .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
        .await
        .json();
    assert_eq!(file["status"], "completed", "{file}");
    let operations = operations_of(&app, &customer.key, &file).await;
    let mut references = HashSet::new();
    for (operation, chunk) in operations.iter().zip(file["chunks"].as_array().unwrap()) {
        // Each chunk waits for its approver, as a create with this workflow would.
        assert_eq!(operation["status"], "pending_approval");
        assert_eq!(operation["file_id"], file["id"]);
        assert_eq!(operation["currency"], chunk["currency"]);
        assert_eq!(operation["total_amount"], chunk["amount"]);
        for item in operation["items"].as_array().unwrap() {
            assert!(references.insert(item["reference"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(references.len(), 2_503, "every line is an item, once");

    // The file's history: accepted, then processing, then completed, each with its cause; the
    // completion's says how every chunk went, not what the last one did.
    assert_completed_saying(&file, "All 4 chunk(s) done, each made its operation");
    let events = app.get("/v1/events?type=file.completed", &customer.key).await.json();
    assert_eq!(events["data"][0]["data"]["file_id"], file["id"]);
    assert_eq!(events["data"][0]["data"]["cause"], file["cause"]);
    // Its data names the file first and ends with the file as a read shows it, byte for byte.
    let event_id = events["data"][0]["id"].as_str().unwrap();
    let event_text = String::from_utf8(app.get(&format!("/v1/events/{event_id}"), &customer.key).await.bytes).unwrap();
    let file_text = String::from_utf8(
        app.get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
            .await
            .bytes,
    )
    .unwrap();
    assert!(
        event_text.contains(&format!(
            "\"data\":{{\"file_id\":\"{}\",\"customer_id\":",
            uploaded.id()
        )),
        "{event_text}"
    );
    assert!(
        event_text.contains(&format!(",\"object\":{file_text}}}")),
        "{event_text}\n{file_text}"
    );
    let listed = app.get("/v1/files", &customer.key).await.json();
    assert_eq!(listed["data"][0]["id"], file["id"]);

    // The same bytes under another key are a duplicate, unless asked for.
    let again = upload(
        &app,
        &customer.key,
        "workflow=two_step",
        "payroll-may-again",
        bytes.clone(),
    )
    .await;
    assert_eq!(again.error(409)["code"], "duplicate_file");
    let other = app.create_customer().await;
    assert_eq!(
        app.get(&format!("/v1/files/{}", uploaded.id()), &other.key)
            .await
            .status,
        404,
        "another customer's file is not there"
    );
    let allowed = upload(
        &app,
        &customer.key,
        "workflow=two_step&allow_duplicate=true",
        "payroll-may-again",
        bytes,
    )
    .await;
    assert_eq!(allowed.status, 202, "{}", allowed.json());
    assert_ne!(allowed.id(), uploaded.id());
}

#[tokio::test]
async fn a_small_auto_approved_file_is_paid_like_any_payout() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let bytes = payroll_csv(&[(1_500, "CLP"), (2_500, "CLP")]);
    let uploaded = upload(&app, &customer.key, "workflow=auto", "small", bytes).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    app.settle(Duration::seconds(30), 4).await;
    let file = app
        .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
        .await
        .json();
    let operation = &operations_of(&app, &customer.key, &file).await[0];
    assert_eq!(operation["status"], "completed", "{operation}");
    assert_eq!(app.sandbox().await.len(), 2);
}

#[tokio::test]
async fn an_invalid_file_is_refused_with_every_error_and_creates_nothing() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let header = "beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n";
    let bad = format!(
        "{header}RUT,1-9,psp-local:sandbox,001,12.50,CLP,ok\n\
         RUT,2-7,psp-local:nowhere,002,100,CLP,ok\n\
         RUT,3-5,psp-local:sandbox,003,100,CLP,=cmd|' /C calc'!A0\n\
         RUT,4-3,psp-local:sandbox,004,100\n\
         RUT,,psp-local:nowhere,+005,1e3,CLP,ok\n"
    );
    let refused = upload(&app, &customer.key, "workflow=auto", "bad", bad.into_bytes()).await;
    let error = refused.error(400);
    assert_eq!(
        (error["code"].as_str(), error["param"].as_str()),
        (Some("invalid_file"), Some("file"))
    );
    let found: Vec<(u64, Option<&str>, &str)> = error["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["line"].as_u64().unwrap(),
                e["column"].as_str(),
                e["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (2, Some("amount"), "invalid_amount"),
            (3, Some("rail"), "unknown_rail"),
            (4, Some("reference"), "formula_not_allowed"),
            (5, None, "wrong_field_count"),
            // Every error of a line, a formula-like cell among them.
            (6, Some("beneficiary_id"), "parameter_missing"),
            (6, Some("rail"), "unknown_rail"),
            (6, Some("account"), "formula_not_allowed"),
            (6, Some("amount"), "invalid_amount"),
        ]
    );
    assert_eq!(error["error_count"], 8);

    let ok_line = "RUT,1-9,psp-local:sandbox,001,100,CLP,ok\n";
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "not UTF-8",
            "text/csv",
            [header.as_bytes(), b"RUT,\xff\xfe,x,1,1,CLP,\n"].concat(),
            400,
            "invalid_file",
        ),
        ("empty", "text/csv", vec![], 400, "invalid_file"),
        (
            "header only",
            "text/csv",
            header.as_bytes().to_vec(),
            400,
            "invalid_file",
        ),
        (
            "a missing column",
            "text/csv",
            format!("beneficiary_id_type,beneficiary_id,rail,account,amount,currency\n{ok_line}").into_bytes(),
            400,
            "invalid_file",
        ),
        (
            "an extra column",
            "text/csv",
            format!("{},iban\n{}", header.trim_end(), ok_line.replace('\n', ",x\n")).into_bytes(),
            400,
            "invalid_file",
        ),
        (
            "not CSV",
            "application/json",
            b"{\"items\": []}".to_vec(),
            415,
            "unsupported_media_type",
        ),
        (
            "5 MiB and one byte",
            "text/csv",
            vec![b'a'; ops_domain::files::MAX_FILE_BYTES + 1],
            413,
            "body_too_large",
        ),
    ];
    for (case, content_type, bytes, status, code) in cases {
        let refused = app
            .upload("/v1/files?workflow=auto", &customer.key, case, content_type, bytes)
            .await;
        assert_eq!(refused.error(status)["code"], code, "{case}");
    }
    let valid = payroll_csv(&[(100, "CLP")]);
    for (query, param, code) in [
        ("", "workflow", "parameter_missing"),
        ("workflow=nobody", "workflow", "unknown_workflow"),
        (
            "workflow=auto&allow_duplicate=maybe",
            "allow_duplicate",
            "parameter_invalid",
        ),
        ("workflow=auto&color=red", "color", "parameter_unknown"),
    ] {
        let refused = upload(&app, &customer.key, query, &format!("query {query}"), valid.clone()).await;
        let error = refused.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{query}"
        );
    }
    // Nothing was written: no file, no operation, and the refused keys are free again.
    assert_eq!(
        app.get("/v1/files", &customer.key).await.json()["data"],
        serde_json::json!([])
    );
    assert_eq!(
        app.get("/v1/operations", &customer.key).await.json()["data"],
        serde_json::json!([])
    );
    let fixed = upload(&app, &customer.key, "workflow=auto", "bad", valid).await;
    assert_eq!(fixed.status, 202, "{}", fixed.json());
}

#[tokio::test]
async fn a_split_run_twice_at_once_or_again_after_a_crash_makes_each_chunk_once() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // Seven chunks: one message makes five and hands the rest on.
    let lines: Vec<(i64, &str)> = (0..6_500).map(|i| (100 * (i + 1), "CLP")).collect();
    let uploaded = upload(&app, &customer.key, "workflow=two_step", "big", payroll_csv(&lines)).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file_id = uploaded.id();
    let service = app.driver().service().clone();

    // The transition consumer queues the split; two workers take the same message at once
    // (a redelivery while the first still runs) and neither acknowledges it (both crash).
    let messages = take_split(&app).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        QueueTask::parse(&messages[0].body).unwrap(),
        QueueTask::SplitFile {
            file_id: file_id.as_str().into()
        }
    );
    let (first, second) = tokio::join!(
        service.handle_file_splits(&messages),
        service.handle_file_splits(&messages)
    );
    assert!(first.failed.is_empty() && second.failed.is_empty());

    // The message comes back and the worker finishes the file.
    app.drain().await;
    let file = app.get(&format!("/v1/files/{file_id}"), &customer.key).await.json();
    assert_eq!(file["status"], "completed", "{file}");
    let made: HashSet<String> = file["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(made.len(), 7);
    // No operation was made that the file does not record.
    let listed = app.get("/v1/operations?limit=100", &customer.key).await.json();
    let listed: HashSet<String> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, made);
    let history = app.get("/v1/events?type=file.completed", &customer.key).await.json();
    assert_eq!(history["data"].as_array().unwrap().len(), 1, "completed once");
}

#[tokio::test]
async fn a_thousand_lines_with_every_field_at_its_longest_are_split_into_operations_that_fit() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let mut csv = String::from("beneficiary_id_type,beneficiary_id,rail,account,amount,currency,reference\n");
    let reference = "r".repeat(140);
    for i in 0..1000 {
        csv += &format!(
            "{},{:0>64},psp-local:sandbox,{:0>64},{},CLP,{reference}\n",
            "T".repeat(16),
            i,
            i,
            1_000 + i
        );
    }
    let uploaded = upload(&app, &customer.key, "workflow=two_step", "long", csv.into_bytes()).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    app.drain().await;
    let file = app
        .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
        .await
        .json();
    assert_eq!(file["status"], "completed");
    let chunks = file["chunks"].as_array().unwrap();
    assert!(chunks.len() > 1, "{file}");
    assert!(chunks.iter().all(|c| c["refused"].is_null()), "{file}");
    let items: usize = operations_of(&app, &customer.key, &file)
        .await
        .iter()
        .map(|o| o["items"].as_array().unwrap().len())
        .sum();
    assert_eq!(items, 1000);
}

#[tokio::test]
async fn chunks_left_when_the_uploading_key_is_revoked_are_refused_and_the_file_completes_saying_so() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let uploader = app
        .post(
            "/v1/api_keys",
            &customer.key,
            json!({"scopes": ["operations:read", "operations:write"]}),
        )
        .await
        .json();
    let (key_id, secret) = (uploader["id"].as_str().unwrap(), uploader["secret"].as_str().unwrap());
    // Seven chunks: the split's first run makes five.
    let lines: Vec<(i64, &str)> = (0..6_500).map(|i| (100 * (i + 1), "CLP")).collect();
    let uploaded = upload(&app, secret, "workflow=two_step", "big", payroll_csv(&lines)).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let messages = take_split(&app).await;
    let first_run = app.driver().service().handle_file_splits(&messages).await;
    assert!(first_run.failed.is_empty());

    // The key that uploaded the file is revoked before the rest are made.
    let revoked = app.delete(&format!("/v1/api_keys/{key_id}"), &customer.key).await;
    assert_eq!(revoked.status, 200, "{}", revoked.json());
    app.drain().await;

    let file = app
        .get(&format!("/v1/files/{}", uploaded.id()), &customer.key)
        .await
        .json();
    assert_eq!(file["status"], "completed", "{file}");
    let chunks = file["chunks"].as_array().unwrap();
    assert!(
        chunks[..5]
            .iter()
            .all(|c| c["operation_id"].is_string() && c["refused"].is_null()),
        "{file}"
    );
    let why = format!("The API key {key_id} that made the file was revoked.");
    assert!(
        chunks[5..]
            .iter()
            .all(|c| c["operation_id"].is_null() && c["refused"] == why.as_str()),
        "{file}"
    );
    assert_completed_saying(&file, "All 7 chunk(s) done: 5 made an operation, 2 refused");
    let made = app.get("/v1/operations?limit=100", &customer.key).await.json();
    assert_eq!(
        made["data"].as_array().unwrap().len(),
        5,
        "no operation for a refused chunk"
    );
}
