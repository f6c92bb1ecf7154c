//! Customers: made, read and listed, renamed, suspended and reactivated, each change audited
//! and an event; and who may act for which customer.

use crate::access::{Customer, CustomerStatus, Principal, Scope, UpdateCustomer};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::Ticket;
use crate::ids::{CustomerId, EventId};
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::{Page, Service};
use crate::validate::{self, CreateCustomer};
use std::collections::BTreeMap;

/// Reads and writes a customer's change may make while others change it at once.
const CUSTOMER_CHANGE_ATTEMPTS: usize = 5;

impl Service {
    pub async fn create_customer(
        &self,
        principal: &Principal,
        command: CreateCustomer,
        ticket: Option<Ticket<Customer>>,
    ) -> Result<Customer, DomainError> {
        require_platform_admin(principal)?;
        let name = validate::required_text(command.name, "name", 200)?;
        let metadata = validate::validate_metadata(command.metadata.unwrap_or_default())?;
        let now = self.now();
        let customer = Customer {
            id: crate::ids::CustomerId::new(&*self.ids),
            name,
            status: CustomerStatus::Active,
            metadata,
            collection_reserve: command.collection_reserve.unwrap_or_default(),
            created_at: now,
            version: 1,
        };
        let cause = Cause::new("customer_created", "Customer created", principal.actor(), now);
        let event = Event::of_customer(EventId::new(&*self.ids), "created", &customer, &cause, self.environment);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "customer",
            &customer.id,
            "created",
            cause,
        )));
        changes.push(Write::Event(event));
        changes.push(Write::InsertCustomer(customer.clone()));
        self.commit_created(changes, ticket, &customer).await?;
        Ok(customer)
    }

    /// `GET /v1/customers/{id}`: any customer to a platform key, its own to a customer's.
    pub async fn get_customer(&self, principal: &Principal, id: &str) -> Result<Customer, DomainError> {
        self.visible_customer(principal, id, "id").await
    }

    /// `GET /v1/customers`: the platform's customers (or those in `status`), newest first, a
    /// page at a time; for the platform's keys only.
    pub async fn list_customers(
        &self,
        principal: &Principal,
        status: Option<CustomerStatus>,
        starting_after: Option<CustomerId>,
        limit: usize,
    ) -> Result<Page<Customer>, DomainError> {
        require_platform(principal, "list customers")?;
        let customers = self.store.customers(status, starting_after.as_ref(), limit + 1).await?;
        Ok(Page::of(customers, limit))
    }

    /// A customer's new name, status, metadata or collection reserve, by a platform admin,
    /// audited with what the customer then is and why. A suspension refuses the customer's keys
    /// from their next request.
    /// Versioned: two changes at once both apply, neither undoing the other.
    pub async fn update_customer(
        &self,
        principal: &Principal,
        id: &str,
        command: UpdateCustomer,
    ) -> Result<Customer, DomainError> {
        require_platform_admin(principal)?;
        let UpdateCustomer {
            name,
            status,
            metadata,
            collection_reserve,
            reason,
        } = command.validate()?;
        let (name, metadata, reason) = (&name, &metadata, &reason);
        let busy = || Err(DomainError::conflict("The customer is changing too fast; retry."));
        self.retry_on_conflict(CUSTOMER_CHANGE_ATTEMPTS, busy, move || async move {
            let mut customer = self.visible_customer(principal, id, "id").await?;
            let mut changed = vec![];
            if let Some(name) = name.as_ref().filter(|name| **name != customer.name) {
                changed.push(format!("name {name} (was {})", customer.name));
                customer.name = name.clone();
            }
            if let Some(merged) = metadata
                .as_ref()
                .map(|changes| merge_metadata(&customer.metadata, changes))
            {
                let merged = validate::validate_metadata(merged)?;
                if merged != customer.metadata {
                    changed.push("metadata".to_string());
                    customer.metadata = merged;
                }
            }
            if let Some(reserve) = collection_reserve.filter(|reserve| *reserve != customer.collection_reserve) {
                changed.push(format!(
                    "collection reserve {} (was {})",
                    reserve.as_str(),
                    customer.collection_reserve.as_str()
                ));
                customer.collection_reserve = reserve;
            }
            let (code, action) = match status.filter(|status| *status != customer.status) {
                Some(status) => {
                    customer.status = status;
                    match status {
                        CustomerStatus::Suspended => ("customer_suspended", "suspended"),
                        CustomerStatus::Active => ("customer_reactivated", "reactivated"),
                    }
                }
                None if changed.is_empty() => return Ok((customer, Changeset::default())),
                None => ("customer_updated", "updated"),
            };
            customer.version += 1;
            let mut message = format!("Customer {action}");
            if !changed.is_empty() {
                message = format!("{message}: {}", changed.join("; "));
            }
            // The event goes to the customer's endpoints too: the reason stays in the history.
            let told = Cause::new(code, &message, principal.actor(), self.now());
            let event = Event::of_customer(EventId::new(&*self.ids), action, &customer, &told, self.environment);
            let audited = match &reason {
                Some(reason) => Cause::new(code, format!("{message}. Reason: {reason}"), told.actor, told.at),
                None => told,
            };
            let details = serde_json::json!({
                "name": customer.name,
                "status": customer.status,
                "metadata": customer.metadata,
                "collection_reserve": customer.collection_reserve,
            });
            let mut changes = Changeset::default();
            changes.push(Write::Audit(
                AuditEntry::new("customer", &customer.id, action, audited).with_details(details),
            ));
            changes.push(Write::Event(event));
            changes.push(Write::UpdateCustomer(customer.clone()));
            Ok((customer, changes))
        })
        .await
    }

    /// Who made a customer and renamed, suspended or reactivated it, when and why, oldest
    /// first; for the platform's keys only, as the reasons are the platform's notes.
    pub async fn customer_history(&self, principal: &Principal, id: &str) -> Result<Page<AuditEntry>, DomainError> {
        require_platform(principal, "read a customer's history")?;
        let customer = self.visible_customer(principal, id, "id").await?;
        Ok(Page::all(self.store.entity_history(&customer.id).await?))
    }

    pub(crate) async fn visible_customer(
        &self,
        principal: &Principal,
        id: &str,
        param: &str,
    ) -> Result<Customer, DomainError> {
        let not_found = || DomainError::missing_reference(param, format!("No such customer: '{id}'"));
        let Some(id) = CustomerId::parse(id).filter(|id| principal.can_access(id)) else {
            return Err(not_found());
        };
        self.store.customer(&id).await?.ok_or_else(not_found)
    }

    /// The customer a create acts for: the one `asked` (`customer_id`), which must be visible
    /// to the caller, or by default the key's own; a platform key must ask.
    pub(crate) async fn acting_customer(
        &self,
        principal: &Principal,
        asked: Option<&str>,
    ) -> Result<CustomerId, DomainError> {
        match (asked, &principal.key.customer_id) {
            // A customer's own key vouches that the customer exists.
            (Some(id), Some(own)) if own.as_str() == id => Ok(own.clone()),
            (Some(id), _) => Ok(self.visible_customer(principal, id, "customer_id").await?.id),
            (None, Some(own)) => Ok(own.clone()),
            (None, None) => Err(DomainError::missing("customer_id")),
        }
    }
}

/// `changes` applied to `metadata`: each key set to its value, or removed by an empty one.
fn merge_metadata(metadata: &BTreeMap<String, String>, changes: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut merged = metadata.clone();
    for (key, value) in changes {
        match value.is_empty() {
            true => merged.remove(key),
            false => merged.insert(key.clone(), value.clone()),
        };
    }
    merged
}

fn require_platform(principal: &Principal, to: &str) -> Result<(), DomainError> {
    match principal.is_platform() {
        true => Ok(()),
        false => Err(DomainError::forbidden(
            "platform_only",
            format!("Only the platform's keys {to}."),
        )),
    }
}

pub fn require_platform_admin(principal: &Principal) -> Result<(), DomainError> {
    if principal.is_platform() && principal.has_scope(Scope::Admin) {
        Ok(())
    } else {
        Err(DomainError::forbidden(
            "platform_admin_required",
            "Only a platform admin key can do this.",
        ))
    }
}
