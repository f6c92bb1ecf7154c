//! Reports (DESIGN §8.4): a period's operations, CSV or JSON, streamed page by page, with
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
        (format!("from=yesterday&to={to}"), "from", "invalid_timestamp"),
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
