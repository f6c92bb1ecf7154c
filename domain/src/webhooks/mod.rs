//! Webhook endpoints and deliveries.

mod breaker;
mod delivery;
mod endpoints;
pub mod health;
mod ordering;
mod resends;
mod retry_policy;
pub mod signature;
mod signing_secrets;

pub use breaker::{EnableWebhookEndpoint, RELEASED_PER_SECOND};
pub use endpoints::{CreateWebhookEndpoint, UpdateWebhookEndpoint};
pub use health::{Breaker, EndpointHealth, Outcome, Tripped, WARNING_LEVELS};
pub use ordering::{DeliveryLine, DeliveryOrder, InLine};
pub use resends::{RecoverWebhookEndpoint, ResendEvent};
pub use retry_policy::RetryPolicy;
pub use signing_secrets::{RotateWebhookSecret, MAX_SIGNING_SECRETS};

use crate::access::Environment;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

/// Waits before each retry of a failed delivery; jitter is added on top.
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

/// How long a delivery's retries take in all, without jitter: a delivery its sender held
/// back for longer (its receiver away all the while) has run out of them.
pub const RETRY_SPAN: Duration = {
    let (mut seconds, mut retry) = (0, 0);
    while retry < RETRY_SCHEDULE.len() {
        seconds += RETRY_SCHEDULE[retry].whole_seconds();
        retry += 1;
    }
    Duration::seconds(seconds)
};

/// The wait before retry number `retry` (0-based) with up to 10% jitter, or `None` when the
/// schedule is exhausted. `jitter` is a random fraction in [0, 1).
pub fn retry_delay(retry: usize, jitter: f64) -> Option<Duration> {
    RETRY_SCHEDULE
        .get(retry)
        .map(|base| *base + *base * (0.1 * jitter.clamp(0.0, 1.0)))
}

/// A webhook request not sent: its receiver stopped answering (a post timed out or could not
/// connect), and until it answers again the sender keeps it only a few places; or it has its
/// share of the places while the sender posts to others too. Either way it cannot take every
/// place from other customers' receivers. Nothing was attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldBack {
    /// When to try again.
    pub retry_in: std::time::Duration,
}

/// What a webhook request came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    /// `Ok(status)` if the receiver answered, `Err` on a transport failure or timeout.
    pub answer: Result<u16, String>,
    /// From the request's start to its answer: the receiver's time, not a wait to be sent.
    pub took: std::time::Duration,
}

