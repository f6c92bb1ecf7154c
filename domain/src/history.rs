//! Entities' own histories: the audit entries of a key, an endpoint, a workflow or another
//! entity that is not part of an operation (an operation's history is its own read, with its
//! transactions').

use crate::ports::{AuditEntry, StoreError};
use async_trait::async_trait;

/// The store's port for entities' histories.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// An entity's audit entries outside any operation, oldest first: the newest
    /// [`MAX_ENTITY_HISTORY`] of them.
    async fn entity_history(&self, entity_id: &str) -> Result<Vec<AuditEntry>, StoreError>;
}

/// The most audit entries an entity's history answers with (each is a person's change, so an
/// entity has a handful; the bound keeps the read from growing with a script's).
pub const MAX_ENTITY_HISTORY: usize = 1000;
