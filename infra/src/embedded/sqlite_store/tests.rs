use super::ports::*;
use super::*;
use ops_domain::access::{AccessStore, Customer};
use ops_domain::desk::board::BoardCount;
use ops_domain::desk::DeskStore;
use ops_domain::idempotency::{ClaimOutcome, IdempotencyClaim, IdempotencyStore, StoredResponse, RETENTION};
use ops_domain::ports::{Changeset, Commit, StoreError, Write};
use rusqlite::{params, Connection};
use std::path::Path;
use time::OffsetDateTime;

/// SQLite is compiled as `.cargo/config.toml` says: a commit syncs with `fdatasync` (the
/// binary imports it; SQLite alone calls `fsync`) and keeps no memory statistics.
#[cfg(target_os = "linux")]
#[test]
fn sqlite_syncs_with_fdatasync_and_keeps_no_memory_statistics() {
    let connection = Connection::open_in_memory().unwrap();
    let options: Vec<String> = connection
        .prepare("PRAGMA compile_options")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "{options:?}");
    // The import's name, spelt backwards here so that this test's own text is not it.
    let import: Vec<u8> = b"\0cnysatadf".iter().rev().copied().collect();
    let binary = std::fs::read("/proc/self/exe").unwrap();
    assert!(binary.windows(import.len()).any(|w| w == import), "SQLite calls fsync");
}

/// A file made before secrets kept when they were stored gains the column at its next
/// open: its secrets read as stored at the epoch (old enough for the sweep), new ones as
/// stored now, and a new value keeps the first time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_of_an_older_file_read_as_stored_long_ago() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("older.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO secrets (name, value) VALUES ('webhook/whe_1/a', 'sealed');",
        )
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let before = OffsetDateTime::now_utc().unix_timestamp();
    store.put_secret_row("webhook/whe_1/b", "new".into()).await.unwrap();
    store.put_secret_row("webhook/whe_1/a", "again".into()).await.unwrap();
    let listed = store.secret_names("webhook/whe_1/").await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0], ("webhook/whe_1/a".to_owned(), 0));
    assert!(listed[1].0 == "webhook/whe_1/b" && listed[1].1 >= before, "{listed:?}");
    assert_eq!(
        store.secret_row("webhook/whe_1/a").await.unwrap().as_deref(),
        Some("again")
    );
}

/// A file made before users' emails were claimed opens with each customer's users claiming
/// theirs, the first made keeping one two of them share: a new user with it is refused, and
/// the two already there stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_of_an_older_file_claim_their_emails_when_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("older.sqlite");
    let user = |id: &str, email: &str| {
        serde_json::json!({"id": id, "customer_id": "cus_1", "name": id, "email": email,
                           "roles": ["approver"], "created_at": "2026-01-01T00:00:00Z"})
        .to_string()
    };
    let older = Connection::open(&path).unwrap();
    older
        .execute_batch("CREATE TABLE users (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, body TEXT NOT NULL);")
        .unwrap();
    older
        .execute(
            "INSERT INTO users (id, customer_id, body) VALUES ('usr_1', 'cus_1', ?1), ('usr_2', 'cus_1', ?2)",
            params![user("usr_1", "Ana@Example.com"), user("usr_2", "ana@example.com")],
        )
        .unwrap();
    drop(older);
    let store = SqliteStore::open(&path).unwrap();
    let listed = store.users_of(&"cus_1".into(), None, 10).await.unwrap();
    assert_eq!(listed.len(), 2, "both kept: {listed:?}");
    let mut third: ops_domain::access::User = serde_json::from_str(&user("usr_3", "ANA@example.com")).unwrap();
    let insert = |user| {
        let mut changes = Changeset::default();
        changes.push(Write::InsertUser(user));
        changes
    };
    let refused = store.commit(insert(third.clone())).await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "{refused:?}");
    third.email = "bea@example.com".into();
    store.commit(insert(third)).await.unwrap();
    let claims: Vec<(String, String)> = Connection::open(&path)
        .unwrap()
        .prepare("SELECT email, user_id FROM user_emails ORDER BY email")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        claims,
        [
            ("ana@example.com".into(), "usr_1".into()),
            ("bea@example.com".into(), "usr_3".into())
        ]
    );
}

