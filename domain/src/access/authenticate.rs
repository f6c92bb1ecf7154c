//! Who is asking: bootstrap of the operator's key, authentication of a bearer secret, and the
//! request limits (per key, per customer, per address that fails to authenticate).

use crate::access::{self, ApiKey, CustomerStatus, Principal, Scope, UserStatus};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::ids::{ApiKeyId, CustomerId};
use crate::ports::{AuditEntry, Changeset, Clock, Limits, RateLimiter, SystemClock, Write};
use crate::service::Service;
use std::net::IpAddr;
use std::sync::Arc;
use time::OffsetDateTime;

/// Requests per second an API key may make unless configured otherwise (Stripe's live limit).
pub const DEFAULT_RATE_LIMIT: u32 = 100;

/// A limit on requests per second: each API key's, each customer's (all its keys together),
/// and each source's failed authentications. Requests that change something are counted by
/// `limiter`, which every instance of the service shares; reads by `reads`, which may be the
/// same limiter or the instance's own memory (on AWS, so a read costs no write: a function's
/// reads are counted where it runs, and the API's stage throttle bounds them all).
pub struct RateLimit {
    pub limiter: Arc<dyn RateLimiter>,
    pub reads: Arc<dyn RateLimiter>,
    pub per_second: u32,
    /// Sources over their failed-authentication budget, until the end of which second: refused
    /// here before any lookup. The shared count decides; this only spares the store.
    penalty_box: std::sync::Mutex<std::collections::HashMap<IpAddr, i64>>,
}

/// A customer's keys together may make this many keys' worth of requests: more keys do not
/// buy a customer more of the service.
pub const CUSTOMER_RATE_KEYS: u32 = 4;
/// Failed authentications a source may make per second before it is refused outright.
pub const FAILED_AUTHENTICATIONS_PER_SECOND: u32 = 20;

impl RateLimit {
    /// `per_second` of zero turns the limit off.
    pub fn new(limiter: Arc<dyn RateLimiter>, reads: Arc<dyn RateLimiter>, per_second: u32) -> Option<RateLimit> {
        (per_second > 0).then(|| RateLimit {
            limiter,
            reads,
            per_second,
            penalty_box: Default::default(),
        })
    }

    fn counter(&self, request: RequestKind) -> &dyn RateLimiter {
        match request {
            RequestKind::Read => self.reads.as_ref(),
            RequestKind::Change => self.limiter.as_ref(),
        }
    }

    fn in_penalty_box(&self, source: IpAddr, second: i64) -> bool {
        let boxed = self.penalty_box.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        boxed.get(&source).is_some_and(|until| *until >= second)
    }

    fn put_in_penalty_box(&self, source: IpAddr, second: i64) {
        let mut boxed = self.penalty_box.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        boxed.retain(|_, until| *until >= second);
        boxed.insert(source, second);
    }
}

/// The id of the platform's first key, minted by [`Service::first_platform_key`].
const FIRST_PLATFORM_KEY_ID: &str = "key_00000000000000000000000000";

/// A request whose key was accepted: who made it, and the room its key has left this second
/// (none when requests are not limited).
#[derive(Debug)]
pub struct Authenticated {
    pub principal: Principal,
    pub allowance: Option<Allowance>,
}

/// The requests a key may make each second and how many it has left in this one: what the
/// `RateLimit-*` headers of an answer tell (windows are whole seconds, so one resets within a
/// second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub limit: u32,
    pub remaining: u32,
}

/// What a request does, for the count it is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Reads and changes nothing (`GET`).
    Read,
    Change,
}

fn too_many_failed_authentications() -> DomainError {
    DomainError::RateLimited {
        code: "too_many_failed_authentications",
        message: format!(
            "Too many failed authentications from this address: at most {FAILED_AUTHENTICATIONS_PER_SECOND} per second. Retry in a second."
        ),
        limit: FAILED_AUTHENTICATIONS_PER_SECOND,
    }
}

impl Service {
    /// Whether the store answers the read every request starts with (a key by its secret's
    /// hash): what a load balancer's health check should know.
    pub async fn store_answers(&self) -> bool {
        match self.store.api_key_by_hash("health-check").await {
            Ok(_) => true,
            Err(error) => {
                tracing::error!(%error, "health check: the store did not answer");
                false
            }
        }
    }

