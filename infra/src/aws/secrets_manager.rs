//! The secrets port on Secrets Manager: values are cached per container for a few minutes, so
//! a rotation is picked up without a cold start.

use async_trait::async_trait;
use aws_sdk_secretsmanager::operation::create_secret::CreateSecretError;
use aws_sdk_secretsmanager::operation::delete_secret::DeleteSecretError;
use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;
use aws_sdk_secretsmanager::types::{Filter, FilterNameStringType};
use aws_sdk_secretsmanager::Client;
use ops_domain::ports::{Secrets, SecretsError, StoredSecret};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

const CACHE_FOR: Duration = Duration::from_secs(300);

pub struct SecretsManagerSecrets {
    client: Client,
    /// Prepended to every name, e.g. `ops/test/`.
    prefix: String,
    cache: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

fn unavailable(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SecretsError {
    SecretsError::new(e)
}

impl SecretsManagerSecrets {
    pub fn new(client: Client, prefix: impl Into<String>) -> SecretsManagerSecrets {
        SecretsManagerSecrets {
            client,
            prefix: prefix.into(),
            cache: Mutex::default(),
        }
    }
}

#[async_trait]
impl Secrets for SecretsManagerSecrets {
    async fn put_secret(&self, name: &str, value: &str) -> Result<(), SecretsError> {
        let id = format!("{}{name}", self.prefix);
        let created = self.client.create_secret().name(&id).secret_string(value).send().await;
        match created.map_err(|e| e.into_service_error()) {
            Ok(_) => {}
            Err(CreateSecretError::ResourceExistsException(_)) => {
                self.client
                    .put_secret_value()
                    .secret_id(&id)
                    .secret_string(value)
                    .send()
                    .await
                    .map_err(unavailable)?;
            }
            Err(other) => return Err(unavailable(other)),
        }
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), (Some(value.to_owned()), Instant::now()));
        Ok(())
    }

    async fn secret(&self, name: &str) -> Result<Option<String>, SecretsError> {
        if let Some((value, at)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            if at.elapsed() < CACHE_FOR {
                return Ok(value.clone());
            }
        }
        let fetched = self
            .client
            .get_secret_value()
            .secret_id(format!("{}{name}", self.prefix))
            .send()
            .await;
        let value = match fetched.map_err(|e| e.into_service_error()) {
            Ok(found) => found.secret_string().map(str::to_owned),
            Err(GetSecretValueError::ResourceNotFoundException(_)) => None,
            Err(other) => return Err(unavailable(other)),
        };
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), (value.clone(), Instant::now()));
        Ok(value)
    }

    /// At once, without Secrets Manager's recovery window: what is deleted is a signing secret
    /// no endpoint signs with any more, and a secret waiting out the window is still billed.
    async fn delete_secret(&self, name: &str) -> Result<(), SecretsError> {
        let deleted = self
            .client
            .delete_secret()
            .secret_id(format!("{}{name}", self.prefix))
            .force_delete_without_recovery(true)
            .send()
            .await;
        match deleted.map_err(|e| e.into_service_error()) {
            Ok(_) | Err(DeleteSecretError::ResourceNotFoundException(_)) => {}
            Err(other) => return Err(unavailable(other)),
        }
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), (None, Instant::now()));
        Ok(())
    }

    async fn secrets_named(&self, prefix: &str) -> Result<Vec<StoredSecret>, SecretsError> {
        let full_prefix = format!("{}{prefix}", self.prefix);
        let filter = Filter::builder()
            .key(FilterNameStringType::Name)
            .values(&full_prefix)
            .build();
        let mut found = vec![];
        let mut next_token = None;
        loop {
            let page = self
                .client
                .list_secrets()
                .filters(filter.clone())
                .set_next_token(next_token)
                .send()
                .await
                .map_err(unavailable)?;
            // The service's name filter ignores case: the prefix is checked as written.
            found.extend(page.secret_list().iter().filter_map(|entry| {
                let name = entry.name()?.strip_prefix(&full_prefix)?;
                // Secrets Manager always says; were it not to, the secret counts as new (a
                // sweep leaves it) rather than old.
                let stored_at = entry
                    .created_date()
                    .and_then(|at| OffsetDateTime::from_unix_timestamp(at.secs()).ok())
                    .unwrap_or_else(OffsetDateTime::now_utc);
                Some(StoredSecret {
                    name: format!("{prefix}{name}"),
                    stored_at,
                })
            }));
            next_token = page.next_token().map(str::to_owned);
            if next_token.is_none() {
                return Ok(found);
            }
        }
    }
}
