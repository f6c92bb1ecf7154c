//! The ledger's part in an operation's life: holds placed with the approval, posted or voided
//! with the transaction's outcome, reversed by a return, released by a cancel; a transfer
//! posted on approval; a collection's credit held under its customer's reserve.

use super::{Account, AccountKind, Movement, MovementOf, MovementStatus, MovementTransition, Posting};
use crate::access::CollectionReserve;
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::ids::{AccountId, CustomerId, MovementId};
use crate::money::Currency;
use crate::operations::{Operation, OperationStatus, OperationTransition, OperationType};
use crate::ports::Changeset;
use crate::service::Service;
use crate::transactions::{Transaction, TransactionStatus};
use std::collections::HashMap;

use super::use_cases::{insufficient, reversal_of, MAX_FUNDED_ITEMS, MAX_TRANSFER_ITEMS};

impl Service {
    /// The accounts a new operation draws on and credits (see [`Self::accounts_of`]); a
    /// `hold_ttl` needs one to hold the funds on.
    pub(crate) async fn ledger_accounts(
        &self,
        customer_id: &CustomerId,
        valid: &crate::validate::ValidOperation,
    ) -> Result<(Option<AccountId>, Option<AccountId>), DomainError> {
        let named = (valid.source_account_id.clone(), valid.destination_account_id.clone());
        let accounts = self
            .accounts_of(customer_id, valid.kind, &valid.currency, named, &valid.items)
            .await?;
        if valid.hold_ttl.is_some() && (valid.kind != OperationType::Payout || accounts.0.is_none()) {
            return Err(DomainError::invalid(
                "hold_ttl",
                "no_hold",
                "hold_ttl applies to a payout drawing on an account (source_account_id, or the customer's account in its currency): there is no hold to expire.",
            ));
        }
        Ok(accounts)
    }

    /// The accounts a new operation moves money on: a payout draws on its source account, a
    /// collection credits its destination account. Each is the one the operation names (the
    /// customer's own, in its currency), else the customer's account in that currency, else
    /// none (no ledger money moves, as before accounts existed).
    async fn accounts_of(
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
    /// account from the rail's settlement account (the payer's money arrived there), posted at
    /// once or, under the customer's collection reserve, pending until the rail's last return
    /// check; a `returned` voids a pending credit or takes a posted one back. That reversal is
    /// not guarded: the money left, whatever the customer did with it since, so a return after
    /// the money was spendable can take `available` below zero.
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
                let reserve = match self.store.customer(&transaction.customer_id).await? {
                    Some(customer) => customer.collection_reserve,
                    None => CollectionReserve::None,
                };
                let status = match reserve {
                    CollectionReserve::None => MovementStatus::Posted,
                    CollectionReserve::ReturnChecks => MovementStatus::Pending,
                };
                let credit = Movement::between(
                    id,
                    &settlement,
                    &account,
                    transaction.amount,
                    status,
                    MovementOf {
                        customer_id: Some(transaction.customer_id.clone()),
                        operation_id: Some(transaction.operation_id.clone()),
                        transaction_id: Some(transaction.id.clone()),
                    },
                    cause.clone(),
                );
                posting.place(credit, &[]);
            }
            TransactionStatus::Returned => match self.store.movement(&id).await? {
                Some(mut credit) if credit.status == MovementStatus::Pending => {
                    credit.apply(MovementTransition::Void(cause.clone()))?;
                    posting.settle(credit);
                }
                Some(credit) => posting.place(credit.reversal(reversal_of(&credit.id), cause.clone()), &[]),
                None => {}
            },
            _ => {}
        }
        posting.write_to(changes, &*self.ids, self.environment);
        Ok(())
    }

    /// Ends a collection's reserve once the rail's last return check found its money still
    /// there: the pending credit is posted and may be spent. Nothing when the collection had
    /// no reserve (its credit posted already: one read) or was returned meanwhile (its credit
    /// voided); a return recorded at the same moment changes the credit's version, and the
    /// one read again decides.
    pub(crate) async fn release_collection_reserve(&self, collection: &Transaction) -> Result<(), DomainError> {
        let credit_id = MovementId::of_item(&collection.item_id);
        let credit_id = &credit_id;
        let busy = || {
            Err(DomainError::conflict(
                "The collection's credit is changing too fast; the next return check tries again.",
            ))
        };
        self.retry_on_conflict(RESERVE_RELEASE_ATTEMPTS, busy, move || async move {
            let credit = self.store.movement(credit_id).await?;
            let Some(mut credit) = credit.filter(|c| c.status == MovementStatus::Pending) else {
                return Ok(((), Changeset::default()));
            };
            // The check's own inquiry may have just recorded a return.
            let now_confirmed = self.store.transaction(&collection.id).await?;
            if now_confirmed.is_none_or(|t| t.status != TransactionStatus::Confirmed) {
                return Ok(((), Changeset::default()));
            }
            let cause = Cause::new(
                "collection_reserve_released",
                "The rail's last return check found the collected money still there",
                Actor::system(),
                self.now(),
            );
            credit.apply(MovementTransition::Post(cause))?;
            let mut posting = Posting::default();
            posting.settle(credit);
            let mut changes = Changeset::default();
            posting.write_to(&mut changes, &*self.ids, self.environment);
            Ok(((), changes))
        })
        .await
    }
}

/// Reads and writes ending one collection's reserve may make while a return races it.
const RESERVE_RELEASE_ATTEMPTS: usize = 3;