    /// Creates the operator's platform admin key at start-up unless it already exists.
    pub async fn bootstrap_admin_key(&self, secret: &str) -> Result<(), DomainError> {
        access::check_secret_shape(secret, self.environment)?;
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
        self.create_platform_admin_key(
            crate::ids::ApiKeyId::new(&*self.ids),
            secret_hash,
            "bootstrap_admin_key",
            "Created from OPS_BOOTSTRAP_ADMIN_KEY at start-up",
        )
        .await
        .map(|_| ())
    }

    /// The platform's first admin key, on a deployment that has no platform key yet (a stack
    /// just made): its secret, shown this once. Any platform key, live or not, refuses it
    /// (409 `platform_key_exists`): further keys are made through the API. The first key
    /// always has the same id, so of two mints at once the store takes one: the other's
    /// insert of that id is refused.
    pub async fn first_platform_key(&self) -> Result<(crate::ids::ApiKeyId, String), DomainError> {
        let exists = || {
            DomainError::invalid_state(
                "platform_key_exists",
                "The platform already has a key: make others with POST /v1/api_keys.",
            )
        };
        if !self.store.api_keys_of(None, None, 1).await?.is_empty() {
            return Err(exists());
        }
        let secret = access::new_secret(self.environment);
        let id = crate::ids::ApiKeyId::parse(FIRST_PLATFORM_KEY_ID).expect("an api key id");
        match self
            .create_platform_admin_key(
                id,
                self.hasher.hash(&secret),
                "first_platform_key",
                "Minted for a deployment with no platform key",
            )
            .await
        {
            Ok(id) => Ok((id, secret)),
            Err(DomainError::InvalidState { code: "conflict", .. }) => Err(exists()),
            Err(other) => Err(other),
        }
    }

    async fn create_platform_admin_key(
        &self,
        id: crate::ids::ApiKeyId,
        secret_hash: String,
        code: &'static str,
        message: &'static str,
    ) -> Result<crate::ids::ApiKeyId, DomainError> {
        let now = self.now();
        let key = ApiKey {
            id,
            name: Some("bootstrap admin".into()),
            customer_id: None,
            user_id: None,
            environment: self.environment,
            scopes: vec![Scope::Admin],
            created_at: now,
            expires_at: None,
            revoked_at: None,
            created_by: None,
            lineage: vec![],
            rotated_to: None,
            secret_hash,
            version: 1,
        };
        let cause = Cause::new(code, message, Actor::system(), now);
        let id = key.id.clone();
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new("api_key", &key.id, "created", cause)));
        changes.push(Write::PutApiKey(key));
        self.commit(changes).await?;
        Ok(id)
    }

    /// Resolves a bearer secret to the principal it stands for. `source` (the client's address,
    /// when known) is limited in how many failed authentications it may make per second.
    pub async fn authenticate(
        &self,
        secret: Option<&str>,
        source: Option<IpAddr>,
        request: RequestKind,
    ) -> Result<Authenticated, DomainError> {
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
                    if !limit
                        .counter(request)
                        .admit(&counter, "any", second, failures)
                        .await?
                        .admitted
                    {
                        limit.put_in_penalty_box(source, second);
                        return Err(too_many_failed_authentications());
                    }
                }
                return Err(refused);
            }
            Err(other) => return Err(other),
        };
        let mut allowance = None;
        if let Some(limit) = limit {
            let customer_budget = limit.per_second.saturating_mul(CUSTOMER_RATE_KEYS);
            let limits = Limits {
                member: limit.per_second,
                group: customer_budget,
            };
            let customer = key.customer_id.as_deref().unwrap_or("platform");
            let admission = limit.counter(request).admit(customer, &key.id, second, limits).await?;
            if !admission.admitted {
                return Err(DomainError::RateLimited {
                    code: "rate_limit_exceeded",
                    message: format!(
                        "Too many requests: at most {} per second with one API key, {customer_budget} for all of a customer's keys together. Retry in a second; nothing was done.",
                        limit.per_second
                    ),
                    limit: limit.per_second,
                });
            }
            allowance = Some(Allowance {
                limit: limit.per_second,
                remaining: admission.remaining,
            });
        }
        // The key's user and customer are read side by side: each can shut the key out.
        let user = async {
            match &key.user_id {
                Some(id) => Ok(Some(self.store.user(id).await?.ok_or_else(access::invalid_api_key)?)),
                None => Ok::<_, DomainError>(None),
            }
        };
        let customer = async {
            match &key.customer_id {
                Some(id) => Ok(self.store.customer(id).await?),
                None => Ok::<_, DomainError>(None),
            }
        };
        let (user, customer) = futures_util::future::try_join(user, customer).await?;
        if user.as_ref().is_some_and(|u| u.status == UserStatus::Deactivated) {
            return Err(DomainError::unauthenticated(
                "user_deactivated",
                "This API key's user was deactivated.",
            ));
        }
        if customer.is_some_and(|c| c.status == CustomerStatus::Suspended) {
            return Err(DomainError::forbidden(
                "customer_suspended",
                "This API key's customer is suspended; the platform can reactivate it.",
            ));
        }
        Ok(Authenticated {
            principal: Principal { key, user },
            allowance,
        })
    }

    /// The live key a bearer secret stands for.
    async fn key_of(&self, secret: Option<&str>) -> Result<ApiKey, DomainError> {
        let secret = secret.ok_or_else(|| {
            DomainError::unauthenticated("missing_api_key", "Send your API key as 'Authorization: Bearer <key>'.")
        })?;
        access::check_secret_shape(secret, self.environment)?;
        let key = self
            .store
            .api_key_by_hash(&self.hasher.hash(secret))
            .await?
            .ok_or_else(access::invalid_api_key)?;
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
}

