use ops_infra::conformance;
use ops_infra::embedded::SqliteStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::run_all(Arc::new(store)).await;
}
