//! Matching a statement's lines to transactions: by the rail's reference, then by our
//! transaction id, then by amount, currency and day. Pure: the use case reads the
//! transactions, this decides.

use super::{Difference, LineOutcome, MatchedBy, ReconciliationLine};
use crate::rail::{Period, StatementLine, StatementStatus};
use crate::transactions::{Transaction, TransactionStatus};
use std::collections::HashMap;
use time::{Date, Duration};

/// How far a line's booking day may be from the day its transaction was confirmed here for an
/// amount-and-currency match.
pub const DATE_WINDOW_DAYS: i64 = 2;

fn agrees(said: StatementStatus, held: TransactionStatus) -> bool {
    matches!(
        (said, held),
        (StatementStatus::Confirmed, TransactionStatus::Confirmed)
            | (StatementStatus::Failed, TransactionStatus::Failed)
            | (StatementStatus::Returned, TransactionStatus::Returned)
    )
}

fn confirmed_on(transaction: &Transaction) -> Option<Date> {
    transaction.confirmed_at.map(|at| at.date())
}

/// Each line's outcome against `known` (the rail's transactions the statement may speak of),
/// then one `missing` line per transaction confirmed in `period` that no line matched.
pub fn match_statement(lines: &[StatementLine], known: &[Transaction], period: Period) -> Vec<ReconciliationLine> {
    let by_reference: HashMap<&str, usize> = known
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.rail_reference.as_deref().map(|r| (r, i)))
        .collect();
    let by_id: HashMap<&str, usize> = known.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut by_amount: HashMap<(&str, i64), Vec<usize>> = HashMap::new();
    for (i, transaction) in known.iter().enumerate() {
        if transaction.confirmed_at.is_some() {
            by_amount
                .entry((transaction.currency.code(), transaction.amount.minor_units()))
                .or_default()
                .push(i);
        }
    }
    let mut claimed = vec![false; known.len()];
    let mut reconciled = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let found = by_reference
            .get(line.rail_reference.as_str())
            .map(|&i| (i, MatchedBy::RailReference))
            .or_else(|| {
                let id = line.transaction_id.as_ref()?;
                by_id.get(id.as_str()).map(|&i| (i, MatchedBy::TransactionId))
            })
            .or_else(|| {
                // The closest unclaimed confirmation of the same money within the window.
                let candidates = by_amount.get(&(line.currency.code(), line.amount.minor_units()))?;
                candidates
                    .iter()
                    .filter(|&&i| !claimed[i])
                    .filter_map(|&i| {
                        let day = confirmed_on(&known[i])?;
                        let distance = match line.booked_on {
                            Some(booked) => (day - booked).whole_days().abs(),
                            None if period.contains(day) => 0,
                            None => return None,
                        };
                        (distance <= DATE_WINDOW_DAYS).then_some((distance, i))
                    })
                    .min()
                    .map(|(_, i)| (i, MatchedBy::AmountAndDate))
            });
        let mut reconciled_line = ReconciliationLine {
            number: n as u32 + 1,
            outcome: LineOutcome::Unmatched,
            rail_reference: Some(line.rail_reference.clone()),
            statement_transaction_id: line.transaction_id.clone(),
            amount: Some(line.amount),
            currency: Some(line.currency.clone()),
            status: Some(line.status),
            booked_on: line.booked_on,
            transaction_id: None,
            matched_by: None,
            transaction_amount: None,
            transaction_currency: None,
            transaction_status: None,
            differences: Vec::new(),
            applied: None,
            work_item_id: None,
        };
        if let Some((i, how)) = found {
            let transaction = &known[i];
            reconciled_line.transaction_id = Some(transaction.id.clone());
            reconciled_line.matched_by = Some(how);
            reconciled_line.transaction_amount = Some(transaction.amount);
            reconciled_line.transaction_currency = Some(transaction.currency.clone());
            reconciled_line.transaction_status = Some(transaction.status);
            let differences = &mut reconciled_line.differences;
            if claimed[i] {
                differences.push(Difference::Duplicate);
            }
            claimed[i] = true;
            if transaction.amount != line.amount {
                differences.push(Difference::Amount);
            }
            if transaction.currency != line.currency {
                differences.push(Difference::Currency);
            }
            if !agrees(line.status, transaction.status) {
                differences.push(Difference::Status);
            }
            reconciled_line.outcome = if differences.is_empty() {
                LineOutcome::Matched
            } else {
                LineOutcome::Mismatched
            };
        }
        reconciled.push(reconciled_line);
    }
    let mut missing: Vec<&Transaction> = known
        .iter()
        .zip(&claimed)
        .filter(|(t, &taken)| {
            !taken && t.status == TransactionStatus::Confirmed && confirmed_on(t).is_some_and(|d| period.contains(d))
        })
        .map(|(t, _)| t)
        .collect();
    missing.sort_by(|a, b| a.id.cmp(&b.id));
    for transaction in missing {
        reconciled.push(ReconciliationLine {
            number: reconciled.len() as u32 + 1,
            outcome: LineOutcome::Missing,
            rail_reference: transaction.rail_reference.clone(),
            statement_transaction_id: None,
            amount: None,
            currency: None,
            status: None,
            booked_on: None,
            transaction_id: Some(transaction.id.clone()),
            matched_by: None,
            transaction_amount: Some(transaction.amount),
            transaction_currency: Some(transaction.currency.clone()),
            transaction_status: Some(transaction.status),
            differences: Vec::new(),
            applied: None,
            work_item_id: None,
        });
    }
    reconciled
}