/// A lookup takes the writer's connection only when it is free: one made while a commit
/// holds the writer (here, until the lookup has answered) is served by a reader, which
/// sees the last commit before it. (Which connection answers a lookup once the writer is
/// free again is not visible here, only in `ops-bench limit`'s one-client figures.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_does_not_wait_for_a_busy_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("lookups.sqlite")).unwrap();
    store.put_secret_row("first", "one".into()).await.unwrap();
    assert_eq!(store.secret_row("first").await.unwrap().as_deref(), Some("one"));

    let (held, writer_held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let writer = store.clone();
    let busy = tokio::spawn(async move {
        writer
            .with(move |c| {
                c.run("INSERT INTO secrets (name, value) VALUES ('second', 'two')", [])
                    .map_err(unavailable)?;
                held.send(()).unwrap();
                released.recv().unwrap();
                Ok(())
            })
            .await
    });
    tokio::task::spawn_blocking(move || writer_held.recv().unwrap())
        .await
        .unwrap();
    let reader = store.clone();
    let lookup = tokio::spawn(async move { reader.secret_row("first").await });
    let looked_up = tokio::time::timeout(std::time::Duration::from_secs(10), lookup)
        .await
        .expect("the lookup waited for the busy writer")
        .unwrap();
    assert_eq!(looked_up.unwrap().as_deref(), Some("one"));
    release.send(()).unwrap();
    busy.await.unwrap().unwrap();
    assert_eq!(store.secret_row("second").await.unwrap().as_deref(), Some("two"));
}

/// Committed pages reach the database file without a commit copying them: the
/// checkpointer does it while commits go on (SQLite's own is set far above this test's
/// WAL of a few hundred pages).
#[tokio::test]
async fn the_checkpointer_copies_commits_into_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    let file_size = || std::fs::metadata(&path).unwrap().len();
    let empty = file_size();
    for n in 0..200 {
        let mut changes = Changeset::default();
        changes.push(Write::InsertCustomer(Customer {
            id: format!("cus_{n:04}").into(),
            name: "x".repeat(2_000),
            status: ops_domain::access::CustomerStatus::Active,
            metadata: Default::default(),
            collection_reserve: Default::default(),
            created_at: OffsetDateTime::now_utc(),
            version: 1,
        }));
        store.commit(changes).await.unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while file_size() < empty + 400_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the file stayed at {} bytes",
            file_size()
        );
        tokio::time::sleep(CHECKPOINT_INTERVAL).await;
    }
    assert_eq!(
        store.customer(&"cus_0199".into()).await.unwrap().unwrap().name.len(),
        2_000
    );
}

/// A file from before board amounts were decimal text keeps its counters in 64-bit
/// `board_counts`, and one from before that the platform's sums as rows of their own, which
/// would count everything twice: opening it moves the customers' counters over, drops the
/// platform's, and the counters go on from where they were.
#[tokio::test]
async fn older_board_counters_are_moved_over_and_older_platform_sums_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite");
    let file = Connection::open(&path).unwrap();
    file.execute_batch(
        "CREATE TABLE board_counts (
            owner TEXT NOT NULL, bucket TEXT NOT NULL, currency TEXT NOT NULL,
            count INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (owner, bucket, currency));",
    )
    .unwrap();
    for (owner, count) in [("cus_a", 2), ("cus_b", 3), ("PLATFORM", 5)] {
        file.execute(
            "INSERT INTO board_counts (owner, bucket, currency, count, amount) VALUES (?1, 'column:in_progress', 'CLP', ?2, ?3)",
            params![owner, count, count * 100],
        )
        .unwrap();
    }
    drop(file);
    let store = SqliteStore::open(&path).unwrap();
    let mut platform = store.board_counts(None).await.unwrap();
    platform.sort_by_key(|c| c.count);
    let row = |count: i64| BoardCount {
        bucket: "column:in_progress".into(),
        currency: Some("CLP".into()),
        count,
        amount: i128::from(count) * 100,
    };
    assert_eq!(platform, [row(2), row(3)]);
    drop(store);
    // Opened again: nothing moved twice.
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.board_counts(Some(&"cus_b".into())).await.unwrap(), [row(3)]);
}

