//! Reconciliation: a rail's statement matched against the transactions held
//! here; what it reports applied through the rail-report path; each break an exceptions item;
//! the same statement twice changes nothing the second time.

use ops_tests::{payout, spawn_app, statement_body, TestApp, ADMIN_KEY};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use time::Duration;

/// Pays `amounts` (one operation) and runs the pipeline until the sandbox has confirmed them;
/// answers the sandbox statement's lines by amount.
async fn confirmed_payouts(app: &TestApp, amounts: &[i64]) -> BTreeMap<i64, Vec<String>> {
    let acme = app.create_customer().await;
    let made = app
        .post("/v1/operations", &acme.key, payout(&acme.id, "auto", amounts))
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    app.settle(Duration::seconds(30), 10).await;
    let statement = app.sandbox_statement().await;
    let mut lines = BTreeMap::new();
    for line in statement.lines().skip(1) {
        let fields: Vec<String> = line.split(',').map(String::from).collect();
        lines.insert(fields[2].parse::<i64>().unwrap(), fields);
    }
    assert_eq!(lines.len(), amounts.len(), "{statement}");
    lines
}

async fn import(app: &TestApp, key: &str, idempotency_key: &str, body: Value) -> ops_tests::Reply {
    app.send(
        reqwest::Method::POST,
        "/v1/reconciliations",
        Some(key),
        Some(idempotency_key),
        Some(&body),
    )
    .await
}

async fn statement_line_items(app: &TestApp) -> Vec<Value> {
    app.open_exceptions()
        .await
        .into_iter()
        .filter(|i| i["subject"]["type"] == "statement_line")
        .collect()
}

async fn transaction(app: &TestApp, id: &str) -> Value {
    let found = app.get(&format!("/v1/transactions/{id}"), ADMIN_KEY).await;
    assert_eq!(found.status, 200, "{}", found.json());
    found.json()
}

