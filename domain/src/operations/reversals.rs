//! Reversals: money an operation moved, sent back by an operation of its own. A completed
//! collection is refunded by a payout to its payer, drawn on the account it credited; a
//! completed transfer by a transfer back from the account it credited. The reversal goes
//! through its own workflow (four-eyes included) and moves its own ledger money; the two are
//! linked both ways, and what is reversed never passes what was moved.

use super::{Operation, OperationStatus, OperationType};
use crate::access::{Principal, Scope};
use crate::error::DomainError;
use crate::idempotency::Ticket;
use crate::ids::{ItemId, OperationId};
use crate::ports::{StoreError, Write};
use crate::service::Service;
use crate::validate::{optional_nonblank_text, CreateOperation, DestinationInput, ItemInput};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /v1/operations/{id}/reversal`'s body: which items (each whole, or `amount` of it),
/// or an `amount` taken from the items in order; neither: all that is left.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReverseOperation {
    pub items: Option<Vec<ReversedItemInput>>,
    pub amount: Option<i64>,
    pub reason: Option<String>,
    pub workflow: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReversedItemInput {
    pub item_id: Option<String>,
    pub amount: Option<i64>,
}

/// What a reversal sends back: of which operation, and how much of each of its items (the
/// reversal's items in the same order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReversalOf {
    pub operation_id: OperationId,
    pub items: Vec<ReversedItem>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReversedItem {
    pub item_id: ItemId,
    pub amount: i64,
}

/// Reversals of one operation at most: each is read when the next is made.
pub const MAX_REVERSALS: usize = 20;

/// Whether a reversal in `status` still counts against what may be reversed: one that moved
/// money or still may.
fn still_counts(status: OperationStatus) -> bool {
    !matches!(
        status,
        OperationStatus::Rejected | OperationStatus::Cancelled | OperationStatus::Expired | OperationStatus::Failed
    )
}

impl Service {
    /// Makes the reversal of `id` that `command` asks for, through its workflow, and links the
    /// two; refused (400 `reversal_exceeds_moved`) when it would send back more of an item
    /// than the item moved less what earlier reversals send back.
    pub async fn reverse_operation(
        &self,
        principal: &Principal,
        id: &OperationId,
        command: ReverseOperation,
        ticket: Option<Ticket<Operation>>,
    ) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let reason = optional_nonblank_text(command.reason.clone(), "reason", 500)?
            .ok_or_else(|| DomainError::missing("reason"))?;
        // Two reversals racing: the original's version lets one in; the other is drafted again.
        for _ in 0..5 {
            let mut original = self.visible_operation(principal, id).await?;
            let left = self.reversible(&original).await?;
            let asked = asked(&original, &command, &left)?;
            let draft = reversal_command(&original, &asked, &reason, command.workflow.clone())?;
            let (reversal, mut changes) = self.draft_operation(principal, draft, None).await?;
            original.reversals.push(reversal.id.clone());
            original.version += 1;
            changes.push(Write::UpdateOperation(original));
            if let Some(ticket) = &ticket {
                changes.push(ticket.complete(&reversal));
            }
            match self.store.commit(changes).await {
                Ok(()) => return Ok(reversal),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(self.commit_error(other)),
            }
        }
        Err(DomainError::invalid_state(
            "conflict",
            "The operation is changing too fast; retry.",
        ))
    }

    /// What each item of `original` moved and earlier reversals do not send back, by item.
    async fn reversible(&self, original: &Operation) -> Result<BTreeMap<ItemId, i64>, DomainError> {
        match (original.kind, original.status) {
            (OperationType::Payout, _) => {
                return Err(DomainError::invalid_state(
                    "recall_not_supported",
                    "No rail here supports recalling a payout once sent: a refund is the beneficiary's to send.",
                ))
            }
            (_, OperationStatus::Completed | OperationStatus::PartiallyCompleted) => {}
            (_, status) => {
                return Err(DomainError::invalid_state(
                    "operation_not_reversible",
                    format!(
                        "Operation {} is {}; only a completed (or partially completed) one has money to send back.",
                        original.id,
                        status.as_str()
                    ),
                ))
            }
        }
        if original.reversals.len() >= MAX_REVERSALS {
            return Err(DomainError::invalid_state(
                "too_many_reversals",
                format!("An operation is reversed at most {MAX_REVERSALS} times."),
            ));
        }
        // A collection's item moved money if its transaction was confirmed (a return sent it
        // back already); a transfer's every item moved when it completed.
        let mut left: BTreeMap<ItemId, i64> = match original.kind {
            OperationType::Collection => {
                let transactions = self.store.transactions_of_operation(original).await?;
                let confirmed: Vec<_> = transactions
                    .iter()
                    .filter(|t| t.is_confirmed())
                    .map(|t| t.item_id.clone())
                    .collect();
                original
                    .items
                    .iter()
                    .filter(|i| confirmed.contains(&i.id))
                    .map(|i| (i.id.clone(), i.amount.minor_units()))
                    .collect()
            }
            _ => original
                .items
                .iter()
                .map(|i| (i.id.clone(), i.amount.minor_units()))
                .collect(),
        };
        for reversal_id in &original.reversals {
            let Some(reversal) = self.store.operation(reversal_id).await? else {
                continue;
            };
            let Some(of) = reversal.reversal_of.as_ref().filter(|_| still_counts(reversal.status)) else {
                continue;
            };
            for item in &of.items {
                if let Some(left) = left.get_mut(&item.item_id) {
                    *left -= item.amount;
                }
            }
        }
        Ok(left)
    }
}

/// The items and amounts `command` asks to send back, each within what is `left` of it.
fn asked(
    original: &Operation,
    command: &ReverseOperation,
    left: &BTreeMap<ItemId, i64>,
) -> Result<Vec<ReversedItem>, DomainError> {
    let left_of = |id: &ItemId| left.get(id).copied().unwrap_or(0).max(0);
    let exceeds = |param: String, wanted: i64, available: i64| {
        DomainError::invalid(
            param,
            "reversal_exceeds_moved",
            format!("{wanted} asked, {available} left to send back (what moved, less earlier reversals)."),
        )
    };
    let positive = |param: String, amount: i64| match amount {
        1.. => Ok(amount),
        _ => Err(DomainError::invalid(
            param,
            "invalid_amount",
            "A positive amount in minor units.",
        )),
    };
    let asked: Vec<ReversedItem> = match (&command.items, command.amount) {
        (Some(_), Some(_)) => {
            return Err(DomainError::invalid(
                "amount",
                "parameter_conflict",
                "Give items (each with its amount) or one amount, not both.",
            ))
        }
        (Some(items), None) => {
            if items.is_empty() {
                return Err(DomainError::invalid(
                    "items",
                    "parameter_invalid_empty",
                    "Name at least one item.",
                ));
            }
            let mut asked: Vec<ReversedItem> = vec![];
            for (i, input) in items.iter().enumerate() {
                let param = format!("items[{i}].item_id");
                let item = input
                    .item_id
                    .as_deref()
                    .and_then(|id| original.items.iter().find(|item| item.id.as_str() == id))
                    .ok_or_else(|| DomainError::invalid(&param, "unknown_item", "Not an item of this operation."))?;
                if asked.iter().any(|a| a.item_id == item.id) {
                    return Err(DomainError::invalid(param, "duplicate_item", "Name each item once."));
                }
                let available = left_of(&item.id);
                let amount = match input.amount {
                    Some(amount) => positive(format!("items[{i}].amount"), amount)?,
                    None => available,
                };
                if amount > available || available == 0 {
                    return Err(exceeds(format!("items[{i}].amount"), amount, available));
                }
                asked.push(ReversedItem {
                    item_id: item.id.clone(),
                    amount,
                });
            }
            asked
        }
        (None, amount) => {
            let total: i64 = original.items.iter().map(|i| left_of(&i.id)).sum();
            let mut wanted = match amount {
                Some(amount) => positive("amount".into(), amount)?,
                None => total,
            };
            if wanted > total || total == 0 {
                return Err(exceeds("amount".into(), wanted, total));
            }
            let mut asked = vec![];
            for item in &original.items {
                let take = left_of(&item.id).min(wanted);
                if take > 0 {
                    asked.push(ReversedItem {
                        item_id: item.id.clone(),
                        amount: take,
                    });
                    wanted -= take;
                }
            }
            asked
        }
    };
    Ok(asked)
}

/// The operation that sends `asked` back: a payout to a collection's payers from the account
/// it credited, or a transfer back from the account a transfer credited.
fn reversal_command(
    original: &Operation,
    asked: &[ReversedItem],
    reason: &str,
    workflow: Option<String>,
) -> Result<CreateOperation, DomainError> {
    let item_of = |id: &ItemId| {
        original
            .items
            .iter()
            .find(|i| i.id == *id)
            .expect("asked names items of the original")
    };
    let reference = Some(
        format!("Reversal of {}: {reason}", original.id)
            .chars()
            .take(140)
            .collect::<String>(),
    );
    let (kind, source_account_id, items) = match original.kind {
        OperationType::Collection => {
            let items = asked
                .iter()
                .map(|a| {
                    let item = item_of(&a.item_id);
                    ItemInput {
                        beneficiary: item.beneficiary.as_ref().map(|b| crate::validate::BeneficiaryInput {
                            id_type: Some(b.id_type.clone()),
                            id: Some(b.id.clone()),
                        }),
                        destination: Some(DestinationInput {
                            rail: Some(item.destination.rail.clone()),
                            account: Some(item.destination.account.clone()),
                            account_id: None,
                        }),
                        amount: Some(a.amount),
                        reference: reference.clone(),
                        end_to_end_id: None,
                        instruction_id: None,
                    }
                })
                .collect();
            (OperationType::Payout, original.destination_account_id.clone(), items)
        }
        _ => {
            // A transfer back draws on one account: the reversed items' destination.
            let mut credited = asked.iter().map(|a| item_of(&a.item_id).destination.account_id.clone());
            let from = credited.next().flatten();
            if credited.any(|other| other != from) {
                return Err(DomainError::invalid(
                    "items",
                    "several_accounts",
                    "These items credited different accounts: reverse the items of one account at a time.",
                ));
            }
            let items = asked
                .iter()
                .map(|a| ItemInput {
                    beneficiary: None,
                    destination: Some(DestinationInput {
                        rail: None,
                        account: None,
                        account_id: original.source_account_id.as_ref().map(|id| id.to_string()),
                    }),
                    amount: Some(a.amount),
                    reference: reference.clone(),
                    end_to_end_id: None,
                    instruction_id: None,
                })
                .collect();
            (OperationType::Transfer, from, items)
        }
    };
    Ok(CreateOperation {
        customer_id: Some(original.customer_id.to_string()),
        kind: Some(kind.as_str().into()),
        currency: Some(original.currency.code().into()),
        items: Some(items),
        workflow: Some(workflow.unwrap_or_else(|| original.workflow.clone())),
        metadata: Some([("reversal_of".to_string(), original.id.to_string())].into()),
        source_account_id: source_account_id.map(|id| id.to_string()),
        destination_account_id: None,
        hold_ttl: None,
        file_id: None,
        reversal_of: Some(ReversalOf {
            operation_id: original.id.clone(),
            items: asked.to_vec(),
            reason: reason.to_owned(),
        }),
    })
}
