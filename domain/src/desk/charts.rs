//! The board's pictures: transactions per hour by status and rail over the last day, the age
//! of pending approvals against their SLA, and exceptions opened and closed per day. Each is
//! read from counters kept as things happen (tallies by the period, the board's queue counts),
//! so a chart costs the same whether the service is a day old or ten years.

use super::board::queue_bucket;
use super::Queue;
use crate::access::Principal;
use crate::error::DomainError;
use crate::ids::CustomerId;
use crate::service::Service;
use crate::tallies::{Period, Series};
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The hours the transactions' chart shows, the current one last.
pub const HOURS_SHOWN: i64 = 24;
/// The days the exceptions' chart shows, today last.
pub const DAYS_SHOWN: i64 = 14;
/// Past this many in one bucket of the approvals' ageing, a count stops (and says so).
pub const AGEING_COUNTED: usize = 1_000;

/// `GET /v1/charts`.
#[derive(Debug, Clone, Serialize)]
pub struct Charts {
    pub customer_id: Option<CustomerId>,
    pub transactions_per_hour: TransactionsPerHour,
    pub approvals_ageing: ApprovalsAgeing,
    pub exceptions_per_day: ExceptionsPerDay,
    #[serde(with = "time::serde::rfc3339")]
    pub as_of: OffsetDateTime,
}

/// Transactions reaching each status, by the hour (UTC hours, the current one last).
#[derive(Debug, Clone, Serialize)]
pub struct TransactionsPerHour {
    #[serde(with = "rfc3339_list")]
    pub hours: Vec<OffsetDateTime>,
    /// One line per direction, rail and status with any count in the window, a count per hour.
    pub series: Vec<TransactionSeries>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TransactionSeries {
    /// `credit` (payouts) or `debit` (collections).
    pub direction: String,
    pub rail: String,
    pub status: String,
    pub counts: Vec<i64>,
}

/// The open approvals by how much of their SLA they have used.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalsAgeing {
    pub sla_minutes: i64,
    pub open: i64,
    /// Under half of the SLA used.
    pub under_half: i64,
    /// Half to 80 %.
    pub half_to_80: i64,
    /// 80 % up to the due time.
    pub over_80: i64,
    pub past_due: i64,
    /// Whether a bucket reached [`AGEING_COUNTED`] and stopped counting there.
    pub capped: bool,
}

/// Exceptions opened and closed per day (UTC days, today last).
#[derive(Debug, Clone, Serialize)]
pub struct ExceptionsPerDay {
    #[serde(with = "rfc3339_list")]
    pub days: Vec<OffsetDateTime>,
    pub opened: Vec<i64>,
    pub closed: Vec<i64>,
}

mod rfc3339_list {
    use time::format_description::well_known::Rfc3339;
    use time::OffsetDateTime;

    pub fn serialize<S: serde::Serializer>(list: &[OffsetDateTime], to: S) -> Result<S::Ok, S::Error> {
        let texts = list
            .iter()
            .map(|at| at.format(&Rfc3339).map_err(serde::ser::Error::custom));
        to.collect_seq(texts.collect::<Result<Vec<_>, _>>()?)
    }
}

/// The starts of the last `shown` periods, the one holding `now` last.
fn periods(period: Period, now: OffsetDateTime, shown: i64) -> Vec<OffsetDateTime> {
    let last = period.start_of(now);
    (0..shown)
        .rev()
        .map(|back| last - period.length() * back as i32)
        .collect()
}

