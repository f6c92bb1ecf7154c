//! The work desk's store port: queues, work items and the operations board's counters.

use super::keys;
use super::*;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use ops_domain::desk::board::{BoardCount, BoardEntry, Column};
use ops_domain::desk::{Assignee, DeskStore, Queue, WorkItem, WorkItemQuery, WorkItemStatus};
use ops_domain::ids::WorkItemId;
use ops_domain::ids::{CustomerId, OperationId};
use ops_domain::operations::Operation;
use ops_domain::ports::StoreError;
use time::OffsetDateTime;

#[async_trait]
impl DeskStore for DynamoStore {
    async fn work_item(&self, id: &WorkItemId) -> Result<Option<WorkItem>, StoreError> {
        self.get(keys::work_item(id)).await
    }

    async fn open_work_item(&self, queue: Queue, subject_id: &str) -> Result<Option<WorkItem>, StoreError> {
        self.meter.request();
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

pub(super) const COUNT_PREFIX: &str = "count|";
pub(super) const AMOUNT_PREFIX: &str = "amount|";

/// The board counters an owner's item in one currency holds, as the domain reads them. A
/// counter item of one bucket, as written before a currency's counters shared an item, is
/// read too: the domain adds up counters of the same bucket and currency.
pub(super) fn board_counts_of(item: &Item) -> Vec<BoardCount> {
    fn number<T: std::str::FromStr + Default>(item: &Item, name: &str) -> T {
        item.get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let currency = text("currency");
    let count = |bucket: String, count_name: &str, amount_name: &str| BoardCount {
        bucket,
        currency: (!currency.is_empty()).then(|| currency.clone()),
        count: number(item, count_name),
        amount: number(item, amount_name),
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
