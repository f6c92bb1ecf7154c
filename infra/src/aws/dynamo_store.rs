//! The store port on one DynamoDB table.
//!
//! Every entity is one item: `PK`, `SK`, `entity`, `doc` (the entity's JSON, deflated when
//! long: [`super::documents`]), `version`, and the index keys its lookups need. Access paths, none of them a scan:
//!
//! | lookup | key |
//! |---|---|
//! | any entity by id | `PK = <PREFIX>#<id>`, `SK = <ENTITY>` |
//! | API key by secret hash | `PK = KEYHASH#<hash>` (a second item written with the key) |
//! | users of a customer, newest first | `GSI1PK = CUSUSERS#<customer>` (on users written from 2026-11-27) |
//! | API keys of a customer (or the platform's), newest first | `GSI1PK = CUSKEYS#<customer or PLATFORM>` |
//! | operations of a customer, newest first | `GSI1PK = CUSOPS#<customer>`, `GSI1SK = <op id>` |
//! | … of a customer in one status (approved in processing's list) | `GSI2PK = CUSOPST#<customer>#<status>`, `GSI2SK = <op id>` |
//! | every operation, newest first (platform) | `GSI3PK = OPS#<shard>`, `GSI3SK = <op id>` |
//! | … in one status (platform; approved in processing's) | `GSI4PK = OPSTATUS#<status>#<shard>`, `GSI4SK = <op id>` |
//! | history of an operation | `PK = OP#<id>`, `SK begins_with AUDIT#` |
//! | transactions of an operation | by the ids its items name (`TXN#<id>`; `GSI1PK = OPTXNS#<op>` on those written earlier, read by nothing) |
//! | transactions due a status poll | `GSI2PK = POLL#<shard>`, `GSI2SK = <due unix s, padded>#<id>` (sparse) |
//! | transactions of a rail confirmed on a day, by time | `GSI3PK = RAILDAY#<rail>#<YYYY-MM-DD>`, `GSI3SK = <confirmed unix ms, padded>#<id>` (sparse) |
//! | how far a rail's sweep for a return check got | `PK = RETSWEEP#<rail>#<check>` |
//! | reconciliation by id (fixed by its statement) | `PK = REC#<id>` (its lines are a blob) |
//! | event by id, and every event (platform), newest first | `PK = EVTS#<shard>`, `SK = <event id>` (written before 2026-11-26: `PK = EVT#<id>`, listed by `GSI3PK = EVTS#<shard>`) |
//! | events of a customer, newest first | `GSI1PK = CUSEVTS#<customer>` |
//! | webhook endpoints of a customer (or the platform's) | `GSI1PK = CUSWHE#<customer or PLATFORM>` |
//! | every customer, newest first (in one status) | `GSI1PK = CUSTOMERS` (`GSI2PK = CUSTOMERS#<status>`) |
//! | how many live endpoints a customer (or the platform) keeps | `PK = WHEROSTER#<customer or PLATFORM>` (versioned; the list is an index, which may lag its writes) |
//! | deliveries of an event | `GSI1PK = EVTWHD#<event>` |
//! | schedules of a customer (every schedule), newest first, deleted ones left out | `GSI1PK = CUSSCH#<customer>` (`GSI3PK = SCHS#<shard>`) |
//! | active schedules due a run | `GSI2PK = SCHDUE#<shard>`, `GSI2SK = <due unix s, padded>#<id>` (sparse) |
//! | occurrences of a schedule | `PK = SCH#<id>`, `SK = OCC#<unix s, padded>` |
//! | account by holder and currency | `PK = ACCHOLDER#<holder>#<currency>` (names the account) |
//! | accounts of a customer (the platform), in one currency | `GSI1PK = CUSACC#<customer or PLATFORM>` (`GSI2PK = CUSACCCUR#…#<currency>`) |
//! | every account (in one currency), platform | `GSI3PK = ACCS#<shard>` (`GSI4PK = ACCCUR#<currency>#<shard>`) |
//! | movements of an account | `GSI1PK = ACCMOV#<debited>` and `GSI2PK = ACCMOV#<credited>`, merged |
//! | work item of a queue and subject, not done | `PK = WIOPEN#<queue>#<subject>` (names the item) |
//! | work items of a queue in one status, oldest due first | `GSI1PK = WIQ#<queue>#<status>#<shard>`, `GSI1SK = <due unix s, padded>#<id>` |
//! | … of a customer | `GSI2PK = CUSWI#<customer>#<queue>#<status>`, sorted as above |
//! | … held by someone | `GSI3PK = WIASG#<assignee>` (sparse), sorted as above |
//! | an operation's place on the board | `PK = BOARDOP#<operation>` |
//! | board counters of a customer (every customer's, which the platform's board adds up) | `PK = BOARDS#<shard of the customer>`, `SK = <customer>#<currency>`: `count\|<bucket>`, `amount\|<bucket>` (before 2026-11-26 also `PK = BOARD#<customer>` and the platform's `BOARD#PLATFORM#<shard>`, still read) |
//! | files of a customer (every file), newest first | `GSI1PK = CUSFILES#<customer>` (`GSI3PK = FILES#<shard>`) |
//! | the file a customer's bytes were uploaded as | `PK = FILESHA#<customer>#<sha256>` (names the file) |
//! | idempotency record | `PK = IDEM#<scope>#<key>`, expired by the `ttl` attribute |
//! | a customer's requests in one second, per key | `PK = RATE#<customer>#<unix second>` (`count`, `member:<key id>`), expired by `ttl` |
//!
//! Every list filter but an operation's and an event's `type`, and an operation's status when
//! it is approved or processing, is a key, so no other list reads entries it drops. The first
//! two read the projected `type` of their list's entries, at most [`FILTERED_READ_BUDGET`] a
//! partition and request: a page that found fewer than asked by then says where it read up to
//! ([`Listed`]), and the API's page says where the next starts (`next_starting_after`), so no
//! request reads further as history grows. Approved operations are kept in processing's status
//! lists ([`keys::status_list`]: approved lasts moments, and a list of its own took four write
//! units a lifecycle); either status's list reads the shared one and keeps its own status's
//! operations, at most [`ITEMS_READ_TO_KEEP`] a request (then a page says where it read up to,
//! as above), past work in flight rather than history. Keys every write of a kind shares (the
//! platform's lists, the poll schedule) are spread over [`SHARDS`] partitions by a hash of the
//! id, so no partition takes every write; those lists query each shard and merge.
//!
//! An index entry carries the keys and the few attributes list filters read ([`PROJECTED`]),
//! not the document: a list queries the index, then reads the items that make its page in one
//! `BatchGetItem` (per 100). An entry is then one write unit, and a write that moves no index
//! key (most updates of an operation or a transaction) writes no entry at all.
//!
//! A changeset is one `TransactWriteItems` (or one conditional `PutItem`); a failed condition
//! cancels it and becomes [`StoreError::Conflict`]. A change of one operation, transaction or
//! work item carries its events and audit entries in the entity's outbox and writes them after
//! ([`outbox`]): the same guarantee at half their write units. A create that takes an
//! idempotency key writes the key's record first, naming the entity that completes it, then the
//! entity ([`key_first`]), rather than both in a transaction.

mod key_first;
mod merged;
mod outbox;

pub use key_first::AfterKeyRecord;
pub use outbox::OutboxRecord;

use super::{documents, keys};
use crate::page_start;
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, Delete, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    KeysAndAttributes, Projection, ProjectionType, Put, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use ops_domain::access::{AccessStore, ApiKey, Customer, CustomerStatus, User};
use ops_domain::approvals::{Workflow, WorkflowOwner, WorkflowStore};
use ops_domain::desk::board::{column_bucket, queue_bucket, BoardCount, BoardEntry, Column};
use ops_domain::desk::{Assignee, DeskStore, Queue, WorkItem, WorkItemQuery, WorkItemStatus};
use ops_domain::event::Event;
use ops_domain::files::{File, FileQuery, FileStore};
use ops_domain::history::{HistoryStore, MAX_ENTITY_HISTORY};
use ops_domain::idempotency::{
    ClaimOutcome, IdempotencyClaim, IdempotencyStore, StoredResponse, CLAIM_TIMEOUT, RETENTION,
};
use ops_domain::ids::{AccountId, FileId, MovementId, ReconciliationId, WorkItemId};
use ops_domain::ids::{
    ApiKeyId, CustomerId, DeliveryId, EventId, IdGenerator, IdKind, OperationId, ScheduleId, TransactionId,
    UlidGenerator, UserId, WebhookEndpointId,
};
use ops_domain::ledger::{Account, AccountQuery, LedgerStore, Movement};
use ops_domain::money::Currency;
use ops_domain::operations::{Operation, OperationQuery, OperationStore};
use ops_domain::ports::{AuditEntry, Changeset, Commit, Limits, Listed, RateLimiter, StoreError, Write};
use ops_domain::reconciliations::{Reconciliation, ReconciliationStore};
use ops_domain::schedules::{Occurrence, Schedule, ScheduleQuery, ScheduleStatus, ScheduleStore};
use ops_domain::transactions::{ReturnSweep, Transaction, TransactionStore};
use ops_domain::webhooks::{Delivery, EndpointRoster, EndpointStatus, EventQuery, WebhookEndpoint, WebhookStore};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use time::{Date, OffsetDateTime};

/// DynamoDB takes at most 100 writes in one transaction.
pub const MAX_WRITES: usize = 100;

type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    sort_keys: Arc<UlidGenerator>,
    /// Requests sent, for the benchmark's round-trip count.
    requests: Arc<AtomicU64>,
    /// Transactions sent and the items they wrote, and the other writes (lone puts,
    /// idempotency claims and releases), for the benchmark's cost estimate.
    transactions: Arc<AtomicU64>,
    transaction_items: Arc<AtomicU64>,
    single_writes: Arc<AtomicU64>,
    /// Write units those writes take on demand, index entries included.
    write_units: Arc<AtomicU64>,
    conflicted_units: Arc<AtomicU64>,
    /// The same units by the kind of item written (its `entity`), for the benchmark.
    units_by_kind: Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>,
    /// Queries of the poll schedule's shards (a fixed cost per round, not per payout).
    poll_queries: Arc<AtomicU64>,
    /// Bytes of the items queries answered, as DynamoDB sizes them (what their read units
    /// are charged by), for the benchmark.
    queried_bytes: Arc<AtomicU64>,
    /// When the benchmark counts index entries exactly: what each item written so far put
    /// in each index ([`IndexImages`]), so an update that leaves an entry alone costs nothing.
    index_images: Arc<std::sync::Mutex<Option<IndexImages>>>,
    /// How many of a changeset's events and audit entries its writer writes after the entity
    /// ([`crash_after_entity_writes`](Self::crash_after_entity_writes)): all but in kill tests.
    crash_after_entity: Arc<AtomicUsize>,
    /// How many more calls of `commit_derived_each` may write before the rest fail, as a
    /// throttled or unreachable table would ([`fail_derived_commits_after`](Self::fail_derived_commits_after)):
    /// unbounded but in kill tests.
    derived_commits_left: Arc<AtomicUsize>,
    /// How a create written key first goes on after its key's record: its entity's deadline,
    /// and in kill tests a death or a stall there ([`after_key_record`](Self::after_key_record),
    /// [`shorten_entity_deadline`](Self::shorten_entity_deadline)).
    key_first: Arc<std::sync::Mutex<key_first::KeyFirst>>,
    /// Entries a list filtered by a non-key attribute reads at most, per partition and request
    /// ([`FILTERED_READ_BUDGET`]; smaller in tests).
    filtered_read_budget: Arc<AtomicUsize>,
}

/// [`FILTERED_READ_BUDGET`] entries, per partition here: in an index (keys and filter
/// attributes, about a hundred bytes each) about fifteen read units; in the platform's event
/// list, whose entries are the events themselves (about 1 KB deflated), up to one DynamoDB
/// page (1 MB, about 128 units) a shard.
pub use crate::FILTERED_READ_BUDGET;

