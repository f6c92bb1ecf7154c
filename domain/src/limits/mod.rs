//! Payout limits: per customer and currency, a daily and a monthly sum, a per-operation
//! maximum and a per-beneficiary daily count. They are checked when a payout is approved, and
//! what it uses is counted in the changeset that approves it: each count is written only if it
//! still holds what the check read, so two approvals racing cannot both pass a limit (the
//! loser reads again and is checked against the winner's count).
//!
//! Days and months are UTC. What an approved payout used stays used if it later fails or is
//! cancelled: a limit bounds what was let through, as a bank's daily limit does.

mod payees;
mod use_cases;

pub use payees::{KnownPayee, PayeeFinding, PayeeReview};
pub use use_cases::{LimitUsage, PayoutLimitsView, SetPayoutLimits, WARNING_EVENT};

use crate::access::Role;
use crate::error::DomainError;
use crate::ids::CustomerId;
use crate::money::Currency;
use crate::ports::StoreError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// What happens to a payout over a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum OverLimit {
    /// Rejected, with the limit it would pass as its cause.
    Refuse,
    /// Held for one more approval, by a user holding `role`, after the workflow's own.
    Escalate { role: Role },
}

/// One currency's payout limits (each optional; at least one set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayoutLimit {
    pub currency: Currency,
    /// The most approved in a UTC day, in minor units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<i64>,
    /// The most approved in a UTC month, in minor units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly: Option<i64>,
    /// The most one operation may pay out, in minor units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_operation: Option<i64>,
    /// The most items paid to one beneficiary in a UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_beneficiary_daily_count: Option<i64>,
    pub over_limit: OverLimit,
}

impl PayoutLimit {
    /// No limit in `currency`: what a payout is checked against when only its payees are.
    pub fn none(currency: &Currency) -> PayoutLimit {
        PayoutLimit {
            currency: currency.clone(),
            daily: None,
            monthly: None,
            per_operation: None,
            per_beneficiary_daily_count: None,
            over_limit: OverLimit::Refuse,
        }
    }
}

/// A customer's payout limits, one per currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayoutLimits {
    pub customer_id: CustomerId,
    pub limits: Vec<PayoutLimit>,
    /// Whether payouts to new payees and changed accounts wait for one more approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payee_review: Option<PayeeReview>,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// 1 when first set, one more each change.
    pub version: u64,
}

impl PayoutLimits {
    pub fn of(&self, currency: &Currency) -> Option<&PayoutLimit> {
        self.limits.iter().find(|limit| &limit.currency == currency)
    }
}

/// Which limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    PerOperation,
    Daily,
    Monthly,
    PerBeneficiaryDailyCount,
    /// Not a limit: a beneficiary paid for the first time (see [`PayeeReview`]).
    NewPayee,
    /// Not a limit: a beneficiary paid at another account than last time.
    ChangedAccount,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::PerOperation => "per_operation",
            LimitKind::Daily => "daily",
            LimitKind::Monthly => "monthly",
            LimitKind::PerBeneficiaryDailyCount => "per_beneficiary_daily_count",
            LimitKind::NewPayee => "new_payee",
            LimitKind::ChangedAccount => "changed_account",
        }
    }
}

/// A counter's new value, written only if it still holds `before` (a counter never written
/// holds 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitUse {
    pub key: String,
    pub before: i64,
    pub after: i64,
}

/// The counters of a customer's currency: `cus_…:CLP:d2026-12-07`, `cus_…:CLP:m2026-12`, and a
/// beneficiary's day `cus_…:CLP:d2026-12-07:b:<id type>:<id>`.
pub struct Counters<'a> {
    customer_id: &'a CustomerId,
    currency: &'a Currency,
    day: String,
    month: String,
}

