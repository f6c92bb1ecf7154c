//! Reports: a period's operations, transactions or movements, page by page, with
//! totals per status and currency. Ids sort by creation time, so a period is a range of ids: a
//! report reads what was made in it and nothing else, whatever the history holds.

use crate::access::{Principal, Scope};
use crate::error::DomainError;
use crate::ids::{CustomerId, IdKind, MovementId, OperationId};
use crate::ledger::{AccountQuery, Movement};
use crate::operations::{Operation, OperationQuery, OperationStatus};
use crate::service::{customer_scope, Service};
use crate::transactions::Transaction;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// Operations read per page of a report.
pub const REPORT_PAGE: usize = 100;

/// A period `[from, to)` and whose: a customer's (or every customer's for the platform).
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

/// One page of a report, and the id the next one starts below, if there is one.
#[derive(Debug)]
pub struct ReportPage<T> {
    pub data: Vec<T>,
    pub next: Option<String>,
}

impl<T> Default for ReportPage<T> {
    fn default() -> Self {
        ReportPage {
            data: vec![],
            next: None,
        }
    }
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
    pub fn add(&mut self, status: &str, currency: &str, amount: i64) {
        let total = self.0.entry((status.to_owned(), currency.to_owned())).or_default();
        total.count += 1;
        total.amount = total.amount.saturating_add(amount);
    }
}

impl Service {
    /// A page of the operations report, newest first: the caller's (or the customer's it
    /// may see) operations made in the period before `before` (an id of the previous page's
    /// last operation), or from the period's end. `next` is set unless the period has no more.
    pub async fn report_page(
        &self,
        principal: &Principal,
        query: &ReportQuery,
        before: Option<&str>,
    ) -> Result<ReportPage<Operation>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let Some(customer_id) = customer_scope(principal, query.customer_id.clone()) else {
            return Ok(ReportPage::default());
        };
        let end = first_id_at(IdKind::Operation, query.to);
        let start = first_id_at(IdKind::Operation, query.from);
        let read = self
            .store
            .operations(&OperationQuery {
                customer_id,
                starting_after: Some(OperationId::from(before.unwrap_or(&end))),
                limit: REPORT_PAGE,
                ..Default::default()
            })
            .await?
            // No filter here but the customer's, a key: the store read them all.
            .items;
        let full = read.len() == REPORT_PAGE;
        let in_period: Vec<Operation> = read
            .into_iter()
            .take_while(|op| op.id.as_str() >= start.as_str())
            .collect();
        let next = (full && in_period.len() == REPORT_PAGE).then(|| in_period[REPORT_PAGE - 1].id.to_string());
        Ok(ReportPage {
            data: in_period
                .into_iter()
                .filter(|op| op.created_at >= query.from && op.created_at < query.to)
                .collect(),
            next,
        })
    }

    /// A page of the transactions report: the transactions of the operations made in the
    /// period (a transaction's id is its item's, made with its operation), a page of
    /// operations at a time. Operations that made none (undecided, rejected, cancelled) are
    /// not read for any.
    pub async fn transactions_report_page(
        &self,
        principal: &Principal,
        query: &ReportQuery,
        before: Option<&str>,
    ) -> Result<ReportPage<Transaction>, DomainError> {
        let operations = self.report_page(principal, query, before).await?;
        let mut data = vec![];
        for operation in operations.data.iter().filter(|op| {
            !matches!(
                op.status,
                OperationStatus::PendingApproval
                    | OperationStatus::Rejected
                    | OperationStatus::Cancelled
                    | OperationStatus::Expired
            )
        }) {
            // In the order of their ids, as the store gives them.
            data.extend(self.store.transactions_of_operation(operation).await?);
        }
        Ok(ReportPage {
            data,
            next: operations.next,
        })
    }

    /// A page of the movements report: the movements on a customer's accounts whose ids fall
    /// in the period (an item's movement has its item's id, made with its operation; an
    /// adjustment its own), newest first, merged over the accounts a page at a time.
    pub async fn movements_report_page(
        &self,
        principal: &Principal,
        query: &ReportQuery,
        before: Option<&str>,
    ) -> Result<ReportPage<Movement>, DomainError> {
        principal.require(Scope::OperationsRead)?;
        let customer_id = match customer_scope(principal, query.customer_id.clone()) {
            None => return Ok(ReportPage::default()),
            Some(None) => return Err(DomainError::missing("customer_id")),
            Some(Some(customer_id)) => customer_id,
        };
        let accounts = self
            .store
            .accounts(&AccountQuery {
                customer_id: Some(customer_id),
                limit: 100,
                ..AccountQuery::default()
            })
            .await?;
        let end = first_id_at(IdKind::Movement, query.to);
        let start = first_id_at(IdKind::Movement, query.from);
        let cursor = MovementId::from(before.unwrap_or(&end));
        let mut merged = BTreeMap::new();
        for account in &accounts {
            for movement in self.store.movements_of(&account.id, Some(&cursor), REPORT_PAGE).await? {
                if movement.id.as_str() >= start.as_str() {
                    merged.insert(movement.id.to_string(), movement);
                }
            }
        }
        // Each account gave its newest below the cursor, so the newest of them all are right.
        let data: Vec<Movement> = merged.into_values().rev().take(REPORT_PAGE).collect();
        let next = (data.len() == REPORT_PAGE).then(|| data[REPORT_PAGE - 1].id.to_string());
        Ok(ReportPage { data, next })
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
