//! Workflows and approval floors as their owners manage them, and as a new operation resolves
//! them.

use crate::access::{Principal, Scope};
use crate::approvals::{self, Workflow, WorkflowDefinition, WorkflowOwner};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::CustomerId;
use crate::operation_type::OperationType;
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::{Page, Service};
use serde::Serialize;
use std::collections::BTreeMap;

impl Service {
    // ---- Workflows --------------------------------------------------------------------

    /// The definition `name` resolves to for `customer_id`: the customer's own, else the
    /// platform's, else the built-in one.
    pub async fn resolve_workflow(
        &self,
        customer_id: Option<&CustomerId>,
        name: &str,
    ) -> Result<Option<Workflow>, DomainError> {
        if let Some(customer) = customer_id {
            if let Some(found) = self
                .store
                .workflow(&WorkflowOwner::Customer(customer.clone()), name)
                .await?
            {
                return Ok(Some(found));
            }
        }
        if let Some(found) = self.store.workflow(&WorkflowOwner::Platform, name).await? {
            return Ok(Some(found));
        }
        Ok(builtin_workflow(name))
    }

    /// The customer whose workflows a caller reads or defines: the one it names
    /// (`customer_id`: a platform key may name any customer, a customer's key only its own),
    /// else the key's own customer; `None` is the platform's.
    async fn workflows_customer(
        &self,
        principal: &Principal,
        asked: Option<&str>,
    ) -> Result<Option<CustomerId>, DomainError> {
        match asked {
            Some(_) => Ok(Some(self.acting_customer(principal, asked).await?)),
            None => Ok(principal.key.customer_id.clone()),
        }
    }

