//! The SQLite file's tables and indexes, and the columns added to files made before them.

use super::*;
use ops_domain::ports::StoreError;
use rusqlite::Connection;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, body TEXT NOT NULL);
-- On the document, as api_keys_by_owner is, so older files need no migration.
CREATE INDEX IF NOT EXISTS customers_by_status ON customers (json_extract(body, '$.status'), id);
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS users_by_customer ON users (customer_id, id);
-- Each customer's users hold distinct emails (User::email_key); users made before this table
-- claim theirs when the file is opened, the first made keeping a shared one.
CREATE TABLE IF NOT EXISTS user_emails (
    customer_id TEXT NOT NULL, email TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (customer_id, email));
INSERT OR IGNORE INTO user_emails (customer_id, email, user_id)
    SELECT customer_id, lower(json_extract(body, '$.email')), id FROM users ORDER BY id;
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
-- Only operations waiting for approvals with a ttl: the expiry timer's index, small.
CREATE INDEX IF NOT EXISTS operations_expiring ON operations (json_extract(body, '$.approval_expires_at'))
    WHERE status = 'pending_approval' AND json_extract(body, '$.approval_expires_at') IS NOT NULL;
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
-- The transactions in a watched status (TransactionStatus::WATCHED), which few are at a time.
CREATE INDEX IF NOT EXISTS transactions_watched ON transactions (status, id)
    WHERE status IN ('unknown', 'needs_attention');