/// The window of confirmation days whose transactions a statement of `period` may speak of.
pub(super) fn candidate_days(period: Period) -> (Date, Date) {
    let window = Duration::days(DATE_WINDOW_DAYS);
    (period.from - window, period.to + window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::{Amount, Currency};
    use crate::transactions::tests::transaction;
    use time::macros::{date, datetime};

    fn confirmed(id: &str, reference: &str, amount: i64, on: time::OffsetDateTime) -> Transaction {
        Transaction {
            id: id.into(),
            rail_reference: Some(reference.into()),
            amount: Amount::new(amount).unwrap(),
            currency: Currency::parse("EUR").unwrap(),
            status: TransactionStatus::Confirmed,
            confirmed_at: Some(on),
            ..transaction()
        }
    }

    fn line(reference: &str, id: Option<&str>, amount: i64, status: StatementStatus) -> StatementLine {
        StatementLine {
            rail_reference: reference.into(),
            transaction_id: id.map(Into::into),
            amount: Amount::new(amount).unwrap(),
            currency: Currency::parse("EUR").unwrap(),
            status,
            booked_on: Some(date!(2026 - 11 - 24)),
        }
    }

    #[test]
    fn each_way_of_matching_and_each_outcome() {
        let day = datetime!(2026-11-24 10:00 UTC);
        let known = vec![
            confirmed("txn_a", "R-A", 100, day),
            confirmed("txn_b", "R-B", 200, day),
            confirmed("txn_c", "R-C", 300, day),
            confirmed("txn_d", "R-D", 400, day),
            confirmed("txn_e", "R-E", 500, day),
            // Confirmed outside the period and not on the statement: not missing.
            confirmed("txn_f", "R-F", 600, day + Duration::days(1)),
        ];
        let lines = [
            line("R-A", None, 100, StatementStatus::Confirmed),
            line("X-1", Some("txn_b"), 200, StatementStatus::Confirmed),
            line("X-2", None, 300, StatementStatus::Confirmed),
            line("R-D", None, 401, StatementStatus::Returned),
            line("R-A", None, 100, StatementStatus::Confirmed),
            line("X-3", None, 999, StatementStatus::Confirmed),
        ];
        let period = Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        };
        let result = match_statement(&lines, &known, period);
        let seen: Vec<_> = result
            .iter()
            .map(|l| {
                (
                    l.number,
                    l.outcome,
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.matched_by,
                    l.differences.clone(),
                )
            })
            .collect();
        use LineOutcome::*;
        assert_eq!(
            seen,
            vec![
                (1, Matched, Some("txn_a".into()), Some(MatchedBy::RailReference), vec![]),
                (2, Matched, Some("txn_b".into()), Some(MatchedBy::TransactionId), vec![]),
                (3, Matched, Some("txn_c".into()), Some(MatchedBy::AmountAndDate), vec![]),
                (
                    4,
                    Mismatched,
                    Some("txn_d".into()),
                    Some(MatchedBy::RailReference),
                    vec![Difference::Amount, Difference::Status]
                ),
                (
                    5,
                    Mismatched,
                    Some("txn_a".into()),
                    Some(MatchedBy::RailReference),
                    vec![Difference::Duplicate]
                ),
                (6, Unmatched, None, None, vec![]),
                (7, Missing, Some("txn_e".into()), None, vec![]),
            ]
        );
    }

    #[test]
    fn an_amount_match_stays_within_the_date_window() {
        let known = vec![confirmed("txn_a", "R-A", 100, datetime!(2026-11-20 10:00 UTC))];
        let period = Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        };
        let result = match_statement(&[line("X", None, 100, StatementStatus::Confirmed)], &known, period);
        assert_eq!(result[0].outcome, LineOutcome::Unmatched);
    }
}
