//! Derived changesets (the desk's moves on the board and its work items) committed in as few
//! transactions as their writes fit.
//!
//! Each move on the board is its entry and its customer's counters in one transaction: two
//! write units each, four a move. Changesets of different subjects committed together share
//! their counter updates: one transaction holds the batch's entries and one update of each
//! customer's counters, so a busy stream's moves take little more than their entries. Each
//! changeset is still all or nothing: if the merged transaction is refused (a condition failed:
//! another delivery or a claim got there first), its changesets are committed one by one, each
//! on its own terms, as they would have been alone.

use super::keys;
use super::*;
use aws_sdk_dynamodb::types::TransactWriteItem;
use ops_domain::ports::{Changeset, Commit, StoreError, Write};

/// Changesets to commit together, each with the items its own writes make (built once).
#[derive(Default)]
struct Group {
    members: Vec<(Changeset, Vec<TransactWriteItem>)>,
    /// The items the members' writes touch, and the counter items they update.
    touched: std::collections::HashSet<keys::Primary>,
    counters: std::collections::HashSet<keys::Primary>,
}

impl DynamoStore {
    /// Commits `changesets` in order, consecutive ones together while their writes touch
    /// different items and fit one transaction. A changeset written through an outbox is
    /// committed on its own.
    pub(super) async fn commit_merged(&self, changesets: Vec<Changeset>) -> Vec<Result<(), StoreError>> {
        let mut outcomes = Vec::with_capacity(changesets.len());
        let mut group = Group::default();
        for changes in changesets {
            if outbox::Split::of(&changes).is_some() {
                outcomes.extend(self.commit_group(std::mem::take(&mut group)).await);
                outcomes.push(self.commit(changes).await);
                continue;
            }
            let writes: Vec<&Write> = changes.writes.iter().collect();
            let items: Vec<TransactWriteItem> = writes.iter().flat_map(|write| self.write(write)).collect();
            let keys: Vec<keys::Primary> = items.iter().filter_map(written_key).collect();
            // Merged, a customer's counters are one update: at most the items each would update.
            let updates: Vec<keys::Primary> = self.board_counters(&writes).iter().filter_map(written_key).collect();
            let more = keys.len() + updates.iter().filter(|key| !group.counters.contains(*key)).count();
            let fits = group.touched.len() + group.counters.len() + more <= MAX_WRITES;
            if !fits || keys.iter().any(|key| group.touched.contains(key)) {
                outcomes.extend(self.commit_group(std::mem::take(&mut group)).await);
            }
            group.touched.extend(keys);
            group.counters.extend(updates);
            group.members.push((changes, items));
        }
        outcomes.extend(self.commit_group(group).await);
        outcomes
    }

    /// One transaction for the group's changesets, their counters summed; if it is refused,
    /// each changeset on its own.
    async fn commit_group(&self, group: Group) -> Vec<Result<(), StoreError>> {
        let members = group.members;
        if members.len() > 1 {
            let writes: Vec<&Write> = members.iter().flat_map(|(changes, _)| &changes.writes).collect();
            let mut merged: Vec<TransactWriteItem> = members.iter().flat_map(|(_, items)| items.clone()).collect();
            merged.extend(self.board_counters(&writes));
            match self.commit_finding(merged, finding_items(&writes)).await {
                Ok(()) => return members.iter().map(|_| Ok(())).collect(),
                Err(error) => tracing::debug!(%error, "a merged commit was refused; its changesets go one by one"),
            }
        }
        let mut outcomes = Vec::with_capacity(members.len());
        for (changes, mut items) in members {
            let writes: Vec<&Write> = changes.writes.iter().collect();
            items.extend(self.board_counters(&writes));
            outcomes.push(self.commit_finding(items, finding_items(&writes)).await);
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