#[tokio::test]
async fn the_sandbox_statement_is_matched_line_by_line_and_its_breaks_become_exceptions_once() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[20_000, 30_000, 40_000, 50_000, 60_000]).await;
    let txn = |amount: i64| lines[&amount][1].clone();
    for amount in [20_000, 30_000, 40_000, 50_000, 60_000] {
        assert_eq!(transaction(&app, &txn(amount)).await["status"], "confirmed");
    }
    let today = lines[&20_000][5].clone();
    // The rail says: the first as held here; the second returned; the third for another
    // amount; the fourth not at all; the fifth failed; and a payment no transaction here
    // answers to.
    let line = |fields: &[String]| fields.join(",");
    let mut returned = lines[&30_000].clone();
    returned[4] = "returned".into();
    let mut other_amount = lines[&40_000].clone();
    other_amount[2] = "40001".into();
    let mut failed = lines[&60_000].clone();
    failed[4] = "failed".into();
    let statement = [
        ops_infra::rails::STATEMENT_HEADER.to_owned(),
        line(&lines[&20_000]),
        line(&returned),
        line(&other_amount),
        format!("sbx_stranger,,12345,CLP,confirmed,{today},debit"),
        line(&failed),
    ]
    .join("\n");

    let imported = import(
        &app,
        ADMIN_KEY,
        "statement-1",
        statement_body("csv", statement.as_bytes()),
    )
    .await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(reconciliation["object"], "reconciliation");
    assert_eq!(
        reconciliation["outcomes"],
        json!({"matched": 1, "matched_with_difference": 0, "mismatched": 3, "unmatched": 1, "wrong_direction": 0, "missing": 1, "balance_mismatch": 0})
    );
    assert_eq!(reconciliation["period"], json!({"from": today, "to": today}));
    assert_eq!(
        (
            &reconciliation["transitions_applied"],
            &reconciliation["work_items_opened"]
        ),
        (&json!(2), &json!(5))
    );

    // The return is applied through the rail path, with the statement as its cause.
    let now_returned = transaction(&app, &txn(30_000)).await;
    assert_eq!(
        (now_returned["status"].as_str(), now_returned["cause"]["code"].as_str()),
        (Some("returned"), Some("statement_returned"))
    );
    assert_eq!(now_returned["cause"]["actor"]["type"], "rail");
    // Confirmed money can only come back: a statement that says it failed returns it.
    let failed_after_all = transaction(&app, &txn(60_000)).await;
    assert_eq!(
        (
            failed_after_all["status"].as_str(),
            failed_after_all["cause"]["code"].as_str()
        ),
        (Some("returned"), Some("statement_failed"))
    );
    // Nothing else moved: a different amount is for an operator to look at.
    assert_eq!(transaction(&app, &txn(40_000)).await["status"], "confirmed");

    let id = reconciliation["id"].as_str().unwrap().to_owned();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines?limit=100"), ADMIN_KEY)
        .await;
    assert_eq!(page.status, 200, "{}", page.json());
    let seen: Vec<Value> = page.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            assert_eq!(l["object"], "reconciliation_line");
            assert_eq!(l["work_item_id"].is_string(), l["outcome"] != "matched", "{l}");
            json!([
                l["outcome"],
                l["transaction_id"],
                l["matched_by"],
                l["differences"],
                l["applied"]
            ])
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            json!(["matched", txn(20_000), "rail_reference", [], null]),
            json!(["mismatched", txn(30_000), "rail_reference", ["status"], "returned"]),
            json!(["mismatched", txn(40_000), "rail_reference", ["amount"], null]),
            json!(["unmatched", null, null, [], null]),
            json!(["mismatched", txn(60_000), "rail_reference", ["status"], "returned"]),
            json!(["missing", txn(50_000), null, [], null]),
        ]
    );
    let missing = app
        .get(&format!("/v1/reconciliations/{id}/lines?outcome=missing"), ADMIN_KEY)
        .await
        .json();
    assert_eq!(missing["data"].as_array().unwrap().len(), 1);
    let after = app
        .get(
            &format!("/v1/reconciliations/{id}/lines?starting_after=3&limit=1"),
            ADMIN_KEY,
        )
        .await
        .json();
    assert_eq!(
        (after["data"][0]["number"].as_u64(), after["has_more"].as_bool()),
        (Some(4), Some(true))
    );

    let items = statement_line_items(&app).await;
    let mut kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "reconciliation_mismatched",
            "reconciliation_mismatched",
            "reconciliation_mismatched",
            "reconciliation_missing",
            "reconciliation_unmatched"
        ]
    );
    // Each item says what an operator must look at, as the statement and the service hold it.
    let said = |kind: &str| -> Vec<String> {
        items
            .iter()
            .filter(|i| i["kind"] == kind)
            .map(|i| i["cause"]["message"].as_str().unwrap().to_owned())
            .collect()
    };
    let amount_differs = format!(
        "does not agree with transaction {}: the statement says 40001 CLP, the transaction 40000 CLP.",
        txn(40_000)
    );
    assert!(
        said("reconciliation_mismatched")
            .iter()
            .any(|m| m.ends_with(&amount_differs)),
        "{:?}",
        said("reconciliation_mismatched")
    );
    assert_eq!(
        said("reconciliation_missing"),
        [format!(
            "Transaction {} (50000 CLP, confirmed on psp-local:sandbox) is not in the statement (reconciliation {id}, line 6).",
            txn(50_000)
        )]
    );
    let events = app
        .get("/v1/events?type=reconciliation.completed", ADMIN_KEY)
        .await
        .json();
    assert_eq!(events["data"].as_array().unwrap().len(), 1, "{events}");
    assert_eq!(events["data"][0]["data"]["reconciliation_id"], id.as_str());

    // The same statement again, under another key: the same reconciliation, nothing new.
    let version = now_returned["version"].clone();
    let again = import(
        &app,
        ADMIN_KEY,
        "statement-1-again",
        statement_body("csv", statement.as_bytes()),
    )
    .await;
    assert_eq!(again.status, 201, "{}", again.json());
    assert_eq!(again.json(), reconciliation);
    assert_eq!(statement_line_items(&app).await.len(), 5);
    let events = app
        .get("/v1/events?type=reconciliation.completed", ADMIN_KEY)
        .await
        .json();
    assert_eq!(events["data"].as_array().unwrap().len(), 1);
    assert_eq!(transaction(&app, &txn(30_000)).await["version"], version);

    // A break is closed by an operator who says how it was settled.
    let item = &items[0];
    let resolve = format!("/v1/work_items/{}/resolve", item["id"].as_str().unwrap());
    let without_reason = app.post(&resolve, ADMIN_KEY, json!({})).await;
    assert_eq!(without_reason.error(400)["param"], "reason");
    let closed = app
        .post(
            &resolve,
            ADMIN_KEY,
            json!({"reason": "the bank corrected its statement"}),
        )
        .await;
    assert_eq!(closed.status, 200, "{}", closed.json());
    assert_eq!(closed.json()["status"], "done");
}

#[tokio::test]
async fn a_camt053_statement_is_matched_by_end_to_end_id_and_by_amount_and_day() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[21_000, 22_000, 23_000]).await;
    let today = lines[&21_000][5].clone();
    let entry = |amount: &str, status: &str, reference: &str, end_to_end: &str, extra: &str| {
        // A reversal of a payout's debit is booked as a credit.
        let indicator = if extra.contains("RvslInd") { "CRDT" } else { "DBIT" };
        format!(
            "<Ntry><Amt Ccy=\"CLP\">{amount}</Amt><CdtDbtInd>{indicator}</CdtDbtInd>{extra}<Sts><Cd>{status}</Cd></Sts>
             <BookgDt><Dt>{today}</Dt></BookgDt><AcctSvcrRef>{reference}</AcctSvcrRef>
             <NtryDtls><TxDtls><Refs><EndToEndId>{end_to_end}</EndToEndId></Refs></TxDtls></NtryDtls></Ntry>"
        )
    };
    let camt = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt>
