//! The secrets port: where secret values live (Secrets Manager in the cloud, the database
//! locally).

use super::SecretsError;
use async_trait::async_trait;
use time::OffsetDateTime;

/// Where secret values live (Secrets Manager in the cloud, the database locally).
#[async_trait]
pub trait Secrets: Send + Sync {
    async fn put_secret(&self, name: &str, value: &str) -> Result<(), SecretsError>;
    async fn secret(&self, name: &str) -> Result<Option<String>, SecretsError>;
    /// Removes a secret for good; one never stored is no error.
    async fn delete_secret(&self, name: &str) -> Result<(), SecretsError>;
    /// The secrets whose names start with `prefix`, never their values.
    async fn secrets_named(&self, prefix: &str) -> Result<Vec<StoredSecret>, SecretsError>;
}

/// A stored secret's name and when it was first stored (the epoch for a secret stored before
/// that was kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSecret {
    pub name: String,
    pub stored_at: OffsetDateTime,
}
