//! Payout limits set by the platform, read by the customer with what they have used, and
//! checked and counted when a payout is approved.

use super::payees::{self, KnownPayee, PayeeReview};
use super::{validate, Counters, LimitCheck, LimitKind, PayoutFacts, PayoutLimit, PayoutLimits, Warning};
use crate::access::{require_platform_admin, Principal};
use crate::cause::{Actor, Cause};
use crate::error::DomainError;
use crate::event::{Event, EventData};
use crate::ids::{CustomerId, EventId};
use crate::ports::{AuditEntry, Changeset, Write};
use crate::service::Service;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `PUT /v1/customers/{id}/payout_limits`: the customer's limits, replacing those set before
/// (an empty list lifts them all).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPayoutLimits {
    pub limits: Option<Vec<PayoutLimit>>,
    /// Absent: payees are not reviewed.
    pub payee_review: Option<PayeeReview>,
    pub reason: Option<String>,
}

/// A currency's limits with what has been approved against them today and this month.
#[derive(Debug, Serialize)]
pub struct LimitUsage {
    #[serde(flatten)]
    pub limit: PayoutLimit,
    pub day: String,
    pub daily_used: i64,
    pub month: String,
    pub monthly_used: i64,
}

/// `GET /v1/customers/{id}/payout_limits`.
#[derive(Debug, Serialize)]
pub struct PayoutLimitsView {
    pub customer_id: CustomerId,
    pub limits: Vec<LimitUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payee_review: Option<PayeeReview>,
    /// 0 while none were ever set.
    pub version: u64,
}

/// The type of the event a limit's warning is.
pub const WARNING_EVENT: &str = "payout_limit.warning";

/// Setting limits races other changes of them: a few tries, then the conflict is answered.
const SET_ATTEMPTS: usize = 3;

impl Service {
    pub async fn set_payout_limits(
        &self,
        principal: &Principal,
        customer_id: &str,
        command: SetPayoutLimits,
    ) -> Result<PayoutLimitsView, DomainError> {
        require_platform_admin(principal)?;
        let limits = command.limits.ok_or_else(|| DomainError::missing("limits"))?;
        let payee_review = command.payee_review;
        validate(&limits, payee_review.as_ref())?;
        let reason = crate::validate::optional_reason(command.reason, "reason", 500)?;
        let customer = self.get_customer(principal, customer_id).await?;
        let (limits, reason) = (&limits, &reason);
        let customer = &customer;
        let busy = || Err(DomainError::conflict("The limits are changing too fast; retry."));
        let saved = self
            .retry_on_conflict(SET_ATTEMPTS, busy, move || async move {
                let current = self.store.payout_limits(&customer.id).await?;
                let version = current.as_ref().map_or(0, |c| c.version) + 1;
                let saved = PayoutLimits {
                    customer_id: customer.id.clone(),
                    limits: limits.clone(),
                    payee_review,
                    updated_at: self.now(),
                    version,
                };
                let mut message = format!("Payout limits of {} set as version {version}", customer.id);
                if let Some(reason) = reason {
                    message = format!("{message}. Reason: {reason}");
                }
                let cause = Cause::new("payout_limits_set", message, principal.actor(), saved.updated_at);
                let mut changes = Changeset::default();
                changes.push(Write::Audit(
                    AuditEntry::new("customer", &customer.id, "payout_limits_set", cause)
                        .with_details(serde_json::json!({"limits": saved.limits, "payee_review": saved.payee_review})),
                ));
                changes.push(Write::PutPayoutLimits(saved.clone()));
                Ok((saved, changes))
            })
            .await?;
        self.limits_view(customer.id.clone(), Some(saved)).await
    }

    /// A customer's limits and their use, to the platform or the customer's own keys.
    pub async fn payout_limits(
        &self,
        principal: &Principal,
        customer_id: &str,
    ) -> Result<PayoutLimitsView, DomainError> {
        let customer = self.get_customer(principal, customer_id).await?;
        let saved = self.store.payout_limits(&customer.id).await?;
        self.limits_view(customer.id, saved).await
    }

    /// The limits as saved, each with today's and this month's counters (read in one batch).
    async fn limits_view(
        &self,
        customer_id: CustomerId,
        saved: Option<PayoutLimits>,
    ) -> Result<PayoutLimitsView, DomainError> {
        let now = self.now();
        let (limits, payee_review, version) = match saved {
            Some(saved) => (saved.limits, saved.payee_review, saved.version),
            None => (vec![], None, 0),
        };
        let counters: Vec<Counters> = limits
            .iter()
            .map(|limit| Counters::at(&customer_id, &limit.currency, now))
            .collect();
        let keys: Vec<String> = counters.iter().flat_map(|c| [c.daily(), c.monthly()]).collect();
        let used = match keys.is_empty() {
            true => vec![],
            false => self.store.limit_counters(&keys).await?,
        };
        let shown = limits
            .iter()
            .zip(&counters)
            .zip(used.chunks(2))
            .map(|((limit, counters), used)| LimitUsage {
                day: counters.day().to_owned(),
                daily_used: used[0],
                month: counters.month().to_owned(),
                monthly_used: used[1],
                limit: limit.clone(),
            })
            .collect();
        Ok(PayoutLimitsView {
            customer_id,
            limits: shown,
            payee_review,
            version,
        })
    }