<GrpHdr><MsgId>M1</MsgId><CreDtTm>{today}T23:00:00</CreDtTm></GrpHdr>
<Stmt><Id>S1</Id><FrToDt><FrDtTm>{today}T00:00:00</FrDtTm><ToDtTm>{today}T23:59:59</ToDtTm></FrToDt>
{}{}{}</Stmt></BkToCstmrStmt></Document>"#,
        // By our transaction id, under the bank's own reference.
        entry("21000", "BOOK", "BANK-1", &lines[&21_000][1], ""),
        // By amount and day alone.
        entry("22000", "BOOK", "BANK-2", "NOTPROVIDED", ""),
        // Reversed by the bank: a return.
        entry("23000", "BOOK", "BANK-3", &lines[&23_000][1], "<RvslInd>true</RvslInd>"),
    );
    let imported = import(&app, ADMIN_KEY, "camt-1", statement_body("camt053", camt.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(
        (&reconciliation["format"], &reconciliation["outcomes"]),
        (
            &json!("camt053"),
            &json!({"matched": 2, "matched_with_difference": 0, "mismatched": 1, "unmatched": 0, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
        )
    );
    let id = reconciliation["id"].as_str().unwrap();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let how: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["matched_by"].as_str().unwrap())
        .collect();
    assert_eq!(how, ["transaction_id", "amount_and_date", "transaction_id"]);
    let reversed = transaction(&app, &lines[&23_000][1]).await;
    assert_eq!(
        (reversed["status"].as_str(), reversed["cause"]["code"].as_str()),
        (Some("returned"), Some("statement_returned"))
    );
    assert_eq!(
        app.get(&format!("/v1/reconciliations/{id}"), ADMIN_KEY).await.json(),
        reconciliation
    );
}

#[tokio::test]
async fn a_bad_statement_is_refused_precisely_and_writes_nothing() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let good = statement_body("csv", b"sbx_1,,100,CLP,confirmed,2026-11-24,debit\n");
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = good.clone();
        change(&mut body);
        body
    };
    let large = vec![b'a'; 4 * 1024 * 1024 + 1];
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            with(&|b| b["rail"] = json!("psp-local:nowhere")),
            400,
            "rail",
            "rail_not_served",
        ),
        (with(&|b| b["format"] = json!("pdf")), 400, "format", "invalid_format"),
        (
            with(&|b| b["statement"] = json!("not base64!")),
            400,
            "statement",
            "invalid_base64",
        ),
        (
            with(&|b| b["statement"] = json!("")),
            400,
            "statement",
            "empty_statement",
        ),
        (statement_body("csv", &large), 400, "statement", "statement_too_large"),
        // A reference longer than any bank sends would be copied into events and work items.
        (
            statement_body(
                "csv",
                format!(
                    "sbx_1,,100,CLP,confirmed,2026-11-24,debit\n{},,5,CLP,confirmed,2026-11-24,debit\n",
                    "R".repeat(141)
                )
                .as_bytes(),
            ),
            400,
            "statement",
            "reference_too_long",
        ),
        (
            statement_body("camt053", b"<Document><BkToCstmrStmt><Stmt><Ntry>"),
            400,
            "statement",
            "invalid_statement",
        ),
        (
            statement_body("csv", b"sbx_1,,100,CLP"),
            400,
            "statement",
            "invalid_statement",
        ),
        (
            statement_body("csv", b"sbx_1,,100,CLP,confirmed,,debit\n"),
            400,
            "period",
            "period_required",
        ),
        (
            with(&|b| b["period"] = json!({"from": "24/11/2026", "to": "2026-11-24"})),
            400,
            "period.from",
            "invalid_date",
        ),
        (
            with(&|b| b["period"] = json!({"from": "2026-11-25", "to": "2026-11-24"})),
            400,
            "period.to",
            "invalid_period",
        ),
        (with(&|b| b["bank"] = json!("x")), 400, "bank", "parameter_unknown"),
        (
            with(&|b| b.as_object_mut().unwrap().remove("rail").map(drop).unwrap()),
            400,
            "rail",
            "parameter_missing",
        ),
    ];
    for (n, (body, status, param, code)) in cases.into_iter().enumerate() {
        let refused = import(&app, ADMIN_KEY, &format!("bad-{n}"), body).await;
        let error = refused.error(status);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "case {n}: {error}"
        );
    }
    let too_big = json!({"rail": "psp-local:sandbox", "statement": "A".repeat(6 * 1024 * 1024)});
    assert_eq!(import(&app, ADMIN_KEY, "huge", too_big).await.status, 413);
    // Operators reconcile; a customer's key may not.
    let forbidden = import(&app, &acme.key, "theirs", good.clone()).await;
    assert_eq!(forbidden.error(403)["code"], "platform_admin_required");

    assert!(statement_line_items(&app).await.is_empty());
    let events = app
        .get("/v1/events?type=reconciliation.completed", ADMIN_KEY)
        .await
        .json();
    assert!(events["data"].as_array().unwrap().is_empty());
    let unknown = app
        .get("/v1/reconciliations/rec_0123456789abcdef0123456789", ADMIN_KEY)
        .await;
    assert_eq!(unknown.status, 404);
    let bad_outcome = app
        .get(
            "/v1/reconciliations/rec_0123456789abcdef0123456789/lines?outcome=odd",
            ADMIN_KEY,
        )
        .await;
    assert_eq!(bad_outcome.error(400)["param"], "outcome");
}

