//! What a write costs in on-demand write units, counted for the benchmark's table.

use super::*;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

/// An item's entry in each index: its keys and projected attributes, where it has the keys.
pub(super) fn index_image(item: &Item) -> Vec<Option<String>> {
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
pub(super) fn index_units(before: Option<&String>, after: Option<&String>) -> u64 {
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
    pub(super) fn write_units_of(&self, write: &TransactWriteItem, transactional: bool) -> (u64, Option<IndexImage>) {
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
        let images = self.meter.index_images();
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
pub(super) fn attribute_bytes(name: &str, value: &AttributeValue) -> usize {
    name.len()
        + match value {
            AttributeValue::S(text) | AttributeValue::N(text) => text.len(),
            AttributeValue::B(blob) => blob.as_ref().len(),
            _ => 1,
        }
}

/// What a write writes, for the benchmark's table: a put's item's `entity`; else a deletion,
/// or an update (a board counter's, a balance's).
pub(super) fn kind_of(write: &TransactWriteItem) -> &str {
    let entity = write
        .put()
        .and_then(|put| put.item().get("entity"))
        .and_then(|e| e.as_s().ok());
    // A tally's counter is told apart from the board's (both are updates).
    let tally = write
        .update()
        .and_then(|update| update.expression_attribute_values())
        .and_then(|values| values.get(":entity"))
        .is_some_and(|entity| entity.as_s().is_ok_and(|entity| entity == "tally"));
    match entity {
        Some(entity) => entity,
        None if write.delete().is_some() => "delete",
        None if tally => "tally",
        None => "update",
    }
}
