//! The use cases. Each checks who is asking, validates, decides, and commits one changeset
//! (entity + audit entries + idempotency completion) through the store port.

use crate::auth::{self, ApiKey, Customer, Environment, KeyHasher, Principal, Scope, User};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::{StoredResponse, Ticket};
use crate::ids::{IdGenerator, IdKind};
use crate::money;
use crate::operation::{
    Approval, Decision, Item, Operation, OperationStatus, OperationTransition, OperationType, StatusChange,
};
use crate::ports::{
    AuditEntry, Changeset, Clock, Limits, OperationQuery, Queue, RateLimiter, Secrets, Store, StoreError, SystemClock,
    WebhookSender, Write,
};
use crate::rail::Rails;
use crate::validate::{self, CreateApiKey, CreateCustomer, CreateOperation, CreateUser};
use crate::workflow::{self, Decider, Facts, Verdict, Workflow, WorkflowDefinition, WorkflowOwner};
use serde::Serialize;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// How long a rotated key keeps working unless the caller says otherwise.
pub const DEFAULT_ROTATION_OVERLAP: Duration = Duration::hours(24);
const MAX_ROTATION_OVERLAP: Duration = Duration::days(7);
/// Optimistic-concurrency retries before a busy operation is reported as a conflict.
const MAX_ATTEMPTS: usize = 5;

pub struct Service {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    pub hasher: KeyHasher,
    pub environment: Environment,
    pub rails: Rails,
    pub queue: Arc<dyn Queue>,
    pub secrets: Arc<dyn Secrets>,
    pub webhooks: Arc<dyn WebhookSender>,
    /// Where the secret that signs rail reports comes from.
    pub rail_secret: RailSecret,
    /// Which webhook URLs may be registered (the sender enforces the same at connection time).
    pub webhook_targets: crate::webhook::TargetPolicy,
    /// Where events also go for the PSP's own systems (EventBridge); none in local mode.
    pub bus: Option<Arc<dyn crate::ports::EventBus>>,
    /// Requests per second each API key may make; none: unlimited.
    pub rate_limit: Option<RateLimit>,
}

/// Where the rail secret (shared with the connectivity layer) comes from. It is never written
/// to the store: local mode takes it from its configuration, a stack from Secrets Manager.
pub enum RailSecret {
    Configured(Option<String>),
    /// Read through the secrets port under [`crate::execution::RAIL_SECRET`].
    InSecrets,
}

/// Requests per second an API key may make unless configured otherwise (Stripe's live limit).
pub const DEFAULT_RATE_LIMIT: u32 = 100;

/// A limit on requests per second, counted by `limiter`: each API key's, each customer's (all
/// its keys together), and each source's failed authentications.
pub struct RateLimit {
    pub limiter: Arc<dyn RateLimiter>,
    pub per_second: u32,
    /// Sources over their failed-authentication budget, until the end of which second: refused
    /// here before any lookup. The shared count decides; this only spares the store.
    penalty_box: std::sync::Mutex<std::collections::HashMap<String, i64>>,
}

/// A customer's keys together may make this many keys' worth of requests: more keys do not
/// buy a customer more of the service.
pub const CUSTOMER_RATE_KEYS: u32 = 4;
/// Failed authentications a source may make per second before it is refused outright.
pub const FAILED_AUTHENTICATIONS_PER_SECOND: u32 = 20;

impl RateLimit {
    /// `per_second` of zero turns the limit off.
    pub fn new(limiter: Arc<dyn RateLimiter>, per_second: u32) -> Option<RateLimit> {
        (per_second > 0).then(|| RateLimit {
            limiter,
            per_second,
            penalty_box: Default::default(),
        })
    }

    fn in_penalty_box(&self, source: &str, second: i64) -> bool {
        let boxed = self.penalty_box.lock().expect("penalty box");
        boxed.get(source).is_some_and(|until| *until >= second)
    }

    fn put_in_penalty_box(&self, source: &str, second: i64) {
        let mut boxed = self.penalty_box.lock().expect("penalty box");
        boxed.retain(|_, until| *until >= second);
        boxed.insert(source.to_owned(), second);
    }
}

fn too_many_failed_authentications() -> DomainError {
    DomainError::RateLimited {
        code: "too_many_failed_authentications",
        message: format!(
            "Too many failed authentications from this address: at most {FAILED_AUTHENTICATIONS_PER_SECOND} per second. Retry in a second."
        ),
    }
}

/// A page of a list.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub object: &'static str,
    pub data: Vec<T>,
    pub has_more: bool,
}

impl<T> Page<T> {
    /// Every item, in one page.
    pub fn all(data: Vec<T>) -> Page<T> {
        Page {
            object: "list",
            data,
            has_more: false,
        }
    }

    pub fn empty() -> Page<T> {
        Page {
            object: "list",
            data: vec![],
            has_more: false,
        }
    }

    /// A page from up to `limit + 1` items fetched: the extra one only says there is more.
    pub fn of(mut data: Vec<T>, limit: usize) -> Page<T> {
        let has_more = data.len() > limit;
        data.truncate(limit);
        Page {
            object: "list",
            data,
            has_more,
        }
    }
}

/// The customer filter a list runs with: a customer's key only ever sees its own customer, and
/// asking for another one finds nothing (`None`).
pub(crate) fn customer_scope(principal: &Principal, asked: Option<String>) -> Option<Option<String>> {
    match (&principal.key.customer_id, asked) {
        (Some(own), Some(asked)) if *own != asked => None,
        (Some(own), _) => Some(Some(own.clone())),
        (None, asked) => Some(asked),
    }
}

