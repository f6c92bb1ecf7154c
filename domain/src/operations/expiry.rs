//! Approvals that expire: an operation still waiting for approvals when its workflow's
//! `approval_ttl` has passed becomes `expired`, with its cause; its approvals item closes as
//! any decided operation's does.

use super::{Operation, OperationStatus, OperationTransition};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::ports::{Changeset, StoreError, Write};
use crate::service::Service;
use time::OffsetDateTime;

/// Operations one round expires at most; the timer runs again a minute later.
const EXPIRY_BATCH: usize = 100;

/// The transition of an operation whose approvals did not all come in time, if it is one.
pub(super) fn expire(
    operation: &mut Operation,
    now: OffsetDateTime,
) -> Option<Result<super::StatusChange, DomainError>> {
    let expires_at = operation.approval_expires_at?;
    if operation.status != OperationStatus::PendingApproval || expires_at > now {
        return None;
    }
    let signed = operation.workflow_approvals_given();
    let needed = operation.workflow_approvals_required() + usize::from(operation.limit_hold.is_some());
    let cause = Cause::new(
        "approval_expired",
        format!(
            "Expired at {expires_at}: {signed} of {needed} approval(s) came within workflow {}'s approval_ttl",
            operation.workflow
        ),
        Actor::system(),
        now,
    );
    Some(operation.apply(OperationTransition::Expire(cause)))
}

impl Service {
    /// Expires the operations whose approvals did not all come in time, soonest first;
    /// answers how many. One decided meanwhile (its change committed first) is left as it is.
    pub async fn expire_approvals(&self) -> Result<usize, DomainError> {
        let now = self.now();
        let mut expired = 0;
        for mut operation in self.store.approvals_expiring(now, EXPIRY_BATCH).await? {
            let Some(change) = expire(&mut operation, now) else {
                continue;
            };
            operation.version += 1;
            operation.updated_at = now;
            let mut changes = Changeset::default();
            self.record_operation_change(&mut changes, &operation, change?);
            changes.push(Write::UpdateOperation(operation));
            match self.store.commit(changes).await {
                Ok(()) => expired += 1,
                // An approval or a cancel won the race: the operation is no longer waiting.
                Err(StoreError::Conflict) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(expired)
    }
}