/// A new file gets small pages; a file made with SQLite's default pages keeps them, and
/// what it holds reads and writes as before.
#[tokio::test]
async fn new_files_get_small_pages_and_older_files_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let page_size = |path: &Path| {
        Connection::open(path)
            .unwrap()
            .query_row("PRAGMA page_size", [], |row| row.get::<_, i64>(0))
            .unwrap()
    };
    let new = dir.path().join("new.sqlite");
    SqliteStore::open(&new).unwrap();
    assert_eq!(page_size(&new), PAGE_SIZE);

    let older = dir.path().join("older.sqlite");
    let customer = |id: &str| Customer {
        id: id.into(),
        name: id.into(),
        status: ops_domain::access::CustomerStatus::Active,
        metadata: Default::default(),
        collection_reserve: Default::default(),
        created_at: OffsetDateTime::now_utc(),
        version: 1,
    };
    let first = customer("cus_before");
    Connection::open(&older)
        .unwrap()
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE customers (id TEXT PRIMARY KEY, body TEXT NOT NULL);")
        .unwrap();
    Connection::open(&older)
        .unwrap()
        .execute(
            "INSERT INTO customers (id, body) VALUES (?1, ?2)",
            params![first.id.as_str(), json(&first)],
        )
        .unwrap();
    let store = SqliteStore::open(&older).unwrap();
    assert_eq!(page_size(&older), 4096);
    let second = customer("cus_after");
    let mut changes = Changeset::default();
    changes.push(Write::InsertCustomer(second.clone()));
    store.commit(changes).await.unwrap();
    assert_eq!(store.customer(&first.id).await.unwrap(), Some(first));
    assert_eq!(store.customer(&second.id).await.unwrap(), Some(second));
}

/// A customer stored before customers had versions (none in its document) is version 1:
/// its first change is taken, and a second made from the same read is a conflict.
#[tokio::test]
async fn a_customer_stored_before_versions_changes_from_version_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("legacy.sqlite")).unwrap();
    let legacy = r#"{"id":"cus_legacy","name":"Old","status":"active","created_at":"2025-01-01T00:00:00Z"}"#;
    store
        .connection
        .lock()
        .unwrap()
        .execute("INSERT INTO customers (id, body) VALUES ('cus_legacy', ?1)", [legacy])
        .unwrap();
    let stored = store.customer(&"cus_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let change = |name: &str| Customer {
        name: name.into(),
        status: ops_domain::access::CustomerStatus::Suspended,
        version: 2,
        ..stored.clone()
    };
    let commit = |customer: Customer| {
        let mut changes = Changeset::default();
        changes.push(Write::UpdateCustomer(customer));
        store.commit(changes)
    };
    commit(change("First")).await.unwrap();
    assert!(matches!(commit(change("Second")).await, Err(StoreError::Conflict)));
    assert_eq!(
        store.customer(&"cus_legacy".into()).await.unwrap(),
        Some(change("First"))
    );
}

