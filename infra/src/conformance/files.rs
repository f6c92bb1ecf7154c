//! The files part of the store port, and the blob port: the same behaviour on SQLite and
//! the data directory as on DynamoDB and S3.

use ops_domain::access::Environment;
use ops_domain::cause::{Actor, Cause};
use ops_domain::files::{Blobs, File, FileQuery, FileStatus};
use ops_domain::ports::{Changeset, Store, StoreError, Write};
use time::OffsetDateTime;

fn file(id: &str, customer: &str, sha256: &str) -> File {
    File {
        format: Default::default(),
        initiation: None,
        rail: None,
        id: id.into(),
        customer_id: customer.into(),
        workflow: "auto".into(),
        status: FileStatus::Accepted,
        sha256: sha256.into(),
        size: 10,
        line_count: 1,
        totals: vec![],
        chunks: vec![],
        api_key_id: "key_1".into(),
        created_by: "key_1".into(),
        cause: Cause::new("file_accepted", "accepted", Actor::system(), OffsetDateTime::UNIX_EPOCH),
        created_at: OffsetDateTime::UNIX_EPOCH,
        updated_at: OffsetDateTime::UNIX_EPOCH,
        environment: Environment::Test,
        version: 1,
    }
}

async fn insert(store: &dyn Store, file: &File, unique_bytes: bool) -> Result<(), StoreError> {
    store
        .commit(Changeset {
            writes: vec![Write::InsertFile {
                file: file.clone(),
                unique_bytes,
            }],
        })
        .await
}

pub async fn run_all(store: &dyn Store) {
    files_are_versioned_listed_and_found_by_their_bytes(store).await;
}

async fn files_are_versioned_listed_and_found_by_their_bytes(store: &dyn Store) {
    let customer = "cus_files";
    let first = file("file_01a", customer, "aa");
    insert(store, &first, true).await.unwrap();
    assert_eq!(store.file(&first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(
        store.file_with_digest(&customer.into(), "aa").await.unwrap(),
        Some(first.id.clone())
    );
    assert_eq!(store.file_with_digest(&"cus_other".into(), "aa").await.unwrap(), None);

    // The same bytes again: refused when they must be unique, and nothing of it written.
    let copy = file("file_01b", customer, "aa");
    assert!(matches!(insert(store, &copy, true).await, Err(StoreError::Conflict)));
    assert_eq!(store.file(&copy.id).await.unwrap(), None);
    // Allowed: the bytes now point at the newest upload.
    insert(store, &copy, false).await.unwrap();
    assert_eq!(
        store.file_with_digest(&customer.into(), "aa").await.unwrap(),
        Some(copy.id.clone())
    );
    insert(store, &file("file_01c", "cus_other", "bb"), true).await.unwrap();

    // Updates are versioned: a stale one is a conflict.
    let mut next = first.clone();
    next.status = FileStatus::Processing;
    next.version = 2;
    store
        .commit(Changeset {
            writes: vec![Write::UpdateFile(next.clone())],
        })
        .await
        .unwrap();
    let stale = Changeset {
        writes: vec![Write::UpdateFile(next.clone())],
    };
    assert!(matches!(store.commit(stale).await, Err(StoreError::Conflict)));
    assert_eq!(store.file(&first.id).await.unwrap(), Some(next));

    let ids = |files: Vec<File>| files.into_iter().map(|f| f.id.to_string()).collect::<Vec<_>>();
    let of_customer = FileQuery {
        customer_id: Some(customer.into()),
        starting_after: None,
        limit: 10,
    };
    assert_eq!(ids(store.files(&of_customer).await.unwrap()), ["file_01b", "file_01a"]);
    let after = FileQuery {
        starting_after: Some("file_01b".into()),
        ..of_customer
    };
    assert_eq!(ids(store.files(&after).await.unwrap()), ["file_01a"]);
    let everyone = FileQuery {
        customer_id: None,
        starting_after: None,
        limit: 2,
    };
    assert_eq!(ids(store.files(&everyone).await.unwrap()), ["file_01c", "file_01b"]);
}

/// Bytes come back as they were put; a key never put is none.
pub async fn blobs_keep_bytes(blobs: &dyn Blobs) {
    let bytes: Vec<u8> = (0..=255).cycle().take(300_000).collect();
    blobs
        .put("files/file_01x.csv", "text/csv", bytes.clone())
        .await
        .unwrap();
    assert_eq!(blobs.get("files/file_01x.csv").await.unwrap(), Some(bytes));
    blobs
        .put("files/file_01x.csv", "text/csv", b"again".to_vec())
        .await
        .unwrap();
    assert_eq!(blobs.get("files/file_01x.csv").await.unwrap(), Some(b"again".to_vec()));
    assert_eq!(blobs.get("files/file_01missing.csv").await.unwrap(), None);
}
