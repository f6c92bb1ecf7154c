//! The store port on a SQLite file. Each entity is one JSON document plus the columns its
//! lookups need; a changeset is one savepoint of a `BEGIN IMMEDIATE … COMMIT` that it shares
//! with the changesets waiting for the writer beside it (group commit).

use crate::page_start;
use async_trait::async_trait;
use futures_util::future::join_all;
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
    ApiKeyId, CustomerId, DeliveryId, EventId, OperationId, ScheduleId, TransactionId, UserId, WebhookEndpointId,
};
use ops_domain::ledger::{Account, AccountQuery, LedgerStore, Movement};
use ops_domain::money::Currency;
use ops_domain::operations::{Operation, OperationQuery, OperationStore};
use ops_domain::ports::{AuditEntry, Changeset, Commit, Listed, StoreError, Write};
use ops_domain::reconciliations::{Reconciliation, ReconciliationStore};
use ops_domain::schedules::{Occurrence, Schedule, ScheduleQuery, ScheduleStatus, ScheduleStore};
use ops_domain::transactions::{ReturnSweep, Transaction, TransactionStore};
use ops_domain::webhooks::{Delivery, DeliveryStatus, EndpointRoster, EventQuery, WebhookEndpoint, WebhookStore};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, body TEXT NOT NULL);
-- On the document, as api_keys_by_owner is, so older files need no migration.
CREATE INDEX IF NOT EXISTS customers_by_status ON customers (json_extract(body, '$.status'), id);
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS users_by_customer ON users (customer_id, id);
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL UNIQUE, body TEXT NOT NULL);
-- A customer's keys ('' for the platform's), on the document so older files need no migration.
CREATE INDEX IF NOT EXISTS api_keys_by_owner ON api_keys (coalesce(json_extract(body, '$.customer_id'), ''), id);
CREATE TABLE IF NOT EXISTS operations (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, status TEXT NOT NULL, type TEXT NOT NULL,
    version INTEGER NOT NULL, body TEXT NOT NULL);
-- An index per list key (the customer, the status, both). `type` is no key: a create wrote a
-- dozen more pages for its indexes (an insert in the middle of an index rebalances three
-- leaves), so a type filter reads a bounded stretch instead (FILTERED_READ_BUDGET).
DROP INDEX IF EXISTS operations_by_customer_type;
DROP INDEX IF EXISTS operations_by_type;
DROP INDEX IF EXISTS events_by_customer_type;
DROP INDEX IF EXISTS events_by_type;
CREATE INDEX IF NOT EXISTS operations_by_customer ON operations (customer_id, id);
CREATE INDEX IF NOT EXISTS operations_by_customer_status ON operations (customer_id, status, id);
CREATE INDEX IF NOT EXISTS operations_by_status ON operations (status, id);
-- Neither audit entries nor events are ever deleted, so a new row's seq is always past every
-- one before it without AUTOINCREMENT, whose counter row was one more page each create wrote
-- (files made before keep it).
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, entity_id TEXT NOT NULL, operation_id TEXT, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_by_operation ON audit (operation_id, seq);
-- Entries of an entity outside any operation (an endpoint's, a key's): few, so the index
-- costs an operation's writes nothing.
CREATE INDEX IF NOT EXISTS audit_by_entity ON audit (entity_id, seq) WHERE operation_id IS NULL;
CREATE TABLE IF NOT EXISTS workflows (
    owner TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (owner, name));
CREATE TABLE IF NOT EXISTS idempotency (
    scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    status INTEGER, response BLOB, locked_until INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (scope, key));
