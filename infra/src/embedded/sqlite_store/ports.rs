//! The domain's store ports (one per area) on the SQLite file: reads on the read
//! connections, changesets through the writer.

use super::*;
use crate::page_start;
use async_trait::async_trait;
use ops_domain::access::Environment;
use ops_domain::access::{AccessStore, ApiKey, Customer, CustomerStatus, User};
use ops_domain::approvals::{Workflow, WorkflowOwner, WorkflowStore};
use ops_domain::calendars::{Calendar, CalendarStore, RailCutoffs};
use ops_domain::event::Event;
use ops_domain::files::{File, FileQuery, FileStore};
use ops_domain::history::{HistoryStore, MAX_ENTITY_HISTORY};
use ops_domain::idempotency::{
    ClaimOutcome, IdempotencyClaim, IdempotencyStore, StoredResponse, CLAIM_TIMEOUT, RETENTION,
};
use ops_domain::ids::{AccountId, FileId, MovementId, ReconciliationId};
use ops_domain::ids::{
    ApiKeyId, CustomerId, DeliveryId, EventId, OperationId, ScheduleId, TransactionId, UserId, WebhookEndpointId,
};
use ops_domain::ids::{BankFileId, CalendarId};
use ops_domain::ledger::{Account, AccountQuery, LedgerStore, Movement};
use ops_domain::money::Currency;
use ops_domain::operations::{Operation, OperationFind, OperationQuery, OperationStore};
use ops_domain::ports::{AuditEntry, Changeset, Commit, Listed, StoreError};
use ops_domain::reconciliations::{Reconciliation, ReconciliationQuery, ReconciliationRules, ReconciliationStore};
use ops_domain::schedules::{Occurrence, Schedule, ScheduleQuery, ScheduleStore};
use ops_domain::transactions::{BankFile, BankFileStore};
use ops_domain::transactions::{ReturnSweep, Transaction, TransactionStatus, TransactionStore};
use ops_domain::webhooks::{
    Delivery, DeliveryLine, EndpointHealth, EndpointRoster, EventQuery, WebhookEndpoint, WebhookStore,
};
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

/// An entity's newest audit entries outside any operation (`?2` of them), oldest first.
pub(super) const ENTITY_HISTORY: &str =
    "SELECT body FROM (SELECT seq, body FROM audit WHERE entity_id = ?1 AND operation_id IS NULL
     ORDER BY seq DESC LIMIT ?2) ORDER BY seq";

/// The platform's live endpoints and customer `?1`'s, by id.
pub(super) const LIVE_ENDPOINTS: &str = "SELECT body FROM webhook_endpoints
     WHERE coalesce(customer_id, '') IN ('', ?1) AND json_extract(body, '$.status') <> 'deleted' ORDER BY id";

/// Every customer, newest first, before `?1` (a page's start), at most `?2`.
pub(super) const CUSTOMERS: &str = "SELECT body FROM customers WHERE id < ?1 ORDER BY id DESC LIMIT ?2";

/// The customers in one status (`?1`), newest first, before `?2`, at most `?3`.
pub(super) const CUSTOMERS_IN_STATUS: &str =
    "SELECT body FROM customers WHERE json_extract(body, '$.status') = ?1 AND id < ?2
     ORDER BY id DESC LIMIT ?3";

/// A customer's users, newest first, before `?2` (a page's start), at most `?3`.
pub(super) const USERS_OF: &str = "SELECT body FROM users WHERE customer_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3";

/// A customer's keys (`''`: the platform's), newest first, before `?2`, at most `?3`.
pub(super) const API_KEYS_OF: &str =
    "SELECT body FROM api_keys WHERE coalesce(json_extract(body, '$.customer_id'), '') = ?1
     AND id < ?2 ORDER BY id DESC LIMIT ?3";

/// An endpoint's failed deliveries awaiting a follow-up (`?4` of them), by event, after
/// event `?2`'s delivery `?3` (`''` for the first page: ids are never empty).
pub(super) const FAILED_DELIVERIES: &str =
    "SELECT d.body FROM failed_deliveries f JOIN deliveries d ON d.id = f.delivery_id
     WHERE f.endpoint_id = ?1 AND (f.event_id, f.delivery_id) > (?2, ?3)
     ORDER BY f.event_id, f.delivery_id LIMIT ?4";

pub(super) const OPERATION_DELIVERIES: &str = "SELECT body FROM deliveries
     WHERE json_extract(body, '$.operation_id') = ?1 AND (event_id, id) > (?2, ?3)
     ORDER BY event_id, id LIMIT ?4";