impl<'a> Counters<'a> {
    pub fn at(customer_id: &'a CustomerId, currency: &'a Currency, at: OffsetDateTime) -> Counters<'a> {
        let at = at.to_offset(time::UtcOffset::UTC);
        Counters {
            customer_id,
            currency,
            day: format!("{:04}-{:02}-{:02}", at.year(), u8::from(at.month()), at.day()),
            month: format!("{:04}-{:02}", at.year(), u8::from(at.month())),
        }
    }

    fn prefix(&self) -> String {
        format!("{}:{}", self.customer_id, self.currency.code())
    }

    pub fn daily(&self) -> String {
        format!("{}:d{}", self.prefix(), self.day)
    }

    pub fn monthly(&self) -> String {
        format!("{}:m{}", self.prefix(), self.month)
    }

    pub fn beneficiary(&self, beneficiary: &str) -> String {
        format!("{}:b:{beneficiary}", self.daily())
    }

    pub fn day(&self) -> &str {
        &self.day
    }

    pub fn month(&self) -> &str {
        &self.month
    }
}

/// What a payout asks of its limits.
pub struct PayoutFacts<'a> {
    pub customer_id: &'a CustomerId,
    pub currency: &'a Currency,
    pub total_amount: i64,
    /// One per item: who it pays (`<id type>:<id>`) and where (`<rail>:<account>`).
    pub payees: Vec<(String, String)>,
    pub at: OffsetDateTime,
}

impl PayoutFacts<'_> {
    /// The counters the payout moves, with what it adds to each.
    pub fn counted(&self, limit: &PayoutLimit) -> Vec<(String, LimitKind, i64)> {
        let counters = Counters::at(self.customer_id, self.currency, self.at);
        let mut counted = vec![];
        if limit.daily.is_some() {
            counted.push((counters.daily(), LimitKind::Daily, self.total_amount));
        }
        if limit.monthly.is_some() {
            counted.push((counters.monthly(), LimitKind::Monthly, self.total_amount));
        }
        if limit.per_beneficiary_daily_count.is_some() {
            let mut per_beneficiary: BTreeMap<&str, i64> = BTreeMap::new();
            for (beneficiary, _) in &self.payees {
                *per_beneficiary.entry(beneficiary).or_default() += 1;
            }
            for (beneficiary, count) in per_beneficiary {
                counted.push((
                    counters.beneficiary(beneficiary),
                    LimitKind::PerBeneficiaryDailyCount,
                    count,
                ));
            }
        }
        counted
    }
}

/// A limit the payout would pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breach {
    pub limit: LimitKind,
    pub ceiling: i64,
    /// What was used before this payout.
    pub used: i64,
    /// What this payout adds.
    pub requested: i64,
}

impl Breach {
    pub fn message(&self, currency: &Currency) -> String {
        match self.limit {
            LimitKind::PerOperation => format!(
                "{} {} is over the per-operation limit of {}",
                self.requested,
                currency.code(),
                self.ceiling
            ),
            LimitKind::PerBeneficiaryDailyCount => format!(
                "{} more payment(s) to one beneficiary today, after {}, pass the daily count of {}",
                self.requested, self.used, self.ceiling
            ),
            kind => format!(
                "{} {} more, after {} approved, passes the {} limit of {}",
                self.requested,
                currency.code(),
                self.used,
                kind.as_str(),
                self.ceiling
            ),
        }
    }
}

/// The shares of a sum limit at which a warning is raised.
pub const WARNING_PERCENTS: [u8; 3] = [50, 80, 100];

/// A sum limit's use reaching one of [`WARNING_PERCENTS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub limit: LimitKind,
    pub percent: u8,
    pub ceiling: i64,
    pub used: i64,
    /// The counter (its day or month in it): one warning per counter and share.
    pub counter: String,
}

