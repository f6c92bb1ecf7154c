//! Reports: a period's operations, CSV or JSON, streamed page by page, with
//! totals per status and currency; nothing outside the period, nothing of another customer.

use ops_tests::{payout, spawn_app, spawn_app_with};
use serde_json::{json, Value};
use std::collections::HashSet;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

fn at(time: OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap().replace('+', "%2B")
}

#[tokio::test]
async fn a_report_lists_the_periods_operations_page_after_page_with_their_totals() {
    // More creates in a second than one key may make.
    let app = spawn_app_with(|config| config.rate_limit = 0).await;
    let acme = app.create_customer().await;
    let other = app.create_customer().await;
    let before = OffsetDateTime::now_utc();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let start = OffsetDateTime::now_utc();
    // 130 waiting for approval (more than a page), two paid, one in USD, and one of another customer.
    let mut made = HashSet::new();
    for _ in 0..130 {
        let created = app
            .post("/v1/operations", &acme.key, payout(&acme.id, "two_step", &[1_000]))
            .await;
        made.insert(created.id());
    }
    for amount in [2_500, 7_500] {
        made.insert(
            app.post("/v1/operations", &acme.key, payout(&acme.id, "auto", &[amount]))
                .await
                .id(),
        );
    }
    let mut usd = payout(&acme.id, "two_step", &[300]);
    usd["currency"] = "USD".into();
    made.insert(app.post("/v1/operations", &acme.key, usd).await.id());
    app.post("/v1/operations", &other.key, payout(&other.id, "auto", &[9_000]))
        .await;
    app.settle(time::Duration::seconds(30), 4).await;
    let end = OffsetDateTime::now_utc() + time::Duration::SECOND;

    let path = format!("/v1/reports/operations?from={}&to={}", at(start), at(end));
    let report = app.get(&path, &acme.key).await;
    assert_eq!(report.status, 200, "{}", String::from_utf8_lossy(&report.bytes));
    let report = report.json();
    let rows = report["data"].as_array().unwrap();
    let listed: HashSet<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        listed, made,
        "every operation of the period, once, and no other customer's"
    );
    assert_eq!(rows.len(), made.len());
    // Typed as the operation itself is: amounts and counts are numbers, what a row lacks null.
    let paid = rows
        .iter()
        .find(|r| r["total_amount"] == 7_500)
        .unwrap_or_else(|| panic!("the 7,500 payout, its amount a number: {report}"));
    assert_eq!(
        (&paid["items"], &paid["file_id"], &paid["status"]),
        (&json!(1), &Value::Null, &json!("completed"))
    );
    let mut totals: Vec<Value> = report["totals"].as_array().unwrap().clone();
    totals.sort_by_key(|t| t.to_string());
    assert_eq!(
        totals,
        [
            json!({"status": "completed", "currency": "CLP", "count": 2, "amount": 10_000}),
            json!({"status": "pending_approval", "currency": "CLP", "count": 130, "amount": 130_000}),
            json!({"status": "pending_approval", "currency": "USD", "count": 1, "amount": 300}),
        ]
    );

    // CSV: a header, a line per operation, a blank line, then the totals.
    let csv = app.get(&format!("{path}&format=csv"), &acme.key).await;
    assert_eq!(csv.headers["content-type"], "text/csv; charset=utf-8");
    let text = String::from_utf8(csv.bytes).unwrap();
    let (rows, totals) = text.split_once("\n\n").unwrap();
    let rows: Vec<&str> = rows.lines().collect();
    assert!(rows[0].starts_with("id,created_at,customer_id,type,status,currency,total_amount"));
    assert_eq!(rows.len(), 1 + made.len());
    assert!(totals.starts_with("status,currency,count,amount\n"));
    assert!(totals.contains("completed,CLP,2,10000\n"));
    // Each JSON row holds the CSV's columns, in their order.
    let json_text = String::from_utf8(app.get(&path, &acme.key).await.bytes).unwrap();
    let first_row = &json_text[json_text.find("\"data\":[{").unwrap()..];
    let first_row = &first_row[..first_row.find('}').unwrap()];
    let at_column: Vec<Option<usize>> = rows[0]
        .split(',')
        .map(|column| first_row.find(&format!("\"{column}\":")))
        .collect();
    assert!(
        at_column.iter().all(Option::is_some) && at_column.windows(2).all(|w| w[0] < w[1]),
        "{first_row}"
    );
    // The report's own fields come first, `object` leading; its totals list the CSV's columns.
    assert!(json_text.starts_with("{\"object\":\"report\",\"from\":"), "{json_text}");
    let totals_text = &json_text[json_text.find("\"totals\":[{").unwrap()..];
    assert!(totals_text.starts_with("\"totals\":[{\"status\":"), "{totals_text}");
    let at_total: Vec<usize> = ["status", "currency", "count", "amount"]
        .iter()
        .map(|column| totals_text.find(&format!("\"{column}\":")).unwrap())
        .collect();
    assert!(at_total.windows(2).all(|w| w[0] < w[1]), "{totals_text}");

    // The platform sees every customer's; a period before everything holds nothing.
    let platform = app.get(&path, ops_tests::ADMIN_KEY).await.json();
    assert_eq!(platform["data"].as_array().unwrap().len(), made.len() + 1);
    let empty = format!("/v1/reports/operations?from={}&to={}", at(before), at(start));
    let empty = app.get(&empty, &acme.key).await.json();
    assert_eq!((empty["data"].clone(), empty["totals"].clone()), (json!([]), json!([])));
    // A customer asking for another's gets nothing of it.
    let theirs = app
        .get(&format!("{path}&customer_id={}", other.id), &acme.key)
        .await
        .json();
    assert_eq!(theirs["data"], json!([]));
}