/// Items a list that shares its entries with another's reads at most for one request, to keep
/// its own ([`DynamoStore::newest_first_kept`]): each is read whole (its status is in its
/// document, not its index entry), so fewer than the entries a `type` filter reads.
const ITEMS_READ_TO_KEEP: usize = 300;

/// Per item (`PK`, `SK`), its entry in each index: the entry's keys and projected attributes,
/// or `None` where the item has no keys for that index.
type IndexImages = HashMap<(String, String), Vec<Option<String>>>;

/// An item's key and its entries in the indexes, once its write succeeds.
type IndexImage = ((String, String), Vec<Option<String>>);

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn unavailable(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
    StoreError::unavailable(e)
}

fn sdk_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    StoreError::unavailable(e)
}

/// An entity's `doc` attribute: its JSON, deflated when long ([`documents`]).
fn doc<T: Serialize>(value: &T) -> AttributeValue {
    match documents::encode(serde_json::to_string(value).expect("domain objects always serialize")) {
        Ok(text) => AttributeValue::S(text),
        Err(deflated) => AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(deflated)),
    }
}

fn read_doc<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    serde_json::from_str(&doc_json(item)?).map_err(unavailable)
}

/// An item's document as JSON text. One text path for every entity keeps one deserializer
/// per type in the binary.
fn doc_json(item: &Item) -> Result<std::borrow::Cow<'_, str>, StoreError> {
    let stored = item.get("doc");
    let json = documents::json_of(
        stored.and_then(|d| d.as_s().ok()).map(String::as_str),
        stored.and_then(|d| d.as_b().ok()).map(|b| b.as_ref()),
    )
    .map_err(unavailable)?;
    if !item.contains_key(BALANCES[0]) {
        return Ok(json);
    }
    // An account's balances change by `ADD` on their own attributes, not in its document.
    let mut value: serde_json::Value = serde_json::from_str(&json).map_err(unavailable)?;
    for name in BALANCES {
        let amount = match item.get(name) {
            Some(AttributeValue::N(amount)) => amount.parse::<i64>().map_err(unavailable)?,
            _ => 0,
        };
        value["balances"][name] = amount.into();
    }
    Ok(value.to_string().into())
}

/// An account item's balance attributes (`available` beside them is what the guard reads).
const BALANCES: [&str; 3] = ["posted", "pending_debits", "pending_credits"];

/// The attributes of an item's primary key.
fn key_item(key: keys::Primary) -> Vec<(&'static str, AttributeValue)> {
    vec![("PK", s(key.pk)), ("SK", s(key.sk))]
}

