//! A statement's booked balances against the ledger: the rail's settlement account in the
//! balance's currency, at the end of the day the balance stands at.

use super::{LineOutcome, ReconciliationLine};
use crate::error::DomainError;
use crate::ids::AccountId;
use crate::ledger::{holder_key, AccountKind};
use crate::money::Currency;
use crate::rail::{BalanceKind, StatementBalance};
use crate::service::Service;
use serde::{Deserialize, Serialize};
use time::Date;

/// One booked balance of the statement, and what the ledger holds for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceCheck {
    pub kind: BalanceKind,
    #[serde(with = "super::day")]
    pub at_end_of: Date,
    pub currency: Currency,
    /// What the statement says the account at the rail held (minor units, negative if
    /// overdrawn).
    pub statement: i64,
    /// What the ledger says it held: the settlement account's posted balance at the end of
    /// that day, as the bank sees it (negated: a payout credits the settlement account as
    /// the money leaves the account at the rail); 0 with no settlement account.
    pub ledger: i64,
    /// The settlement account, if the rail has one in this currency.
    pub account_id: Option<AccountId>,
    pub agrees: bool,
}

impl BalanceCheck {
    fn message(&self, rail: &str) -> String {
        let kind = match self.kind {
            BalanceKind::Opening => "opening",
            BalanceKind::Closing => "closing",
        };
        let account = self
            .account_id
            .as_ref()
            .map_or("no settlement account, so nothing".to_owned(), |id| {
                format!("settlement account {id}")
            });
        format!(
            "The statement's {kind} booked balance at the end of {} is {} {}; the ledger ({account} for {rail}) holds {} {}: {} apart.",
            self.at_end_of,
            self.statement,
            self.currency.code(),
            self.ledger,
            self.currency.code(),
            self.statement - self.ledger
        )
    }
}

impl Service {
    /// Each booked balance the statement gives, checked against the rail's settlement account.
    pub(super) async fn check_balances(
        &self,
        rail: &str,
        balances: &[StatementBalance],
    ) -> Result<Vec<BalanceCheck>, DomainError> {
        let holder = holder_key(AccountKind::Settlement, None, Some(rail));
        let mut checks = Vec::with_capacity(balances.len());
        for balance in balances {
            let account = self.store.account_of(&holder, &balance.currency).await?;
            let posted = match &account {
                Some(account) => self
                    .store
                    .posted_at_end_of(&account.id, balance.at_end_of)
                    .await?
                    .unwrap_or(0),
                None => 0,
            };
            let ledger = -posted;
            checks.push(BalanceCheck {
                kind: balance.kind,
                at_end_of: balance.at_end_of,
                currency: balance.currency.clone(),
                statement: balance.amount,
                ledger,
                account_id: account.map(|a| a.id),
                agrees: ledger == balance.amount,
            });
        }
        Ok(checks)
    }
}

/// A `balance_mismatch` line for each check that does not agree, numbered after `lines`.
pub(super) fn mismatch_lines(checks: &[BalanceCheck], lines: &mut Vec<ReconciliationLine>) {
    for check in checks.iter().filter(|c| !c.agrees) {
        lines.push(ReconciliationLine {
            number: lines.len() as u32 + 1,
            outcome: LineOutcome::BalanceMismatch,
            rail_reference: None,
            statement_transaction_id: None,
            end_to_end_id: None,
            amount: None,
            currency: Some(check.currency.clone()),
            status: None,
            direction: None,
            reversal: false,
            booked_on: Some(check.at_end_of),
            transaction_id: None,
            matched_by: None,
            transaction_amount: None,
            transaction_currency: None,
            transaction_status: None,
            differences: Vec::new(),
            applied: None,
            work_item_id: None,
            batch: None,
            amount_difference: Some(check.statement - check.ledger),
            group: Vec::new(),
            balance: Some(check.clone()),
        });
    }
}

/// What an operator reads on a `balance_mismatch` line's work item.
pub(super) fn mismatch_message(line: &ReconciliationLine, rail: &str) -> Option<String> {
    line.balance.as_ref().map(|check| check.message(rail))
}