-- The event log is also the change stream: consumers read it in seq order from a checkpoint.
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, customer_id TEXT NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_customer ON events (customer_id, seq);
CREATE TABLE IF NOT EXISTS stream_checkpoints (subscription TEXT PRIMARY KEY, seq INTEGER NOT NULL);
-- What finds an operation by value (OperationStore::find_operations): its items' references
-- and beneficiary ids, its transactions' rail references. Keyed in the lookup's order.
CREATE TABLE IF NOT EXISTS operation_finds (
    kind TEXT NOT NULL, value TEXT NOT NULL, customer_id TEXT NOT NULL, operation_id TEXT NOT NULL,
    PRIMARY KEY (kind, value, customer_id, operation_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id TEXT PRIMARY KEY, customer_id TEXT, version INTEGER NOT NULL, body TEXT NOT NULL);
-- The live endpoints by owner ('' for the platform): what every event's dispatch reads.
CREATE INDEX IF NOT EXISTS live_endpoints_by_owner ON webhook_endpoints (coalesce(customer_id, ''), id)
    WHERE json_extract(body, '$.status') <> 'deleted';
-- Each owner's count of live endpoints ('' for the platform), moved by every create and delete.
CREATE TABLE IF NOT EXISTS endpoint_rosters (
    owner TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
-- Each endpoint's health (its attempts counted, its breaker's state), versioned.
CREATE TABLE IF NOT EXISTS endpoint_health (
    endpoint_id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
-- The line of each ordered endpoint's deliveries of one operation's events, versioned.
CREATE TABLE IF NOT EXISTS delivery_lines (
    endpoint_id TEXT NOT NULL, operation_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, operation_id));
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, event_id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_by_event ON deliveries (event_id);
-- An operation's deliveries (Delivery::operation_id), on the document so older files need no
-- migration; those made before it was kept have none and are not in it.
CREATE INDEX IF NOT EXISTS deliveries_by_operation
    ON deliveries (json_extract(body, '$.operation_id'), event_id, id)
    WHERE json_extract(body, '$.operation_id') IS NOT NULL;
-- Failed deliveries awaiting a follow-up, by endpoint: a row is written when a delivery fails
-- and deleted when its follow-up is, so a delivered webhook's writes touch nothing here.
CREATE TABLE IF NOT EXISTS failed_deliveries (
    endpoint_id TEXT NOT NULL, event_id TEXT NOT NULL, delivery_id TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, event_id, delivery_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY, value TEXT NOT NULL, stored_at INTEGER NOT NULL DEFAULT 0);
-- `lane`: whose work a message is (a customer's, an endpoint's); lanes take turns.
CREATE TABLE IF NOT EXISTS queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, body TEXT NOT NULL,
    visible_at INTEGER NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0,
    lane TEXT NOT NULL DEFAULT '');
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
-- What each account posted each day (UTC), so its balance at the end of a past day is its
-- balance less the days after; kept from this table's making on.
CREATE TABLE IF NOT EXISTS account_days (
    account_id TEXT NOT NULL, day TEXT NOT NULL, posted INTEGER NOT NULL, PRIMARY KEY (account_id, day));
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
-- Amounts are decimal text: their sums outgrow SQLite's 64-bit integers, which would turn
-- them into inexact reals.
CREATE TABLE IF NOT EXISTS board_sums (
    owner TEXT NOT NULL, bucket TEXT NOT NULL, currency TEXT NOT NULL,
    count INTEGER NOT NULL, amount TEXT NOT NULL, PRIMARY KEY (owner, bucket, currency));
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
CREATE TABLE IF NOT EXISTS calendars (id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bank_files (id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rail_cutoffs (
    environment TEXT NOT NULL, rail TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (environment, rail));
CREATE TABLE IF NOT EXISTS reconciliation_rules (
    environment TEXT NOT NULL, rail TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (environment, rail));
-- Reconciliations newest import first, of all rails and of one; on the document, so older
-- files need no migration.
CREATE INDEX IF NOT EXISTS reconciliations_by_time ON reconciliations (
    unixepoch(json_extract(body, '$.created_at'), 'subsec'), id);
CREATE INDEX IF NOT EXISTS reconciliations_by_rail ON reconciliations (
    json_extract(body, '$.rail'), unixepoch(json_extract(body, '$.created_at'), 'subsec'), id);
-- Return checks sweep a rail's confirmed transactions by confirmation time, each check from
-- where it got to.
CREATE INDEX IF NOT EXISTS transactions_confirmed_time ON transactions (
    json_extract(body, '$.rail'), unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id)
    WHERE json_extract(body, '$.confirmed_at') IS NOT NULL;
CREATE TABLE IF NOT EXISTS return_sweeps (
    rail TEXT NOT NULL, check_index INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (rail, check_index));
-- Counts by the period (Period::key), so a chart reads the rows of its window.
CREATE TABLE IF NOT EXISTS tallies (
    period TEXT NOT NULL, customer_id TEXT NOT NULL, series TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (period, customer_id, series)) WITHOUT ROWID;
";

/// Whether the file has `table` yet (asked before [`SCHEMA`] makes what is missing).
pub(super) fn has_table(connection: &Connection, table: &str) -> Result<bool, StoreError> {
    connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |row| row.get::<_, i64>(0),
        )
        .map(|found| found > 0)
        .map_err(unavailable)
}

/// Fills the operations' lookup of a file made before it, once, from what its operations
/// and transactions hold.
pub(super) fn index_findings(connection: &Connection) -> Result<(), StoreError> {
    connection
        .execute_batch(
            "INSERT OR IGNORE INTO operation_finds (kind, value, customer_id, operation_id)
                 SELECT 'item_reference', json_extract(item.value, '$.reference'), o.customer_id, o.id
                 FROM operations o, json_each(o.body, '$.items') item
                 WHERE coalesce(json_extract(item.value, '$.reference'), '') <> '';
             INSERT OR IGNORE INTO operation_finds (kind, value, customer_id, operation_id)
                 SELECT 'beneficiary_id', json_extract(item.value, '$.beneficiary.id'), o.customer_id, o.id
                 FROM operations o, json_each(o.body, '$.items') item
                 WHERE coalesce(json_extract(item.value, '$.beneficiary.id'), '') <> '';
             INSERT OR IGNORE INTO operation_finds (kind, value, customer_id, operation_id)
                 SELECT 'rail_reference', json_extract(body, '$.rail_reference'),
                        json_extract(body, '$.customer_id'), operation_id
                 FROM transactions WHERE coalesce(json_extract(body, '$.rail_reference'), '') <> '';",
        )
        .map_err(unavailable)
}

/// Columns added to tables after files were made without them: `CREATE TABLE IF NOT EXISTS`
/// leaves an existing table as it was.
pub(super) fn add_missing_columns(connection: &Connection) -> Result<(), StoreError> {
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
    // Messages queued before lanes were kept share one lane.
    if !has("queue_messages", "lane")? {
        connection
            .execute_batch("ALTER TABLE queue_messages ADD COLUMN lane TEXT NOT NULL DEFAULT ''")
            .map_err(unavailable)?;
    }
    connection
        .execute_batch(
            "CREATE INDEX IF NOT EXISTS queue_messages_by_lane ON queue_messages (queue, lane, visible_at, id)",
        )
        .map_err(unavailable)?;
    Ok(())
}

/// Files made before board amounts were decimal text keep their counters in `board_counts`
/// (and, before 2026-11-26, the platform's sums as rows of their own, which no write updates
/// now and which would count everything twice): copied to `board_sums` once, then dropped.
pub(super) fn move_board_counts(connection: &Connection) -> Result<(), StoreError> {
    let older: i64 = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'board_counts'",
            [],
            |row| row.get(0),
        )
        .map_err(unavailable)?;
    if older > 0 {
        connection
            .execute_batch(
                "BEGIN IMMEDIATE;
                 INSERT OR IGNORE INTO board_sums (owner, bucket, currency, count, amount)
                     SELECT owner, bucket, currency, count, CAST(CAST(amount AS INTEGER) AS TEXT)
                     FROM board_counts WHERE owner <> 'PLATFORM';
                 DROP TABLE board_counts;
                 COMMIT;",
            )
            .map_err(unavailable)?;
    }
    Ok(())
}
