//! Customers, users, API keys, scopes and the principal a request acts as.

mod authenticate;
mod customers;
mod delegation;
mod manage;

pub use authenticate::{
    Allowance, Authenticated, RateLimit, RequestKind, CUSTOMER_RATE_KEYS, DEFAULT_RATE_LIMIT,
    FAILED_AUTHENTICATIONS_PER_SECOND,
};
pub use customers::require_platform_admin;
pub use delegation::{DelegateApprovals, Delegation};
pub use manage::DEFAULT_ROTATION_OVERLAP;

use crate::error::DomainError;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Test,
    Production,
}

impl Environment {
    pub fn parse(value: &str) -> Option<Environment> {
        match value {
            "test" => Some(Environment::Test),
            "production" => Some(Environment::Production),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Test => "test",
            Environment::Production => "production",
        }
    }

    /// Secret keys announce their environment in their prefix, so a leaked key's reach is
    /// obvious and a key can be refused before any lookup.
    pub fn key_prefix(self) -> &'static str {
        match self {
            Environment::Test => "sk_test_",
            Environment::Production => "sk_live_",
        }
    }

    fn of_key(secret: &str) -> Option<Environment> {
        [Environment::Test, Environment::Production]
            .into_iter()
            .find(|env| secret.starts_with(env.key_prefix()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    #[serde(rename = "operations:read")]
    OperationsRead,
    #[serde(rename = "operations:write")]
    OperationsWrite,
    #[serde(rename = "operations:approve")]
    OperationsApprove,
    #[serde(rename = "workflows:manage")]
    WorkflowsManage,
    #[serde(rename = "webhooks:manage")]
    WebhooksManage,
    #[serde(rename = "users:manage")]
    UsersManage,
    /// Platform operators only: implies every other scope, for every customer.
    #[serde(rename = "admin")]
    Admin,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::OperationsRead => "operations:read",
            Scope::OperationsWrite => "operations:write",
            Scope::OperationsApprove => "operations:approve",
            Scope::WorkflowsManage => "workflows:manage",
            Scope::WebhooksManage => "webhooks:manage",
            Scope::UsersManage => "users:manage",
            Scope::Admin => "admin",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Maker,
    Approver,
    Admin,
    Viewer,
    /// A treasury signer: a chain's step for large amounts names it.
    Treasury,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Maker => "maker",
            Role::Approver => "approver",
            Role::Admin => "admin",
            Role::Viewer => "viewer",
            Role::Treasury => "treasury",
        }
    }
}

/// A suspended customer's keys are refused and the work it set up earlier (schedules, files)
/// is not run for it, until the platform reactivates it; the platform's keys still act for it
/// (to pay out what it holds, say), and what was already approved runs to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CustomerStatus {
    Active,
    Suspended,
}

impl CustomerStatus {
    pub const ALL: [CustomerStatus; 2] = [CustomerStatus::Active, CustomerStatus::Suspended];

