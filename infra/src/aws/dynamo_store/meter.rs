//! What the store counts of its own requests and writes: the benchmark's cost figures and the
//! tests that hold the pipeline to them read it. Nothing here decides what is written.

use super::IndexImages;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub struct Meter {
    requests: AtomicU64,
    /// Transactions sent and the items they wrote.
    transactions: AtomicU64,
    transaction_items: AtomicU64,
    /// The other writes: lone puts, idempotency claims and releases, plain puts of a batch.
    single_writes: AtomicU64,
    /// Write units those writes take on demand, index entries included.
    write_units: AtomicU64,
    conflicted_units: AtomicU64,
    /// The same units by the kind of item written (its `entity`).
    units_by_kind: Mutex<BTreeMap<String, u64>>,
    /// Queries of the poll schedule's shards (a fixed cost per round, not per payout).
    poll_queries: AtomicU64,
    /// Bytes of the items queries answered, as DynamoDB sizes them (what their read units
    /// are charged by).
    queried_bytes: AtomicU64,
    /// When index entries are counted exactly: what each item written so far put in each
    /// index, so an update that leaves an entry alone costs nothing.
    index_images: Mutex<Option<IndexImages>>,
}

impl Meter {
    /// Requests sent to DynamoDB so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Bytes of the items queries have answered so far.
    pub fn queried_bytes(&self) -> u64 {
        self.queried_bytes.load(Ordering::Relaxed)
    }

    /// `(transactions, items written by them)` so far; each item costs two write units.
    pub fn transactions(&self) -> (u64, u64) {
        (
            self.transactions.load(Ordering::Relaxed),
            self.transaction_items.load(Ordering::Relaxed),
        )
    }

    /// Writes of one item outside a transaction: changesets of one put, sent as a `PutItem`,
    /// and the idempotency records' claims and releases.
    pub fn single_writes(&self) -> u64 {
        self.single_writes.load(Ordering::Relaxed)
    }

    /// Write units so far by the kind of item written (`operation`, `event`, `audit` …).
    pub fn write_units_by_kind(&self) -> BTreeMap<String, u64> {
        self.units_by_kind.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads the poll schedule makes every round whatever the traffic (its shards' queries,
    /// the return sweeps' positions and queries) so far.
    pub fn poll_queries(&self) -> u64 {
        self.poll_queries.load(Ordering::Relaxed)
    }

    /// From now on, remembers what each item written put in the indexes, so
    /// [`write_units`](Self::write_units) counts an index entry only where a write changes it
    /// (the memory grows with the items written).
    pub fn count_index_entries_exactly(&self) {
        self.index_images().get_or_insert_with(Default::default);
    }

    /// Write units of every write so far, estimated from item sizes.
    pub fn write_units(&self) -> u64 {
        self.write_units.load(Ordering::Relaxed)
    }

    /// Of [`write_units`](Self::write_units), those of changesets refused by a condition or a
    /// conflicting transaction (then drafted again): what a race cost, not the design.
    pub fn conflicted_write_units(&self) -> u64 {
        self.conflicted_units.load(Ordering::Relaxed)
    }

    pub(super) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A write of one small item of `kind` outside a transaction: one request, one unit.
    pub(super) fn small_write(&self, kind: &str) {
        self.request();
        self.single_write();
        self.units(kind, 1);
    }

    pub(super) fn single_write(&self) {
        self.single_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn units(&self, kind: &str, units: u64) {
        self.write_units.fetch_add(units, Ordering::Relaxed);
        let mut by_kind = self.units_by_kind.lock().unwrap_or_else(|e| e.into_inner());
        *by_kind.entry(kind.to_owned()).or_default() += units;
    }

    pub(super) fn transaction(&self, items: usize) {
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.transaction_items.fetch_add(items as u64, Ordering::Relaxed);
    }

    pub(super) fn conflicted(&self, units: u64) {
        self.conflicted_units.fetch_add(units, Ordering::Relaxed);
    }

    pub(super) fn polled(&self, queries: u64) {
        self.poll_queries.fetch_add(queries, Ordering::Relaxed);
    }

    pub(super) fn queried(&self, bytes: u64) {
        self.queried_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn index_images(&self) -> MutexGuard<'_, Option<IndexImages>> {
        self.index_images.lock().unwrap_or_else(|e| e.into_inner())
    }
}
