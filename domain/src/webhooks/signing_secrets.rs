//! Webhook endpoints' signing secrets: each stored on its own by the secrets port, rotated
//! with an overlap, and deleted once no endpoint signs with it.

use super::SigningSecret;
use crate::access::Principal;
use crate::cause::Cause;
use crate::error::DomainError;
use crate::ids::WebhookEndpointId;
use crate::ports::StoreError;
use crate::service::{Issued, Service};
use crate::webhooks::{EndpointStatus, WebhookEndpoint};
use futures_util::{StreamExt, TryStreamExt};
use serde::Deserialize;
use time::Duration;

const MAX_SECRET_OVERLAP: Duration = Duration::days(7);
/// The most secrets an endpoint signs with at once: the newest and the two before it. An
/// endpoint is stored whole and each delivery is signed with every live secret, so rotations
/// in a row must not add one each for as long as their overlaps last.
pub const MAX_SIGNING_SECRETS: usize = 3;
/// Where every endpoint's signing secrets are stored: `webhook/<endpoint id>/<suffix>`.
const SECRETS_PREFIX: &str = "webhook/";
/// How old a signing secret no endpoint names must be before the sweep deletes it: a create or
/// a rotation stores its new secret a moment before the endpoint that names it is saved.
pub const SWEEP_GRACE: Duration = Duration::hours(1);
/// Endpoints the sweep reads at a time.
const SWEEP_READS_AT_ONCE: usize = 16;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateWebhookSecret {
    /// Seconds the old secret keeps signing (default a day; 0 ends it now).
    pub expires_in: Option<i64>,
}

fn new_webhook_secret() -> String {
    let mut random = [0u8; 32];
    rand::fill(&mut random);
    format!("whsec_{}", hex::encode(random))
}

impl Service {
    /// A new signing secret, stored under a name of its own: a name counted from the endpoint's
    /// list would be taken again once an older secret left it, and writing over a secret still
    /// signing through its overlap would break its receivers' checks.
    pub(super) async fn store_new_secret(&self, endpoint_id: &str) -> Result<(String, SigningSecret), DomainError> {
        let value = new_webhook_secret();
        let mut suffix = [0u8; 8];
        rand::fill(&mut suffix);
        let secret_name = format!("{SECRETS_PREFIX}{endpoint_id}/{}", hex::encode(suffix));
        self.secrets.put_secret(&secret_name, &value).await?;
        Ok((
            value,
            SigningSecret {
                secret_name,
                expires_at: None,
            },
        ))
    }

    /// Deletes signing secrets no endpoint signs with any more (each is stored, and in the
    /// cloud billed, on its own), once the commit that let go of them has landed. One left
    /// behind is never read again, so a failure is logged rather than answered.
    pub(super) async fn forget_secrets(&self, secrets: &[SigningSecret]) {
        for secret in secrets {
            if let Err(error) = self.secrets.delete_secret(&secret.secret_name).await {
                tracing::warn!(secret = %secret.secret_name, %error, "a signing secret no endpoint uses is still stored");
            }
        }
    }

    /// Deletes the signing secrets no endpoint names any more and that a deletion missed: one
    /// whose delete failed (logged), one stored by a create or rotation that died or lost
    /// before saving its endpoint, every secret of a deleted endpoint. Only those stored more
    /// than [`SWEEP_GRACE`] ago, so a create or rotation under way keeps its new secret.
    /// Answers how many it deleted; runs daily in the cloud, hourly locally.
    pub async fn sweep_signing_secrets(&self) -> Result<usize, DomainError> {
        let cutoff = self.now() - SWEEP_GRACE;
        let mut by_endpoint: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for secret in self.secrets.secrets_named(SECRETS_PREFIX).await? {
            let owner = secret.name[SECRETS_PREFIX.len()..]
                .split('/')
                .next()
                .unwrap_or_default();
            if secret.stored_at <= cutoff {
                by_endpoint.entry(owner.to_owned()).or_default().push(secret.name);
            }
        }
        // Each endpoint is one read: a few at a time, so a sweep of many stays within its
        // function's timeout.
        let orphans_of = by_endpoint.into_iter().map(|(owner, names)| async move {
            let named: Vec<String> = match self.store.webhook_endpoint(&WebhookEndpointId::from(owner)).await? {
                Some(endpoint) if endpoint.status != EndpointStatus::Deleted => {
                    endpoint.secrets.into_iter().map(|s| s.secret_name).collect()
                }
                _ => vec![],
            };
            Ok::<_, DomainError>(
                names
                    .into_iter()
                    .filter(|name| !named.contains(name))
                    .collect::<Vec<_>>(),
            )
        });
        let orphans: Vec<String> = futures_util::stream::iter(orphans_of)
            .buffer_unordered(SWEEP_READS_AT_ONCE)
            .try_concat()
            .await?;
        for name in &orphans {
            self.secrets.delete_secret(name).await?;
        }
        if !orphans.is_empty() {
            tracing::info!(
                deleted = orphans.len(),
                "signing secrets no endpoint names were deleted"
            );
        }
        Ok(orphans.len())
    }

    /// A new signing secret, shown once; the old ones keep signing until `expires_in`, so
    /// deliveries carry one `v1=` per live secret meanwhile.
    pub async fn rotate_webhook_secret(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
        command: RotateWebhookSecret,
    ) -> Result<Issued<WebhookEndpoint>, DomainError> {
        let mut endpoint = self.visible_endpoint(principal, id).await?;
        let overlap = match command.expires_in {
            None => Duration::hours(24),
            Some(s) if (0..=MAX_SECRET_OVERLAP.whole_seconds()).contains(&s) => Duration::seconds(s),
            Some(_) => {
                return Err(DomainError::invalid(
                    "expires_in",
                    "out_of_range",
                    format!("expires_in is 0 to {} seconds.", MAX_SECRET_OVERLAP.whole_seconds()),
                ))
            }
        };
        let now = self.now();
        for old in endpoint.secrets.iter_mut() {
            old.expires_at = Some(old.expires_at.map_or(now + overlap, |at| at.min(now + overlap)));
        }
        let (secret, signing) = self.store_new_secret(&endpoint.id).await?;
        let (mut live, mut retired): (Vec<_>, Vec<_>) = std::mem::take(&mut endpoint.secrets)
            .into_iter()
            .partition(|s| s.expires_at.is_none_or(|at| at > now));
        // Oldest first, as rotations appended them: those beyond the newest few stop now.
        let beyond = (live.len() + 1).saturating_sub(MAX_SIGNING_SECRETS);
        retired.extend(live.drain(..beyond));
        endpoint.secrets = live;
        endpoint.secrets.push(signing.clone());
        let message = match overlap.is_zero() {
            true => "Signing secret rotated; earlier secrets stop signing now".to_owned(),
            false => format!(
                "Signing secret rotated; earlier secrets sign beside it until {} at the latest",
                (now + overlap)
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            ),
        };
        let cause = Cause::new("webhook_secret_rotated", message, principal.actor(), now);
        match self.save_endpoint(&mut endpoint, "secret_rotated", cause).await {
            Ok(()) => self.forget_secrets(&retired).await,
            Err(StoreError::Conflict) => {
                // A change beside this one won: the new secret was never the endpoint's.
                self.forget_secrets(&[signing]).await;
                return Err(self.commit_error(StoreError::Conflict));
            }
            // It may have landed, and then the endpoint signs with the new secret.
            Err(other) => return Err(other.into()),
        }
        Ok(Issued {
            resource: endpoint,
            secret,
        })
    }
}