    /// As it is written in JSON (and in the store's status lists).
    pub fn as_str(self) -> &'static str {
        match self {
            CustomerStatus::Active => "active",
            CustomerStatus::Suspended => "suspended",
        }
    }

    pub fn parse(text: &str) -> Option<CustomerStatus> {
        CustomerStatus::ALL.into_iter().find(|status| status.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Customer {
    pub id: crate::ids::CustomerId,
    pub name: String,
    pub status: CustomerStatus,
    /// The PSP's own keys for the customer (customers stored before it existed have none).
    #[serde(default)]
    pub metadata: std::collections::BTreeMap<String, String>,
    /// When money the customer's collections bring in may be spent (customers stored before
    /// reserves existed have none).
    #[serde(default)]
    pub collection_reserve: CollectionReserve,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// 1 when made, one more each change (customers stored before changes existed read as 1).
    #[serde(default = "first_version")]
    pub version: u64,
}

fn first_version() -> u64 {
    1
}

/// When money a confirmed collection brought in may be spent. A return can come after the
/// rail confirmed the collection; money already spent by then leaves the account negative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectionReserve {
    /// At once: the rail's confirmation posts it.
    #[default]
    None,
    /// Once the rail's last return check (a day after confirmation) finds it still there:
    /// until then it is pending on the account, and a return voids it.
    ReturnChecks,
}

impl CollectionReserve {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectionReserve::None => "none",
            CollectionReserve::ReturnChecks => "return_checks",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub id: crate::ids::UserId,
    pub customer_id: crate::ids::CustomerId,
    pub name: String,
    pub email: String,
    pub roles: Vec<Role>,
    /// Users stored before statuses existed are active.
    #[serde(default)]
    pub status: UserStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// 1 when made, one more each change (users stored before changes were counted read as 1):
    /// of two admins' changes made from one read, the second is refused rather than written
    /// over the first (a role change must not bring back a user just deactivated).
    #[serde(default = "first_version")]
    pub version: u64,
    /// Who signs in this user's named approval places for a while.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<delegation::Delegation>,
}

impl User {
    /// What makes two users of a customer the same person: their email, ASCII letters in any
    /// case (as mail domains are compared, and as SQLite's `lower` folds). Each customer's
    /// users hold distinct ones, so four eyes are two people's.
    pub fn email_key(&self) -> String {
        self.email.to_ascii_lowercase()
    }
}

/// A deactivated user's keys do not authenticate and no work is assigned to them, until an
/// admin makes them active again: someone who left is shut out at once, and their decisions
/// and history stay as they were.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserStatus {
    #[default]
    Active,
    Deactivated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: crate::ids::ApiKeyId,
    /// What the key is for, as its owners call it (keys stored before names read as none).
    #[serde(default)]
    pub name: Option<String>,
    /// `None` for platform (PSP operator) keys.
    pub customer_id: Option<crate::ids::CustomerId>,
    pub user_id: Option<crate::ids::UserId>,
    pub environment: Environment,
    pub scopes: Vec<Scope>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
    /// Who minted the key (a user id, or a key id when the minting key had no user): a
    /// decision made with a key minted by an operation's creator does not count.
    #[serde(default)]
    pub created_by: Option<String>,
    /// Every user and key this one descends from: who minted it, the key they minted it with,
    /// the key it was rotated from, and what each of those descends from. A decision made with
    /// a key descending from an operation's creator is the creator's own, however many mints
    /// and rotations lie between (keys stored before it was kept know only `created_by`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<String>,
    /// The key this one was rotated into; a key rotates once, and revoking it revokes that one.
    #[serde(default)]
    pub rotated_to: Option<crate::ids::ApiKeyId>,
    /// Peppered hash of the secret; the secret itself is never stored (and the hash never
    /// shown: the API's wire shape leaves it out).
    pub secret_hash: String,
    /// 1 when made, one more each change (keys stored before changes were counted read as 1):
    /// of two rotations, or a rotation and a revocation, racing on one key, the second to
    /// land is refused rather than written over the first, which would unlink a successor
    /// from the chain a revocation follows.
    #[serde(default = "first_version")]
    pub version: u64,
}

/// Hashes secrets with a server-side pepper (HMAC-SHA256), so a copy of the store alone does not
/// allow checking guessed keys.
#[derive(Clone)]
pub struct KeyHasher {
    pepper: Vec<u8>,
}

impl KeyHasher {
    pub fn new(pepper: impl Into<Vec<u8>>) -> KeyHasher {
        KeyHasher { pepper: pepper.into() }
    }

