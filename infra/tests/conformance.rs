use ops_domain::operation::OperationStatus;
use ops_domain::ports::{Changeset, OperationQuery, Store, Write};
use ops_infra::aws::DynamoStore;
use ops_infra::conformance;
use ops_infra::embedded::SqliteStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::run_all(Arc::new(store)).await;
}

/// A fresh table on the emulator `./scripts/test` starts.
async fn dynamo_store(name: &str) -> DynamoStore {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with ./scripts/test, which starts the emulator"
    );
    let config = ops_infra::aws::load_config().await;
    let table = format!("{name}-{}", std::process::id());
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table);
    store.create_table().await.unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_store_conforms() {
    conformance::run_all(Arc::new(dynamo_store("conformance").await)).await;
}

/// Every list filter is a key: listing the one operation in a rare status reads one page,
/// however many of the customer's operations are in other statuses (a filter would read
/// them all), and the platform's lists read one page per shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_lists_read_only_what_they_return() {
    let store = dynamo_store("lists").await;
    let mut writes = vec![Write::InsertOperation(conformance::operation(
        "op_r00",
        "cus_r",
        OperationStatus::NeedsAttention,
    ))];
    for i in 1..60 {
        let op = conformance::operation(&format!("op_r{i:02}"), "cus_r", OperationStatus::Completed);
        writes.push(Write::InsertOperation(op));
    }
    for chunk in writes.chunks(25) {
        let changes = Changeset { writes: chunk.to_vec() };
        store.commit(changes).await.unwrap();
    }
    let listed = |query: OperationQuery| {
        let store = &store;
        async move {
            let before = store.requests();
            let found = store.operations(&query).await.unwrap();
            (
                found.into_iter().map(|o| o.id).collect::<Vec<_>>(),
                store.requests() - before,
            )
        }
    };
    let rare = OperationQuery {
        customer_id: Some("cus_r".into()),
        status: Some(OperationStatus::NeedsAttention),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(listed(rare.clone()).await, (vec!["op_r00".to_owned()], 1));
    let platform = OperationQuery {
        customer_id: None,
        ..rare
    };
    assert_eq!(
        listed(platform).await,
        (vec!["op_r00".to_owned()], u64::from(ops_infra::aws::SHARDS))
    );
}