/// An item's primary key, read back from the item.
fn primary_of(item: &Item) -> Option<keys::Primary> {
    match (item.get("PK"), item.get("SK")) {
        (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => Some(keys::Primary {
            pk: pk.clone(),
            sk: sk.clone(),
        }),
        _ => None,
    }
}

/// An item: its primary key, then its other attributes.
fn keyed(key: keys::Primary, rest: Vec<(&str, AttributeValue)>) -> Item {
    item(key_item(key).into_iter().chain(rest).collect())
}

/// A customer's item, with its place in the list of customers.
fn customer_item(customer: &Customer) -> Item {
    keyed(
        keys::customer(&customer.id),
        vec![
            ("entity", s("customer")),
            ("doc", doc(customer)),
            ("version", n(customer.version)),
            ("GSI1PK", s(keys::CUSTOMERS)),
            ("GSI1SK", s(&customer.id)),
            ("GSI2PK", s(keys::customers_in(customer.status.as_str()))),
            ("GSI2SK", s(&customer.id)),
        ],
    )
}

/// A user's item, with its place in its customer's list of users.
fn user_item(user: &User) -> Item {
    keyed(
        keys::user(&user.id),
        vec![
            ("entity", s("user")),
            ("doc", doc(user)),
            ("version", n(user.version)),
            ("GSI1PK", s(keys::users_of(&user.customer_id))),
            ("GSI1SK", s(&user.id)),
        ],
    )
}

fn item(pairs: Vec<(&str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoStore {
        DynamoStore {
            client,
            table: table.into(),
            sort_keys: Arc::new(UlidGenerator::default()),
            requests: Arc::default(),
            transactions: Arc::default(),
            transaction_items: Arc::default(),
            single_writes: Arc::default(),
            write_units: Arc::default(),
            conflicted_units: Arc::default(),
            units_by_kind: Arc::default(),
            poll_queries: Arc::default(),
            queried_bytes: Arc::default(),
            index_images: Arc::default(),
            crash_after_entity: Arc::new(AtomicUsize::new(usize::MAX)),
            derived_commits_left: Arc::new(AtomicUsize::new(usize::MAX)),
            key_first: Arc::default(),
            filtered_read_budget: Arc::new(AtomicUsize::new(FILTERED_READ_BUDGET)),
        }
    }

    /// For the kill tests: after `calls` more calls of `commit_derived_each` (a stream
    /// consumer's waves), the next ones fail without writing (`usize::MAX`: never).
    pub fn fail_derived_commits_after(&self, calls: usize) {
        self.derived_commits_left.store(calls, Ordering::Relaxed);
    }

    /// Filtered lists read at most `entries` a partition and request (tests: a short history
    /// shows what a long one does).
    pub fn limit_filtered_reads(&self, entries: usize) {
        self.filtered_read_budget.store(entries.max(1), Ordering::Relaxed);
    }

    /// Requests sent to DynamoDB so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Bytes of the items queries have answered so far.
    pub fn queried_bytes(&self) -> u64 {
        self.queried_bytes.load(Ordering::Relaxed)
    }

    /// `(transactions, items written by them)` so far; each item costs two write units.
    pub fn transactions(&self) -> (u64, u64) {
        (
            self.transactions.load(Ordering::Relaxed),
            self.transaction_items.load(Ordering::Relaxed),
        )
    }

    /// Writes of one item outside a transaction: changesets of one put, sent as a `PutItem`,
    /// and the idempotency records' claims and releases.
    pub fn single_writes(&self) -> u64 {
        self.single_writes.load(Ordering::Relaxed)
    }

    /// Counts a write of one small item of `kind` outside a transaction (one write unit).
    fn count_small_write(&self, kind: &str) {
        self.count();
        self.single_writes.fetch_add(1, Ordering::Relaxed);
        self.add_units(kind, 1);
    }

    fn add_units(&self, kind: &str, units: u64) {
        self.write_units.fetch_add(units, Ordering::Relaxed);
        let mut by_kind = self.units_by_kind.lock().unwrap_or_else(|e| e.into_inner());
        *by_kind.entry(kind.to_owned()).or_default() += units;
    }

    /// Write units so far by the kind of item written (`operation`, `event`, `audit` …).
    pub fn write_units_by_kind(&self) -> std::collections::BTreeMap<String, u64> {
        self.units_by_kind.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads the poll schedule makes every round whatever the traffic (its shards' queries,
    /// the return sweeps' positions and queries) so far.
    pub fn poll_queries(&self) -> u64 {
        self.poll_queries.load(Ordering::Relaxed)
    }

    /// From now on, remembers what each item written put in the indexes, so
    /// [`write_units`](Self::write_units) counts an index entry only where a write changes it
    /// (for the benchmark and the tests: the memory grows with the items written).
    pub fn count_index_entries_exactly(&self) {
        let mut images = self.index_images.lock().unwrap_or_else(|e| e.into_inner());
        images.get_or_insert_with(HashMap::new);
    }

    /// Write units of every write so far, estimated from item sizes (see [`write_units`]).
    pub fn write_units(&self) -> u64 {
        self.write_units.load(Ordering::Relaxed)
    }

    /// Of [`write_units`](Self::write_units), those of changesets refused by a condition or a
    /// conflicting transaction (then drafted again): what a race cost, not the design.
    pub fn conflicted_write_units(&self) -> u64 {
        self.conflicted_units.load(Ordering::Relaxed)
    }

    /// One conditional `PutItem`: as atomic as a transaction of one, at half the write units.
    async fn put_alone(&self, put: Put) -> Result<(), StoreError> {
        self.single_writes.fetch_add(1, Ordering::Relaxed);
        let attempt = self
            .client
            .put_item()
            .table_name(put.table_name)
            .set_item(Some(put.item))
            .set_condition_expression(put.condition_expression)
            .set_expression_attribute_names(put.expression_attribute_names)
            .set_expression_attribute_values(put.expression_attribute_values)
            .send()
            .await;
        match attempt.map_err(SdkError::into_service_error) {
            Ok(_) => Ok(()),
            Err(PutItemError::ConditionalCheckFailedException(_)) => Err(StoreError::Conflict),
            Err(other) => Err(unavailable(other)),
        }
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Creates the table as `template.yaml` declares it (for local runs and tests).
    pub async fn create_table(&self) -> Result<(), StoreError> {
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("complete")
        };
        let key = |name: &str, kind: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .expect("complete")
        };
        let index = |name: &str| {
            GlobalSecondaryIndex::builder()
                .index_name(name)
                .key_schema(key(&format!("{name}PK"), KeyType::Hash))
                .key_schema(key(&format!("{name}SK"), KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::Include)
                        .set_non_key_attributes(Some(PROJECTED.iter().map(|a| a.to_string()).collect()))
                        .build(),
                )
                .build()
                .expect("complete")
        };
        let mut request = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key("PK", KeyType::Hash))
            .key_schema(key("SK", KeyType::Range))
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewImage)
                    .build()
                    .expect("complete"),
            );
        for name in ["PK", "SK"] {
            request = request.attribute_definitions(attribute(name));
        }
        for name in INDEXES {
            request = request
                .attribute_definitions(attribute(&format!("{name}PK")))
                .attribute_definitions(attribute(&format!("{name}SK")));
        }
        for name in INDEXES {
            request = request.global_secondary_indexes(index(name));
        }
        request.send().await.map_err(sdk_error)?;
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name("ttl")
                    .build()
                    .expect("complete"),
            )
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }

    /// The ARN of the table's stream (for the local pump).
    pub async fn stream_arn(&self) -> Result<String, StoreError> {
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(sdk_error)?;
        described
            .table()
            .and_then(|t| t.latest_stream_arn())
            .map(str::to_owned)
            .ok_or_else(|| unavailable("the table has no stream"))
    }

    fn put(&self, item: Item, condition: Option<&str>, values: Vec<(&str, AttributeValue)>) -> TransactWriteItem {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
        if let Some(condition) = condition {
            put = put.condition_expression(condition);
        }
        for (k, v) in values {
            put = put.expression_attribute_values(k, v);
        }
        TransactWriteItem::builder()
            .put(put.build().expect("table and item set"))
            .build()
    }

    fn versioned(&self, item: Item, version: u64) -> TransactWriteItem {
        match version {
            1 => self.put(item, Some("attribute_not_exists(PK)"), vec![]),
            v => self.put(item, Some("version = :previous"), vec![(":previous", n(v - 1))]),
        }
    }

    /// As [`Self::versioned`], for an entity whose items were once stored without a version:
    /// such an item is version 1.
    fn versioned_since_unversioned(&self, item: Item, version: u64) -> TransactWriteItem {
        match version {
            2 => {
                let legacy = "version = :previous OR (attribute_exists(PK) AND attribute_not_exists(version))";
                self.put(item, Some(legacy), vec![(":previous", n(1))])
            }
            v => self.versioned(item, v),
        }
    }

    fn audit_item(&self, entry: &AuditEntry) -> Item {
        Self::audit_item_at(entry, &self.sort_keys.new_id(IdKind::Event))
    }

    fn audit_item_at(entry: &AuditEntry, sequence: &str) -> Item {
        let key = keys::audit(entry.operation_id.as_deref(), &entry.entity_id, sequence);
        keyed(key, vec![("entity", s("audit")), ("doc", doc(entry))])
    }

    fn event_item(&self, e: &Event) -> Item {
        keyed(
            keys::event(&e.id),
            vec![
                // Stream consumers filter on this attribute.
                ("entity", s("event")),
                ("doc", doc(e)),
                ("type", s(&e.kind)),
                ("GSI1PK", s(keys::events_of(&e.customer_id))),
                ("GSI1SK", s(&e.id)),
            ],
        )
    }

    fn operation_item(op: &Operation) -> Item {
        keyed(
            keys::operation(&op.id),
            vec![
                ("entity", s("operation")),
                ("doc", doc(op)),
                ("version", n(op.version)),
                ("GSI1PK", s(keys::operations_of(&op.customer_id))),
                ("GSI1SK", s(&op.id)),
                ("GSI2PK", s(keys::operations_of_in(&op.customer_id, op.status))),
                ("GSI2SK", s(&op.id)),
                ("GSI3PK", s(keys::all_operations_shard(&op.id))),
                ("GSI3SK", s(&op.id)),
                ("GSI4PK", s(keys::operations_in_shard(op.status, &op.id))),
                ("GSI4SK", s(&op.id)),
                ("type", s(op.kind.as_str())),
            ],
        )
    }

    fn transaction_item(t: &Transaction) -> Item {
        let mut item = keyed(
            keys::transaction(&t.id),
            vec![("entity", s("transaction")), ("doc", doc(t)), ("version", n(t.version))],
        );
        if let Some(due) = t.next_poll_at {
            item.insert("GSI2PK".into(), s(keys::poll_shard(&t.id)));
            item.insert("GSI2SK".into(), s(keys::poll_sort(due, &t.id)));
        }
        if let Some(confirmed) = t.confirmed_at {
            item.insert("GSI3PK".into(), s(keys::confirmed_on(&t.rail, confirmed.date())));
            item.insert("GSI3SK".into(), s(keys::confirmed_sort(confirmed, &t.id)));
        }
        item
    }

    /// A schedule: in its customer's and the platform's lists unless deleted, and in the
    /// due index while active.
    fn schedule_item(schedule: &Schedule) -> Item {
        let mut item = keyed(
            keys::schedule(&schedule.id),
            vec![
                ("entity", s("schedule")),
                ("doc", doc(schedule)),
                ("version", n(schedule.version)),
            ],
        );
        if schedule.is_visible() {
            item.insert("GSI1PK".into(), s(keys::schedules_of(&schedule.customer_id)));
            item.insert("GSI1SK".into(), s(&schedule.id));
            item.insert("GSI3PK".into(), s(keys::all_schedules_shard(&schedule.id)));
            item.insert("GSI3SK".into(), s(&schedule.id));
        }
        if let (ScheduleStatus::Active, Some(due)) = (schedule.status, schedule.next_run_at) {
            item.insert("GSI2PK".into(), s(keys::schedule_due_shard(&schedule.id)));
            item.insert("GSI2SK".into(), s(keys::poll_sort(due, &schedule.id)));
        }
        item
    }

    /// A file, in its customer's and the platform's lists.
    fn file_item(file: &File) -> Item {
        keyed(
            keys::file(&file.id),
            vec![
                ("entity", s("file")),
                ("doc", doc(file)),
                ("version", n(file.version)),
                ("GSI1PK", s(keys::files_of(&file.customer_id))),
                ("GSI1SK", s(&file.id)),
                ("GSI3PK", s(keys::all_files_shard(&file.id))),
                ("GSI3SK", s(&file.id)),
            ],
        )
    }

    /// A movement, in the movement lists of the account it debits (GSI1) and credits (GSI2).
    fn movement_item(movement: &Movement) -> Item {
        keyed(
            keys::movement(&movement.id),
            vec![
                ("entity", s("movement")),
                ("doc", doc(movement)),
                ("version", n(movement.version)),
                ("GSI1PK", s(keys::movements_of(movement.debited()))),
                ("GSI1SK", s(&movement.id)),
                ("GSI2PK", s(keys::movements_of(movement.credited()))),
                ("GSI2SK", s(&movement.id)),
            ],
        )
    }

    /// A work item, in its queue's and its customer's lists for its status (GSI1, GSI2) and
    /// its holder's (GSI3), each sorted by due time.
    fn work_item_item(item: &WorkItem) -> Item {
        let (queue, status) = (item.queue.as_str(), item.status.as_str());
        let sort = keys::poll_sort(item.due_at, &item.id);
        let mut attributes = vec![
            ("entity", s("work_item")),
            ("doc", doc(item)),
            ("version", n(item.version)),
            ("queue", s(queue)),
            ("status", s(status)),
            ("customer_id", s(&item.customer_id)),
            ("GSI1PK", s(keys::work_items_shard(queue, status, &item.id))),
            ("GSI1SK", s(&sort)),
            ("GSI2PK", s(keys::work_items_of(&item.customer_id, queue, status))),
            ("GSI2SK", s(&sort)),
        ];
        if let Some(assignee) = &item.assignee {
            attributes.push(("GSI3PK", s(keys::work_items_held_by(assignee))));
            attributes.push(("GSI3SK", s(&sort)));
        }
        keyed(keys::work_item(&item.id), attributes)
    }

    /// The items a changeset writes: each write's, then its board counters'.
    fn changeset_items(&self, writes: &[&Write]) -> Vec<TransactWriteItem> {
        let mut items: Vec<TransactWriteItem> = writes.iter().flat_map(|w| self.write(w)).collect();
        items.extend(self.board_counters(writes));
        items
    }

    /// The board counters a changeset changes, one update of each counter item it reaches: an
    /// operation's move out of one column and into the next, and each work item opened or
    /// done. A work item's queue is counted in the item its customer's move in the same
    /// changeset updates (its operation's move, from the same event), else in the customer's
    /// item without a currency: the board adds a queue's counts up from every item, so an
    /// item opened or closed with its subject's move takes no update of its own.
    fn board_counters<'a>(&self, writes: &[&'a Write]) -> Vec<TransactWriteItem> {
        let moved: HashMap<&'a str, &'a str> = writes
            .iter()
            .filter_map(|write| match write {
                Write::MoveOnBoard(moved) => Some((moved.entry.customer_id.as_str(), moved.entry.currency.code())),
                _ => None,
            })
            .collect();
        // A work item's queue, in the counters its customer's move changes (else without currency).
        let queue = |item: &'a WorkItem, sign: i64| -> Vec<BoardChange<'a>> {
            let customer = item.customer_id.as_str();
            let currency = moved.get(customer).copied().unwrap_or("");
            vec![(customer, currency, queue_bucket(item.queue), sign, 0)]
        };
        // (customer, currency, bucket, count, amount) for each change, then summed per item.
        let changes = writes.iter().flat_map(|write| match write {
            Write::MoveOnBoard(moved) => {
                let entry = &moved.entry;
                [(moved.from, -1), (entry.column, 1)]
                    .into_iter()
                    .filter_map(|(column, sign)| {
                        let bucket = column_bucket(column?);
                        let customer = entry.customer_id.as_str();
                        Some((customer, entry.currency.code(), bucket, sign, sign * entry.amount))
                    })
                    .collect()
            }
            Write::InsertWorkItem(item) => queue(item, 1),
            // Done is final: the one update that reaches it takes the item off the count.
            Write::UpdateWorkItem(item) if item.status == WorkItemStatus::Done => queue(item, -1),
            _ => vec![],
        });
        type BucketSums = std::collections::BTreeMap<String, (i64, i64)>;
        let mut counters: std::collections::BTreeMap<(&str, &str), BucketSums> = Default::default();
        for (customer, currency, bucket, count, amount) in changes {
            let counter = counters
                .entry((customer, currency))
                .or_default()
                .entry(bucket)
                .or_default();
            *counter = (counter.0 + count, counter.1 + amount);
        }
        counters
            .into_iter()
            .filter_map(|((customer, currency), changes)| {
                let changes: Vec<(String, i64, i64)> = changes
                    .into_iter()
                    .filter(|(_, (count, amount))| *count != 0 || *amount != 0)
                    .map(|(bucket, (count, amount))| (bucket, count, amount))
                    .collect();
                self.count_on_board(customer, currency, &changes)
            })
            .collect()
    }

    /// Adds `changes` (bucket, count, amount) in `currency` to the board counters of
    /// `customer`: one update of its item (the platform's board adds up every customer's).
    fn count_on_board(
        &self,
        customer: &str,
        currency: &str,
        changes: &[(String, i64, i64)],
    ) -> Option<TransactWriteItem> {
        // An update must add something.
        if changes.is_empty() {
            return None;
        }
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::board_counters_item(customer, currency)))))
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_names("#currency", "currency")
            .expression_attribute_values(":entity", s("board_counter"))
            .expression_attribute_values(":currency", s(currency));
        let mut additions = vec![];
        for (i, (bucket, count, amount)) in changes.iter().enumerate() {
            additions.push(format!("#n{i} :n{i}"));
            update = update
                .expression_attribute_names(format!("#n{i}"), format!("{COUNT_PREFIX}{bucket}"))
                .expression_attribute_values(format!(":n{i}"), n(*count));
            if *amount != 0 {
                additions.push(format!("#a{i} :a{i}"));
                update = update
                    .expression_attribute_names(format!("#a{i}"), format!("{AMOUNT_PREFIX}{bucket}"))
                    .expression_attribute_values(format!(":a{i}"), n(*amount));
            }
        }
        let update = update
            .update_expression(format!(
                "SET #entity = :entity, #currency = :currency ADD {}",
                additions.join(", ")
            ))
            .build()
            .expect("counter update");
        Some(TransactWriteItem::builder().update(update).build())
    }

    fn write(&self, write: &Write) -> Vec<TransactWriteItem> {
        match write {
            Write::InsertCustomer(c) => vec![self.put(customer_item(c), Some("attribute_not_exists(PK)"), vec![])],
            // Rewritten whole, index entry included: a customer made before the list's index
            // joins it once it is next changed.
            Write::UpdateCustomer(c) => vec![self.versioned_since_unversioned(customer_item(c), c.version)],
            Write::InsertUser(u) => vec![self.put(user_item(u), Some("attribute_not_exists(PK)"), vec![])],
            Write::UpdateUser(u) => vec![self.versioned_since_unversioned(user_item(u), u.version)],
            Write::PutApiKey(k) => {
                let body = doc(k);
                let by_id = keyed(
                    keys::api_key(&k.id),
                    vec![
                        ("entity", s("api_key")),
                        ("doc", body.clone()),
                        ("GSI1PK", s(keys::keys_of(k.customer_id.as_deref()))),
                        ("GSI1SK", s(&k.id)),
                        ("version", n(k.version)),
                    ],
                );
                let by_hash = keyed(
                    keys::api_key_by_hash(&k.secret_hash),
                    vec![("entity", s("api_key_hash")), ("doc", body), ("key_id", s(&k.id))],
                );
                // A secret's hash stands for one key only: a second key under the same hash
                // (a collision, or a bug) is refused rather than let it take the first one over.
                // (Items written before `key_id` existed are taken over by their own key.)
                let unique = self.put(
                    by_hash,
                    Some("attribute_not_exists(PK) OR key_id = :key_id OR attribute_not_exists(key_id)"),
                    vec![(":key_id", s(&k.id))],
                );
                vec![self.versioned_since_unversioned(by_id, k.version), unique]
            }
            Write::InsertOperation(op) => {
                vec![self.put(Self::operation_item(op), Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::UpdateOperation(op) => vec![self.versioned(Self::operation_item(op), op.version)],
            Write::PutWorkflow(w) => {
                let it = keyed(
                    keys::workflow(&w.owner, &w.name),
                    vec![("entity", s("workflow")), ("doc", doc(w)), ("version", n(w.version))],
                );
                vec![self.versioned(it, w.version)]
            }
            Write::InsertTransaction(t) => {
                vec![self.put(Self::transaction_item(t), Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::UpdateTransaction(t) => vec![self.versioned(Self::transaction_item(t), t.version)],
            Write::Event(e) => vec![self.put(self.event_item(e), Some("attribute_not_exists(PK)"), vec![])],
            Write::PutWebhookEndpoint(w) => {
                let body = doc(w);
                let mut attributes = vec![
                    ("entity", s("webhook_endpoint")),
                    ("doc", body),
                    ("version", n(w.version)),
                ];
                // Sparse: a deleted endpoint leaves its owner's list, which every event's
                // dispatch reads; it is still read by its id.
                if w.status != EndpointStatus::Deleted {
                    attributes.extend([
                        ("GSI1PK", s(keys::endpoints_of(w.customer_id.as_deref()))),
                        ("GSI1SK", s(&w.id)),
                    ]);
                }
                let it = keyed(keys::webhook_endpoint(&w.id), attributes);
                vec![self.versioned(it, w.version)]
            }
            Write::PutEndpointRoster(roster) => {
                let it = keyed(
                    keys::endpoint_roster(roster.owner.as_deref()),
                    vec![
                        ("entity", s("endpoint_roster")),
                        ("doc", doc(roster)),
                        ("version", n(roster.version)),
                    ],
                );
                vec![self.versioned(it, roster.version)]
            }
            Write::InsertDelivery(d) | Write::UpdateDelivery(d) => {
                let mut attributes = vec![
                    ("entity", s("delivery")),
                    ("doc", doc(d)),
                    ("version", n(d.version)),
                    ("GSI1PK", s(keys::deliveries_of(&d.event_id))),
                    ("GSI1SK", s(&d.id)),
                ];
                // Sparse: only a failure awaiting its follow-up is indexed, so a delivered
                // webhook writes no second index entry.
                if d.awaits_follow_up() {
                    attributes.extend([
                        ("GSI2PK", s(keys::failed_deliveries_of(&d.endpoint_id))),
                        ("GSI2SK", s(keys::failed_delivery_order(&d.event_id, &d.id))),
                    ]);
                }
                vec![self.versioned(keyed(keys::delivery(&d.id), attributes), d.version)]
            }
            Write::PutSchedule(schedule) => vec![self.versioned(Self::schedule_item(schedule), schedule.version)],
            Write::InsertOccurrence(occurrence) => {
                let it = keyed(
                    keys::occurrence(&occurrence.schedule_id, occurrence.scheduled_at),
                    vec![("entity", s("occurrence")), ("doc", doc(occurrence))],
                );
                vec![self.put(it, Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::Audit(entry) => vec![self.put(self.audit_item(entry), Some("attribute_not_exists(PK)"), vec![])],
            Write::InsertFile { file, unique_bytes } => {
                let digest = keyed(
                    keys::file_digest(&file.customer_id, &file.sha256),
                    vec![("entity", s("file_digest")), ("file_id", s(&file.id))],
                );
                let digest_condition = unique_bytes.then_some("attribute_not_exists(PK)");
                vec![
                    self.versioned(Self::file_item(file), file.version),
                    self.put(digest, digest_condition, vec![]),
                ]
            }
            Write::UpdateFile(file) => vec![self.versioned(Self::file_item(file), file.version)],
            Write::InsertReconciliation(reconciliation) => {
                let it = keyed(
                    keys::reconciliation(&reconciliation.id),
                    vec![
                        ("entity", s("reconciliation")),
                        ("doc", doc(reconciliation)),
                        ("version", n(reconciliation.version)),
                    ],
                );
                vec![self.put(it, Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::PutReturnSweep(sweep) => {
                let it = keyed(
                    keys::return_sweep(&sweep.rail, sweep.check),
                    vec![("entity", s("return_sweep")), ("doc", doc(sweep))],
                );
                vec![self.put(it, None, vec![])]
            }
            Write::InsertAccount(account) => {
                let owner = account.customer_id.as_deref();
                let currency = account.currency.code();
                let mut attributes = vec![
                    ("entity", s("account")),
                    ("doc", doc(account)),
                    ("available", n(0)),
                    ("GSI1PK", s(keys::accounts_of(owner))),
                    ("GSI1SK", s(&account.id)),
                    ("GSI2PK", s(keys::accounts_of_in(owner, currency))),
                    ("GSI2SK", s(&account.id)),
                    ("GSI3PK", s(keys::all_accounts_shard(&account.id))),
                    ("GSI3SK", s(&account.id)),
                    ("GSI4PK", s(keys::all_accounts_in_shard(currency, &account.id))),
                    ("GSI4SK", s(&account.id)),
                ];
                attributes.extend(BALANCES.map(|name| (name, n(0))));
                let holder = keyed(
                    keys::account_holder(&account.holder(), currency),
                    vec![("entity", s("account_holder")), ("account_id", s(&account.id))],
                );
                vec![
                    self.put(
                        keyed(keys::account(&account.id), attributes),
                        Some("attribute_not_exists(PK)"),
                        vec![],
                    ),
                    self.put(holder, Some("attribute_not_exists(PK)"), vec![]),
                ]
            }
            Write::InsertWorkItem(work_item) => {
                let marker = keyed(
                    keys::open_work_item(work_item.queue.as_str(), &work_item.subject.id),
                    vec![("entity", s("work_item_open")), ("work_item_id", s(&work_item.id))],
                );
                vec![
                    self.put(
                        Self::work_item_item(work_item),
                        Some("attribute_not_exists(PK)"),
                        vec![],
                    ),
                    self.put(marker, Some("attribute_not_exists(PK)"), vec![]),
                ]
            }
            Write::MoveOnBoard(moved) => {
                let entry = &moved.entry;
                let it = keyed(
                    keys::board_entry(&entry.operation_id),
                    vec![
                        ("entity", s("board_entry")),
                        ("doc", doc(entry)),
                        ("version", n(entry.version)),
                    ],
                );
                // Its counters are changed with the changeset's others ([`Self::board_counters`]).
                vec![self.versioned(it, entry.version)]
            }
            Write::UpdateWorkItem(work_item) => {
                let mut writes = vec![self.versioned(Self::work_item_item(work_item), work_item.version)];
                if work_item.status == WorkItemStatus::Done {
                    // Done: the subject may open a new item.
                    let marker = keys::open_work_item(work_item.queue.as_str(), &work_item.subject.id);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(item(key_item(marker))))
                        .condition_expression("work_item_id = :id")
                        .expression_attribute_values(":id", s(&work_item.id))
                        .build()
                        .expect("table and key set");
                    writes.push(TransactWriteItem::builder().delete(delete).build());
                }
                writes
            }
            Write::InsertMovement(movement) => {
                vec![self.put(Self::movement_item(movement), Some("attribute_not_exists(PK)"), vec![])]
            }
            Write::UpdateMovement(movement) => vec![self.versioned(Self::movement_item(movement), movement.version)],
            Write::ChangeBalances(account) => {
                let change = &account.change;
                let mut update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(item(key_item(keys::account(&account.account_id)))))
                    .update_expression(
                        "ADD posted :posted, pending_debits :debits, pending_credits :credits, available :available",
                    )
                    .expression_attribute_values(":posted", n(change.posted))
                    .expression_attribute_values(":debits", n(change.pending_debits))
                    .expression_attribute_values(":credits", n(change.pending_credits))
                    .expression_attribute_values(":available", n(change.available()));
                update = if account.guard_available {
                    update
                        .condition_expression("attribute_exists(PK) AND available >= :needed")
                        .expression_attribute_values(":needed", n(-change.available()))
                } else {
                    update.condition_expression("attribute_exists(PK)")
                };
                vec![TransactWriteItem::builder()
                    .update(update.build().expect("balance change"))
                    .build()]
            }
            Write::TakeIdempotency { claim, response } => vec![self.take_idempotency(claim, response, vec![])],
            Write::CompleteIdempotency { scope, key, response } => {
                let (name, body) = stored_response(&response.body);
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(item(key_item(keys::idempotency(scope, key)))))
                    .update_expression("SET #status = :status, #response = :response")
                    .condition_expression("attribute_exists(PK) AND attribute_not_exists(#status)")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_names("#response", name)
                    .expression_attribute_values(":status", n(response.status))
                    .expression_attribute_values(":response", body)
                    .build()
                    .expect("complete");
                vec![TransactWriteItem::builder().update(update).build()]
            }
        }
    }

    async fn get<T: DeserializeOwned>(&self, key: keys::Primary) -> Result<Option<T>, StoreError> {
        self.get_item(key).await?.as_ref().map(read_doc).transpose()
    }

    /// The items of `keys` that exist, by key: strongly consistent `BatchGetItem`s of up to 100
    /// keys, each asking again for what DynamoDB did not get to. An index is eventually
    /// consistent; the items it names are read as they are now (a read costs a fifth of a
    /// write, doubled for consistency), so no list hands a pipeline step an older document
    /// than the index entry that led to it.
    async fn items_by_key(&self, keys: &[keys::Primary]) -> Result<HashMap<keys::Primary, Item>, StoreError> {
        self.items_by_key_read(keys, true).await
    }

    /// [`items_by_key`](Self::items_by_key), strongly consistent or not (half the read units).
    async fn items_by_key_read(
        &self,
        keys: &[keys::Primary],
        consistent: bool,
    ) -> Result<HashMap<keys::Primary, Item>, StoreError> {
        // A batch read refuses a key asked twice: each is asked once, and answers every asker.
        let mut asked = std::collections::HashSet::new();
        let keys: Vec<&keys::Primary> = keys.iter().filter(|key| asked.insert(*key)).collect();
        let mut found = HashMap::new();
        for chunk in keys.chunks(100) {
            let mut pending: Vec<Item> = chunk.iter().map(|key| item(key_item((*key).clone()))).collect();
            while !pending.is_empty() {
                self.count();
                let asked = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(consistent)
                    .build()
                    .map_err(unavailable)?;
                let answer = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, asked)
                    .send()
                    .await
                    .map_err(sdk_error)?;
                for item in answer
                    .responses()
                    .and_then(|r| r.get(&self.table))
                    .into_iter()
                    .flatten()
                {
                    if let Some(key) = primary_of(item) {
                        found.insert(key, item.clone());
                    }
                }
                // Keys DynamoDB did not get to this time (throttling) are asked again.
                if let Some(left) = answer.unprocessed_keys().and_then(|u| u.get(&self.table)) {
                    pending = left.keys().to_vec();
                }
            }
        }
        Ok(found)
    }

    async fn get_item(&self, key: keys::Primary) -> Result<Option<Item>, StoreError> {
        self.count();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(key))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(found.item)
    }

    /// An event's item, where it is, or where it was written before 2026-11-26.
    async fn stored_event(&self, id: &EventId) -> Result<Option<Item>, StoreError> {
        match self.get_item(keys::event(id)).await? {
            Some(item) => Ok(Some(item)),
            None => self.get_item(keys::event_written_before(id)).await,
        }
    }

    /// The platform's events before `after`, newest first: the items of the table's event
    /// shards, merged with the GSI3 entries of events written before 2026-11-26 (which carry
    /// the same partition and sort keys there).
    async fn every_event_newest_first(
        &self,
        after: String,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<Listed<Event>, StoreError> {
        let sources = keys::all_events()
            .into_iter()
            .flat_map(|shard| [(None, shard.clone()), (Some("GSI3"), shard)])
            .collect();
        let (found, read_up_to) = self.newest_entries(sources, &after, filter, limit).await?;
        let written_before: Vec<keys::Primary> = found
            .iter()
            .filter(|(_, _, index)| index.is_some())
            .filter_map(|(_, entry, _)| primary_of(entry))
            .collect();
        let written_before = self.items_by_key(&written_before).await?;
        let items = found
            .iter()
            .filter_map(|(_, found, index)| match index {
                None => Some(found),
                Some(_) => primary_of(found).and_then(|key| written_before.get(&key)),
            })
            .map(read_doc)
            .collect::<Result<_, _>>()?;
        Ok(Listed { items, read_up_to })
    }

    /// The entries of `sources` (partitions of the table, `None`, or of an index) before
    /// `after` by sort key, newest first across them all, up to `limit`, each with its sort
    /// key and where it was read. With a filter, each partition reads at most its budget of
    /// entries; if one stopped there, the merged list ends where every partition has been
    /// read (the highest of their stopping points), and that is where it read up to.
    async fn newest_entries(
        &self,
        sources: Vec<(Option<&'static str>, String)>,
        after: &str,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<(Vec<(String, Item, Option<&'static str>)>, Option<String>), StoreError> {
        let budget = filter
            .as_ref()
            .map(|_| self.filtered_read_budget.load(Ordering::Relaxed));
        let filter = &filter;
        let read = futures_util::future::try_join_all(sources.into_iter().map(|(index, partition)| async move {
            let sort_key = format!("{}SK", index.unwrap_or(""));
            let condition = format!("{}PK = :pk AND {sort_key} < :after", index.unwrap_or(""));
            let (entries, stopped_at) = self
                .query_entries_within(
                    index,
                    &condition,
                    vec![(":pk", s(partition)), (":after", s(after))],
                    filter.clone(),
                    true,
                    limit,
                    budget.map(|budget| (budget, sort_key.as_str())),
                )
                .await?;
            Ok::<_, StoreError>((index, sort_key, entries, stopped_at))
        }))
        .await?;
        let read_up_to = read.iter().filter_map(|(_, _, _, stopped_at)| stopped_at.clone()).max();
        let mut found: Vec<(String, Item, Option<&'static str>)> = read
            .into_iter()
            .flat_map(|(index, sort_key, entries, _)| {
                entries.into_iter().filter_map(move |entry| {
                    let key = entry.get(&sort_key).and_then(|k| k.as_s().ok()).cloned()?;
                    Some((key, entry, index))
                })
            })
            // Past where every partition has been read, a partition that read on may hold
            // entries another has not reached: they come on the next page.
            .filter(|(key, _, _)| read_up_to.as_ref().is_none_or(|up_to| key >= up_to))
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0));
        found.truncate(limit);
        Ok((found, read_up_to))
    }

    /// Up to `limit` items of `partition` in `index` with a sort key (an id) below `after`,
    /// newest first. A sharded partition is read shard by shard (concurrently), its entries
    /// merged ([`Self::newest_entries`]), and only the items that make the page are read.
    async fn newest_first_listed<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        after: String,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<Listed<T>, StoreError> {
        let sources = partition.keys().into_iter().map(|key| (Some(index), key)).collect();
        let (found, read_up_to) = self.newest_entries(sources, &after, filter, limit).await?;
        let entries: Vec<Item> = found.into_iter().map(|(_, entry, _)| entry).collect();
        Ok(Listed {
            items: self.items_of(&entries).await?,
            read_up_to,
        })
    }

    /// [`Self::newest_first_listed`] for a list kept with another's entries (approved and
    /// processing operations share theirs, [`keys::status_list`]): reads entries newest first,
    /// in rounds, and keeps the items `keep` takes, until `limit` are kept, the
    /// partitions end, or [`ITEMS_READ_TO_KEEP`] items were read; then says where it read up
    /// to, so the next page goes on from there.
    async fn newest_first_kept<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        mut after: String,
        filter: Option<Filter>,
        limit: usize,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Listed<T>, StoreError> {
        let partitions = partition.keys();
        let budget = ITEMS_READ_TO_KEEP.min(self.filtered_read_budget.load(Ordering::Relaxed));
        // The first read as many as the page takes (the list's own status is most of what it
        // reads, but for approved's), then a hundred at a time.
        let mut round = limit.min(budget);
        let (mut kept, mut read) = (Vec::new(), 0);
        loop {
            let sources = partitions.iter().map(|key| (Some(index), key.clone())).collect();
            let (found, stopped_at) = self.newest_entries(sources, &after, filter.clone(), round).await?;
            let exhausted = found.len() < round && stopped_at.is_none();
            read += found.len();
            let last = found.last().map(|(key, _, _)| key.clone());
            let entries: Vec<Item> = found.into_iter().map(|(_, entry, _)| entry).collect();
            kept.extend(
                self.items_of::<T>(&entries)
                    .await?
                    .into_iter()
                    .filter(|item| keep(item)),
            );
            if kept.len() >= limit || exhausted {
                kept.truncate(limit);
                return Ok(Listed::complete(kept));
            }
            let read_up_to = match (stopped_at, last) {
                (Some(stopped_at), _) => stopped_at,
                (None, Some(last)) if read < budget => {
                    after = last;
                    round = limit.max(100).min(budget - read);
                    continue;
                }
                (None, last) => last.unwrap_or(after),
            };
            return Ok(Listed {
                items: kept,
                read_up_to: Some(read_up_to),
            });
        }
    }

    /// [`Self::newest_first_listed`]'s items, for lists whose filters are all keys.
    async fn newest_first<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        after: String,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        Ok(self
            .newest_first_listed(index, partition, after, filter, limit)
            .await?
            .items)
    }

    /// Up to `limit` items of a sharded due index (GSI2, sorted by due time) due at or before
    /// `now`, soonest first.
    async fn due<T: DeserializeOwned>(
        &self,
        partitions: Vec<String>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        let until = keys::poll_due_until(now);
        let mut due = each_partition(partitions, |key| {
            self.query_entries(
                Some("GSI2"),
                "GSI2PK = :pk AND GSI2SK <= :until",
                vec![(":pk", s(key)), (":until", s(until.clone()))],
                None,
                false,
                limit,
            )
        })
        .await?;
        // The sort key is the due time, then the id: the earliest across the shards first,
        // then one read of the items for them all.
        let sort_key = |entry: &Item| entry.get("GSI2SK").and_then(|k| k.as_s().ok()).cloned();
        due.sort_by_key(sort_key);
        due.truncate(limit);
        let before = self.requests();
        let items = self.items_of(&due).await;
        self.poll_queries.fetch_add(self.requests() - before, Ordering::Relaxed);
        items
    }

    /// Queries an index (or the table when `index` is `None`), following pages until `limit`
    /// items passed `filter` or the index has no more, and reads the items the index entries
    /// stand for. Filters name `status` and `type` as `#st` and `#ty` (both are reserved words).
    async fn query<T: DeserializeOwned>(
        &self,
        index: Option<&str>,
        key_condition: &str,
        values: Vec<(&str, AttributeValue)>,
        filter: Option<Filter>,
        newest_first: bool,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        let entries = self
            .query_entries(index, key_condition, values, filter, newest_first, limit)
            .await?;
        match index {
            None => entries.iter().map(read_doc).collect(),
            Some(_) => self.items_of(&entries).await,
        }
    }

    /// The items index entries stand for, in the entries' order: an index entry holds keys and
    /// filter attributes only ([`PROJECTED`]). One removed in between (an expired record) is
    /// left out.
    async fn items_of<T: DeserializeOwned>(&self, entries: &[Item]) -> Result<Vec<T>, StoreError> {
        let keys: Vec<keys::Primary> = entries.iter().filter_map(primary_of).collect();
        let items = self.items_by_key(&keys).await?;
        keys.iter().filter_map(|key| items.get(key)).map(read_doc).collect()
    }

    /// The entries a query finds (items of the table, or an index's entries), up to `limit`.
    async fn query_entries(
        &self,
        index: Option<&str>,
        key_condition: &str,
        values: Vec<(&str, AttributeValue)>,
        filter: Option<Filter>,
        newest_first: bool,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let (found, _) = self
            .query_entries_within(index, key_condition, values, filter, newest_first, limit, None)
            .await?;
        Ok(found)
    }

    /// [`Self::query_entries`], reading at most `budget.0` entries (matching the filter or
    /// not); when it stops there with more to read, it also answers the `budget.1` sort key
    /// of the last entry it read.
    #[allow(clippy::too_many_arguments)]
    async fn query_entries_within(
        &self,
        index: Option<&str>,
        key_condition: &str,
        values: Vec<(&str, AttributeValue)>,
        filter: Option<Filter>,
        newest_first: bool,
        limit: usize,
        budget: Option<(usize, &str)>,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let mut found = vec![];
        let mut read = 0;
        let mut start: Option<Item> = None;
        loop {
            self.count();
            let unread = budget.map_or(usize::MAX, |(budget, _)| budget.saturating_sub(read));
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(index.map(str::to_owned))
                .key_condition_expression(key_condition)
                .scan_index_forward(!newest_first)
                .set_exclusive_start_key(start.take())
                .limit((limit - found.len()).min(unread).clamp(1, 1000) as i32);
            for (k, v) in &values {
                request = request.expression_attribute_values(*k, v.clone());
            }
            if let Some(filter) = &filter {
                request = request.filter_expression(filter.expression());
                for (placeholder, name, value) in &filter.clauses {
                    request = request
                        .expression_attribute_names(format!("#{placeholder}"), *name)
                        .expression_attribute_values(format!(":{placeholder}"), s(value));
                }
            }
            let page = request.send().await.map_err(sdk_error)?;
            let bytes: usize = page.items().iter().flatten().map(|(n, v)| attribute_bytes(n, v)).sum();
            self.queried_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            found.extend(page.items().iter().take(limit - found.len()).cloned());
            read += usize::try_from(page.scanned_count()).unwrap_or(0);
            if found.len() == limit {
                return Ok((found, None));
            }
            match (page.last_evaluated_key(), budget) {
                (None, _) => return Ok((found, None)),
                (Some(key), Some((budget, sort_key))) if read >= budget => {
                    let read_up_to = key.get(sort_key).and_then(|k| k.as_s().ok()).cloned();
                    return Ok((found, read_up_to));
                }
                (Some(key), _) => start = Some(key.clone()),
            }
        }
    }
}

/// The partition key of a list: one value, or every shard of a key spread over several.
enum Partition {
    One(String),
    Sharded(Vec<String>),
}

impl Partition {
    /// Every partition key to query.
    fn keys(self) -> Vec<String> {
        match self {
            Partition::One(key) => vec![key],
            Partition::Sharded(shards) => shards,
        }
    }
}

pub use keys::SHARDS;
/// The table's global secondary indexes, each keyed `<name>PK`, `<name>SK`.
pub const INDEXES: [&str; 4] = ["GSI1", "GSI2", "GSI3", "GSI4"];

/// The attributes every index projects besides the keys: what list filters read. An index
/// entry is then small (one write unit), and a write that changes neither its keys nor these
/// leaves it alone; lists read the items themselves after the query ([`DynamoStore::query`]).
pub const PROJECTED: [&str; 4] = ["type", "queue", "status", "customer_id"];

/// An item's entry in each index: its keys and projected attributes, where it has the keys.
fn index_image(item: &Item) -> Vec<Option<String>> {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(text) | AttributeValue::N(text)) => text.as_str(),
        _ => "",
    };
    INDEXES
        .iter()
        .map(|index| {
            item.get(&format!("{index}PK"))?;
            let mut entry = format!("{}\u{1f}{}", text(&format!("{index}PK")), text(&format!("{index}SK")));
            for name in PROJECTED {
                entry.push('\u{1f}');
                entry.push_str(text(name));
            }
            Some(entry)
        })
        .collect()
}

/// Write units an index takes for an item whose entry goes from `before` to `after`: a new or
/// removed entry one, a moved one (new keys) a delete and a put, an entry whose projected
/// attributes changed one, an unchanged one none.
fn index_units(before: Option<&String>, after: Option<&String>) -> u64 {
    let keys = |entry: &String| entry.splitn(3, '\u{1f}').take(2).collect::<Vec<_>>().join("\u{1f}");
    match (before, after) {
        (None, None) => 0,
        (None, Some(_)) | (Some(_), None) => 1,
        (Some(before), Some(after)) if before == after => 0,
        (Some(before), Some(after)) if keys(before) == keys(after) => 1,
        (Some(_), Some(_)) => 2,
    }
}

impl DynamoStore {
    /// On-demand write units of one write: 1 per KB of item, doubled in a transaction, plus
    /// each index entry it writes (entries are small: one unit each). Which entries a put
    /// changes is exact once [`count_index_entries_exactly`](Self::count_index_entries_exactly)
    /// was called and the item's last write was seen; otherwise an update is taken to rewrite
    /// each entry it has. An update (a counter's `ADD`, an idempotency record's completion)
    /// touches no index key or projected attribute and is counted by the size of its key and
    /// the values it sets, which is the item's for the record's response. Also answers the
    /// put's new index entries, to remember once the write succeeds.
    fn write_units_of(&self, write: &TransactWriteItem, transactional: bool) -> (u64, Option<IndexImage>) {
        let per_kb = if transactional { 2 } else { 1 };
        let Some(put) = write.put() else {
            let bytes = write.update().map_or(0, |update| {
                let key: usize = update.key().iter().map(|(n, v)| attribute_bytes(n, v)).sum();
                let values = update.expression_attribute_values().into_iter().flatten();
                key + values.map(|(n, v)| attribute_bytes(n, v)).sum::<usize>()
            });
            return (bytes.div_ceil(1024).max(1) as u64 * per_kb, None);
        };
        let item = put.item();
        let bytes: usize = item.iter().map(|(name, value)| attribute_bytes(name, value)).sum();
        let units = bytes.div_ceil(1024).max(1) as u64 * per_kb;
        let after = index_image(item);
        let key = match (item.get("PK"), item.get("SK")) {
            (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => (pk.clone(), sk.clone()),
            _ => return (units, None),
        };
        let insert = put
            .condition_expression()
            .is_some_and(|c| c.starts_with("attribute_not_exists"));
        let images = self.index_images.lock().unwrap_or_else(|e| e.into_inner());
        let before: Option<Vec<Option<String>>> = match images.as_ref().and_then(|images| images.get(&key)) {
            Some(before) => Some(before.clone()),
            None if insert => Some(vec![None; INDEXES.len()]),
            None => None,
        };
        drop(images);
        let entries: u64 = match &before {
            Some(before) => before
                .iter()
                .zip(&after)
                .map(|(b, a)| index_units(b.as_ref(), a.as_ref()))
                .sum(),
            None => after.iter().filter(|entry| entry.is_some()).count() as u64,
        };
        (units + entries, Some((key, after)))
    }
}

/// An attribute's size as DynamoDB counts it: its name and its value.
fn attribute_bytes(name: &str, value: &AttributeValue) -> usize {
    name.len()
        + match value {
            AttributeValue::S(text) | AttributeValue::N(text) => text.len(),
            AttributeValue::B(blob) => blob.as_ref().len(),
            _ => 1,
        }
}

/// An idempotency key's record, as a claim writes it.
fn idempotency_item(claim: &IdempotencyClaim) -> Item {
    let now = claim.now.unix_timestamp();
    keyed(
        keys::idempotency(&claim.scope, &claim.key),
        vec![
            ("entity", s("idempotency")),
            ("fingerprint", s(&claim.fingerprint)),
            ("locked_until", n(now + CLAIM_TIMEOUT.whole_seconds())),
            ("expires_at", n(now + RETENTION.whole_seconds())),
            // DynamoDB deletes expired items itself, within days; `expires_at` is what counts.
            ("ttl", n(now + RETENTION.whole_seconds() + 3600)),
        ],
    )
}

impl DynamoStore {
    /// The put of a key's record, completed with `response`, on condition that the key is free.
    fn take_idempotency(
        &self,
        claim: &IdempotencyClaim,
        response: &StoredResponse,
        more: Vec<(&str, AttributeValue)>,
    ) -> TransactWriteItem {
        let mut record = idempotency_item(claim);
        record.insert("status".into(), n(response.status));
        let (name, body) = stored_response(&response.body);
        record.insert(name.into(), body);
        record.extend(item(more));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record))
            .condition_expression(KEY_IS_FREE)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":now", n(claim.now.unix_timestamp()))
            .build()
            .expect("take");
        TransactWriteItem::builder().put(put).build()
    }
}

/// A key may be taken if no record holds it, or its record is past retention, or it is a
/// claim whose request died before completing it.
const KEY_IS_FREE: &str =
    "attribute_not_exists(PK) OR expires_at <= :now OR (attribute_not_exists(#status) AND locked_until <= :now)";

/// What a live record of a key means to a request with `fingerprint`.
fn claim_outcome(existing: &Item, fingerprint: &str) -> ClaimOutcome {
    if existing
        .get("fingerprint")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        != Some(fingerprint)
    {
        return ClaimOutcome::Mismatch;
    }
    let status = existing
        .get("status")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u16>().ok());
    let body = match (existing.get("response_z"), existing.get("response")) {
        (Some(AttributeValue::B(deflated)), _) => match documents::inflate_bytes(deflated.as_ref()) {
            Ok(body) => Some(body),
            Err(error) => {
                tracing::error!(%error, "an idempotency record's response does not inflate");
                None
            }
        },
        (None, Some(AttributeValue::B(body))) => Some(body.as_ref().to_vec()),
        _ => None,
    };
    match (status, body) {
        (Some(status), Some(body)) => ClaimOutcome::Replay(StoredResponse { status, body }),
        _ => ClaimOutcome::InFlight,
    }
}

/// An idempotency record's response as stored: the bytes in `response`, or deflated in
/// `response_z` when long (a created operation's body is 1–2 KB of JSON: deflated, the record
/// takes one write unit instead of two). Records written before keep their `response`.
fn stored_response(body: &[u8]) -> (&'static str, AttributeValue) {
    match documents::encode_bytes(body) {
        Ok(short) => ("response", AttributeValue::B(short.to_vec().into())),
        Err(deflated) => ("response_z", AttributeValue::B(deflated.into())),
    }
}

/// A change of one board counter: customer, currency, bucket, count, amount.
type BoardChange<'a> = (&'a str, &'a str, String, i64, i64);

/// What a write writes, for the benchmark's table: a put's item's `entity`; else a deletion,
/// or an update (a board counter's, a balance's).
fn kind_of(write: &TransactWriteItem) -> &str {
    let entity = write
        .put()
        .and_then(|put| put.item().get("entity"))
        .and_then(|e| e.as_s().ok());
    match entity {
        Some(entity) => entity,
        None if write.delete().is_some() => "delete",
        None => "update",
    }
}

/// Reads every partition with `read`, concurrently, and returns what they hold together.
async fn each_partition<T, F, Fut>(partitions: Vec<String>, read: F) -> Result<Vec<T>, StoreError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, StoreError>>,
{
    let read = futures_util::future::try_join_all(partitions.into_iter().map(read)).await?;
    Ok(read.into_iter().flatten().collect())
}

/// Equality conditions on plain attributes, applied after the key condition.
#[derive(Default, Clone)]
struct Filter {
    /// (placeholder, attribute name, value)
    clauses: Vec<(&'static str, &'static str, String)>,
}

impl Filter {
    fn with(mut self, placeholder: &'static str, name: &'static str, value: Option<&str>) -> Filter {
        if let Some(value) = value {
            self.clauses.push((placeholder, name, value.to_owned()));
        }
        self
    }

    fn into_option(self) -> Option<Filter> {
        (!self.clauses.is_empty()).then_some(self)
    }

    fn expression(&self) -> String {
        self.clauses
            .iter()
            .map(|(p, _, _)| format!("#{p} = :{p}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

#[async_trait]
impl Commit for DynamoStore {
    async fn commit(&self, changes: Changeset) -> Result<(), StoreError> {
        if let Some(split) = outbox::Split::of(&changes) {
            return match split.key_first() {
                Ok((key, entity_alone)) => self.commit_key_first(key, entity_alone).await,
                Err(split) => self.commit_with_outbox(split).await,
            };
        }
        let writes: Vec<&Write> = changes.writes.iter().collect();
        self.commit_items(self.changeset_items(&writes)).await
    }

    async fn commit_derived_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        let allowed = self
            .derived_commits_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1));
        if allowed.is_err() {
            let refused = unavailable("derived commits refused (a kill test)");
            return vec![Err(refused); changesets.len()];
        }
        self.commit_merged(changesets).await
    }
}

impl DynamoStore {
    /// Writes `items` together: one conditional write alone, or a transaction.
    async fn commit_items(&self, items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
        if items.len() > MAX_WRITES {
            return Err(unavailable(format!(
                "a changeset of {} writes exceeds DynamoDB's {MAX_WRITES}",
                items.len()
            )));
        }
        self.count();
        let transactional = items.len() > 1;
        let mut units = 0;
        let mut written = vec![];
        for item in &items {
            let (item_units, images) = self.write_units_of(item, transactional);
            self.add_units(kind_of(item), item_units);
            units += item_units;
            written.extend(images);
        }
        let outcome = self.send_changeset(items).await;
        match &outcome {
            Ok(()) => {
                if let Some(images) = self.index_images.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    images.extend(written);
                }
            }
            Err(StoreError::Conflict) => {
                self.conflicted_units.fetch_add(units, Ordering::Relaxed);
            }
            Err(_) => {}
        }
        outcome
    }
}

impl DynamoStore {
    /// Sends a changeset's writes: one conditional write alone, or a transaction.
    async fn send_changeset(&self, mut items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
        if let [only] = items.as_mut_slice() {
            if let Some(put) = only.put.take() {
                return self.put_alone(put).await;
            }
        }
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.transaction_items.fetch_add(items.len() as u64, Ordering::Relaxed);
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => match error.into_service_error() {
                TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                    let lost_race = cancelled
                        .cancellation_reasons()
                        .iter()
                        .any(|r| matches!(r.code(), Some("ConditionalCheckFailed" | "TransactionConflict")));
                    if lost_race {
                        Err(StoreError::Conflict)
                    } else {
                        Err(unavailable(format!("transaction cancelled: {cancelled:?}")))
                    }
                }
                other => Err(unavailable(other)),
            },
        }
    }
}

#[async_trait]
impl AccessStore for DynamoStore {
    async fn customer(&self, id: &CustomerId) -> Result<Option<Customer>, StoreError> {
        self.get(keys::customer(id)).await
    }

    async fn customers(
        &self,
        status: Option<CustomerStatus>,
        starting_after: Option<&CustomerId>,
        limit: usize,
    ) -> Result<Vec<Customer>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        match status {
            Some(status) => {
                let partition = Partition::One(keys::customers_in(status.as_str()));
                self.newest_first("GSI2", partition, after, None, limit).await
            }
            None => {
                let partition = Partition::One(keys::CUSTOMERS.to_owned());
                self.newest_first("GSI1", partition, after, None, limit).await
            }
        }
    }

    async fn user(&self, id: &UserId) -> Result<Option<User>, StoreError> {
        self.get(keys::user(id)).await
    }

    async fn api_key(&self, id: &ApiKeyId) -> Result<Option<ApiKey>, StoreError> {
        self.get(keys::api_key(id)).await
    }

    async fn api_key_by_hash(&self, secret_hash: &str) -> Result<Option<ApiKey>, StoreError> {
        self.get(keys::api_key_by_hash(secret_hash)).await
    }

    async fn users_of(
        &self,
        customer_id: &CustomerId,
        starting_after: Option<&UserId>,
        limit: usize,
    ) -> Result<Vec<User>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let partition = Partition::One(keys::users_of(customer_id));
        self.newest_first("GSI1", partition, after, None, limit).await
    }

    async fn api_keys_of(
        &self,
        customer_id: Option<&CustomerId>,
        starting_after: Option<&ApiKeyId>,
        limit: usize,
    ) -> Result<Vec<ApiKey>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let partition = Partition::One(keys::keys_of(customer_id.map(|id| id.as_str())));
        self.newest_first("GSI1", partition, after, None, limit).await
    }
}