    pub fn hash(&self, secret: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.pepper).expect("HMAC takes any key");
        mac.update(secret.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// A new random secret key for `environment`: the prefix and 192 random bits in hex.
pub fn new_secret(environment: Environment) -> String {
    let mut random = [0u8; 24];
    rand::fill(&mut random);
    format!("{}{}", environment.key_prefix(), hex::encode(random))
}

/// Checks a presented secret's shape before looking it up: wrong-environment keys are refused
/// without touching the store.
pub fn check_secret_shape(secret: &str, environment: Environment) -> Result<(), DomainError> {
    match Environment::of_key(secret) {
        Some(env) if env == environment => Ok(()),
        Some(_) => Err(DomainError::unauthenticated(
            "api_key_wrong_environment",
            format!(
                "This key belongs to the other environment; this service runs the {} environment.",
                environment.as_str()
            ),
        )),
        None => Err(invalid_api_key()),
    }
}

pub fn invalid_api_key() -> DomainError {
    DomainError::unauthenticated("invalid_api_key", "Invalid API key provided.")
}

/// Who a request acts as: resolved from its API key (and the key's user, if any).
#[derive(Debug, Clone)]
pub struct Principal {
    pub key: ApiKey,
    pub user: Option<User>,
}

impl Principal {
    pub fn is_platform(&self) -> bool {
        self.key.customer_id.is_none()
    }

    pub fn has_scope(&self, scope: Scope) -> bool {
        self.key.scopes.contains(&Scope::Admin) || self.key.scopes.contains(&scope)
    }

    pub fn require(&self, scope: Scope) -> Result<(), DomainError> {
        if self.has_scope(scope) {
            Ok(())
        } else {
            Err(DomainError::forbidden(
                "missing_scope",
                format!("This API key lacks the '{}' scope.", scope.name()),
            ))
        }
    }

    /// Whether this principal may see or act on `customer_id`'s resources. Callers answer
    /// "not found" when it may not, so other customers' ids are never confirmed to exist.
    pub fn can_access(&self, customer_id: &str) -> bool {
        self.key.customer_id.as_deref().is_none_or(|own| own == customer_id)
    }

    /// Key under which idempotency keys are remembered: per customer (or the platform).
    pub fn idempotency_scope(&self) -> String {
        format!(
            "{}:{}",
            self.key.environment.as_str(),
            self.key.customer_id.as_deref().unwrap_or("platform")
        )
    }

    /// The lineage of a key this principal mints, or rotates `rotated_from` into: for its own
    /// key and the rotated one, each one's lineage, minter and the key itself; and its user.
    pub fn lineage_of_minted(&self, rotated_from: Option<&ApiKey>) -> Vec<String> {
        let mut lineage = vec![];
        for key in std::iter::once(&self.key).chain(rotated_from) {
            lineage.extend(key.lineage.iter().cloned());
            lineage.extend(key.created_by.iter().cloned());
            lineage.push(key.id.to_string());
        }
        lineage.extend(self.user.iter().map(|user| user.id.to_string()));
        lineage.sort();
        lineage.dedup();
        lineage
    }

    /// Whether this principal's key descends from `actor` (a user or key id): minted by it,
    /// rotated from it, or minted by a key that was, at any depth.
    pub fn descends_from(&self, actor: &str) -> bool {
        self.key.created_by.as_deref() == Some(actor) || self.key.lineage.iter().any(|a| a == actor)
    }

    /// The id recorded as creator and as actor: the user if the key has one, else the key.
    pub fn actor(&self) -> crate::cause::Actor {
        use crate::cause::{Actor, ActorType};
        match &self.user {
            Some(user) => Actor {
                kind: ActorType::User,
                id: user.id.to_string(),
            },
            None => Actor {
                kind: ActorType::ApiKey,
                id: self.key.id.to_string(),
            },
        }
    }
}

/// Changes to a customer: a new name, status or metadata, at least one, and why (recorded in
/// the audit). Metadata is merged key by key; a key given an empty value is removed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateCustomer {
    pub name: Option<String>,
    pub status: Option<CustomerStatus>,
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
    pub collection_reserve: Option<CollectionReserve>,
    pub reason: Option<String>,
}

impl UpdateCustomer {
    /// The same changes, checked: a name not blank, metadata as an operation's, a reason of at
    /// most 500 characters.
    pub fn validate(self) -> Result<UpdateCustomer, DomainError> {
        if self.name.is_none() && self.status.is_none() && self.metadata.is_none() && self.collection_reserve.is_none()
        {
            return Err(DomainError::invalid(
                "status",
                "parameter_missing",
                "Give the customer's new name, status, metadata or collection reserve.",
            ));
        }
        let metadata = self.metadata.map(crate::validate::validate_metadata).transpose()?;
        let name = crate::validate::optional_nonblank_text(self.name, "name", 200)?;
        Ok(UpdateCustomer {
            name,
            status: self.status,
            metadata,
            collection_reserve: self.collection_reserve,
            reason: crate::text::optional_reason(self.reason, "reason", 500)?,
        })
    }
}

/// Changes to a user: at least one of them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateUser {
    pub name: Option<String>,
    pub roles: Option<Vec<Role>>,
    pub status: Option<UserStatus>,
}