#[tokio::test]
async fn a_report_needs_a_period_and_a_known_format() {
    let app = spawn_app().await;
    let acme = app.create_customer().await;
    let now = OffsetDateTime::now_utc();
    let (from, to) = (at(now), at(now + time::Duration::HOUR));
    for (query, param, code) in [
        (format!("to={to}"), "from", "parameter_missing"),
        (format!("from={from}"), "to", "parameter_missing"),
        (format!("from={to}&to={from}"), "to", "invalid_period"),
        (format!("from=yesterday&to={to}"), "from", "invalid_time"),
        (format!("from={from}&to={to}&format=xlsx"), "format", "invalid_format"),
        (
            format!("from={from}&to={to}&customer_id=acme"),
            "customer_id",
            "invalid_id",
        ),
        (format!("from={from}&to={to}&sort=asc"), "sort", "parameter_unknown"),
    ] {
        let refused = app.get(&format!("/v1/reports/operations?{query}"), &acme.key).await;
        let error = refused.error(400);
        assert_eq!(
            (error["param"].as_str(), error["code"].as_str()),
            (Some(param), Some(code)),
            "{query}"
        );
    }
}

#[tokio::test]
async fn transactions_and_movements_reports_cover_the_period_with_their_totals() {
    let app = spawn_app_with(|config| config.rate_limit = 0).await;
    let acme = app.create_customer().await;
    let other = app.create_customer().await;
    let start = OffsetDateTime::now_utc();
    let mut accounts = vec![];
    for currency in ["CLP", "EUR"] {
        let opened = app
            .post(
                "/v1/accounts",
                ops_tests::ADMIN_KEY,
                json!({"customer_id": acme.id, "currency": currency}),
            )
            .await;
        assert_eq!(opened.status, 201, "{}", opened.json());
        accounts.push(opened.id());
    }
    // More adjustments over two accounts than a page holds: the pages merge both.
    for n in 0..105 {
        let (account, amount) = match n % 2 {
            0 => (&accounts[0], 100_000),
            _ => (&accounts[1], 1_000),
        };
        let funded = app
            .post(
                &format!("/v1/accounts/{account}/adjustments"),
                ops_tests::ADMIN_KEY,
                json!({"amount": amount, "direction": "credit", "reason": "wire received"}),
            )
            .await;
        assert_eq!(funded.status, 201, "{}", funded.json());
    }
    // Paid from the CLP account: two confirmed, one failed (its hold voided); one undecided.
    for (workflow, amounts) in [
        ("auto", vec![20_000, 30_002]),
        ("auto", vec![40_000]),
        ("two_step", vec![50_000]),
    ] {
        let made = app
            .post("/v1/operations", &acme.key, payout(&acme.id, workflow, &amounts))
            .await;
        assert_eq!(made.status, 201, "{}", made.json());
    }
    app.post("/v1/operations", &other.key, payout(&other.id, "auto", &[9_000]))
        .await;
    app.settle(time::Duration::seconds(30), 6).await;
    let end = OffsetDateTime::now_utc() + time::Duration::SECOND;
    let period = format!("from={}&to={}", at(start), at(end));
    let sorted = |totals: &Value| {
        let mut totals = totals.as_array().unwrap().clone();
        totals.sort_by_key(|t| (t["status"].to_string(), t["currency"].to_string()));
        totals
    };

    let transactions = app.get(&format!("/v1/reports/transactions?{period}"), &acme.key).await;
    assert_eq!(
        transactions.status,
        200,
        "{}",
        String::from_utf8_lossy(&transactions.bytes)
    );
    let transactions = transactions.json();
    let mut rows: Vec<(i64, String)> = transactions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["customer_id"], acme.id.as_str());
            // Confirmed when it was; a failed one never was: null, not an empty string.
            let confirmed = r["status"] == "confirmed";
            assert_eq!(r["confirmed_at"].is_string(), confirmed, "{r}");
            assert_eq!(r["confirmed_at"].is_null(), !confirmed, "{r}");
            (
                r["amount"].as_i64().expect("an amount in minor units"),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            (20_000, "confirmed".into()),
            (30_002, "failed".into()),
            (40_000, "confirmed".into())
        ]
    );
    assert_eq!(
        sorted(&transactions["totals"]),
        [
            json!({"status": "confirmed", "currency": "CLP", "count": 2, "amount": 60_000}),
            json!({"status": "failed", "currency": "CLP", "count": 1, "amount": 30_002}),
        ]
    );

    let movements = app
        .get(&format!("/v1/reports/movements?{period}"), &acme.key)
        .await
        .json();
    let rows = movements["data"].as_array().unwrap();
    assert_eq!(rows.len(), 105 + 3, "every adjustment and hold, once");
    // An adjustment belongs to no operation; the failed payout's hold was voided, never posted.
    let adjustment = rows
        .iter()
        .find(|r| r["cause_code"] == "adjustment_credit" && r["currency"] == "EUR")
        .unwrap();
    assert_eq!(
        (
            &adjustment["operation_id"],
            &adjustment["transaction_id"],
            &adjustment["amount"]
        ),
        (&Value::Null, &Value::Null, &json!(1_000)),
        "{adjustment}"
    );
    assert!(adjustment["posted_at"].is_string(), "{adjustment}");
    let voided = rows.iter().find(|r| r["status"] == "voided").unwrap();
    assert_eq!(
        (&voided["posted_at"], &voided["amount"]),
        (&Value::Null, &json!(30_002)),
        "{voided}"
    );
    assert!(voided["operation_id"].is_string(), "{voided}");
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let mut newest_first = ids.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    newest_first.dedup();
    assert_eq!(ids, newest_first);
    assert_eq!(
        sorted(&movements["totals"]),
        [
            json!({"status": "posted", "currency": "CLP", "count": 53 + 2, "amount": 53 * 100_000 + 60_000}),
            json!({"status": "posted", "currency": "EUR", "count": 52, "amount": 52_000}),
            json!({"status": "voided", "currency": "CLP", "count": 1, "amount": 30_002}),
        ]
    );
    let csv = app
        .get(&format!("/v1/reports/movements?{period}&format=csv"), &acme.key)
        .await;
    let text = String::from_utf8(csv.bytes).unwrap();
    assert!(text
        .starts_with("id,created_at,posted_at,customer_id,status,currency,amount,debit_account_id,credit_account_id,"));
    assert!(text.contains(&format!(",voided,CLP,30002,{},", accounts[0])), "{text}");

    // Another customer's rows are never shown; the platform names the customer.
    let theirs = app
        .get(
            &format!("/v1/reports/transactions?{period}&customer_id={}", other.id),
            &acme.key,
        )
        .await
        .json();
    assert_eq!(theirs["data"], json!([]));
    let unnamed = app
        .get(&format!("/v1/reports/movements?{period}"), ops_tests::ADMIN_KEY)
        .await;
    assert_eq!(unnamed.error(400)["param"], "customer_id");
    let named = app
        .get(
            &format!("/v1/reports/movements?{period}&customer_id={}", acme.id),
            ops_tests::ADMIN_KEY,
        )
        .await
        .json();
    assert_eq!(named["data"].as_array().unwrap().len(), 108);
}
