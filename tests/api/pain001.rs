//! ISO 20022 files: a pain.001 uploaded as a payroll CSV is (validated whole, its MsgId unique
//! per customer, chunked per payment information and currency), each transaction keeping its
//! end-to-end and instruction ids; its pain.002 status report read back as the operations and
//! transactions it made move, and `file.status_report` telling the customer when they do.

use ops_tests::{pain001, payroll_csv, spawn_app, TestApp};
use serde_json::Value;

const QUERY: &str = "workflow=auto&rail=psp-local:sandbox";

async fn upload(app: &TestApp, key: &str, query: &str, idempotency_key: &str, bytes: Vec<u8>) -> ops_tests::Reply {
    app.upload(
        &format!("/v1/files?{query}"),
        key,
        idempotency_key,
        "application/xml",
        bytes,
    )
    .await
}

/// The report's text, and each transaction's `(OrgnlEndToEndId, TxSts, reason code)` in order.
async fn report(app: &TestApp, key: &str, file_id: &str) -> (String, Vec<(String, String, Option<String>)>) {
    let reply = app
        .get(&format!("/v1/files/{file_id}/status_report?format=pain.002"), key)
        .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.bytes));
    assert_eq!(reply.headers["content-type"], "application/xml; charset=utf-8");
    let text = String::from_utf8(reply.bytes.to_vec()).unwrap();
    let element = |part: &str, name: &str| {
        part.split(&format!("<{name}>"))
            .nth(1)
            .and_then(|rest| rest.split(&format!("</{name}>")).next())
            .map(str::to_owned)
    };
    let transactions = text
        .split("<TxInfAndSts>")
        .skip(1)
        .map(|part| {
            (
                element(part, "OrgnlEndToEndId").unwrap(),
                element(part, "TxSts").unwrap(),
                element(part, "Cd"),
            )
        })
        .collect();
    (text, transactions)
}

fn statuses(transactions: &[(String, String, Option<String>)]) -> Vec<&str> {
    transactions.iter().map(|(_, status, _)| status.as_str()).collect()
}

#[tokio::test]
async fn a_pain001_becomes_operations_per_payment_information_and_its_pain002_follows_them() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    // The sandbox rail rejects an amount ending in 01 at submission.
    let bytes = pain001(
        "MSG-PAYROLL-12",
        &[
            ("SALARIES", &[("E2E-1", "150000", "CLP"), ("E2E-2", "2501", "CLP")]),
            ("SUPPLIERS", &[("E2E-3", "12.50", "EUR"), ("E2E-4", "30000", "CLP")]),
        ],
    );
    let uploaded = upload(&app, &customer.key, QUERY, "pain-1", bytes.clone()).await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file = uploaded.json();
    assert_eq!(
        (file["format"].as_str(), file["rail"].as_str()),
        (Some("pain001"), Some("psp-local:sandbox"))
    );
    assert_eq!(file["initiation"]["message_id"], "MSG-PAYROLL-12");
    let chunks: Vec<(&str, &str, u64)> = file["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["payment_information"].as_str().unwrap(),
                c["currency"].as_str().unwrap(),
                c["lines"].as_u64().unwrap(),
            )
        })
        .collect();
    // A payment information's currencies are chunked apart, and never with another's.
    assert_eq!(
        chunks,
        [("SALARIES", "CLP", 2), ("SUPPLIERS", "EUR", 1), ("SUPPLIERS", "CLP", 1)]
    );
    let file_id = uploaded.id();

    // Validated, its operations not yet made.
    let (text, transactions) = report(&app, &customer.key, &file_id).await;
    assert!(
        text.contains("<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.03\">"),
        "{text}"
    );
    assert!(text.contains("<OrgnlMsgId>MSG-PAYROLL-12</OrgnlMsgId>\n<OrgnlMsgNmId>pain.001.001.03</OrgnlMsgNmId>"));
    assert_eq!(statuses(&transactions), ["ACTC"; 4]);
    assert!(text.contains("<GrpSts>ACTC</GrpSts>"));

    app.settle(time::Duration::minutes(5), 6).await;
    let (text, transactions) = report(&app, &customer.key, &file_id).await;
    let ids: Vec<&str> = transactions.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["E2E-1", "E2E-2", "E2E-3", "E2E-4"], "in the file's order");
    assert_eq!(statuses(&transactions), ["ACSC", "RJCT", "ACSC", "ACSC"], "{text}");
    assert_eq!(transactions[1].2.as_deref(), Some("NARR"));
    assert!(
        text.contains("<AddtlInf>The destination account is closed.</AddtlInf>"),
        "{text}"
    );
    assert!(text.contains("<OrgnlInstrId>I-2</OrgnlInstrId>"));
    let group_statuses: Vec<&str> = text
        .split("<PmtInfSts>")
        .skip(1)
        .map(|p| p.split('<').next().unwrap())
        .collect();
    assert_eq!(group_statuses, ["PART", "ACSC"]);
    assert!(text.contains("<GrpSts>PART</GrpSts>"));

    // Each item keeps its ids; each transaction carries the end-to-end id into its events.
    let file = app.get(&format!("/v1/files/{file_id}"), &customer.key).await.json();
    let operation_id = file["chunks"][0]["operation_id"].as_str().unwrap();
    let operation = app
        .get(&format!("/v1/operations/{operation_id}"), &customer.key)
        .await
        .json();
    assert_eq!(operation["items"][0]["end_to_end_id"], "E2E-1");
    assert_eq!(operation["items"][0]["instruction_id"], "I-1");
    assert_eq!(operation["metadata"]["file_payment_information"], "SALARIES");
    let confirmed = app
        .get("/v1/events?type=transaction.confirmed", &customer.key)
        .await
        .json();
    let mut carried: Vec<&str> = confirmed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["end_to_end_id"].as_str().unwrap())
        .collect();
    carried.sort();
    assert_eq!(carried, ["E2E-1", "E2E-3", "E2E-4"]);
    // The customer was told each time an operation of the file moved.
    let told = app
        .get("/v1/events?type=file.status_report&limit=100", &customer.key)
        .await
        .json();
    let told: Vec<&Value> = told["data"].as_array().unwrap().iter().map(|e| &e["data"]).collect();
    assert!(told.len() >= 3, "{told:?}");
    assert!(told.iter().all(|d| d["file_id"] == file_id.as_str()));
    assert!(told
        .iter()
        .any(|d| d["payment_information"] == "SUPPLIERS" && d["operation_status"] == "completed"));
    assert_eq!(
        told[0]["status_report"],
        format!("/v1/files/{file_id}/status_report?format=pain.002")
    );
}

