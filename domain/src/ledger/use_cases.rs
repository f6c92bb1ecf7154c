//! The accounts API (open, list, get, movements, adjustments) and the ledger's part in an
//! operation's life: holds placed with the approval, posted or voided with the transaction's
//! outcome, reversed by a return, released by a cancel.

use super::{
    holder_key, Account, AccountKind, AccountQuery, Balances, Movement, MovementOf, MovementStatus, MovementTransition,
    Posting,
};
use crate::access::{require_platform_admin, Principal, Scope};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{AccountId, CustomerId, EventId, MovementId};
use crate::money::{Amount, Currency};
use crate::operations::{Operation, OperationStatus, OperationTransition, OperationType};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::service::{customer_scope, Page, Service};
use crate::transactions::{Transaction, TransactionStatus};
use crate::validate;
use serde::Deserialize;
use std::collections::HashMap;

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
fn reversal_of(id: &MovementId) -> MovementId {
    MovementId::from(format!("{id}r"))
}

fn insufficient(account: &Account, needed: i64) -> DomainError {
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
        let name = validate::optional_text(command.name, "name", 100)?;
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
    async fn platform_account(
        &self,
        kind: AccountKind,
        rail: Option<&str>,
        currency: &Currency,
    ) -> Result<Account, DomainError> {
        let holder = holder_key(kind, None, rail);
        for _ in 0..2 {
            if let Some(account) = self.store.account_of(&holder, currency).await? {
                return Ok(account);
            }
            let cause = Cause::new("account_opened", "Opened on first use", Actor::system(), self.now());
            let account = self.new_account(kind, None, rail.map(Into::into), currency.clone(), None);
            match self.store.commit(self.account_opening(&account, cause)).await {
                Ok(()) => return Ok(account),
                // Opened by a concurrent first use: read it.
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::invalid_state(
            "conflict",
            "The platform account is being opened; retry.",
        ))
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
        posting.place(movement.clone(), &[&account.id]);
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

    // ---- operations on accounts ---------------------------------------------------------

    /// The accounts a new operation moves money on: a payout draws on its source account, a
    /// collection credits its destination account. Each is the one the operation names (the
    /// customer's own, in its currency), else the customer's account in that currency, else
    /// none (no ledger money moves, as before accounts existed).
    pub(crate) async fn ledger_accounts(
        &self,
        customer_id: &CustomerId,
        kind: OperationType,
        currency: &Currency,
        (source, destination): (Option<AccountId>, Option<AccountId>),
        items: &[crate::validate::ValidItem],
    ) -> Result<(Option<AccountId>, Option<AccountId>), DomainError> {
        let refuse = |param: &'static str| {
            Err(DomainError::invalid(
                param,
                "not_supported_for_type",
                format!("{param} is not taken by {} operations.", kind.as_str()),
            ))
        };
        let (named, param) = match (kind, source, destination) {
            (OperationType::Payout, _, Some(_)) => return refuse("destination_account_id"),
            (OperationType::Collection, Some(_), _) => return refuse("source_account_id"),
            (OperationType::Transfer, _, Some(_)) => return refuse("destination_account_id"),
            (OperationType::Payout | OperationType::Transfer, source, None) => (source, "source_account_id"),
            (OperationType::Collection, None, destination) => (destination, "destination_account_id"),
        };
        let account = match named {
            Some(id) => {
                let account = self
                    .store
                    .account(&id)
                    .await?
                    .filter(|a| a.customer_id.as_ref() == Some(customer_id))
                    .ok_or_else(|| DomainError::missing_reference(param, format!("No such account: '{id}'")))?;
                if account.currency != *currency {
                    return Err(DomainError::invalid(
                        param,
                        "currency_mismatch",
                        format!(
                            "Account {} holds {}; the operation is in {}.",
                            account.id,
                            account.currency.code(),
                            currency.code()
                        ),
                    ));
                }
                Some(account)
            }
            None => self.store.account_of(customer_id, currency).await?,
        };
        let Some(account) = account else {
            if kind == OperationType::Transfer {
                return Err(DomainError::invalid(
                    "source_account_id",
                    "account_required",
                    format!(
                        "A transfer moves money from an account: the customer has no {} account.",
                        currency.code()
                    ),
                ));
            }
            return Ok((None, None));
        };
        if kind == OperationType::Collection {
            return Ok((None, Some(account.id)));
        }
        let (limit, what) = match kind {
            OperationType::Transfer => (MAX_TRANSFER_ITEMS, "A transfer"),
            _ => (MAX_FUNDED_ITEMS, "An operation drawing on an account"),
        };
        if items.len() > limit {
            return Err(DomainError::invalid(
                "items",
                "too_many_items_for_account",
                format!("{what} has at most {limit} items; split it."),
            ));
        }
        if kind == OperationType::Transfer {
            self.check_transfer_destinations(&account, items).await?;
        }
        Ok((Some(account.id), None))
    }

    /// A transfer's destinations: customer accounts of its currency, none of them its source.
    async fn check_transfer_destinations(
        &self,
        source: &Account,
        items: &[crate::validate::ValidItem],
    ) -> Result<(), DomainError> {
        for (i, item) in items.iter().enumerate() {
            let param = format!("items[{i}].destination.account_id");
            let id = item
                .destination
                .account_id
                .as_ref()
                .expect("a transfer item names an account");
            if *id == source.id {
                return Err(DomainError::invalid(
                    param,
                    "same_account",
                    "A transfer moves money to another account than its source.",
                ));
            }
            let account = self
                .store
                .account(id)
                .await?
                .filter(|a| a.kind == AccountKind::Customer && a.environment == source.environment)
                .ok_or_else(|| DomainError::missing_reference(param.clone(), format!("No such account: '{id}'")))?;
            if account.currency != source.currency {
                return Err(DomainError::invalid(
                    param,
                    "currency_mismatch",
                    format!(
                        "Account {} holds {}; the transfer is in {}.",
                        account.id,
                        account.currency.code(),
                        source.currency.code()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Places the holds of an operation just approved (`approval`) in `changes`; if its
    /// account lacks the funds, the operation fails instead (`insufficient_funds`) and nothing
    /// is held, so no transaction is ever made for money that is not there.
    pub(crate) async fn hold_funds(
        &self,
        changes: &mut Changeset,
        operation: &mut Operation,
        approval: &Cause,
    ) -> Result<(), DomainError> {
        debug_assert_eq!(operation.status, OperationStatus::Approved);
        let at = approval.at;
        let Some(source_id) = operation.source_account_id.clone() else {
            return Ok(());
        };
        let source = self
            .store
            .account(&source_id)
            .await?
            .ok_or_else(|| DomainError::not_found("account", &source_id))?;
        if source.balances.available() < operation.total_amount {
            let cause = Cause::new(
                "insufficient_funds",
                insufficient(&source, operation.total_amount).to_string(),
                Actor::system(),
                at,
            );
            let failure = operation.apply(OperationTransition::Fail(cause))?;
            self.record_operation_change(changes, operation, failure);
            return Ok(());
        }
        if operation.kind == OperationType::Transfer {
            return self.post_transfer(changes, operation, &source, approval).await;
        }
        let mut settlements: HashMap<&str, Account> = HashMap::new();
        let mut posting = Posting::default();
        for item in &operation.items {
            let rail = item.destination.rail.as_str();
            if !settlements.contains_key(rail) {
                let account = self
                    .platform_account(AccountKind::Settlement, Some(rail), &operation.currency)
                    .await?;
                settlements.insert(rail, account);
            }
            let cause = Cause::new(
                "funds_held",
                format!("Held for item {} of approved operation {}", item.id, operation.id),
                approval.actor.clone(),
                at,
            );
            let hold = Movement::between(
                MovementId::of_item(&item.id),
                &source,
                &settlements[rail],
                item.amount,
                MovementStatus::Pending,
                MovementOf {
                    customer_id: Some(operation.customer_id.clone()),
                    operation_id: Some(operation.id.clone()),
                    transaction_id: Some(crate::transactions::transaction_id_of(&item.id)),
                },
                cause,
            );
            posting.place(hold, &[&source.id]);
        }
        posting.write_to(changes, &*self.ids, self.environment);
        Ok(())
    }

    /// A transfer has no rail: its movements are posted with the approval, and the operation
    /// completes in the same changeset (so it is never cancelled after its money moved).
    async fn post_transfer(
        &self,
        changes: &mut Changeset,
        operation: &mut Operation,
        source: &Account,
        approval: &Cause,
    ) -> Result<(), DomainError> {
        let mut posting = Posting::default();
        for item in &operation.items {
            let id = item
                .destination
                .account_id
                .as_ref()
                .expect("a transfer item names an account");
            let destination = self
                .store
                .account(id)
                .await?
                .ok_or_else(|| DomainError::not_found("account", id))?;
            let cause = Cause::new(
                "transfer_posted",
                format!("Item {} of approved transfer {}", item.id, operation.id),
                approval.actor.clone(),
                approval.at,
            );
            let movement = Movement::between(
                MovementId::of_item(&item.id),
                source,
                &destination,
                item.amount,
                MovementStatus::Posted,
                MovementOf {
                    customer_id: Some(operation.customer_id.clone()),
                    operation_id: Some(operation.id.clone()),
                    transaction_id: None,
                },
                cause,
            );
            posting.place(movement, &[&source.id]);
        }
        posting.write_to(changes, &*self.ids, self.environment);
        let at = approval.at;
        let processing = Cause::new("transfer_posting", "Posted on the ledger, no rail", Actor::system(), at);
        let change = operation.apply(OperationTransition::StartProcessing(processing))?;
        self.record_operation_change(changes, operation, change);
        let done = Cause::new(
            "transfer_posted",
            format!("{} movement(s) posted", operation.items.len()),
            Actor::system(),
            at,
        );
        let change = operation.apply(OperationTransition::Complete(done))?;
        self.record_operation_change(changes, operation, change);
        Ok(())
    }

    /// Voids the holds of an approved operation that will make no transactions (a cancel).
    pub(crate) async fn release_holds(
        &self,
        changes: &mut Changeset,
        operation: &Operation,
        cause: &Cause,
    ) -> Result<(), DomainError> {
        if operation.source_account_id.is_none() {
            return Ok(());
        }
        let mut posting = Posting::default();
        for item in &operation.items {
            let Some(mut hold) = self.store.movement(&MovementId::of_item(&item.id)).await? else {
                continue;
            };
            if hold.status == MovementStatus::Pending {
                hold.apply(MovementTransition::Void(cause.clone()))?;
                posting.settle(hold);
            }
        }
        posting.write_to(changes, &*self.ids, self.environment);
        Ok(())
    }

    /// The ledger's part of a transaction's status change: `confirmed` posts its hold,
    /// `failed` voids it, `returned` posts the reverse. Written with the change, so it
    /// happens exactly once.
    pub(crate) async fn settle_hold(
        &self,
        changes: &mut Changeset,
        transaction: &Transaction,
        to: TransactionStatus,
        cause: &Cause,
    ) -> Result<(), DomainError> {
        // Only an outcome moves ledger money; the steps before it read nothing here.
        if !matches!(
            to,
            TransactionStatus::Confirmed | TransactionStatus::Failed | TransactionStatus::Returned
        ) {
            return Ok(());
        }
        if let Some(account_id) = &transaction.credit_account_id {
            return self
                .settle_collection(changes, transaction, account_id, to, cause)
                .await;
        }
        let Some(hold_id) = &transaction.hold_id else {
            return Ok(());
        };
        let Some(mut hold) = self.store.movement(hold_id).await? else {
            return Ok(());
        };
        let mut posting = Posting::default();
        match (to, hold.status) {
            (TransactionStatus::Confirmed, MovementStatus::Pending) => {
                hold.apply(MovementTransition::Post(cause.clone()))?;
                posting.settle(hold);
            }
            (TransactionStatus::Failed, MovementStatus::Pending) => {
                hold.apply(MovementTransition::Void(cause.clone()))?;
                posting.settle(hold);
            }
            (TransactionStatus::Returned, MovementStatus::Posted) => {
                posting.place(hold.reversal(reversal_of(&hold.id), cause.clone()), &[]);
            }
            _ => {}
        }
        posting.write_to(changes, &*self.ids, self.environment);
        Ok(())
    }
}

impl Service {
    /// The ledger's part of a collection's outcome: `confirmed` credits the customer's
    /// account from the rail's settlement account (the payer's money arrived there), a
    /// `returned` takes it back. The return is not guarded: the money left, whatever the
    /// customer did with it since, so a return can take `available` below zero.
    async fn settle_collection(
        &self,
        changes: &mut Changeset,
        transaction: &Transaction,
        account_id: &AccountId,
        to: TransactionStatus,
        cause: &Cause,
    ) -> Result<(), DomainError> {
        let id = MovementId::of_item(&transaction.item_id);
        let mut posting = Posting::default();
        match to {
            TransactionStatus::Confirmed => {
                let account = self
                    .store
                    .account(account_id)
                    .await?
                    .ok_or_else(|| DomainError::not_found("account", account_id))?;
                let settlement = self
                    .platform_account(AccountKind::Settlement, Some(&transaction.rail), &transaction.currency)
                    .await?;
                let credit = Movement::between(
                    id,
                    &settlement,
                    &account,
                    transaction.amount,
                    MovementStatus::Posted,
                    MovementOf {
                        customer_id: Some(transaction.customer_id.clone()),
                        operation_id: Some(transaction.operation_id.clone()),
                        transaction_id: Some(transaction.id.clone()),
                    },
                    cause.clone(),
                );
                posting.place(credit, &[]);
            }
            TransactionStatus::Returned => {
                if let Some(credit) = self.store.movement(&id).await? {
                    posting.place(credit.reversal(reversal_of(&credit.id), cause.clone()), &[]);
                }
            }
            _ => {}
        }
        posting.write_to(changes, &*self.ids, self.environment);
        Ok(())
    }
}

fn account_exists(holder: &str, currency: &Currency) -> DomainError {
    DomainError::invalid_state(
        "account_exists",
        format!("{holder} already has a {} account.", currency.code()),
    )
}