-- No query reads records by expiry (a claim replaces an expired one in place), so no index
-- keeps them in that order: it was one more page every create wrote.
DROP INDEX IF EXISTS idempotency_by_expiry;
CREATE TABLE IF NOT EXISTS transactions (
    id TEXT PRIMARY KEY, operation_id TEXT NOT NULL, status TEXT NOT NULL, next_poll_at INTEGER,
    version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS transactions_by_operation ON transactions (operation_id, id);
CREATE INDEX IF NOT EXISTS transactions_due ON transactions (next_poll_at) WHERE next_poll_at IS NOT NULL;
-- The event log is also the change stream: consumers read it in seq order from a checkpoint.
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, customer_id TEXT NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_customer ON events (customer_id, seq);
CREATE TABLE IF NOT EXISTS stream_checkpoints (subscription TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id TEXT PRIMARY KEY, customer_id TEXT, version INTEGER NOT NULL, body TEXT NOT NULL);
-- The live endpoints by owner ('' for the platform): what every event's dispatch reads.
CREATE INDEX IF NOT EXISTS live_endpoints_by_owner ON webhook_endpoints (coalesce(customer_id, ''), id)
    WHERE json_extract(body, '$.status') <> 'deleted';
-- Each owner's count of live endpoints ('' for the platform), moved by every create and delete.
CREATE TABLE IF NOT EXISTS endpoint_rosters (
    owner TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, event_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_by_event ON deliveries (event_id);
-- Failed deliveries awaiting a follow-up, by endpoint: a row is written when a delivery fails
-- and deleted when its follow-up is, so a delivered webhook's writes touch nothing here.
CREATE TABLE IF NOT EXISTS failed_deliveries (
    endpoint_id TEXT NOT NULL, event_id TEXT NOT NULL, delivery_id TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, event_id, delivery_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY, value TEXT NOT NULL, stored_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, body TEXT NOT NULL,
    visible_at INTEGER NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS queue_messages_visible ON queue_messages (queue, visible_at);
-- `due_at` is the next run of an active schedule, else NULL: the embedded timer's index.
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, visible INTEGER NOT NULL, due_at INTEGER,
    version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS schedules_by_customer ON schedules (customer_id, id) WHERE visible = 1;
CREATE INDEX IF NOT EXISTS schedules_visible ON schedules (id) WHERE visible = 1;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS occurrences (
    schedule_id TEXT NOT NULL, scheduled_at INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (schedule_id, scheduled_at));
-- The balances live in columns (the guard reads them) and in the document (lists read it).
CREATE TABLE IF NOT EXISTS accounts (
    id TEXT PRIMARY KEY, holder TEXT NOT NULL, currency TEXT NOT NULL, customer_id TEXT,
    posted INTEGER NOT NULL DEFAULT 0, pending_debits INTEGER NOT NULL DEFAULT 0,
    pending_credits INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, UNIQUE (holder, currency));
CREATE INDEX IF NOT EXISTS accounts_by_customer ON accounts (customer_id, id);
CREATE INDEX IF NOT EXISTS accounts_by_currency ON accounts (currency, id);
CREATE TABLE IF NOT EXISTS movements (id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS movement_entries (
    account_id TEXT NOT NULL, movement_id TEXT NOT NULL, PRIMARY KEY (account_id, movement_id));
-- At most one item not done per queue and subject; lists go oldest due first.
CREATE TABLE IF NOT EXISTS work_items (
    id TEXT PRIMARY KEY, queue TEXT NOT NULL, status TEXT NOT NULL, customer_id TEXT NOT NULL,
    assignee TEXT, subject_id TEXT NOT NULL, due_at INTEGER NOT NULL, version INTEGER NOT NULL,
    body TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS work_items_open_subject ON work_items (queue, subject_id) WHERE status <> 'done';
CREATE INDEX IF NOT EXISTS work_items_by_queue ON work_items (queue, status, due_at, id);
CREATE INDEX IF NOT EXISTS work_items_by_customer ON work_items (customer_id, queue, status, due_at, id);
CREATE INDEX IF NOT EXISTS work_items_by_assignee ON work_items (assignee, due_at, id) WHERE assignee IS NOT NULL;
-- The board: each operation's place, and counters per customer (the platform's board adds
-- them up).
CREATE TABLE IF NOT EXISTS board_entries (operation_id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS board_counts (
    owner TEXT NOT NULL, bucket TEXT NOT NULL, currency TEXT NOT NULL,
    count INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (owner, bucket, currency));
-- Files written before 2026-11-26 also kept the platform's sums, which no write updates now.
DELETE FROM board_counts WHERE owner = 'PLATFORM';
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS files_by_customer ON files (customer_id, id);
-- Which file a customer's bytes (by SHA-256) were uploaded as.
CREATE TABLE IF NOT EXISTS file_digests (
    customer_id TEXT NOT NULL, sha256 TEXT NOT NULL, file_id TEXT NOT NULL, PRIMARY KEY (customer_id, sha256));
-- A rail's transactions by the day they were confirmed (statements are matched against them);
-- on the document, so older files need no migration.
CREATE INDEX IF NOT EXISTS transactions_confirmed ON transactions (
    json_extract(body, '$.rail'), substr(json_extract(body, '$.confirmed_at'), 1, 10), id)
    WHERE json_extract(body, '$.confirmed_at') IS NOT NULL;
CREATE TABLE IF NOT EXISTS reconciliations (id TEXT PRIMARY KEY, body TEXT NOT NULL);
-- Return checks sweep a rail's confirmed transactions by confirmation time, each check from
-- where it got to.
CREATE INDEX IF NOT EXISTS transactions_confirmed_time ON transactions (
    json_extract(body, '$.rail'), unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id)
    WHERE json_extract(body, '$.confirmed_at') IS NOT NULL;
CREATE TABLE IF NOT EXISTS return_sweeps (
    rail TEXT NOT NULL, check_index INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (rail, check_index));
";

#[derive(Clone)]
pub struct SqliteStore {
    /// The one writer: every changeset, in order.
    connection: Arc<Mutex<Connection>>,
    /// Read-only connections to the same file: WAL lets them read the last commit while the
    /// writer waits for the disk, so a request's lookups do not queue behind another's commit.
    readers: Arc<Readers>,
    /// Changesets waiting for the writer. Whoever holds the writer next commits all of them
    /// in one transaction (group commit): changesets that arrive while one waits for the disk
    /// share the next sync instead of each waiting for one of their own.
    waiting: Arc<Mutex<Vec<Waiting>>>,
    /// Rows a list filtered by a column no index keys reads at most
    /// ([`crate::FILTERED_READ_BUDGET`]; smaller in tests).
    filtered_read_budget: Arc<AtomicUsize>,
}

/// A changeset and the caller waiting for its outcome.
type Waiting = (Changeset, tokio::sync::oneshot::Sender<Result<(), StoreError>>);

/// A rail's transactions confirmed in a window, from a sweep's position (a time and an id),
/// oldest first. The scalar window bounds are what let SQLite seek the index at the sweep's
/// position (a row-value bound alone leaves it reading from the rail's first confirmation).
/// An entity's newest audit entries outside any operation (`?2` of them), oldest first.
const ENTITY_HISTORY: &str =
    "SELECT body FROM (SELECT seq, body FROM audit WHERE entity_id = ?1 AND operation_id IS NULL
     ORDER BY seq DESC LIMIT ?2) ORDER BY seq";

/// The platform's live endpoints and customer `?1`'s, by id.
const LIVE_ENDPOINTS: &str = "SELECT body FROM webhook_endpoints
     WHERE coalesce(customer_id, '') IN ('', ?1) AND json_extract(body, '$.status') <> 'deleted' ORDER BY id";

/// Every customer, newest first, before `?1` (a page's start), at most `?2`.
const CUSTOMERS: &str = "SELECT body FROM customers WHERE id < ?1 ORDER BY id DESC LIMIT ?2";

/// The customers in one status (`?1`), newest first, before `?2`, at most `?3`.
const CUSTOMERS_IN_STATUS: &str = "SELECT body FROM customers WHERE json_extract(body, '$.status') = ?1 AND id < ?2
     ORDER BY id DESC LIMIT ?3";

/// A customer's users, newest first, before `?2` (a page's start), at most `?3`.
const USERS_OF: &str = "SELECT body FROM users WHERE customer_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3";

/// A customer's keys (`''`: the platform's), newest first, before `?2`, at most `?3`.
const API_KEYS_OF: &str = "SELECT body FROM api_keys WHERE coalesce(json_extract(body, '$.customer_id'), '') = ?1
     AND id < ?2 ORDER BY id DESC LIMIT ?3";

/// An endpoint's failed deliveries awaiting a follow-up (`?4` of them), by event, after
/// event `?2`'s delivery `?3` (`''` for the first page: ids are never empty).
const FAILED_DELIVERIES: &str = "SELECT d.body FROM failed_deliveries f JOIN deliveries d ON d.id = f.delivery_id
     WHERE f.endpoint_id = ?1 AND (f.event_id, f.delivery_id) > (?2, ?3)
     ORDER BY f.event_id, f.delivery_id LIMIT ?4";

const CONFIRMED_BETWEEN: &str = "SELECT body FROM transactions WHERE json_extract(body, '$.confirmed_at') IS NOT NULL
     AND json_extract(body, '$.rail') = ?1
     AND unixepoch(json_extract(body, '$.confirmed_at'), 'subsec') BETWEEN unixepoch(?2, 'subsec') AND unixepoch(?4, 'subsec')
     AND (unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id) > (unixepoch(?2, 'subsec'), ?3)
     ORDER BY unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id LIMIT ?5";

/// Idle read-only connections, opened as needed and kept for the next read.
struct Readers {
    path: std::path::PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// Read connections kept open when idle; more may be open while reads run side by side.
const IDLE_READERS: usize = 16;
/// A new file's page size: BENCHMARKS.md's local creates, one client (SQLite's default is 4096).
const PAGE_SIZE: i64 = 1024;
/// The WAL's length at which a commit copies it into the file itself (a backstop: the
/// checkpointer does it first; SQLite's default is 1,000 pages, inside whichever commit
/// crosses it, which then takes milliseconds).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 20_000;
/// What the WAL file is cut back to when it starts over: above the most the backstop lets it
/// hold, so that a WAL starting over writes into the blocks it has. Cut to less (it was
/// 16 MiB), a WAL that grew past it again under a steady stream of commits had its file
/// extended in a quarter of them at one client, and each such commit's sync wrote the file's
/// inode as well (`ext4_write_inode` under `fdatasync`; BENCHMARKS.md, 2026-11-28 third).
const WAL_SIZE_LIMIT: i64 = 32 << 20;
const _: () = assert!(WAL_AUTOCHECKPOINT_PAGES * (PAGE_SIZE + 24) < WAL_SIZE_LIMIT);
/// Statements each connection keeps prepared: every write a changeset can hold and the
/// common reads (rusqlite's default keeps 16).
const STATEMENT_CACHE: usize = 128;

impl Readers {
    fn take(&self) -> Result<Connection, StoreError> {
        if let Some(connection) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(connection);
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(&self.path, flags).map_err(unavailable)?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(unavailable)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(connection)
    }

    fn run<T>(&self, work: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let connection = self.take()?;
        let result = work(&connection);
        self.give_back(connection);
        result
    }

    fn give_back(&self, connection: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < IDLE_READERS {
            idle.push(connection);
        }
    }
}

/// A condition of the changeset failed: roll back and report a conflict.
struct ConditionFailed;

enum TxError {
    Condition,
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                TxError::Condition
            }
            other => TxError::Sql(other),
        }
    }
}

impl From<ConditionFailed> for TxError {
    fn from(_: ConditionFailed) -> Self {
        TxError::Condition
    }
}

pub(crate) fn unavailable(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
    StoreError::unavailable(e)
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("domain objects always serialize")
}

fn owner_key(owner: &WorkflowOwner) -> String {
    match owner {
        WorkflowOwner::Builtin => "builtin".into(),
        WorkflowOwner::Platform => "platform".into(),
        WorkflowOwner::Customer(id) => format!("customer:{id}"),
    }
}

/// How often the checkpointer copies committed pages from the WAL into the database file
/// while commits keep coming. Under a steady stream of them the WAL cannot start over (a copy
/// never catches up with it), so it grows to `wal_autocheckpoint` and the commit that crosses
/// it copies whatever the checkpointer has not yet copied, while every write waits behind
/// it. At 200 ms apart that was up to 20 MB, and a create's p99 at 64 clients 26-41 ms; at
/// 25 ms it is 19-23 ms, one client's p50 no slower (`ops-bench limit`, alternating).
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(25);
/// How often it looks when nothing was committed since it last did.
const IDLE_CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// Copies committed pages from the WAL into the database file on a thread of its own, off
/// every commit's path (a passive checkpoint waits for no one and no one waits for it),
/// until the store's writer is dropped.
fn spawn_checkpointer(path: &Path, writer: std::sync::Weak<Mutex<Connection>>) -> Result<(), StoreError> {
    let connection = Connection::open(path).map_err(unavailable)?;
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unavailable)?;
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            // The WAL's length in frames at the last checkpoint: unchanged means no commit since.
            let mut last_frames = None;
            let mut interval = CHECKPOINT_INTERVAL;
            while writer.strong_count() > 0 {
                std::thread::sleep(interval);
                match connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get::<_, i64>(1)) {
                    Ok(frames) => {
                        let committed_since = last_frames.replace(frames) != Some(frames);
                        interval = if committed_since {
                            CHECKPOINT_INTERVAL
                        } else {
                            IDLE_CHECKPOINT_INTERVAL
                        };
                    }
                    Err(error) => tracing::warn!(%error, "WAL checkpoint failed; the next one tries again"),
                }
            }
        })
        .map_err(unavailable)?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(unavailable)?;
        }
        // The writer appends a commit's WAL frames in one system call (see `wal_batching`);
        // readers and the checkpointer only read, with SQLite's own VFS.
        let connection = if super::wal_batching::register() {
            Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), super::wal_batching::NAME)
        } else {
            Connection::open(path)
        }
        .map_err(unavailable)?;
        // WAL lets readers run beside the writer; FULL sync makes an acknowledged write
        // survive a crash of the machine, not only of the process. A commit appends every
        // page it changed to the WAL (a create changes one in each of about fifteen b-trees)
        // and the sync's time grows with those bytes: a new file gets small pages (a file
        // made before keeps its own; SQLite fixes the size when it writes the first page).
        connection
            .execute_batch(&format!(
                "PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;"
            ))
            .map_err(unavailable)?;
        connection.execute_batch(SCHEMA).map_err(unavailable)?;
        add_missing_columns(&connection)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // The checkpointer below copies the WAL into the file; a commit does it itself only
        // if the WAL has grown far past that.
        connection
            .execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}; PRAGMA journal_size_limit = {WAL_SIZE_LIMIT};"
            ))
            .map_err(unavailable)?;
        let connection = Arc::new(Mutex::new(connection));
        spawn_checkpointer(path, Arc::downgrade(&connection))?;
        Ok(SqliteStore {
            connection,
            readers: Arc::new(Readers {
                path: path.to_owned(),
                idle: Mutex::default(),
            }),
            waiting: Arc::default(),
            filtered_read_budget: Arc::new(AtomicUsize::new(crate::FILTERED_READ_BUDGET)),
        })
    }

    /// Filtered lists read at most `rows` a request (tests: a short history shows what a long
    /// one does).
    pub fn limit_filtered_reads(&self, rows: usize) {
        self.filtered_read_budget.store(rows.max(1), Ordering::Relaxed);
    }

    fn filtered_read_budget(&self) -> usize {
        self.filtered_read_budget.load(Ordering::Relaxed)
    }

    /// Runs `work`, which only reads, on a read connection off the async runtime: it sees
    /// every changeset committed before it starts. For reads of many rows (lists, scans).
    async fn read<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = self.readers.clone();
        tokio::task::spawn_blocking(move || readers.run(work))
            .await
            .map_err(unavailable)?
    }

    /// Runs `work`, a lookup of one row by its key, on a read connection in place. Such a
    /// lookup takes microseconds and a WAL reader never waits for the writer, so it costs
    /// less than the hop to a blocking thread and back, which a create pays once per lookup.
    ///
    /// The writer's connection is taken when it is free: its page cache holds the pages it
    /// committed, where a reader's cache is emptied by every commit it did not make, so a
    /// request's first lookup after a commit reads its pages again (BENCHMARKS.md, 2026-11-28
    /// fourth). When the writer is busy (a commit waiting for the disk), a reader does.
    fn look_up<T>(&self, work: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        match self.connection.try_lock() {
            Ok(writer) => work(&writer),
            Err(_) => self.readers.run(work),
        }
    }

    /// Runs `work` on the connection off the async runtime.
    pub(crate) async fn with<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let connection = self.connection.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = connection.lock().unwrap_or_else(|e| e.into_inner());
            work(&mut guard)
        })
        .await
        .map_err(unavailable)?
    }

    /// The documents `sql` selects for `key` (`?1`), at most `limit` (`?2`).
    async fn documents_up_to<T>(&self, sql: &'static str, key: String, limit: usize) -> Result<Vec<T>, StoreError>
    where
        T: DeserializeOwned + Send + 'static,
    {
        self.documents_of(sql, vec![key], limit).await
    }

    /// The documents `sql` selects for `keys` (`?1`, `?2` …), at most `limit` (the last
    /// parameter).
    async fn documents_of<T>(&self, sql: &'static str, keys: Vec<String>, limit: usize) -> Result<Vec<T>, StoreError>
    where
        T: DeserializeOwned + Send + 'static,
    {
        self.read(move |c| {
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            let parameters = keys
                .into_iter()
                .map(rusqlite::types::Value::Text)
                .chain([rusqlite::types::Value::Integer(limit as i64)]);
            let rows = statement
                .query_map(rusqlite::params_from_iter(parameters), |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }

    async fn documents<T>(&self, sql: &'static str, key: String) -> Result<Vec<T>, StoreError>
    where
        T: DeserializeOwned + Send + 'static,
    {
        self.read(move |c| {
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            let rows = statement
                .query_map([key], |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }

    /// Up to `limit` events after `subscription`'s checkpoint, in stream order.
    pub async fn stream_batch(
        &self,
        subscription: &'static str,
        limit: usize,
    ) -> Result<Vec<(i64, Event)>, StoreError> {
        let checkpoint = self.stream_checkpoint(subscription).await?;
        self.stream_after(checkpoint, limit).await
    }

    /// Where `subscription`'s checkpoint stands (0 before it first moves).
    pub async fn stream_checkpoint(&self, subscription: &'static str) -> Result<i64, StoreError> {
        self.look_up(|c| {
            c.prepare_cached("SELECT seq FROM stream_checkpoints WHERE subscription = ?1")
                .map_err(unavailable)?
                .query_row([subscription], |row| row.get(0))
                .optional()
                .map_err(unavailable)
        })
        .map(Option::unwrap_or_default)
    }

    /// Up to `limit` events after `seq`, in stream order. Every event up to the last one read
    /// is among them: an event's `seq` is the next after every one committed before it, and
    /// commits are one at a time.
    pub async fn stream_after(&self, seq: i64, limit: usize) -> Result<Vec<(i64, Event)>, StoreError> {
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT seq, body FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2")
                .map_err(unavailable)?;
            let rows = statement
                .query_map(params![seq, limit as i64], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(unavailable)?;
            rows.map(|row| {
                let (seq, body) = row.map_err(unavailable)?;
                Ok((seq, serde_json::from_str(&body).map_err(unavailable)?))
            })
            .collect()
        })
        .await
    }

    /// Runs `work` as [`with`](Self::with) does, its commit not waiting for the disk: for
    /// writes that acknowledge nothing and whose loss in a power cut only means work done
    /// again (an idempotency claim, a stream checkpoint, a queue message received or
    /// deleted). WAL appends in order, so the next `FULL` commit makes them durable with it;
    /// until then they are visible, and a crash of the process alone loses nothing.
    pub(crate) async fn with_unsynced<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.with(move |c| {
            c.execute_batch("PRAGMA synchronous = NORMAL").map_err(unavailable)?;
            let result = work(c);
            c.execute_batch("PRAGMA synchronous = FULL").map_err(unavailable)?;
            result
        })
        .await
    }

    /// Moves `subscription`'s checkpoint to `seq` (everything up to it is handled).
    pub async fn advance_checkpoint(&self, subscription: &'static str, seq: i64) -> Result<(), StoreError> {
        // A checkpoint lost in a power cut means events handled again, which every consumer
        // takes as it takes a redelivery.
        self.with_unsynced(move |c| {
            c.run(
                "INSERT INTO stream_checkpoints (subscription, seq) VALUES (?1, ?2)
                 ON CONFLICT (subscription) DO UPDATE SET seq = MAX(seq, excluded.seq)",
                params![subscription, seq],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    /// Deletes up to `limit` idempotency records whose retention ended by `now` (DynamoDB's
    /// TTL does this on AWS), and answers how many. Rows are numbered as keys are claimed and
    /// every claim is kept for the same [`RETENTION`], so the oldest rows are the expired
    /// ones: it looks at no more than the `2 × limit` oldest, so a sweep costs the same however
    /// large the table is. A record reused in place keeps its old number and is reached once
    /// the expired rows before it are gone.
    pub async fn forget_expired_idempotency(&self, now: OffsetDateTime, limit: usize) -> Result<usize, StoreError> {
        // Losing a deletion in a power cut only means deleting it again.
        self.with_unsynced(move |c| {
            c.run(
                "DELETE FROM idempotency WHERE rowid IN (
                     SELECT rowid FROM (SELECT rowid, expires_at FROM idempotency ORDER BY rowid LIMIT ?2)
                     WHERE expires_at <= ?1 LIMIT ?3)",
                params![now.unix_timestamp(), 2 * limit as i64, limit as i64],
            )
            .map_err(unavailable)
        })
        .await
    }

    async fn document<T>(&self, sql: &'static str, key: String) -> Result<Option<T>, StoreError>
    where
        T: DeserializeOwned + Send + 'static,
    {
        self.document_by(sql, [key])
    }

    /// The document of the one row `sql` selects by its key, looked up in place.
    fn document_by<T: DeserializeOwned>(&self, sql: &str, key: impl rusqlite::Params) -> Result<Option<T>, StoreError> {
        self.text_by(sql, key)?
            .map(|body| serde_json::from_str(&body).map_err(unavailable))
            .transpose()
    }

    /// The text of the one row `sql` selects by its key, looked up in place.
    fn text_by(&self, sql: &str, key: impl rusqlite::Params) -> Result<Option<String>, StoreError> {
        self.look_up(|c| {
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            statement
                .query_row(key, |row| row.get(0))
                .optional()
                .map_err(unavailable)
        })
    }
}

/// A newest-first list query with only the filters given, so SQLite can seek the index
/// that matches them (a `?1 IS NULL OR …` form would make it walk the whole table).
struct List {
    table: &'static str,
    order: &'static str,
    clauses: Vec<&'static str>,
    values: Vec<Value>,
    limit: usize,
    /// A filter on a column no index keys (`type`): checked on each row the keyed filters
    /// find, at most `budget` rows a read.
    unkeyed: Option<Unkeyed>,
}

struct Unkeyed {
    column: &'static str,
    value: String,
    budget: usize,
}

impl List {
    fn new(table: &'static str, order: &'static str, limit: usize) -> Self {
        Self {
            table,
            order,
            clauses: vec![],
            values: vec![],
            limit,
            unkeyed: None,
        }
    }

    /// Adds `clause` (with one `?`) when `value` is given.
    fn filter(mut self, clause: &'static str, value: Option<String>) -> Self {
        if let Some(value) = value {
            self.clauses.push(clause);
            self.values.push(Value::Text(value));
        }
        self
    }

    /// Keeps the rows whose `column` is `value`, when it is given, reading at most `budget`
    /// rows: a page that found fewer than its limit by then says where it read up to.
    fn filter_unkeyed(mut self, column: &'static str, value: Option<String>, budget: usize) -> Self {
        self.unkeyed = value.map(|value| Unkeyed { column, value, budget });
        self
    }

    /// Adds `clause` (with no `?`) always.
    fn always(mut self, clause: &'static str) -> Self {
        self.clauses.push(clause);
        self
    }

    fn sql(&self) -> String {
        // With an unkeyed filter, a row's id and, only where it matches, its body (a row that
        // does not match costs no read of its body's overflow pages).
        let mut sql = match &self.unkeyed {
            None => format!("SELECT body FROM {}", self.table),
            Some(unkeyed) => format!(
                "SELECT id, CASE WHEN {} = ? THEN body END FROM {}",
                unkeyed.column, self.table
            ),
        };
        if !self.clauses.is_empty() {
            sql += &format!(" WHERE {}", self.clauses.join(" AND "));
        }
        sql + &format!(" ORDER BY {} DESC LIMIT ?", self.order)
    }

    /// The statement's values, in the order of its `?`s.
    fn parameters(&self) -> Vec<Value> {
        let first = self.unkeyed.as_ref().map(|u| Value::Text(u.value.clone()));
        let rows = self.unkeyed.as_ref().map_or(self.limit, |u| u.budget);
        first
            .into_iter()
            .chain(self.values.iter().cloned())
            .chain([Value::Integer(rows as i64)])
            .collect()
    }

    fn run<T: DeserializeOwned>(&self, c: &Connection) -> Result<Listed<T>, StoreError> {
        let mut statement = c.prepare_cached(&self.sql()).map_err(unavailable)?;
        let parse = |body: &str| serde_json::from_str(body).map_err(unavailable);
        let mut rows = statement
            .query(rusqlite::params_from_iter(self.parameters()))
            .map_err(unavailable)?;
        let Some(unkeyed) = &self.unkeyed else {
            let mut items = vec![];
            while let Some(row) = rows.next().map_err(unavailable)? {
                items.push(parse(&row.get::<_, String>(0).map_err(unavailable)?)?);
            }
            return Ok(Listed::complete(items));
        };
        let (mut items, mut read, mut last) = (vec![], 0, None);
        while let Some(row) = rows.next().map_err(unavailable)? {
            read += 1;
            if let Some(body) = row.get::<_, Option<String>>(1).map_err(unavailable)? {
                items.push(parse(&body)?);
                if items.len() == self.limit {
                    return Ok(Listed::complete(items));
                }
            }
            last = Some(row.get::<_, String>(0).map_err(unavailable)?);
        }
        let read_up_to = last.filter(|_| read == unkeyed.budget);
        Ok(Listed { items, read_up_to })
    }

    /// Everything a list with keyed filters only finds.
    fn all<T: DeserializeOwned>(&self, c: &Connection) -> Result<Vec<T>, StoreError> {
        debug_assert!(self.unkeyed.is_none(), "a bounded read may stop short");
        self.run(c).map(|listed| listed.items)
    }
}

/// Statements run through the connection's statement cache: the writes are the same few
/// dozen every time, and parsing one costs more than running it.
pub(crate) trait CachedExecute {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;

    fn row<T, P, F>(&self, sql: &str, params: P, read: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl CachedExecute for Connection {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn row<T, P, F>(&self, sql: &str, params: P, read: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, read)
    }
}

fn apply(tx: &Connection, write: &Write) -> Result<(), TxError> {
    match write {
        Write::InsertCustomer(c) => {
            tx.run(
                "INSERT INTO customers (id, body) VALUES (?1, ?2)",
                params![c.id.as_str(), json(c)],
            )?;
        }
        Write::InsertUser(u) => {
            tx.run(
                "INSERT INTO users (id, customer_id, body) VALUES (?1, ?2, ?3)",
                params![u.id.as_str(), u.customer_id.as_str(), json(u)],
            )?;
        }
        Write::UpdateCustomer(c) => {
            // A customer stored before versions existed is version 1.
            let changed = tx.run(
                "UPDATE customers SET body = ?2 WHERE id = ?1 AND coalesce(json_extract(body, '$.version'), 1) = ?3",
                params![c.id.as_str(), json(c), c.version as i64 - 1],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::UpdateUser(u) => {
            // A user stored before versions existed is version 1.
            let changed = tx.run(
                "UPDATE users SET body = ?2 WHERE id = ?1 AND coalesce(json_extract(body, '$.version'), 1) = ?3",
                params![u.id.as_str(), json(u), u.version as i64 - 1],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::PutApiKey(k) => {
            // Version 1 is a new key; a key stored before versions existed is version 1.
            let changed = tx.run(
                "INSERT INTO api_keys (id, secret_hash, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body
                 WHERE coalesce(json_extract(api_keys.body, '$.version'), 1) = ?4 - 1",
                params![k.id.as_str(), k.secret_hash, json(k), k.version as i64],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::InsertOperation(op) => {
            tx.run(
                "INSERT INTO operations (id, customer_id, status, type, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    op.id.as_str(),
                    op.customer_id.as_str(),
                    op.status.as_str(),
                    op.kind.as_str(),
                    op.version as i64,
                    json(op)
                ],
            )?;
        }
        Write::UpdateOperation(op) => {
            let changed = tx.run(
                "UPDATE operations SET status = ?2, version = ?3, body = ?4 WHERE id = ?1 AND version = ?5",
                params![
                    op.id.as_str(),
                    op.status.as_str(),
                    op.version as i64,
                    json(op),
                    op.version as i64 - 1
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::PutWorkflow(w) => {
            let changed = tx.run(
                "INSERT INTO workflows (owner, name, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (owner, name) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE workflows.version = excluded.version - 1",
                params![owner_key(&w.owner), w.name, w.version as i64, json(w)],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::InsertTransaction(t) => {
            tx.run(
                "INSERT INTO transactions (id, operation_id, status, next_poll_at, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![t.id.as_str(), t.operation_id.as_str(), t.status.as_str(), t.next_poll_at.map(|at| at.unix_timestamp()), t.version as i64, json(t)],
            )?;
        }
        Write::UpdateTransaction(t) => {
            let changed = tx.run(
                "UPDATE transactions SET status = ?2, next_poll_at = ?3, version = ?4, body = ?5 WHERE id = ?1 AND version = ?6",
                params![t.id.as_str(), t.status.as_str(), t.next_poll_at.map(|at| at.unix_timestamp()), t.version as i64, json(t), t.version as i64 - 1],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::Event(e) => {
            tx.run(
                "INSERT INTO events (id, customer_id, type, body) VALUES (?1, ?2, ?3, ?4)",
                params![e.id.as_str(), e.customer_id.as_str(), e.kind, json(e)],
            )?;
        }
        Write::PutWebhookEndpoint(w) => {
            let changed = tx.run(
                "INSERT INTO webhook_endpoints (id, customer_id, version, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE webhook_endpoints.version = excluded.version - 1",
                params![w.id.as_str(), w.customer_id.as_deref(), w.version as i64, json(w)],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::PutEndpointRoster(roster) => {
            let changed = tx.run(
                "INSERT INTO endpoint_rosters (owner, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (owner) DO UPDATE SET version = excluded.version, body = excluded.body
                 WHERE endpoint_rosters.version = excluded.version - 1",
                params![
                    roster.owner.as_ref().map_or("", |id| id.as_str()),
                    roster.version as i64,
                    json(roster)
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::PutSchedule(schedule) => {
            let due = schedule
                .next_run_at
                .filter(|_| schedule.status == ScheduleStatus::Active)
                .map(|at| at.unix_timestamp());
            let changed = tx.run(
                "INSERT INTO schedules (id, customer_id, visible, due_at, version, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET visible = excluded.visible, due_at = excluded.due_at,
                   version = excluded.version, body = excluded.body
                 WHERE schedules.version = excluded.version - 1",
                params![
                    schedule.id.as_str(),
                    schedule.customer_id.as_str(),
                    schedule.is_visible(),
                    due,
                    schedule.version as i64,
                    json(schedule)
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::InsertOccurrence(occurrence) => {
            tx.run(
                "INSERT INTO occurrences (schedule_id, scheduled_at, body) VALUES (?1, ?2, ?3)",
                params![
                    occurrence.schedule_id.as_str(),
                    occurrence.scheduled_at.unix_timestamp(),
                    json(occurrence)
                ],
            )?;
        }
        Write::InsertAccount(account) => {
            tx.run(
                "INSERT INTO accounts (id, holder, currency, customer_id, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    account.id.as_str(),
                    account.holder(),
                    account.currency.code(),
                    account.customer_id.as_deref(),
                    json(account)
                ],
            )?;
        }
        Write::InsertWorkItem(item) => {
            tx.run(
                "INSERT INTO work_items (id, queue, status, customer_id, assignee, subject_id, due_at, version, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    item.id.as_str(),
                    item.queue.as_str(),
                    item.status.as_str(),
                    item.customer_id.as_str(),
                    item.assignee,
                    item.subject.id,
                    item.due_at.unix_timestamp(),
                    item.version as i64,
                    json(item)
                ],
            )?;
            count_on_board(tx, item.customer_id.as_str(), &queue_bucket(item.queue), "", 1, 0)?;
        }
        Write::UpdateWorkItem(item) => {
            let changed = tx.run(
                "UPDATE work_items SET status = ?2, assignee = ?3, version = ?4, body = ?5 WHERE id = ?1 AND version = ?6",
                params![
                    item.id.as_str(),
                    item.status.as_str(),
                    item.assignee,
                    item.version as i64,
                    json(item),
                    item.version as i64 - 1
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
            // Done is final: the one update that reaches it takes the item off the count.
            if item.status == WorkItemStatus::Done {
                count_on_board(tx, item.customer_id.as_str(), &queue_bucket(item.queue), "", -1, 0)?;
            }
        }
        Write::MoveOnBoard(moved) => {
            let entry = &moved.entry;
            let changed = if entry.version == 1 {
                tx.run(
                    "INSERT INTO board_entries (operation_id, version, body) VALUES (?1, 1, ?2)",
                    params![entry.operation_id.as_str(), json(entry)],
                )?
            } else {
                tx.run(
                    "UPDATE board_entries SET version = ?2, body = ?3 WHERE operation_id = ?1 AND version = ?4",
                    params![
                        entry.operation_id.as_str(),
                        entry.version as i64,
                        json(entry),
                        entry.version as i64 - 1
                    ],
                )?
            };
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
            let (customer, currency) = (entry.customer_id.as_str(), entry.currency.code());
            if let Some(from) = moved.from {
                count_on_board(tx, customer, &column_bucket(from), currency, -1, -entry.amount)?;
            }
            if let Some(to) = entry.column {
                count_on_board(tx, customer, &column_bucket(to), currency, 1, entry.amount)?;
            }
        }
        Write::InsertMovement(movement) => {
            tx.run(
                "INSERT INTO movements (id, version, body) VALUES (?1, ?2, ?3)",
                params![movement.id.as_str(), movement.version as i64, json(movement)],
            )?;
            for entry in &movement.entries {
                tx.run(
                    "INSERT INTO movement_entries (account_id, movement_id) VALUES (?1, ?2)",
                    params![entry.account_id.as_str(), movement.id.as_str()],
                )?;
            }
        }
        Write::InsertFile { file, unique_bytes } => {
            tx.run(
                "INSERT INTO files (id, customer_id, version, body) VALUES (?1, ?2, ?3, ?4)",
                params![
                    file.id.as_str(),
                    file.customer_id.as_str(),
                    file.version as i64,
                    json(file)
                ],
            )?;
            let digest = if *unique_bytes {
                "INSERT INTO file_digests (customer_id, sha256, file_id) VALUES (?1, ?2, ?3)"
            } else {
                "INSERT OR REPLACE INTO file_digests (customer_id, sha256, file_id) VALUES (?1, ?2, ?3)"
            };
            tx.run(
                digest,
                params![file.customer_id.as_str(), file.sha256, file.id.as_str()],
            )?;
        }
        Write::InsertReconciliation(reconciliation) => {
            tx.run(
                "INSERT INTO reconciliations (id, body) VALUES (?1, ?2)",
                params![reconciliation.id.as_str(), json(reconciliation)],
            )?;
        }
        Write::PutReturnSweep(sweep) => {
            tx.run(
                "INSERT INTO return_sweeps (rail, check_index, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (rail, check_index) DO UPDATE SET body = excluded.body",
                params![sweep.rail, sweep.check as i64, json(sweep)],
            )?;
        }
        Write::UpdateFile(file) => {
            let changed = tx.run(
                "UPDATE files SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![
                    file.id.as_str(),
                    file.version as i64,
                    json(file),
                    file.version as i64 - 1
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::UpdateMovement(movement) => {
            let changed = tx.run(
                "UPDATE movements SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![
                    movement.id.as_str(),
                    movement.version as i64,
                    json(movement),
                    movement.version as i64 - 1
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::ChangeBalances(account) => {
            let change = &account.change;
            let changed = tx.run(
                "UPDATE accounts SET posted = posted + ?2, pending_debits = pending_debits + ?3,
                   pending_credits = pending_credits + ?4,
                   body = json_set(body, '$.balances.posted', posted + ?2,
                     '$.balances.pending_debits', pending_debits + ?3,
                     '$.balances.pending_credits', pending_credits + ?4)
                 WHERE id = ?1 AND (?5 = 0 OR posted - pending_debits + ?2 - ?3 >= 0)",
                params![
                    account.account_id.as_str(),
                    change.posted,
                    change.pending_debits,
                    change.pending_credits,
                    account.guard_available
                ],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::InsertDelivery(d) => {
            tx.run(
                "INSERT INTO deliveries (id, event_id, version, body) VALUES (?1, ?2, ?3, ?4)",
                params![d.id.as_str(), d.event_id.as_str(), d.version as i64, json(d)],
            )?;
            list_failed_delivery(tx, d)?;
        }
        Write::UpdateDelivery(d) => {
            let changed = tx.run(
                "UPDATE deliveries SET version = ?2, body = ?3 WHERE id = ?1 AND version = ?4",
                params![d.id.as_str(), d.version as i64, json(d), d.version as i64 - 1],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
            list_failed_delivery(tx, d)?;
        }
        Write::Audit(entry) => {
            tx.run(
                "INSERT INTO audit (entity_id, operation_id, body) VALUES (?1, ?2, ?3)",
                params![entry.entity_id, entry.operation_id, json(entry)],
            )?;
        }
        Write::TakeIdempotency { claim, response } => {
            let now = claim.now.unix_timestamp();
            let changed = tx.run(
                "INSERT INTO idempotency (scope, key, fingerprint, status, response, locked_until, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
                     response = excluded.response, locked_until = excluded.locked_until, expires_at = excluded.expires_at
                 WHERE idempotency.expires_at <= ?6 OR (idempotency.status IS NULL AND idempotency.locked_until <= ?6)",
                params![claim.scope, claim.key, claim.fingerprint, response.status, response.body, now, now + RETENTION.whole_seconds()],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
        Write::CompleteIdempotency { scope, key, response } => {
            let changed = tx.run(
                "UPDATE idempotency SET status = ?3, response = ?4 WHERE scope = ?1 AND key = ?2 AND status IS NULL",
                params![scope, key, response.status, response.body],
            )?;
            if changed != 1 {
                return Err(ConditionFailed.into());
            }
        }
    }
    Ok(())
}

/// Keeps `failed_deliveries` to the failed deliveries awaiting a follow-up: listed when one
/// fails, taken off when its follow-up is recorded; a pending or delivered one touches nothing.
fn list_failed_delivery(tx: &Connection, d: &Delivery) -> Result<(), TxError> {
    if d.status != DeliveryStatus::Failed {
        return Ok(());
    }
    let key = params![d.endpoint_id.as_str(), d.event_id.as_str(), d.id.as_str()];
    if d.follow_up.is_none() {
        tx.run(
            "INSERT OR IGNORE INTO failed_deliveries (endpoint_id, event_id, delivery_id) VALUES (?1, ?2, ?3)",
            key,
        )?;
    } else {
        tx.run(
            "DELETE FROM failed_deliveries WHERE endpoint_id = ?1 AND event_id = ?2 AND delivery_id = ?3",
            key,
        )?;
    }
    Ok(())
}

/// What a live record `(fingerprint, status, response)` of a key means to a request with
/// `fingerprint`; no record: the key is free.
fn claim_outcome(record: Option<(String, Option<u16>, Option<Vec<u8>>)>, fingerprint: &str) -> ClaimOutcome {
    match record {
        None => ClaimOutcome::Claimed,
        Some((stored, _, _)) if stored != fingerprint => ClaimOutcome::Mismatch,
        Some((_, Some(status), Some(body))) => ClaimOutcome::Replay(StoredResponse { status, body }),
        Some(_) => ClaimOutcome::InFlight,
    }
}

/// Applies every write of `changes` on `c` (a transaction or a savepoint), stopping at the
/// first that fails; the caller rolls back.
fn apply_all(c: &Connection, changes: &Changeset) -> Result<(), StoreError> {
    changes.writes.iter().try_for_each(|write| match apply(c, write) {
        Ok(()) => Ok(()),
        Err(TxError::Condition) => Err(StoreError::Conflict),
        Err(TxError::Sql(e)) => Err(unavailable(e)),
    })
}

/// Applies every write of `changes` in one transaction, or none.
fn commit_on(c: &mut Connection, changes: &Changeset) -> Result<(), StoreError> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    apply_all(&tx, changes)?;
    tx.commit().map_err(unavailable)
}

/// Applies each changeset in a savepoint of its own, all in one transaction (one sync to
/// disk): a changeset whose condition fails is rolled back alone. The outer error is the
/// transaction's own (nothing committed).
fn commit_together(c: &mut Connection, changesets: &[Changeset]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    let mut outcomes = Vec::with_capacity(changesets.len());
    for changes in changesets {
        let savepoint = tx.savepoint().map_err(unavailable)?;
        let outcome = apply_all(&savepoint, changes);
        // A savepoint dropped without commit rolls back its changeset alone.
        if outcome.is_ok() {
            savepoint.commit().map_err(unavailable)?;
        }
        outcomes.push(outcome);
    }
    tx.commit().map_err(unavailable)?;
    Ok(outcomes)
}

impl SqliteStore {
    /// Queues changesets for the writer (all at once, so one turn takes them together) and
    /// asks for a turn; the first turn to get the writer commits every changeset then
    /// waiting. Each caller waits for its answers, not for its own turn: a changeset another
    /// turn committed is answered as soon as that turn is done.
    async fn commit_in_turn(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        let outcomes: Vec<_> = {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            changesets
                .into_iter()
                .map(|changes| {
                    let (answer, outcome) = tokio::sync::oneshot::channel();
                    waiting.push((changes, answer));
                    outcome
                })
                .collect()
        };
        let waiting = self.waiting.clone();
        let connection = self.connection.clone();
        tokio::task::spawn_blocking(move || {
            let mut connection = connection.lock().unwrap_or_else(|e| e.into_inner());
            let group = std::mem::take(&mut *waiting.lock().unwrap_or_else(|e| e.into_inner()));
            if group.is_empty() {
                return;
            }
            let (changesets, answers): (Vec<_>, Vec<_>) = group.into_iter().unzip();
            let outcomes = match commit_together(&mut connection, &changesets) {
                Ok(outcomes) => outcomes,
                Err(error) => vec![Err(error); answers.len()],
            };
            for (answer, outcome) in answers.into_iter().zip(outcomes) {
                // A caller that stopped waiting (its request dropped) needs no answer.
                let _ = answer.send(outcome);
            }
        });
        // A turn that panicked drops its answers: the caller hears the store is unavailable.
        join_all(
            outcomes
                .into_iter()
                .map(|outcome| async { outcome.await.map_err(unavailable)? }),
        )
        .await
    }
}

#[async_trait]
impl Commit for SqliteStore {
    async fn commit(&self, changes: Changeset) -> Result<(), StoreError> {
        let mut outcomes = self.commit_in_turn(vec![changes]).await;
        outcomes.pop().unwrap_or_else(|| Err(unavailable("no outcome")))
    }

    async fn commit_derived(&self, changes: Changeset) -> Result<(), StoreError> {
        self.with_unsynced(move |c| commit_on(c, &changes)).await
    }

    /// Each changeset in its own savepoint of one unsynced transaction.
    async fn commit_derived_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        if changesets.is_empty() {
            return vec![];
        }
        let count = changesets.len();
        match self.with_unsynced(move |c| commit_together(c, &changesets)).await {
            Ok(outcomes) => outcomes,
            Err(error) => vec![Err(error); count],
        }
    }

    /// Each changeset in its own savepoint of one transaction, with whatever else waits for
    /// the writer (webhook senders' batches share a sync).
    async fn commit_each(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        if changesets.is_empty() {
            return vec![];
        }
        self.commit_in_turn(changesets).await
    }
}

#[async_trait]
impl AccessStore for SqliteStore {
    async fn customer(&self, id: &CustomerId) -> Result<Option<Customer>, StoreError> {
        self.document("SELECT body FROM customers WHERE id = ?1", id.into())
            .await
    }

    async fn customers(
        &self,
        status: Option<CustomerStatus>,
        starting_after: Option<&CustomerId>,
        limit: usize,
    ) -> Result<Vec<Customer>, StoreError> {
        let start = page_start(starting_after.map(|id| id.as_str()));
        match status {
            Some(status) => {
                let keys = vec![status.as_str().to_owned(), start];
                self.documents_of(CUSTOMERS_IN_STATUS, keys, limit).await
            }
            None => self.documents_up_to(CUSTOMERS, start, limit).await,
        }
    }

    async fn user(&self, id: &UserId) -> Result<Option<User>, StoreError> {
        self.document("SELECT body FROM users WHERE id = ?1", id.into()).await
    }

    async fn api_key(&self, id: &ApiKeyId) -> Result<Option<ApiKey>, StoreError> {
        self.document("SELECT body FROM api_keys WHERE id = ?1", id.into())
            .await
    }

    async fn api_key_by_hash(&self, secret_hash: &str) -> Result<Option<ApiKey>, StoreError> {
        self.document("SELECT body FROM api_keys WHERE secret_hash = ?1", secret_hash.into())
            .await
    }

    async fn users_of(
        &self,
        customer_id: &CustomerId,
        starting_after: Option<&UserId>,
        limit: usize,
    ) -> Result<Vec<User>, StoreError> {
        let keys = vec![
            customer_id.to_string(),
            page_start(starting_after.map(|id| id.as_str())),
        ];
        self.documents_of(USERS_OF, keys, limit).await
    }

    async fn api_keys_of(
        &self,
        customer_id: Option<&CustomerId>,
        starting_after: Option<&ApiKeyId>,
        limit: usize,
    ) -> Result<Vec<ApiKey>, StoreError> {
        let owner = customer_id.map_or("", |id| id.as_str()).to_owned();
        let keys = vec![owner, page_start(starting_after.map(|id| id.as_str()))];
        self.documents_of(API_KEYS_OF, keys, limit).await
    }
}

#[async_trait]
impl OperationStore for SqliteStore {
    async fn operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError> {
        self.document("SELECT body FROM operations WHERE id = ?1", id.into())
            .await
    }

    /// The customer and the status are keys; a `type` filter reads a bounded stretch.
    async fn operations(&self, query: &OperationQuery) -> Result<Listed<Operation>, StoreError> {
        let (query, budget) = (query.clone(), self.filtered_read_budget());
        self.read(move |c| {
            List::new("operations", "id", query.limit)
                .filter("customer_id = ?", query.customer_id.clone().map(String::from))
                .filter("status = ?", query.status.map(|s| s.as_str().to_owned()))
                .filter("id < ?", query.starting_after.clone().map(String::from))
                .filter_unkeyed("type", query.kind.map(|k| k.as_str().to_owned()), budget)
                .run(c)
        })
        .await
    }

    async fn operation_history(&self, operation_id: &OperationId) -> Result<Vec<AuditEntry>, StoreError> {
        let operation_id = operation_id.to_owned();
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT body FROM audit WHERE operation_id = ?1 ORDER BY seq")
                .map_err(unavailable)?;
            let rows = statement
                .query_map([operation_id.as_str()], |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }
}

#[async_trait]
impl WorkflowStore for SqliteStore {
    async fn workflow(&self, owner: &WorkflowOwner, name: &str) -> Result<Option<Workflow>, StoreError> {
        self.document_by(
            "SELECT body FROM workflows WHERE owner = ?1 AND name = ?2",
            params![owner_key(owner), name],
        )
    }
}

#[async_trait]
impl TransactionStore for SqliteStore {
    async fn transaction(&self, id: &TransactionId) -> Result<Option<Transaction>, StoreError> {
        self.document("SELECT body FROM transactions WHERE id = ?1", id.into())
            .await
    }

    async fn transactions_of_operation(&self, operation: &Operation) -> Result<Vec<Transaction>, StoreError> {
        self.documents(
            "SELECT body FROM transactions WHERE operation_id = ?1 ORDER BY id",
            operation.id.as_str().into(),
        )
        .await
    }

    async fn transactions_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Transaction>, StoreError> {
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT body FROM transactions WHERE next_poll_at IS NOT NULL AND next_poll_at <= ?1 ORDER BY next_poll_at LIMIT ?2")
                .map_err(unavailable)?;
            let rows = statement.query_map(params![now.unix_timestamp(), limit as i64], |row| row.get::<_, String>(0)).map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable)).collect()
        })
        .await
    }

    async fn confirmed_on_rail(&self, rail: &str, from: Date, to: Date) -> Result<Vec<Transaction>, StoreError> {
        let (rail, from, to) = (rail.to_owned(), from.to_string(), to.to_string());
        self.read(move |c| {
            let mut statement = c
                .prepare_cached(
                    "SELECT body FROM transactions WHERE json_extract(body, '$.confirmed_at') IS NOT NULL
                     AND json_extract(body, '$.rail') = ?1
                     AND substr(json_extract(body, '$.confirmed_at'), 1, 10) BETWEEN ?2 AND ?3 ORDER BY id",
                )
                .map_err(unavailable)?;
            let rows = statement
                .query_map(params![rail, from, to], |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }

    async fn confirmed_between(
        &self,
        rail: &str,
        after: (OffsetDateTime, &TransactionId),
        until: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Transaction>, StoreError> {
        let rfc3339 = |at: OffsetDateTime| at.format(&Rfc3339).map_err(unavailable);
        let (rail, after_id) = (rail.to_owned(), after.1.as_str().to_owned());
        let (after, until) = (rfc3339(after.0)?, rfc3339(until)?);
        self.read(move |c| {
            // SQLite reads the times as the index holds them (to the millisecond), so the
            // bounds compare exactly.
            let mut statement = c.prepare_cached(CONFIRMED_BETWEEN).map_err(unavailable)?;
            let rows = statement
                .query_map(params![rail, after, after_id, until, limit as i64], |row| {
                    row.get::<_, String>(0)
                })
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }

    async fn return_sweep(&self, rail: &str, check: usize) -> Result<Option<ReturnSweep>, StoreError> {
        let (rail, check) = (rail.to_owned(), check as i64);
        self.read(move |c| {
            c.query_row(
                "SELECT body FROM return_sweeps WHERE rail = ?1 AND check_index = ?2",
                params![rail, check],
                |row| row.get::<_, String>(0),
            )
            .optional()
            .map_err(unavailable)?
            .map(|body| serde_json::from_str(&body).map_err(unavailable))
            .transpose()
        })
        .await
    }
}

#[async_trait]
impl ReconciliationStore for SqliteStore {
    async fn reconciliation(&self, id: &ReconciliationId) -> Result<Option<Reconciliation>, StoreError> {
        self.document("SELECT body FROM reconciliations WHERE id = ?1", id.into())
            .await
    }
}

#[async_trait]
impl LedgerStore for SqliteStore {
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        self.document("SELECT body FROM accounts WHERE id = ?1", id.into())
            .await
    }

    async fn account_of(&self, holder: &str, currency: &Currency) -> Result<Option<Account>, StoreError> {
        self.document_by(
            "SELECT body FROM accounts WHERE holder = ?1 AND currency = ?2",
            params![holder, currency.code()],
        )
    }

    async fn accounts(&self, query: &AccountQuery) -> Result<Vec<Account>, StoreError> {
        let query = query.clone();
        self.read(move |c| {
            List::new("accounts", "id", query.limit)
                .filter("customer_id = ?", query.customer_id.map(String::from))
                .filter("currency = ?", query.currency.map(|c| c.code().to_owned()))
                .filter("id < ?", query.starting_after.map(String::from))
                .all(c)
        })
        .await
    }

    async fn movement(&self, id: &MovementId) -> Result<Option<Movement>, StoreError> {
        self.document("SELECT body FROM movements WHERE id = ?1", id.into())
            .await
    }

    async fn movements_of(
        &self,
        account: &AccountId,
        starting_after: Option<&MovementId>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError> {
        let account = account.to_string();
        let before = starting_after.map(String::from);
        self.read(move |c| {
            let mut statement = c
                .prepare_cached(
                    "SELECT m.body FROM movement_entries e JOIN movements m ON m.id = e.movement_id
                     WHERE e.account_id = ?1 AND (?2 IS NULL OR e.movement_id < ?2)
                     ORDER BY e.movement_id DESC LIMIT ?3",
                )
                .map_err(unavailable)?;
            let rows = statement
                .query_map(params![account, before, limit as i64], |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }
}

#[async_trait]
impl FileStore for SqliteStore {
    async fn file(&self, id: &FileId) -> Result<Option<File>, StoreError> {
        self.document("SELECT body FROM files WHERE id = ?1", id.into()).await
    }

    async fn files(&self, query: &FileQuery) -> Result<Vec<File>, StoreError> {
        let query = query.clone();
        self.read(move |c| {
            List::new("files", "id", query.limit)
                .filter("customer_id = ?", query.customer_id.map(String::from))
                .filter("id < ?", query.starting_after.map(String::from))
                .all(c)
        })
        .await
    }

    async fn file_with_digest(&self, customer: &CustomerId, sha256: &str) -> Result<Option<FileId>, StoreError> {
        let (customer, sha256) = (customer.to_string(), sha256.to_string());
        self.read(move |c| {
            c.prepare_cached("SELECT file_id FROM file_digests WHERE customer_id = ?1 AND sha256 = ?2")
                .and_then(|mut s| {
                    s.query_row(params![customer, sha256], |row| row.get::<_, String>(0))
                        .optional()
                })
                .map(|id| id.map(FileId::from))
                .map_err(unavailable)
        })
        .await
    }
}

#[async_trait]
impl ScheduleStore for SqliteStore {
    async fn schedule(&self, id: &ScheduleId) -> Result<Option<Schedule>, StoreError> {
        self.document("SELECT body FROM schedules WHERE id = ?1", id.into())
            .await
    }

    async fn schedules(&self, query: &ScheduleQuery) -> Result<Vec<Schedule>, StoreError> {
        let query = query.clone();
        self.read(move |c| {
            List::new("schedules", "id", query.limit)
                .always("visible = 1")
                .filter("customer_id = ?", query.customer_id.map(String::from))
                .filter("id < ?", query.starting_after.map(String::from))
                .all(c)
        })
        .await
    }

    async fn schedules_due(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Schedule>, StoreError> {
        self.read(move |c| {
            let mut statement = c
                .prepare_cached(
                    "SELECT body FROM schedules WHERE due_at IS NOT NULL AND due_at <= ?1 ORDER BY due_at LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = statement
                .query_map(params![now.unix_timestamp(), limit as i64], |row| {
                    row.get::<_, String>(0)
                })
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }

    async fn occurrence(&self, id: &ScheduleId, at: OffsetDateTime) -> Result<Option<Occurrence>, StoreError> {
        let id = id.to_string();
        self.read(move |c| {
            let body: Option<String> = c
                .query_row(
                    "SELECT body FROM occurrences WHERE schedule_id = ?1 AND scheduled_at = ?2",
                    params![id, at.unix_timestamp()],
                    |row| row.get(0),
                )
                .optional()
                .map_err(unavailable)?;
            body.map(|b| serde_json::from_str(&b).map_err(unavailable)).transpose()
        })
        .await
    }

    async fn occurrences(
        &self,
        id: &ScheduleId,
        before: Option<OffsetDateTime>,
        limit: usize,
    ) -> Result<Vec<Occurrence>, StoreError> {
        let id = id.to_string();
        let before = before.map_or(i64::MAX, |at| at.unix_timestamp());
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT body FROM occurrences WHERE schedule_id = ?1 AND scheduled_at < ?2 ORDER BY scheduled_at DESC LIMIT ?3")
                .map_err(unavailable)?;
            let rows = statement.query_map(params![id, before, limit as i64], |row| row.get::<_, String>(0)).map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable)).collect()
        })
        .await
    }
}

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn event(&self, id: &EventId) -> Result<Option<Event>, StoreError> {
        self.document("SELECT body FROM events WHERE id = ?1", id.into()).await
    }

    /// The customer is a key; a `type` filter reads a bounded stretch.
    async fn events(&self, query: &EventQuery) -> Result<Listed<Event>, StoreError> {
        let (query, budget) = (query.clone(), self.filtered_read_budget());
        self.read(move |c| {
            List::new("events", "seq", query.limit)
                .filter("customer_id = ?", query.customer_id.clone().map(String::from))
                .filter(
                    "seq < (SELECT seq FROM events WHERE id = ?)",
                    query.starting_after.clone().map(String::from),
                )
                .filter_unkeyed("type", query.kind, budget)
                .run(c)
        })
        .await
    }

    async fn webhook_endpoint(&self, id: &WebhookEndpointId) -> Result<Option<WebhookEndpoint>, StoreError> {
        self.document("SELECT body FROM webhook_endpoints WHERE id = ?1", id.into())
            .await
    }

    async fn webhook_endpoints_for(
        &self,
        customer_id: Option<&CustomerId>,
    ) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let customer = customer_id.map_or("", |id| id.as_str()).to_owned();
        self.documents(LIVE_ENDPOINTS, customer).await
    }

    async fn endpoint_roster(&self, owner: Option<&CustomerId>) -> Result<Option<EndpointRoster>, StoreError> {
        let owner = owner.map_or("", |id| id.as_str()).to_owned();
        self.document("SELECT body FROM endpoint_rosters WHERE owner = ?1", owner)
            .await
    }

    async fn delivery(&self, id: &DeliveryId) -> Result<Option<Delivery>, StoreError> {
        self.document("SELECT body FROM deliveries WHERE id = ?1", id.into())
            .await
    }

    /// In one read transaction, off the async runtime: a batch's worth of lookups.
    async fn deliveries_to_send(&self, ids: &[DeliveryId]) -> Result<Vec<(Delivery, Option<String>)>, StoreError> {
        let ids: Vec<String> = ids.iter().map(String::from).collect();
        self.read(move |c| {
            let tx = c.unchecked_transaction().map_err(unavailable)?;
            let mut statement = tx
                .prepare_cached(
                    "SELECT d.body, e.body FROM deliveries d LEFT JOIN events e ON e.id = d.event_id WHERE d.id = ?1",
                )
                .map_err(unavailable)?;
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                let row = statement
                    .query_row([id], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
                    })
                    .optional()
                    .map_err(unavailable)?;
                if let Some((delivery, event)) = row {
                    found.push((serde_json::from_str(&delivery).map_err(unavailable)?, event));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn deliveries_of_event(&self, event_id: &EventId) -> Result<Vec<Delivery>, StoreError> {
        self.documents(
            "SELECT body FROM deliveries WHERE event_id = ?1 ORDER BY id",
            event_id.into(),
        )
        .await
    }

    async fn failed_deliveries_of(
        &self,
        endpoint_id: &WebhookEndpointId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let (event_id, delivery_id) =
            after.map_or_else(Default::default, |d| (d.event_id.to_string(), d.id.to_string()));
        let keys = vec![endpoint_id.to_string(), event_id, delivery_id];
        self.documents_of(FAILED_DELIVERIES, keys, limit).await
    }
}

#[async_trait]
impl HistoryStore for SqliteStore {
    async fn entity_history(&self, entity_id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        self.documents_up_to(ENTITY_HISTORY, entity_id.to_string(), MAX_ENTITY_HISTORY)
            .await
    }
}

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn claim_idempotency_key(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        let claim = claim.clone();
        // A claim acknowledges nothing: lost in a power cut with nothing committed after it,
        // the request simply never happened; the effect's own commit (FULL) syncs it.
        self.with_unsynced(move |c| {
            let now = claim.now.unix_timestamp();
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(unavailable)?;
            // Forget records past their retention, and claims whose request died before
            // committing anything.
            tx.run(
                "DELETE FROM idempotency WHERE scope = ?1 AND key = ?2 AND (expires_at <= ?3 OR (status IS NULL AND locked_until <= ?3))",
                params![claim.scope, claim.key, now],
            )
            .map_err(unavailable)?;
            let existing: Option<(String, Option<u16>, Option<Vec<u8>>)> = tx
                .row(
                    "SELECT fingerprint, status, response FROM idempotency WHERE scope = ?1 AND key = ?2",
                    params![claim.scope, claim.key],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(unavailable)?;
            let outcome = match existing {
                Some(record) => claim_outcome(Some(record), &claim.fingerprint),
                None => {
                    tx.run(
                        "INSERT INTO idempotency (scope, key, fingerprint, locked_until, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![claim.scope, claim.key, claim.fingerprint, now + CLAIM_TIMEOUT.whole_seconds(), now + RETENTION.whole_seconds()],
                    )
                    .map_err(unavailable)?;
                    ClaimOutcome::Claimed
                }
            };
            tx.commit().map_err(unavailable)?;
            Ok(outcome)
        })
        .await
    }

    async fn idempotency_record(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, StoreError> {
        self.look_up(|c| {
            let now = claim.now.unix_timestamp();
            let existing: Option<(String, Option<u16>, Option<Vec<u8>>)> = c
                .row(
                    "SELECT fingerprint, status, response FROM idempotency WHERE scope = ?1 AND key = ?2
                     AND NOT (expires_at <= ?3 OR (status IS NULL AND locked_until <= ?3))",
                    params![claim.scope, claim.key, now],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(unavailable)?;
            Ok(claim_outcome(existing, &claim.fingerprint))
        })
    }

    async fn release_idempotency_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        let (scope, key) = (scope.to_owned(), key.to_owned());
        self.with(move |c| {
            c.run(
                "DELETE FROM idempotency WHERE scope = ?1 AND key = ?2 AND status IS NULL",
                params![scope, key],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}

/// Columns added to tables after files were made without them: `CREATE TABLE IF NOT EXISTS`
/// leaves an existing table as it was.
fn add_missing_columns(connection: &Connection) -> Result<(), StoreError> {
    // When a secret was first stored; rows from before read as 0 (as old as can be).
    let has = |table: &str, column: &str| {
        connection
            .query_row(
                "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
                [table, column],
                |row| row.get::<_, i64>(0),
            )
            .map(|found| found > 0)
            .map_err(unavailable)
    };
    if !has("secrets", "stored_at")? {
        connection
            .execute_batch("ALTER TABLE secrets ADD COLUMN stored_at INTEGER NOT NULL DEFAULT 0")
            .map_err(unavailable)?;
    }
    Ok(())
}

/// Raw rows of the secrets table; [`super::SealedSecrets`] seals what goes in them.
impl SqliteStore {
    /// Writes a secret's value, keeping when it was first stored.
    pub(crate) async fn put_secret_row(&self, name: &str, value: String) -> Result<(), StoreError> {
        let name = name.to_owned();
        let now = OffsetDateTime::now_utc().unix_timestamp();
        self.with(move |c| {
            c.run(
                "INSERT INTO secrets (name, value, stored_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                params![name, value, now],
            )
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    /// The names of the secrets that start with `prefix`, and when each was first stored.
    pub(crate) async fn secret_names(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        // `name >= prefix AND name < prefix + U+10FFFF` seeks the primary key, where LIKE
        // would read every row.
        let (from, to) = (prefix.to_owned(), format!("{prefix}\u{10FFFF}"));
        self.read(move |c| {
            let mut statement = c
                .prepare_cached("SELECT name, stored_at FROM secrets WHERE name >= ?1 AND name < ?2 ORDER BY name")
                .map_err(unavailable)?;
            let rows = statement
                .query_map([from, to], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(unavailable)?;
            rows.collect::<Result<_, _>>().map_err(unavailable)
        })
        .await
    }

    pub(crate) async fn secret_row(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.look_up(|c| {
            c.prepare_cached("SELECT value FROM secrets WHERE name = ?1")
                .and_then(|mut statement| statement.query_row([name], |row| row.get(0)).optional())
                .map_err(unavailable)
        })
    }

    pub(crate) async fn delete_secret_row(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.with(move |c| {
            c.run("DELETE FROM secrets WHERE name = ?1", [name])
                .map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}

/// Adds to a board counter of `customer` (the platform's board adds up every customer's).
fn count_on_board(
    tx: &Connection,
    customer: &str,
    bucket: &str,
    currency: &str,
    count: i64,
    amount: i64,
) -> Result<(), TxError> {
    tx.run(
        "INSERT INTO board_counts (owner, bucket, currency, count, amount) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (owner, bucket, currency) DO UPDATE
         SET count = count + excluded.count, amount = amount + excluded.amount",
        params![customer, bucket, currency, count, amount],
    )?;
    Ok(())
}

#[async_trait]
impl DeskStore for SqliteStore {
    async fn past_due(
        &self,
        queue: Queue,
        customer_id: Option<&CustomerId>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let (queue, customer) = (queue.as_str(), customer_id.map(|c| c.to_string()));
        self.read(move |c| {
            let sql = match customer {
                Some(_) => {
                    "SELECT count(*) FROM (SELECT 1 FROM work_items WHERE customer_id = ?4 AND queue = ?1
                     AND status IN ('open', 'claimed') AND due_at < ?2 LIMIT ?3)"
                }
                None => {
                    "SELECT count(*) FROM (SELECT 1 FROM work_items WHERE queue = ?1
                     AND status IN ('open', 'claimed') AND due_at < ?2 LIMIT ?3) WHERE ?4 IS NULL"
                }
            };
            let count: i64 = c
                .query_row(
                    sql,
                    params![queue, now.unix_timestamp(), limit as i64, customer],
                    |row| row.get(0),
                )
                .map_err(unavailable)?;
            Ok(count as usize)
        })
        .await
    }

    async fn board_entry(&self, operation_id: &OperationId) -> Result<Option<BoardEntry>, StoreError> {
        self.document(
            "SELECT body FROM board_entries WHERE operation_id = ?1",
            operation_id.into(),
        )
        .await
    }

    async fn board_counts(&self, customer_id: Option<&CustomerId>) -> Result<Vec<BoardCount>, StoreError> {
        let owner = customer_id.map(|c| c.to_string());
        self.read(move |c| {
            let sql = match owner {
                Some(_) => "SELECT bucket, currency, count, amount FROM board_counts WHERE owner = ?1",
                // The platform's: every customer's, added up.
                None => "SELECT bucket, currency, sum(count), sum(amount) FROM board_counts GROUP BY bucket, currency",
            };
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(&owner), |row| {
                    let currency: String = row.get(1)?;
                    Ok(BoardCount {
                        bucket: row.get(0)?,
                        currency: (!currency.is_empty()).then_some(currency),
                        count: row.get(2)?,
                        amount: row.get(3)?,
                    })
                })
                .map_err(unavailable)?;
            rows.map(|row| row.map_err(unavailable)).collect()
        })
        .await
    }

    async fn oldest_in_column(
        &self,
        column: Column,
        customer_id: Option<&CustomerId>,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        let statuses: Vec<&'static str> = column.statuses().iter().map(|s| s.as_str()).collect();
        let customer = customer_id.map(|c| c.to_string());
        self.read(move |c| {
            let mut oldest: Option<OffsetDateTime> = None;
            for status in statuses {
                let body: Option<String> = match &customer {
                    Some(customer) => c.query_row(
                        "SELECT body FROM operations WHERE customer_id = ?1 AND status = ?2 ORDER BY id LIMIT 1",
                        params![customer, status],
                        |row| row.get(0),
                    ),
                    None => c.query_row(
                        "SELECT body FROM operations WHERE status = ?1 ORDER BY id LIMIT 1",
                        params![status],
                        |row| row.get(0),
                    ),
                }
                .optional()
                .map_err(unavailable)?;
                if let Some(body) = body {
                    let operation: Operation = serde_json::from_str(&body).map_err(unavailable)?;
                    oldest = Some(oldest.map_or(operation.created_at, |o| o.min(operation.created_at)));
                }
            }
            Ok(oldest)
        })
        .await
    }

    async fn work_item(&self, id: &WorkItemId) -> Result<Option<WorkItem>, StoreError> {
        self.document("SELECT body FROM work_items WHERE id = ?1", id.into())
            .await
    }

    async fn open_work_item(&self, queue: Queue, subject_id: &str) -> Result<Option<WorkItem>, StoreError> {
        self.document_by(
            "SELECT body FROM work_items WHERE queue = ?1 AND subject_id = ?2 AND status <> 'done'",
            params![queue.as_str(), subject_id],
        )
    }

    async fn work_items(&self, query: &WorkItemQuery) -> Result<Vec<WorkItem>, StoreError> {
        let query = query.clone();
        self.read(move |c| {
            let mut clauses: Vec<&str> = vec![];
            let mut values: Vec<Value> = vec![];
            let mut filter = |clause, value: Option<String>| {
                if let Some(value) = value {
                    clauses.push(clause);
                    values.push(Value::Text(value));
                }
            };
            filter("queue = ?", query.queue.map(|q| q.as_str().to_owned()));
            filter("status = ?", query.status.map(|s| s.as_str().to_owned()));
            filter("customer_id = ?", query.customer_id.map(String::from));
            match query.assignee {
                Some(Assignee::Holder(holder)) => filter("assignee = ?", Some(holder)),
                Some(Assignee::Unassigned) => clauses.push("assignee IS NULL"),
                None => {}
            }
            if let Some(after) = query.starting_after {
                clauses.push("(due_at, id) > (SELECT due_at, id FROM work_items WHERE id = ?)");
                values.push(Value::Text(after.into()));
            }
            let mut sql = "SELECT body FROM work_items".to_owned();
            if !clauses.is_empty() {
                sql += &format!(" WHERE {}", clauses.join(" AND "));
            }
            sql += " ORDER BY due_at, id LIMIT ?";
            values.push(Value::Integer(query.limit as i64));
            let mut statement = c.prepare_cached(&sql).map_err(unavailable)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| row.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.map(|body| serde_json::from_str(&body.map_err(unavailable)?).map_err(unavailable))
                .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The platform's board adds up its customers' counters. A file from before that kept the
    /// platform's sums as rows of their own, which would count everything twice: opening it
    /// drops them.
    #[tokio::test]
    async fn the_platform_board_adds_up_customers_and_older_sums_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("board.sqlite");
        let count = |c: &Connection, owner: &str, count: i64| {
            c.execute(
                "INSERT INTO board_counts (owner, bucket, currency, count, amount) VALUES (?1, 'column:in_progress', 'CLP', ?2, ?3)",
                params![owner, count, count * 100],
            )
            .unwrap();
        };
        drop(SqliteStore::open(&path).unwrap());
        let file = Connection::open(&path).unwrap();
        count(&file, "cus_a", 2);
        count(&file, "cus_b", 3);
        count(&file, "PLATFORM", 5);
        drop(file);
        let store = SqliteStore::open(&path).unwrap();
        let platform = store.board_counts(None).await.unwrap();
        assert_eq!(
            platform,
            [BoardCount {
                bucket: "column:in_progress".into(),
                currency: Some("CLP".into()),
                count: 5,
                amount: 500,
            }]
        );
        let customer = store.board_counts(Some(&"cus_b".into())).await.unwrap();
        assert_eq!((customer.len(), customer[0].count), (1, 3));
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
            created_at: OffsetDateTime::now_utc(),
            version: 1,
        };
        let first = customer("cus_before");
        Connection::open(&older)
            .unwrap()
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE customers (id TEXT PRIMARY KEY, body TEXT NOT NULL);",
            )
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
}