/// Keys and users stored before they had versions are version 1, as customers are: of two
/// changes made from the same read, the second is a conflict.
#[tokio::test]
async fn keys_and_users_stored_before_versions_change_from_version_one() {
    use crate::conformance::store::{LEGACY_API_KEY, LEGACY_USER};
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("legacy.sqlite")).unwrap();
    {
        let connection = store.connection.lock().unwrap();
        connection
            .execute(
                "INSERT INTO api_keys (id, secret_hash, body) VALUES ('key_legacy', 'hash-legacy', ?1)",
                [LEGACY_API_KEY],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO users (id, customer_id, body) VALUES ('usr_legacy', 'cus_legacy', ?1)",
                [LEGACY_USER],
            )
            .unwrap();
    }
    crate::conformance::store::legacy_keys_and_users_change_from_version_one(&store).await;
}

/// Claims and checkpoints skip the wait for the disk; every other write still waits.
#[tokio::test]
async fn only_claims_checkpoints_and_derived_state_commit_without_waiting_for_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("sync.sqlite")).unwrap();
    let synchronous = || {
        store
            .connection
            .lock()
            .unwrap()
            .query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))
            .unwrap()
    };
    const FULL: i64 = 2;
    assert_eq!(synchronous(), FULL);
    let claim = claim_at("k", OffsetDateTime::now_utc());
    assert_eq!(
        store.claim_idempotency_key(&claim).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(synchronous(), FULL);
    store.advance_checkpoint("transition", 7).await.unwrap();
    assert_eq!(synchronous(), FULL);
    // Visible at once to the next request, unsynced as it is.
    assert_eq!(
        store.claim_idempotency_key(&claim).await.unwrap(),
        ClaimOutcome::InFlight
    );
}

/// A claim of `key` for customer `cus_1`, made at `now`.
fn claim_at(key: &str, now: OffsetDateTime) -> IdempotencyClaim {
    IdempotencyClaim {
        scope: "cus_1".into(),
        key: key.into(),
        fingerprint: "f".into(),
        now,
    }
}

/// Expired idempotency records are deleted oldest first, at most the batch asked for, and a
/// record still within its retention is kept (a second claim of it still finds it).
#[tokio::test]
async fn expired_idempotency_records_are_forgotten_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("forget.sqlite")).unwrap();
    let start = OffsetDateTime::now_utc();
    for n in 0..5 {
        let old = claim_at(&format!("old-{n}"), start);
        assert_eq!(store.claim_idempotency_key(&old).await.unwrap(), ClaimOutcome::Claimed);
    }
    let done = StoredResponse {
        status: 201,
        body: b"{}".to_vec(),
    };
    let mut completion = Changeset::default();
    completion.push(Write::CompleteIdempotency {
        scope: "cus_1".into(),
        key: "old-0".into(),
        response: done,
    });
    store.commit(completion).await.unwrap();
    let later = start + RETENTION + time::Duration::hours(1);
    let fresh = claim_at("fresh", later);
    assert_eq!(
        store.claim_idempotency_key(&fresh).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let rows = || {
        store
            .connection
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM idempotency", [], |row| row.get::<_, i64>(0))
            .unwrap()
    };
    assert_eq!(rows(), 6);

    // Nothing has expired yet by the start's clock.
    assert_eq!(store.forget_expired_idempotency(start, 10).await.unwrap(), 0);
    assert_eq!(store.forget_expired_idempotency(later, 2).await.unwrap(), 2);
    assert_eq!(rows(), 4);
    assert_eq!(store.forget_expired_idempotency(later, 10).await.unwrap(), 3);
    assert_eq!(store.forget_expired_idempotency(later, 10).await.unwrap(), 0);
    assert_eq!(rows(), 1);
    assert_eq!(
        store.claim_idempotency_key(&fresh).await.unwrap(),
        ClaimOutcome::InFlight
    );
}

