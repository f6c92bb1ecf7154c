//! What an API function writes to CloudWatch for a request: the line a support ticket's
//! `Request-Id` finds.

use crate::{spawn_aws_app, Written};
use axum::body::Body;
use ops_api::{api_lambda_router, App, Endpoint};
use tower::ServiceExt;
use tracing::instrument::WithSubscriber;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_functions_request_leaves_a_json_line_with_its_id_answer_and_callers_key() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let router = api_lambda_router(
        App {
            service: app.service.clone(),
        },
        Endpoint::ListOperations,
        usize::MAX,
    )
    .expect("the API's bootstrap lists operations");
    let written = Written::default();
    let logs = ops_lambda::json_logs({
        let written = written.clone();
        move || written.clone()
    });
    let request = axum::http::Request::get("/v1/operations?limit=5")
        .header("authorization", format!("Bearer {}", customer.key))
        .body(Body::empty())
        .unwrap();
    let answer = router.oneshot(request).with_subscriber(logs).await.unwrap();
    assert_eq!(answer.status(), 200);
    let request_id = answer.headers()["request-id"].to_str().unwrap();

    let lines = written.documents();
    let access: Vec<_> = lines
        .iter()
        .filter(|line| line["target"] == "ops_api::access")
        .collect();
    assert_eq!(access.len(), 1, "{lines:#?}");
    let (span, fields) = (&access[0]["span"], &access[0]["fields"]);
    assert_eq!(span["id"], request_id);
    assert_eq!(span["customer"], customer.id.as_str());
    assert!(
        span["key"].as_str().is_some_and(|key| key.starts_with("key_")),
        "{span}"
    );
    assert_eq!(fields["method"], "GET");
    assert_eq!(fields["path"], "/v1/operations");
    assert_eq!(fields["status"], 200);
    assert!(fields["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{fields}");
    assert!(
        !format!("{lines:?}").contains(&customer.key),
        "the key's secret in the log"
    );
}
