//! Commands as clients send them, validated into domain values. Type errors and unknown fields
//! are caught while parsing (with the field's path); everything else here, naming the `param`.

use crate::access::{Role, Scope};
use crate::error::DomainError;
use crate::money::{Amount, Currency, MAX_ITEM_AMOUNT};
use crate::operations::{Beneficiary, Destination, OperationType};
use serde::Deserialize;
use std::collections::BTreeMap;

pub use crate::text::{
    check_text, is_invisible_or_bidi, optional_nonblank_text, optional_reason, optional_text, required_text,
};

pub const MAX_ITEMS: usize = 1000;
pub const MAX_METADATA_KEYS: usize = 50;
/// An operation is stored as one document (one DynamoDB item: at most 400 KB) and rides whole in
/// its events: held well below that, with room for what it gains (transaction ids, approvals).
pub const MAX_OPERATION_BYTES: usize = 320 * 1024;
/// Room kept per item for the transaction id it gains on approval.
const TRANSACTION_ID_ROOM: usize = 64;

/// Refuses an operation whose stored form would not fit [`MAX_OPERATION_BYTES`].
pub fn check_operation_size(stored_bytes: usize, items: usize) -> Result<(), DomainError> {
    let bytes = stored_bytes + items * TRANSACTION_ID_ROOM;
    if bytes > MAX_OPERATION_BYTES {
        return Err(DomainError::invalid(
            "items",
            "operation_too_large",
            format!(
                "The operation would take {} KiB stored; at most {} KiB. Split the items over several operations.",
                bytes.div_ceil(1024),
                MAX_OPERATION_BYTES / 1024
            ),
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateOperation {
    pub customer_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub currency: Option<String>,
    pub items: Option<Vec<ItemInput>>,
    pub workflow: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub source_account_id: Option<String>,
    pub destination_account_id: Option<String>,
    /// Seconds the funds held for it may wait for the rail before it is given up.
    pub hold_ttl: Option<i64>,
    /// Set by a file's worker, never by a client's body.
    #[serde(skip)]
    pub file_id: Option<crate::ids::FileId>,
    /// Set by a reversal, never by a client's body.
    #[serde(skip)]
    pub reversal_of: Option<crate::operations::ReversalOf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    pub beneficiary: Option<BeneficiaryInput>,
    pub destination: Option<DestinationInput>,
    pub amount: Option<i64>,
    pub reference: Option<String>,
    /// The customer's ISO 20022 `EndToEndId` (sent on to the rail) and `InstrId`.
    pub end_to_end_id: Option<String>,
    pub instruction_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeneficiaryInput {
    pub id_type: Option<String>,
    pub id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationInput {
    pub rail: Option<String>,
    pub account: Option<String>,
    /// A transfer's destination: an account of this ledger.
    pub account_id: Option<String>,
}

/// A create-operation command that passed validation (the customer and workflow are checked
/// against the store by the use case).
#[derive(Debug)]
pub struct ValidOperation {
    pub customer_id: Option<String>,
    pub kind: OperationType,
    pub currency: Currency,
    pub items: Vec<ValidItem>,
    pub workflow: String,
    pub metadata: BTreeMap<String, String>,
    pub source_account_id: Option<crate::ids::AccountId>,
    pub destination_account_id: Option<crate::ids::AccountId>,
    pub hold_ttl: Option<u32>,
    pub file_id: Option<crate::ids::FileId>,
    pub reversal_of: Option<crate::operations::ReversalOf>,
}

/// The shortest and longest `hold_ttl`: a minute and thirty days.
pub const HOLD_TTL: std::ops::RangeInclusive<i64> = 60..=2_592_000;

#[derive(Debug)]
pub struct ValidItem {
    /// Whom a rail item pays or collects from; a transfer's item may leave it out, its
    /// destination being an account of this ledger.
    pub beneficiary: Option<Beneficiary>,
    pub destination: Destination,
    pub amount: Amount,
    pub reference: Option<String>,
    pub end_to_end_id: Option<String>,
    pub instruction_id: Option<String>,
}

/// The `workflow` a create names: present, and a workflow's name.
pub fn workflow_name(value: Option<String>) -> Result<String, DomainError> {
    let workflow = required_text(value, "workflow", 64)?;
    if !crate::approvals::valid_name(&workflow) {
        return Err(crate::approvals::name_refused("workflow", "invalid_workflow"));
    }
    Ok(workflow)
}

/// Rail ids are `psp-local:<rail_name>`.
pub fn valid_rail_id(rail: &str) -> bool {
    rail.strip_prefix("psp-local:").is_some_and(|name| {
        (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    })
}

impl CreateOperation {
    pub fn validate(self, known_rail: &dyn Fn(&str) -> bool) -> Result<ValidOperation, DomainError> {
        let customer_id = optional_text(self.customer_id, "customer_id", 64)?;
        let kind_name = required_text(self.kind, "type", 32)?;
        let kind = OperationType::parse(&kind_name).ok_or_else(|| {
            DomainError::invalid(
                "type",
                "invalid_type",
                format!("Unknown operation type '{kind_name}'; use payout, collection or transfer."),
            )
        })?;
        let currency_code = required_text(self.currency, "currency", 3)?;
        let currency = Currency::parse(&currency_code).ok_or_else(|| {
            DomainError::invalid(
                "currency",
                "invalid_currency",
                format!("'{currency_code}' is not an active ISO 4217 currency code (uppercase, e.g. CLP)."),
            )
        })?;
        let workflow = workflow_name(self.workflow)?;
        let inputs = self.items.ok_or_else(|| DomainError::missing("items"))?;
        if inputs.is_empty() {
            return Err(DomainError::invalid(
                "items",
                "parameter_invalid_empty",
                "An operation needs at least one item.",
            ));
        }
        if inputs.len() > MAX_ITEMS {
            return Err(DomainError::invalid(
                "items",
                "too_many_items",
                format!("An operation has at most {MAX_ITEMS} items."),
            ));
        }
        let items = inputs
            .into_iter()
            .enumerate()
            .map(|(i, item)| item.validate(&format!("items[{i}]"), kind, known_rail))
            .collect::<Result<Vec<_>, _>>()?;
        let metadata = validate_metadata(self.metadata.unwrap_or_default())?;
        let account_id = |id: Option<String>, param: &str| {
            id.map(|id| {
                crate::ids::AccountId::parse(&id).ok_or_else(|| {
                    DomainError::invalid(
                        param,
                        "invalid_account_id",
                        format!("'{id}' is not an account id (acc_…)."),
                    )
                })
            })
            .transpose()
        };
        let source_account_id = account_id(self.source_account_id, "source_account_id")?;
        let destination_account_id = account_id(self.destination_account_id, "destination_account_id")?;
        let hold_ttl = match self.hold_ttl {
            Some(ttl) if !HOLD_TTL.contains(&ttl) => {
                let message = "hold_ttl is a number of seconds from 60 to 2592000 (thirty days).";
                return Err(DomainError::invalid("hold_ttl", "out_of_range", message));
            }
            ttl => ttl.map(|ttl| ttl as u32),
        };
        Ok(ValidOperation {
            customer_id,
            kind,
            currency,
            items,
            workflow,
            metadata,
            source_account_id,
            destination_account_id,
            hold_ttl,
            file_id: self.file_id,
            reversal_of: self.reversal_of,
        })
    }
}

impl ItemInput {
    pub(crate) fn validate(
        self,
        at: &str,
        kind: OperationType,
        known_rail: &dyn Fn(&str) -> bool,
    ) -> Result<ValidItem, DomainError> {
        let beneficiary = match self.beneficiary {
            Some(beneficiary) => Some(Beneficiary {
                id_type: item_field::beneficiary_id_type(beneficiary.id_type, &format!("{at}.beneficiary.id_type"))?,
                id: item_field::beneficiary_id(beneficiary.id, &format!("{at}.beneficiary.id"))?,
            }),
            None if kind == OperationType::Transfer => None,
            None => return Err(DomainError::missing(format!("{at}.beneficiary"))),
        };
        let destination = self
            .destination
            .ok_or_else(|| DomainError::missing(format!("{at}.destination")))?;
        let destination = if kind == OperationType::Transfer {
            transfer_destination(destination, at)?
        } else {
            rail_destination(destination, at, known_rail)?
        };
        let amount = item_field::amount(self.amount, &format!("{at}.amount"))?;
        let reference = item_field::reference(self.reference, &format!("{at}.reference"))?;
        Ok(ValidItem {
            beneficiary,
            destination,
            amount,
            reference,
            end_to_end_id: optional_text(self.end_to_end_id, &format!("{at}.end_to_end_id"), 35)?,
            instruction_id: optional_text(self.instruction_id, &format!("{at}.instruction_id"), 35)?,
        })
    }
}

/// An item's fields, each checked on its own: a create stops at the first wrong one, a line of
/// a payroll file reports every one.
pub(crate) mod item_field {
    use super::*;

    pub fn beneficiary_id_type(value: Option<String>, param: &str) -> Result<String, DomainError> {
        let id_type = required_text(value, param, 16)?;
        if !id_type
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(DomainError::invalid(
                param,
                "invalid_id_type",
                "id_type is a short code of letters, digits, '_' or '-'.",
            ));
        }
        Ok(id_type)
    }

    pub fn beneficiary_id(value: Option<String>, param: &str) -> Result<String, DomainError> {
        required_text(value, param, 64)
    }

    /// A known rail's id.
    pub fn rail(value: Option<String>, param: &str, known_rail: &dyn Fn(&str) -> bool) -> Result<String, DomainError> {
        let rail = required_text(value, param, 80)?;
        if !valid_rail_id(&rail) {
            return Err(DomainError::invalid(
                param,
                "invalid_rail",
                format!("'{rail}' is not a rail id of the form psp-local:<rail_name>."),
            ));
        }
        if !known_rail(&rail) {
            return Err(DomainError::invalid(
                param,
                "unknown_rail",
                format!("No adapter serves rail '{rail}'."),
            ));
        }
        Ok(rail)
    }

    /// An account at a rail.
    pub fn account(value: Option<String>, param: &str) -> Result<String, DomainError> {
        required_text(value, param, 64)
    }

    pub fn amount(value: Option<i64>, param: &str) -> Result<Amount, DomainError> {
        let raw = value.ok_or_else(|| DomainError::missing(param))?;
        Amount::new(raw).ok_or_else(|| {
            DomainError::invalid(
                param,
                "amount_out_of_range",
                format!("amount is an integer in minor units from 1 to {MAX_ITEM_AMOUNT}."),
            )
        })
    }

    pub fn reference(value: Option<String>, param: &str) -> Result<Option<String>, DomainError> {
        optional_text(value, param, 140)
    }
}

/// An item's destination at a rail: a known rail and an account there.
fn rail_destination(
    destination: DestinationInput,
    at: &str,
    known_rail: &dyn Fn(&str) -> bool,
) -> Result<Destination, DomainError> {
    if destination.account_id.is_some() {
        return Err(DomainError::invalid(
            format!("{at}.destination.account_id"),
            "transfer_only",
            "destination.account_id is a transfer's; name a rail and an account.",
        ));
    }
    let rail = item_field::rail(destination.rail, &format!("{at}.destination.rail"), known_rail)?;
    let account = item_field::account(destination.account, &format!("{at}.destination.account"))?;
    Ok(Destination {
        rail,
        account,
        account_id: None,
    })
}

/// A transfer's destination: an account of this ledger, and nothing at a rail.
fn transfer_destination(destination: DestinationInput, at: &str) -> Result<Destination, DomainError> {
    if destination.rail.is_some() || destination.account.is_some() {
        return Err(DomainError::invalid(
            format!("{at}.destination"),
            "no_rail_for_transfer",
            "A transfer moves money between accounts of this ledger: name destination.account_id only.",
        ));
    }
    let param = format!("{at}.destination.account_id");
    let id = required_text(destination.account_id, &param, 64)?;
    let account_id = crate::ids::AccountId::parse(&id).ok_or_else(|| {
        DomainError::invalid(
            param,
            "invalid_account_id",
            format!("'{id}' is not an account id (acc_…)."),
        )
    })?;
    Ok(Destination {
        rail: String::new(),
        account: String::new(),
        account_id: Some(account_id),
    })
}

/// A time given as RFC 3339, in UTC; anything else is a 400 on `param`.
pub fn rfc3339_time(text: &str, param: &str) -> Result<time::OffsetDateTime, DomainError> {
    let invalid = |message: String| DomainError::invalid(param, "invalid_time", message);
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| invalid(format!("'{text}' is not an RFC 3339 time.")))?;
    // Kept and answered in UTC, whatever offset it came in, so every time the API shows reads
    // alike; one whose UTC year RFC 3339 cannot write is refused here, not where it is shown.
    at.checked_to_offset(time::UtcOffset::UTC)
        .filter(|utc| (0..=9999).contains(&utc.year()))
        .ok_or_else(|| invalid(format!("'{text}' is outside the years 0000 to 9999 in UTC.")))
}

pub(crate) fn validate_metadata(metadata: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, DomainError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(DomainError::invalid(
            "metadata",
            "too_many_keys",
            format!("metadata has at most {MAX_METADATA_KEYS} keys."),
        ));
    }
    for (key, value) in &metadata {
        let printable = !key.chars().any(|c| c.is_control() || is_invisible_or_bidi(c));
        if key.is_empty() || key.chars().count() > 40 || !printable {
            // The key is not echoed in `param`: it may be what is wrong with it.
            return Err(DomainError::invalid(
                "metadata",
                "invalid_metadata_key",
                "metadata keys are 1 to 40 characters, none of them control or invisible ones.",
            ));
        }
        check_text(value, &format!("metadata[{key}]"), 500)?;
    }
    Ok(metadata)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCustomer {
    pub name: Option<String>,
    /// The PSP's own keys for the customer (its CRM id, say), as an operation's metadata.
    pub metadata: Option<BTreeMap<String, String>>,
    pub collection_reserve: Option<crate::access::CollectionReserve>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub name: Option<String>,
    pub email: Option<String>,
    pub roles: Option<Vec<Role>>,
}

impl CreateUser {
    pub fn validate(self) -> Result<(String, String, Vec<Role>), DomainError> {
        let name = required_text(self.name, "name", 200)?;
        let email = required_text(self.email, "email", 254)?;
        let well_formed = email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !email.contains(char::is_whitespace)
        });
        if !well_formed {
            return Err(DomainError::invalid(
                "email",
                "invalid_email",
                format!("'{email}' is not an email address."),
            ));
        }
        let roles = crate::access::user_roles(self.roles.ok_or_else(|| DomainError::missing("roles"))?)?;
        Ok((name, email, roles))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    /// What the key is for, as its owners call it ("payroll integration"); a rotation's
    /// successor keeps it.
    pub name: Option<String>,
    pub customer_id: Option<String>,
    pub user_id: Option<String>,
    pub scopes: Option<Vec<Scope>>,
    /// When the key stops working by itself (RFC 3339); none: when it is revoked.
    pub expires_at: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateApiKey {
    /// Seconds the old key keeps working (default a day, at most a week; 0 ends it now).
    pub expires_in: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    pub comment: Option<String>,
}

/// `POST /v1/operations/approve` and `/reject`: the ids, and the comment (approve) or the
/// reason (reject) every decision shares.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkDecision {
    pub ids: Option<Vec<String>>,
    pub comment: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reject {
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    pub reason: Option<String>,
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
