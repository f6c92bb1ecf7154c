use aws_credential_types::provider::ProvideCredentials;
use ops_domain::files::Blobs;
use ops_domain::operations::OperationStatus;
use ops_domain::operations::{OperationQuery, OperationStore};
use ops_domain::ports::{Changeset, Commit, SystemClock, Write};
use ops_infra::aws::{DynamoSandboxLedger, DynamoStore, S3Blobs, SecretsManagerSecrets, SqsQueue};
use ops_infra::conformance;
use ops_infra::embedded::{BlobDirectory, SealedSecrets, SqliteQueue, SqliteSandboxLedger, SqliteStore};
use ops_infra::InMemoryRateLimiter;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::store::run_all(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_sandbox_ledger_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteSandboxLedger::open(&dir.path().join("sandbox.sqlite")).unwrap();
    conformance::sandbox::run_all(Arc::new(ledger)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_queue_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::queue::run_all(&SqliteQueue::new(store, Arc::new(SystemClock))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_secrets_conform() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    conformance::secrets::run_all(&SealedSecrets::new(store, "pepper")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blob_directory_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::files::blobs_keep_bytes(&BlobDirectory::new(dir.path().join("blobs"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_blobs_conform() {
    let (_, _, blobs) = s3_bucket("conformance").await;
    conformance::files::blobs_keep_bytes(&blobs).await;
}

/// A new bucket on the emulator, named `{prefix}-{pid}`: the configuration, its name, its blobs.
async fn s3_bucket(prefix: &str) -> (aws_config::SdkConfig, String, S3Blobs) {
    let config = emulator().await;
    let bucket = format!("{prefix}-{}", std::process::id());
    let blobs = S3Blobs::new(&config, &bucket).unwrap();
    blobs.create_bucket().await.unwrap();
    (config, bucket, blobs)
}

/// A Lambda function's configuration, from the variables Lambda sets alone, reaches the
/// services (here the emulator, by `AWS_ENDPOINT_URL`) with the credentials it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lambda_configuration_reaches_the_services_with_the_environment_credentials() {
    let _ = emulator().await;
    let config = ops_infra::aws::lambda_config().unwrap();
    let credentials = config
        .credentials_provider()
        .expect("credentials")
        .provide_credentials()
        .await
        .unwrap();
    assert_eq!(
        Some(credentials.access_key_id().to_owned()),
        std::env::var("AWS_ACCESS_KEY_ID").ok()
    );
    assert_eq!(config.region().map(|r| r.to_string()), std::env::var("AWS_REGION").ok());
    assert_eq!(config.endpoint_url(), std::env::var("AWS_ENDPOINT_URL").ok().as_deref());
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    dynamodb.list_tables().send().await.expect("DynamoDB answers");
    let secrets = SecretsManagerSecrets::new(aws_sdk_secretsmanager::Client::new(&config), "lambda-config/");
    assert_eq!(
        ops_domain::ports::Secrets::secret(&secrets, "absent").await.unwrap(),
        None
    );
}

/// The S3 blobs speak S3 as its SDK does: what they write the SDK reads back with its content
/// type, and their links are the SDK's presigned links, signature for signature (the emulator
/// does not check signatures), which fetch the bytes without credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_blobs_are_read_by_the_sdk_and_link_as_it_presigns() {
    use aws_sdk_s3::presigning::PresigningConfig;
    use std::time::{Duration, SystemTime};
    let (config, bucket, blobs) = s3_bucket("signing").await;
    let key = "answers/a report+1 (ü).json";
    blobs
        .put(key, "application/json", br#"{"ok":true}"#.to_vec())
        .await
        .unwrap();

    let sdk = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let object = sdk.get_object().bucket(&bucket).key(key).send().await.unwrap();
    assert_eq!(object.content_type(), Some("application/json"));
    assert_eq!(
        &object.body.collect().await.unwrap().into_bytes()[..],
        br#"{"ok":true}"#
    );

    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
    let valid_for = Duration::from_secs(900);
    let ours = blobs.presigned_link(key, at, valid_for).await.unwrap();
    let theirs = sdk
        .get_object()
        .bucket(&bucket)
        .key(key)
        .presigned(
            PresigningConfig::builder()
                .start_time(at)
                .expires_in(valid_for)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let parts = |link: &str| {
        let url = reqwest::Url::parse(link).unwrap();
        let query: std::collections::BTreeMap<String, String> = url.query_pairs().into_owned().collect();
        (url.origin().ascii_serialization(), url.path().to_owned(), query)
    };
    let (origin, path, query) = parts(&ours);
    assert!(query.contains_key("X-Amz-Signature"), "{ours}");
    assert_eq!((origin, path, query), parts(theirs.uri()));

    let link = blobs.link(key, time::Duration::minutes(1)).await.unwrap().unwrap();
    let fetched = reqwest::get(&link).await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(&fetched.bytes().await.unwrap()[..], br#"{"ok":true}"#);

    let elsewhere = S3Blobs::new(&config, &format!("{bucket}-missing")).unwrap();
    assert!(
        elsewhere.get(key).await.is_err(),
        "a missing bucket is an error, not a missing blob"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_rate_limiter_conforms() {
    conformance::rate_limiter::run_all(&InMemoryRateLimiter::default()).await;
}

/// The emulator `./scripts/test` starts.
async fn emulator() -> aws_config::SdkConfig {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with ./scripts/test, which starts the emulator"
    );
    ops_infra::aws::load_config().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqs_queue_conforms() {
    let client = aws_sdk_sqs::Client::new(&emulator().await);
    let name = format!("conformance-{}", std::process::id());
    let urls = SqsQueue::create_queues(&client, &name).await.unwrap();
    conformance::queue::run_all(&SqsQueue::new(client, urls)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_manager_conforms() {
    let client = aws_sdk_secretsmanager::Client::new(&emulator().await);
    let prefix = format!("conformance-{}/", std::process::id());
    conformance::secrets::run_all(&SecretsManagerSecrets::new(client, prefix)).await;
}

/// A fresh table on the emulator.
async fn dynamo_store(name: &str) -> DynamoStore {
    let config = emulator().await;
    let table = format!("{name}-{}", std::process::id());
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table);
    store.create_table().await.unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_store_conforms() {
    conformance::store::run_all(Arc::new(dynamo_store("conformance").await)).await;
}

/// The ledger sits in the stack's table, beside the service's items.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_sandbox_ledger_conforms() {
    dynamo_store("sandbox").await;
    let table = format!("sandbox-{}", std::process::id());
    let ledger = DynamoSandboxLedger::new(aws_sdk_dynamodb::Client::new(&emulator().await), table);
    conformance::sandbox::run_all(Arc::new(ledger)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_rate_limiter_conforms() {
    conformance::rate_limiter::run_all(&dynamo_store("rate-limits").await).await;
}

/// A list filtered by what is not a key (an operation's or an event's `type`) reads at most its
/// budget of entries a partition and request: a page that found fewer than asked says where it
/// read up to, and pages that start there find every match once, in order, in the customer's
/// list and in the platform's sharded one; each page is one query page a partition (the
/// budget is under one page), then the items.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_filtered_lists_read_a_bounded_stretch_a_page() {
    let store = dynamo_store("bounded").await;
    store.limit_filtered_reads(3);
    conformance::store::type_filters_read_a_bounded_stretch_a_page(&store).await;
    // Approved operations share processing's list here: finding the two approved among
    // eleven processing reads past them a budget at a time.
    let stopped_short = conformance::store::statuses_sharing_a_list_are_listed_apart(&store).await;
    assert!(stopped_short > 0, "no page of a shared list stopped at the read budget");
    for (customer, partitions) in [(Some("cus_t"), 1), (None, u64::from(ops_infra::aws::SHARDS))] {
        let store = &store;
        conformance::store::page_through(|after| async move {
            let before = store.meter().requests();
            let page = conformance::store::collections_after(store, customer, after).await;
            assert!(store.meter().requests() - before <= partitions + 1, "{customer:?}");
            page
        })
        .await;
    }
}

/// A batch of webhook sends reads its deliveries and their events in two batch reads, however
/// many deliveries it holds and however many of them share an event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_reads_a_batch_of_sends_in_two_requests() {
    use ops_domain::event::Event;
    use ops_domain::webhooks::{Delivery, DeliveryStatus, WebhookStore};
    let store = dynamo_store("sends").await;
    let op = conformance::store::operation("op_s", "cus_s", OperationStatus::Approved);
    let mut writes = vec![];
    for event in ["evt_s1", "evt_s2"] {
        writes.push(Write::Event(Event::of_operation(event.into(), "approved", &op)));
    }
    let mut ids = vec![];
    // Events and a delivery asked twice, apart: a batch read asks each key once.
    for (n, event) in ["evt_s1", "evt_s2", "evt_s1", "evt_s2", "evt_s2"].iter().enumerate() {
        let delivery = Delivery {
            id: format!("whd_s{n}").as_str().into(),
            event_id: (*event).into(),
            endpoint_id: format!("we_s{n}").as_str().into(),
            url: "https://receiver.example/hook".into(),
            status: DeliveryStatus::Pending,
            attempts: vec![],
            next_attempt_at: None,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            follow_up: None,
            in_line_of: None,
            operation_id: None,
            version: 1,
        };
        ids.push(delivery.id.clone());
        writes.push(Write::InsertDelivery(delivery));
    }
    store.commit(Changeset { writes }).await.unwrap();
    ids.push(ids[0].clone());
    let before = store.meter().requests();
    let found = store.deliveries_to_send(&ids).await.unwrap();
    assert_eq!(store.meter().requests() - before, 2);
    assert_eq!(found.len(), 6);
    for (delivery, body) in found {
        let event = store.event(&delivery.event_id).await.unwrap().unwrap();
        assert_eq!(body, Some(serde_json::to_string(&event).unwrap()), "{}", delivery.id);
    }
}

/// The same on SQLite, where `type` is no index either (each made a create write more pages).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_filtered_lists_read_a_bounded_stretch_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
    store.limit_filtered_reads(3);
    conformance::store::type_filters_read_a_bounded_stretch_a_page(&store).await;
    conformance::store::statuses_sharing_a_list_are_listed_apart(&store).await;
}

/// Every list filter is a key: listing the one operation in a rare status reads one page of
/// the index and then the one item, however many of the customer's operations are in other
/// statuses (a filter would read them all), and the platform's lists read one page per shard
/// and then, in one batch, only the items that make the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_lists_read_only_what_they_return() {
    let store = dynamo_store("lists").await;
    let mut writes = vec![Write::InsertOperation(conformance::store::operation(
        "op_r00",
        "cus_r",
        OperationStatus::NeedsAttention,
    ))];
    for i in 1..60 {
        let op = conformance::store::operation(&format!("op_r{i:02}"), "cus_r", OperationStatus::Completed);
        writes.push(Write::InsertOperation(op));
    }
    for chunk in writes.chunks(25) {
        let changes = Changeset { writes: chunk.to_vec() };
        store.commit(changes).await.unwrap();
    }
    let listed = |query: OperationQuery| {
        let store = &store;
        async move {
            let before = store.meter().requests();
            let found = store.operations(&query).await.unwrap();
            (
                found.items.into_iter().map(|o| o.id.to_string()).collect::<Vec<_>>(),
                store.meter().requests() - before,
            )
        }
    };
    let rare = OperationQuery {
        customer_id: Some("cus_r".into()),
        status: Some(OperationStatus::NeedsAttention),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(listed(rare.clone()).await, (vec!["op_r00".to_owned()], 2));
    let platform = OperationQuery {
        customer_id: None,
        ..rare
    };
    assert_eq!(
        listed(platform).await,
        (vec!["op_r00".to_owned()], u64::from(ops_infra::aws::SHARDS) + 1)
    );
}

/// Index entries hold keys and the filters' attributes: writing an operation puts one small
/// entry in each of its four indexes, an update that changes no key leaves them alone, and a
/// status change moves the two entries keyed by status (a delete and a put each).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_writes_an_index_entry_only_where_a_write_changes_it() {
    let store = dynamo_store("index-entries").await;
    store.meter().count_index_entries_exactly();
    let units = |store: &DynamoStore| {
        store
            .meter()
            .write_units_by_kind()
            .get("operation")
            .copied()
            .unwrap_or(0)
    };
    let mut op = conformance::store::operation("op_ix", "cus_ix", OperationStatus::PendingApproval);
    let commit = |write: Write| {
        let store = &store;
        async move {
            let before = units(store);
            store.commit(Changeset { writes: vec![write] }).await.unwrap();
            units(store) - before
        }
    };
    assert_eq!(
        commit(Write::InsertOperation(op.clone())).await,
        1 + 4,
        "the item and four entries"
    );
    op.version = 2;
    op.metadata.insert("note".into(), "same status".into());
    assert_eq!(
        commit(Write::UpdateOperation(op.clone())).await,
        1,
        "no key moved: the item alone"
    );
    op.version = 3;
    op.status = OperationStatus::Approved;
    assert_eq!(
        commit(Write::UpdateOperation(op.clone())).await,
        1 + 2 * 2,
        "the two status-keyed entries moved"
    );
}

/// A change of one operation is the operation's write alone, its event and audit entry
/// following outside any transaction (one unit an item, not two), both named in the
/// operation's outbox in a few dozen bytes. An outbox of events the operation does not
/// rebuild, past a couple of kilobytes, keeps the changeset in one transaction instead, so an
/// entity's item never grows by its events' documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_writes_a_change_of_one_entity_with_its_events_outside_a_transaction() {
    use ops_domain::event::Event;
    use ops_domain::ports::AuditEntry;
    use ops_domain::webhooks::WebhookStore;
    let store = dynamo_store("outbox").await;
    store.meter().count_index_entries_exactly();
    let op = conformance::store::operation("op_ob", "cus_ob", OperationStatus::PendingApproval);
    let entry = AuditEntry::new("operation", &op.id, "created", op.cause.clone())
        .moving(None, op.status.as_str())
        .of_operation(&op.id);
    let event = Event::of_operation("evt_ob1".into(), "created", &op);
    let (transactions, _) = store.meter().transactions();
    let units = store.meter().write_units();
    let changes = Changeset {
        writes: vec![
            Write::Audit(entry.clone()),
            Write::Event(event.clone()),
            Write::InsertOperation(op.clone()),
        ],
    };
    store.commit(changes).await.unwrap();
    assert_eq!(store.meter().transactions().0, transactions, "no transaction");
    assert_eq!(
        store.meter().write_units() - units,
        (1 + 4) + (1 + 1) + 1,
        "the operation and its four index entries, the event (the platform's list) and its customer's entry, the audit entry: one unit each"
    );
    assert_eq!(store.event(&event.id).await.unwrap(), Some(event));
    assert_eq!(store.operation_history(&op.id).await.unwrap(), vec![entry]);

    // An event the operation does not rebuild, whose document does not deflate far.
    let mut other = conformance::store::operation("op_ob2", "cus_ob", OperationStatus::PendingApproval);
    let noise: String = (0..600u32)
        .map(|i| format!("{:08x}", i.wrapping_mul(2_654_435_761)))
        .collect();
    other.metadata.insert("noise".into(), noise);
    let mut stale = Event::of_operation("evt_ob2".into(), "created", &other);
    let mut data = stale.data.to_value();
    data["note"] = "not what the operation now says".into();
    stale.data = ops_domain::event::EventData::of(&data);
    let changes = Changeset {
        writes: vec![Write::Event(stale.clone()), Write::InsertOperation(other.clone())],
    };
    store.commit(changes).await.unwrap();
    assert_eq!(
        store.meter().transactions().0,
        transactions + 1,
        "one transaction, as before"
    );
    assert_eq!(store.event(&stale.id).await.unwrap(), Some(stale));
}

/// The desk's moves of a batch are one transaction on DynamoDB, each customer's counters
/// updated once in it: eight moves of two customers write their eight entries and two counter
/// updates (two units each, in a transaction), where one transaction a move wrote sixteen
/// updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_commits_a_batchs_moves_in_one_transaction() {
    use ops_domain::desk::board::{BoardEntry, BoardMove, Column};
    let store = dynamo_store("merged").await;
    store.meter().count_index_entries_exactly();
    let moves: Vec<Changeset> = (0..8u64)
        .map(|n| Changeset {
            writes: vec![Write::MoveOnBoard(BoardMove {
                entry: BoardEntry {
                    operation_id: format!("op_merged{n}").into(),
                    customer_id: format!("cus_merged{}", n % 2).into(),
                    currency: ops_domain::money::Currency::parse("CLP").unwrap(),
                    amount: 100,
                    column: Some(Column::PendingApproval),
                    operation_version: 1,
                    event_id: format!("evt_merged{n}").into(),
                    version: 1,
                },
                from: None,
            })],
        })
        .collect();
    let (transactions, items) = store.meter().transactions();
    let units = store.meter().write_units();
    let outcomes = store.commit_derived_each(moves).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(store.meter().transactions(), (transactions + 1, items + 10));
    assert_eq!(store.meter().write_units() - units, 2 * (8 + 2));
}

/// Keys and users stored before they had versions (no `version` attribute, none in their
/// documents) are version 1, as customers are.
#[tokio::test]
async fn dynamo_changes_keys_and_users_stored_before_versions_from_version_one() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use ops_infra::conformance::store::{LEGACY_API_KEY, LEGACY_USER};
    let name = "legacy-key";
    let store = dynamo_store(name).await;
    let client = aws_sdk_dynamodb::Client::new(&emulator().await);
    for (pk, sk, entity, doc) in [
        ("KEY#key_legacy", "KEY", "api_key", LEGACY_API_KEY),
        ("USR#usr_legacy", "USER", "user", LEGACY_USER),
    ] {
        client
            .put_item()
            .table_name(format!("{name}-{}", std::process::id()))
            .item("PK", AttributeValue::S(pk.into()))
            .item("SK", AttributeValue::S(sk.into()))
            .item("entity", AttributeValue::S(entity.into()))
            .item("doc", AttributeValue::S(doc.into()))
            .send()
            .await
            .unwrap();
    }
    ops_infra::conformance::store::legacy_keys_and_users_change_from_version_one(&store).await;
}

/// A customer stored before customers had versions (no `version` attribute, none in its
/// document) is version 1: its first change is taken, and a second made from the same read is
/// a conflict.
#[tokio::test]
async fn dynamo_changes_a_customer_stored_before_versions_from_version_one() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use ops_domain::access::{AccessStore, Customer, CustomerStatus};
    use ops_domain::ports::StoreError;
    let name = "legacy-customer";
    let store = dynamo_store(name).await;
    let legacy = r#"{"id":"cus_legacy","name":"Old","status":"active","created_at":"2025-01-01T00:00:00Z"}"#;
    aws_sdk_dynamodb::Client::new(&emulator().await)
        .put_item()
        .table_name(format!("{name}-{}", std::process::id()))
        .item("PK", AttributeValue::S("CUS#cus_legacy".into()))
        .item("SK", AttributeValue::S("CUSTOMER".into()))
        .item("entity", AttributeValue::S("customer".into()))
        .item("doc", AttributeValue::S(legacy.into()))
        .send()
        .await
        .unwrap();
    let stored = store.customer(&"cus_legacy".into()).await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    let change = |name: &str| Customer {
        name: name.into(),
        status: CustomerStatus::Suspended,
        version: 2,
        ..stored.clone()
    };
    let commit = |customer: Customer| {
        store.commit(Changeset {
            writes: vec![Write::UpdateCustomer(customer)],
        })
    };
    commit(change("First")).await.unwrap();
    assert!(matches!(commit(change("Second")).await, Err(StoreError::Conflict)));
    assert_eq!(
        store.customer(&"cus_legacy".into()).await.unwrap(),
        Some(change("First"))
    );
}

/// Each message goes in its lane's message group: what SQS's fair queues take turns by (the
/// emulator keeps the group, without the turns).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqs_sends_each_lane_as_its_message_group() {
    use ops_domain::ports::{Queue, QueueName};
    let client = aws_sdk_sqs::Client::new(&emulator().await);
    let name = format!("lanes-{}", std::process::id());
    let urls = SqsQueue::create_queues(&client, &name).await.unwrap();
    let submissions = urls.submissions.clone();
    let queue = SqsQueue::new(client.clone(), urls);
    queue
        .send(QueueName::Submissions, "cus_lane", "body".into(), time::Duration::ZERO)
        .await
        .unwrap();
    let received = client
        .receive_message()
        .queue_url(submissions)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId)
        .send()
        .await
        .unwrap();
    let group = received.messages()[0]
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId))
        .cloned();
    assert_eq!(group.as_deref(), Some("cus_lane"));
}