#[tokio::test]
async fn a_message_id_is_a_file_once_and_a_broken_pain001_creates_nothing() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let first = pain001("MSG-1", &[("P", &[("E-1", "1000", "CLP")])]);
    assert_eq!(upload(&app, &customer.key, QUERY, "first", first).await.status, 202);
    // Other bytes, the same MsgId: the ERP sent the same message again.
    let again = pain001("MSG-1", &[("P", &[("E-1", "2000", "CLP")])]);
    let refused = upload(&app, &customer.key, QUERY, "again", again.clone()).await;
    let error = refused.error(409);
    assert_eq!(error["code"], "duplicate_file");
    assert!(error["message"].as_str().unwrap().contains("MsgId MSG-1"), "{error}");
    let allowed = upload(
        &app,
        &customer.key,
        &format!("{QUERY}&allow_duplicate=true"),
        "allowed",
        again,
    )
    .await;
    assert_eq!(allowed.status, 202);
    // Another customer's MsgId is its own.
    let other = app.create_customer().await;
    let theirs = pain001("MSG-1", &[("P", &[("E-1", "1000", "CLP")])]);
    assert_eq!(upload(&app, &other.key, QUERY, "theirs", theirs).await.status, 202);

    let broken = String::from_utf8(pain001(
        "MSG-2",
        &[("P", &[("E-1", "10.5", "CLP"), ("E-2", "1000", "XXQ")])],
    ))
    .unwrap()
    .replace("<EndToEndId>E-2</EndToEndId>", "");
    let refused = upload(&app, &customer.key, QUERY, "broken", broken.into_bytes()).await;
    let error = refused.error(400);
    assert_eq!(error["code"], "invalid_file");
    let reported: Vec<(&str, &str, Option<&str>, &str)> = error["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap(),
                e["payment_information"].as_str().unwrap(),
                e["end_to_end_id"].as_str(),
                e["code"].as_str().unwrap(),
            )
        })
        .collect();
    let at = |rest: &str| format!("/Document/CstmrCdtTrfInitn/PmtInf[1]/CdtTrfTxInf[{rest}");
    assert_eq!(
        reported,
        [
            (at("1]/Amt/InstdAmt").as_str(), "P", Some("E-1"), "invalid_amount"),
            (at("2]/PmtId/EndToEndId").as_str(), "P", None, "invalid_end_to_end_id"),
            (at("2]/Amt/InstdAmt/@Ccy").as_str(), "P", None, "invalid_currency"),
        ]
    );
    assert!(error["errors"][0]["line"].as_u64().unwrap() > 2);

    for (query, param, code) in [
        ("workflow=auto", "rail", "parameter_missing"),
        ("workflow=auto&rail=psp-local:nowhere", "rail", "unknown_rail"),
    ] {
        let refused = upload(
            &app,
            &customer.key,
            query,
            query,
            pain001("MSG-3", &[("P", &[("E-1", "1", "CLP")])]),
        )
        .await;
        let error = refused.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{query}"
        );
    }
    let csv_with_rail = app
        .upload(
            &format!("/v1/files?{QUERY}"),
            &customer.key,
            "csv",
            "text/csv",
            payroll_csv(&[(100, "CLP")]),
        )
        .await;
    assert_eq!(csv_with_rail.error(400)["param"], "rail");
    let files = app.get("/v1/files", &customer.key).await.json();
    assert_eq!(
        files["data"].as_array().unwrap().len(),
        2,
        "the refused uploads wrote nothing"
    );
}

#[tokio::test]
async fn a_status_report_is_a_pain001s_and_its_customers_only() {
    let app = spawn_app().await;
    let customer = app.create_customer().await;
    let xml = upload(
        &app,
        &customer.key,
        QUERY,
        "xml",
        pain001("M", &[("P", &[("E", "1000", "CLP")])]),
    )
    .await;
    let csv = app
        .upload(
            "/v1/files?workflow=auto",
            &customer.key,
            "csv",
            "text/csv",
            payroll_csv(&[(100, "CLP")]),
        )
        .await;
    let path = |id: String| format!("/v1/files/{id}/status_report");
    let of_csv = app.get(&path(csv.id()), &customer.key).await;
    assert_eq!(of_csv.error(409)["code"], "no_status_report");
    let wrong_format = app
        .get(&format!("{}?format=pain.003", path(xml.id())), &customer.key)
        .await;
    assert_eq!(wrong_format.error(400)["param"], "format");
    let other = app.create_customer().await;
    assert_eq!(app.get(&path(xml.id()), &other.key).await.status, 404);
    // Without a format, the report is a pain.002.
    assert_eq!(app.get(&path(xml.id()), &customer.key).await.status, 200);
}