/// An operator finds yesterday's reconciliation, or sees that none was run: the statements
/// imported are listed newest import first, of a rail or all, a page at a time; only the
/// platform's admins read them.
#[tokio::test]
async fn reconciliations_are_listed_newest_import_first() {
    let app = spawn_app().await;
    let mut imported = vec![];
    for day in 24..27 {
        let statement = format!("sbx_{day},,{day}00,CLP,confirmed,2026-11-{day},debit\n");
        let made = import(
            &app,
            ADMIN_KEY,
            &format!("rec-{day}"),
            statement_body("csv", statement.as_bytes()),
        )
        .await;
        assert_eq!(made.status, 201, "{}", made.json());
        imported.push(made.id());
        app.clock.advance(Duration::days(1));
    }
    let ids = |reply: ops_tests::Reply| -> Vec<String> {
        let listed = reply.json();
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first: Vec<String> = imported.iter().rev().cloned().collect();
    assert_eq!(ids(app.get("/v1/reconciliations", ADMIN_KEY).await), newest_first);
    let sandbox = "/v1/reconciliations?rail=psp-local:sandbox";
    assert_eq!(ids(app.get(sandbox, ADMIN_KEY).await), newest_first);
    let elsewhere = app.get("/v1/reconciliations?rail=psp-local:elsewhere", ADMIN_KEY).await;
    assert_eq!(ids(elsewhere), Vec::<String>::new());

    // A page at a time, from the last of the page before.
    let first = app.get("/v1/reconciliations?limit=2", ADMIN_KEY).await;
    assert_eq!(first.json()["has_more"], true);
    assert_eq!(ids(first), newest_first[..2]);
    let next = format!("/v1/reconciliations?limit=2&starting_after={}", newest_first[1]);
    let second = app.get(&next, ADMIN_KEY).await;
    assert_eq!(second.json()["has_more"], false);
    assert_eq!(ids(second), newest_first[2..]);

    // A cursor that names no reconciliation, a malformed one, and a customer's key.
    let unknown = app
        .get(
            "/v1/reconciliations?starting_after=rec_0000000000000000000000000a",
            ADMIN_KEY,
        )
        .await;
    assert_eq!(unknown.error(404)["param"], "starting_after");
    let malformed = app.get("/v1/reconciliations?starting_after=op_1", ADMIN_KEY).await;
    assert_eq!(malformed.error(400)["param"], "starting_after");
    let acme = app.create_customer().await;
    assert_eq!(app.get("/v1/reconciliations", &acme.key).await.status, 403);
}

/// Money that came in is never a payout that went out: a credit of a payout's amount on its
/// day matches nothing, and a credit naming a payout's reference is a break of its own that
/// changes nothing. An entry with no reference at all (ISO 20022 makes them optional, and
/// real banks' files leave them out) is matched by amount, direction and day, not refused.
#[tokio::test]
async fn an_incoming_credit_never_reconciles_a_payout_and_a_bare_entry_matches_by_value() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[24_000, 25_000]).await;
    let today = lines[&24_000][5].clone();
    let (reference, payout_id) = (lines[&25_000][0].clone(), lines[&25_000][1].clone());
    let entry = |amount: &str, indicator: &str, inner: &str| {
        format!(
            "<Ntry><Amt Ccy=\"CLP\">{amount}</Amt><CdtDbtInd>{indicator}</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
             <BookgDt><Dt>{today}</Dt></BookgDt>{inner}</Ntry>"
        )
    };
    let camt = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt>
