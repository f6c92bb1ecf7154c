//! Reconciliation on AWS: the rail's transactions read by confirmation day from DynamoDB's
//! sparse index (so a transaction the statement lacks is found `missing`), the lines kept in
//! S3, and the same statement twice changing nothing.

use crate::spawn_aws_app;
use ops_domain::reconciliations::Reconciliation;
use ops_tests::{payout, statement_body, ADMIN_KEY};
use serde_json::json;
use time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_is_reconciled_against_dynamodb_and_its_lines_kept_in_s3() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[20_000, 30_000, 40_000]),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    app.settle(Duration::seconds(30), 6).await;
    let sandbox = app.parts.sandbox.as_ref().unwrap().statement().await;
    let line = |amount: &str| {
        sandbox
            .lines()
            .find(|l| l.contains(&format!(",{amount},")))
            .unwrap()
            .to_owned()
    };
    let txn = |amount: &str| line(amount).split(',').nth(1).unwrap().to_owned();
    for amount in ["20000", "30000", "40000"] {
        let found = app.get(&format!("/v1/transactions/{}", txn(amount)), ADMIN_KEY).await;
        assert_eq!(found.json()["status"], "confirmed", "{}", found.json());
    }
    // The first as held here, the second returned; the third is not on the statement, where
    // money of its amount came in that day (a credit, which no payout answers to).
    let day = line("40000").split(',').nth(5).unwrap().to_owned();
    let statement = format!(
        "{}\n{}\n,,40000,CLP,confirmed,{day},credit\n",
        line("20000"),
        line("30000").replace(",confirmed,", ",returned,")
    );
    let body = statement_body("csv", statement.as_bytes());
    let import = |key: &'static str| {
        app.send(
            reqwest::Method::POST,
            "/v1/reconciliations",
            Some(ADMIN_KEY),
            Some(key),
            Some(&body),
        )
    };
    // A dry run first: the outcomes, and nothing kept in the stack's table or bucket.
    let mut dry = body.clone();
    dry["dry_run"] = json!(true);
    let preview = app
        .send(
            reqwest::Method::POST,
            "/v1/reconciliations",
            Some(ADMIN_KEY),
            None,
            Some(&dry),
        )
        .await;
    assert_eq!(preview.status, 200, "{}", preview.json());
    assert_eq!(
        preview.json()["outcomes"],
        json!({"matched": 1, "matched_with_difference": 0, "mismatched": 1, "unmatched": 1, "wrong_direction": 0, "missing": 1, "balance_mismatch": 0})
    );
    let listed = app.get("/v1/reconciliations", ADMIN_KEY).await.json();
    assert_eq!(listed["data"], json!([]));
    assert_eq!(
        app.get(&format!("/v1/transactions/{}", txn("30000")), ADMIN_KEY)
            .await
            .json()["status"],
        "confirmed"
    );

    let imported = import("aws-statement").await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let reconciliation = imported.json();
    assert_eq!(
        reconciliation["outcomes"],
        json!({"matched": 1, "matched_with_difference": 0, "mismatched": 1, "unmatched": 1, "wrong_direction": 0, "missing": 1, "balance_mismatch": 0})
    );
    let returned = app
        .get(&format!("/v1/transactions/{}", txn("30000")), ADMIN_KEY)
        .await
        .json();
    assert_eq!(
        (returned["status"].as_str(), returned["cause"]["code"].as_str()),
        (Some("returned"), Some("statement_returned"))
    );

    // The lines are an object in the stack's bucket, read back page by page.
    let id = reconciliation["id"].as_str().unwrap();
    let stored = app.stored_object(&Reconciliation::lines_key(&id.into())).await;
    let kept: serde_json::Value = serde_json::from_slice(&stored).unwrap();
    assert_eq!(kept.as_array().unwrap().len(), 4);
    let missing = app
        .get(&format!("/v1/reconciliations/{id}/lines?outcome=missing"), ADMIN_KEY)
        .await
        .json();
    assert_eq!(missing["data"][0]["transaction_id"], txn("40000").as_str(), "{missing}");

    // Again, under another key: the same reconciliation, the transaction untouched.
    let again = import("aws-statement-again").await;
    assert_eq!(again.json(), reconciliation);
    let after = app
        .get(&format!("/v1/transactions/{}", txn("30000")), ADMIN_KEY)
        .await
        .json();
    assert_eq!(after["version"], returned["version"]);
    let items = app.open_exceptions().await;
    let breaks = items
        .iter()
        .filter(|i| i["subject"]["type"] == "statement_line")
        .count();
    assert_eq!(breaks, 3);

    // Listed once, of its rail and of all, from the stack's table.
    for path in ["/v1/reconciliations", "/v1/reconciliations?rail=psp-local:sandbox"] {
        let listed = app.get(path, ADMIN_KEY).await.json();
        assert_eq!(listed["data"], json!([reconciliation]), "{path}");
    }
}

