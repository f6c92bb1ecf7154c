//! Use cases around the execution pipeline that people call: transactions and their operator
//! actions, events and resends, webhook endpoints, and signed rail reports.

use crate::auth::{Principal, Scope};
use crate::cause::{Actor, ActorType, Cause};
use crate::error::DomainError;
use crate::event::Event;
use crate::idempotency::{self, ClaimOutcome, IdempotencyClaim, StoredResponse};
use crate::ids::IdKind;
use crate::ports::{AuditEntry, Changeset, EventQuery, Write};
use crate::rail::RailState;
use crate::service::{customer_scope, Page, RailSecret, Service};
use crate::signature;
use crate::transaction::{Transaction, TransactionStatus, TransactionTransition};
use crate::validate::{optional_text, required_text};
use crate::webhook::{self, Delivery, SigningSecret, WebhookEndpoint};
use serde::{Deserialize, Serialize};
use time::Duration;

/// Name of the secret shared with the connectivity layer: it signs `POST /v1/rail_reports`
/// and the HTTP rail adapter's requests.
pub const RAIL_SECRET: &str = "rail-secret";
const MAX_SECRET_OVERLAP: Duration = Duration::days(7);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveTransaction {
    pub status: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryTransaction {
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpoint {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    /// Platform keys only: the customer whose events it receives (omit for every customer).
    pub customer_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateWebhookSecret {
    /// Seconds the old secret keeps signing (default a day; 0 ends it now).
    pub expires_in: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResendEvent {
    pub endpoint_id: Option<String>,
}

/// The answer to a rail report: the transaction as it stands, and whether this report id was
/// already taken (then nothing changed).
pub struct ReportAnswer {
    pub body: Vec<u8>,
    pub replayed: bool,
}

/// What a rail's connectivity layer reports about a transaction.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RailReport {
    pub id: Option<String>,
    pub rail: Option<String>,
    pub transaction_id: Option<String>,
    pub rail_reference: Option<String>,
    pub state: Option<String>,
    pub code: Option<String>,
    pub reason: Option<String>,
}

#[derive(Serialize)]
struct EndpointWithSecret<'a> {
    #[serde(flatten)]
    endpoint: &'a WebhookEndpoint,
    secret: &'a str,
}

fn new_webhook_secret() -> String {
    let mut random = [0u8; 32];
    rand::fill(&mut random);
    format!("whsec_{}", hex::encode(random))
}

impl Service {
    fn require_operator(principal: &Principal) -> Result<(), DomainError> {
        if principal.is_platform() && principal.has_scope(Scope::Admin) {
            Ok(())
        } else {
            Err(DomainError::forbidden(
                "operator_required",
                "Only a platform operator (admin key) can do this.",
            ))
        }
    }

    async fn visible_transaction(&self, principal: &Principal, id: &str) -> Result<Transaction, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let found = match IdKind::Transaction.matches(id) {
            true => self.store.transaction(id).await?,
            false => None,
        };
        found
            .filter(|t| principal.can_access(&t.customer_id))
            .ok_or_else(|| DomainError::not_found("transaction", id))
    }

    pub async fn get_transaction(&self, principal: &Principal, id: &str) -> Result<Transaction, DomainError> {
        self.visible_transaction(principal, id).await
    }

    pub async fn list_transactions(
        &self,
        principal: &Principal,
        operation_id: &str,
    ) -> Result<Page<Transaction>, DomainError> {
        let operation = self.get_operation(principal, operation_id).await?;
        let data = self.store.transactions_of_operation(&operation.id).await?;
        Ok(Page::all(data))
    }

    /// Operator: sends a transaction that needs attention back to be submitted — only if the
    /// rail cannot hold it; otherwise only `resolve` (after asking the rail) is safe.
    pub async fn retry_transaction(
        &self,
        principal: &Principal,
        id: &str,
        command: RetryTransaction,
    ) -> Result<Transaction, DomainError> {
        Self::require_operator(principal)?;
        self.visible_transaction(principal, id).await?;
        let reason = optional_text(command.reason, "reason", 500)?.unwrap_or_else(|| "Retried by an operator".into());
        let actor = Actor {
            kind: ActorType::Operator,
            id: principal.actor().id,
        };
        let retried = self
            .update_transaction(id, |txn, now| {
                let cause = Cause::new("operator_retry", reason.clone(), actor.clone(), now);
                let change = txn.apply(TransactionTransition::Retry(cause))?;
                txn.submit_attempts = 0;
                Ok(Some(Some(change)))
            })
            .await?;
        retried.ok_or_else(|| DomainError::invalid_state("conflict", "Retry did not apply."))
    }

    /// Operator: settles a transaction that needs attention (or whose outcome is unknown)
    /// as confirmed or failed, with the reason on record.
    pub async fn resolve_transaction(
        &self,
        principal: &Principal,
        id: &str,
        command: ResolveTransaction,
    ) -> Result<Transaction, DomainError> {
        Self::require_operator(principal)?;
        self.visible_transaction(principal, id).await?;
        let status = required_text(command.status, "status", 20)?;
        let reason = required_text(command.reason, "reason", 500)?;
        let actor = Actor {
            kind: ActorType::Operator,
            id: principal.actor().id,
        };
        let resolved = self
            .update_transaction(id, |txn, now| {
                if !matches!(
                    txn.status,
                    TransactionStatus::NeedsAttention | TransactionStatus::Unknown
                ) {
                    return Err(DomainError::invalid_state(
                        "not_resolvable",
                        format!(
                            "Transaction {} is {}; only unknown or needs_attention transactions are resolved.",
                            txn.id,
                            txn.status.as_str()
                        ),
                    ));
                }
                let cause = Cause::new("operator_resolution", reason.clone(), actor.clone(), now);
                let transition = match status.as_str() {
                    "confirmed" => TransactionTransition::Confirm(cause),
                    "failed" => TransactionTransition::Fail(cause),
                    _ => {
                        return Err(DomainError::invalid(
                            "status",
                            "invalid_status",
                            "status is confirmed or failed.",
                        ))
                    }
                };
                txn.next_poll_at = None;
                txn.apply(transition).map(|c| Some(Some(c)))
            })
            .await?;
        resolved.ok_or_else(|| DomainError::invalid_state("conflict", "Resolution did not apply."))
    }

    // ---- events -----------------------------------------------------------------------

    pub async fn get_event(&self, principal: &Principal, id: &str) -> Result<Event, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let found = match IdKind::Event.matches(id) {
            true => self.store.event(id).await?,
            false => None,
        };
        found
            .filter(|e| principal.can_access(&e.customer_id))
            .ok_or_else(|| DomainError::not_found("event", id))
    }

    pub async fn list_events(&self, principal: &Principal, mut query: EventQuery) -> Result<Page<Event>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.take()) else {
            return Ok(Page::empty());
        };
        let limit = query.limit;
        let query = EventQuery {
            customer_id,
            limit: limit + 1,
            ..query
        };
        Ok(Page::of(self.store.events(&query).await?, limit))
    }

    pub async fn event_deliveries(&self, principal: &Principal, id: &str) -> Result<Page<Delivery>, DomainError> {
        let event = self.get_event(principal, id).await?;
        let mut data = self.store.deliveries_of_event(&event.id).await?;
        if let Some(own) = &principal.key.customer_id {
            let mut visible = vec![];
            for delivery in data {
                let endpoint = self.store.webhook_endpoint(&delivery.endpoint_id).await?;
                if endpoint.is_some_and(|e| e.customer_id.as_deref() == Some(own)) {
                    visible.push(delivery);
                }
            }
            data = visible;
        }
        Ok(Page::all(data))
    }

    pub async fn resend_event(
        &self,
        principal: &Principal,
        id: &str,
        command: ResendEvent,
    ) -> Result<Page<Delivery>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let event = self.get_event(principal, id).await?;
        let only = match command.endpoint_id {
            Some(endpoint_id) => {
                let endpoint =
                    self.visible_endpoint(principal, &endpoint_id)
                        .await
                        .map_err(|_| DomainError::InvalidRequest {
                            code: "resource_missing",
                            param: Some("endpoint_id".into()),
                            message: format!("No such webhook endpoint: '{endpoint_id}'"),
                        })?;
                endpoint.id
            }
            None => "*".into(),
        };
        // A customer resends to its own endpoints; only the platform resends to the platform's.
        let endpoints: Vec<WebhookEndpoint> = self
            .store
            .webhook_endpoints_for(Some(&event.customer_id))
            .await?
            .into_iter()
            .filter(|e| principal.is_platform() || e.customer_id.is_some())
            .collect();
        Ok(Page::all(self.dispatch_to(&event, &endpoints, Some(&only)).await?))
    }

    // ---- webhook endpoints ------------------------------------------------------------

    async fn visible_endpoint(&self, principal: &Principal, id: &str) -> Result<WebhookEndpoint, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let found = match id.starts_with("whe_") {
            true => self.store.webhook_endpoint(id).await?,
            false => None,
        };
        found
            .filter(|e| e.status != "deleted")
            .filter(|e| match &e.customer_id {
                Some(customer) => principal.can_access(customer),
                None => principal.is_platform(),
            })
            .ok_or_else(|| DomainError::not_found("webhook_endpoint", id))
    }

    async fn store_new_secret(&self, endpoint_id: &str, index: usize) -> Result<(String, SigningSecret), DomainError> {
        let value = new_webhook_secret();
        let secret_name = format!("webhook/{endpoint_id}/{index}");
        self.secrets.put_secret(&secret_name, &value).await?;
        Ok((
            value,
            SigningSecret {
                secret_name,
                expires_at: None,
            },
        ))
    }

    pub async fn create_webhook_endpoint(
        &self,
        principal: &Principal,
        command: CreateWebhookEndpoint,
        ticket: Option<crate::idempotency::Ticket>,
    ) -> Result<Vec<u8>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let url = required_text(command.url, "url", 2048)?;
        self.webhook_targets
            .check_url(&url)
            .map_err(|m| DomainError::invalid("url", "invalid_url", m))?;
        let events = command.events.unwrap_or_else(|| vec!["*".into()]);
        if events.is_empty() {
            return Err(DomainError::invalid(
                "events",
                "parameter_invalid_empty",
                "Give at least one event type, or \"*\".",
            ));
        }
        if let Some(i) = events
            .iter()
            .position(|e| e != "*" && !webhook::event_types().any(|known| known == *e))
        {
            return Err(DomainError::invalid(
                format!("events[{i}]"),
                "invalid_event_type",
                "Unknown event type: subscribe to \"*\" or to types such as operation.approved or transaction.confirmed.",
            ));
        }
        let customer_id = match (&principal.key.customer_id, command.customer_id) {
            (Some(own), None) => Some(own.clone()),
            (Some(_), Some(_)) => {
                return Err(DomainError::invalid(
                    "customer_id",
                    "parameter_unknown",
                    "customer_id is for platform keys; your endpoints are your customer's.",
                ))
            }
            (None, Some(id)) => Some(
                self.store
                    .customer(&id)
                    .await?
                    .ok_or_else(|| DomainError::InvalidRequest {
                        code: "resource_missing",
                        param: Some("customer_id".into()),
                        message: format!("No such customer: '{id}'"),
                    })?
                    .id,
            ),
            (None, None) => None,
        };
        let id = self.ids.new_id(IdKind::Event).replacen("evt_", "whe_", 1);
        let (secret, signing) = self.store_new_secret(&id, 0).await?;
        let now = self.now();
        let endpoint = WebhookEndpoint {
            id,
            object: "webhook_endpoint".into(),
            customer_id,
            url,
            events,
            status: "enabled".into(),
            secrets: vec![signing],
            created_at: now,
            environment: self.environment,
            version: 1,
        };
        let body = serde_json::to_vec(&EndpointWithSecret {
            endpoint: &endpoint,
            secret: &secret,
        })
        .expect("serializes");
        let stored = serde_json::to_vec(&EndpointWithSecret {
            endpoint: &endpoint,
            secret: "whsec_…withheld",
        })
        .expect("serializes");
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "webhook_endpoint",
            &endpoint.id,
            "created",
            Cause::new(
                "webhook_endpoint_created",
                "Webhook endpoint created",
                principal.actor(),
                now,
            ),
        )));
        changes.push(Write::PutWebhookEndpoint(endpoint));
        self.commit_created(changes, ticket, stored).await?;
        Ok(body)
    }

    pub async fn get_webhook_endpoint(&self, principal: &Principal, id: &str) -> Result<WebhookEndpoint, DomainError> {
        self.visible_endpoint(principal, id).await
    }

    pub async fn list_webhook_endpoints(&self, principal: &Principal) -> Result<Page<WebhookEndpoint>, DomainError> {
        principal.require(Scope::WebhooksManage)?;
        let data = self
            .store
            .webhook_endpoints_for(principal.key.customer_id.as_deref())
            .await?
            .into_iter()
            .filter(|e| e.status != "deleted" && (principal.is_platform() || e.customer_id.is_some()))
            .collect();
        Ok(Page::all(data))
    }

    pub async fn delete_webhook_endpoint(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<WebhookEndpoint, DomainError> {
        let mut endpoint = self.visible_endpoint(principal, id).await?;
        endpoint.status = "deleted".into();
        endpoint.version += 1;
        let now = self.now();
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "webhook_endpoint",
            &endpoint.id,
            "deleted",
            Cause::new(
                "webhook_endpoint_deleted",
                "Webhook endpoint deleted",
                principal.actor(),
                now,
            ),
        )));
        changes.push(Write::PutWebhookEndpoint(endpoint.clone()));
        self.store.commit(changes).await?;
        Ok(endpoint)
    }

    /// A new signing secret, shown once; the old ones keep signing until `expires_in`, so
    /// deliveries carry one `v1=` per live secret meanwhile.
    pub async fn rotate_webhook_secret(
        &self,
        principal: &Principal,
        id: &str,
        command: RotateWebhookSecret,
    ) -> Result<Vec<u8>, DomainError> {
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
        let (secret, signing) = self.store_new_secret(&endpoint.id, endpoint.secrets.len()).await?;
        endpoint.secrets.retain(|s| s.expires_at.is_none_or(|at| at > now));
        endpoint.secrets.push(signing);
        endpoint.version += 1;
        let mut changes = Changeset::default();
        changes.push(Write::Audit(AuditEntry::new(
            "webhook_endpoint",
            &endpoint.id,
            "secret_rotated",
            Cause::new(
                "webhook_secret_rotated",
                "Signing secret rotated",
                principal.actor(),
                now,
            ),
        )));
        changes.push(Write::PutWebhookEndpoint(endpoint.clone()));
        self.store.commit(changes).await?;
        Ok(serde_json::to_vec(&EndpointWithSecret {
            endpoint: &endpoint,
            secret: &secret,
        })
        .expect("serializes"))
    }

    // ---- rail reports -----------------------------------------------------------------

    async fn rail_secret(&self) -> Result<Option<String>, DomainError> {
        match &self.rail_secret {
            RailSecret::Configured(secret) => Ok(secret.clone()),
            RailSecret::InSecrets => Ok(self.secrets.secret(RAIL_SECRET).await?),
        }
    }

    /// Applies a rail's report, signed like a webhook with the rail report secret. Each report
    /// id is taken once (remembered far longer than a signature stays fresh): the same report
    /// again is answered as before, with no effect; another report under a used id is refused.
    pub async fn accept_rail_report(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        report: impl FnOnce() -> Result<RailReport, DomainError>,
    ) -> Result<ReportAnswer, DomainError> {
        let secret = self.rail_secret().await?.ok_or_else(|| {
            DomainError::unauthenticated("rail_reports_disabled", "No rail report secret is configured.")
        })?;
        let header = signature_header.ok_or_else(|| {
            DomainError::unauthenticated(
                "missing_signature",
                format!("Sign rail reports with the {} header.", signature::HEADER),
            )
        })?;
        if !signature::verify(header, body, &secret, self.now().unix_timestamp()) {
            return Err(DomainError::unauthenticated(
                "invalid_signature",
                "The signature does not match the body, or is older than 5 minutes.",
            ));
        }
        let report = report()?;
        let report_id = required_text(report.id, "id", 64)?;
        let rail = required_text(report.rail, "rail", 80)?;
        let transaction_id = required_text(report.transaction_id, "transaction_id", 64)?;
        let rail_reference = optional_text(report.rail_reference, "rail_reference", 128)?;
        let code = optional_text(report.code, "code", 64)?;
        if code.as_ref().is_some_and(|c| {
            !c.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        }) {
            return Err(DomainError::invalid(
                "code",
                "invalid_code",
                "code is letters, digits, '_', '-' and '.' (it becomes part of a cause code).",
            ));
        }
        let reason = optional_text(report.reason, "reason", 500)?;
        let state = required_text(report.state, "state", 20)?;
        let claim = IdempotencyClaim {
            scope: format!("{}:rail_reports", self.environment.as_str()),
            key: report_id.clone(),
            fingerprint: idempotency::fingerprint_bytes("POST", "/v1/rail_reports", body),
            now: self.now(),
        };
        match self.store.claim_idempotency_key(&claim).await? {
            ClaimOutcome::Claimed => {}
            ClaimOutcome::Replay(stored) => {
                return Ok(ReportAnswer {
                    body: stored.body,
                    replayed: true,
                })
            }
            ClaimOutcome::InFlight => return Err(DomainError::IdempotencyKeyInUse),
            ClaimOutcome::Mismatch => {
                return Err(DomainError::invalid_state(
                    "rail_report_id_reused",
                    format!("Report {report_id} was already received with another body."),
                ))
            }
        }
        let applied = self
            .apply_report(&report_id, &rail, &transaction_id, rail_reference, &state, code, reason)
            .await;
        let transaction = match applied {
            Ok(transaction) => transaction,
            Err(error) => {
                // Nothing was applied: the connectivity layer may send the corrected report again.
                if let Err(release) = self.store.release_idempotency_key(&claim.scope, &claim.key).await {
                    tracing::warn!(%release, "could not release a rail report id; it frees itself after its claim timeout");
                }
                return Err(error);
            }
        };
        let body = serde_json::to_vec(&transaction).expect("serializes");
        let mut changes = Changeset::default();
        changes.push(Write::CompleteIdempotency {
            scope: claim.scope,
            key: claim.key,
            response: StoredResponse {
                status: 200,
                body: body.clone(),
            },
        });
        self.store.commit(changes).await?;
        Ok(ReportAnswer { body, replayed: false })
    }

    #[allow(clippy::too_many_arguments)]
    async fn apply_report(
        &self,
        report_id: &str,
        rail: &str,
        transaction_id: &str,
        rail_reference: Option<String>,
        state: &str,
        code: Option<String>,
        reason: Option<String>,
    ) -> Result<Transaction, DomainError> {
        let transaction = match IdKind::Transaction.matches(transaction_id) {
            true => self.store.transaction(transaction_id).await?,
            false => None,
        };
        let transaction = transaction
            .filter(|t| t.rail == rail)
            .ok_or_else(|| DomainError::InvalidRequest {
                code: "resource_missing",
                param: Some("transaction_id".into()),
                message: format!("No transaction {transaction_id} on rail {rail}."),
            })?;
        let code = code.unwrap_or_else(|| "unspecified".into());
        let reason = reason.unwrap_or_else(|| "reported by the rail".into());
        let state = match state {
            "confirmed" => RailState::Confirmed {
                rail_reference: rail_reference
                    .or(transaction.rail_reference.clone())
                    .unwrap_or_default(),
            },
            "failed" => RailState::Failed { code, reason },
            "returned" => RailState::Returned { code, reason },
            "pending" => RailState::Pending,
            _ => {
                return Err(DomainError::invalid(
                    "state",
                    "invalid_state",
                    "state is pending, confirmed, failed or returned.",
                ))
            }
        };
        let updated = self
            .apply_rail_state(&transaction.id, Some(transaction.clone()), Ok(state), Some(report_id))
            .await?;
        Ok(match updated {
            Some(t) => t,
            None => self.store.transaction(&transaction.id).await?.unwrap_or(transaction),
        })
    }
}