/// Rotations followed from a stored key to the key that succeeded it.
const MAX_ROTATIONS: usize = 5;

impl Service {
    /// Who work made earlier on a customer's behalf (a schedule's occurrences, a file's
    /// chunks) acts as: the key that made `what` (or the key it was rotated into), if it still
    /// works, with its user. `Err` says why it does not.
    pub(crate) async fn acting_principal(
        &self,
        customer_id: &CustomerId,
        api_key_id: &ApiKeyId,
        now: OffsetDateTime,
        what: &str,
    ) -> Result<Result<Principal, String>, DomainError> {
        match self.store.customer(customer_id).await? {
            None => return Ok(Err(format!("The customer {customer_id} no longer exists."))),
            Some(customer) if customer.status == CustomerStatus::Suspended => {
                return Ok(Err(format!("The customer {customer_id} is suspended.")))
            }
            Some(_) => {}
        }
        let mut key_id = api_key_id.clone();
        let mut rotations = 0;
        let key = loop {
            let Some(key) = self.store.api_key(&key_id).await? else {
                return Ok(Err(format!("The API key {key_id} that made {what} no longer exists.")));
            };
            match &key.rotated_to {
                Some(successor) if rotations < MAX_ROTATIONS => {
                    key_id = successor.clone();
                    rotations += 1;
                }
                _ => break key,
            }
        };
        if key.revoked_at.is_some() {
            return Ok(Err(format!("The API key {} that made {what} was revoked.", key.id)));
        }
        if key.expires_at.is_some_and(|at| at <= now) {
            return Ok(Err(format!("The API key {} that made {what} has expired.", key.id)));
        }
        let user = match &key.user_id {
            Some(id) => match self.store.user(id).await? {
                Some(user) if user.status == UserStatus::Deactivated => {
                    return Ok(Err(format!(
                        "The user {id} of the API key that made {what} was deactivated."
                    )))
                }
                Some(user) => Some(user),
                None => {
                    return Ok(Err(format!(
                        "The user {id} of the API key that made {what} no longer exists."
                    )))
                }
            },
            None => None,
        };
        let principal = Principal { key, user };
        if !principal.has_scope(Scope::OperationsWrite) {
            return Ok(Err(format!(
                "The API key {} lacks the 'operations:write' scope.",
                principal.key.id
            )));
        }
        Ok(Ok(principal))
    }
}
