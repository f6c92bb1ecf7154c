//! The work desk's store port: queues, work items and the operations board.

use super::*;
use async_trait::async_trait;
use ops_domain::desk::board::{BoardCount, BoardEntry, Column};
use ops_domain::desk::{Assignee, DeskStore, Queue, WorkItem, WorkItemQuery};
use ops_domain::ids::WorkItemId;
use ops_domain::ids::{CustomerId, OperationId};
use ops_domain::operations::Operation;
use ops_domain::ports::StoreError;
use rusqlite::types::Value;
use rusqlite::{params, OptionalExtension};
use time::OffsetDateTime;

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
            // The platform's board: every customer's counters, which the domain adds up (in
            // 128 bits; SQLite's sum would overflow).
            let sql = match owner {
                Some(_) => "SELECT bucket, currency, count, amount FROM board_sums WHERE owner = ?1",
                None => "SELECT bucket, currency, count, amount FROM board_sums",
            };
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(&owner), |row| {
                    let currency: String = row.get(1)?;
                    Ok(BoardCount {
                        bucket: row.get(0)?,
                        currency: (!currency.is_empty()).then_some(currency),
                        count: row.get(2)?,
                        amount: super::writes::decimal(row, 3)?,
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