/// A sweep looks at no more than twice its batch of the oldest rows: expired records behind
/// live ones wait for a later sweep rather than make this one read on through the table.
#[tokio::test]
async fn a_sweep_looks_no_further_than_twice_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("window.sqlite")).unwrap();
    let start = OffsetDateTime::now_utc();
    // Two records that live on come first (a clock set back would do this), then three that
    // expired.
    for n in 0..2 {
        let live = claim_at(&format!("live-{n}"), start + RETENTION);
        store.claim_idempotency_key(&live).await.unwrap();
    }
    for n in 0..3 {
        store
            .claim_idempotency_key(&claim_at(&format!("old-{n}"), start))
            .await
            .unwrap();
    }
    let now = start + RETENTION + time::Duration::hours(1);
    assert_eq!(store.forget_expired_idempotency(now, 1).await.unwrap(), 0);
    assert_eq!(store.forget_expired_idempotency(now, 2).await.unwrap(), 2);
    assert_eq!(store.forget_expired_idempotency(now, 10).await.unwrap(), 1);
}

/// The steps SQLite plans for `sql` on a fresh file, as `EXPLAIN QUERY PLAN` words them.
fn query_plan(sql: &str, parameters: &[&dyn rusqlite::ToSql]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("plan.sqlite")).unwrap();
    let connection = store.connection.lock().unwrap();
    let mut statement = connection.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    statement
        .query_map(parameters, |row| row.get(3))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A return sweep seeks the rail's confirmations between its position and the end of its
/// window: what it reads does not grow with the rail's history.
#[test]
fn a_return_sweep_seeks_its_window() {
    let plan = query_plan(
        CONFIRMED_BETWEEN,
        params!["r", "2026-11-24T00:00:00Z", "", "2026-11-25T00:00:00Z", 10],
    );
    assert_eq!(
        plan,
        ["SEARCH transactions USING INDEX transactions_confirmed_time (<expr>=? AND <expr>>? AND <expr><?)"]
    );
}

/// An endpoint's history seeks its own entries, however many operations' entries there are.
#[test]
fn an_entitys_history_seeks_its_entries() {
    let plan = query_plan(ENTITY_HISTORY, params!["whe_1", 10]);
    assert!(
        plan.iter()
            .any(|step| step == "SEARCH audit USING INDEX audit_by_entity (entity_id=?)"),
        "{plan:?}"
    );
}

/// An endpoint's failed deliveries are sought in their own table, in its order from a
/// page's start, and each read by its id: the read does not grow with the deliveries made
/// or the pages before, nor sort.
#[test]
fn failed_deliveries_are_sought_by_endpoint() {
    let plan = query_plan(FAILED_DELIVERIES, params!["whe_1", "evt_1", "whd_1", 10]);
    assert_eq!(
        plan,
        [
            "SEARCH f USING PRIMARY KEY (endpoint_id=? AND (event_id,delivery_id)>(?,?))",
            "SEARCH d USING INDEX sqlite_autoindex_deliveries_1 (id=?)"
        ]
    );
}

/// An event's dispatch seeks its customer's live endpoints and the platform's: no
/// other customer's, and no deleted one, is read.
#[test]
fn live_endpoints_are_sought_by_owner() {
    let plan = query_plan(LIVE_ENDPOINTS, params!["cus_1"]);
    assert_eq!(
        plan,
        [
            "SEARCH webhook_endpoints USING INDEX live_endpoints_by_owner (<expr>=?)",
            "USE TEMP B-TREE FOR ORDER BY"
        ]
    );
}

/// Customers, a customer's users and its keys are sought by their index from a page's start: a page
/// reads what it returns, however many pages came before.
#[test]
fn users_and_keys_are_sought_from_a_pages_start() {
    let customers = query_plan(CUSTOMERS, params!["cus_1", 10]);
    assert_eq!(
        customers,
        ["SEARCH customers USING INDEX sqlite_autoindex_customers_1 (id<?)"]
    );
    let suspended = query_plan(CUSTOMERS_IN_STATUS, params!["suspended", "cus_1", 10]);
    assert_eq!(
        suspended,
        ["SEARCH customers USING INDEX customers_by_status (<expr>=? AND id<?)"]
    );
    let users = query_plan(USERS_OF, params!["cus_1", "usr_1", 10]);
    assert_eq!(
        users,
        ["SEARCH users USING INDEX users_by_customer (customer_id=? AND id<?)"]
    );
    let keys = query_plan(API_KEYS_OF, params!["cus_1", "key_1", 10]);
    assert_eq!(
        keys,
        ["SEARCH api_keys USING INDEX api_keys_by_owner (<expr>=? AND id<?)"]
    );
}

