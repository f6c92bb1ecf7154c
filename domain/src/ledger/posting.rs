//! Postings: the movements one changeset places and settles, and the balance changes they
//! make, summed per account (a store may touch an item once per transaction).

use super::{Movement, MovementStatus};
use crate::ids::AccountId;
use crate::ports::{Changeset, Write};
use std::collections::BTreeMap;

/// A change to one account's balances. `guard` refuses it (as a conflict) if it would take
/// `available` below zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BalanceChange {
    pub posted: i64,
    pub pending_debits: i64,
    pub pending_credits: i64,
}

impl BalanceChange {
    pub fn available(&self) -> i64 {
        self.posted - self.pending_debits
    }

    fn add(&mut self, other: &BalanceChange) {
        self.posted += other.posted;
        self.pending_debits += other.pending_debits;
        self.pending_credits += other.pending_credits;
    }
}

/// The balance change of one account in one changeset (a store may touch an item once per
/// transaction, so each account's changes are summed first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountChange {
    pub account_id: AccountId,
    pub change: BalanceChange,
    /// Refuse (as a conflict) if `available` would fall below zero.
    pub guard_available: bool,
    /// The day (UTC) the change is made: the store keeps what each day posted, so an
    /// account's balance at the end of a day can be read back (a statement's balances are
    /// checked against it).
    pub on: time::Date,
}

/// Movements placed and settled in one changeset, with the balance changes they make.
#[derive(Debug, Default)]
pub struct Posting {
    movements: Vec<(Movement, bool)>,
    changes: BTreeMap<AccountId, BalanceChange>,
    guarded: Vec<AccountId>,
    on: Option<time::Date>,
}

impl Posting {
    /// A new movement (pending or posted). Debits of `guarded` accounts are checked against
    /// their available balance when stored.
    pub fn place(&mut self, movement: Movement, guarded: &[&AccountId]) {
        for (account, change) in movement.placed() {
            if guarded.contains(&&account) && change.available() < 0 && !self.guarded.contains(&account) {
                self.guarded.push(account.clone());
            }
            self.changes.entry(account).or_default().add(&change);
        }
        self.on = self.on.max(Some(movement.cause.at.date()));
        self.movements.push((movement, true));
    }

    /// A pending movement just posted or voided with [`Movement::apply`].
    pub fn settle(&mut self, movement: Movement) {
        for (account, change) in movement.settled() {
            self.changes.entry(account).or_default().add(&change);
        }
        let at = movement.posted_at.unwrap_or(movement.cause.at);
        self.on = self.on.max(Some(at.date()));
        self.movements.push((movement, false));
    }

    pub fn is_empty(&self) -> bool {
        self.movements.is_empty()
    }

    /// Net change to `account` so far.
    pub fn change_of(&self, account: &AccountId) -> BalanceChange {
        self.changes.get(account).cloned().unwrap_or_default()
    }

    /// The writes: each movement with its audit entry and event, then one balance change per
    /// account.
    pub fn write_to(
        self,
        changes: &mut Changeset,
        ids: &dyn crate::ids::IdGenerator,
        environment: crate::access::Environment,
    ) {
        for (movement, new) in self.movements {
            let from = (!new).then_some(MovementStatus::Pending.as_str());
            let mut entry = crate::ports::AuditEntry::new(
                "movement",
                &movement.id,
                if new { "created" } else { "status_changed" },
                movement.cause.clone(),
            )
            .moving(from, movement.status.as_str());
            entry.operation_id = movement.operation_id.as_ref().map(|id| id.to_string());
            changes.push(Write::Audit(entry));
            changes.push(Write::Event(crate::event::Event::of_movement(
                crate::ids::EventId::new(ids),
                &movement,
                environment,
            )));
            changes.push(if new {
                Write::InsertMovement(movement)
            } else {
                Write::UpdateMovement(movement)
            });
        }
        let on = self.on.unwrap_or(time::Date::MIN);
        for (account_id, change) in self.changes {
            if change == BalanceChange::default() {
                continue;
            }
            let guard_available = self.guarded.contains(&account_id) && change.available() < 0;
            changes.push(Write::ChangeBalances(AccountChange {
                account_id,
                change,
                guard_available,
                on,
            }));
        }
    }
}
