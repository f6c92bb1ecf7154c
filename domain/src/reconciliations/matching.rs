//! Matching a statement's lines to transactions, as the rail's rules say: by the rail's
//! reference, by our transaction id (the end-to-end id the rail was given, or the customer's
//! when that is all the line gives and one transaction alone carries it), by amount,
//! currency, direction and day, in the rules' order; then, if the rules allow, a line nothing
//! matched against a group of transactions that add up to it. Pure: the use case reads the
//! transactions, this decides.

use super::{Difference, LineBatch, LineOutcome, MatchedBy, MatchingRules, ReconciliationLine};
use crate::rail::{EntryDirection, Period, StatementLine, StatementStatus};
use crate::transactions::{Transaction, TransactionStatus};
use std::collections::{BTreeMap, HashMap};
use time::{Date, Duration};

mod groups;
use groups::match_groups;

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

fn booked(transaction: &Transaction) -> EntryDirection {
    EntryDirection::of(transaction.direction)
}

/// The known transactions, found by reference, by id, and by value (currency and direction,
/// then amount).
struct Known<'a> {
    all: &'a [Transaction],
    by_reference: HashMap<&'a str, usize>,
    by_id: HashMap<&'a str, usize>,
    /// By the customer's end-to-end id, where one transaction alone carries it (customers'
    /// ids are unique per customer, not across them).
    by_end_to_end_id: HashMap<&'a str, Option<usize>>,
    by_value: HashMap<(&'a str, EntryDirection), BTreeMap<i64, Vec<usize>>>,
}

