//! The secrets port in the SQLite file, every value sealed (ChaCha20-Poly1305, the secret's
//! name as associated data), so a copy of the database alone holds no webhook signing secret.

use super::SqliteStore;
use async_trait::async_trait;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use ops_domain::access::KeyHasher;
use ops_domain::ports::{Secrets, SecretsError, StoredSecret};

/// Marks a sealed value; rows without it were written in clear by an older version.
const SEALED: &str = "sealed-v1:";
const NONCE_BYTES: usize = 12;

#[derive(Clone)]
pub struct SealedSecrets {
    store: SqliteStore,
    cipher: ChaCha20Poly1305,
}

impl SealedSecrets {
    /// Seals with a key derived from `key_material` (the API-key pepper, or `OPS_SECRETS_KEY`):
    /// HMAC-SHA256 under a fixed label, so the sealing key is never the pepper itself.
    pub fn new(store: SqliteStore, key_material: &str) -> SealedSecrets {
        let derived = KeyHasher::new(key_material.as_bytes().to_vec()).hash("ops-secrets-sealing-key-v1");
        let key = hex::decode(derived).expect("a hash is hex");
        SealedSecrets {
            store,
            cipher: ChaCha20Poly1305::new_from_slice(&key).expect("32-byte key"),
        }
    }

    fn seal(&self, name: &str, value: &str) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::fill(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(
                &Nonce::try_from(&nonce[..]).expect("12 bytes"),
                Payload {
                    msg: value.as_bytes(),
                    aad: name.as_bytes(),
                },
            )
            .expect("sealing cannot fail");
        format!("{SEALED}{}{}", hex::encode(nonce), hex::encode(sealed))
    }

    fn open(&self, name: &str, stored: &str) -> Result<String, SecretsError> {
        let refused = || SecretsError::new(format!("secret {name} cannot be opened with this key"));
        let bytes = hex::decode(stored).map_err(|_| refused())?;
        if bytes.len() < NONCE_BYTES {
            return Err(refused());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let opened = self
            .cipher
            .decrypt(
                &Nonce::try_from(nonce).map_err(|_| refused())?,
                Payload {
                    msg: sealed,
                    aad: name.as_bytes(),
                },
            )
            .map_err(|_| refused())?;
        String::from_utf8(opened).map_err(|_| refused())
    }
}

#[async_trait]
impl Secrets for SealedSecrets {
    async fn put_secret(&self, name: &str, value: &str) -> Result<(), SecretsError> {
        let sealed = self.seal(name, value);
        self.store.put_secret_row(name, sealed).await.map_err(SecretsError::new)
    }

    async fn secret(&self, name: &str) -> Result<Option<String>, SecretsError> {
        match self.store.secret_row(name).await.map_err(SecretsError::new)? {
            None => Ok(None),
            Some(stored) => match stored.strip_prefix(SEALED) {
                Some(sealed) => self.open(name, sealed).map(Some),
                None => {
                    // Written in clear by an older version: seal it now.
                    self.put_secret(name, &stored).await?;
                    Ok(Some(stored))
                }
            },
        }
    }

    async fn delete_secret(&self, name: &str) -> Result<(), SecretsError> {
        self.store.delete_secret_row(name).await.map_err(SecretsError::new)
    }

    async fn secrets_named(&self, prefix: &str) -> Result<Vec<StoredSecret>, SecretsError> {
        let rows = self.store.secret_names(prefix).await.map_err(SecretsError::new)?;
        Ok(rows
            .into_iter()
            .map(|(name, stored_at)| StoredSecret {
                name,
                stored_at: time::OffsetDateTime::from_unix_timestamp(stored_at)
                    .unwrap_or(time::OffsetDateTime::UNIX_EPOCH),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn values_are_sealed_at_rest_bound_to_their_name_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("ops.sqlite")).unwrap();
        let secrets = SealedSecrets::new(store.clone(), "pepper");
        secrets.put_secret("webhook/whe_1/0", "whsec_plain").await.unwrap();
        let row = store.secret_row("webhook/whe_1/0").await.unwrap().unwrap();
        assert!(row.starts_with(SEALED) && !row.contains("whsec_plain"), "{row}");
        assert_eq!(
            secrets.secret("webhook/whe_1/0").await.unwrap().as_deref(),
            Some("whsec_plain")
        );

        // A sealed value moved under another name does not open; nor does another key open it.
        store.put_secret_row("webhook/whe_2/0", row).await.unwrap();
        assert!(secrets.secret("webhook/whe_2/0").await.is_err());
        let other_key = SealedSecrets::new(store.clone(), "another pepper");
        assert!(other_key.secret("webhook/whe_1/0").await.is_err());

        // A value an older version wrote in clear is read, then sealed.
        store
            .put_secret_row("webhook/old/0", "whsec_legacy".into())
            .await
            .unwrap();
        assert_eq!(
            secrets.secret("webhook/old/0").await.unwrap().as_deref(),
            Some("whsec_legacy")
        );
        assert!(store
            .secret_row("webhook/old/0")
            .await
            .unwrap()
            .unwrap()
            .starts_with(SEALED));
    }
}