#[async_trait]
impl OperationStore for DynamoStore {
    async fn operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError> {
        self.get(keys::operation(id)).await
    }

    async fn operations(&self, query: &OperationQuery) -> Result<Listed<Operation>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match (&query.customer_id, query.status) {
            // Approved's own list and processing's, for approved: read as shards are.
            (Some(customer), Some(status)) => (
                "GSI2",
                Partition::Sharded(keys::operations_of_in_lists(customer, status)),
            ),
            (Some(customer), None) => ("GSI1", Partition::One(keys::operations_of(customer))),
            (None, Some(status)) => ("GSI4", Partition::Sharded(keys::operations_in(status))),
            (None, None) => ("GSI3", Partition::Sharded(keys::all_operations())),
        };
        let filter = Filter::default()
            .with("ty", "type", query.kind.map(|k| k.as_str()))
            .into_option();
        match query.status {
            Some(status) if keys::shares_its_list(status) => {
                self.newest_first_kept(index, partition, after, filter, query.limit, |op: &Operation| {
                    op.status == status
                })
                .await
            }
            _ => {
                self.newest_first_listed(index, partition, after, filter, query.limit)
                    .await
            }
        }
    }

    async fn operation_history(&self, operation_id: &OperationId) -> Result<Vec<AuditEntry>, StoreError> {
        let (partition, entries) = keys::operation_history(operation_id);
        self.query(
            None,
            "PK = :pk AND begins_with(SK, :audit)",
            vec![(":pk", s(partition)), (":audit", s(entries))],
            None,
            false,
            10_000,
        )
        .await
    }
}