impl<'a> Known<'a> {
    fn of(all: &'a [Transaction]) -> Known<'a> {
        let mut by_value: HashMap<(&str, EntryDirection), BTreeMap<i64, Vec<usize>>> = HashMap::new();
        for (i, transaction) in all.iter().enumerate() {
            if transaction.confirmed_at.is_some() {
                by_value
                    .entry((transaction.currency.code(), booked(transaction)))
                    .or_default()
                    .entry(transaction.amount.minor_units())
                    .or_default()
                    .push(i);
            }
        }
        Known {
            all,
            by_reference: all
                .iter()
                .enumerate()
                .filter_map(|(i, t)| t.rail_reference.as_deref().map(|r| (r, i)))
                .collect(),
            by_id: all.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect(),
            by_end_to_end_id: all.iter().enumerate().fold(HashMap::new(), |mut found, (i, t)| {
                if let Some(id) = t.end_to_end_id.as_deref() {
                    // A second transaction with the id makes it name neither.
                    found.entry(id).and_modify(|one| *one = None).or_insert(Some(i));
                }
                found
            }),
            by_value,
        }
    }

    /// Days between a line's booking and a transaction's confirmation, if within `window`
    /// (a line that gives no day: 0 for a confirmation within the period).
    fn distance(&self, i: usize, line: &StatementLine, period: Period, window: i64) -> Option<i64> {
        let day = confirmed_on(&self.all[i])?;
        let distance = match line.booked_on {
            Some(booked) => (day - booked).whole_days().abs(),
            None if period.contains(day) => 0,
            None => return None,
        };
        (distance <= window).then_some(distance)
    }

    /// The unclaimed confirmation of the same currency and direction closest to the line's
    /// amount (within the tolerance), then to its day (within the window).
    fn by_value(&self, line: &StatementLine, claimed: &[bool], period: Period, rules: &MatchingRules) -> Option<usize> {
        let amount = line.amount.minor_units();
        let allowed = rules.tolerance.allowed(amount);
        let window = i64::from(rules.date_window_days);
        let amounts = self.by_value.get(&(line.currency.code(), line.direction))?;
        amounts
            .range(amount - allowed..=amount + allowed)
            .flat_map(|(&held, candidates)| candidates.iter().map(move |&i| (held, i)))
            .filter(|&(_, i)| !claimed[i])
            .filter_map(|(held, i)| Some(((held - amount).abs(), self.distance(i, line, period, window)?, i)))
            .min()
            .map(|(_, _, i)| i)
    }
}

/// Each line's outcome against `known` (the rail's transactions the statement may speak of)
/// under `rules`, then one `missing` line per transaction confirmed in `period` that no line
/// matched.
pub fn match_statement(
    lines: &[StatementLine],
    known: &[Transaction],
    period: Period,
    rules: &MatchingRules,
) -> Vec<ReconciliationLine> {
    let index = Known::of(known);
    let mut claimed = vec![false; known.len()];
    let mut reconciled = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let found = rules.match_order.iter().find_map(|way| {
            let i = match way {
                MatchedBy::RailReference => line
                    .rail_reference
                    .as_deref()
                    .and_then(|reference| index.by_reference.get(reference).copied()),
                MatchedBy::TransactionId => match (&line.transaction_id, &line.end_to_end_id) {
                    (Some(id), _) => index.by_id.get(id.as_str()).copied(),
                    (None, Some(id)) => index.by_end_to_end_id.get(id.as_str()).copied().flatten(),
                    (None, None) => None,
                },
                MatchedBy::AmountAndDate => index.by_value(line, &claimed, period, rules),
                MatchedBy::Group => None,
            };
            i.map(|i| (i, *way))
        });
        let mut reconciled_line = ReconciliationLine {
            number: n as u32 + 1,
            outcome: LineOutcome::Unmatched,
            rail_reference: line.rail_reference.clone(),
            statement_transaction_id: line.transaction_id.clone(),
            end_to_end_id: line.end_to_end_id.clone(),
            amount: Some(line.amount),
            currency: Some(line.currency.clone()),
            status: Some(line.status),
            direction: Some(line.direction),
            reversal: line.reversal,
            booked_on: line.booked_on,
            transaction_id: None,
            matched_by: None,
            transaction_amount: None,
            transaction_currency: None,
            transaction_status: None,
            differences: Vec::new(),
            applied: None,
            work_item_id: None,
            batch: line.batch.map(|b| LineBatch {
                entry: b.entry,
                details: b.details,
                entry_amount: b.entry_amount,
                details_total: 0,
                operation_id: None,
                file_id: None,
            }),
            amount_difference: None,
            group: Vec::new(),
            balance: None,
        };
        if let Some((i, how)) = found {
            let transaction = &known[i];
            reconciled_line.transaction_id = Some(transaction.id.clone());
            if reconciled_line.end_to_end_id.is_none() {
                reconciled_line.end_to_end_id = transaction.end_to_end_id.clone();
            }
            reconciled_line.matched_by = Some(how);
            reconciled_line.transaction_amount = Some(transaction.amount);
            reconciled_line.transaction_currency = Some(transaction.currency.clone());
            reconciled_line.transaction_status = Some(transaction.status);
            if booked(transaction) != line.direction {
                // Money that went the other way is not this transaction's, whatever it names.
                reconciled_line.outcome = LineOutcome::WrongDirection;
                reconciled.push(reconciled_line);
                continue;
            }
            let differences = &mut reconciled_line.differences;
            if claimed[i] {
                differences.push(Difference::Duplicate);
            }
            claimed[i] = true;
            let difference = line.amount.minor_units() - transaction.amount.minor_units();
            if difference != 0 {
                reconciled_line.amount_difference = Some(difference);
                if difference.abs() > rules.tolerance.allowed(line.amount.minor_units()) {
                    differences.push(Difference::Amount);
                }
            }
            if transaction.currency != line.currency {
                differences.push(Difference::Currency);
            }
            if !agrees(line.status, transaction.status) {
                differences.push(Difference::Status);
            }
            reconciled_line.outcome = match (differences.is_empty(), difference) {
                (true, 0) => LineOutcome::Matched,
                (true, _) => LineOutcome::MatchedWithDifference,
                (false, _) => LineOutcome::Mismatched,
            };
        }
        reconciled.push(reconciled_line);
    }
    if let Some(many_to_one) = rules.many_to_one {
        match_groups(
            lines,
            &mut reconciled,
            &index,
            &mut claimed,
            period,
            rules,
            many_to_one.max_transactions,
        );
    }
    add_up_batches(&mut reconciled);
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
            end_to_end_id: transaction.end_to_end_id.clone(),
            amount: None,
            currency: None,
            status: None,
            direction: None,
            reversal: false,
            booked_on: None,
            transaction_id: Some(transaction.id.clone()),
            matched_by: None,
            transaction_amount: Some(transaction.amount),
            transaction_currency: Some(transaction.currency.clone()),
            transaction_status: Some(transaction.status),
            differences: Vec::new(),
            applied: None,
            work_item_id: None,
            batch: None,
            amount_difference: None,
            group: Vec::new(),
            balance: None,
        });
    }
    reconciled
}