<GrpHdr><MsgId>M2</MsgId><CreDtTm>{today}T23:00:00</CreDtTm></GrpHdr>
<Stmt><Id>S2</Id><FrToDt><FrDtTm>{today}T00:00:00</FrDtTm><ToDtTm>{today}T23:59:59</ToDtTm></FrToDt>
{}{}{}{}</Stmt></BkToCstmrStmt></Document>"#,
        entry("24000", "CRDT", ""),
        entry("25000", "CRDT", &format!("<AcctSvcrRef>{reference}</AcctSvcrRef>")),
        entry("24000", "DBIT", ""),
        entry(
            "25000",
            "DBIT",
            &format!("<NtryDtls><TxDtls><Refs><EndToEndId>{payout_id}</EndToEndId></Refs></TxDtls></NtryDtls>"),
        ),
    );
    let imported = import(&app, ADMIN_KEY, "camt-2", statement_body("camt053", camt.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(
        reconciliation["outcomes"],
        json!({"matched": 2, "matched_with_difference": 0, "mismatched": 0, "unmatched": 1, "wrong_direction": 1, "missing": 0, "balance_mismatch": 0})
    );
    let id = reconciliation["id"].as_str().unwrap();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let seen: Vec<Value> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            json!([
                l["outcome"],
                l["direction"],
                l["transaction_id"],
                l["matched_by"],
                l["applied"]
            ])
        })
        .collect();
    assert_eq!(
        seen,
        [
            json!(["unmatched", "credit", null, null, null]),
            json!(["wrong_direction", "credit", payout_id, "rail_reference", null]),
            json!(["matched", "debit", lines[&24_000][1], "amount_and_date", null]),
            json!(["matched", "debit", payout_id, "transaction_id", null]),
        ]
    );
    assert_eq!(transaction(&app, &payout_id).await["status"], "confirmed");
    let items = statement_line_items(&app).await;
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 2, "{items:?}");
    assert!(kinds.contains(&"reconciliation_unmatched") && kinds.contains(&"reconciliation_wrong_direction"));
}

/// A dry run answers what the statement would do, line by line, and changes nothing: no
/// transition, no work item, no reconciliation kept, so the same statement imported
/// afterwards does it all.
#[tokio::test]
async fn a_dry_run_answers_every_outcome_and_changes_nothing() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[26_000, 27_000]).await;
    let mut returned = lines[&26_000].clone();
    returned[4] = "returned".into();
    let today = lines[&26_000][5].clone();
    let statement = format!(
        "{}\nsbx_stranger,,999,CLP,confirmed,{today},debit\n",
        returned.join(",")
    );
    let mut body = statement_body("csv", statement.as_bytes());
    body["dry_run"] = json!(true);
    let before = transaction(&app, &lines[&26_000][1]).await;

    let preview = import(&app, ADMIN_KEY, "dry-run-1", body.clone()).await;
    assert_eq!(preview.status, 200, "{}", preview.json());
    let preview = preview.json();
    assert_eq!(
        (&preview["object"], &preview["dry_run"], &preview["statement_lines"]),
        (&json!("reconciliation_preview"), &json!(true), &json!(2))
    );
    assert_eq!(
        preview["outcomes"],
        json!({"matched": 0, "matched_with_difference": 0, "mismatched": 1, "unmatched": 1, "wrong_direction": 0, "missing": 1, "balance_mismatch": 0})
    );
    let seen: Vec<Value> = preview["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            json!([
                l["object"],
                l["outcome"],
                l["transaction_id"],
                l["applied"],
                l["work_item_id"]
            ])
        })
        .collect();
    assert_eq!(
        seen,
        [
            json!(["reconciliation_line", "mismatched", lines[&26_000][1], null, null]),
            json!(["reconciliation_line", "unmatched", null, null, null]),
            json!(["reconciliation_line", "missing", lines[&27_000][1], null, null]),
        ]
    );
    // Nothing changed, nothing kept.
    assert_eq!(transaction(&app, &lines[&26_000][1]).await, before);
    assert!(statement_line_items(&app).await.is_empty());
    let listed = app.get("/v1/reconciliations", ADMIN_KEY).await.json();
    assert_eq!(listed["data"], json!([]));

    // The same statement for real does what the dry run said.
    body["dry_run"] = json!(false);
    let imported = import(&app, ADMIN_KEY, "for-real-1", body).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    assert_eq!(imported.json()["outcomes"], preview["outcomes"]);
    assert_eq!(transaction(&app, &lines[&26_000][1]).await["status"], "returned");
    assert_eq!(statement_line_items(&app).await.len(), 3);
}

/// Statements in any order, again, or repeating each other's lines never book money twice
/// (the same property on the AWS adapters: `tests/aws/reconciliations.rs`).
mod never_twice {
    use ops_tests::scenarios::{funded_payouts, imports, paid_lines, statements_never_book_the_same_money_twice};
    use ops_tests::spawn_app_with;
    use proptest::prelude::*;
    use time::Duration;

    async fn run(imports: Vec<ops_tests::scenarios::Import>) {
        let app = spawn_app_with(|config| config.rate_limit = 1_000_000).await;
        let (operation, account, key) = funded_payouts(&app, 100_000, &[11_000, 12_000, 13_000]).await;
        app.settle(Duration::seconds(30), 6).await;
        let paid = paid_lines(&app, &key, &operation, &app.sandbox_statement().await).await;
        statements_never_book_the_same_money_twice(&app, &operation, &account, 100_000, &paid, &imports).await;
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, max_shrink_iters: 20, ..ProptestConfig::default() })]

        #[test]
        fn statements_never_book_the_same_money_twice_on_the_embedded_store(imports in imports(3)) {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(run(imports));
        }
    }
}

