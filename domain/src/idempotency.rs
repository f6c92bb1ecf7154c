//! Idempotency keys (DESIGN §3): claimed before any effect, completed in the same store
//! transaction as the effect, replayed byte for byte.

use crate::error::DomainError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

/// How long a completed key is remembered.
pub const RETENTION: Duration = Duration::hours(24);
/// A claim whose request has not finished after this long (the process died) may be taken over:
/// nothing it did was committed, because completion commits with the effect.
pub const CLAIM_TIMEOUT: Duration = Duration::seconds(60);
pub const MAX_KEY_LENGTH: usize = 255;

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

pub fn check_key(key: Option<&str>) -> Result<&str, DomainError> {
    let key = key.ok_or_else(|| {
        DomainError::invalid(
            "Idempotency-Key",
            "idempotency_key_missing",
            "This request creates a resource: send an Idempotency-Key header.",
        )
    })?;
    if key.is_empty()
        || key.len() > MAX_KEY_LENGTH
        || key
            .chars()
            .any(|c| c.is_control() || crate::validate::is_invisible_or_bidi(c))
    {
        return Err(DomainError::invalid(
            "Idempotency-Key",
            "idempotency_key_invalid",
            format!("Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable characters."),
        ));
    }
    Ok(key)
}

/// A claimed key, handed to a use case so it can complete the key with its effect.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub scope: String,
    pub key: String,
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

    #[test]
    fn keys_are_checked() {
        assert!(check_key(None).is_err());
        assert!(check_key(Some("")).is_err());
        assert!(check_key(Some(&"k".repeat(256))).is_err());
        assert!(check_key(Some("a\nb")).is_err());
        assert_eq!(check_key(Some("order-42")).unwrap(), "order-42");
    }
}
