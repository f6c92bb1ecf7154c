//! Reading the table: items by key (one `BatchGetItem` per 100), and lists as index queries
//! over one partition or every shard of one, merged newest first.

use super::keys;
use super::*;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use ops_domain::event::Event;
use ops_domain::ids::EventId;
use ops_domain::ports::{Listed, StoreError};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use time::OffsetDateTime;

impl DynamoStore {
    pub(super) async fn get<T: DeserializeOwned>(&self, key: keys::Primary) -> Result<Option<T>, StoreError> {
        self.get_item(key).await?.as_ref().map(read_doc).transpose()
    }

    /// The items of `keys` that exist, by key: strongly consistent `BatchGetItem`s of up to 100
    /// keys, each asking again for what DynamoDB did not get to. An index is eventually
    /// consistent; the items it names are read as they are now (a read costs a fifth of a
    /// write, doubled for consistency), so no list hands a pipeline step an older document
    /// than the index entry that led to it.
    pub(super) async fn items_by_key(
        &self,
        keys: &[keys::Primary],
    ) -> Result<HashMap<keys::Primary, Item>, StoreError> {
        self.items_by_key_read(keys, true).await
    }

    /// [`items_by_key`](Self::items_by_key), strongly consistent or not (half the read units).
    pub(super) async fn items_by_key_read(
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
                self.meter.request();
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

    pub(super) async fn get_item(&self, key: keys::Primary) -> Result<Option<Item>, StoreError> {
        self.meter.request();
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
    pub(super) async fn stored_event(&self, id: &EventId) -> Result<Option<Item>, StoreError> {
        match self.get_item(keys::event(id)).await? {
            Some(item) => Ok(Some(item)),
            None => self.get_item(keys::event_written_before(id)).await,
        }
    }

    /// The platform's events before `after`, newest first: the items of the table's event
    /// shards, merged with the GSI3 entries of events written before 2026-11-26 (which carry
    /// the same partition and sort keys there).
    pub(super) async fn every_event_newest_first(
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
    pub(super) async fn newest_entries(
        &self,
        sources: Vec<(Option<&'static str>, String)>,
        after: &str,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<(Vec<(String, Item, Option<&'static str>)>, Option<String>), StoreError> {
        self.newest_entries_from(sources, after, None, filter, limit).await
    }

    /// [`Self::newest_entries`] down to `from` (a sort key, included) when given.
    pub(super) async fn newest_entries_from(
        &self,
        sources: Vec<(Option<&'static str>, String)>,
        after: &str,
        from: Option<&str>,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<(Vec<(String, Item, Option<&'static str>)>, Option<String>), StoreError> {
        let budget = filter
            .as_ref()
            .map(|_| self.filtered_read_budget.load(Ordering::Relaxed));
        let filter = &filter;
        let read = futures_util::future::try_join_all(sources.into_iter().map(|(index, partition)| async move {
            let sort_key = format!("{}SK", index.unwrap_or(""));
            let pk = format!("{}PK = :pk", index.unwrap_or(""));
            let mut values = vec![(":pk", s(partition)), (":after", s(after))];
            // A key condition takes one test of the sort key: a range's is BETWEEN, which
            // includes `after`, left out below.
            let condition = match from {
                Some(from) => {
                    values.push((":from", s(from)));
                    format!("{pk} AND {sort_key} BETWEEN :from AND :after")
                }
                None => format!("{pk} AND {sort_key} < :after"),
            };
            let (entries, stopped_at) = self
                .query_entries_within(
                    index,
                    &condition,
                    values,
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
                    (key.as_str() != after).then_some((key, entry, index))
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
    pub(super) async fn newest_first_listed<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        after: String,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<Listed<T>, StoreError> {
        self.newest_first_listed_from(index, partition, after, None, filter, limit)
            .await
    }

    /// [`Self::newest_first_listed`] down to `from` (a sort key, included) when given.
    pub(super) async fn newest_first_listed_from<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        after: String,
        from: Option<String>,
        filter: Option<Filter>,
        limit: usize,
    ) -> Result<Listed<T>, StoreError> {
        let sources = partition.keys().into_iter().map(|key| (Some(index), key)).collect();
        let (found, read_up_to) = self
            .newest_entries_from(sources, &after, from.as_deref(), filter, limit)
            .await?;
        let entries: Vec<Item> = found.into_iter().map(|(_, entry, _)| entry).collect();
        Ok(Listed {
            items: self.items_of(&entries).await?,
            read_up_to,
        })
    }

    /// [`Self::newest_first_listed`] for a list kept with another's entries (approved and
    /// processing operations share theirs, [`keys::status_list`]): reads entries newest first,
    /// in rounds (down to `from`, a sort key, when given), and keeps the items `keep` takes
    /// (a filter on what only the document holds, such as an amount), until `limit` are kept,
    /// the partitions end, or [`ITEMS_READ_TO_KEEP`] items were read; then says where it read
    /// up to, so the next page goes on from there.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn newest_first_kept<T: DeserializeOwned>(
        &self,
        index: &'static str,
        partition: Partition,
        mut after: String,
        from: Option<String>,
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
            let (found, stopped_at) = self
                .newest_entries_from(sources, &after, from.as_deref(), filter.clone(), round)
                .await?;
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
    pub(super) async fn newest_first<T: DeserializeOwned>(
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
    pub(super) async fn due<T: DeserializeOwned>(
        &self,
        partitions: Vec<String>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        let due = self.due_entries(partitions, now, limit).await?;
        let before = self.meter.requests();
        let items = self.items_of(&due).await;
        self.meter.polled(self.meter.requests() - before);
        items
    }

    /// The entries of a sharded due index (GSI2: `<due>#<id>`) due at or before `now`, the
    /// soonest `limit` across the shards.
    pub(super) async fn due_entries(
        &self,
        partitions: Vec<String>,
        now: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
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
        // The sort key is the due time, then the id: the earliest across the shards first.
        due.sort_by_key(|entry| entry.get("GSI2SK").and_then(|k| k.as_s().ok()).cloned());
        due.truncate(limit);
        Ok(due)
    }

    /// Queries an index (or the table when `index` is `None`), following pages until `limit`
    /// items passed `filter` or the index has no more, and reads the items the index entries
    /// stand for. Filters name `status` and `type` as `#st` and `#ty` (both are reserved words).
    pub(super) async fn query<T: DeserializeOwned>(
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
    pub(super) async fn items_of<T: DeserializeOwned>(&self, entries: &[Item]) -> Result<Vec<T>, StoreError> {
        let keys: Vec<keys::Primary> = entries.iter().filter_map(primary_of).collect();
        let items = self.items_by_key(&keys).await?;
        keys.iter().filter_map(|key| items.get(key)).map(read_doc).collect()
    }

    /// The entries a query finds (items of the table, or an index's entries), up to `limit`.
    pub(super) async fn query_entries(
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
    pub(super) async fn query_entries_within(
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
            self.meter.request();
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
            self.meter.queried(bytes as u64);
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
pub(super) enum Partition {
    One(String),
    Sharded(Vec<String>),
}

impl Partition {
    /// Every partition key to query.
    pub(super) fn keys(self) -> Vec<String> {
        match self {
            Partition::One(key) => vec![key],
            Partition::Sharded(shards) => shards,
        }
    }
}

/// Reads every partition with `read`, concurrently, and returns what they hold together.
pub(super) async fn each_partition<T, F, Fut>(partitions: Vec<String>, read: F) -> Result<Vec<T>, StoreError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, StoreError>>,
{
    let read = futures_util::future::try_join_all(partitions.into_iter().map(read)).await?;
    Ok(read.into_iter().flatten().collect())
}

/// Equality conditions on plain attributes, applied after the key condition.
#[derive(Default, Clone)]
pub(super) struct Filter {
    /// (placeholder, attribute name, value)
    clauses: Vec<(&'static str, &'static str, String)>,
}

impl Filter {
    pub(super) fn with(mut self, placeholder: &'static str, name: &'static str, value: Option<&str>) -> Filter {
        if let Some(value) = value {
            self.clauses.push((placeholder, name, value.to_owned()));
        }
        self
    }

    pub(super) fn into_option(self) -> Option<Filter> {
        (!self.clauses.is_empty()).then_some(self)
    }

    pub(super) fn expression(&self) -> String {
        self.clauses
            .iter()
            .map(|(p, _, _)| format!("#{p} = :{p}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}
