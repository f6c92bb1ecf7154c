use ops_infra::conformance;
use ops_infra::embedded::SqliteStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::run_all(Arc::new(store)).await;
}

/// The same suite on DynamoDB, served by the emulator `./scripts/test` starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_store_conforms() {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with ./scripts/test, which starts the emulator"
    );
    let config = ops_infra::aws::load_config().await;
    let table = format!("conformance-{}", std::process::id());
    let store = ops_infra::aws::DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table);
    store.create_table().await.unwrap();
    conformance::run_all(Arc::new(store)).await;
}
