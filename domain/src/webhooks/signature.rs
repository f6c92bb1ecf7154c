//! `X-Service-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>` — one `v1=`
//! per valid secret while a rotated secret overlaps. Used for webhooks, rail reports and the
//! HTTP rail adapter alike.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const HEADER: &str = "X-Service-Signature";
/// Receivers should refuse signatures older than this.
pub const TOLERANCE_SECONDS: i64 = 300;

pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

pub fn header(secrets: &[&str], timestamp: i64, body: &[u8]) -> String {
    let mut value = format!("t={timestamp}");
    for secret in secrets {
        value.push_str(",v1=");
        value.push_str(&sign(secret, timestamp, body));
    }
    value
}

#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub timestamp: i64,
    pub signatures: Vec<String>,
}

/// Parses a signature header; `None` if it has no timestamp or no `v1` signature.
pub fn parse(header: &str) -> Option<Parsed> {
    let mut timestamp = None;
    let mut signatures = vec![];
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse().ok()?),
            Some(("v1", sig)) if sig.len() == 64 && sig.bytes().all(|b| b.is_ascii_hexdigit()) => {
                signatures.push(sig.to_ascii_lowercase())
            }
            _ => {}
        }
    }
    (!signatures.is_empty()).then_some(Parsed {
        timestamp: timestamp?,
        signatures,
    })
}

/// Checks a header against a secret: some `v1` matches (in constant time) and the timestamp
/// is within the tolerance of `now`.
pub fn verify(header: &str, body: &[u8], secret: &str, now: i64) -> bool {
    let Some(parsed) = parse(header) else { return false };
    if (now - parsed.timestamp).abs() > TOLERANCE_SECONDS {
        return false;
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(parsed.timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    parsed
        .signatures
        .iter()
        .any(|sig| hex::decode(sig).is_ok_and(|bytes| mac.clone().verify_slice(&bytes).is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_body_verifies_and_any_change_breaks_it() {
        let body = br#"{"id":"evt_1"}"#;
        let h = header(&["whsec_a"], 1_700_000_000, body);
        assert!(verify(&h, body, "whsec_a", 1_700_000_010));
        assert!(!verify(&h, br#"{"id":"evt_2"}"#, "whsec_a", 1_700_000_010));
        assert!(!verify(&h, body, "whsec_b", 1_700_000_010));
        assert!(
            !verify(&h, body, "whsec_a", 1_700_000_000 + TOLERANCE_SECONDS + 1),
            "too old"
        );
    }

    #[test]
    fn overlapping_secrets_each_verify() {
        let body = b"{}";
        let h = header(&["whsec_old", "whsec_new"], 10, body);
        assert_eq!(parse(&h).unwrap().signatures.len(), 2);
        assert!(verify(&h, body, "whsec_old", 10) && verify(&h, body, "whsec_new", 10));
    }

    #[test]
    fn known_vector() {
        // Python: hmac.new(b"k", b"1.{}", hashlib.sha256).hexdigest()
        assert_eq!(
            sign("k", 1, b"{}"),
            "3dd49b2593d0f9a349e9e71c4bde3e2b862c2be4003fe9b4ba81332029310158"
        );
    }

    #[test]
    fn malformed_headers_do_not_parse() {
        for bad in [
            "",
            "t=1",
            "v1=abc",
            "t=x,v1=00",
            "t=1,v1=zz",
            "t=1,v2=".to_string().as_str(),
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(parse(&format!("t=1,v1={}", "a".repeat(64))).is_some());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsing_never_panics(header in ".{0,200}") {
            let _ = parse(&header);
        }

        #[test]
        fn every_signing_secret_verifies_its_header(
            secrets in proptest::collection::vec("whsec_[a-f0-9]{1,64}", 1..4),
            timestamp in 0i64..4_000_000_000,
            body in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
            let signed = header(&refs, timestamp, &body);
            let parsed = parse(&signed).unwrap();
            prop_assert_eq!(parsed.timestamp, timestamp);
            prop_assert_eq!(parsed.signatures.len(), secrets.len());
            for secret in &secrets {
                prop_assert!(verify(&signed, &body, secret, timestamp));
            }
            prop_assert!(!verify(&signed, &body, "whsec_other", timestamp));
        }
    }
}
