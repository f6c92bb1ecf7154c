//! The local binary's server on the AWS adapters: everything through HTTP, the pipeline pumped
//! in the background, no Lambda.

use ops_tests::{payout, Api, ADMIN_KEY};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_local_server_runs_a_payout_to_completion_on_the_aws_adapters() {
    assert!(std::env::var("AWS_ENDPOINT_URL").is_ok(), "run with ./scripts/test");
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = ops_tests::config(data_dir.path().to_path_buf());
    config.backend = ops_local::Backend::Aws;
    config.aws_provision = Some(format!("local-{}", std::process::id()));
    config.worker = true;
    let server = ops_local::start_on_aws(config, Arc::new(ops_domain::ports::SystemClock))
        .await
        .expect("starts on AWS");
    let api = Api {
        base: format!("http://{}", server.address),
        client: reqwest::Client::new(),
    };
    let customer = api.create_customer().await;
    let id = api
        .post(
            "/v1/operations",
            &customer.key,
            payout(&customer.id, "auto", &[90_000, 90_100]),
        )
        .await
        .id();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let operation = api.get(&format!("/v1/operations/{id}"), ADMIN_KEY).await.json();
        if operation["status"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {} after a minute: {operation}",
            operation["status"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let txns = api
        .get(&format!("/v1/transactions?operation_id={id}"), &customer.key)
        .await
        .json();
    assert!(txns["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["status"] == "confirmed"));
    server.task.abort();
}
