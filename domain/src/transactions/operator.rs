//! Transactions as people see and act on them: reads, and the operators' retry and resolve.

use crate::access::{Principal, Scope};
use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::ids::{CustomerId, OperationId, TransactionId};
use crate::service::{customer_scope, Page, Service};
use crate::transactions::{Transaction, TransactionStatus, TransactionTransition};
use crate::validate::{optional_reason, required_text};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveTransaction {
    pub status: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryTransaction {
    pub reason: Option<String>,
}

impl Service {
    fn require_operator(principal: &Principal) -> Result<(), DomainError> {
        if principal.is_platform() && principal.has_scope(Scope::Admin) {
            Ok(())
        } else {
            Err(DomainError::forbidden(
                "operator_required",
                "Only a platform operator (admin key) can do this.",
            ))
        }
    }

    async fn visible_transaction(&self, principal: &Principal, id: &TransactionId) -> Result<Transaction, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.store
            .transaction(id)
            .await?
            .filter(|t| principal.can_access(&t.customer_id))
            .ok_or_else(|| DomainError::not_found("transaction", id))
    }

    pub async fn get_transaction(&self, principal: &Principal, id: &TransactionId) -> Result<Transaction, DomainError> {
        self.visible_transaction(principal, id).await
    }

    pub async fn list_transactions(
        &self,
        principal: &Principal,
        operation_id: &OperationId,
    ) -> Result<Page<Transaction>, DomainError> {
        let operation = self.get_operation(principal, operation_id).await?;
        let data = self.store.transactions_of_operation(&operation).await?;
        Ok(Page::all(data))
    }

    /// Operator: the transactions whose outcome is unknown (being asked of the rail) or that
    /// need a person, across operations, newest first.
    pub async fn watched_transactions(
        &self,
        principal: &Principal,
        status: TransactionStatus,
        customer_id: Option<CustomerId>,
        starting_after: Option<TransactionId>,
        limit: usize,
    ) -> Result<Page<Transaction>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        if !status.is_watched() {
            return Err(DomainError::invalid(
                "status",
                "invalid_status",
                "Across operations, transactions are listed by status unknown or needs_attention; give operation_id for the rest.",
            ));
        }
        let Some(customer_id) = customer_scope(principal, customer_id) else {
            return Ok(Page::empty());
        };
        let read = self
            .store
            .transactions_in(status, customer_id.as_ref(), starting_after.as_ref(), limit + 1)
            .await?;
        Ok(Page::of(read, limit))
    }

    /// Operator: sends a transaction that needs attention back to be submitted — only if the
    /// rail cannot hold it; otherwise only `resolve` (after asking the rail) is safe.
    pub async fn retry_transaction(
        &self,
        principal: &Principal,
        id: &TransactionId,
        command: RetryTransaction,
    ) -> Result<Transaction, DomainError> {
        Self::require_operator(principal)?;
        self.visible_transaction(principal, id).await?;
        let reason = optional_reason(command.reason, "reason", 500)?.unwrap_or_else(|| "Retried by an operator".into());
        let actor = Actor {
            kind: ActorType::Operator,
            id: principal.actor().id,
        };
        let retried = self
            .update_transaction(id, None, |txn, now| {
                let cause = Cause::new("operator_retry", reason.clone(), actor.clone(), now);
                let change = txn.apply(TransactionTransition::Retry(cause))?;
                txn.submit_attempts = 0;
                Ok(Some(Some(change)))
            })
            .await?;
        retried.ok_or_else(|| DomainError::invalid_state("conflict", "Retry did not apply."))
    }

    /// Operator: settles a transaction that needs attention (or whose outcome is unknown)
    /// as confirmed or failed, with the reason on record.
    pub async fn resolve_transaction(
        &self,
        principal: &Principal,
        id: &TransactionId,
        command: ResolveTransaction,
    ) -> Result<Transaction, DomainError> {
        Self::require_operator(principal)?;
        self.visible_transaction(principal, id).await?;
        let status = required_text(command.status, "status", 20)?;
        let reason = required_text(command.reason, "reason", 500)?;
        let actor = Actor {
            kind: ActorType::Operator,
            id: principal.actor().id,
        };
        let resolved = self
            .update_transaction(id, None, |txn, now| {
                if !matches!(
                    txn.status,
                    TransactionStatus::NeedsAttention | TransactionStatus::Unknown
                ) {
                    return Err(DomainError::invalid_state(
                        "not_resolvable",
                        format!(
                            "Transaction {} is {}; only unknown or needs_attention transactions are resolved.",
                            txn.id,
                            txn.status.as_str()
                        ),
                    ));
                }
                let cause = Cause::new("operator_resolution", reason.clone(), actor.clone(), now);
                let transition = match status.as_str() {
                    "confirmed" => TransactionTransition::Confirm(cause),
                    "failed" => TransactionTransition::Fail(cause),
                    _ => {
                        return Err(DomainError::invalid(
                            "status",
                            "invalid_status",
                            "status is confirmed or failed.",
                        ))
                    }
                };
                txn.next_poll_at = None;
                txn.apply(transition).map(|c| Some(Some(c)))
            })
            .await?;
        resolved.ok_or_else(|| DomainError::invalid_state("conflict", "Resolution did not apply."))
    }
}
