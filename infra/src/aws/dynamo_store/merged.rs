//! Derived changesets (the desk's moves on the board and its work items) committed in as few
//! transactions as their writes fit (issue 17).
//!
//! Each move on the board is its entry and its customer's counters in one transaction: two
//! write units each, four a move. Changesets of different subjects committed together share
//! their counter updates: one transaction holds the batch's entries and one update of each
//! customer's counters, so a busy stream's moves take little more than their entries. Each
//! changeset is still all or nothing: if the merged transaction is refused (a condition failed:
//! another delivery or a claim got there first), its changesets are committed one by one, each
//! on its own terms, as they would have been alone.

use super::*;

impl DynamoStore {
    /// Commits `changesets` in order, consecutive ones together while their writes touch
    /// different items and fit one transaction. A changeset written through an outbox is
    /// committed on its own.
    pub(super) async fn commit_merged(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        let mut outcomes = Vec::with_capacity(changesets.len());
        let mut group: Vec<Changeset> = vec![];
        // The items the group's own writes touch, and the counter items it updates.
        let mut touched = std::collections::HashSet::new();
        let mut counters = std::collections::HashSet::new();
        for changes in changesets {
            if outbox::Split::of(&changes).is_some() {
                outcomes.extend(self.commit_group(std::mem::take(&mut group)).await);
                touched.clear();
                counters.clear();
                outcomes.push(self.commit(changes).await);
                continue;
            }
            let writes: Vec<&Write> = changes.writes.iter().collect();
            let keys: Vec<keys::Primary> = writes
                .iter()
                .flat_map(|write| self.write(write))
                .filter_map(|item| written_key(&item))
                .collect();
            // Merged, a customer's counters are one update: at most the items each would update.
            let updates: Vec<keys::Primary> = self.board_counters(&writes).iter().filter_map(written_key).collect();
            let more = keys.len() + updates.iter().filter(|key| !counters.contains(*key)).count();
            if touched.len() + counters.len() + more > MAX_WRITES || keys.iter().any(|key| touched.contains(key)) {
                outcomes.extend(self.commit_group(std::mem::take(&mut group)).await);
                touched.clear();
                counters.clear();
            }
            touched.extend(keys);
            counters.extend(updates);
            group.push(changes);
        }
        outcomes.extend(self.commit_group(group).await);
        outcomes
    }

    /// One transaction for the group's changesets, their counters summed; if it is refused,
    /// each changeset on its own.
    async fn commit_group(&self, group: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        if group.len() > 1 {
            let writes: Vec<&Write> = group.iter().flat_map(|changes| &changes.writes).collect();
            match self.commit_items(self.changeset_items(&writes)).await {
                Ok(()) => return group.iter().map(|_| Ok(())).collect(),
                Err(error) => tracing::debug!(%error, "a merged commit was refused; its changesets go one by one"),
            }
        }
        let mut outcomes = Vec::with_capacity(group.len());
        for changes in group {
            outcomes.push(self.commit(changes).await);
        }
        outcomes
    }
}

/// The item a transaction's write touches.
fn written_key(write: &TransactWriteItem) -> Option<keys::Primary> {
    let key = match (write.put(), write.update(), write.delete(), write.condition_check()) {
        (Some(put), ..) => return primary_of(put.item()),
        (_, Some(update), ..) => update.key(),
        (_, _, Some(delete), _) => delete.key(),
        (_, _, _, Some(check)) => check.key(),
        _ => return None,
    };
    primary_of(key)
}