    /// What approving the payout `facts` describes would do to its customer's limits; nothing
    /// if its currency has none.
    pub(crate) async fn payout_limit_check(&self, facts: &PayoutFacts<'_>) -> Result<Option<LimitCheck>, DomainError> {
        let saved = self.store.payout_limits(facts.customer_id).await?;
        self.payout_limit_check_of(saved.as_ref(), facts).await
    }

    /// [`Self::payout_limit_check`] against the customer's limits as already read.
    pub(crate) async fn payout_limit_check_of(
        &self,
        saved: Option<&PayoutLimits>,
        facts: &PayoutFacts<'_>,
    ) -> Result<Option<LimitCheck>, DomainError> {
        let Some(saved) = saved else {
            return Ok(None);
        };
        let limit = match (saved.of(facts.currency), saved.payee_review) {
            (Some(limit), _) => limit.clone(),
            // Payees reviewed in a currency without limits.
            (None, Some(_)) => PayoutLimit::none(facts.currency),
            (None, None) => return Ok(None),
        };
        let keys: Vec<String> = facts.counted(&limit).into_iter().map(|(key, _, _)| key).collect();
        let values = match keys.is_empty() {
            true => vec![],
            false => self.store.limit_counters(&keys).await?,
        };
        let used: BTreeMap<String, i64> = keys.into_iter().zip(values).collect();
        let mut check = LimitCheck::of(&limit, facts, &used);
        if let Some(review) = saved.payee_review {
            let mut paid: Vec<(String, String)> = vec![];
            for (payee, destination) in &facts.payees {
                match paid.iter_mut().find(|(known, _)| known == payee) {
                    Some(seen) => seen.1 = destination.clone(),
                    None => paid.push((payee.clone(), destination.clone())),
                }
            }
            let names: Vec<String> = paid.iter().map(|(payee, _)| payee.clone()).collect();
            let known = self.store.known_payees(facts.customer_id, &names).await?;
            check.payee_findings = payees::review(&review, &paid, &known);
            check.payee_review = Some(review);
            check.payees = paid
                .into_iter()
                .zip(known)
                .map(|((payee, destination), known)| KnownPayee {
                    customer_id: facts.customer_id.clone(),
                    payee,
                    destination,
                    first_paid_at: known.map_or(facts.at, |known| known.first_paid_at),
                    last_paid_at: facts.at,
                })
                .collect();
        }
        Ok(Some(check))
    }

    /// Counts an approved payout against its limits in `changes` (each counter written only if
    /// it still holds what the check read), with an event for each share of a limit reached.
    pub(crate) fn count_against_limits(&self, changes: &mut Changeset, check: &LimitCheck, customer_id: &CustomerId) {
        for used in &check.uses {
            changes.push(Write::UseLimit(used.clone()));
        }
        for warning in &check.warnings {
            changes.push(Write::Event(self.limit_warning(warning, &check.currency, customer_id)));
        }
        for payee in &check.payees {
            changes.push(Write::RememberPayee(payee.clone()));
        }
    }

    fn limit_warning(&self, warning: &Warning, currency: &crate::money::Currency, customer_id: &CustomerId) -> Event {
        #[derive(Serialize)]
        struct Data<'a> {
            customer_id: &'a CustomerId,
            currency: &'a str,
            limit: LimitKind,
            percent: u8,
            ceiling: i64,
            used: i64,
            counter: &'a str,
            cause: Cause,
        }
        let at = self.now();
        let cause = Cause::new(
            "payout_limit_warning",
            format!(
                "{} % of the {} payout limit of {} {} used ({} approved)",
                warning.percent,
                warning.limit.as_str(),
                warning.ceiling,
                currency.code(),
                warning.used
            ),
            Actor::system(),
            at,
        );
        let data = EventData::of(&Data {
            customer_id,
            currency: currency.code(),
            limit: warning.limit,
            percent: warning.percent,
            ceiling: warning.ceiling,
            used: warning.used,
            counter: &warning.counter,
            cause,
        });
        Event::new(
            EventId::new(&*self.ids),
            WARNING_EVENT.to_owned(),
            customer_id,
            self.environment,
            at,
            data,
        )
    }
}
