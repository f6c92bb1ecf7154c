//! The composition root: the one place a [`Service`] is assembled. Local mode opens the
//! embedded adapters (`ops-local`), a Lambda function or local mode against AWS the AWS ones
//! ([`crate::deployment`]); both hand them here with the same options.

use ops_domain::access::{Environment, KeyHasher, RateLimit};
use ops_domain::desk::DeskSla;
use ops_domain::files::Blobs;
use ops_domain::ids::UlidGenerator;
use ops_domain::ports::{Clock, EventBus, Metrics, Queue, RateLimiter, Secrets, Store};
use ops_domain::rail::{RailKind, Rails};
use ops_domain::schedules::ScheduleTimers;
use ops_domain::service::Service;
use ops_domain::transactions::RailSecret;
use ops_domain::webhooks::TargetPolicy;
use ops_infra::rails::{HttpRail, SandboxRail};
use ops_infra::webhook_sender::HttpWebhookSender;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The adapters a service runs on: the embedded ones or the AWS ones.
pub struct Adapters {
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn Queue>,
    pub secrets: Arc<dyn Secrets>,
    /// Counts requests that change something, across every instance.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Counts reads: the same limiter locally, each function's own memory on AWS.
    pub read_rate_limiter: Arc<dyn RateLimiter>,
    /// Where events also go for the PSP's own systems (EventBridge); none locally.
    pub bus: Option<Arc<dyn EventBus>>,
    /// The schedules' timer (EventBridge Scheduler); none locally, where the store's due
    /// index is the timer.
    pub timers: Option<Arc<dyn ScheduleTimers>>,
    /// Operator signals: CloudWatch metrics (EMF) in a function, the log locally.
    pub metrics: Arc<dyn Metrics>,
    /// Uploaded files' bytes: S3, or the data directory locally.
    pub blobs: Arc<dyn Blobs>,
}

/// What a service is told, whatever it runs on.
pub struct Options {
    pub environment: Environment,
    /// Mixed into API-key hashes.
    pub pepper: String,
    pub rails: Rails,
    pub webhook_targets: TargetPolicy,
    /// How long a webhook receiver has to answer.
    pub webhook_timeout: Duration,
    pub rail_secret: RailSecret,
    /// Requests per second each API key may make (0: unlimited).
    pub rate_limit: u32,
    pub desk_sla: DeskSla,
}

pub fn service(adapters: Adapters, options: Options, clock: Arc<dyn Clock>) -> Service {
    Service {
        store: adapters.store,
        clock,
        ids: Arc::new(UlidGenerator::default()),
        hasher: KeyHasher::new(options.pepper),
        environment: options.environment,
        rails: options.rails,
        queue: adapters.queue,
        secrets: adapters.secrets,
        webhooks: Arc::new(HttpWebhookSender::new(options.webhook_targets, options.webhook_timeout)),
        webhook_targets: options.webhook_targets,
        rail_secret: options.rail_secret,
        bus: adapters.bus,
        webhook_pace: adapters.rate_limiter.clone(),
        rate_limit: RateLimit::new(adapters.rate_limiter, adapters.read_rate_limiter, options.rate_limit),
        timers: adapters.timers,
        desk_sla: options.desk_sla,
        metrics: adapters.metrics,
        blobs: adapters.blobs,
    }
}

/// A rail served by the PSP's connectivity layer over HTTP (`OPS_HTTP_RAILS` entries:
/// `rail_id=http(s)://base_url`, or `rail_id=file+http(s)://base_url` for a rail that takes
/// a file at each cut-off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRailSpec {
    pub id: String,
    pub kind: RailKind,
    pub base_url: String,
}

impl FromStr for HttpRailSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<HttpRailSpec, String> {
        spec.split_once('=')
            .map(|(id, url)| match url.strip_prefix("file+") {
                Some(url) => (id, RailKind::Files, url),
                None => (id, RailKind::Instructions, url),
            })
            .filter(|(id, _, url)| {
                ops_domain::validate::valid_rail_id(id) && (url.starts_with("http://") || url.starts_with("https://"))
            })
            .map(|(id, kind, url)| HttpRailSpec {
                id: id.to_owned(),
                kind,
                base_url: url.to_owned(),
            })
            .ok_or_else(|| format!("'{spec}' is not rail_id=http(s)://base_url or rail_id=file+http(s)://base_url"))
    }
}

impl std::fmt::Display for HttpRailSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files = if self.kind == RailKind::Files { "file+" } else { "" };
        write!(f, "{}={files}{}", self.id, self.base_url)
    }
}

/// The rails a service can use: the sandbox if it is served, and the HTTP rails, whose
/// requests are signed with the rail secret.
pub fn rails(
    sandbox: Option<Arc<SandboxRail>>,
    http_rails: &[HttpRailSpec],
    rail_secret: Option<&str>,
    timeout: Duration,
) -> Result<Rails, String> {
    let mut rails = Rails::default();
    if let Some(sandbox) = sandbox {
        rails = rails.with(sandbox);
    }
    if http_rails.is_empty() {
        return Ok(rails);
    }
    let secret = rail_secret.ok_or("OPS_HTTP_RAILS needs the rail secret (OPS_RAIL_SECRET) to sign requests")?;
    for rail in http_rails {
        rails = rails.with(Arc::new(HttpRail::new(
            &rail.id,
            rail.kind,
            &rail.base_url,
            secret,
            timeout,
        )));
    }
    Ok(rails)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_rails_are_read_and_a_bad_entry_is_refused() {
        let spec: HttpRailSpec = "psp-local:spei=https://connect.example/spei".parse().unwrap();
        assert_eq!(
            (spec.id.as_str(), spec.kind),
            ("psp-local:spei", RailKind::Instructions)
        );
        assert_eq!(spec.to_string().parse::<HttpRailSpec>(), Ok(spec));
        let files: HttpRailSpec = "psp-local:bank=file+https://connect.example/bank".parse().unwrap();
        assert_eq!(
            (files.kind, files.base_url.as_str()),
            (RailKind::Files, "https://connect.example/bank")
        );
        assert_eq!(files.to_string().parse::<HttpRailSpec>(), Ok(files));
        for bad in ["psp-local:spei", "psp-local:spei=ftp://x", "bad id=https://x"] {
            assert!(bad.parse::<HttpRailSpec>().unwrap_err().contains(bad));
        }
        assert!(rails(
            None,
            &["psp-local:ach=https://x".parse().unwrap()],
            None,
            Duration::ZERO
        )
        .is_err());
    }
}