/// One line of an operation's history.
#[derive(Debug, Serialize)]
pub struct HistoryEntry {
    pub entity_type: String,
    pub entity_id: String,
    pub action: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub cause: Cause,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

#[derive(Serialize)]
struct ApiKeyWithSecret<'a> {
    #[serde(flatten)]
    key: &'a ApiKey,
    secret: &'a str,
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("domain objects always serialize")
}

impl Service {
    pub(crate) fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// The audit entry and the event of an operation's status change, for one changeset.
    pub(crate) fn record_operation_change(&self, changes: &mut Changeset, operation: &Operation, change: StatusChange) {
        let entry = AuditEntry::new("operation", &operation.id, "status_changed", change.cause)
            .moving(change.from.map(|s| s.as_str()), change.to.as_str());
        changes.push(Write::Audit(entry.of_operation(&operation.id)));
        changes.push(Write::Event(Event::of_operation(
            self.ids.new_id(IdKind::Event),
            change.to.as_str(),
            operation,
        )));
    }

    /// Commits `changes`, completing `ticket` (if any) with `status` and `stored_body` in the
    /// same transaction, so an effect and its idempotency record land together.
    pub(crate) async fn commit_created(
        &self,
        mut changes: Changeset,
        ticket: Option<Ticket>,
        stored_body: Vec<u8>,
    ) -> Result<(), DomainError> {
        if let Some(ticket) = ticket {
            changes.push(Write::CompleteIdempotency {
                scope: ticket.scope,
                key: ticket.key,
                response: StoredResponse {
                    status: 201,
                    body: stored_body,
                },
            });
        }
        self.store.commit(changes).await.map_err(|e| match e {
            StoreError::Conflict => {
                DomainError::invalid_state("conflict", "A concurrent request changed this resource; retry.")
            }
            other => other.into(),
        })
    }

    // ---- API keys and authentication -------------------------------------------------

