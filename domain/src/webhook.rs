//! Webhook endpoints and deliveries (DESIGN §6).

use crate::auth::Environment;
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

/// Waits before each retry of a failed delivery (DESIGN §6); jitter is added on top.
pub const RETRY_SCHEDULE: [Duration; 8] = [
    Duration::minutes(1),
    Duration::minutes(5),
    Duration::minutes(30),
    Duration::hours(2),
    Duration::hours(5),
    Duration::hours(10),
    Duration::hours(10),
    Duration::hours(24),
];
pub const DELIVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The wait before retry number `retry` (0-based) with up to 10% jitter, or `None` when the
/// schedule is exhausted. `jitter` is a random fraction in [0, 1).
pub fn retry_delay(retry: usize, jitter: f64) -> Option<Duration> {
    RETRY_SCHEDULE
        .get(retry)
        .map(|base| *base + *base * (0.1 * jitter.clamp(0.0, 1.0)))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SigningSecret {
    /// Name under which the secrets port keeps the value.
    pub secret_name: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    pub id: String,
    pub object: String,
    /// `None`: a platform endpoint, which receives every customer's events.
    pub customer_id: Option<String>,
    pub url: String,
    /// Event types, or `*` for all.
    pub events: Vec<String>,
    pub status: String,
    /// Where the signing secrets are kept; never shown (stores persist it beside the JSON).
    #[serde(skip_serializing, default)]
    pub secrets: Vec<SigningSecret>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

impl WebhookEndpoint {
    pub fn wants(&self, event_type: &str, customer_id: &str) -> bool {
        self.status == "enabled"
            && self.customer_id.as_deref().is_none_or(|own| own == customer_id)
            && self.events.iter().any(|e| e == "*" || e == event_type)
    }

    /// Secrets still valid at `now`, newest first.
    pub fn live_secrets(&self, now: OffsetDateTime) -> impl Iterator<Item = &SigningSecret> {
        self.secrets
            .iter()
            .rev()
            .filter(move |s| s.expires_at.is_none_or(|at| at > now))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: String,
    pub object: String,
    pub event_id: String,
    pub endpoint_id: String,
    pub url: String,
    pub status: DeliveryStatus,
    pub attempts: Vec<Attempt>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub version: u64,
}

/// Production endpoints must be https; the test environment also takes http for local
/// receivers.
pub fn check_url(url: &str, environment: Environment) -> Result<(), &'static str> {
    let rest = match (url.split_once("://"), environment) {
        (Some(("https", rest)), _) | (Some(("http", rest)), Environment::Test) => rest,
        (Some(("http", _)), Environment::Production) => return Err("Production webhook endpoints must use https://."),
        _ => return Err("url must be an absolute http(s) URL."),
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("url must be an absolute http(s) URL with a host, at most 2048 characters.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_follow_the_schedule_with_bounded_jitter_then_stop() {
        assert_eq!(retry_delay(0, 0.0), Some(Duration::minutes(1)));
        assert_eq!(retry_delay(0, 0.5), Some(Duration::seconds(63)));
        assert!(retry_delay(7, 0.99).unwrap() < Duration::hours(27));
        assert_eq!(retry_delay(8, 0.0), None);
    }

    #[test]
    fn urls_are_checked_per_environment() {
        assert!(check_url("https://hooks.example.com/ops", Environment::Production).is_ok());
        assert!(check_url("http://127.0.0.1:9000/hook", Environment::Test).is_ok());
        assert!(check_url("http://hooks.example.com", Environment::Production).is_err());
        for bad in ["ftp://x", "https://", "hooks.example.com", "https://a b"] {
            assert!(check_url(bad, Environment::Test).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoints_select_events_by_type_and_customer() {
        let endpoint = WebhookEndpoint {
            id: "whe_1".into(),
            object: "webhook_endpoint".into(),
            customer_id: Some("cus_1".into()),
            url: "https://x".into(),
            events: vec!["transaction.confirmed".into()],
            status: "enabled".into(),
            secrets: vec![],
            created_at: OffsetDateTime::UNIX_EPOCH,
            environment: Environment::Test,
            version: 1,
        };
        assert!(endpoint.wants("transaction.confirmed", "cus_1"));
        assert!(!endpoint.wants("transaction.failed", "cus_1"));
        assert!(!endpoint.wants("transaction.confirmed", "cus_2"));
        let platform = WebhookEndpoint {
            customer_id: None,
            events: vec!["*".into()],
            ..endpoint
        };
        assert!(platform.wants("operation.created", "cus_9"));
    }
}
