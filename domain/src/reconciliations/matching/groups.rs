//! Many-to-one: a line nothing else matched, against unclaimed transactions that add up to it
//! (a rail that nets a day's payouts into one booking).

use super::{Known, StatementLine};
use crate::money::Amount;
use crate::rail::{Period, StatementStatus};
use crate::reconciliations::{LineOutcome, MatchedBy, MatchingRules, ReconciliationLine};
use crate::transactions::TransactionStatus;

/// How many transactions a group is looked for among, and how many steps the search for one
/// line may take: a 10,000-line statement finishes in seconds whatever it holds.
const GROUP_CANDIDATES: usize = 2_000;
const GROUP_TRIES: usize = 4_000;

impl Known<'_> {
    /// Unclaimed confirmed transactions of the line's currency and direction, within the
    /// window, that add up to its amount (within the tolerance): at most `size` of them.
    fn group(
        &self,
        line: &StatementLine,
        claimed: &[bool],
        period: Period,
        rules: &MatchingRules,
        size: usize,
    ) -> Option<Vec<usize>> {
        let target = line.amount.minor_units();
        let allowed = rules.tolerance.allowed(target);
        let window = i64::from(rules.date_window_days);
        let amounts = self.by_value.get(&(line.currency.code(), line.direction))?;
        let mut candidates: Vec<(i64, usize)> = amounts
            .range(..=target + allowed)
            .rev()
            .flat_map(|(&held, found)| found.iter().map(move |&i| (held, i)))
            .filter(|&(_, i)| !claimed[i] && self.all[i].status == TransactionStatus::Confirmed)
            .filter(|&(_, i)| self.distance(i, line, period, window).is_some())
            .take(GROUP_CANDIDATES)
            .collect();
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut search = GroupSearch {
            candidates: &candidates,
            target,
            allowed,
            size,
            tries: 0,
            chosen: Vec::with_capacity(size),
        };
        search
            .from(0, 0)
            .then(|| search.chosen.iter().map(|&c| candidates[c].1).collect())
    }
}

/// A bounded depth-first search, largest amounts first, for at least two of `candidates`
/// (sorted by amount, descending) that add up to `target`, give or take `allowed`. The last
/// member of a group is found by bisection, so pairs are found among thousands.
struct GroupSearch<'c> {
    candidates: &'c [(i64, usize)],
    target: i64,
    allowed: i64,
    size: usize,
    tries: usize,
    chosen: Vec<usize>,
}

impl GroupSearch<'_> {
    /// The first candidate from `next` on whose amount is at most `most`.
    fn first_at_most(&self, next: usize, most: i64) -> usize {
        next + self.candidates[next..].partition_point(|&(amount, _)| amount > most)
    }

    /// The candidate from `next` on closest to `need`, if within the tolerance.
    fn closest(&self, next: usize, need: i64) -> Option<usize> {
        let below = self.first_at_most(next, need);
        let above = (below > next).then(|| below - 1);
        [Some(below).filter(|&c| c < self.candidates.len()), above]
            .into_iter()
            .flatten()
            .map(|c| ((self.candidates[c].0 - need).abs(), c))
            .filter(|&(off, _)| off <= self.allowed)
            .min()
            .map(|(_, c)| c)
    }

    fn from(&mut self, next: usize, sum: i64) -> bool {
        if !self.chosen.is_empty() {
            self.tries += 1;
            if let Some(last) = self.closest(next, self.target - sum) {
                self.chosen.push(last);
                return true;
            }
        }
        if self.chosen.len() + 2 > self.size {
            return false;
        }
        let slots = (self.size - self.chosen.len()) as i64;
        for c in self.first_at_most(next, self.target + self.allowed - sum)..self.candidates.len() {
            self.tries += 1;
            let amount = self.candidates[c].0;
            // What follows is smaller: if even this many of this one fall short, stop.
            if self.tries > GROUP_TRIES || sum + amount * slots < self.target - self.allowed {
                return false;
            }
            self.chosen.push(c);
            if self.from(c + 1, sum + amount) {
                return true;
            }
            self.chosen.pop();
        }
        false
    }
}

/// Each confirmed line nothing matched, against a group of transactions that add up to it.
pub(super) fn match_groups(
    lines: &[StatementLine],
    reconciled: &mut [ReconciliationLine],
    index: &Known,
    claimed: &mut [bool],
    period: Period,
    rules: &MatchingRules,
    size: u8,
) {
    for (line, reconciled_line) in lines.iter().zip(reconciled.iter_mut()) {
        if reconciled_line.outcome != LineOutcome::Unmatched
            || line.status != StatementStatus::Confirmed
            || line.reversal
        {
            continue;
        }
        let Some(members) = index.group(line, claimed, period, rules, usize::from(size)) else {
            continue;
        };
        let sum: i64 = members.iter().map(|&i| index.all[i].amount.minor_units()).sum();
        for &i in &members {
            claimed[i] = true;
        }
        let difference = line.amount.minor_units() - sum;
        reconciled_line.outcome = if difference == 0 {
            LineOutcome::Matched
        } else {
            LineOutcome::MatchedWithDifference
        };
        reconciled_line.matched_by = Some(MatchedBy::Group);
        reconciled_line.amount_difference = (difference != 0).then_some(difference);
        reconciled_line.transaction_amount = Amount::new(sum);
        reconciled_line.transaction_currency = Some(line.currency.clone());
        reconciled_line.transaction_status = Some(TransactionStatus::Confirmed);
        reconciled_line.group = members.iter().map(|&i| index.all[i].id.clone()).collect();
    }
}
