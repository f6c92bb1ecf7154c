//! Signed rail reports: a rail's connectivity layer tells the outcome of a transaction.

use crate::error::DomainError;
use crate::idempotency::{self, IdempotencyClaim, KeyHold, Once, StoredResponse};
use crate::ids::TransactionId;
use crate::ports::Changeset;
use crate::rail::RailState;
use crate::service::Service;
use crate::transactions::{Transaction, TransactionStatus};
use crate::validate::{optional_text, required_text};
use crate::webhooks::signature;
use serde::Deserialize;

/// Name of the secret shared with the connectivity layer: it signs `POST /v1/rail_reports`
/// and the HTTP rail adapter's requests.
pub const RAIL_SECRET: &str = "rail-secret";
/// Where the rail secret (shared with the connectivity layer) comes from. It is never written
/// to the store: local mode takes it from its configuration, a stack from Secrets Manager.
pub enum RailSecret {
    Configured(Option<String>),
    /// Read through the secrets port under [`crate::transactions::RAIL_SECRET`].
    InSecrets,
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

impl Service {
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
    /// The answer is the transaction as it now stands, made into the stored response by
    /// `render`.
    pub async fn accept_rail_report(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        report: impl FnOnce() -> Result<RailReport, DomainError>,
        render: impl Fn(&Transaction) -> StoredResponse + Send + 'static,
    ) -> Result<Once<Transaction>, DomainError> {
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
        let reused = DomainError::taken(
            "id",
            "rail_report_id_reused",
            format!("Report {report_id} was already received with another body."),
        );
        self.once(claim, KeyHold::ClaimFirst, render, reused, |ticket| async move {
            let transaction = self
                .apply_report(&report_id, &rail, &transaction_id, rail_reference, &state, code, reason)
                .await?;
            let mut changes = Changeset::default();
            changes.push(ticket.complete(&transaction));
            self.store.commit(changes).await?;
            Ok(transaction)
        })
        .await
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
        let transaction = match TransactionId::parse(transaction_id) {
            Some(id) => self.store.transaction(&id).await?,
            None => None,
        };
        let transaction = transaction.filter(|t| t.rail == rail).ok_or_else(|| {
            DomainError::missing_reference(
                "transaction_id",
                format!("No transaction {transaction_id} on rail {rail}."),
            )
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
        check_possible(&transaction, state_name(&state))?;
        let updated = self
            .apply_rail_state(
                &transaction.id,
                Some(transaction.clone()),
                Ok(state),
                super::submission::RailSource::Report(report_id),
            )
            .await?;
        Ok(match updated {
            Some(t) => t,
            None => self.store.transaction(&transaction.id).await?.unwrap_or(transaction),
        })
    }
}

fn state_name(state: &RailState) -> &'static str {
    match state {
        RailState::Confirmed { .. } => "confirmed",
        RailState::Failed { .. } => "failed",
        RailState::Returned { .. } => "returned",
        RailState::Pending | RailState::NotFound => "pending",
    }
}

/// Refuses a report no rail could truthfully make of `transaction` as it stands: an outcome for
/// money never sent or already settled otherwise, a return of money never confirmed. A report
/// of what is already so (the same outcome again) changes nothing and is answered as such, and
/// so is `pending`, which tells no outcome (a late one may arrive after the outcome).
fn check_possible(transaction: &Transaction, reported: &str) -> Result<(), DomainError> {
    use TransactionStatus::*;
    let possible = matches!(
        (reported, transaction.status),
        ("pending", _)
            | ("confirmed" | "failed", Submitted | Unknown)
            | ("returned", Confirmed)
            | ("confirmed", Confirmed)
            | ("failed", Failed)
            | ("returned", Returned)
    );
    if possible {
        return Ok(());
    }
    Err(DomainError::invalid_state(
        "report_contradicts_transaction",
        format!(
            "Transaction {} is {}; a rail cannot report it {reported}. Nothing was changed.",
            transaction.id,
            transaction.status.as_str()
        ),
    ))
}
