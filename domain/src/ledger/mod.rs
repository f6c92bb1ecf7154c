//! Accounts and movements: a double-entry ledger. A movement debits one account
//! and credits another by the same amount, so every movement balances and the entries of all
//! accounts sum to zero by construction. An account's balances are kept on the account as
//! movements are placed, posted and voided (in the same changeset), never summed from history.

mod flows;
mod posting;
mod use_cases;

pub use posting::{AccountChange, BalanceChange, Posting};
pub use use_cases::{AdjustAccount, CreateAccount, MAX_FUNDED_ITEMS, MAX_TRANSFER_ITEMS};

use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::{AccountId, CustomerId, MovementId, OperationId, TransactionId};
use crate::money::{Amount, Currency};
use crate::ports::StoreError;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountKind {
    /// A customer's money held by the PSP; never overdrawn by a hold or a transfer.
    Customer,
    /// The PSP's position at one rail in one currency: the other side of every payout.
    Settlement,
    Fees,
    /// The other side of an operator's funding or correction.
    Adjustments,
}

impl AccountKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountKind::Customer => "customer",
            AccountKind::Settlement => "settlement",
            AccountKind::Fees => "fees",
            AccountKind::Adjustments => "adjustments",
        }
    }

    pub fn parse(value: &str) -> Option<AccountKind> {
        [
            AccountKind::Customer,
            AccountKind::Settlement,
            AccountKind::Fees,
            AccountKind::Adjustments,
        ]
        .into_iter()
        .find(|k| k.as_str() == value)
    }
}

/// An account's running totals, in minor units. `posted` = posted credits − posted debits;
/// pending debits (holds) and credits are kept apart so `available` never counts money on its
/// way in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredBalances", into = "ShownBalances")]
pub struct Balances {
    pub posted: i64,
    pub pending_debits: i64,
    pub pending_credits: i64,
}

impl Balances {
    /// Posted, with every pending movement counted as if it were posted.
    pub fn pending(&self) -> i64 {
        self.posted + self.pending_credits - self.pending_debits
    }

    /// What may be spent: posted, less the holds.
    pub fn available(&self) -> i64 {
        self.posted - self.pending_debits
    }

    pub fn apply(&mut self, change: &BalanceChange) {
        self.posted += change.posted;
        self.pending_debits += change.pending_debits;
        self.pending_credits += change.pending_credits;
    }
}

#[derive(Deserialize)]
struct StoredBalances {
    posted: i64,
    #[serde(default)]
    pending_debits: i64,
    #[serde(default)]
    pending_credits: i64,
}

impl From<StoredBalances> for Balances {
    fn from(b: StoredBalances) -> Balances {
        Balances {
            posted: b.posted,
            pending_debits: b.pending_debits,
            pending_credits: b.pending_credits,
        }
    }
}

#[derive(Serialize)]
struct ShownBalances {
    posted: i64,
    pending: i64,
    available: i64,
    pending_debits: i64,
    pending_credits: i64,
}