impl Posted {
    /// A request never sent (the receiver took no time).
    pub fn not_sent(reason: String) -> Posted {
        Posted {
            answer: Err(reason),
            took: std::time::Duration::ZERO,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SigningSecret {
    /// Name under which the secrets port keeps the value.
    pub secret_name: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointStatus {
    Enabled,
    /// Its breaker opened (or its receiver said it is gone): its deliveries wait, unattempted,
    /// until it is enabled again.
    Disabled,
    /// Deleted endpoints are kept for their deliveries' sake, and receive nothing.
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    pub id: crate::ids::WebhookEndpointId,
    /// `None`: a platform endpoint, which receives every customer's events.
    pub customer_id: Option<crate::ids::CustomerId>,
    pub url: String,
    /// What the endpoint is for, as its owner calls it (endpoints stored before read as none).
    #[serde(default)]
    pub description: Option<String>,
    /// Event types, or `*` for all.
    pub events: Vec<String>,
    /// How a failed delivery is tried again.
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    /// When its failures disable it.
    #[serde(default)]
    pub breaker: Breaker,
    /// The most deliveries it is sent a second, across every sender (none: as fast as they
    /// come).
    #[serde(default)]
    pub rate_limit: Option<u32>,
    /// Whether each operation's events are delivered one after another, in order.
    #[serde(default)]
    pub ordering: DeliveryOrder,
    pub status: EndpointStatus,
    /// Where the signing secrets are kept (never shown: the API's wire shape leaves them out).
    #[serde(default)]
    pub secrets: Vec<SigningSecret>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub environment: Environment,
    pub version: u64,
}

/// How many endpoints an owner (a customer, or the platform: `owner` `None`) keeps, not
/// deleted: each create and delete moves it by one, versioned, so two creates that each saw room
/// for one more endpoint cannot both commit (an index read alone could not tell them apart).
/// An owner whose endpoints were all made before it was kept has none until its next create or
/// delete, which counts its endpoints first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointRoster {
    pub owner: Option<crate::ids::CustomerId>,
    pub live: usize,
    pub version: u64,
}

impl EndpointRoster {
    /// The count after one endpoint more (`1`) or fewer (`-1`), as its next version.
    pub fn moved_by(&self, change: isize) -> EndpointRoster {
        EndpointRoster {
            owner: self.owner.clone(),
            live: self.live.saturating_add_signed(change),
            version: self.version + 1,
        }
    }
}

impl WebhookEndpoint {
    pub fn wants(&self, event_type: &str, customer_id: &str) -> bool {
        self.status != EndpointStatus::Deleted
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
    /// Its endpoint is disabled: it waits, unattempted, to be sent when the endpoint is
    /// enabled again.
    Waiting,
}

impl DeliveryStatus {
    /// Delivered, or failed for good: nothing more is tried unless someone resends it.
    pub fn is_finished(self) -> bool {
        matches!(self, DeliveryStatus::Delivered | DeliveryStatus::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// Where it was posted, when that is not its delivery's `url`: its endpoint was moved
    /// after it. Set when the delivery is first tried at the new URL, so an attempt costs no
    /// bytes unless a move makes them needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: crate::ids::DeliveryId,
    pub event_id: crate::ids::EventId,
    pub endpoint_id: crate::ids::WebhookEndpointId,
    /// Its endpoint's URL when it was made, then where it was last tried: an endpoint moved
    /// since takes its retries to where it now is, and the attempts made before name where
    /// they went.
    pub url: String,
    pub status: DeliveryStatus,
    pub attempts: Vec<Attempt>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// What became of it once it failed, when something did: a failed delivery without one is
    /// what recovering its endpoint resends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<FollowUp>,
    /// The operation whose events its endpoint takes in order ([`DeliveryOrder::PerOperation`]):
    /// it is sent once the deliveries of that operation's earlier events are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_line_of: Option<crate::ids::OperationId>,
    /// The operation whose event it carries (an operation's or a transaction's): that
    /// operation's deliveries list it. None for other events, and on deliveries made before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<crate::ids::OperationId>,
    pub version: u64,
}

/// What became of a failed delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FollowUp {
    /// Its event went to its endpoint again, as this delivery.
    Resent { delivery_id: crate::ids::DeliveryId },
    /// Not resent: its endpoint no longer takes its event, or the event is gone.
    NotResent { reason: String },
}

impl Delivery {
    /// Tries from now on go to `url`; the earlier attempts keep where they went.
    pub fn move_to(&mut self, url: &str) {
        if self.url != url {
            let before = std::mem::replace(&mut self.url, url.to_owned());
            for earlier in self.attempts.iter_mut().filter(|a| a.url.is_none()) {
                earlier.url = Some(before.clone());
            }
        }
    }

    /// Failed, and neither resent nor given up on; or waiting for its endpoint to be enabled
    /// again. Either is listed by its endpoint, in its events' order.
    pub fn awaits_follow_up(&self) -> bool {
        (self.status == DeliveryStatus::Failed && self.follow_up.is_none()) || self.status == DeliveryStatus::Waiting
    }
}

/// Where webhooks may be sent. Production sends only to public `https` receivers on port 443;
/// a test stack may also allow `http` and loopback or private receivers (local development),
/// an explicit setting a production stack refuses at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetPolicy {
    pub allow_local: bool,
}

impl TargetPolicy {
    pub const PUBLIC_ONLY: TargetPolicy = TargetPolicy { allow_local: false };

    /// The policy a stack of `environment` runs, or why the asked one is not allowed.
    pub fn for_environment(environment: Environment, allow_local: Option<bool>) -> Result<TargetPolicy, &'static str> {
        match (environment, allow_local) {
            (Environment::Production, Some(true)) => {
                Err("local webhook targets (http, loopback, private addresses) cannot be allowed in production")
            }
            (Environment::Production, _) => Ok(TargetPolicy::PUBLIC_ONLY),
            (Environment::Test, allow) => Ok(TargetPolicy {
                allow_local: allow.unwrap_or(true),
            }),
        }
    }

    /// Whether a receiver at `ip` may be connected to.
    pub fn allows_ip(self, ip: IpAddr) -> bool {
        self.allow_local || is_public(ip)
    }

    /// Checks a URL when an endpoint is registered: absolute, no credentials, a host, the
    /// scheme and port the policy allows, and no address or name that is never public.
    pub fn check_url(self, raw: &str) -> Result<url::Url, &'static str> {
        if raw.len() > 2048 || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("url must be an absolute http(s) URL of at most 2048 characters.");
        }
        let url = url::Url::parse(raw).map_err(|_| "url is not a valid absolute URL.")?;
        match (url.scheme(), self.allow_local) {
            ("https", _) | ("http", true) => {}
            ("http", false) => return Err("Webhook endpoints must use https://."),
            _ => return Err("url must be an absolute http(s) URL."),
        }
        let authority = raw
            .split_once("://")
            .map_or("", |(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""));
        if authority.contains('@') || !url.username().is_empty() || url.password().is_some() {
            return Err("url must not carry credentials; authenticate deliveries by their signature.");
        }
        if !self.allow_local && url.port().is_some_and(|port| port != 443) {
            return Err("Webhook endpoints are served on port 443.");
        }
        match url.host() {
            None => return Err("url must have a host."),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.');
                if name.is_empty() {
                    return Err("url must have a host.");
                }
                if !self.allow_local && (name == "localhost" || name.ends_with(".localhost")) {
                    return Err("url must not point at this host or a private network.");
                }
            }
            // The URL parser has already turned `127.1`, `2130706433` and `0x7f.1` into addresses.
            Some(url::Host::Ipv4(ip)) if !self.allows_ip(IpAddr::V4(ip)) => {
                return Err("url must not point at this host or a private network.")
            }
            Some(url::Host::Ipv6(ip)) if !self.allows_ip(IpAddr::V6(ip)) => {
                return Err("url must not point at this host or a private network.")
            }
            Some(_) => {}
        }
        Ok(url)
    }
}