#[async_trait]
impl WorkflowStore for DynamoStore {
    async fn workflow(&self, owner: &WorkflowOwner, name: &str) -> Result<Option<Workflow>, StoreError> {
        self.get(keys::workflow(owner, name)).await
    }

    /// One `BatchGetItem` for them all (creating an operation reads the customer's and the
    /// platform's definition of its workflow and the customer's floor).
    async fn workflows(&self, wanted: &[(WorkflowOwner, String)]) -> Result<Vec<Option<Workflow>>, StoreError> {
        let keys: Vec<keys::Primary> = wanted.iter().map(|(owner, name)| keys::workflow(owner, name)).collect();
        let found = self.items_by_key(&keys).await?;
        wanted
            .iter()
            .map(|(owner, name)| found.get(&keys::workflow(owner, name)).map(read_doc).transpose())
            .collect()
    }
}

#[async_trait]
impl TransactionStore for DynamoStore {
    async fn transaction(&self, id: &TransactionId) -> Result<Option<Transaction>, StoreError> {
        self.get(keys::transaction(id)).await
    }

    /// Read by the ids its items name (one `BatchGetItem` per hundred): a transaction is in
    /// no list of its operation's, which would cost an index entry a transaction.
    async fn transactions_of_operation(&self, operation: &Operation) -> Result<Vec<Transaction>, StoreError> {
        let mut ids: Vec<&TransactionId> = operation
            .items
            .iter()
            .filter_map(|i| i.transaction_id.as_ref())
            .collect();
        ids.sort();
        let keys: Vec<keys::Primary> = ids.iter().map(|id| keys::transaction(id)).collect();
        let mut found = self.items_by_key(&keys).await?;
        keys.iter()
            .filter_map(|key| found.remove(key))
            .map(|item| read_doc(&item))
            .collect()
    }