impl Service {
    /// `GET /v1/charts`: a customer's (theirs only), or the platform's over every customer.
    pub async fn charts(&self, principal: &Principal, customer_id: Option<CustomerId>) -> Result<Charts, DomainError> {
        let customer_id = super::use_cases::board_scope(principal, customer_id)?;
        let now = self.now();
        let scope = customer_id.as_ref();
        let hours = periods(Period::Hour, now, HOURS_SHOWN);
        let days = periods(Period::Day, now, DAYS_SHOWN);
        // The periods shown, the current one's end the window's: none after it is asked for.
        let tallies = |period: Period, shown: &[OffsetDateTime]| {
            let (from, to) = (shown[0], shown[shown.len() - 1] + period.length());
            async move { Ok::<_, DomainError>(self.store.tallies(scope, period, from, to).await?) }
        };
        let (hourly, daily, approvals_ageing) = futures_util::future::try_join3(
            tallies(Period::Hour, &hours),
            tallies(Period::Day, &days),
            self.approvals_ageing(scope, now),
        )
        .await?;

        let mut lines: BTreeMap<(String, String, String), Vec<i64>> = BTreeMap::new();
        for count in hourly {
            let (
                Series::Transactions {
                    direction,
                    rail,
                    status,
                },
                Some(at),
            ) = (count.series, hours.iter().position(|h| *h == count.starts_at))
            else {
                continue;
            };
            lines
                .entry((direction, rail, status))
                .or_insert_with(|| vec![0; hours.len()])[at] += count.count;
        }
        let series = lines
            .into_iter()
            .map(|((direction, rail, status), counts)| TransactionSeries {
                direction,
                rail,
                status,
                counts,
            })
            .collect();

        let (mut opened, mut closed) = (vec![0; days.len()], vec![0; days.len()]);
        for count in daily {
            let (
                Series::WorkItems {
                    queue,
                    opened: was_opened,
                },
                Some(at),
            ) = (count.series, days.iter().position(|d| *d == count.starts_at))
            else {
                continue;
            };
            if queue == Queue::Exceptions.as_str() {
                let counts = if was_opened { &mut opened } else { &mut closed };
                counts[at] += count.count;
            }
        }
        Ok(Charts {
            customer_id,
            transactions_per_hour: TransactionsPerHour { hours, series },
            approvals_ageing,
            exceptions_per_day: ExceptionsPerDay { days, opened, closed },
            as_of: now,
        })
    }

    /// The open approvals by the share of their SLA used: an item due at `due` has used half
    /// of it once `due - now` is under half the SLA, so each bucket's edge is one count of the
    /// items due before a moment.
    async fn approvals_ageing(
        &self,
        customer_id: Option<&CustomerId>,
        now: OffsetDateTime,
    ) -> Result<ApprovalsAgeing, DomainError> {
        let sla = self.desk_sla.of(Queue::Approvals);
        let bucket = queue_bucket(Queue::Approvals);
        let counts = self.store.board_counts(customer_id).await?;
        let open: i64 = counts.iter().filter(|c| c.bucket == bucket).map(|c| c.count).sum();
        let mut used = [0_i64; 3];
        if open > 0 {
            for (count, share_left) in used.iter_mut().zip([0.5, 0.2, 0.0]) {
                let before = now + sla * share_left;
                *count = self
                    .store
                    .past_due(Queue::Approvals, customer_id, before, AGEING_COUNTED)
                    .await? as i64;
            }
        }
        let [half_used, most_used, past_due] = used;
        Ok(ApprovalsAgeing {
            sla_minutes: sla.whole_minutes(),
            open,
            under_half: (open - half_used).max(0),
            half_to_80: half_used - most_used,
            over_80: most_used - past_due,
            past_due,
            capped: used.iter().any(|&c| c >= AGEING_COUNTED as i64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_shown_periods_end_with_the_one_holding_now() {
        let now = datetime!(2026-12-07 13:45 UTC);
        let hours = periods(Period::Hour, now, HOURS_SHOWN);
        assert_eq!(hours.len(), 24);
        assert_eq!(hours[23], datetime!(2026-12-07 13:00 UTC));
        assert_eq!(hours[0], datetime!(2026-12-06 14:00 UTC));
        let days = periods(Period::Day, now, DAYS_SHOWN);
        assert_eq!(
            (days[0], days[13]),
            (datetime!(2026-11-24 0:00 UTC), datetime!(2026-12-07 0:00 UTC))
        );
    }
}
