//! The store port on a SQLite file. Each entity is one JSON document plus the columns its
//! lookups need; a changeset is one savepoint of a `BEGIN IMMEDIATE … COMMIT` that it shares
//! with the changesets waiting for the writer beside it (group commit).
//!
//! This module holds the connections (one writer, idle readers, the checkpointer) and the
//! commit; [`schema`] the tables, [`writes`] how each write lands in them, [`ports`] and
//! [`desk`] the domain's store ports read off them, [`secrets`] the secrets table's rows.

use futures_util::future::join_all;
use ops_domain::approvals::WorkflowOwner;
use ops_domain::event::Event;
use ops_domain::ports::{Changeset, Listed, StoreError};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use time::OffsetDateTime;

mod desk;
mod limits;
mod ports;
mod schema;
mod secrets;
mod tallies;
mod writes;

use schema::{add_missing_columns, has_table, index_findings, move_board_counts, SCHEMA};
use writes::{commit_on, commit_together, one_row};

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

/// Idle read-only connections, opened as needed and kept for the next read.
struct Readers {
    path: std::path::PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// Read connections kept open when idle; more may be open while reads run side by side.
const IDLE_READERS: usize = 16;
/// A new file's page size: smaller pages made one client's creates quicker in `ops-bench limit`
/// (SQLite's default is 4096).
const PAGE_SIZE: i64 = 1024;
/// The WAL's length at which a commit copies it into the file itself (a backstop: the
/// checkpointer does it first; SQLite's default is 1,000 pages, inside whichever commit
/// crosses it, which then takes milliseconds).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 20_000;
/// What the WAL file is cut back to when it starts over: above the most the backstop lets it
/// hold, so that a WAL starting over writes into the blocks it has. Cut to less (it was
/// 16 MiB), a WAL that grew past it again under a steady stream of commits had its file
/// extended in a quarter of them at one client, and each such commit's sync wrote the file's
/// inode as well (`ext4_write_inode` under `fdatasync`, in a profile of one client's creates).
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
        let findings_kept = has_table(&connection, "operation_finds")?;
        connection.execute_batch(SCHEMA).map_err(unavailable)?;
        connection.execute_batch(limits::SCHEMA).map_err(unavailable)?;
        if !findings_kept {
            index_findings(&connection)?;
        }
        add_missing_columns(&connection)?;
        move_board_counts(&connection)?;
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
    /// request's first lookup after a commit reads its pages again. When the writer is busy (a commit waiting for the disk), a reader does.
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
    /// Each with one `?`, all to hold.
    conditions: Vec<String>,
    values: Vec<Value>,
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
    fn filter_unkeyed(self, column: &'static str, value: Option<String>, budget: usize) -> Self {
        self.filter_unkeyed_by(&format!("{column} = ?"), value.map(Value::Text), budget)
    }

    /// Keeps the rows `condition` (with one `?`) holds for, when `value` is given; bounded as
    /// [`Self::filter_unkeyed`], with which it combines.
    fn filter_unkeyed_by(mut self, condition: &str, value: Option<Value>, budget: usize) -> Self {
        if let Some(value) = value {
            let unkeyed = self.unkeyed.get_or_insert_with(|| Unkeyed {
                conditions: vec![],
                values: vec![],
                budget,
            });
            unkeyed.conditions.push(condition.to_owned());
            unkeyed.values.push(value);
        }
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
                "SELECT id, CASE WHEN {} THEN body END FROM {}",
                unkeyed.conditions.join(" AND "),
                self.table
            ),
        };
        if !self.clauses.is_empty() {
            sql += &format!(" WHERE {}", self.clauses.join(" AND "));
        }
        sql + &format!(" ORDER BY {} DESC LIMIT ?", self.order)
    }

    /// The statement's values, in the order of its `?`s.
    fn parameters(&self) -> Vec<Value> {
        let first = self.unkeyed.iter().flat_map(|u| u.values.iter().cloned());
        let rows = self.unkeyed.as_ref().map_or(self.limit, |u| u.budget);
        first
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

#[cfg(test)]
mod tests;