    async fn transactions_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Transaction>, StoreError> {
        self.poll_queries.fetch_add(u64::from(SHARDS), Ordering::Relaxed);
        self.due(keys::poll_partitions(), now, limit).await
    }

    async fn confirmed_on_rail(&self, rail: &str, from: Date, to: Date) -> Result<Vec<Transaction>, StoreError> {
        let mut found = vec![];
        let mut day = from;
        while day <= to {
            let partition = keys::confirmed_on(rail, day);
            found.extend(
                self.query::<Transaction>(
                    Some("GSI3"),
                    "GSI3PK = :pk",
                    vec![(":pk", s(partition))],
                    None,
                    false,
                    usize::MAX,
                )
                .await?,
            );
            day = day.next_day().unwrap_or(Date::MAX);
            if day == Date::MAX {
                break;
            }
        }
        found.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(found)
    }

    async fn confirmed_between(
        &self,
        rail: &str,
        after: (OffsetDateTime, &TransactionId),
        until: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Transaction>, StoreError> {
        let after_sort = keys::confirmed_sort(after.0, after.1);
        let until_sort = keys::confirmed_until(until);
        // A sweep's queries are the poll schedule's, made every round whatever the traffic;
        // reading the items it found is the found transactions'.
        let before = self.requests();
        let mut found = vec![];
        let mut day = after.0.date();
        while day <= until.date() && found.len() < limit {
            // Inclusive bounds: the transaction the sweep stopped at comes back, and is dropped.
            let entries = self
                .query_entries(
                    Some("GSI3"),
                    "GSI3PK = :pk AND GSI3SK BETWEEN :after AND :until",
                    vec![
                        (":pk", s(keys::confirmed_on(rail, day))),
                        (":after", s(after_sort.clone())),
                        (":until", s(until_sort.clone())),
                    ],
                    None,
                    false,
                    limit - found.len() + 1,
                )
                .await?;
            found.extend(
                entries
                    .into_iter()
                    .filter(|entry| entry.get("GSI3SK").and_then(|k| k.as_s().ok()) != Some(&after_sort)),
            );
            let Some(next) = day.next_day() else { break };
            day = next;
        }
        found.truncate(limit);
        self.poll_queries.fetch_add(self.requests() - before, Ordering::Relaxed);
        self.items_of(&found).await
    }

    async fn return_sweep(&self, rail: &str, check: usize) -> Result<Option<ReturnSweep>, StoreError> {
        self.poll_queries.fetch_add(1, Ordering::Relaxed);
        self.get(keys::return_sweep(rail, check)).await
    }
}

#[async_trait]
impl ReconciliationStore for DynamoStore {
    async fn reconciliation(&self, id: &ReconciliationId) -> Result<Option<Reconciliation>, StoreError> {
        self.get(keys::reconciliation(id)).await
    }
}

#[async_trait]
impl LedgerStore for DynamoStore {
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        self.get(keys::account(id)).await
    }