/// A camt.053 batch booking on the stack: each detail matched to its transaction, the
/// operation they all belong to named on each, read from the stack's table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_booking_is_matched_detail_by_detail_on_the_stack() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[51_000, 52_000]),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    app.settle(Duration::seconds(30), 6).await;
    let sandbox = app.parts.sandbox.as_ref().unwrap().statement().await;
    let field = |amount: &str, n: usize| {
        let line = sandbox.lines().find(|l| l.contains(&format!(",{amount},"))).unwrap();
        line.split(',').nth(n).unwrap().to_owned()
    };
    let today = field("51000", 5);
    let detail = |amount: &str| {
        format!(
            "<TxDtls><Refs><EndToEndId>{}</EndToEndId></Refs><Amt Ccy=\"CLP\">{amount}</Amt></TxDtls>",
            field(amount, 1)
        )
    };
    let camt = format!(
        r#"<Document><BkToCstmrStmt><Stmt><FrToDt><FrDtTm>{today}T00:00:00</FrDtTm><ToDtTm>{today}T23:59:59</ToDtTm></FrToDt>
<Ntry><Amt Ccy="CLP">103000</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts><BookgDt><Dt>{today}</Dt></BookgDt>
<NtryDtls>{}{}</NtryDtls></Ntry></Stmt></BkToCstmrStmt></Document>"#,
        detail("51000"),
        detail("52000")
    );
    let body = statement_body("camt053", camt.as_bytes());
    let imported = app
        .send(
            reqwest::Method::POST,
            "/v1/reconciliations",
            Some(ADMIN_KEY),
            Some("batch"),
            Some(&body),
        )
        .await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    let id = imported.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        imported.json()["outcomes"],
        json!({"matched": 2, "matched_with_difference": 0, "mismatched": 0, "unmatched": 0, "wrong_direction": 0, "missing": 0, "balance_mismatch": 0})
    );
    let lines = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    for line in lines["data"].as_array().unwrap() {
        assert_eq!(line["batch"]["operation_id"], made.json()["id"], "{line}");
        assert_eq!(line["batch"]["details_total"], 103_000, "{line}");
    }
}

/// Statements in any order, again, or repeating each other's lines never book money twice,
/// on the stack's table and bucket (the same property as on the embedded store).
mod never_twice {
    use crate::spawn_aws_app;
    use ops_tests::scenarios::{funded_payouts, imports, paid_lines, statements_never_book_the_same_money_twice};
    use proptest::prelude::*;
    use time::Duration;

    async fn run(imports: Vec<ops_tests::scenarios::Import>) {
        let app = spawn_aws_app().await;
        let (operation, account, key) = funded_payouts(&app, 100_000, &[11_000, 12_000, 13_000]).await;
        app.settle(Duration::seconds(30), 6).await;
        let statement = app.parts.sandbox.as_ref().unwrap().statement().await;
        let paid = paid_lines(&app, &key, &operation, &statement).await;
        statements_never_book_the_same_money_twice(&app, &operation, &account, 100_000, &paid, &imports).await;
    }

    proptest! {
        // Each case provisions a stack on the emulator: fewer of them than on the embedded store.
        #![proptest_config(ProptestConfig { cases: 4, max_shrink_iters: 10, ..ProptestConfig::default() })]

        #[test]
        fn statements_never_book_the_same_money_twice_on_the_aws_adapters(imports in imports(3)) {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(run(imports));
        }
    }
}

/// A rail's rules saved in the table decide the next statement on the stack: two payouts
/// netted into one line match as a group, and the reconciliation names the rules' version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rails_rules_decide_its_statements_on_the_stack() {
    let app = spawn_aws_app().await;
    let rail = "psp-local:sandbox";
    let customer = app.create_customer().await;
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[61_000, 62_000]),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    app.settle(Duration::seconds(30), 6).await;
    let rules = json!({"many_to_one": {"max_transactions": 2}, "date_window_days": 1});
    let path = format!("/v1/reconciliation_rules/{rail}");
    let saved = app
        .send(reqwest::Method::PUT, &path, Some(ADMIN_KEY), None, Some(&rules))
        .await;
    assert_eq!(saved.status, 200, "{}", saved.json());
    let read = app.get(&path, ADMIN_KEY).await.json();
    assert_eq!((&read["version"], &read["date_window_days"]), (&json!(1), &json!(1)));
    let sandbox = app.parts.sandbox.as_ref().unwrap().statement().await;
    let day = sandbox.lines().nth(1).unwrap().split(',').nth(5).unwrap().to_owned();
    let statement = format!(
        "{}\n,,123000,CLP,confirmed,{day},debit\n",
        ops_infra::rails::STATEMENT_HEADER
    );
    let imported = app
        .send(
            reqwest::Method::POST,
            "/v1/reconciliations",
            Some(ADMIN_KEY),
            Some("netted"),
            Some(&statement_body("csv", statement.as_bytes())),
        )
        .await;
    assert_eq!(imported.status, 201, "{}", imported.json());
    assert_eq!(imported.json()["rules_version"], 1);
    assert_eq!(imported.json()["outcomes"]["matched"], 1, "{}", imported.json());
    assert_eq!(imported.json()["outcomes"]["missing"], 0, "{}", imported.json());
    let id = imported.json()["id"].as_str().unwrap().to_owned();
    let lines = app
        .get(&format!("/v1/reconciliations/{id}/lines"), ADMIN_KEY)
        .await
        .json();
    let line = &lines["data"][0];
    assert_eq!(
        (&line["matched_by"], &line["group"].as_array().map(Vec::len)),
        (&json!("group"), &Some(2))
    );
}

/// The statement's balances against the settlement account, on the stack's table (each
/// account's day records in its own item).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statements_balances_are_checked_against_the_settlement_account_on_the_stack() {
    let app = spawn_aws_app().await;
    let (operation, account, _key) = ops_tests::scenarios::funded_payouts(&app, 100_000, &[30_000]).await;
    app.settle(Duration::seconds(30), 6).await;
    let statement = app.parts.sandbox.as_ref().unwrap().statement().await;
    ops_tests::scenarios::statement_balances_agree_or_break(&app, &operation, &account, &statement).await;
}