    /// The workflow `name` as it resolves for the customer asked (see
    /// [`Service::list_workflows`]).
    pub async fn get_workflow(
        &self,
        principal: &Principal,
        name: &str,
        customer_id: Option<&str>,
    ) -> Result<Workflow, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let customer = self.workflows_customer(principal, customer_id).await?;
        let found = match approvals::valid_name(name) {
            true => self.resolve_workflow(customer.as_ref(), name).await?,
            false => None,
        };
        found.ok_or_else(|| DomainError::not_found("workflow", name))
    }

    /// The workflows an operation of the customer asked (`customer_id`, by default the key's
    /// own; none for a platform key is the platform's) can name, by name from after
    /// `starting_after`: the customer's, the platform's and the built-in ones, each as it
    /// resolves for that customer (its own over the platform's over the built-in one). Floors
    /// are not named by operations, so they are left out.
    pub async fn list_workflows(
        &self,
        principal: &Principal,
        customer_id: Option<&str>,
        starting_after: Option<&str>,
        limit: usize,
    ) -> Result<Page<Workflow>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let customer = self.workflows_customer(principal, customer_id).await?;
        let after = starting_after.unwrap_or_default();
        let mut by_name: BTreeMap<String, Workflow> = approvals::BUILTIN
            .iter()
            .filter(|name| **name > after)
            .filter_map(|name| builtin_workflow(name))
            .map(|workflow| (workflow.name.clone(), workflow))
            .collect();
        // Each owner's first `limit + 1` names after the cursor, past its floors (one per
        // operation type at most), are enough: a later name is not among the page's.
        let fetch = limit + 1 + OperationType::ALL.len();
        let mut owners = vec![WorkflowOwner::Platform];
        owners.extend(customer.map(WorkflowOwner::Customer));
        for owner in owners {
            for workflow in self.store.workflows_after(&owner, after, fetch).await? {
                if approvals::valid_name(&workflow.name) {
                    by_name.insert(workflow.name.clone(), workflow);
                }
            }
        }
        Ok(Page::of(by_name.into_values().take(limit + 1).collect(), limit))
    }

    /// Every saved version of the workflow that applies to the customer asked (its own, else
    /// the platform's), oldest first, each entry with the rules it saved (`details`); a
    /// built-in workflow has none. What a review of "which rules approved this" reads.
    pub async fn workflow_history(
        &self,
        principal: &Principal,
        name: &str,
        customer_id: Option<&str>,
    ) -> Result<Page<AuditEntry>, DomainError> {
        let workflow = self.get_workflow(principal, name, customer_id).await?;
        let entries = match &workflow.owner {
            WorkflowOwner::Builtin => vec![],
            owner => self.store.entity_history(&workflow_entity(owner, name)).await?,
        };
        Ok(Page::all(entries))
    }

    /// Saves the workflow `name` of the customer asked (`customer_id`: a platform key defines
    /// a customer's workflow by naming it, as it sets a customer's floor), else of the key's
    /// own customer, else the platform's.
    pub async fn put_workflow(
        &self,
        principal: &Principal,
        name: &str,
        customer_id: Option<&str>,
        definition: WorkflowDefinition,
    ) -> Result<Workflow, DomainError> {
        principal.require(Scope::WorkflowsManage)?;
        if !approvals::valid_name(name) {
            return Err(approvals::name_refused("name", "invalid_workflow_name"));
        }
        definition.validate(&|rail| self.rails.contains(rail))?;
        let owner = match self.workflows_customer(principal, customer_id).await? {
            Some(customer) => WorkflowOwner::Customer(customer),
            None => WorkflowOwner::Platform,
        };
        let current = self.store.workflow(&owner, name).await?;
        let saved = Workflow {
            name: name.into(),
            owner,
            definition,
            version: current.as_ref().map_or(1, |w| w.version + 1),
        };
        let now = self.now();
        let cause = Cause::new(
            "workflow_saved",
            format!("Workflow {name} saved as version {}", saved.version),
            principal.actor(),
            now,
        );
        let action = if current.is_some() { "updated" } else { "created" };
        let entity = workflow_entity(&saved.owner, name);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("workflow", &entity, action, cause).with_details(rules_saved(&saved)),
        ));
        changes.push(Write::PutWorkflow(saved.clone()));
        self.commit(changes).await?;
        Ok(saved)
    }

    // ---- Approval floors ----------------------------------------------------------------

    /// The floor `customer_id` has for `kind`: the one its admin set, else the environment's
    /// default.
    async fn approval_floor(
        &self,
        customer_id: &CustomerId,
        kind: OperationType,
    ) -> Result<ApprovalFloor, DomainError> {
        let stored = self
            .store
            .workflow(
                &WorkflowOwner::Customer(customer_id.clone()),
                &approvals::floor_name(kind),
            )
            .await?;
        Ok(self.floor_of(customer_id, kind, stored))
    }

    fn floor_of(&self, customer_id: &CustomerId, kind: OperationType, stored: Option<Workflow>) -> ApprovalFloor {
        ApprovalFloor {
            customer_id: customer_id.clone(),
            kind,
            is_default: stored.is_none(),
            version: stored.as_ref().map_or(0, |w| w.version),
            definition: stored.map_or_else(|| approvals::default_floor(self.environment), |w| w.definition),
        }
    }

    /// What decides a new operation: the workflow it names as it resolves for its customer
    /// (the customer's, else the platform's, else the built-in one) and the customer's floor
    /// for its type, read together.
    pub(crate) async fn workflow_and_floor(
        &self,
        customer_id: &CustomerId,
        name: &str,
        kind: OperationType,
    ) -> Result<(Option<Workflow>, ApprovalFloor), DomainError> {
        let customer = WorkflowOwner::Customer(customer_id.clone());
        let wanted = [
            (customer.clone(), name.to_owned()),
            (WorkflowOwner::Platform, name.to_owned()),
            (customer, approvals::floor_name(kind)),
        ];
        let [own, platform, floor]: [Option<Workflow>; 3] =
            self.store.workflows(&wanted).await?.try_into().map_err(|_| {
                DomainError::Store(crate::ports::StoreError::unavailable(
                    "the store answered a different number of workflows",
                ))
            })?;
        let named = own.or(platform).or_else(|| builtin_workflow(name));
        Ok((named, self.floor_of(customer_id, kind, floor)))
    }

    pub async fn get_approval_floor(
        &self,
        principal: &Principal,
        customer_id: &str,
        kind: &str,
    ) -> Result<ApprovalFloor, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        self.approval_floor(&customer.id, floor_kind(kind)?).await
    }

    /// Every saved version of a customer's floor for a type, oldest first, each entry with the
    /// rules it saved (`details`); none while it is the environment's default.
    pub async fn approval_floor_history(
        &self,
        principal: &Principal,
        customer_id: &str,
        kind: &str,
    ) -> Result<Page<AuditEntry>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let entity = floor_entity(&customer.id, floor_kind(kind)?);
        Ok(Page::all(self.store.entity_history(&entity).await?))
    }

    /// Sets a customer's floor: the customer's admin (`users:manage`) or a platform admin.
    /// Lowering it is deliberate and audited like any change.
    pub async fn put_approval_floor(
        &self,
        principal: &Principal,
        customer_id: &str,
        kind: &str,
        definition: WorkflowDefinition,
    ) -> Result<ApprovalFloor, DomainError> {
        principal.require(Scope::UsersManage)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let kind = floor_kind(kind)?;
        definition.validate(&|rail| self.rails.contains(rail))?;
        let current = self.approval_floor(&customer.id, kind).await?;
        let saved = Workflow {
            name: approvals::floor_name(kind),
            owner: WorkflowOwner::Customer(customer.id.clone()),
            definition,
            version: current.version + 1,
        };
        let now = self.now();
        let cause = Cause::new(
            "approval_floor_saved",
            format!(
                "Approval floor for {} saved as version {}",
                kind.as_str(),
                saved.version
            ),
            principal.actor(),
            now,
        );
        let mut changes = Changeset::default();
        let entity = floor_entity(&customer.id, kind);
        let action = if current.is_default { "created" } else { "updated" };
        changes.push(Write::Audit(
            AuditEntry::new("approval_floor", &entity, action, cause).with_details(rules_saved(&saved)),
        ));
        changes.push(Write::PutWorkflow(saved.clone()));
        self.commit(changes).await?;
        Ok(ApprovalFloor {
            customer_id: customer.id,
            kind,
            is_default: false,
            version: saved.version,
            definition: saved.definition,
        })
    }
}

