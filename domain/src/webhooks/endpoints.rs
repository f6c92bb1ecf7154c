//! Webhook endpoints as customers manage them.

use crate::access::{Principal, Scope};
use crate::cause::Cause;
use crate::error::DomainError;
use crate::idempotency::Ticket;
use crate::ids::{CustomerId, WebhookEndpointId};
use crate::ports::{AuditEntry, Changeset, StoreError, Write};
use crate::service::{customer_scope, Issued, Page, Service};
use crate::validate::required_text;
use crate::webhooks::{Breaker, DeliveryOrder, EndpointRoster, EndpointStatus, RetryPolicy, WebhookEndpoint};
use serde::Deserialize;

/// The most webhook endpoints a customer (or the platform) keeps: every event's dispatch reads
/// them all, and each one an event goes to is a delivery.
pub const MAX_ENDPOINTS: usize = 16;

/// The longest description an endpoint keeps.
const MAX_DESCRIPTION: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpoint {
    pub url: Option<String>,
    /// What the endpoint is for ("ledger sync"), up to 200 characters.
    pub description: Option<String>,
    pub events: Option<Vec<String>>,
    /// How a failed delivery is tried again (the default schedule when absent).
    pub retry_policy: Option<RetryPolicy>,
    /// When failures disable it (twenty in a row over twelve hours when absent).
    pub breaker: Option<Breaker>,
    /// The most deliveries a second it is sent (1 to 1000; no limit when absent).
    pub rate_limit: Option<u32>,
    /// `per_operation`: each operation's events one after another, in order (`none` when
    /// absent).
    pub ordering: Option<DeliveryOrder>,
    /// Platform keys only: the customer whose events it receives (omit for every customer).
    pub customer_id: Option<String>,
}

/// What an endpoint's owner may change in place: where it is and what it receives. Its secrets
/// stay (rotate them on their own), and deliveries still to be tried go to its new URL.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhookEndpoint {
    pub url: Option<String>,
    /// A new description; `""` removes it.
    pub description: Option<String>,
    pub events: Option<Vec<String>>,
    /// A new retry policy, for the deliveries' next tries too.
    pub retry_policy: Option<RetryPolicy>,
    /// A new breaker.
    pub breaker: Option<Breaker>,
    /// A new rate limit, deliveries a second; 0 removes it.
    pub rate_limit: Option<u32>,
    /// A new ordering, for deliveries made from now on.
    pub ordering: Option<DeliveryOrder>,
}

/// Reads and commits an endpoint's create or delete may make while others change its owner's
/// endpoints at once.
const ROSTER_ATTEMPTS: usize = 5;

fn roster_busy() -> DomainError {
    DomainError::invalid_state("conflict", "Webhook endpoints are changing too fast; retry.")
}

