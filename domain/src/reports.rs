//! Reports (DESIGN §8.4): a period's operations, page by page, with totals per status and
//! currency. Ids sort by creation time, so a period is a range of ids: a report reads the
//! operations made in it and no others, whatever the history holds.

use crate::access::{Principal, Scope};
use crate::error::DomainError;
use crate::ids::{CustomerId, IdKind, OperationId};
use crate::operations::{Operation, OperationQuery};
use crate::service::{customer_scope, Service};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// Operations read per page of a report.
pub const REPORT_PAGE: usize = 100;

/// The operations made in `[from, to)`, a customer's (or every customer's for the platform).
#[derive(Debug, Clone)]
pub struct ReportQuery {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    pub customer_id: Option<CustomerId>,
}

impl ReportQuery {
    pub fn new(from: OffsetDateTime, to: OffsetDateTime, customer_id: Option<CustomerId>) -> Result<Self, DomainError> {
        if to <= from {
            return Err(DomainError::invalid("to", "invalid_period", "to must be after from."));
        }
        Ok(ReportQuery { from, to, customer_id })
    }
}

/// The smallest id of `kind` made at `at` (ULIDs start with their millisecond).
fn first_id_at(kind: IdKind, at: OffsetDateTime) -> String {
    let millis = (at.unix_timestamp_nanos() / 1_000_000).clamp(0, (1 << 48) - 1) as u64;
    let ulid = ulid::Ulid::from_parts(millis, 0);
    format!("{}_{}", kind.prefix(), ulid.to_string().to_ascii_lowercase())
}

/// One page of a report, and where the next one starts, if there is one.
#[derive(Debug, Default)]
pub struct ReportPage {
    pub data: Vec<Operation>,
    pub next: Option<OperationId>,
}

/// Count and amount of one status in one currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Total {
    pub count: u64,
    pub amount: i64,
}

/// Totals per (status, currency), as the rows go by.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals(pub BTreeMap<(String, String), Total>);

impl Totals {
    pub fn add(&mut self, operation: &Operation) {
        let total = self
            .0
            .entry((
                operation.status.as_str().to_owned(),
                operation.currency.code().to_owned(),
            ))
            .or_default();
        total.count += 1;
        total.amount = total.amount.saturating_add(operation.total_amount);
    }
}

impl Service {
    /// One page of a report, newest first: the operations made in the period before
    /// `before` (an id of the previous page's last operation), or from the period's end.
    pub async fn report_page(
        &self,
        principal: &Principal,
        query: &ReportQuery,
        before: Option<&OperationId>,
    ) -> Result<ReportPage, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.clone()) else {
            return Ok(ReportPage::default());
        };
        let end = OperationId::from(first_id_at(IdKind::Operation, query.to).as_str());
        let start = first_id_at(IdKind::Operation, query.from);
        let read = self
            .store
            .operations(&OperationQuery {
                customer_id,
                starting_after: Some(before.cloned().unwrap_or(end)),
                limit: REPORT_PAGE,
                ..Default::default()
            })
            .await?;
        let full = read.len() == REPORT_PAGE;
        let in_period: Vec<Operation> = read
            .into_iter()
            .take_while(|op| op.id.as_str() >= start.as_str())
            .collect();
        let next = (full && in_period.len() == REPORT_PAGE).then(|| in_period[REPORT_PAGE - 1].id.clone());
        Ok(ReportPage {
            data: in_period
                .into_iter()
                .filter(|op| op.created_at >= query.from && op.created_at < query.to)
                .collect(),
            next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdGenerator;

    #[test]
    fn a_period_is_a_range_of_ids() {
        let now = OffsetDateTime::now_utc();
        let made = crate::ids::UlidGenerator::default().new_id(IdKind::Operation);
        assert!(first_id_at(IdKind::Operation, now - time::Duration::SECOND) < made);
        assert!(first_id_at(IdKind::Operation, now + time::Duration::SECOND) > made);
        assert!(first_id_at(IdKind::Operation, now).starts_with("op_"));
    }
}