impl UpdateUser {
    /// The same changes, checked: a name not blank, roles at least one and each once.
    pub fn validate(self) -> Result<UpdateUser, DomainError> {
        if self.name.is_none() && self.roles.is_none() && self.status.is_none() {
            return Err(DomainError::invalid(
                "roles",
                "parameter_missing",
                "Give the user's new name, roles or status.",
            ));
        }
        let name = crate::validate::optional_nonblank_text(self.name, "name", 200)?;
        let roles = self.roles.map(user_roles).transpose()?;
        Ok(UpdateUser {
            name,
            roles,
            status: self.status,
        })
    }
}

/// A user's roles: at least one, each once.
pub(crate) fn user_roles(roles: Vec<Role>) -> Result<Vec<Role>, DomainError> {
    if roles.is_empty() {
        return Err(DomainError::invalid(
            "roles",
            "parameter_invalid_empty",
            "Give at least one role: maker, approver, admin or viewer.",
        ));
    }
    let mut unique = roles;
    unique.sort_by_key(|r| r.name());
    unique.dedup();
    Ok(unique)
}

/// The reads of customers, users and keys (the store's port for this module).
#[async_trait::async_trait]
pub trait AccessStore: Send + Sync {
    async fn customer(&self, id: &crate::ids::CustomerId) -> Result<Option<Customer>, crate::ports::StoreError>;
    /// Every customer (or those in `status`), newest first, from after `starting_after`, at
    /// most `limit`; a status is a list of its own, so none is read and dropped.
    async fn customers(
        &self,
        status: Option<CustomerStatus>,
        starting_after: Option<&crate::ids::CustomerId>,
        limit: usize,
    ) -> Result<Vec<Customer>, crate::ports::StoreError>;
    async fn user(&self, id: &crate::ids::UserId) -> Result<Option<User>, crate::ports::StoreError>;
    async fn api_key(&self, id: &crate::ids::ApiKeyId) -> Result<Option<ApiKey>, crate::ports::StoreError>;
    async fn api_key_by_hash(&self, secret_hash: &str) -> Result<Option<ApiKey>, crate::ports::StoreError>;
    /// A customer's users, newest first, from after `starting_after`, at most `limit`.
    async fn users_of(
        &self,
        customer_id: &crate::ids::CustomerId,
        starting_after: Option<&crate::ids::UserId>,
        limit: usize,
    ) -> Result<Vec<User>, crate::ports::StoreError>;
    /// A customer's keys (`None`: the platform's), newest first, from after `starting_after`,
    /// at most `limit`.
    async fn api_keys_of(
        &self,
        customer_id: Option<&crate::ids::CustomerId>,
        starting_after: Option<&crate::ids::ApiKeyId>,
        limit: usize,
    ) -> Result<Vec<ApiKey>, crate::ports::StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_depend_on_pepper_and_secret() {
        let a = KeyHasher::new(b"pepper-a".to_vec());
        let b = KeyHasher::new(b"pepper-b".to_vec());
        assert_eq!(a.hash("sk_test_x"), a.hash("sk_test_x"));
        assert_ne!(a.hash("sk_test_x"), b.hash("sk_test_x"));
        assert_ne!(a.hash("sk_test_x"), a.hash("sk_test_y"));
    }

    #[test]
    fn secrets_carry_their_environment() {
        let test_key = new_secret(Environment::Test);
        assert!(test_key.starts_with("sk_test_") && test_key.len() == 8 + 48);
        assert!(check_secret_shape(&test_key, Environment::Test).is_ok());
        let refused = check_secret_shape(&test_key, Environment::Production).unwrap_err();
        assert!(matches!(
            refused,
            DomainError::Unauthenticated {
                code: "api_key_wrong_environment",
                ..
            }
        ));
        let live_key = new_secret(Environment::Production);
        assert!(check_secret_shape(&live_key, Environment::Production).is_ok());
        assert!(check_secret_shape("pk_test_abc", Environment::Test).is_err());
    }
}