/// Every list seeks an index on its keyed filters (the customer, the status): none walks
/// rows it then drops, so no list slows down as other customers' or other statuses' rows
/// pile up. (A `type` filter is checked on the rows found, a bounded number a read.)
#[test]
fn every_filtered_list_seeks_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("plans.sqlite")).unwrap();
    let connection = store.connection.lock().unwrap();
    let value = |on: bool| on.then(|| "x".to_owned());
    for mask in 1..16u8 {
        let on = |bit: u8| mask & (1 << bit) != 0;
        let lists = [
            List::new("operations", "id", 10)
                .filter("customer_id = ?", value(on(0)))
                .filter("status = ?", value(on(1)))
                .filter("id < ?", value(on(3)))
                .filter_unkeyed("type", value(on(2)), 100),
            List::new("events", "seq", 10)
                .filter("customer_id = ?", value(on(0)))
                .filter("seq < (SELECT seq FROM events WHERE id = ?)", value(on(3)))
                .filter_unkeyed("type", value(on(1) || on(2)), 100),
        ];
        for list in lists {
            let sql = format!("EXPLAIN QUERY PLAN {}", list.sql());
            let mut statement = connection.prepare(&sql).unwrap();
            let plan: Vec<String> = statement
                .query_map(rusqlite::params_from_iter(list.parameters()), |row| row.get(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            // The customer and the status fit an index; the id narrows within it.
            let sought = list.clauses.iter().filter(|c| c.ends_with("= ?")).count();
            let search = plan
                .iter()
                .find(|step| step.starts_with(&format!("SEARCH {}", list.table)));
            let seeks = search.map_or(0, |step| step.matches("=?").count());
            assert_eq!(seeks, sought, "{}: {plan:?}", list.sql());
        }
    }
}

/// A file made before operations could be found by value gains the lookup when it opens,
/// filled from its operations' items and its transactions' rail references.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_file_finds_its_operations_by_value_once_opened() {
    use ops_domain::operations::{
        Beneficiary, Destination, FindBy, Item, OperationFind, OperationStatus, OperationStore,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("older.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    let mut op = crate::conformance::store::operation("op_old", "cus_old", OperationStatus::Processing);
    op.items = vec![Item {
        end_to_end_id: None,
        instruction_id: None,
        id: "itm_old".into(),
        beneficiary: Some(Beneficiary {
            id_type: "RUT".into(),
            id: "B-OLD".into(),
        }),
        destination: Destination {
            rail: "psp-local:sandbox".into(),
            account: "1".into(),
            account_id: None,
        },
        amount: ops_domain::money::Amount::new(100).unwrap(),
        reference: Some("REF-OLD".into()),
        transaction_id: None,
    }];
    let mut transaction = crate::conformance::reconciliations::transaction("txn_old", "psp-local:sandbox", None);
    transaction.operation_id = "op_old".into();
    let mut changes = Changeset::default();
    changes.push(Write::InsertOperation(op));
    changes.push(Write::InsertTransaction(transaction));
    store.commit(changes).await.unwrap();
    drop(store);
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE operation_finds;")
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();
    for (by, value) in [
        (FindBy::ItemReference, "REF-OLD"),
        (FindBy::BeneficiaryId, "B-OLD"),
        (FindBy::RailReference, "ref-txn_old"),
    ] {
        let find = OperationFind {
            by,
            value: value.into(),
            customer_id: None,
            after: None,
            limit: 10,
        };
        let found = store.find_operations(&find).await.unwrap();
        assert_eq!(
            found.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(),
            ["op_old"],
            "{value}"
        );
    }
}