impl From<Balances> for ShownBalances {
    fn from(b: Balances) -> ShownBalances {
        ShownBalances {
            posted: b.posted,
            pending: b.pending(),
            available: b.available(),
            pending_debits: b.pending_debits,
            pending_credits: b.pending_credits,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub id: AccountId,
    /// None for the platform's own accounts.
    pub customer_id: Option<CustomerId>,
    pub currency: Currency,
    pub name: String,
    pub kind: AccountKind,
    /// The rail a settlement account stands for.
    pub rail: Option<String>,
    pub balances: Balances,
    pub environment: crate::access::Environment,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl Account {
    /// Who holds the account: one account per holder and currency.
    pub fn holder(&self) -> String {
        holder_key(self.kind, self.customer_id.as_ref(), self.rail.as_deref())
    }

    /// Customer money is never overdrawn by a debit the service chooses to make.
    pub fn guards_available(&self) -> bool {
        self.kind == AccountKind::Customer
    }
}

/// The uniqueness key of an account's holder: the customer, or the platform's kind (and rail).
pub fn holder_key(kind: AccountKind, customer_id: Option<&CustomerId>, rail: Option<&str>) -> String {
    match (customer_id, rail) {
        (Some(customer), _) => customer.to_string(),
        (None, Some(rail)) => format!("{}:{rail}", kind.as_str()),
        (None, None) => kind.as_str().to_owned(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Debit,
    Credit,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub account_id: AccountId,
    pub direction: Direction,
    pub amount: Amount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MovementStatus {
    Pending,
    Posted,
    Voided,
}

impl MovementStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MovementStatus::Pending => "pending",
            MovementStatus::Posted => "posted",
            MovementStatus::Voided => "voided",
        }
    }
}

/// A change of a pending movement; each carries its cause.
#[derive(Debug, Clone, PartialEq)]
pub enum MovementTransition {
    Post(Cause),
    Void(Cause),
}

/// One double-entry posting: its first entry debits, its second credits the same amount.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Movement {
    pub id: MovementId,
    pub currency: Currency,
    pub entries: [Entry; 2],
    pub status: MovementStatus,
    /// The customer whose account it moves (who may see it), if any.
    pub customer_id: Option<CustomerId>,
    pub operation_id: Option<OperationId>,
    pub transaction_id: Option<TransactionId>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub posted_at: Option<OffsetDateTime>,
    pub version: u64,
}

/// What a movement is about, for its fields beside the entries.
#[derive(Debug, Clone, Default)]
pub struct MovementOf {
    pub customer_id: Option<CustomerId>,
    pub operation_id: Option<OperationId>,
    pub transaction_id: Option<TransactionId>,
}

impl Movement {
    /// A movement of `amount` from `debit` to `credit`: `pending` (a hold) or already `posted`.
    pub fn between(
        id: MovementId,
        debit: &Account,
        credit: &Account,
        amount: Amount,
        status: MovementStatus,
        of: MovementOf,
        cause: Cause,
    ) -> Movement {
        let entry = |account: &Account, direction| Entry {
            account_id: account.id.clone(),
            direction,
            amount,
        };
        Movement {
            id,
            currency: debit.currency.clone(),
            entries: [entry(debit, Direction::Debit), entry(credit, Direction::Credit)],
            status,
            customer_id: of.customer_id,
            operation_id: of.operation_id,
            transaction_id: of.transaction_id,
            posted_at: (status == MovementStatus::Posted).then_some(cause.at),
            created_at: cause.at,
            cause,
            version: 1,
        }
    }

    pub fn debited(&self) -> &AccountId {
        &self.entries[0].account_id
    }

    pub fn credited(&self) -> &AccountId {
        &self.entries[1].account_id
    }

    pub fn amount(&self) -> Amount {
        self.entries[0].amount
    }

    /// The reverse of a posted movement (a return): the same amount back, posted.
    pub fn reversal(&self, id: MovementId, cause: Cause) -> Movement {
        let [debit, credit] = self.entries.clone();
        Movement {
            id,
            entries: [
                Entry {
                    direction: Direction::Debit,
                    ..credit
                },
                Entry {
                    direction: Direction::Credit,
                    ..debit
                },
            ],
            status: MovementStatus::Posted,
            posted_at: Some(cause.at),
            created_at: cause.at,
            cause,
            version: 1,
            ..self.clone()
        }
    }

    /// Posts or voids a pending movement; anything else is refused.
    pub fn apply(&mut self, transition: MovementTransition) -> Result<MovementStatus, DomainError> {
        let (to, cause) = match transition {
            MovementTransition::Post(cause) => (MovementStatus::Posted, cause),
            MovementTransition::Void(cause) => (MovementStatus::Voided, cause),
        };
        if self.status != MovementStatus::Pending {
            return Err(DomainError::invalid_state(
                "invalid_transition",
                format!(
                    "Movement {} is {}; it cannot become {}.",
                    self.id,
                    self.status.as_str(),
                    to.as_str()
                ),
            ));
        }
        let from = self.status;
        self.status = to;
        if to == MovementStatus::Posted {
            self.posted_at = Some(cause.at);
        }
        self.cause = cause;
        self.version += 1;
        Ok(from)
    }

    /// What placing this movement (as it is now) does to each account's balances.
    fn placed(&self) -> [(AccountId, BalanceChange); 2] {
        let amount = self.amount().minor_units();
        let (debit, credit) = match self.status {
            MovementStatus::Pending => (
                BalanceChange {
                    pending_debits: amount,
                    ..BalanceChange::default()
                },
                BalanceChange {
                    pending_credits: amount,
                    ..BalanceChange::default()
                },
            ),
            MovementStatus::Posted => (
                BalanceChange {
                    posted: -amount,
                    ..BalanceChange::default()
                },
                BalanceChange {
                    posted: amount,
                    ..BalanceChange::default()
                },
            ),
            MovementStatus::Voided => (BalanceChange::default(), BalanceChange::default()),
        };
        [(self.debited().clone(), debit), (self.credited().clone(), credit)]
    }

    /// What moving this pending movement to its current status did to each account.
    fn settled(&self) -> [(AccountId, BalanceChange); 2] {
        let mut placed = self.placed();
        let amount = self.amount().minor_units();
        placed[0].1.pending_debits -= amount;
        placed[1].1.pending_credits -= amount;
        placed
    }
}

#[derive(Debug, Clone, Default)]
pub struct AccountQuery {
    pub customer_id: Option<CustomerId>,
    pub currency: Option<Currency>,
    /// Only accounts with a smaller (older) id.
    pub starting_after: Option<AccountId>,
    pub limit: usize,
}

/// The reads of the ledger (the store's port for this module).
#[async_trait::async_trait]
pub trait LedgerStore: Send + Sync {
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError>;
    /// The account of a holder ([`holder_key`]) in a currency.
    async fn account_of(&self, holder: &str, currency: &Currency) -> Result<Option<Account>, StoreError>;
    /// Newest first, at most `query.limit`.
    async fn accounts(&self, query: &AccountQuery) -> Result<Vec<Account>, StoreError>;
    async fn movement(&self, id: &MovementId) -> Result<Option<Movement>, StoreError>;
    /// What `account` had posted at the end of `day` (UTC): its posted balance less what the
    /// days after posted, read together; `None` if there is no such account.
    async fn posted_at_end_of(&self, account: &AccountId, day: time::Date) -> Result<Option<i64>, StoreError>;
    /// The movements with an entry on `account`, newest first, at most `limit`.
    async fn movements_of(
        &self,
        account: &AccountId,
        starting_after: Option<&MovementId>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Actor;
    use crate::ports::{Changeset, Write};

    fn account(id: &str, kind: AccountKind) -> Account {
        Account {
            id: id.into(),
            customer_id: (kind == AccountKind::Customer).then(|| "cus_1".into()),
            currency: Currency::parse("CLP").unwrap(),
            name: id.into(),
            kind,
            rail: None,
            balances: Balances::default(),
            environment: crate::access::Environment::Test,
            created_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn cause(code: &str) -> Cause {
        Cause::new(code, code, Actor::system(), OffsetDateTime::UNIX_EPOCH)
    }

    fn apply_all(posting: &Posting, accounts: &mut [&mut Account]) {
        for account in accounts.iter_mut() {
            account.balances.apply(&posting.change_of(&account.id));
        }
    }

    #[test]
    fn a_hold_then_its_posting_or_voiding_moves_the_three_balances_as_designed() {
        let mut customer = account("acc_c", AccountKind::Customer);
        let mut settlement = account("acc_s", AccountKind::Settlement);
        customer.balances.posted = 1000;
        settlement.balances.posted = -1000;
        let amount = Amount::new(300).unwrap();
        let hold = Movement::between(
            "mov_1".into(),
            &customer,
            &settlement,
            amount,
            MovementStatus::Pending,
            MovementOf::default(),
            cause("hold"),
        );
        let mut posting = Posting::default();
        posting.place(hold.clone(), &[&customer.id]);
        apply_all(&posting, &mut [&mut customer, &mut settlement]);
        assert_eq!(
            (
                customer.balances.posted,
                customer.balances.pending(),
                customer.balances.available()
            ),
            (1000, 700, 700)
        );
        assert_eq!(
            (settlement.balances.posted, settlement.balances.pending()),
            (-1000, -700)
        );

        let mut posted = hold.clone();
        posted.apply(MovementTransition::Post(cause("confirmed"))).unwrap();
        let mut posting = Posting::default();
        posting.settle(posted.clone());
        apply_all(&posting, &mut [&mut customer, &mut settlement]);
        assert_eq!(
            (
                customer.balances.posted,
                customer.balances.pending(),
                customer.balances.available()
            ),
            (700, 700, 700)
        );
        assert_eq!(customer.balances.posted + settlement.balances.posted, 0, "zero-sum");
        assert!(
            posted.apply(MovementTransition::Void(cause("late"))).is_err(),
            "a posted movement stays posted"
        );

        // A return posts the reverse.
        let mut posting = Posting::default();
        posting.place(posted.reversal("mov_1r".into(), cause("returned")), &[]);
        apply_all(&posting, &mut [&mut customer, &mut settlement]);
        assert_eq!(customer.balances.available(), 1000);

        // A voided hold gives the money back without posting anything.
        let mut hold = Movement::between(
            "mov_2".into(),
            &customer,
            &settlement,
            amount,
            MovementStatus::Pending,
            MovementOf::default(),
            cause("hold"),
        );
        let mut posting = Posting::default();
        posting.place(hold.clone(), &[&customer.id]);
        apply_all(&posting, &mut [&mut customer, &mut settlement]);
        assert_eq!(customer.balances.available(), 700);
        hold.apply(MovementTransition::Void(cause("failed"))).unwrap();
        let mut posting = Posting::default();
        posting.settle(hold);
        apply_all(&posting, &mut [&mut customer, &mut settlement]);
        assert_eq!(
            customer.balances,
            Balances {
                posted: 1000,
                pending_debits: 0,
                pending_credits: 0
            }
        );
        assert_eq!(
            settlement.balances,
            Balances {
                posted: -1000,
                pending_debits: 0,
                pending_credits: 0
            }
        );
    }

    #[test]
    fn one_balance_change_per_account_and_only_debits_of_guarded_accounts_are_guarded() {
        let customer = account("acc_c", AccountKind::Customer);
        let settlement = account("acc_s", AccountKind::Settlement);
        let mut posting = Posting::default();
        for n in 0..3 {
            let hold = Movement::between(
                format!("mov_{n}").into(),
                &customer,
                &settlement,
                Amount::new(10).unwrap(),
                MovementStatus::Pending,
                MovementOf::default(),
                cause("hold"),
            );
            posting.place(hold, &[&customer.id]);
        }
        let mut changes = Changeset::default();
        posting.write_to(
            &mut changes,
            &crate::ids::UlidGenerator::default(),
            crate::access::Environment::Test,
        );
        let balances: Vec<&AccountChange> = changes
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::ChangeBalances(change) => Some(change),
                _ => None,
            })
            .collect();
        assert_eq!(balances.len(), 2);
        let of = |id: &str| balances.iter().find(|c| c.account_id == id).unwrap();
        assert_eq!(
            (of("acc_c").change.pending_debits, of("acc_c").guard_available),
            (30, true)
        );
        assert_eq!(
            (of("acc_s").change.pending_credits, of("acc_s").guard_available),
            (30, false)
        );
        assert_eq!(
            changes.writes.len(),
            3 * 3 + 2,
            "each movement with its audit entry and event"
        );
    }
}
