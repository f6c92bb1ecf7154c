//! Idempotency keys: claimed before any effect, completed in the same store
//! transaction as the effect, replayed byte for byte.

use crate::error::DomainError;
use crate::ports::Write;
use crate::service::Service;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::future::Future;
use time::{Duration, OffsetDateTime};

/// How long a completed key is remembered.
pub const RETENTION: Duration = Duration::hours(24);
/// A claim whose request has not finished after this long (the process died) may be taken over:
/// nothing it did was committed, because completion commits with the effect.
pub const CLAIM_TIMEOUT: Duration = Duration::seconds(60);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct IdempotencyClaim {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
    pub now: OffsetDateTime,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// The key is ours: go ahead.
    Claimed,
    /// Same key, same request, already done: send this again.
    Replay(StoredResponse),
    /// Same key, same request, still running elsewhere.
    InFlight,
    /// Same key, another request.
    Mismatch,
}

/// Identifies a request: method, path and body (as parsed JSON, so formatting differences
/// and key order do not matter).
pub fn fingerprint(method: &str, path: &str, body: &serde_json::Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    // serde_json's map is ordered by key, so this serialization is canonical.
    hasher.update(body.to_string().as_bytes());
    hex::encode(hasher.finalize())
}

/// Identifies a request by its exact bytes (signed requests, whose bytes are what was signed).
pub fn fingerprint_bytes(method: &str, path: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hex::encode(hasher.finalize())
}

/// How a request holds its idempotency key while its effect runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHold {
    /// Claimed by a write of its own before the effect: for effects that act outside their
    /// changeset (a secret stored, a schedule made, bytes kept, a rail asked), which a second
    /// request with the same key must not repeat.
    ClaimFirst,
    /// Read first, then written, completed, by the effect's own changeset on condition that no
    /// other request wrote it meanwhile: for effects that are nothing but their changeset. One
    /// write fewer per request; a lost race changes nothing and reads the winner's answer.
    InTheChangeset,
}

/// A held key, handed to a use case so its effect completes the key in the same changeset.
/// `render` turns what the use case made into the response the client is sent: the wire shape
/// belongs to the caller (the HTTP edge), the moment of completion to the use case.
pub struct Ticket<T> {
    claim: IdempotencyClaim,
    hold: KeyHold,
    render: Box<dyn Fn(&T) -> StoredResponse + Send>,
}

impl<T> Ticket<T> {
    /// The write that completes the key with the response made from `made`.
    pub fn complete(&self, made: &T) -> Write {
        let response = (self.render)(made);
        match self.hold {
            KeyHold::ClaimFirst => Write::CompleteIdempotency {
                scope: self.claim.scope.clone(),
                key: self.claim.key.clone(),
                response,
            },
            KeyHold::InTheChangeset => Write::TakeIdempotency {
                claim: self.claim.clone(),
                response,
            },
        }
    }
}

/// What running an effect under an idempotency key came to.
#[derive(Debug)]
pub enum Once<T> {
    /// The effect ran now.
    Done(T),
    /// The same request under this key was done before: its response, to send again.
    Replayed(StoredResponse),
}

impl Service {
    /// The idempotency protocol, in one place: claims the key before any effect,
    /// runs `effect` with a [`Ticket`] that completes the key in the effect's own changeset,
    /// gives the key back if the effect failed (nothing was written, so a corrected request may
    /// use it), and answers a repeat with the stored response. `reused` is the refusal when the
    /// key was used for another request.
    pub async fn once<T, F, Fut>(
        &self,
        claim: IdempotencyClaim,
        hold: KeyHold,
        render: impl Fn(&T) -> StoredResponse + Send + 'static,
        reused: DomainError,
        effect: F,
    ) -> Result<Once<T>, DomainError>
    where
        F: FnOnce(Ticket<T>) -> Fut,
        Fut: Future<Output = Result<T, DomainError>>,
    {
        let held = match hold {
            KeyHold::ClaimFirst => self.store.claim_idempotency_key(&claim).await?,
            KeyHold::InTheChangeset => self.store.idempotency_record(&claim).await?,
        };
        match held {
            ClaimOutcome::Claimed => {}
            ClaimOutcome::Replay(stored) => return Ok(Once::Replayed(stored)),
            ClaimOutcome::InFlight => return Err(DomainError::IdempotencyKeyInUse),
            ClaimOutcome::Mismatch => return Err(reused),
        }
        let ticket = Ticket {
            claim: claim.clone(),
            hold,
            render: Box::new(render),
        };
        match (effect(ticket).await, hold) {
            (Ok(made), _) => Ok(Once::Done(made)),
            (Err(error), KeyHold::ClaimFirst) => {
                if let Err(release) = self.store.release_idempotency_key(&claim.scope, &claim.key).await {
                    tracing::warn!(%release, "could not release an idempotency key; it frees itself after its claim timeout");
                }
                Err(error)
            }
            // Refused before its commit (bad input, a rule): nothing was written, the key is
            // free, and there is nothing to read again.
            (Err(error), KeyHold::InTheChangeset)
                if !matches!(error, DomainError::InvalidState { code: "conflict", .. }) =>
            {
                Err(error)
            }
            // Lost at commit: if another request with this key won the race to the record,
            // its answer is this one's too.
            (Err(error), KeyHold::InTheChangeset) => match self.store.idempotency_record(&claim).await? {
                ClaimOutcome::Claimed => Err(error),
                ClaimOutcome::Replay(stored) => Ok(Once::Replayed(stored)),
                ClaimOutcome::InFlight => Err(DomainError::IdempotencyKeyInUse),
                ClaimOutcome::Mismatch => Err(reused),
            },
        }
    }
}

/// Where idempotency keys are claimed (the store's port for this protocol); a claim is
/// completed by a [`Write::CompleteIdempotency`] in the effect's own changeset.
#[async_trait::async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims an idempotency key before any effect; see [`ClaimOutcome`].
    async fn claim_idempotency_key(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, crate::ports::StoreError>;
    /// What the key's record says: [`ClaimOutcome::Claimed`] if the key is free to take
    /// ([`Write::TakeIdempotency`]). It writes nothing, but for deleting a record whose writer
    /// died before its effect, where a store writes the record first (DynamoDB's creates).
    async fn idempotency_record(&self, claim: &IdempotencyClaim) -> Result<ClaimOutcome, crate::ports::StoreError>;
    /// Gives up a claim whose request failed before writing anything.
    async fn release_idempotency_key(&self, scope: &str, key: &str) -> Result<(), crate::ports::StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fingerprint_ignores_formatting_but_not_content() {
        let a: serde_json::Value = serde_json::from_str(r#"{"a":1,"b":[1,2]}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str("{ \"b\": [1, 2],\n \"a\": 1 }").unwrap();
        assert_eq!(fingerprint("POST", "/v1/x", &a), fingerprint("POST", "/v1/x", &b));
        assert_ne!(fingerprint("POST", "/v1/x", &a), fingerprint("POST", "/v1/y", &a));
        assert_ne!(
            fingerprint("POST", "/v1/x", &a),
            fingerprint("POST", "/v1/x", &json!({"a": 2, "b": [1, 2]}))
        );
    }
}