/// The event types an endpoint subscribes to: `*` or known types, at least one, each kept once
/// (as a key's scopes are), so the list stays as short as the known types however long the
/// request's was: the endpoint is stored whole, in its owner's roster too.
fn endpoint_events(mut events: Vec<String>) -> Result<Vec<String>, DomainError> {
    if events.is_empty() {
        return Err(DomainError::invalid(
            "events",
            "parameter_invalid_empty",
            "Give at least one event type, or \"*\".",
        ));
    }
    if let Some(i) = events
        .iter()
        .position(|e| e != "*" && !crate::event::event_types().any(|known| known == *e))
    {
        return Err(DomainError::invalid(
            format!("events[{i}]"),
            "invalid_event_type",
            "Unknown event type: subscribe to \"*\" or to types such as operation.approved or transaction.confirmed.",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    events.retain(|event| seen.insert(event.clone()));
    Ok(events)
}

/// A rate limit as a request sets it: 1 to 1000 deliveries a second.
fn checked_rate_limit(limit: u32) -> Result<u32, DomainError> {
    match limit {
        1..=1_000 => Ok(limit),
        _ => Err(DomainError::invalid(
            "rate_limit",
            "invalid_rate_limit",
            "rate_limit is from 1 to 1000 deliveries a second (0 on an update removes it).",
        )),
    }
}

/// An endpoint as it now is, with the audit entry of what was done to it.
fn endpoint_changes(endpoint: &WebhookEndpoint, action: &str, cause: Cause) -> Changeset {
    let mut changes = Changeset::default();
    changes.push(Write::Audit(AuditEntry::new(
        "webhook_endpoint",
        &endpoint.id,
        action,
        cause,
    )));
    changes.push(Write::PutWebhookEndpoint(endpoint.clone()));
    changes
}

impl Service {
    pub(super) async fn visible_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<WebhookEndpoint, DomainError> {
        self.owned_endpoint(principal, id)
            .await?
            .filter(|e| e.status != EndpointStatus::Deleted)
            .ok_or_else(|| DomainError::not_found("webhook_endpoint", id))
    }

    /// The endpoint if the caller manages it, deleted or not.
    async fn owned_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<Option<WebhookEndpoint>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        Ok(self.store.webhook_endpoint(id).await?.filter(|e| match &e.customer_id {
            Some(customer) => principal.can_access(customer),
            None => principal.is_platform(),
        }))
    }

    /// Who made, moved, rotated or deleted an endpoint, and when, oldest first. A deleted
    /// endpoint's history stays readable: it is what a review after a leaked key reads.
    pub async fn webhook_endpoint_history(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<Page<AuditEntry>, DomainError> {
        self.owned_endpoint(principal, id)
            .await?
            .ok_or_else(|| DomainError::not_found("webhook_endpoint", id))?;
        Ok(Page::all(self.store.entity_history(id).await?))
    }

    /// An endpoint's URL, as this environment allows one. A `#fragment` is
    /// refused here rather than at send time, so an endpoint stored with one still delivers:
    /// a fragment is never sent, and an owner who gives one expects it to mean something.
    fn endpoint_url(&self, url: Option<String>) -> Result<String, DomainError> {
        let url = required_text(url, "url", 2048)?;
        let checked = self
            .webhook_targets
            .check_url(&url)
            .map_err(|m| DomainError::invalid("url", "invalid_url", m))?;
        if checked.fragment().is_some() {
            return Err(DomainError::invalid(
                "url",
                "invalid_url",
                "url must not carry a #fragment: it is never sent to the receiver.",
            ));
        }
        Ok(url)
    }

    /// Stores a change to an endpoint as its next version, with its audit entry.
    pub(super) async fn save_endpoint(
        &self,
        endpoint: &mut WebhookEndpoint,
        action: &str,
        cause: Cause,
    ) -> Result<(), StoreError> {
        endpoint.version += 1;
        self.store.commit(endpoint_changes(endpoint, action, cause)).await
    }

    pub async fn create_webhook_endpoint(
        &self,
        principal: &Principal,
        command: CreateWebhookEndpoint,
        ticket: Option<Ticket<Issued<WebhookEndpoint>>>,
    ) -> Result<Issued<WebhookEndpoint>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let url = self.endpoint_url(command.url)?;
        let description = crate::text::optional_nonblank_text(command.description, "description", MAX_DESCRIPTION)?;
        let events = endpoint_events(command.events.unwrap_or_else(|| vec!["*".into()]))?;
        let retry_policy = command.retry_policy.unwrap_or_default();
        retry_policy.check()?;
        let breaker = Breaker::chosen(command.breaker)?;
        let rate_limit = command.rate_limit.map(checked_rate_limit).transpose()?;
        let ordering = command.ordering.unwrap_or_default();
        let customer_id = match (&principal.key.customer_id, command.customer_id) {
            (Some(own), None) => Some(own.clone()),
            (Some(_), Some(_)) => {
                return Err(DomainError::invalid(
                    "customer_id",
                    "parameter_unknown",
                    "customer_id is for platform keys; your endpoints are your customer's.",
                ))
            }
            (None, Some(id)) => Some(self.visible_customer(principal, &id, "customer_id").await?.id),
            (None, None) => None,
        };
        // The count is read again on each attempt: a create or delete beside this one moved it.
        // The endpoint (its id and secret) is made once, on the first attempt with room for it.
        let mut made: Option<Issued<WebhookEndpoint>> = None;
        let unsaved = &mut made;
        // Moved in: a borrowed ticket would keep the future from being `Send`.
        let created = async move {
            for _ in 0..ROSTER_ATTEMPTS {
                let roster = self.roster_of(customer_id.as_ref()).await?;
                if roster.live >= MAX_ENDPOINTS {
                    return Err(DomainError::invalid_state(
                        "endpoint_limit_reached",
                        format!("At most {MAX_ENDPOINTS} webhook endpoints each; delete one to make another."),
                    ));
                }
                let issued = match unsaved.take() {
                    Some(issued) => issued,
                    None => {
                        self.new_endpoint(
                            customer_id.clone(),
                            &url,
                            description.clone(),
                            &events,
                            (retry_policy, breaker, rate_limit, ordering),
                        )
                        .await?
                    }
                };
                let cause = Cause::new(
                    "webhook_endpoint_created",
                    "Webhook endpoint created",
                    principal.actor(),
                    issued.resource.created_at,
                );
                let mut changes = endpoint_changes(&issued.resource, "created", cause);
                changes.push(Write::PutEndpointRoster(roster.moved_by(1)));
                if let Some(ticket) = &ticket {
                    changes.push(ticket.complete(&issued));
                }
                match self.store.commit(changes).await {
                    Ok(()) => return Ok(issued),
                    Err(StoreError::Conflict) => *unsaved = Some(issued),
                    // Its outcome unknown, the endpoint may have landed: its secret stays.
                    Err(other) => return Err(self.commit_error(other)),
                }
            }
            Err(roster_busy())
        }
        .await;
        // An endpoint still unsaved here lost every commit it tried (or never tried one): only
        // its secret was written, and it goes too.
        if let (true, Some(unsaved)) = (created.is_err(), made) {
            self.forget_secrets(&unsaved.resource.secrets).await;
        }
        created
    }

    /// A new endpoint, enabled, with its first secret stored.
    async fn new_endpoint(
        &self,
        customer_id: Option<CustomerId>,
        url: &str,
        description: Option<String>,
        events: &[String],
        (retry_policy, breaker, rate_limit, ordering): (RetryPolicy, Breaker, Option<u32>, DeliveryOrder),
    ) -> Result<Issued<WebhookEndpoint>, DomainError> {
        let id = crate::ids::WebhookEndpointId::new(&*self.ids);
        let (secret, signing) = self.store_new_secret(&id).await?;
        Ok(Issued {
            resource: WebhookEndpoint {
                id,
                customer_id,
                url: url.to_owned(),
                description,
                events: events.to_vec(),
                retry_policy,
                breaker,
                rate_limit,
                ordering,
                status: EndpointStatus::Enabled,
                secrets: vec![signing],
                created_at: self.now(),
                environment: self.environment,
                version: 1,
            },
            secret,
        })
    }

    /// The owner's count of endpoints as kept, or (for an owner whose endpoints were all made
    /// before counts were kept) as its list counts them: at version 0, so the first count
    /// written is an insert, and two such counts at once cannot both land.
    async fn roster_of(&self, owner: Option<&CustomerId>) -> Result<EndpointRoster, DomainError> {
        if let Some(roster) = self.store.endpoint_roster(owner).await? {
            return Ok(roster);
        }
        let live = self
            .store
            .webhook_endpoints_for(owner)
            .await?
            .iter()
            .filter(|e| e.customer_id.as_ref() == owner && e.status != EndpointStatus::Deleted)
            .count();
        Ok(EndpointRoster {
            owner: owner.cloned(),
            live,
            version: 0,
        })
    }

    pub async fn get_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<WebhookEndpoint, DomainError> {
        self.visible_endpoint(principal, id).await
    }

    /// The endpoints of the customer asked (`customer_id`: a platform key's support view of a
    /// customer's, whose endpoints it may create), else of the key's own customer, else the
    /// platform's own. A customer's key asking for another customer finds none.
    pub async fn list_webhook_endpoints(
        &self,
        principal: &Principal,
        customer_id: Option<CustomerId>,
    ) -> Result<Page<WebhookEndpoint>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let Some(owner) = customer_scope(principal, customer_id) else {
            return Ok(Page::all(vec![]));
        };
        let data = self
            .store
            .webhook_endpoints_for(owner.as_ref())
            .await?
            .into_iter()
            .filter(|e| e.status != EndpointStatus::Deleted && e.customer_id == owner)
            .collect();
        Ok(Page::all(data))
    }

    /// Deletes an endpoint, counting it out of its owner's endpoints in the same commit.
    pub async fn delete_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
    ) -> Result<WebhookEndpoint, DomainError> {
        let deleted = self
            .retry_on_conflict(
                ROSTER_ATTEMPTS,
                || Err(roster_busy()),
                move || async move {
                    let mut endpoint = self.visible_endpoint(principal, id).await?;
                    let roster = self.roster_of(endpoint.customer_id.as_ref()).await?;
                    endpoint.status = EndpointStatus::Deleted;
                    endpoint.version += 1;
                    let cause = Cause::new(
                        "webhook_endpoint_deleted",
                        "Webhook endpoint deleted",
                        principal.actor(),
                        self.now(),
                    );
                    let mut changes = endpoint_changes(&endpoint, "deleted", cause);
                    changes.push(Write::PutEndpointRoster(roster.moved_by(-1)));
                    Ok((endpoint, changes))
                },
            )
            .await?;
        // A deleted endpoint is sent nothing, so nothing signs with its secrets.
        self.forget_secrets(&deleted.secrets).await;
        Ok(deleted)
    }

    /// A new URL or event types for an endpoint, its secrets kept. Deliveries still to be
    /// tried (retries included) go to the new URL; what was already sent is as it was.
    pub async fn update_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &WebhookEndpointId,
        command: UpdateWebhookEndpoint,
    ) -> Result<WebhookEndpoint, DomainError> {
        let mut endpoint = self.visible_endpoint(principal, id).await?;
        if command.url.is_none()
            && command.description.is_none()
            && command.events.is_none()
            && command.retry_policy.is_none()
            && command.breaker.is_none()
            && command.rate_limit.is_none()
            && command.ordering.is_none()
        {
            return Err(DomainError::invalid(
                "url",
                "parameter_missing",
                "Give the endpoint's new url, description, events, retry_policy, breaker, rate_limit or ordering, or more than one.",
            ));
        }
        let mut changed = vec![];
        if let Some(url) = command.url {
            let url = self.endpoint_url(Some(url))?;
            if url != endpoint.url {
                changed.push(format!("url {} (was {})", url, endpoint.url));
                endpoint.url = url;
            }
        }
        if let Some(description) = command.description {
            // "" removes it; any other text is checked as a create's.
            let description = match description.is_empty() {
                true => None,
                false => crate::text::optional_nonblank_text(Some(description), "description", MAX_DESCRIPTION)?,
            };
            if description != endpoint.description {
                changed.push(match &description {
                    Some(text) => format!("description '{text}'"),
                    None => "description removed".to_owned(),
                });
                endpoint.description = description;
            }
        }
        if let Some(events) = command.events {
            let events = endpoint_events(events)?;
            if events != endpoint.events {
                changed.push(format!(
                    "events {} (were {})",
                    events.join(", "),
                    endpoint.events.join(", ")
                ));
                endpoint.events = events;
            }
        }
        if let Some(policy) = command.retry_policy {
            policy.check()?;
            if policy != endpoint.retry_policy {
                changed.push(format!(
                    "retry policy {} (was {})",
                    serde_json::to_string(&policy).unwrap_or_default(),
                    serde_json::to_string(&endpoint.retry_policy).unwrap_or_default()
                ));
                endpoint.retry_policy = policy;
            }
        }
        if let Some(breaker) = command.breaker {
            breaker.check()?;
            if breaker != endpoint.breaker {
                changed.push(format!(
                    "breaker {} failures over {} hours (was {} over {})",
                    breaker.failures, breaker.over_hours, endpoint.breaker.failures, endpoint.breaker.over_hours
                ));
                endpoint.breaker = breaker;
            }
        }
        if let Some(asked) = command.rate_limit {
            let rate_limit = match asked {
                0 => None,
                limit => Some(checked_rate_limit(limit)?),
            };
            if rate_limit != endpoint.rate_limit {
                let shown = |limit: Option<u32>| limit.map_or("none".to_owned(), |l| format!("{l} a second"));
                changed.push(format!(
                    "rate limit {} (was {})",
                    shown(rate_limit),
                    shown(endpoint.rate_limit)
                ));
                endpoint.rate_limit = rate_limit;
            }
        }
        if let Some(ordering) = command.ordering {
            if ordering != endpoint.ordering {
                changed.push(format!(
                    "ordering {} (was {})",
                    ordering.as_str(),
                    endpoint.ordering.as_str()
                ));
                endpoint.ordering = ordering;
            }
        }
        if changed.is_empty() {
            return Ok(endpoint);
        }
        let cause = Cause::new(
            "webhook_endpoint_updated",
            format!("Webhook endpoint updated: {}", changed.join("; ")),
            principal.actor(),
            self.now(),
        );
        self.save_endpoint(&mut endpoint, "updated", cause)
            .await
            .map_err(|error| self.commit_error(error))?;
        Ok(endpoint)
    }
}