/// A bank books a payroll file's payouts as one debit whose transaction details list each
/// payout: each detail is matched to its transaction, the lines say which file and operation
/// the batch paid, and a batch whose details do not add up to what it books is a break of
/// its own.
#[tokio::test]
async fn a_batch_booking_is_matched_detail_by_detail_and_its_total_checked() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let uploaded = app
        .upload(
            "/v1/files?workflow=auto",
            &acme.key,
            "payroll",
            "text/csv",
            ops_tests::payroll_csv(&[(31_000, "CLP"), (32_000, "CLP"), (33_000, "CLP")]),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file = uploaded.id();
    app.settle(Duration::seconds(30), 10).await;
    let statement = app.sandbox_statement().await;
    let paid: BTreeMap<i64, Vec<String>> = statement
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>())
        .map(|fields| (fields[2].parse().unwrap(), fields))
        .collect();
    let today = paid[&31_000][5].clone();
    let detail = |amount: &str, end_to_end: &str| {
        format!(
            "<TxDtls><Refs><EndToEndId>{end_to_end}</EndToEndId></Refs><Amt Ccy=\"CLP\">{amount}</Amt>\
             <CdtDbtInd>DBIT</CdtDbtInd></TxDtls>"
        )
    };
    let entry = |amount: &str, details: &str| {
        format!(
            "<Ntry><Amt Ccy=\"CLP\">{amount}</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
             <BookgDt><Dt>{today}</Dt></BookgDt><AcctSvcrRef>BATCH-{amount}</AcctSvcrRef><NtryDtls>{details}</NtryDtls></Ntry>"
        )
    };
    let camt = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt>