/// What approving a payout would do to its customer's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitCheck {
    pub currency: Currency,
    pub over_limit: OverLimit,
    /// The limits it would pass, the first the strictest to report.
    pub breaches: Vec<Breach>,
    /// The counts to write if it is approved.
    pub uses: Vec<LimitUse>,
    pub warnings: Vec<Warning>,
    /// The customer's payee review, if on; what it found; and the payees to remember if the
    /// payout is approved.
    pub payee_review: Option<PayeeReview>,
    pub payee_findings: Vec<PayeeFinding>,
    pub payees: Vec<KnownPayee>,
}

impl LimitCheck {
    /// Checks `facts` against `limit`, the counters read as `used` (a counter missing is 0).
    pub fn of(limit: &PayoutLimit, facts: &PayoutFacts<'_>, used: &BTreeMap<String, i64>) -> LimitCheck {
        let mut breaches = vec![];
        if let Some(ceiling) = limit.per_operation.filter(|ceiling| facts.total_amount > *ceiling) {
            breaches.push(Breach {
                limit: LimitKind::PerOperation,
                ceiling,
                used: 0,
                requested: facts.total_amount,
            });
        }
        let mut uses = vec![];
        let mut warnings = vec![];
        for (key, kind, adds) in facts.counted(limit) {
            let before = used.get(&key).copied().unwrap_or(0);
            let after = before.saturating_add(adds);
            let ceiling = match kind {
                LimitKind::Daily => limit.daily,
                LimitKind::Monthly => limit.monthly,
                _ => limit.per_beneficiary_daily_count,
            }
            .expect("only a limit set is counted");
            if after > ceiling && !breaches.iter().any(|b: &Breach| b.limit == kind) {
                breaches.push(Breach {
                    limit: kind,
                    ceiling,
                    used: before,
                    requested: adds,
                });
            }
            if kind != LimitKind::PerBeneficiaryDailyCount {
                for percent in WARNING_PERCENTS {
                    let mark = (ceiling.saturating_mul(percent.into()) + 99) / 100;
                    if before < mark && after >= mark {
                        warnings.push(Warning {
                            limit: kind,
                            percent,
                            ceiling,
                            used: after,
                            counter: key.clone(),
                        });
                    }
                }
            }
            uses.push(LimitUse { key, before, after });
        }
        LimitCheck {
            currency: facts.currency.clone(),
            over_limit: limit.over_limit,
            breaches,
            uses,
            warnings,
            payee_review: None,
            payee_findings: vec![],
            payees: vec![],
        }
    }

    /// Within its limits, and nothing its payee review asks more for.
    pub fn within(&self) -> bool {
        self.breaches.is_empty() && self.payee_findings.is_empty()
    }

    /// What the payout needs if it is not within: what to do, what decided it, and why (every
    /// limit it passes and every payee finding).
    pub fn verdict(&self) -> Option<(OverLimit, LimitKind, String)> {
        let reasons: Vec<String> = self
            .breaches
            .iter()
            .map(|breach| breach.message(&self.currency))
            .chain(self.payee_findings.iter().map(|finding| finding.message.clone()))
            .collect();
        let reason = reasons.join("; ");
        match (self.breaches.first(), self.payee_findings.first(), self.payee_review) {
            (Some(breach), _, _) => Some((self.over_limit, breach.limit, reason)),
            (None, Some(finding), Some(review)) => {
                Some((OverLimit::Escalate { role: review.role }, finding.kind, reason))
            }
            _ => None,
        }
    }
}

/// An operation held over a limit for one more approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHold {
    pub limit: LimitKind,
    /// Who may give the approval it waits for.
    pub role: Role,
    pub reason: String,
}

/// The most beneficiaries one payout may pay while they are counted one by one (a
/// per-beneficiary count) or reviewed: each is a write in the store transaction that approves
/// it (DynamoDB takes 100 writes, the payout's holds among them).
pub const MAX_REVIEWED_PAYEES: usize = 20;