/// A rail's transactions confirmed in a window, from a sweep's position (a time and an id),
/// oldest first. The scalar window bounds are what let SQLite seek the index at the sweep's
/// position (a row-value bound alone leaves it reading from the rail's first confirmation).
pub(super) const CONFIRMED_BETWEEN: &str = "SELECT body FROM transactions WHERE json_extract(body, '$.confirmed_at') IS NOT NULL
     AND json_extract(body, '$.rail') = ?1
     AND unixepoch(json_extract(body, '$.confirmed_at'), 'subsec') BETWEEN unixepoch(?2, 'subsec') AND unixepoch(?4, 'subsec')
     AND (unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id) > (unixepoch(?2, 'subsec'), ?3)
     ORDER BY unixepoch(json_extract(body, '$.confirmed_at'), 'subsec'), id LIMIT ?5";

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
                .filter("id >= ?", query.created_from.clone().map(String::from))
                .filter_unkeyed("type", query.kind.map(|k| k.as_str().to_owned()), budget)
                .filter_unkeyed_by(
                    "json_extract(body, '$.total_amount') >= ?",
                    query.min_amount.map(Value::Integer),
                    budget,
                )
                .filter_unkeyed_by(
                    "json_extract(body, '$.total_amount') <= ?",
                    query.max_amount.map(Value::Integer),
                    budget,
                )
                .run(c)
        })
        .await
    }

    async fn find_operations(&self, find: &OperationFind) -> Result<Vec<Operation>, StoreError> {
        // One statement per shape, so each seeks the lookup's key (`kind, value, customer_id`).
        macro_rules! finds {
            ($filter:literal) => {
                concat!(
                    "SELECT o.body FROM operation_finds f JOIN operations o ON o.id = f.operation_id
                     WHERE f.kind = ? AND f.value = ?",
                    $filter,
                    " ORDER BY f.customer_id DESC, f.operation_id DESC LIMIT ?"
                )
            };
        }
        let mut keys = vec![find.by.as_str().to_owned(), find.value.clone()];
        let sql: &'static str = match (&find.customer_id, &find.after) {
            (None, None) => finds!(""),
            (Some(_), None) => finds!(" AND f.customer_id = ?"),
            (None, Some(_)) => finds!(" AND (f.customer_id, f.operation_id) < (?, ?)"),
            (Some(_), Some(_)) => finds!(" AND f.customer_id = ? AND (f.customer_id, f.operation_id) < (?, ?)"),
        };
        keys.extend(find.customer_id.iter().map(String::from));
        if let Some((customer_id, operation_id)) = &find.after {
            keys.extend([customer_id.to_string(), operation_id.to_string()]);
        }
        self.documents_of(sql, keys, find.limit).await
    }

    async fn approvals_expiring(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<Operation>, StoreError> {
        // Expiries are whole seconds in UTC, so their text sorts as their time does.
        let until = now
            .replace_nanosecond(0)
            .expect("0 is a valid nanosecond")
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(unavailable)?;
        let sql = "SELECT body FROM operations WHERE status = 'pending_approval'
                   AND json_extract(body, '$.approval_expires_at') IS NOT NULL
                   AND json_extract(body, '$.approval_expires_at') <= ?
                   ORDER BY json_extract(body, '$.approval_expires_at') LIMIT ?";
        self.documents_of(sql, vec![until], limit).await
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

    async fn workflows_after(
        &self,
        owner: &WorkflowOwner,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Workflow>, StoreError> {
        self.documents_of(
            "SELECT body FROM workflows WHERE owner = ?1 AND name > ?2 ORDER BY name LIMIT ?3",
            vec![owner_key(owner), after.to_owned()],
            limit,
        )
        .await
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

    async fn transactions_in(
        &self,
        status: TransactionStatus,
        customer_id: Option<&CustomerId>,
        starting_after: Option<&TransactionId>,
        limit: usize,
    ) -> Result<Vec<Transaction>, StoreError> {
        // The status spelled out, so SQLite sees the statement stays within the partial index.
        macro_rules! watched {
            ($status:literal) => {
                concat!(
                    "SELECT body FROM transactions WHERE status = '",
                    $status,
                    "' AND (?1 = '' OR json_extract(body, '$.customer_id') = ?1) AND id < ?2
                     ORDER BY id DESC LIMIT ?3"
                )
            };
        }
        let sql = match status {
            TransactionStatus::Unknown => watched!("unknown"),
            TransactionStatus::NeedsAttention => watched!("needs_attention"),
            _ => return Ok(vec![]),
        };
        let keys = vec![
            customer_id.map(String::from).unwrap_or_default(),
            page_start(starting_after.map(|id| id.as_str())),
        ];
        self.documents_of(sql, keys, limit).await
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

    async fn reconciliations(&self, query: &ReconciliationQuery) -> Result<Vec<Reconciliation>, StoreError> {
        // By import time as the indexes hold it; a page goes on before the last one's place.
        const ALL: &str = "SELECT body FROM reconciliations
            ORDER BY unixepoch(json_extract(body, '$.created_at'), 'subsec') DESC, id DESC LIMIT ?";
        const OF_RAIL: &str = "SELECT body FROM reconciliations WHERE json_extract(body, '$.rail') = ?
            ORDER BY unixepoch(json_extract(body, '$.created_at'), 'subsec') DESC, id DESC LIMIT ?";
        // The first bound lets the index seek to the page's place; the pair orders ties by id.
        const ALL_BEFORE: &str = "SELECT body FROM reconciliations
            WHERE unixepoch(json_extract(body, '$.created_at'), 'subsec') <= unixepoch(?, 'subsec')
            AND (unixepoch(json_extract(body, '$.created_at'), 'subsec'), id) < (unixepoch(?, 'subsec'), ?)
            ORDER BY unixepoch(json_extract(body, '$.created_at'), 'subsec') DESC, id DESC LIMIT ?";
        const OF_RAIL_BEFORE: &str = "SELECT body FROM reconciliations WHERE json_extract(body, '$.rail') = ?
            AND unixepoch(json_extract(body, '$.created_at'), 'subsec') <= unixepoch(?, 'subsec')
            AND (unixepoch(json_extract(body, '$.created_at'), 'subsec'), id) < (unixepoch(?, 'subsec'), ?)
            ORDER BY unixepoch(json_extract(body, '$.created_at'), 'subsec') DESC, id DESC LIMIT ?";
        let cursor = query.starting_after.as_ref().map(|last| {
            let at = last.created_at.format(&time::format_description::well_known::Rfc3339);
            let at = at.unwrap_or_default();
            vec![at.clone(), at, last.id.to_string()]
        });
        let (sql, keys) = match (query.rail.clone(), cursor) {
            (None, None) => (ALL, vec![]),
            (Some(rail), None) => (OF_RAIL, vec![rail]),
            (None, Some(cursor)) => (ALL_BEFORE, cursor),
            (Some(rail), Some(cursor)) => (OF_RAIL_BEFORE, [vec![rail], cursor].concat()),
        };
        self.documents_of(sql, keys, query.limit).await
    }

    async fn reconciliation_rules(
        &self,
        rail: &str,
        environment: Environment,
    ) -> Result<Option<ReconciliationRules>, StoreError> {
        self.document_by(
            "SELECT body FROM reconciliation_rules WHERE environment = ?1 AND rail = ?2",
            params![environment.as_str(), rail],
        )
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

    async fn posted_at_end_of(&self, account: &AccountId, day: Date) -> Result<Option<i64>, StoreError> {
        let (account, day) = (account.to_string(), day.to_string());
        self.read(move |c| {
            c.query_row(
                "SELECT a.posted - coalesce((SELECT sum(d.posted) FROM account_days d
                   WHERE d.account_id = a.id AND d.day > ?2), 0)
                 FROM accounts a WHERE a.id = ?1",
                params![account, day],
                |row| row.get::<_, i64>(0),
            )
            .optional()
            .map_err(unavailable)
        })
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

    async fn endpoint_health(&self, endpoint_id: &WebhookEndpointId) -> Result<Option<EndpointHealth>, StoreError> {
        self.document(
            "SELECT body FROM endpoint_health WHERE endpoint_id = ?1",
            endpoint_id.into(),
        )
        .await
    }

    async fn delivery_line(
        &self,
        endpoint_id: &WebhookEndpointId,
        operation_id: &OperationId,
    ) -> Result<Option<DeliveryLine>, StoreError> {
        let keys = vec![endpoint_id.to_string(), operation_id.to_string()];
        let found = self
            .documents_of(
                "SELECT body FROM delivery_lines WHERE endpoint_id = ?1 AND operation_id = ?2 LIMIT ?3",
                keys,
                1,
            )
            .await?;
        Ok(found.into_iter().next())
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

    async fn deliveries_of_event(
        &self,
        event_id: &EventId,
        _operation_id: Option<&OperationId>,
    ) -> Result<Vec<Delivery>, StoreError> {
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

    async fn deliveries_of_operation(
        &self,
        operation_id: &OperationId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let (event_id, delivery_id) =
            after.map_or_else(Default::default, |d| (d.event_id.to_string(), d.id.to_string()));
        let keys = vec![operation_id.to_string(), event_id, delivery_id];
        self.documents_of(OPERATION_DELIVERIES, keys, limit).await
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

#[async_trait]
impl BankFileStore for SqliteStore {
    async fn bank_file(&self, id: &BankFileId) -> Result<Option<BankFile>, StoreError> {
        self.document("SELECT body FROM bank_files WHERE id = ?1", id.into())
            .await
    }
}

#[async_trait]
impl CalendarStore for SqliteStore {
    async fn calendar(&self, id: &CalendarId) -> Result<Option<Calendar>, StoreError> {
        self.document("SELECT body FROM calendars WHERE id = ?1", id.into())
            .await
    }

    async fn rail_cutoffs(&self, rail: &str, environment: Environment) -> Result<Option<RailCutoffs>, StoreError> {
        self.document_by(
            "SELECT body FROM rail_cutoffs WHERE environment = ?1 AND rail = ?2",
            params![environment.as_str(), rail],
        )
    }
}
