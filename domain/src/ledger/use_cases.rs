//! The accounts API: open, list, get, movements and adjustments (the ledger's part in an
//! operation's life is in `flows.rs`).

use super::{holder_key, Account, AccountKind, AccountQuery, Balances, Movement, MovementOf, MovementStatus, Posting};
use crate::access::{require_platform_admin, Principal, Scope};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{AccountId, CustomerId, EventId, MovementId};
use crate::money::{Amount, Currency};
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::{customer_scope, Page, Service};
use crate::validate;
use serde::Deserialize;

/// Items of an operation drawing on an account: each hold is a movement with its audit entry
/// and event, written with the approval in one store transaction (DynamoDB takes 100 writes).
pub const MAX_FUNDED_ITEMS: usize = 25;

/// Items of a transfer: each also changes its destination's balance, so four writes an item
/// (and a create approved on the spot adds its own) must stay within DynamoDB's 100.
pub const MAX_TRANSFER_ITEMS: usize = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAccount {
    pub customer_id: Option<String>,
    pub currency: Option<String>,
    pub name: Option<String>,
    pub kind: Option<String>,
    pub rail: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdjustAccount {
    pub amount: Option<i64>,
    pub direction: Option<String>,
    pub reason: Option<String>,
}

/// The id of the reversal of a movement (a return).
pub(super) fn reversal_of(id: &MovementId) -> MovementId {
    MovementId::from(format!("{id}r"))
}

pub(super) fn insufficient(account: &Account, needed: i64) -> DomainError {
    DomainError::invalid_state(
        "insufficient_funds",
        format!(
            "Account {} has {} {} available; {needed} is needed.",
            account.id,
            account.balances.available(),
            account.currency.code()
        ),
    )
}

impl Service {
    // ---- accounts API -----------------------------------------------------------------

    /// Opens an account: a customer's (`customer_id`) or one of the platform's (`kind`
    /// settlement with its `rail`, fees, adjustments). Platform admins only: an account is
    /// where a PSP keeps a customer's money.
    pub async fn create_account(
        &self,
        principal: &Principal,
        command: CreateAccount,
        ticket: Option<Ticket<Account>>,
    ) -> Result<Account, DomainError> {
        require_platform_admin(principal)?;
        let code = validate::required_text(command.currency, "currency", 3)?;
        let currency = Currency::parse(&code).ok_or_else(|| {
            DomainError::invalid(
                "currency",
                "invalid_currency",
                format!("'{code}' is not an ISO 4217 currency."),
            )
        })?;
        let name = validate::optional_nonblank_text(command.name, "name", 100)?;
        let kind = match command.kind.as_deref() {
            None => command
                .customer_id
                .as_ref()
                .map_or(AccountKind::Settlement, |_| AccountKind::Customer),
            Some(kind) => AccountKind::parse(kind).ok_or_else(|| {
                DomainError::invalid(
                    "kind",
                    "invalid_kind",
                    "kind is customer, settlement, fees or adjustments.",
                )
            })?,
        };
        let customer_id = match (kind, command.customer_id) {
            (AccountKind::Customer, Some(id)) => Some(self.visible_customer(principal, &id, "customer_id").await?.id),
            (AccountKind::Customer, None) => return Err(DomainError::missing("customer_id")),
            (_, Some(_)) => {
                return Err(DomainError::invalid(
                    "customer_id",
                    "platform_account",
                    "Settlement, fees and adjustments accounts are the platform's: they take no customer_id.",
                ))
            }
            (_, None) => None,
        };
        let rail = match (kind, command.rail) {
            (AccountKind::Settlement, Some(rail)) if self.rails.contains(&rail) => Some(rail),
            (AccountKind::Settlement, Some(rail)) => {
                return Err(DomainError::invalid(
                    "rail",
                    "unknown_rail",
                    format!("No rail named '{rail}'."),
                ))
            }
            (AccountKind::Settlement, None) => return Err(DomainError::missing("rail")),
            (_, Some(_)) => {
                return Err(DomainError::invalid(
                    "rail",
                    "rail_not_allowed",
                    "Only settlement accounts name a rail.",
                ))
            }
            (_, None) => None,
        };
        let holder = holder_key(kind, customer_id.as_ref(), rail.as_deref());
        if self.store.account_of(&holder, &currency).await?.is_some() {
            return Err(account_exists(&holder, &currency));
        }
        let cause = Cause::new("account_opened", "Opened on request", principal.actor(), self.now());
        let account = self.new_account(kind, customer_id, rail, currency, name);
        let changes = self.account_opening(&account, cause);
        match self.commit_created(changes, ticket, &account).await {
            // The holder already has an account in that currency (a concurrent open won).
            Err(DomainError::InvalidState { code: "conflict", .. }) => Err(account_exists(&holder, &account.currency)),
            other => other.map(|()| account),
        }
    }

    fn new_account(
        &self,
        kind: AccountKind,
        customer_id: Option<CustomerId>,
        rail: Option<String>,
        currency: Currency,
        name: Option<String>,
    ) -> Account {
        let name = name.unwrap_or_else(|| match &rail {
            Some(rail) => format!("{} {rail} {}", kind.as_str(), currency.code()),
            None => format!("{} {}", kind.as_str(), currency.code()),
        });
        Account {
            id: AccountId::new(&*self.ids),
            customer_id,
            currency,
            name,
            kind,
            rail,
            balances: Balances::default(),
            environment: self.environment,
            created_at: self.now(),
        }
    }

    fn account_opening(&self, account: &Account, cause: Cause) -> Changeset {
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("account", &account.id, "created", cause.clone()).moving(None, "open"),
        ));
        changes.push(Write::Event(Event::of_account(
            EventId::new(&*self.ids),
            account,
            &cause,
        )));
        changes.push(Write::InsertAccount(account.clone()));
        changes
    }

    /// The platform's account of `kind` (and rail) in `currency`, opened on first use.
    pub(super) async fn platform_account(
        &self,
        kind: AccountKind,
        rail: Option<&str>,
        currency: &Currency,
    ) -> Result<Account, DomainError> {
        let holder = holder_key(kind, None, rail);
        let holder = &holder;
        let busy = || Err(DomainError::conflict("The platform account is being opened; retry."));
        // A conflict is a concurrent first use that opened it: the next try reads it.
        self.retry_on_conflict(2, busy, move || async move {
            if let Some(account) = self.store.account_of(holder, currency).await? {
                return Ok((account, Changeset::default()));
            }
            let cause = Cause::new("account_opened", "Opened on first use", Actor::system(), self.now());
            let account = self.new_account(kind, None, rail.map(Into::into), currency.clone(), None);
            let changes = self.account_opening(&account, cause);
            Ok((account, changes))
        })
        .await
    }

    async fn visible_account(&self, principal: &Principal, id: &AccountId) -> Result<Account, DomainError> {
        self.store
            .account(id)
            .await?
            .filter(|a| match &a.customer_id {
                Some(customer) => principal.can_access(customer),
                None => principal.is_platform(),
            })
            .ok_or_else(|| DomainError::not_found("account", id))
    }

    pub async fn get_account(&self, principal: &Principal, id: &AccountId) -> Result<Account, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.visible_account(principal, id).await
    }

    pub async fn list_accounts(
        &self,
        principal: &Principal,
        mut query: AccountQuery,
    ) -> Result<Page<Account>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = AccountQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of(self.store.accounts(&query).await?, limit))
    }

    pub async fn account_movements(
        &self,
        principal: &Principal,
        id: &AccountId,
        starting_after: Option<MovementId>,
        limit: usize,
    ) -> Result<Page<Movement>, DomainError> {
        let account = self.get_account(principal, id).await?;
        let movements = self
            .store
            .movements_of(&account.id, starting_after.as_ref(), limit + 1)
            .await?;
        Ok(Page::of(movements, limit))
    }

    /// A funding (`credit`) or a correction (`debit`) of an account by a platform admin,
    /// against the platform's adjustments account in its currency; posted at once. A debit
    /// never overdraws a customer's account.
    pub async fn adjust_account(
        &self,
        principal: &Principal,
        id: &AccountId,
        command: AdjustAccount,
        ticket: Option<Ticket<Movement>>,
    ) -> Result<Movement, DomainError> {
        require_platform_admin(principal)?;
        let amount = command.amount.ok_or_else(|| DomainError::missing("amount"))?;
        let amount = Amount::new(amount).ok_or_else(|| {
            DomainError::invalid(
                "amount",
                "invalid_amount",
                format!(
                    "amount is a positive integer of minor units, at most {}.",
                    crate::money::MAX_ITEM_AMOUNT
                ),
            )
        })?;
        let credit = match command.direction.as_deref() {
            Some("credit") => true,
            Some("debit") => false,
            Some(_) => {
                return Err(DomainError::invalid(
                    "direction",
                    "invalid_direction",
                    "direction is credit or debit.",
                ))
            }
            None => return Err(DomainError::missing("direction")),
        };
        let reason = validate::required_text(command.reason, "reason", 500)?;
        let account = self.visible_account(principal, id).await?;
        if account.kind == AccountKind::Adjustments {
            return Err(DomainError::invalid(
                "id",
                "adjustments_account",
                "The adjustments account is the other side of every adjustment; adjust another account.",
            ));
        }
        let adjustments = self
            .platform_account(AccountKind::Adjustments, None, &account.currency)
            .await?;
        let cause = Cause::new(
            if credit {
                "adjustment_credit"
            } else {
                "adjustment_debit"
            },
            reason,
            principal.actor(),
            self.now(),
        );
        let (debit, credit) = if credit {
            (&adjustments, &account)
        } else {
            (&account, &adjustments)
        };
        let movement = Movement::between(
            MovementId::new(&*self.ids),
            debit,
            credit,
            amount,
            MovementStatus::Posted,
            MovementOf {
                customer_id: account.customer_id.clone(),
                ..MovementOf::default()
            },
            cause,
        );
        if account.guards_available() && debit.id == account.id && account.balances.available() < amount.minor_units() {
            return Err(insufficient(&account, amount.minor_units()));
        }
        let mut posting = Posting::default();
        // Only customer money is guarded: the platform's accounts (a rail's settlement account
        // funded with what the PSP holds at the bank) go below zero as double entry has them.
        let guarded: Vec<&AccountId> = account.guards_available().then_some(&account.id).into_iter().collect();
        posting.place(movement.clone(), &guarded);
        let mut changes = Changeset::default();
        posting.write_to(&mut changes, &*self.ids, self.environment);
        match self.commit_created(changes, ticket, &movement).await {
            // The guard held: the account was drained concurrently.
            Err(DomainError::InvalidState { code: "conflict", .. }) if debit.id == account.id => {
                let now = self.store.account(&account.id).await?.unwrap_or(account);
                Err(insufficient(&now, amount.minor_units()))
            }
            other => other.map(|()| movement),
        }
    }
}

fn account_exists(holder: &str, currency: &Currency) -> DomainError {
    DomainError::taken(
        "currency",
        "account_exists",
        format!("{holder} already has a {} account.", currency.code()),
    )
}