/// Each batch booking's details added up, in one pass over the lines: every detail shows
/// the total, and an entry whose details do not add up to what it books is a `batch_total`
/// break of its own, after the statement's lines.
fn add_up_batches(reconciled: &mut Vec<ReconciliationLine>) {
    let mut entries: std::collections::BTreeMap<u32, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, line) in reconciled.iter().enumerate() {
        if let Some(batch) = &line.batch {
            entries.entry(batch.entry).or_default().push(i);
        }
    }
    for details in entries.into_values() {
        let total: i64 = details
            .iter()
            .filter_map(|&i| reconciled[i].amount.map(|a| a.minor_units()))
            .sum();
        for &i in &details {
            if let Some(batch) = reconciled[i].batch.as_mut() {
                batch.details_total = total;
            }
        }
        let first = reconciled[details[0]].clone();
        let booked = first.batch.as_ref().map(|b| b.entry_amount);
        if let Some(entry_amount) = booked.filter(|amount| amount.minor_units() != total) {
            reconciled.push(ReconciliationLine {
                number: reconciled.len() as u32 + 1,
                outcome: LineOutcome::Mismatched,
                rail_reference: None,
                statement_transaction_id: None,
                end_to_end_id: None,
                amount: Some(entry_amount),
                transaction_id: None,
                matched_by: None,
                transaction_amount: None,
                transaction_currency: None,
                transaction_status: None,
                differences: vec![Difference::BatchTotal],
                applied: None,
                work_item_id: None,
                amount_difference: None,
                group: Vec::new(),
                ..first
            });
        }
    }
}