    /// Creates the operator's platform admin key at start-up unless it already exists.
    pub async fn bootstrap_admin_key(&self, secret: &str) -> Result<(), DomainError> {
        auth::check_secret_shape(secret, self.environment)?;
        if secret.len() < 32 {
            return Err(DomainError::invalid(
                "OPS_BOOTSTRAP_ADMIN_KEY",
                "key_too_short",
                "The bootstrap key must be at least 32 characters.",
            ));
        }
        let secret_hash = self.hasher.hash(secret);
        if self.store.api_key_by_hash(&secret_hash).await?.is_some() {
            return Ok(());
        }
        let now = self.now();
        let key = ApiKey {
            id: self.ids.new_id(IdKind::ApiKey),
            object: "api_key".into(),
            customer_id: None,
            user_id: None,
            environment: self.environment,
            scopes: vec![Scope::Admin],
            created_at: now,
            expires_at: None,
            revoked_at: None,
            created_by: None,
            rotated_to: None,
            secret_hash,
        };
        let cause = Cause::new(
            "bootstrap_admin_key",
            "Created from OPS_BOOTSTRAP_ADMIN_KEY at start-up",
            Actor::system(),
            now,
        );
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new("api_key", &key.id, "created", cause)));
        changes.push(Write::PutApiKey(key));
        self.commit_created(changes, None, vec![]).await
    }

    /// Resolves a bearer secret to the principal it stands for. `source` (the client's address,
    /// when known) is limited in how many failed authentications it may make per second.
    pub async fn authenticate(&self, secret: Option<&str>, source: Option<&str>) -> Result<Principal, DomainError> {
        // Wall-clock seconds, not the service's clock: a request rate is real time even when
        // tests or replays move business time.
        let second = SystemClock.now().unix_timestamp();
        let limit = self.rate_limit.as_ref();
        if let (Some(limit), Some(source)) = (limit, source) {
            if limit.in_penalty_box(source, second) {
                return Err(too_many_failed_authentications());
            }
        }
        let key = match self.key_of(secret).await {
            Ok(key) => key,
            Err(refused @ DomainError::Unauthenticated { .. }) => {
                if let (Some(limit), Some(source)) = (limit, source) {
                    let counter = format!("authfail:{source}");
                    let failures = Limits {
                        member: FAILED_AUTHENTICATIONS_PER_SECOND,
                        group: FAILED_AUTHENTICATIONS_PER_SECOND,
                    };
                    if !limit.limiter.admit(&counter, "any", second, failures).await? {
                        limit.put_in_penalty_box(source, second);
                        return Err(too_many_failed_authentications());
                    }
                }
                return Err(refused);
            }
            Err(other) => return Err(other),
        };
        if let Some(limit) = limit {
            let customer_budget = limit.per_second.saturating_mul(CUSTOMER_RATE_KEYS);
            let limits = Limits {
                member: limit.per_second,
                group: customer_budget,
            };
            let customer = key.customer_id.as_deref().unwrap_or("platform");
            if !limit.limiter.admit(customer, &key.id, second, limits).await? {
                return Err(DomainError::RateLimited {
                    code: "rate_limit_exceeded",
                    message: format!(
                        "Too many requests: at most {} per second with one API key, {customer_budget} for all of a customer's keys together. Retry in a second; nothing was done.",
                        limit.per_second
                    ),
                });
            }
        }
        let user = match &key.user_id {
            Some(id) => Some(self.store.user(id).await?.ok_or_else(auth::invalid_api_key)?),
            None => None,
        };
        Ok(Principal { key, user })
    }

    /// The live key a bearer secret stands for.
    async fn key_of(&self, secret: Option<&str>) -> Result<ApiKey, DomainError> {
        let secret = secret.ok_or_else(|| {
            DomainError::unauthenticated("missing_api_key", "Send your API key as 'Authorization: Bearer <key>'.")
        })?;
        auth::check_secret_shape(secret, self.environment)?;
        let key = self
            .store
            .api_key_by_hash(&self.hasher.hash(secret))
            .await?
            .ok_or_else(auth::invalid_api_key)?;
        if key.revoked_at.is_some() || key.environment != self.environment {
            return Err(DomainError::unauthenticated(
                "api_key_revoked",
                "This API key was revoked.",
            ));
        }
        if key.expires_at.is_some_and(|at| at <= self.now()) {
            return Err(DomainError::unauthenticated(
                "api_key_expired",
                "This API key has expired.",
            ));
        }
        Ok(key)
    }

    pub async fn create_customer(
        &self,
        principal: &Principal,
        command: CreateCustomer,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        require_platform_admin(principal)?;
        let name = validate::required_text(command.name, "name", 200)?;
        let now = self.now();
        let customer = Customer {
            id: self.ids.new_id(IdKind::Customer),
            object: "customer".into(),
            name,
            status: "active".into(),
            created_at: now,
        };
        let body = to_json(&customer);
        let cause = Cause::new("customer_created", "Customer created", principal.actor(), now);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "customer",
            &customer.id,
            "created",
            cause,
        )));
        changes.push(Write::InsertCustomer(customer));
        self.commit_created(changes, ticket, body.clone()).await?;
        Ok(body)
    }

    async fn visible_customer(&self, principal: &Principal, id: &str, param: &str) -> Result<Customer, DomainError> {
        let not_found = || DomainError::InvalidRequest {
            code: "resource_missing",
            param: Some(param.into()),
            message: format!("No such customer: '{id}'"),
        };
        if !principal.can_access(id) || !IdKind::Customer.matches(id) {
            return Err(not_found());
        }
        self.store.customer(id).await?.ok_or_else(not_found)
    }

    pub async fn create_user(
        &self,
        principal: &Principal,
        customer_id: &str,
        command: CreateUser,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let (name, email, roles) = command.validate()?;
        let now = self.now();
        let user = User {
            id: self.ids.new_id(IdKind::User),
            object: "user".into(),
            customer_id: customer.id,
            name,
            email,
            roles,
            created_at: now,
        };
        let body = to_json(&user);
        let cause = Cause::new("user_created", "User created", principal.actor(), now);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new("user", &user.id, "created", cause)));
        changes.push(Write::InsertUser(user));
        self.commit_created(changes, ticket, body.clone()).await?;
        Ok(body)
    }

    pub async fn create_api_key(
        &self,
        principal: &Principal,
        command: CreateApiKey,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let scopes = command.scopes.ok_or_else(|| DomainError::missing("scopes"))?;
        if scopes.is_empty() {
            return Err(DomainError::invalid(
                "scopes",
                "parameter_invalid_empty",
                "Give at least one scope.",
            ));
        }
        let customer_id = match (command.customer_id, &principal.key.customer_id) {
            (Some(id), _) => Some(self.visible_customer(principal, &id, "customer_id").await?.id),
            (None, Some(own)) => Some(own.clone()),
            (None, None) => None,
        };
        if let Some(customer_id) = &customer_id {
            if let Some(i) = scopes.iter().position(|s| *s == Scope::Admin) {
                return Err(DomainError::invalid(
                    format!("scopes[{i}]"),
                    "scope_not_grantable",
                    "The admin scope is for platform keys only.",
                ));
            }
            // A customer's key can hand out only what it holds itself.
            if let Some(i) = scopes.iter().position(|s| !principal.has_scope(*s)) {
                return Err(DomainError::forbidden(
                    "scope_not_grantable",
                    format!(
                        "This key cannot grant '{}' (scopes[{i}]) because it lacks it.",
                        scopes[i].name()
                    ),
                ));
            }
            debug_assert!(principal.can_access(customer_id));
        }
        if let Some(user_id) = &command.user_id {
            let user = match IdKind::User.matches(user_id) {
                true => self.store.user(user_id).await?,
                false => None,
            };
            if user.is_none_or(|u| Some(&u.customer_id) != customer_id.as_ref()) {
                return Err(DomainError::InvalidRequest {
                    code: "resource_missing",
                    param: Some("user_id".into()),
                    message: format!("No such user of this customer: '{user_id}'"),
                });
            }
        }
        let mut unique = scopes;
        unique.sort();
        unique.dedup();
        let now = self.now();
        let secret = auth::new_secret(self.environment);
        let key = ApiKey {
            id: self.ids.new_id(IdKind::ApiKey),
            object: "api_key".into(),
            customer_id,
            user_id: command.user_id,
            environment: self.environment,
            scopes: unique,
            created_at: now,
            expires_at: None,
            revoked_at: None,
            created_by: Some(principal.actor().id),
            rotated_to: None,
            secret_hash: self.hasher.hash(&secret),
        };
        let cause = Cause::new("api_key_created", "API key created", principal.actor(), now);
        self.issue_key(key, &secret, cause, Changeset::default(), ticket).await
    }

    /// Stores a new key and answers with its secret, once. The idempotency record keeps the
    /// response with the secret withheld: secrets are never stored.
    async fn issue_key(
        &self,
        key: ApiKey,
        secret: &str,
        cause: Cause,
        mut changes: Changeset,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        let body = to_json(&ApiKeyWithSecret { key: &key, secret });
        let withheld = format!("{}…withheld", self.environment.key_prefix());
        let stored = to_json(&ApiKeyWithSecret {
            key: &key,
            secret: &withheld,
        });
        changes.push(Write::Audit(AuditEntry::new("api_key", &key.id, "created", cause)));
        changes.push(Write::PutApiKey(key));
        self.commit_created(changes, ticket, stored).await?;
        Ok(body)
    }

    async fn manageable_key(&self, principal: &Principal, id: &str) -> Result<ApiKey, DomainError> {
        let key = match IdKind::ApiKey.matches(id) {
            true => self.store.api_key(id).await?,
            false => None,
        };
        let key = key
            .filter(|k| k.environment == self.environment)
            .filter(|k| match &k.customer_id {
                Some(customer) => principal.can_access(customer),
                None => principal.is_platform(),
            })
            .ok_or_else(|| DomainError::not_found("api_key", id))?;
        if key.id != principal.key.id {
            principal.require(Scope::UsersManage)?;
        }
        Ok(key)
    }

    pub async fn rotate_api_key(
        &self,
        principal: &Principal,
        id: &str,
        command: validate::RotateApiKey,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        let overlap = match command.expires_in {
            None => DEFAULT_ROTATION_OVERLAP,
            Some(seconds) if (0..=MAX_ROTATION_OVERLAP.whole_seconds()).contains(&seconds) => {
                Duration::seconds(seconds)
            }
            Some(_) => {
                return Err(DomainError::invalid(
                    "expires_in",
                    "out_of_range",
                    format!("expires_in is 0 to {} seconds.", MAX_ROTATION_OVERLAP.whole_seconds()),
                ));
            }
        };
        let mut old = self.manageable_key(principal, id).await?;
        let now = self.now();
        if old.revoked_at.is_some() || old.expires_at.is_some_and(|at| at <= now) {
            return Err(DomainError::invalid_state(
                "api_key_inactive",
                "A revoked or expired key cannot be rotated.",
            ));
        }
        // A key rotates once: a leaked key cannot keep planting successors while it expires.
        if old.rotated_to.is_some() || old.expires_at.is_some() {
            return Err(DomainError::invalid_state(
                "api_key_already_rotated",
                "This key was already rotated; rotate its successor instead.",
            ));
        }
        let ends = now + overlap;
        old.expires_at = Some(old.expires_at.map_or(ends, |at| at.min(ends)));
        let secret = auth::new_secret(self.environment);
        let new_key = ApiKey {
            id: self.ids.new_id(IdKind::ApiKey),
            created_at: now,
            expires_at: None,
            created_by: Some(principal.actor().id),
            rotated_to: None,
            secret_hash: self.hasher.hash(&secret),
            ..old.clone()
        };
        old.rotated_to = Some(new_key.id.clone());
        let cause = Cause::new(
            "api_key_rotated",
            format!("Rotated from {}", old.id),
            principal.actor(),
            now,
        );
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "api_key",
            &old.id,
            "rotated",
            cause.clone(),
        )));
        changes.push(Write::PutApiKey(old));
        self.issue_key(new_key, &secret, cause, changes, ticket).await
    }

    /// Revokes a key and every successor it was rotated into, in one changeset: a leaked key's
    /// rotation does not outlive the leaked key.
    pub async fn revoke_api_key(&self, principal: &Principal, id: &str) -> Result<ApiKey, DomainError> {
        let revoked = self.manageable_key(principal, id).await?;
        let now = self.now();
        let mut changes = Changeset::default();
        let mut next = Some(revoked.clone());
        let mut first: Option<ApiKey> = None;
        while let Some(mut key) = next.take() {
            if key.revoked_at.is_none() {
                key.revoked_at = Some(now);
                let message = match &first {
                    None => "API key revoked".to_string(),
                    Some(origin) => format!("Revoked with {}, which it was rotated from", origin.id),
                };
                let cause = Cause::new("api_key_revoked", message, principal.actor(), now);
                changes.push(Write::Audit(AuditEntry::new("api_key", &key.id, "revoked", cause)));
                changes.push(Write::PutApiKey(key.clone()));
            }
            next = match &key.rotated_to {
                Some(successor) => self.store.api_key(successor).await?,
                None => None,
            };
            first.get_or_insert(key);
        }
        if !changes.writes.is_empty() {
            self.store.commit(changes).await?;
        }
        Ok(first.unwrap_or(revoked))
    }

    /// A customer's keys (a platform key: the platform's own, or a customer's with
    /// `customer_id`), newest first; secrets are never shown.
    pub async fn list_api_keys(
        &self,
        principal: &Principal,
        customer_id: Option<String>,
    ) -> Result<Page<ApiKey>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let owner = match customer_id {
            Some(id) => Some(self.visible_customer(principal, &id, "customer_id").await?.id),
            None => principal.key.customer_id.clone(),
        };
        let keys = self.store.api_keys_of(owner.as_deref()).await?;
        Ok(Page::all(
            keys.into_iter().filter(|k| k.environment == self.environment).collect(),
        ))
    }

    // ---- Workflows --------------------------------------------------------------------

    /// The definition `name` resolves to for `customer_id`: the customer's own, else the
    /// platform's, else the built-in one.
    pub async fn resolve_workflow(
        &self,
        customer_id: Option<&str>,
        name: &str,
    ) -> Result<Option<Workflow>, DomainError> {
        if let Some(customer) = customer_id {
            if let Some(found) = self
                .store
                .workflow(&WorkflowOwner::Customer(customer.into()), name)
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

    pub async fn get_workflow(&self, principal: &Principal, name: &str) -> Result<Workflow, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let found = match workflow::valid_name(name) {
            true => {
                self.resolve_workflow(principal.key.customer_id.as_deref(), name)
                    .await?
            }
            false => None,
        };
        found.ok_or_else(|| DomainError::not_found("workflow", name))
    }

    pub async fn put_workflow(
        &self,
        principal: &Principal,
        name: &str,
        definition: WorkflowDefinition,
    ) -> Result<Workflow, DomainError> {
        principal.require(Scope::WorkflowsManage)?;
        if !workflow::valid_name(name) {
            return Err(DomainError::invalid(
                "name",
                "invalid_workflow_name",
                "Workflow names are 1-64 lowercase letters, digits, '_' or '-'.",
            ));
        }
        definition.validate()?;
        let owner = match &principal.key.customer_id {
            Some(customer) => WorkflowOwner::Customer(customer.clone()),
            None => WorkflowOwner::Platform,
        };
        let current = self.store.workflow(&owner, name).await?;
        let saved = Workflow {
            name: name.into(),
            object: "workflow".into(),
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
        let entity = format!("{}:{name}", owner_label(&saved.owner));
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new("workflow", &entity, action, cause)));
        changes.push(Write::PutWorkflow(saved.clone()));
        self.commit_created(changes, None, vec![]).await?;
        Ok(saved)
    }

    // ---- Approval floors ----------------------------------------------------------------

    /// The floor `customer_id` has for `kind`: the one its admin set, else the environment's
    /// default.
    async fn approval_floor(&self, customer_id: &str, kind: OperationType) -> Result<ApprovalFloor, DomainError> {
        let stored = self
            .store
            .workflow(
                &WorkflowOwner::Customer(customer_id.into()),
                &workflow::floor_name(kind),
            )
            .await?;
        Ok(self.floor_of(customer_id, kind, stored))
    }

    fn floor_of(&self, customer_id: &str, kind: OperationType, stored: Option<Workflow>) -> ApprovalFloor {
        ApprovalFloor {
            object: "approval_floor",
            customer_id: customer_id.into(),
            kind,
            is_default: stored.is_none(),
            version: stored.as_ref().map_or(0, |w| w.version),
            definition: stored.map_or_else(|| workflow::default_floor(self.environment), |w| w.definition),
        }
    }

    /// What decides a new operation: the workflow it names as it resolves for its customer
    /// (the customer's, else the platform's, else the built-in one) and the customer's floor
    /// for its type, read together.
    async fn workflow_and_floor(
        &self,
        customer_id: &str,
        name: &str,
        kind: OperationType,
    ) -> Result<(Option<Workflow>, ApprovalFloor), DomainError> {
        let customer = WorkflowOwner::Customer(customer_id.into());
        let wanted = [
            (customer.clone(), name.to_owned()),
            (WorkflowOwner::Platform, name.to_owned()),
            (customer, workflow::floor_name(kind)),
        ];
        let [own, platform, floor]: [Option<Workflow>; 3] = self
            .store
            .workflows(&wanted)
            .await?
            .try_into()
            .map_err(|_| DomainError::Store("the store answered a different number of workflows".into()))?;
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
        definition.validate()?;
        let current = self.approval_floor(&customer.id, kind).await?;
        let saved = Workflow {
            name: workflow::floor_name(kind),
            object: "workflow".into(),
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
        let entity = format!("{}:{}", customer.id, saved.name);
        let action = if current.is_default { "created" } else { "updated" };
        changes.push(Write::Audit(AuditEntry::new("approval_floor", &entity, action, cause)));
        changes.push(Write::PutWorkflow(saved.clone()));
        self.commit_created(changes, None, vec![]).await?;
        Ok(ApprovalFloor {
            object: "approval_floor",
            customer_id: customer.id,
            kind,
            is_default: false,
            version: saved.version,
            definition: saved.definition,
        })
    }

    // ---- Operations -------------------------------------------------------------------

    pub async fn create_operation(
        &self,
        principal: &Principal,
        command: CreateOperation,
        ticket: Option<Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let valid = command.validate(&|rail| self.rails.contains(rail))?;
        let customer_id = match (&valid.customer_id, &principal.key.customer_id) {
            // A customer's own key vouches that the customer exists.
            (Some(id), Some(own)) if id == own => own.clone(),
            (Some(id), _) => self.visible_customer(principal, id, "customer_id").await?.id,
            (None, Some(own)) => own.clone(),
            (None, None) => return Err(DomainError::missing("customer_id")),
        };
        let (workflow, floor) = self
            .workflow_and_floor(&customer_id, &valid.workflow, valid.kind)
            .await?;
        let workflow = workflow.ok_or_else(|| {
            DomainError::invalid(
                "workflow",
                "unknown_workflow",
                format!("No workflow named '{}'.", valid.workflow),
            )
        })?;
        let total_amount = money::total(valid.items.iter().map(|i| i.amount))
            .ok_or_else(|| DomainError::invalid("items", "total_too_large", "The items' total overflows."))?;
        let facts = Facts {
            kind: valid.kind,
            currency: &valid.currency,
            total_amount,
            items: valid
                .items
                .iter()
                .map(|i| {
                    (
                        i.amount.minor_units(),
                        i.destination.rail.as_str(),
                        i.beneficiary.id_type.as_str(),
                    )
                })
                .collect(),
        };
        let (verdict, decider) = workflow::stricter(
            workflow.definition.evaluate(&facts),
            floor.definition.floor_verdict(&facts),
        );
        let now = self.now();
        let (decided_by, source) = match decider {
            Decider::Workflow => (
                format!("workflow:{}", workflow.name),
                format!("workflow {}", workflow.name),
            ),
            Decider::Floor => (
                format!("approval_floor:{}", valid.kind.as_str()),
                format!(
                    "the customer's approval floor for {} (workflow {} asked less)",
                    valid.kind.as_str(),
                    workflow.name
                ),
            ),
            Decider::Both => (
                format!("workflow:{}", workflow.name),
                format!(
                    "workflow {} with the customer's approval floor for {}",
                    workflow.name,
                    valid.kind.as_str()
                ),
            ),
        };
        let decided_by = Actor {
            kind: crate::cause::ActorType::System,
            id: decided_by,
        };
        let rule_name = |rule: Option<usize>| rule.map_or("no rule".to_string(), |r| format!("rule {r}"));
        let (status, cause, approval_requirement) = match verdict {
            Verdict::Approve { rule } => (
                OperationStatus::Approved,
                Cause::new(
                    "workflow_approved",
                    format!("Approved by workflow {} ({})", workflow.name, rule_name(Some(rule))),
                    decided_by,
                    now,
                ),
                None,
            ),
            Verdict::Reject { rule, reason } => (
                OperationStatus::Rejected,
                Cause::new(
                    if decider == Decider::Floor {
                        "approval_floor_rejected"
                    } else {
                        "workflow_rejected"
                    },
                    format!("Rejected by {source} ({}): {reason}", rule_name(rule)),
                    decided_by,
                    now,
                ),
                None,
            ),
            Verdict::RequireApprovals { rule, requirement } => (
                OperationStatus::PendingApproval,
                Cause::new(
                    "approval_required",
                    format!(
                        "Required by {source} ({}): {} approval(s) by role {}",
                        rule_name(Some(rule)),
                        requirement.count,
                        requirement.roles_label()
                    ),
                    decided_by,
                    now,
                ),
                Some(requirement),
            ),
        };
        let operation = Operation {
            id: self.ids.new_id(IdKind::Operation),
            object: "operation".into(),
            customer_id,
            kind: valid.kind,
            currency: valid.currency,
            items: valid
                .items
                .into_iter()
                .map(|i| Item {
                    id: self.ids.new_id(IdKind::Item),
                    beneficiary: i.beneficiary,
                    destination: i.destination,
                    amount: i.amount,
                    reference: i.reference,
                    transaction_id: None,
                })
                .collect(),
            workflow: workflow.name,
            status,
            cause: cause.clone(),
            total_amount,
            approval_requirement,
            approvals: vec![],
            created_by: principal.actor().id,
            created_at: now,
            updated_at: now,
            metadata: valid.metadata,
            environment: self.environment,
            version: 1,
        };
        let body = to_json(&operation);
        crate::validate::check_operation_size(body.len(), operation.items.len())?;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("operation", &operation.id, "created", cause)
                .of_operation(&operation.id)
                .moving(None, status.as_str()),
        ));
        let created = Event::of_operation(self.ids.new_id(IdKind::Event), "created", &operation);
        changes.push(Write::Event(created));
        changes.push(Write::Event(Event::of_operation(
            self.ids.new_id(IdKind::Event),
            status.as_str(),
            &operation,
        )));
        changes.push(Write::InsertOperation(operation));
        self.commit_created(changes, ticket, body.clone()).await?;
        Ok(body)
    }

    pub async fn get_operation(&self, principal: &Principal, id: &str) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsRead)?;
        self.visible_operation(principal, id).await
    }

    async fn visible_operation(&self, principal: &Principal, id: &str) -> Result<Operation, DomainError> {
        let found = match IdKind::Operation.matches(id) {
            true => self.store.operation(id).await?,
            false => None,
        };
        found
            .filter(|op| principal.can_access(&op.customer_id))
            .ok_or_else(|| DomainError::not_found("operation", id))
    }

    pub async fn list_operations(
        &self,
        principal: &Principal,
        mut query: OperationQuery,
    ) -> Result<Page<Operation>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = OperationQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of(self.store.operations(&query).await?, limit))
    }

    pub async fn operation_history(&self, principal: &Principal, id: &str) -> Result<Page<HistoryEntry>, DomainError> {
        let operation = self.get_operation(principal, id).await?;
        let data = self
            .store
            .operation_history(&operation.id)
            .await?
            .into_iter()
            .map(|e| HistoryEntry {
                entity_type: e.entity_type,
                entity_id: e.entity_id,
                action: e.action,
                from: e.from,
                to: e.to,
                cause: e.cause,
                at: e.at,
            })
            .collect();
        Ok(Page::all(data))
    }

    pub async fn approve_operation(
        &self,
        principal: &Principal,
        id: &str,
        command: validate::Approve,
    ) -> Result<Operation, DomainError> {
        let comment = validate::optional_text(command.comment, "comment", 500)?;
        self.decide(principal, id, Decision::Approved, comment).await
    }

    pub async fn reject_operation(
        &self,
        principal: &Principal,
        id: &str,
        command: validate::Reject,
    ) -> Result<Operation, DomainError> {
        let reason = validate::required_text(command.reason, "reason", 500)?;
        self.decide(principal, id, Decision::Rejected, Some(reason)).await
    }

    pub async fn cancel_operation(
        &self,
        principal: &Principal,
        id: &str,
        command: validate::Cancel,
    ) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsWrite)?;
        let reason = validate::optional_text(command.reason, "reason", 500)?;
        self.change_operation(principal, id, |operation, now| {
            let message = reason.clone().unwrap_or_else(|| "Cancelled on request".into());
            let cause = Cause::new("cancelled_on_request", message, principal.actor(), now);
            let change = operation.apply(OperationTransition::Cancel(cause))?;
            Ok(Some(change))
        })
        .await
    }

    async fn decide(
        &self,
        principal: &Principal,
        id: &str,
        decision: Decision,
        comment: Option<String>,
    ) -> Result<Operation, DomainError> {
        principal.require(Scope::OperationsApprove)?;
        self.change_operation(principal, id, |operation, now| {
            record_decision(operation, principal, decision, comment.clone(), now)
        })
        .await
    }

    /// Loads, changes and stores an operation with its audit entry, retrying when a
    /// concurrent change won the race (the retry sees the winner's state, so a losing
    /// approve-versus-cancel gets its 409 from the state machine).
    async fn change_operation<F>(&self, principal: &Principal, id: &str, change: F) -> Result<Operation, DomainError>
    where
        F: Fn(&mut Operation, OffsetDateTime) -> Result<Option<StatusChange>, DomainError>,
    {
        for _ in 0..MAX_ATTEMPTS {
            let mut operation = self.visible_operation(principal, id).await?;
            let previous = operation.status;
            let now = self.now();
            let status_change = change(&mut operation, now)?;
            operation.version += 1;
            operation.updated_at = now;
            let mut changes = Changeset::default();
            match status_change {
                Some(change) => self.record_operation_change(&mut changes, &operation, change),
                None => {
                    let approval = operation
                        .approvals
                        .last()
                        .expect("a decision without a status change is an approval");
                    let cause = Cause::new(
                        "approval_recorded",
                        format!(
                            "Approval recorded ({} of {})",
                            operation.approvals.len(),
                            operation.approval_requirement.map_or(1, |r| r.count)
                        ),
                        principal.actor(),
                        approval.at,
                    );
                    let entry = AuditEntry::new("operation", &operation.id, "approval_recorded", cause)
                        .moving(Some(previous.as_str()), previous.as_str());
                    changes.push(Write::Audit(entry.of_operation(&operation.id)));
                }
            }
            changes.push(Write::UpdateOperation(operation.clone()));
            match self.store.commit(changes).await {
                Ok(()) => return Ok(operation),
                Err(StoreError::Conflict) => continue,
                Err(other) => return Err(other.into()),
            }
        }
        Err(DomainError::invalid_state(
            "conflict",
            "The operation is changing too fast; retry.",
        ))
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

fn builtin_workflow(name: &str) -> Option<Workflow> {
    workflow::builtin(name).map(|definition| Workflow {
        name: name.into(),
        object: "workflow".into(),
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
    pub object: &'static str,
    pub customer_id: String,
    #[serde(rename = "type")]
    pub kind: OperationType,
    #[serde(flatten)]
    pub definition: WorkflowDefinition,
    /// Whether this is the environment's default (never set by the customer's admin).
    #[serde(rename = "default")]
    pub is_default: bool,
    pub version: u64,
}

fn owner_label(owner: &WorkflowOwner) -> String {
    match owner {
        WorkflowOwner::Builtin => "builtin".into(),
        WorkflowOwner::Platform => "platform".into(),
        WorkflowOwner::Customer(id) => id.clone(),
    }
}

/// The four-eyes rules: a decision is signed by a user holding the required role, never the
/// operation's creator, at most once per user; one rejection rejects; enough distinct
/// approvals approve.
pub fn record_decision(
    operation: &mut Operation,
    principal: &Principal,
    decision: Decision,
    comment: Option<String>,
    now: OffsetDateTime,
) -> Result<Option<StatusChange>, DomainError> {
    if operation.status != OperationStatus::PendingApproval {
        return Err(DomainError::invalid_state(
            "operation_not_pending_approval",
            format!(
                "Operation {} is {}; only operations pending approval take decisions.",
                operation.id,
                operation.status.as_str()
            ),
        ));
    }
    let user = principal.user.as_ref().ok_or_else(|| {
        DomainError::forbidden(
            "user_required",
            "Decisions are signed by a user: use an API key that belongs to a user.",
        )
    })?;
    if user.id == operation.created_by || principal.key.id == operation.created_by {
        return Err(DomainError::forbidden(
            "self_approval_forbidden",
            "The creator of an operation cannot decide on it.",
        ));
    }
    // Four-eyes holds between minting and deciding: a key minted by the creator (or by the key
    // that created the operation, whose actor is then the creator) speaks for the creator.
    if principal.key.created_by.as_deref() == Some(operation.created_by.as_str()) {
        return Err(DomainError::forbidden(
            "key_minted_by_creator",
            "This key was minted by the operation's creator, so its decision would be the creator's own.",
        ));
    }
    let requirement = operation
        .approval_requirement
        .ok_or_else(|| DomainError::invalid_state("no_approval_required", "This operation needs no approval."))?;
    if !requirement.held_by(&user.roles) {
        return Err(DomainError::forbidden(
            "role_required",
            format!(
                "Deciding on this operation needs the role '{}'.",
                requirement.roles_label()
            ),
        ));
    }
    if operation.approvals.iter().any(|a| a.user_id == user.id) {
        return Err(DomainError::invalid_state(
            "already_decided",
            "This user has already decided on this operation.",
        ));
    }
    operation.approvals.push(Approval {
        user_id: user.id.clone(),
        decision,
        comment: comment.clone(),
        at: now,
    });
    let actor = principal.actor();
    match decision {
        Decision::Rejected => {
            let reason = comment.unwrap_or_default();
            let cause = Cause::new(
                "rejected_by_approver",
                format!("Rejected by {}: {reason}", user.id),
                actor,
                now,
            );
            operation.apply(OperationTransition::Reject(cause)).map(Some)
        }
        Decision::Approved => {
            let approvals = operation
                .approvals
                .iter()
                .filter(|a| a.decision == Decision::Approved)
                .count();
            if approvals < requirement.count as usize {
                return Ok(None);
            }
            let cause = Cause::new(
                "approved_by_approver",
                format!(
                    "Approved by {} ({approvals} of {} approval(s))",
                    user.id, requirement.count
                ),
                actor,
                now,
            );
            operation.apply(OperationTransition::Approve(cause)).map(Some)
        }
    }
}

#[cfg(test)]
mod four_eyes_tests {
    use super::*;
    use crate::auth::Role;
    use crate::operation::tests::operation_in;
    use crate::workflow::ApprovalRequirement;

    fn principal(user_id: &str, roles: &[Role]) -> Principal {
        let at = OffsetDateTime::UNIX_EPOCH;
        Principal {
            key: ApiKey {
                id: format!("key_{user_id}"),
                object: "api_key".into(),
                customer_id: Some("cus_1".into()),
                user_id: Some(user_id.into()),
                environment: Environment::Test,
                scopes: vec![Scope::OperationsApprove],
                created_at: at,
                expires_at: None,
                revoked_at: None,
                created_by: None,
                rotated_to: None,
                secret_hash: String::new(),
            },
            user: Some(User {
                id: user_id.into(),
                object: "user".into(),
                customer_id: "cus_1".into(),
                name: "n".into(),
                email: "e@x.io".into(),
                roles: roles.to_vec(),
                created_at: at,
            }),
        }
    }

    fn pending(count: u8) -> Operation {
        let mut op = operation_in(OperationStatus::PendingApproval);
        op.created_by = "usr_maker".into();
        op.approval_requirement = Some(ApprovalRequirement {
            count,
            role: Role::Approver,
            also_role: None,
        });
        op
    }

    fn code(result: Result<Option<StatusChange>, DomainError>) -> &'static str {
        match result.unwrap_err() {
            DomainError::Forbidden { code, .. } | DomainError::InvalidState { code, .. } => code,
            other => panic!("{other:?}"),
        }
    }

    const NOW: OffsetDateTime = OffsetDateTime::UNIX_EPOCH;

    #[test]
    fn the_creator_never_approves_their_own_operation() {
        let mut op = pending(1);
        let maker_with_approver_role = principal("usr_maker", &[Role::Maker, Role::Approver]);
        assert_eq!(
            code(record_decision(
                &mut op,
                &maker_with_approver_role,
                Decision::Approved,
                None,
                NOW
            )),
            "self_approval_forbidden"
        );
        assert!(op.approvals.is_empty() && op.status == OperationStatus::PendingApproval);
    }

    #[test]
    fn the_required_role_is_needed() {
        let mut op = pending(1);
        assert_eq!(
            code(record_decision(
                &mut op,
                &principal("usr_viewer", &[Role::Viewer]),
                Decision::Approved,
                None,
                NOW
            )),
            "role_required"
        );
    }

    #[test]
    fn a_key_without_user_cannot_sign() {
        let mut op = pending(1);
        let mut keyonly = principal("usr_x", &[Role::Approver]);
        keyonly.user = None;
        assert_eq!(
            code(record_decision(&mut op, &keyonly, Decision::Approved, None, NOW)),
            "user_required"
        );
    }

    #[test]
    fn one_approval_completes_a_single_signature_requirement() {
        let mut op = pending(1);
        let change = record_decision(
            &mut op,
            &principal("usr_a", &[Role::Approver]),
            Decision::Approved,
            Some("ok".into()),
            NOW,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
        assert_eq!(change.cause.code, "approved_by_approver");
        assert_eq!(op.approvals.len(), 1);
    }

    #[test]
    fn two_distinct_approvers_are_needed_for_two_and_nobody_approves_twice() {
        let mut op = pending(2);
        let a = principal("usr_a", &[Role::Approver]);
        assert_eq!(
            record_decision(&mut op, &a, Decision::Approved, None, NOW).unwrap(),
            None
        );
        assert_eq!(op.status, OperationStatus::PendingApproval);
        assert_eq!(
            code(record_decision(&mut op, &a, Decision::Approved, None, NOW)),
            "already_decided"
        );
        assert_eq!(
            code(record_decision(&mut op, &a, Decision::Rejected, Some("no".into()), NOW)),
            "already_decided"
        );
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Approved,
            None,
            NOW,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Approved);
    }

    #[test]
    fn one_rejection_rejects_even_after_an_approval() {
        let mut op = pending(2);
        record_decision(
            &mut op,
            &principal("usr_a", &[Role::Approver]),
            Decision::Approved,
            None,
            NOW,
        )
        .unwrap();
        let change = record_decision(
            &mut op,
            &principal("usr_b", &[Role::Approver]),
            Decision::Rejected,
            Some("wrong account".into()),
            NOW,
        )
        .unwrap()
        .unwrap();
        assert_eq!(change.to, OperationStatus::Rejected);
        assert!(change.cause.message.contains("wrong account"));
        assert_eq!(
            code(record_decision(
                &mut op,
                &principal("usr_c", &[Role::Approver]),
                Decision::Approved,
                None,
                NOW
            )),
            "operation_not_pending_approval"
        );
    }
}
