//! Delegation: a user who signs approvals by name hands that place to a colleague holding a
//! role of theirs, for a period, audited on the delegator's history. The delegate signs for
//! the delegator (`on_behalf_of`), never more than the delegator could: one signature per
//! named place, and never on an operation the delegate made.

use super::{Principal, Role, Scope, User, UserStatus};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::UserId;
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::Service;
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

/// The longest a delegation lasts: a holiday, a leave.
pub const MAX_DELEGATION: Duration = Duration::days(90);

/// A user's approval place, handed to `to_user_id` from `starts_at` until `ends_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    pub to_user_id: UserId,
    #[serde(with = "time::serde::rfc3339")]
    pub starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub ends_at: OffsetDateTime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Delegation {
    pub fn lets(&self, user: &UserId, at: OffsetDateTime) -> bool {
        self.to_user_id == *user && self.starts_at <= at && at < self.ends_at
    }
}

/// `PUT /v1/customers/{id}/users/{user_id}/delegation`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegateApprovals {
    pub to_user_id: String,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub starts_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub ends_at: OffsetDateTime,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The roles a delegation can hand on: those that sign approvals.
fn signing_roles(user: &User) -> impl Iterator<Item = &Role> {
    user.roles
        .iter()
        .filter(|role| matches!(role, Role::Approver | Role::Admin | Role::Treasury))
}

impl Service {
    /// The delegator themselves (a key of theirs that may approve) or whoever manages the
    /// customer's users.
    async fn delegator(&self, principal: &Principal, customer_id: &str, user_id: &str) -> Result<User, DomainError> {
        match &principal.user {
            Some(own) if own.id.as_str() == user_id && own.customer_id.as_str() == customer_id => {
                principal.require(Scope::OperationsApprove)?;
                Ok(own.clone())
            }
            _ => self.get_user(principal, customer_id, user_id).await,
        }
    }

    /// Hands a user's approval place to a colleague for a period (replacing any delegation
    /// the user had), audited on the user's history.
    pub async fn delegate_approvals(
        &self,
        principal: &Principal,
        customer_id: &str,
        user_id: &str,
        command: DelegateApprovals,
    ) -> Result<User, DomainError> {
        let mut user = self.delegator(principal, customer_id, user_id).await?;
        let now = self.now();
        let starts_at = command.starts_at.unwrap_or(now);
        let reason = crate::validate::optional_nonblank_text(command.reason, "reason", 500)?;
        if command.ends_at <= starts_at.max(now) || command.ends_at - starts_at > MAX_DELEGATION {
            return Err(DomainError::invalid(
                "ends_at",
                "invalid_period",
                "ends_at comes after starts_at and after now, at most 90 days after starts_at.",
            ));
        }
        let delegate = match UserId::parse(&command.to_user_id) {
            Some(id) => self.store.user(&id).await?,
            None => None,
        }
        .filter(|delegate| delegate.customer_id == user.customer_id)
        .ok_or_else(|| DomainError::invalid("to_user_id", "unknown_user", "No such user of this customer."))?;
        if delegate.id == user.id || delegate.status != UserStatus::Active {
            return Err(DomainError::invalid(
                "to_user_id",
                "invalid_delegate",
                "Delegate to another active user of the customer.",
            ));
        }
        if !signing_roles(&user).any(|role| delegate.roles.contains(role)) {
            return Err(DomainError::invalid(
                "to_user_id",
                "delegate_role_missing",
                "The delegate holds none of the roles this user signs approvals with (approver, admin, treasury).",
            ));
        }
        let delegation = Delegation {
            to_user_id: delegate.id.clone(),
            starts_at,
            ends_at: command.ends_at,
            reason,
        };
        let message = format!(
            "Approvals of {} delegated to {} from {} until {}{}",
            user.id,
            delegate.id,
            delegation.starts_at,
            delegation.ends_at,
            delegation.reason.as_ref().map_or(String::new(), |r| format!(": {r}"))
        );
        user.delegation = Some(delegation);
        self.record_delegation(
            user,
            Cause::new("approvals_delegated", message, principal.actor(), now),
            "delegated",
        )
        .await
    }

    /// Ends a user's delegation now.
    pub async fn end_delegation(
        &self,
        principal: &Principal,
        customer_id: &str,
        user_id: &str,
    ) -> Result<User, DomainError> {
        let mut user = self.delegator(principal, customer_id, user_id).await?;
        let Some(ended) = user.delegation.take() else {
            return Err(DomainError::invalid_state(
                "no_delegation",
                "This user has no delegation to end.",
            ));
        };
        let message = format!("Delegation of {}'s approvals to {} ended", user.id, ended.to_user_id);
        let cause = Cause::new("delegation_ended", message, principal.actor(), self.now());
        self.record_delegation(user, cause, "delegation_ended").await
    }

    async fn record_delegation(&self, mut user: User, cause: Cause, action: &str) -> Result<User, DomainError> {
        let details = serde_json::json!({ "delegation": user.delegation });
        let mut changes = Changeset::default();
        changes.push(Write::Audit(
            AuditEntry::new("user", &user.id, action, cause).with_details(details),
        ));
        user.version += 1;
        changes.push(Write::UpdateUser(user.clone()));
        self.commit(changes).await?;
        Ok(user)
    }

    /// The named signer of the operation's next step whose place `principal` takes, if one
    /// delegated it to them and has not signed (nor has anyone for them). Read only when the
    /// step names its signers and the caller is not one of them.
    pub(crate) async fn acting_for(
        &self,
        principal: &Principal,
        named: &[UserId],
        signed: &[UserId],
        at: OffsetDateTime,
    ) -> Result<Option<UserId>, DomainError> {
        let Some(user) = principal.user.as_ref().filter(|user| !named.contains(&user.id)) else {
            return Ok(None);
        };
        for delegator_id in named.iter().filter(|id| !signed.contains(id)) {
            let Some(delegator) = self.store.user(delegator_id).await? else {
                continue;
            };
            let lets = delegator.delegation.as_ref().is_some_and(|d| d.lets(&user.id, at));
            if lets && delegator.status == UserStatus::Active && delegator.customer_id == user.customer_id {
                return Ok(Some(delegator.id));
            }
        }
        Ok(None)
    }
}