/// The window of confirmation days whose transactions a statement of `period` may speak of.
pub(super) fn candidate_days(period: Period, rules: &MatchingRules) -> (Date, Date) {
    let window = Duration::days(i64::from(rules.date_window_days));
    (period.from - window, period.to + window)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::money::{Amount, Currency};
    use crate::transactions::tests::transaction;
    use time::macros::{date, datetime};

    pub(in crate::reconciliations) fn confirmed(
        id: &str,
        reference: &str,
        amount: i64,
        on: time::OffsetDateTime,
    ) -> Transaction {
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

    pub(in crate::reconciliations) fn line(
        reference: &str,
        id: Option<&str>,
        amount: i64,
        status: StatementStatus,
    ) -> StatementLine {
        StatementLine {
            rail_reference: Some(reference.into()),
            transaction_id: id.map(Into::into),
            amount: Amount::new(amount).unwrap(),
            currency: Currency::parse("EUR").unwrap(),
            status,
            direction: EntryDirection::Debit,
            reversal: false,
            batch: None,
            booked_on: Some(date!(2026 - 11 - 24)),
            end_to_end_id: None,
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
        let result = match_statement(&lines, &known, period, &MatchingRules::default());
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
        let result = match_statement(
            &[line("X", None, 100, StatementStatus::Confirmed)],
            &known,
            period,
            &MatchingRules::default(),
        );
        assert_eq!(result[0].outcome, LineOutcome::Unmatched);
    }

    /// A credit of a payout's amount on its day is money coming in, not the payout going out:
    /// it matches no payout by value, and a line naming a payout but moving money the other
    /// way is a break of its own, which neither claims the payout nor changes it.
    #[test]
    fn a_line_matches_only_a_transaction_whose_money_went_its_way() {
        let day = datetime!(2026-11-24 10:00 UTC);
        let collection = Transaction {
            direction: crate::rail::RailDirection::Debit,
            ..confirmed("txn_c", "R-C", 700, day)
        };
        let known = vec![confirmed("txn_p", "R-P", 800, day), collection];
        let credit = |reference: &str, id: Option<&str>, amount| StatementLine {
            direction: EntryDirection::Credit,
            ..line(reference, id, amount, StatementStatus::Confirmed)
        };
        let lines = [
            credit("X-1", None, 800),
            credit("R-P", None, 800),
            credit("X-2", Some("txn_p"), 800),
            line("X-3", None, 800, StatementStatus::Confirmed),
            line("X-4", None, 700, StatementStatus::Confirmed),
            credit("X-5", None, 700),
        ];
        let period = Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        };
        let seen: Vec<_> = match_statement(&lines, &known, period, &MatchingRules::default())
            .iter()
            .map(|l| {
                (
                    l.outcome,
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.matched_by,
                )
            })
            .collect();
        use LineOutcome::*;
        let (p, c) = (Some("txn_p".to_owned()), Some("txn_c".to_owned()));
        assert_eq!(
            seen,
            vec![
                (Unmatched, None, None),
                (WrongDirection, p.clone(), Some(MatchedBy::RailReference)),
                (WrongDirection, p.clone(), Some(MatchedBy::TransactionId)),
                (Matched, p, Some(MatchedBy::AmountAndDate)),
                (Unmatched, None, None),
                (Matched, c, Some(MatchedBy::AmountAndDate)),
            ]
        );
    }

    /// ISO 20022 makes every reference optional: a line with none is matched by value.
    #[test]
    fn a_line_without_references_is_matched_by_value() {
        let known = vec![confirmed("txn_a", "R-A", 100, datetime!(2026-11-24 10:00 UTC))];
        let period = Period {
            from: date!(2026 - 11 - 24),
            to: date!(2026 - 11 - 24),
        };
        let bare = StatementLine {
            rail_reference: None,
            ..line("", None, 100, StatementStatus::Confirmed)
        };
        let result = match_statement(&[bare], &known, period, &MatchingRules::default());
        assert_eq!(
            (result[0].outcome, result[0].matched_by),
            (LineOutcome::Matched, Some(MatchedBy::AmountAndDate))
        );
    }

    /// A bank that gives back only the customer's end-to-end id finds the one transaction
    /// that carries it, ahead of another of the same amount and day; an id two transactions
    /// carry names neither, and the line is matched by value. Every line shows the id.
    #[test]
    fn a_line_naming_only_the_customers_end_to_end_id_finds_its_transaction() {
        let on = datetime!(2026-11-24 10:00 UTC);
        let carrying = |id: &str, end_to_end_id: &str| Transaction {
            end_to_end_id: Some(end_to_end_id.into()),
            rail_reference: None,
            ..confirmed(id, "", 100, on)
        };
        let known = vec![
            carrying("txn_a", "INV-1"),
            carrying("txn_b", "INV-2"),
            carrying("txn_c", "PAYROLL"),
            carrying("txn_d", "PAYROLL"),
        ];
        let period = Period {
            from: on.date(),
            to: on.date(),
        };
        let naming = |end_to_end_id: &str| StatementLine {
            rail_reference: None,
            end_to_end_id: Some(end_to_end_id.into()),
            ..line("", None, 100, StatementStatus::Confirmed)
        };
        let result = match_statement(
            &[naming("INV-2"), naming("PAYROLL")],
            &known,
            period,
            &MatchingRules::default(),
        );
        let seen: Vec<_> = result
            .iter()
            .take(2)
            .map(|l| {
                (
                    l.transaction_id.as_ref().map(|t| t.to_string()),
                    l.matched_by,
                    l.end_to_end_id.clone(),
                )
            })
            .collect();
        assert_eq!(
            seen[0],
            (
                Some("txn_b".into()),
                Some(MatchedBy::TransactionId),
                Some("INV-2".into())
            )
        );
        assert_eq!(
            (seen[1].1, seen[1].2.as_deref()),
            (Some(MatchedBy::AmountAndDate), Some("PAYROLL"))
        );
        let missing: Vec<_> = result[2..].iter().map(|l| l.end_to_end_id.clone()).collect();
        assert!(missing.iter().all(Option::is_some), "{missing:?}");
    }
}