/// Whether `ip` is an ordinary public unicast address: not loopback, private, link-local
/// (the cloud metadata address among them), unique-local, shared, multicast, broadcast,
/// documentation or unspecified, and not one of those in IPv4-mapped or NAT64 form.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            let embedded = |high: u16, low: u16| std::net::Ipv4Addr::from(((high as u32) << 16) | low as u32);
            // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits, 6to4
            // (2002::/16) the one in its second and third segments.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public(IpAddr::V4(embedded(segments[6], segments[7])));
            }
            if segments[0] == 0x2002 {
                return is_public(IpAddr::V4(embedded(segments[1], segments[2])));
            }
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (segments[0] & 0xfe00) == 0xfc00
                || (segments[0] & 0xffc0) == 0xfe80
                || (segments[0] & 0xffc0) == 0xfec0
                || (segments[0] == 0x2001 && segments[1] == 0x0db8)
                // Teredo tunnels to an address that is not this one.
                || (segments[0] == 0x2001 && segments[1] == 0)
                || segments[..6] == [0, 0, 0, 0, 0, 0])
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    pub customer_id: Option<crate::ids::CustomerId>,
    pub kind: Option<String>,
    pub starting_after: Option<crate::ids::EventId>,
    pub limit: usize,
}

/// The reads of events, endpoints and deliveries (the store's port for this module).
#[async_trait::async_trait]
pub trait WebhookStore: Send + Sync {
    async fn event(&self, id: &crate::ids::EventId) -> Result<Option<crate::event::Event>, crate::ports::StoreError>;
    /// Newest first; a `kind` filter may stop reading short of `limit` ([`crate::ports::Listed`]).
    async fn events(
        &self,
        query: &EventQuery,
    ) -> Result<crate::ports::Listed<crate::event::Event>, crate::ports::StoreError>;
    async fn webhook_endpoint(
        &self,
        id: &crate::ids::WebhookEndpointId,
    ) -> Result<Option<WebhookEndpoint>, crate::ports::StoreError>;
    /// The customer's endpoints and the platform's (`None`: only the platform's), deleted ones
    /// left out: what every event's dispatch reads, so it never grows with endpoints deleted.
    async fn webhook_endpoints_for(
        &self,
        customer_id: Option<&crate::ids::CustomerId>,
    ) -> Result<Vec<WebhookEndpoint>, crate::ports::StoreError>;
    /// The owner's count of endpoints as it is now (a strongly consistent read), if it has one.
    async fn endpoint_roster(
        &self,
        owner: Option<&crate::ids::CustomerId>,
    ) -> Result<Option<EndpointRoster>, crate::ports::StoreError>;
    async fn delivery(&self, id: &crate::ids::DeliveryId) -> Result<Option<Delivery>, crate::ports::StoreError>;
    /// The deliveries of `ids` that exist, each with its event's JSON as stored (`None` if the
    /// event is gone): what a batch of sends reads, together. A delivery posts the event as
    /// stored, which spares a parse and a write of the whole document per delivery.
    async fn deliveries_to_send(
        &self,
        ids: &[crate::ids::DeliveryId],
    ) -> Result<Vec<(Delivery, Option<String>)>, crate::ports::StoreError>;
    /// An event's deliveries; `operation_id` is the operation it is of, if any (where a store
    /// may keep them).
    async fn deliveries_of_event(
        &self,
        event_id: &crate::ids::EventId,
        operation_id: Option<&crate::ids::OperationId>,
    ) -> Result<Vec<Delivery>, crate::ports::StoreError>;
    /// The deliveries of an operation's events ([`Delivery::operation_id`]), by event id (the
    /// order its events were made), then delivery id, after `after`'s place when given, at
    /// most `limit`.
    async fn deliveries_of_operation(
        &self,
        operation_id: &crate::ids::OperationId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, crate::ports::StoreError>;
    /// An endpoint's failed deliveries that await a follow-up ([`Delivery::awaits_follow_up`]),
    /// by event id (the order their events were made), then delivery id, after `after`'s
    /// place in that order when given, at most `limit`. Only failures are indexed for it, so
    /// a delivered webhook costs nothing more.
    async fn failed_deliveries_of(
        &self,
        endpoint_id: &crate::ids::WebhookEndpointId,
        after: Option<&Delivery>,
        limit: usize,
    ) -> Result<Vec<Delivery>, crate::ports::StoreError>;
    /// The line of an endpoint's deliveries of one operation's events, if it has one.
    async fn delivery_line(
        &self,
        endpoint_id: &crate::ids::WebhookEndpointId,
        operation_id: &crate::ids::OperationId,
    ) -> Result<Option<DeliveryLine>, crate::ports::StoreError>;
    /// An endpoint's health, if an attempt was ever counted for it.
    async fn endpoint_health(
        &self,
        endpoint_id: &crate::ids::WebhookEndpointId,
    ) -> Result<Option<EndpointHealth>, crate::ports::StoreError>;
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
    fn production_refuses_every_local_or_disguised_target_and_malformed_urls() {
        let production = TargetPolicy::for_environment(Environment::Production, None).unwrap();
        assert!(production.check_url("https://hooks.example.com/ops").is_ok());
        assert!(production.check_url("https://hooks.example.com:443/ops").is_ok());
        assert!(production.check_url("https://93.184.216.34/hook").is_ok());
        assert!(production
            .check_url("https://[2606:2800:220:1:248:1893:25c8:1946]/hook")
            .is_ok());
        assert!(
            production.check_url("https://[2002:5db8:d822::1]/hook").is_ok(),
            "6to4 of a public address"
        );
        for bad in [
            "http://hooks.example.com",
            "https://hooks.example.com:8443/",
            "https://127.0.0.1/",
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f000001/",
            "https://0.0.0.0/",
            "https://169.254.169.254/latest/meta-data",
            "https://10.0.0.5/",
            "https://172.16.3.4/",
            "https://192.168.1.1/",
            "https://100.64.0.1/",
            "https://[::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:169.254.169.254]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://[fec0::1]/",
            "https://[2002:7f00:1::]/",
            "https://[2002:a9fe:a9fe::1]/",
            "https://[2001:0:4136:e378::1]/",
            "https://[ff02::1]/",
            "https://localhost/",
            "https://api.localhost./",
            "https://user:pass@hooks.example.com/",
            "https://@hooks.example.com/",
            "https://@",
            "https://hooks.example.com:99999/",
            "ftp://x",
            "https://",
            "hooks.example.com",
            "https://a b",
        ] {
            assert!(production.check_url(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn the_test_environment_allows_local_receivers_only_when_set_and_production_never() {
        let test = TargetPolicy::for_environment(Environment::Test, None).unwrap();
        assert!(test.check_url("http://127.0.0.1:9000/hook").is_ok());
        assert!(test.check_url("https://user:pass@127.0.0.1/").is_err());
        let strict = TargetPolicy::for_environment(Environment::Test, Some(false)).unwrap();
        assert!(strict.check_url("http://127.0.0.1:9000/hook").is_err());
        assert!(TargetPolicy::for_environment(Environment::Production, Some(true)).is_err());
    }

    #[test]
    fn endpoints_select_events_by_type_and_customer() {
        let endpoint = WebhookEndpoint {
            id: "whe_1".into(),
            customer_id: Some("cus_1".into()),
            url: "https://x".into(),
            description: None,
            events: vec!["transaction.confirmed".into()],
            retry_policy: Default::default(),
            breaker: Default::default(),
            rate_limit: None,
            ordering: Default::default(),
            status: EndpointStatus::Enabled,
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