<GrpHdr><MsgId>M3</MsgId><CreDtTm>{today}T23:00:00</CreDtTm></GrpHdr>
<Stmt><Id>S3</Id><FrToDt><FrDtTm>{today}T00:00:00</FrDtTm><ToDtTm>{today}T23:59:59</ToDtTm></FrToDt>
{}{}</Stmt></BkToCstmrStmt></Document>"#,
        entry(
            "96000",
            &[
                detail("31000", &paid[&31_000][1]),
                detail("32000", &paid[&32_000][1]),
                detail("33000", &paid[&33_000][1]),
            ]
            .concat()
        ),
        // Two payments no transaction answers to, booked as more than they add up to.
        entry(
            "900",
            &[detail("300", "NOTPROVIDED"), detail("500", "NOTPROVIDED")].concat()
        ),
    );
    let imported = import(
        &app,
        ADMIN_KEY,
        "camt-batch",
        statement_body("camt053", camt.as_bytes()),
    )
    .await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(
        (&reconciliation["statement_lines"], &reconciliation["outcomes"]),
        (
            &json!(5),
            &json!({"matched": 3, "matched_with_difference": 0, "mismatched": 1, "unmatched": 2, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
        )
    );
    let id = reconciliation["id"].as_str().unwrap();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let lines = page["data"].as_array().unwrap();
    let operation = app
        .get(&format!("/v1/transactions/{}", paid[&31_000][1]), ADMIN_KEY)
        .await
        .json()["operation_id"]
        .clone();
    let batch = |entry: u32, details: u32, amount: i64, total: i64, operation: &Value, file: &Value| {
        json!({"entry": entry, "details": details, "entry_amount": amount, "details_total": total,
               "operation_id": operation, "file_id": file})
    };
    let paid_batch = batch(1, 3, 96_000, 96_000, &operation, &json!(file));
    let off_batch = batch(2, 2, 900, 800, &Value::Null, &Value::Null);
    let seen: Vec<Value> = lines
        .iter()
        .map(|l| {
            json!([
                l["outcome"],
                l["amount"],
                l["transaction_id"],
                l["differences"],
                l["batch"]
            ])
        })
        .collect();
    assert_eq!(
        seen,
        [
            json!(["matched", 31_000, paid[&31_000][1], [], paid_batch]),
            json!(["matched", 32_000, paid[&32_000][1], [], paid_batch]),
            json!(["matched", 33_000, paid[&33_000][1], [], paid_batch]),
            json!(["unmatched", 300, null, [], off_batch]),
            json!(["unmatched", 500, null, [], off_batch]),
            json!(["mismatched", 900, null, ["batch_total"], off_batch]),
        ]
    );
    let said: Vec<String> = statement_line_items(&app)
        .await
        .iter()
        .filter(|i| i["kind"] == "reconciliation_mismatched")
        .map(|i| i["cause"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        said,
        [format!(
            "Line 6 of the psp-local:sandbox statement (reconciliation {id}): entry 2 of the statement books 900 CLP, but its 2 transaction details add up to 800."
        )]
    );
}

/// A bank that notifies each booking as it happens (camt.054) is reconciled as a statement
/// is, entry by entry; a payout of the same day it does not notify is not missing from it.
#[tokio::test]
async fn a_camt054_notification_is_reconciled_as_a_statement_is() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[41_000, 42_000]).await;
    let (today, payout) = (lines[&41_000][5].clone(), lines[&41_000][1].clone());
    let camt = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.054.001.08"><BkToCstmrDbtCdtNtfctn>
<GrpHdr><MsgId>N1</MsgId><CreDtTm>{today}T12:00:00</CreDtTm></GrpHdr>
<Ntfctn><Id>N1</Id><Ntry><Amt Ccy="CLP">41000</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
<BookgDt><Dt>{today}</Dt></BookgDt><NtryDtls><TxDtls><Refs><EndToEndId>{payout}</EndToEndId></Refs></TxDtls></NtryDtls>
</Ntry></Ntfctn></BkToCstmrDbtCdtNtfctn></Document>"#
    );
    let imported = import(&app, ADMIN_KEY, "camt054-1", statement_body("camt054", camt.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(
        (&reconciliation["format"], &reconciliation["outcomes"]),
        (
            &json!("camt054"),
            &json!({"matched": 1, "matched_with_difference": 0, "mismatched": 0, "unmatched": 0, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
        )
    );
    // The same document named as another kind is refused, saying what it is not.
    let refused = import(&app, ADMIN_KEY, "camt054-2", statement_body("camt053", camt.as_bytes())).await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json()["error"]["message"],
        "not a camt.053 document: no /Document/BkToCstmrStmt"
    );
}

async fn put_rules(app: &TestApp, key: &str, rail: &str, body: Value) -> ops_tests::Reply {
    let path = format!("/v1/reconciliation_rules/{rail}");
    app.send(reqwest::Method::PUT, &path, Some(key), None, Some(&body))
        .await
}

/// A rail's rules, set by the platform and audited, decide how its next statement matches: a
/// bank's fee within the tolerance is `matched_with_difference` (an exceptions item only above
/// the threshold), and a line netting two payouts matches them as a group.
#[tokio::test]
async fn a_rails_rules_set_the_tolerance_and_the_groups_its_statements_match_by() {
    let app = spawn_app().await;
    let rail = "psp-local:sandbox";
    let acme = app.create_customer().await;
    let refused = put_rules(&app, &acme.key, rail, json!({})).await;
    assert_eq!(refused.status, 403, "{}", refused.json());
    let unknown = put_rules(&app, ADMIN_KEY, "psp-local:nowhere", json!({})).await;
    assert_eq!(unknown.status, 404, "{}", unknown.json());
    let too_wide = put_rules(&app, ADMIN_KEY, rail, json!({"tolerance": {"basis_points": 900}})).await;
    assert_eq!(too_wide.status, 400, "{}", too_wide.json());
    assert_eq!(too_wide.json()["error"]["param"], "tolerance.basis_points");
    let defaults = app
        .get(&format!("/v1/reconciliation_rules/{rail}"), ADMIN_KEY)
        .await
        .json();
    assert_eq!(
        (&defaults["object"], &defaults["version"], &defaults["date_window_days"]),
        (&json!("reconciliation_rules"), &json!(0), &json!(2))
    );
    assert_eq!(
        defaults["match_order"],
        json!(["rail_reference", "transaction_id", "amount_and_date"])
    );
    let saved = put_rules(
        &app,
        ADMIN_KEY,
        rail,
        json!({"tolerance": {"minor_units": 500}, "many_to_one": {"max_transactions": 3}, "difference_work_item_above": 200}),
    )
    .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    assert_eq!(saved.json()["version"], 1);
    let history = app
        .get(&format!("/v1/reconciliation_rules/{rail}/history"), ADMIN_KEY)
        .await
        .json();
    let entries = history["data"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{history}");
    assert_eq!(entries[0]["details"]["tolerance"]["minor_units"], 500);
    assert_eq!(entries[0]["details"]["version"], 1);

    let lines = confirmed_payouts(&app, &[31_000, 32_000, 33_000, 34_000]).await;
    let day = lines[&31_000][5].clone();
    let header = ops_infra::rails::STATEMENT_HEADER;
    let statement = format!(
        "{header}\n{},,30900,CLP,confirmed,{day},debit\n{},,31700,CLP,confirmed,{day},debit\n,,67000,CLP,confirmed,{day},debit\n",
        lines[&31_000][0], lines[&32_000][0]
    );
    let imported = import(&app, ADMIN_KEY, "ruled", statement_body("csv", statement.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(reconciliation["rules_version"], 1);
    assert_eq!(
        reconciliation["outcomes"],
        json!({"matched": 1, "matched_with_difference": 2, "mismatched": 0, "unmatched": 0, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
    );
    let id = reconciliation["id"].as_str().unwrap();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let seen: Vec<Value> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            json!([
                l["outcome"],
                l["matched_by"],
                l["amount_difference"],
                l["transaction_amount"],
                l["group"]
            ])
        })
        .collect();
    let group = vec![lines[&34_000][1].clone(), lines[&33_000][1].clone()];
    assert_eq!(
        seen,
        [
            json!(["matched_with_difference", "rail_reference", -100, 31_000, null]),
            json!(["matched_with_difference", "rail_reference", -300, 32_000, null]),
            json!(["matched", "group", null, 67_000, group]),
        ]
    );
    // Only the difference above the threshold is an operator's to look at.
    let items = statement_line_items(&app).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["kind"], "reconciliation_matched_with_difference");
    assert!(
        items[0]["cause"]["message"]
            .as_str()
            .unwrap()
            .contains("a difference of -300"),
        "{}",
        items[0]
    );
    for amount in [31_000, 32_000, 33_000, 34_000] {
        assert_eq!(transaction(&app, &lines[&amount][1]).await["status"], "confirmed");
    }
}

/// The formats banks send besides ISO 20022: an MT940 statement (a line found by the bank's
/// reference, one by the end-to-end id in its `:86:`) and a BAI2 file (by the bank's reference
/// and by the customer reference) reconcile the payouts they booked.
#[tokio::test]
async fn mt940_and_bai2_statements_reconcile_as_camt_does() {
    let app = spawn_app().await;
    let lines = confirmed_payouts(&app, &[12_345, 23_456]).await;
    let (first, second) = (&lines[&12_345], &lines[&23_456]);
    let day = time::Date::parse(&first[5], time::macros::format_description!("[year]-[month]-[day]")).unwrap();
    let yymmdd = format!("{:02}{:02}{:02}", day.year() % 100, u8::from(day.month()), day.day());
    let mt940 = format!(
        "{{1:F01BANKCLRMAXXX0000000000}}\n:20:STMT1\n:25:CL0001\n:28C:1/1\n:60F:C{yymmdd}CLP1000000,\n\
         :61:{yymmdd}D12345,NTRFNONREF//{}\n:86:PAYOUT\n:61:{yymmdd}D23456,NTRFNONREF\n:86:?20EREF+{}\n\
         :62F:C{yymmdd}CLP964199,\n-}}\n",
        first[0], second[1]
    );
    let imported = import(&app, ADMIN_KEY, "mt940-1", statement_body("mt940", mt940.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    assert_eq!(imported.json()["outcomes"]["matched"], 2, "{}", imported.json());
    // Its balances are read too: these payouts drew on no account, so the ledger holds none.
    let balances: Vec<Value> = imported.json()["balances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| json!([b["kind"], b["statement"], b["ledger"]]))
        .collect();
    assert_eq!(
        balances,
        [json!(["opening", 1_000_000, 0]), json!(["closing", 964_199, 0])]
    );
    let id = imported.json()["id"].as_str().unwrap().to_owned();
    let page = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let matched: Vec<Value> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["outcome"] != "balance_mismatch")
        .map(|l| json!([l["transaction_id"], l["matched_by"]]))
        .collect();
    assert_eq!(
        matched,
        [
            json!([first[1], "rail_reference"]),
            json!([second[1], "transaction_id"])
        ]
    );

    let bai2 = format!(
        "01,BANK,PSP,{yymmdd},2300,1,,,2/\n02,PSP,BANK,1,{yymmdd},2300,CLP,/\n03,0001,CLP,010,1000000,,/\n\
         16,495,12345,,{},,payout/\n16,495,23456,,,{},payout/\n49,1035801,4/\n98,1035801,1,6/\n99,1035801,1,8/\n",
        first[0], second[1]
    );
    let imported = import(&app, ADMIN_KEY, "bai2-1", statement_body("bai2", bai2.as_bytes())).await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    assert_eq!(
        (&imported.json()["format"], &imported.json()["outcomes"]["matched"]),
        (&json!("bai2"), &json!(2)),
        "{}",
        imported.json()
    );

    // A refusal says where: the line and the column of the field.
    let broken = bai2.replace("16,495,12345", "16,495,12x45");
    let refused = import(&app, ADMIN_KEY, "bai2-2", statement_body("bai2", broken.as_bytes())).await;
    assert_eq!(refused.status, 400, "{}", refused.json());
    assert_eq!(
        refused.json()["error"]["message"],
        "BAI2 file, line 4, column 8: the amount \"12x45\" is not a positive whole number of CLP's minor units"
    );
    let broken = mt940.replace(&format!(":61:{yymmdd}D23456"), &format!(":61:{yymmdd}Z23456"));
    let refused = import(&app, ADMIN_KEY, "mt940-2", statement_body("mt940", broken.as_bytes())).await;
    assert_eq!(
        refused.json()["error"]["message"],
        "MT940 message 1, line 8, column 11: :61: has no debit/credit mark (C, D, RC or RD)"
    );
}

/// A statement's opening and closing booked balances are checked against the rail's
/// settlement account at the end of their days (the scenario, shared with the stack's test).
#[tokio::test]
async fn a_statements_balances_are_checked_against_the_settlement_account() {
    let app = spawn_app().await;
    let (operation, account, _key) = ops_tests::scenarios::funded_payouts(&app, 100_000, &[30_000]).await;
    app.settle(Duration::seconds(30), 10).await;
    let statement = app.sandbox_statement().await;
    ops_tests::scenarios::statement_balances_agree_or_break(&app, &operation, &account, &statement).await;
}