impl PayoutLimits {
    /// Refuses a payout paying more beneficiaries than its customer's limits can count or
    /// review in the transaction that approves it.
    pub fn check_payee_count(&self, facts: &PayoutFacts<'_>) -> Result<(), DomainError> {
        let counted = self
            .of(facts.currency)
            .is_some_and(|limit| limit.per_beneficiary_daily_count.is_some());
        if !counted && self.payee_review.is_none() {
            return Ok(());
        }
        let distinct: std::collections::BTreeSet<&str> = facts.payees.iter().map(|(payee, _)| payee.as_str()).collect();
        if distinct.len() > MAX_REVIEWED_PAYEES {
            return Err(DomainError::invalid(
                "items",
                "too_many_beneficiaries",
                format!(
                    "This customer's payouts in {} are counted or reviewed per beneficiary: one operation pays at most {MAX_REVIEWED_PAYEES} beneficiaries ({} here).",
                    facts.currency.code(),
                    distinct.len()
                ),
            ));
        }
        Ok(())
    }
}

/// The largest limit: a thousand times the largest item, so a month's sum never overflows.
pub const MAX_LIMIT: i64 = 999_999_999_999_999;

/// Refuses an escalation or review to a role that cannot approve.
fn approving(role: Role, param: String) -> Result<(), DomainError> {
    match role {
        Role::Approver | Role::Admin | Role::Treasury => Ok(()),
        Role::Viewer | Role::Maker => Err(DomainError::invalid(
            param,
            "role_cannot_approve",
            "The approval goes to a role that approves: approver or admin.",
        )),
    }
}

/// Validates a customer's limits as set: one per currency, each limit positive, at least one;
/// escalations and the payee review to roles that approve.
pub fn validate(limits: &[PayoutLimit], payee_review: Option<&PayeeReview>) -> Result<(), DomainError> {
    if let Some(review) = payee_review {
        approving(review.role, "payee_review.role".into())?;
    }
    if limits.len() > 50 {
        return Err(DomainError::invalid("limits", "too_many", "At most 50 currencies."));
    }
    for (at, limit) in limits.iter().enumerate() {
        if limits[..at].iter().any(|other| other.currency == limit.currency) {
            return Err(DomainError::invalid(
                format!("limits[{at}].currency"),
                "duplicate_currency",
                format!("{} has limits already.", limit.currency.code()),
            ));
        }
        let set = [
            ("daily", limit.daily),
            ("monthly", limit.monthly),
            ("per_operation", limit.per_operation),
            ("per_beneficiary_daily_count", limit.per_beneficiary_daily_count),
        ];
        if set.iter().all(|(_, value)| value.is_none()) {
            return Err(DomainError::invalid(
                format!("limits[{at}]"),
                "no_limit",
                "Set at least one of daily, monthly, per_operation and per_beneficiary_daily_count.",
            ));
        }
        for (name, value) in set {
            if value.is_some_and(|value| !(1..=MAX_LIMIT).contains(&value)) {
                return Err(DomainError::invalid(
                    format!("limits[{at}].{name}"),
                    "out_of_range",
                    format!("Between 1 and {MAX_LIMIT}."),
                ));
            }
        }
        if let OverLimit::Escalate { role } = limit.over_limit {
            approving(role, format!("limits[{at}].over_limit.role"))?;
        }
    }
    Ok(())
}

/// The store's reads for limits.
#[async_trait::async_trait]
pub trait LimitStore: Send + Sync {
    async fn payout_limits(&self, customer_id: &CustomerId) -> Result<Option<PayoutLimits>, StoreError>;
    /// Each counter's value, 0 for one never written, in the order asked.
    async fn limit_counters(&self, keys: &[String]) -> Result<Vec<i64>, StoreError>;
    /// What the customer knows of each payee, in the order asked.
    async fn known_payees(
        &self,
        customer_id: &CustomerId,
        payees: &[String],
    ) -> Result<Vec<Option<KnownPayee>>, StoreError>;
}

#[cfg(test)]
mod tests;
