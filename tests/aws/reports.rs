//! Reports on AWS: read from DynamoDB a page at a time, and an answer larger than a Lambda
//! function may send is put in S3 and answered with a short-lived link that reads it.

use crate::spawn_aws_app;
use ops_api::{api_lambda_router, App, Endpoint};
use ops_tests::payout;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_too_large_for_a_lambda_answer_is_a_link_to_s3() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let start = OffsetDateTime::now_utc();
    for amount in [1_000, 2_000, 3_000] {
        let created = app
            .post(
                "/v1/operations",
                &customer.key,
                payout(&customer.id, "two_step", &[amount]),
            )
            .await;
        assert_eq!(created.status, 201);
    }
    let end = OffsetDateTime::now_utc() + time::Duration::SECOND;
    let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap().replace('+', "%2B");
    let path = format!("/v1/reports/operations?from={}&to={}&format=csv", at(start), at(end));
    let inline = app.get(&path, &customer.key).await;
    assert_eq!(inline.status, 200);
    assert_eq!(
        String::from_utf8_lossy(&inline.bytes).lines().count(),
        1 + 3 + 1 + 1 + 1
    );

    // The report function as Lambda runs it, with a limit the report exceeds by a byte.
    let router = api_lambda_router(
        App {
            service: app.service.clone(),
        },
        Endpoint::OperationsReport,
        inline.bytes.len() - 1,
    )
    .expect("the API's bootstrap serves the reports");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let spilled = client
        .get(format!("{base}{path}"))
        .bearer_auth(&customer.key)
        .send()
        .await
        .unwrap();
    assert_eq!(spilled.status(), 303);
    // The link is a bearer of the answer: no cache may keep it, and a support ticket can name
    // the request.
    assert_eq!(spilled.headers()["cache-control"], "no-store");
    assert!(spilled.headers()["request-id"].to_str().unwrap().starts_with("req_"));
    let location = spilled.headers()["location"].to_str().unwrap().to_owned();
    let body: serde_json::Value = spilled.json().await.unwrap();
    assert_eq!(
        (body["object"].as_str(), body["url"].as_str()),
        (Some("answer_link"), Some(location.as_str()))
    );
    assert_eq!(body["bytes"], inline.bytes.len());
    // The link needs no key, and reads what the inline answer held.
    let fetched = reqwest::get(&location).await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), inline.bytes);

    // A small answer is sent as it is.
    let small = client
        .get(format!(
            "{base}/v1/reports/operations?from={}&to={}",
            at(start),
            at(start + time::Duration::MILLISECOND)
        ))
        .bearer_auth(&customer.key)
        .send()
        .await
        .unwrap();
    assert_eq!(small.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_and_movements_reports_read_dynamodb_a_page_at_a_time() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let start = OffsetDateTime::now_utc();
    let opened = app
        .post(
            "/v1/accounts",
            ops_tests::ADMIN_KEY,
            serde_json::json!({"customer_id": customer.id, "currency": "CLP"}),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.json());
    let funded = app
        .post(
            &format!("/v1/accounts/{}/adjustments", opened.id()),
            ops_tests::ADMIN_KEY,
            serde_json::json!({"amount": 1_000_000, "direction": "credit", "reason": "wire"}),
        )
        .await;
    assert_eq!(funded.status, 201, "{}", funded.json());
    let made = app
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[20_000, 30_002]),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.json());
    app.settle(time::Duration::seconds(30), 6).await;
    let end = OffsetDateTime::now_utc() + time::Duration::SECOND;
    let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap().replace('+', "%2B");
    let period = format!("from={}&to={}", at(start), at(end));

    let transactions = app
        .get(&format!("/v1/reports/transactions?{period}"), &customer.key)
        .await
        .json();
    let mut statuses: Vec<&str> = transactions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["confirmed", "failed"], "{transactions}");
    let movements = app
        .get(&format!("/v1/reports/movements?{period}"), &customer.key)
        .await
        .json();
    let mut rows: Vec<(&str, i64)> = movements["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["status"].as_str().unwrap(), r["amount"].as_i64().unwrap()))
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [("posted", 20_000), ("posted", 1_000_000), ("voided", 30_002)],
        "{movements}"
    );
}
