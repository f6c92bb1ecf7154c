//! Where the kill tests make the store die, stall or fail part-way, as a process that ends, a
//! process paused and a throttled table would. Each hook does nothing until a test sets it.

use super::key_first::{AfterKeyRecord, KeyFirst};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub struct Faults {
    /// How many of a changeset's events and audit entries its writer writes after the entity.
    crash_after_entity: AtomicUsize,
    /// How many more calls of `commit_derived_each` may write before the rest fail.
    derived_commits_left: AtomicUsize,
    /// What a create written key first does after its key's record, and its entity's deadline.
    key_first: Mutex<KeyFirst>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            crash_after_entity: AtomicUsize::new(usize::MAX),
            derived_commits_left: AtomicUsize::new(usize::MAX),
            key_first: Mutex::default(),
        }
    }
}

impl Faults {
    /// From now on a changeset written through an outbox stops after its entity's write and
    /// the first `keep` of its events and audit entries, as if its writer died there
    /// (`usize::MAX`, the default: nothing is skipped).
    pub fn crash_after_entity_writes(&self, keep: usize) {
        self.crash_after_entity.store(keep, Ordering::Relaxed);
    }

    /// After `calls` more calls of `commit_derived_each` (a stream consumer's waves), the next
    /// ones fail without writing (`usize::MAX`: never).
    pub fn fail_derived_commits_after(&self, calls: usize) {
        self.derived_commits_left.store(calls, Ordering::Relaxed);
    }

    /// What a create written key first does from now on after its key's record.
    pub fn after_key_record(&self, what: AfterKeyRecord) {
        self.key_first.lock().unwrap_or_else(|e| e.into_inner()).after_record = what;
    }

    /// A deadline shorter than the entity's usual one, so that a stall can outlast it in a
    /// test's time.
    pub fn shorten_entity_deadline(&self, deadline: std::time::Duration) {
        self.key_first.lock().unwrap_or_else(|e| e.into_inner()).entity_deadline = deadline;
    }

    /// How many derived writes after an entity are written (all but in kill tests).
    pub(super) fn derived_kept(&self) -> usize {
        self.crash_after_entity.load(Ordering::Relaxed)
    }

    /// Whether a derived commit may go ahead (always but in kill tests).
    pub(super) fn derived_commit_allowed(&self) -> bool {
        self.derived_commits_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1))
            .is_ok()
    }

    pub(super) fn key_first(&self) -> KeyFirst {
        *self.key_first.lock().unwrap_or_else(|e| e.into_inner())
    }
}
