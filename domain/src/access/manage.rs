//! Users and API keys: created, rotated, revoked and listed, each change audited.

use crate::access::{self, ApiKey, Principal, Role, Scope, UpdateUser, User, UserStatus};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::idempotency::Ticket;
use crate::ids::{ApiKeyId, UserId};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::service::{Issued, Page, Service};
use crate::validate::{self, CreateApiKey, CreateUser};
use time::format_description::well_known::Rfc3339;
use time::Duration;

/// How long a rotated key keeps working unless the caller says otherwise.
pub const DEFAULT_ROTATION_OVERLAP: Duration = Duration::hours(24);
const MAX_ROTATION_OVERLAP: Duration = Duration::days(7);
/// How often a revocation reads its key's chain again after a rotation raced it.
const MAX_REVOKE_ATTEMPTS: usize = 5;

impl Service {
    pub async fn create_user(
        &self,
        principal: &Principal,
        customer_id: &str,
        command: CreateUser,
        ticket: Option<Ticket<User>>,
    ) -> Result<User, DomainError> {
        principal.require(Scope::UsersManage)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let (name, email, roles) = command.validate()?;
        let now = self.now();
        let user = User {
            id: crate::ids::UserId::new(&*self.ids),
            customer_id: customer.id,
            name,
            email,
            roles,
            status: UserStatus::Active,
            created_at: now,
            version: 1,
            delegation: None,
        };
        let cause = Cause::new("user_created", "User created", principal.actor(), now);
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("user", &user.id, "created", cause).with_details(user_details(&user)),
        ));
        // The store claims the user's email for its customer with the user: a claim taken
        // already (another user, or a create beside this one) refuses the whole commit.
        changes.push(Write::InsertUser(user.clone()));
        match self.commit_created(changes, ticket, &user).await {
            Err(DomainError::InvalidState { code: "conflict", .. }) => Err(DomainError::taken(
                "email",
                "email_in_use",
                format!("Another user of this customer has the email {}.", user.email),
            )),
            other => other.map(|()| user),
        }
    }

    pub async fn create_api_key(
        &self,
        principal: &Principal,
        command: CreateApiKey,
        ticket: Option<Ticket<Issued<ApiKey>>>,
    ) -> Result<Issued<ApiKey>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let name = crate::text::optional_nonblank_text(command.name, "name", 100)?;
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
        let user_id = match &command.user_id {
            Some(raw) => {
                let user = match UserId::parse(raw) {
                    Some(id) => self.store.user(&id).await?,
                    None => None,
                };
                match user.filter(|u| Some(&u.customer_id) == customer_id.as_ref()) {
                    Some(user) => Some(user.id),
                    None => {
                        return Err(DomainError::missing_reference(
                            "user_id",
                            format!("No such user of this customer: '{raw}'"),
                        ))
                    }
                }
            }
            None => None,
        };
        let mut unique = scopes;
        unique.sort();
        unique.dedup();
        let now = self.now();
        let expires_at = key_expiry(command.expires_at.as_deref(), now)?;
        let secret = access::new_secret(self.environment);
        let key = ApiKey {
            id: crate::ids::ApiKeyId::new(&*self.ids),
            name,
            customer_id,
            user_id,
            environment: self.environment,
            scopes: unique,
            created_at: now,
            expires_at,
            revoked_at: None,
            created_by: Some(principal.actor().id),
            lineage: principal.lineage_of_minted(None),
            rotated_to: None,
            secret_hash: self.hasher.hash(&secret),
            version: 1,
        };
        let named = key.name.as_ref().map_or(String::new(), |name| format!(" '{name}'"));
        let message = match &key.expires_at {
            Some(at) => format!(
                "API key{named} created, to expire at {}",
                at.format(&Rfc3339).expect("in range")
            ),
            None => format!("API key{named} created"),
        };
        let cause = Cause::new("api_key_created", message, principal.actor(), now);
        self.issue_key(key, secret, cause, Changeset::default(), ticket).await
    }

    /// Stores a new key and answers with its secret, once (secrets are never stored: how the
    /// idempotency record withholds it is the ticket's affair).
    async fn issue_key(
        &self,
        key: ApiKey,
        secret: String,
        cause: Cause,
        mut changes: Changeset,
        ticket: Option<Ticket<Issued<ApiKey>>>,
    ) -> Result<Issued<ApiKey>, DomainError> {
        changes.push(Write::Audit(AuditEntry::new("api_key", &key.id, "created", cause)));
        changes.push(Write::PutApiKey(key.clone()));
        let issued = Issued { resource: key, secret };
        self.commit_created(changes, ticket, &issued).await?;
        Ok(issued)
    }

    async fn manageable_key(&self, principal: &Principal, id: &ApiKeyId) -> Result<ApiKey, DomainError> {
        let key = self
            .store
            .api_key(id)
            .await?
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
        id: &ApiKeyId,
        command: validate::RotateApiKey,
        ticket: Option<Ticket<Issued<ApiKey>>>,
    ) -> Result<Issued<ApiKey>, DomainError> {
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
        if old.rotated_to.is_some() {
            return Err(DomainError::invalid_state(
                "api_key_already_rotated",
                "This key was already rotated; rotate its successor instead.",
            ));
        }
        // The successor keeps the expiry the key was made with: rotating does not extend it.
        let made_to_expire = old.expires_at;
        let ends = now + overlap;
        old.expires_at = Some(made_to_expire.map_or(ends, |at| at.min(ends)));
        let secret = access::new_secret(self.environment);
        // The successor speaks for everyone the old key did, the old key itself included.
        let lineage = principal.lineage_of_minted(Some(&old));
        let new_key = ApiKey {
            id: crate::ids::ApiKeyId::new(&*self.ids),
            created_at: now,
            expires_at: made_to_expire,
            created_by: Some(principal.actor().id),
            lineage,
            rotated_to: None,
            secret_hash: self.hasher.hash(&secret),
            version: 1,
            ..old.clone()
        };
        old.rotated_to = Some(new_key.id.clone());
        old.version += 1;
        // Each key's history tells its own side: the old key where it went and until when it
        // still works, the new one where it came from.
        let expires = old
            .expires_at
            .and_then(|at| at.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_default();
        let rotated = Cause::new(
            "api_key_rotated",
            format!("Rotated to {}; this key works until {expires}", new_key.id),
            principal.actor(),
            now,
        );
        let created = Cause::new(
            "api_key_rotated",
            format!("Rotated from {}", old.id),
            principal.actor(),
            now,
        );
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new("api_key", &old.id, "rotated", rotated)));
        changes.push(Write::PutApiKey(old));
        self.issue_key(new_key, secret, created, changes, ticket).await
    }

    /// Revokes a key and every successor it was rotated into, in one changeset: a leaked key's
    /// rotation does not outlive the leaked key. A rotation that lands first makes the changeset
    /// conflict; the chain is then read again, with the successor it planted.
    pub async fn revoke_api_key(&self, principal: &Principal, id: &ApiKeyId) -> Result<ApiKey, DomainError> {
        self.retry_on_conflict(
            MAX_REVOKE_ATTEMPTS,
            || Err(self.commit_error(StoreError::Conflict)),
            || self.revocation(principal, id),
        )
        .await
    }

    /// The key `id` as revoking it leaves it, and the changeset revoking it and its successors.
    async fn revocation(&self, principal: &Principal, id: &ApiKeyId) -> Result<(ApiKey, Changeset), DomainError> {
        let revoked = self.manageable_key(principal, id).await?;
        let now = self.now();
        let mut changes = Changeset::default();
        let mut next = Some(revoked.clone());
        let mut first: Option<ApiKey> = None;
        while let Some(mut key) = next.take() {
            if key.revoked_at.is_none() {
                key.revoked_at = Some(now);
                key.version += 1;
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
        Ok((first.unwrap_or(revoked), changes))
    }

    /// Who minted, rotated or revoked a key, and when, oldest first; readable by whoever may
    /// manage the key, after it is revoked too: what a review after a leak reads.
    pub async fn api_key_history(&self, principal: &Principal, id: &ApiKeyId) -> Result<Page<AuditEntry>, DomainError> {
        let key = self.manageable_key(principal, id).await?;
        Ok(Page::all(self.store.entity_history(&key.id).await?))
    }

    /// A customer's users, newest first, a page at a time.
    pub async fn list_users(
        &self,
        principal: &Principal,
        customer_id: &str,
        starting_after: Option<UserId>,
        limit: usize,
    ) -> Result<Page<User>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let users = self
            .store
            .users_of(&customer.id, starting_after.as_ref(), limit + 1)
            .await?;
        Ok(Page::of(users, limit))
    }

    /// A user of a customer the caller manages users of; another customer's is a 404.
    pub async fn get_user(&self, principal: &Principal, customer_id: &str, user_id: &str) -> Result<User, DomainError> {
        principal.require(Scope::UsersManage)?;
        let customer = self.visible_customer(principal, customer_id, "customer_id").await?;
        let user = match UserId::parse(user_id) {
            Some(id) => self.store.user(&id).await?,
            None => None,
        };
        user.filter(|u| u.customer_id == customer.id)
            .ok_or_else(|| DomainError::not_found("user", user_id))
    }

    /// A user's new name, roles or status, audited with what the user then is. Roles and
    /// status apply from the user's keys' next request.
    pub async fn update_user(
        &self,
        principal: &Principal,
        customer_id: &str,
        user_id: &str,
        command: UpdateUser,
    ) -> Result<User, DomainError> {
        let UpdateUser { name, roles, status } = command.validate()?;
        let mut user = self.get_user(principal, customer_id, user_id).await?;
        let caller_is_user = principal.user.as_ref().is_some_and(|u| u.id == user.id);
        if caller_is_user && status == Some(UserStatus::Deactivated) {
            return Err(DomainError::invalid_state(
                "user_is_caller",
                "A key cannot deactivate its own user: another admin of the customer, or the platform, can.",
            ));
        }
        let mut changed = vec![];
        if let Some(name) = name.filter(|name| *name != user.name) {
            changed.push(format!("name {name} (was {})", user.name));
            user.name = name;
        }
        if let Some(roles) = roles.filter(|roles| *roles != user.roles) {
            let names = |roles: &[Role]| roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ");
            changed.push(format!("roles {} (were {})", names(&roles), names(&user.roles)));
            user.roles = roles;
        }
        let (code, action) = match status.filter(|status| *status != user.status) {
            Some(status) => {
                user.status = status;
                match status {
                    UserStatus::Deactivated => ("user_deactivated", "deactivated"),
                    UserStatus::Active => ("user_reactivated", "reactivated"),
                }
            }
            None if changed.is_empty() => {
                // A deactivation repeated records nothing, but hands back what the user still
                // holds: the first one's release may have been cut short after its commit.
                if status == Some(UserStatus::Deactivated) {
                    let cause = Cause::new("user_deactivated", "User deactivated", principal.actor(), self.now());
                    self.release_items_held_by(&user, &cause).await?;
                }
                return Ok(user);
            }
            None => ("user_updated", "updated"),
        };
        let message = match changed.is_empty() {
            true => format!("User {action}"),
            false => format!("User {action}: {}", changed.join("; ")),
        };
        let cause = Cause::new(code, message, principal.actor(), self.now());
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("user", &user.id, action, cause.clone()).with_details(user_details(&user)),
        ));
        user.version += 1;
        changes.push(Write::UpdateUser(user.clone()));
        self.commit(changes).await?;
        if user.status == UserStatus::Deactivated {
            self.release_items_held_by(&user, &cause).await?;
        }
        Ok(user)
    }

    /// Who made a user and changed their roles or status, and when, oldest first, each
    /// entry with what the user then was.
    pub async fn user_history(
        &self,
        principal: &Principal,
        customer_id: &str,
        user_id: &str,
    ) -> Result<Page<AuditEntry>, DomainError> {
        let user = self.get_user(principal, customer_id, user_id).await?;
        Ok(Page::all(self.store.entity_history(&user.id).await?))
    }

    /// A customer's keys (a platform key: the platform's own, or a customer's with
    /// `customer_id`), newest first; secrets are never shown.
    pub async fn list_api_keys(
        &self,
        principal: &Principal,
        customer_id: Option<String>,
        starting_after: Option<ApiKeyId>,
        limit: usize,
    ) -> Result<Page<ApiKey>, DomainError> {
        principal.require(Scope::UsersManage)?;
        let owner = match customer_id {
            Some(id) => Some(self.visible_customer(principal, &id, "customer_id").await?.id),
            None => principal.key.customer_id.clone(),
        };
        let keys = self
            .store
            .api_keys_of(owner.as_ref(), starting_after.as_ref(), limit + 1)
            .await?;
        let mut page = Page::of(keys, limit);
        // A store holds one environment's keys; one of the other's is never shown, and a page
        // left short by it says where the next one starts.
        let read_up_to = page.data.last().map(|k| k.id.to_string());
        page.data.retain(|k| k.environment == self.environment);
        if page.has_more && page.data.len() < limit {
            page.next_starting_after = read_up_to;
        }
        Ok(page)
    }
}

/// How far ahead a key may be made to expire.
const MAX_KEY_LIFETIME: Duration = Duration::days(3 * 366);

/// A new key's `expires_at`: a time after now and at most three years ahead.
fn key_expiry(asked: Option<&str>, now: time::OffsetDateTime) -> Result<Option<time::OffsetDateTime>, DomainError> {
    let Some(text) = asked else { return Ok(None) };
    let at = validate::rfc3339_time(text, "expires_at")?;
    if at <= now || at > now + MAX_KEY_LIFETIME {
        return Err(DomainError::invalid(
            "expires_at",
            "out_of_range",
            "expires_at is a time after now and at most three years ahead.",
        ));
    }
    Ok(Some(at))
}

/// What a user's audit entry records the user then was: which roles applied when stays
/// answerable after later changes.
fn user_details(user: &User) -> serde_json::Value {
    serde_json::json!({ "name": user.name, "roles": user.roles, "status": user.status })
}