    async fn account_of(&self, holder: &str, currency: &Currency) -> Result<Option<Account>, StoreError> {
        self.count();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::account_holder(holder, currency.code())))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        match found.item().and_then(|i| i.get("account_id")) {
            Some(AttributeValue::S(id)) => self.account(&AccountId::from(id.as_str())).await,
            _ => Ok(None),
        }
    }

    async fn accounts(&self, query: &AccountQuery) -> Result<Vec<Account>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match (&query.customer_id, &query.currency) {
            (Some(customer), None) => ("GSI1", Partition::One(keys::accounts_of(Some(customer)))),
            (Some(customer), Some(currency)) => (
                "GSI2",
                Partition::One(keys::accounts_of_in(Some(customer), currency.code())),
            ),
            (None, Some(currency)) => ("GSI4", Partition::Sharded(keys::all_accounts_in(currency.code()))),
            (None, None) => ("GSI3", Partition::Sharded(keys::all_accounts())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn movement(&self, id: &MovementId) -> Result<Option<Movement>, StoreError> {
        self.get(keys::movement(id)).await
    }

    async fn movements_of(
        &self,
        account: &AccountId,
        starting_after: Option<&MovementId>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError> {
        let after = page_start(starting_after.map(|id| id.as_str()));
        let key = keys::movements_of(account);
        let (debits, credits) = futures_util::try_join!(
            self.newest_first("GSI1", Partition::One(key.clone()), after.clone(), None, limit),
            self.newest_first("GSI2", Partition::One(key), after, None, limit),
        )?;
        let mut movements: Vec<Movement> = debits.into_iter().chain(credits).collect();
        movements.sort_by(|a, b| b.id.cmp(&a.id));
        movements.truncate(limit);
        Ok(movements)
    }
}

#[async_trait]
impl FileStore for DynamoStore {
    async fn file(&self, id: &FileId) -> Result<Option<File>, StoreError> {
        self.get(keys::file(id)).await
    }

    async fn files(&self, query: &FileQuery) -> Result<Vec<File>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match &query.customer_id {
            Some(customer) => ("GSI1", Partition::One(keys::files_of(customer))),
            None => ("GSI3", Partition::Sharded(keys::all_files())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn file_with_digest(&self, customer: &CustomerId, sha256: &str) -> Result<Option<FileId>, StoreError> {
        self.count();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::file_digest(customer, sha256)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        match found.item().and_then(|i| i.get("file_id")) {
            Some(AttributeValue::S(id)) => Ok(Some(FileId::from(id.as_str()))),
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl ScheduleStore for DynamoStore {
    async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, StoreError> {
        self.get(keys::schedule(id)).await
    }

    async fn schedules(&self, query: &ScheduleQuery) -> Result<Vec<Schedule>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        let (index, partition) = match &query.customer_id {
            Some(customer) => ("GSI1", Partition::One(keys::schedules_of(customer))),
            None => ("GSI3", Partition::Sharded(keys::all_schedules())),
        };
        self.newest_first(index, partition, after, None, query.limit).await
    }

    async fn schedules_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        self.due(keys::schedules_due_partitions(), now, limit).await
    }

    async fn occurrence(&self, id: &ScheduleId, at: OffsetDateTime) -> Result<Option<Occurrence>, StoreError> {
        self.get(keys::occurrence(id, at)).await
    }

    async fn occurrences(
        &self,
        id: &ScheduleId,
        before: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Occurrence>, StoreError> {
        let (partition, low, high) = keys::occurrences_before(id, before);
        self.query(
            None,
            "PK = :pk AND SK BETWEEN :low AND :high",
            vec![(":pk", s(partition)), (":low", s(low)), (":high", s(high))],
            None,
            true,
            limit,
        )
        .await
    }
}

#[async_trait]
impl WebhookStore for DynamoStore {
    async fn event(&self, id: &EventId) -> Result<Option<Event>, StoreError> {
        self.stored_event(id).await?.as_ref().map(read_doc).transpose()
    }

    async fn events(&self, query: &EventQuery) -> Result<Listed<Event>, StoreError> {
        let after = page_start(query.starting_after.as_deref());
        // An event sits in two lists: its customer's (GSI1) and the platform's (the table's
        // own shards). One of a type is the list read through a filter on the `type` its
        // entries carry (the filter reads on until the page is full), where an index per type
        // would cost each event two more write units.
        let filter = Filter::default()
            .with("ty", "type", query.kind.as_deref())
            .into_option();
        match &query.customer_id {
            Some(customer) => {
                let partition = Partition::One(keys::events_of(customer));
                self.newest_first_listed("GSI1", partition, after, filter, query.limit)
                    .await
            }
            None => self.every_event_newest_first(after, filter, query.limit).await,
        }
    }

    async fn webhook_endpoint(&self, id: &WebhookEndpointId) -> Result<Option<WebhookEndpoint>, StoreError> {
        self.get(keys::webhook_endpoint(id)).await
    }

    async fn endpoint_roster(&self, owner: Option<&CustomerId>) -> Result<Option<EndpointRoster>, StoreError> {
        self.get(keys::endpoint_roster(owner.map(|id| id.as_str()))).await
    }

    async fn webhook_endpoints_for(
        &self,
        customer_id: Option<&CustomerId>,
    ) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let mut endpoints: Vec<WebhookEndpoint> = self
            .query(
                Some("GSI1"),
                "GSI1PK = :pk",
                vec![(":pk", s(keys::endpoints_of(None)))],
                None,
                false,
                1000,
            )
            .await?;
        if let Some(customer) = customer_id {
            endpoints.extend(
                self.query::<WebhookEndpoint>(
                    Some("GSI1"),
                    "GSI1PK = :pk",
                    vec![(":pk", s(keys::endpoints_of(Some(customer))))],
                    None,
                    false,
                    1000,
                )
                .await?,
            );
        }
        endpoints.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(endpoints)
    }

    async fn delivery(&self, id: &DeliveryId) -> Result<Option<Delivery>, StoreError> {
        self.get(keys::delivery(id)).await
    }

    /// Two `BatchGetItem`s a batch (up to a hundred): its deliveries, then their events, each
    /// read once however many of the batch's endpoints it goes to. An event written before
    /// 2026-11-26 is not at its key; it is read at its former one.
    async fn deliveries_to_send(&self, ids: &[DeliveryId]) -> Result<Vec<(Delivery, Option<String>)>, StoreError> {
        let keys: Vec<keys::Primary> = ids.iter().map(|id| keys::delivery(id)).collect();
        let items = self.items_by_key(&keys).await?;
        let deliveries = keys
            .iter()
            .filter_map(|key| items.get(key))
            .map(read_doc::<Delivery>)
            .collect::<Result<Vec<_>, _>>()?;
        let event_keys: Vec<keys::Primary> = deliveries.iter().map(|d| keys::event(&d.event_id)).collect();
        let events = self.items_by_key(&event_keys).await?;
        let mut found = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            let body = match events.get(&keys::event(&delivery.event_id)) {
                Some(event) => Some(doc_json(event)?.into_owned()),
                None => self
                    .stored_event(&delivery.event_id)
                    .await?
                    .map(|event| doc_json(&event).map(std::borrow::Cow::into_owned))
                    .transpose()?,
            };
            found.push((delivery, body));
        }
        Ok(found)
    }

    async fn deliveries_of_event(&self, event_id: &EventId) -> Result<Vec<Delivery>, StoreError> {
        self.query(
            Some("GSI1"),
            "GSI1PK = :pk",
            vec![(":pk", s(keys::deliveries_of(event_id)))],
            None,
            false,
            1000,
        )
        .await
    }

    async fn failed_deliveries_of(
        &self,
        endpoint_id: &WebhookEndpointId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let mut values = vec![(":pk", s(keys::failed_deliveries_of(endpoint_id)))];
        let condition = match after {
            Some(after) => {
                values.push((":after", s(keys::failed_delivery_order(&after.event_id, &after.id))));
                "GSI2PK = :pk AND GSI2SK > :after"
            }
            None => "GSI2PK = :pk",
        };
        self.query(Some("GSI2"), condition, values, None, false, limit).await
    }
}

#[async_trait]
impl HistoryStore for DynamoStore {
    async fn entity_history(&self, entity_id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let (partition, entries) = keys::entity_history(entity_id);
        let mut newest: Vec<AuditEntry> = self
            .query(
                None,
                "PK = :pk AND begins_with(SK, :audit)",
                vec![(":pk", s(partition)), (":audit", s(entries))],
                None,
                true,
                MAX_ENTITY_HISTORY,
            )
            .await?;
        newest.reverse();
        Ok(newest)
    }
}

#[async_trait]
impl IdempotencyStore for DynamoStore {
    async fn claim_idempotency_key(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        let now = claim.now.unix_timestamp();
        let item = idempotency_item(claim);
        self.count_small_write("idempotency");
        let attempt = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(KEY_IS_FREE)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let existing = match attempt {
            Ok(_) => return Ok(ClaimOutcome::Claimed),
            Err(error) => match error.into_service_error() {
                PutItemError::ConditionalCheckFailedException(failed) => failed.item.unwrap_or_default(),
                other => return Err(unavailable(other)),
            },
        };
        match self.unfinished(&existing, claim).await? {
            // An abandoned record, now deleted: the key is free to claim.
            Some(ClaimOutcome::Claimed) => self.claim_idempotency_key(claim).await,
            Some(outcome) => Ok(outcome),
            None => Ok(claim_outcome(&existing, &claim.fingerprint)),
        }
    }

    async fn idempotency_record(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        self.count();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::idempotency(&claim.scope, &claim.key)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let now = claim.now.unix_timestamp();
        let number = |record: &Item, name: &str| {
            record
                .get(name)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        Ok(match found.item() {
            Some(record) => {
                let expired = number(record, "expires_at").is_some_and(|at| at <= now);
                let abandoned =
                    !record.contains_key("status") && number(record, "locked_until").is_some_and(|at| at <= now);
                match expired || abandoned {
                    true => ClaimOutcome::Claimed,
                    false => match self.unfinished(record, claim).await? {
                        Some(outcome) => outcome,
                        None => claim_outcome(record, &claim.fingerprint),
                    },
                }
            }
            None => ClaimOutcome::Claimed,
        })
    }

    async fn release_idempotency_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.count_small_write("idempotency");
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::idempotency(scope, key)))))
            .condition_expression("attribute_not_exists(#status)")
            .expression_attribute_names("#status", "status")
            .send()
            .await
            .map(|_| ())
            .or_else(|e| match e.into_service_error() {
                aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ConditionalCheckFailedException(_) => Ok(()),
                other => Err(unavailable(other)),
            })
    }
}