/// A saved version's rules as its audit entry keeps them, so its history says what applied when.
fn rules_saved(saved: &Workflow) -> serde_json::Value {
    let mut details = serde_json::to_value(&saved.definition).unwrap_or_default();
    if let Some(fields) = details.as_object_mut() {
        fields.insert("version".into(), saved.version.into());
    }
    details
}

fn builtin_workflow(name: &str) -> Option<Workflow> {
    approvals::builtin(name).map(|definition| Workflow {
        name: name.into(),
        owner: WorkflowOwner::Builtin,
        definition,
        version: 0,
    })
}

fn floor_kind(kind: &str) -> Result<OperationType, DomainError> {
    OperationType::parse(kind).ok_or_else(|| {
        DomainError::invalid(
            "type",
            "invalid_operation_type",
            format!("No operation type '{kind}'; floors are per operation type (payout, collection, transfer)."),
        )
    })
}

/// What a customer requires of every operation of one type, whatever workflow it names.
#[derive(Debug, Serialize)]
pub struct ApprovalFloor {
    pub customer_id: CustomerId,
    #[serde(rename = "type")]
    pub kind: OperationType,
    #[serde(flatten)]
    pub definition: WorkflowDefinition,
    /// Whether this is the environment's default (never set by the customer's admin).
    #[serde(rename = "default")]
    pub is_default: bool,
    pub version: u64,
}

/// The entity a workflow's audit entries are filed under: its owner and name.
fn workflow_entity(owner: &WorkflowOwner, name: &str) -> String {
    format!("{}:{name}", owner_label(owner))
}

/// The entity a customer's floor's audit entries are filed under.
fn floor_entity(customer_id: &CustomerId, kind: OperationType) -> String {
    format!("{customer_id}:{}", approvals::floor_name(kind))
}

fn owner_label(owner: &WorkflowOwner) -> String {
    match owner {
        WorkflowOwner::Builtin => "builtin".into(),
        WorkflowOwner::Platform => "platform".into(),
        WorkflowOwner::Customer(id) => id.to_string(),
    }
}
