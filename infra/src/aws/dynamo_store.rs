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
//! | operations by rail reference, item reference or beneficiary id (of a customer) | `PK = FIND#<kind>#<value>`, `SK = <customer>#<op id>` (`begins_with <customer>#`), written after their operation or transaction |
//! | transactions of an operation | by the ids its items name (`TXN#<id>`; `GSI1PK = OPTXNS#<op>` on those written earlier, read by nothing) |
//! | transactions due a status poll | `GSI2PK = POLL#<shard>`, `GSI2SK = <due unix s, padded>#<id>` (sparse) |
//! | operations pending approval with a ttl, by expiry | marker `PK = APPRDUE#<op id>`, `SK = APPRDUE`; `GSI2PK = APPRDUE#<shard>`, `GSI2SK = <expiry unix s, padded>#<op id>` (deleted when it leaves pending approval) |
//! | transactions of a rail confirmed on a day, by time | `GSI3PK = RAILDAY#<rail>#<YYYY-MM-DD>`, `GSI3SK = <confirmed unix ms, padded>#<id>` (sparse) |
//! | how far a rail's sweep for a return check got | `PK = RETSWEEP#<rail>#<check>` |
//! | reconciliation by id (fixed by its statement) | `PK = REC#<id>` (its lines are a blob) |
//! | event by id, and every event (platform), newest first | `PK = EVTS#<shard>`, `SK = <event id>` (written before 2026-11-26: `PK = EVT#<id>`, listed by `GSI3PK = EVTS#<shard>`) |
//! | events of a customer, newest first | `GSI1PK = CUSEVTS#<customer>` |
//! | webhook endpoints of a customer (or the platform's) | `GSI1PK = CUSWHE#<customer or PLATFORM>` |
//! | every customer, newest first (in one status) | `GSI1PK = CUSTOMERS` (`GSI2PK = CUSTOMERS#<status>`) |
//! | how many live endpoints a customer (or the platform) keeps | `PK = WHEROSTER#<customer or PLATFORM>` (versioned; the list is an index, which may lag its writes) |
//! | deliveries of an operation's events, by event | `GSI1PK = OPWHD#<operation>`, `GSI1SK = <event id>#<delivery id>` |
//! | deliveries of an event | its operation's, `begins_with <event id>#`; of no operation (or made before deliveries were kept by operation) `GSI1PK = EVTWHD#<event>` |
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
//!
//! This module holds the table, its client and the commit; [`writes`] turns each write into
//! items, [`reads`] reads items and lists, [`ports`], [`desk`] and [`idempotency`] are the
//! domain's store ports on them, and [`units`] counts what writes cost for the benchmark.

mod desk;
mod faults;
mod idempotency;
mod key_first;
mod limits;
mod merged;
mod meter;
mod outbox;
mod ports;
mod reads;
mod tallies;
mod units;
mod writes;

use desk::{AMOUNT_PREFIX, COUNT_PREFIX};
pub use faults::Faults;
use idempotency::stored_response;
pub use key_first::AfterKeyRecord;
pub use meter::Meter;
pub use outbox::OutboxRecord;
use reads::{each_partition, Filter, Partition};
use units::{attribute_bytes, kind_of};

use super::{documents, keys};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, Put, ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
    TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use ops_domain::access::{Customer, User};
use ops_domain::ids::UlidGenerator;
use ops_domain::ports::{Changeset, Commit, StoreError, Write};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// DynamoDB takes at most 100 writes in one transaction.
pub const MAX_WRITES: usize = 100;

type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    sort_keys: Arc<UlidGenerator>,
    /// What it counts of its own requests and writes, for the benchmark and the tests.
    meter: Arc<Meter>,
    /// Where the kill tests make it die, stall or fail part-way.
    faults: Arc<Faults>,
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
pub(super) type IndexImages = HashMap<(String, String), Vec<Option<String>>>;

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
            meter: Arc::default(),
            faults: Arc::default(),
            filtered_read_budget: Arc::new(AtomicUsize::new(FILTERED_READ_BUDGET)),
        }
    }

    /// What the store has counted of its requests and writes.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// The kill tests' hooks.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Filtered lists read at most `entries` a partition and request (tests: a short history
    /// shows what a long one does).
    pub fn limit_filtered_reads(&self, entries: usize) {
        self.filtered_read_budget.store(entries.max(1), Ordering::Relaxed);
    }

    /// One conditional `PutItem`: as atomic as a transaction of one, at half the write units.
    async fn put_alone(&self, put: Put) -> Result<(), StoreError> {
        self.meter.single_write();
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
}

pub use keys::SHARDS;
/// The table's global secondary indexes, each keyed `<name>PK`, `<name>SK`.
pub const INDEXES: [&str; 4] = ["GSI1", "GSI2", "GSI3", "GSI4"];

/// The attributes every index projects besides the keys: what list filters read. An index
/// entry is then small (one write unit), and a write that changes neither its keys nor these
/// leaves it alone; lists read the items themselves after the query ([`DynamoStore::query`]).
pub const PROJECTED: [&str; 4] = ["type", "queue", "status", "customer_id"];

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
        self.commit_finding(self.changeset_items(&writes), finding_items(&writes))
            .await
    }

    async fn commit_derived_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        if !self.faults.derived_commit_allowed() {
            let refused = unavailable("derived commits refused (a kill test)");
            return vec![Err(refused); changesets.len()];
        }
        self.commit_merged(changesets).await
    }
}

/// The entries of the operations' lookup that `writes` make: each names a value an operation's
/// items or a transaction's rail reference carries.
pub(super) fn finding_items(writes: &[&Write]) -> Vec<Item> {
    let findings = writes.iter().flat_map(|write| match write {
        Write::InsertOperation(op) => op.findings(),
        Write::InsertTransaction(t) | Write::UpdateTransaction(t) => t.finding().into_iter().collect(),
        _ => vec![],
    });
    findings.map(|f| writes::finding_item(&f)).collect()
}

impl DynamoStore {
    /// Writes `items` together with the lookup's entries they make: in their transaction when
    /// they fit it, else right after it (a lookup entry is an index, not a condition).
    pub(super) async fn commit_finding(
        &self,
        mut items: Vec<TransactWriteItem>,
        findings: Vec<Item>,
    ) -> Result<(), StoreError> {
        if findings.is_empty() {
            return self.commit_items(items).await;
        }
        if items.len() + findings.len() <= MAX_WRITES {
            items.extend(findings.into_iter().map(|finding| self.put(finding, None, vec![])));
            return self.commit_items(items).await;
        }
        self.commit_items(items).await?;
        self.put_all(findings).await
    }

    /// Writes `items` together: one conditional write alone, or a transaction.
    async fn commit_items(&self, items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
        if items.len() > MAX_WRITES {
            return Err(unavailable(format!(
                "a changeset of {} writes exceeds DynamoDB's {MAX_WRITES}",
                items.len()
            )));
        }
        self.meter.request();
        let transactional = items.len() > 1;
        let mut units = 0;
        let mut written = vec![];
        for item in &items {
            let (item_units, images) = self.write_units_of(item, transactional);
            self.meter.units(kind_of(item), item_units);
            units += item_units;
            written.extend(images);
        }
        let outcome = self.send_changeset(items).await;
        match &outcome {
            Ok(()) => {
                if let Some(images) = self.meter.index_images().as_mut() {
                    images.extend(written);
                }
            }
            Err(StoreError::Conflict) => {
                self.meter.conflicted(units);
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
        self.meter.transaction(items.len());
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