/// Every container counts into the same item, so the limit holds however many run: one item
/// per group (customer) and second, holding the group's total and each member's (key's)
/// count, so one conditional update checks and counts both.
#[async_trait]
impl RateLimiter for DynamoStore {
    async fn admit(&self, group: &str, member: &str, window: i64, limits: Limits) -> Result<bool, StoreError> {
        self.count_small_write("rate_limit");
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::rate_window(group, window)))))
            .update_expression("ADD #count :one, #member :one SET #entity = :entity, #ttl = :ttl")
            .condition_expression(
                "(attribute_not_exists(#count) OR #count < :group_limit) AND (attribute_not_exists(#member) OR #member < :member_limit)",
            )
            .expression_attribute_names("#count", "count")
            .expression_attribute_names("#member", format!("member:{member}"))
            .expression_attribute_names("#entity", "entity")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":group_limit", n(i64::from(limits.group)))
            .expression_attribute_values(":member_limit", n(i64::from(limits.member)))
            .expression_attribute_values(":entity", s("rate_window"))
            .expression_attribute_values(":ttl", n(window + 60))
            .send()
            .await;
        match counted {
            Ok(_) => Ok(true),
            Err(error) => match error.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(unavailable(other)),
            },
        }
    }
}

#[async_trait]
impl DeskStore for DynamoStore {
    async fn work_item(&self, id: &WorkItemId) -> Result<Option<WorkItem>, StoreError> {
        self.get(keys::work_item(id)).await
    }

    async fn open_work_item(&self, queue: Queue, subject_id: &str) -> Result<Option<WorkItem>, StoreError> {
        self.count();
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item(key_item(keys::open_work_item(queue.as_str(), subject_id)))))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        match found.item().and_then(|i| i.get("work_item_id")) {
            Some(AttributeValue::S(id)) => self.work_item(&WorkItemId::from(id.as_str())).await,
            _ => Ok(None),
        }
    }

    async fn past_due(
        &self,
        queue: Queue,
        customer_id: Option<&CustomerId>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let until = keys::poll_due_until(now);
        let mut partitions = vec![];
        for status in [WorkItemStatus::Open, WorkItemStatus::Claimed] {
            match customer_id {
                Some(customer) => partitions.push(keys::work_items_of(customer, queue.as_str(), status.as_str())),
                None => partitions.extend(keys::work_items_in(queue.as_str(), status.as_str())),
            }
        }
        let index = if customer_id.is_some() { "GSI2" } else { "GSI1" };
        let condition = format!("{index}PK = :pk AND {index}SK < :until");
        let due = each_partition(partitions, |key| {
            self.query::<WorkItem>(
                Some(index),
                &condition,
                vec![(":pk", s(key)), (":until", s(until.clone()))],
                None,
                false,
                limit,
            )
        })
        .await?;
        Ok(due.len().min(limit))
    }

    async fn board_entry(&self, operation_id: &OperationId) -> Result<Option<BoardEntry>, StoreError> {
        self.get(keys::board_entry(operation_id)).await
    }

    async fn board_counts(&self, customer_id: Option<&CustomerId>) -> Result<Vec<BoardCount>, StoreError> {
        let customer = customer_id.map(|c| c.as_str());
        // (partition, sort key prefix): the counters kept now, then those kept before.
        let mut partitions: Vec<(String, Option<String>)> = match customer {
            Some(customer) => {
                let (partition, prefix) = keys::board_counters_of(customer);
                vec![(partition, Some(prefix))]
            }
            None => keys::every_board_counter().into_iter().map(|p| (p, None)).collect(),
        };
        partitions.extend(keys::board_counters_before(customer).into_iter().map(|p| (p, None)));
        let counters = futures_util::future::try_join_all(partitions.into_iter().map(|(partition, prefix)| {
            let mut values = vec![(":pk", s(partition))];
            let condition = match prefix {
                Some(prefix) => {
                    values.push((":prefix", s(prefix)));
                    "PK = :pk AND begins_with(SK, :prefix)"
                }
                None => "PK = :pk",
            };
            self.query_entries(None, condition, values, None, false, usize::MAX)
        }))
        .await?;
        Ok(counters.iter().flatten().flat_map(board_counts_of).collect())
    }

    async fn oldest_in_column(
        &self,
        column: Column,
        customer_id: Option<&CustomerId>,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        let mut partitions = vec![];
        for status in column.statuses() {
            match customer_id {
                Some(customer) => partitions.extend(
                    keys::operations_of_in_lists(customer, *status)
                        .into_iter()
                        .map(|p| ("GSI2", p)),
                ),
                None => partitions.extend(keys::operations_in(*status).into_iter().map(|p| ("GSI4", p))),
            }
        }
        // A column's statuses may share their lists: each is read once, and holds only the
        // column's operations (a list's statuses are all in one column).
        partitions.sort();
        partitions.dedup();
        let oldest = futures_util::future::try_join_all(partitions.into_iter().map(|(index, key)| async move {
            let condition = format!("{index}PK = :pk");
            self.query::<Operation>(Some(index), &condition, vec![(":pk", s(key))], None, false, 1)
                .await
        }))
        .await?;
        Ok(oldest.into_iter().flatten().map(|op| op.created_at).min())
    }

    /// Reads the lists the filters name (a holder's; else a customer's, or each shard of a
    /// queue's, for each queue and status asked) from after `starting_after`, and merges them
    /// by due time.
    async fn work_items(&self, query: &WorkItemQuery) -> Result<Vec<WorkItem>, StoreError> {
        let after = match &query.starting_after {
            Some(id) => match self.work_item(id).await? {
                Some(item) => keys::poll_sort(item.due_at, &item.id),
                None => return Ok(vec![]),
            },
            // Sorts before every due time.
            None => " ".to_owned(),
        };
        let queues: Vec<Queue> = query.queue.map_or_else(|| Queue::ALL.to_vec(), |q| vec![q]);
        let statuses: Vec<WorkItemStatus> = query.status.map_or_else(|| WorkItemStatus::ALL.to_vec(), |s| vec![s]);
        let (index, partitions, filter) = match &query.assignee {
            Some(Assignee::Holder(holder)) => {
                let filter = Filter::default()
                    .with("qu", "queue", query.queue.map(Queue::as_str))
                    .with("st", "status", query.status.map(WorkItemStatus::as_str))
                    .with("cu", "customer_id", query.customer_id.as_deref());
                ("GSI3", vec![keys::work_items_held_by(holder)], filter.into_option())
            }
            // Nobody holds an open item, and every claimed one is held.
            Some(Assignee::Unassigned) if query.status.is_some_and(|s| s != WorkItemStatus::Open) => {
                return Ok(vec![]);
            }
            unassigned_or_any => {
                let statuses = if unassigned_or_any.is_some() {
                    vec![WorkItemStatus::Open]
                } else {
                    statuses
                };
                let mut partitions = vec![];
                for queue in &queues {
                    for status in &statuses {
                        match &query.customer_id {
                            Some(customer) => {
                                partitions.push(keys::work_items_of(customer, queue.as_str(), status.as_str()))
                            }
                            None => partitions.extend(keys::work_items_in(queue.as_str(), status.as_str())),
                        }
                    }
                }
                let index = if query.customer_id.is_some() { "GSI2" } else { "GSI1" };
                (index, partitions, None)
            }
        };
        let condition = format!("{index}PK = :pk AND {index}SK > :after");
        let mut found = each_partition(partitions, |key| {
            self.query::<WorkItem>(
                Some(index),
                &condition,
                vec![(":pk", s(key)), (":after", s(after.clone()))],
                filter.clone(),
                false,
                query.limit,
            )
        })
        .await?;
        found.sort_by(|a, b| (a.due_at, &a.id).cmp(&(b.due_at, &b.id)));
        found.truncate(query.limit);
        Ok(found)
    }
}

const COUNT_PREFIX: &str = "count|";
const AMOUNT_PREFIX: &str = "amount|";

/// The board counters an owner's item in one currency holds, as the domain reads them. A
/// counter item of one bucket, as written before a currency's counters shared an item, is
/// read too: the domain adds up counters of the same bucket and currency.
fn board_counts_of(item: &Item) -> Vec<BoardCount> {
    let number = |name: &str| {
        item.get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let currency = text("currency");
    let count = |bucket: String, count_name: &str, amount_name: &str| BoardCount {
        bucket,
        currency: (!currency.is_empty()).then(|| currency.clone()),
        count: number(count_name),
        amount: number(amount_name),
    };
    if item.contains_key("bucket") {
        return vec![count(text("bucket"), "count", "amount")];
    }
    item.keys()
        .filter_map(|name| {
            let bucket = name.strip_prefix(COUNT_PREFIX)?;
            Some(count(bucket.to_owned(), name, &format!("{AMOUNT_PREFIX}{bucket}")))
        })
        .collect()
}
