//! Counts kept by the hour and by the day as things happen: transactions reaching each status,
//! work items opened and closed. Each count is added in the changeset of the change it counts,
//! so it is added exactly once, and a chart reads one counter per period and series: what it
//! costs grows with the window it shows, never with history.

use crate::ids::CustomerId;
use crate::ports::StoreError;
use time::{Duration, OffsetDateTime, Time};

/// How long a tally's period lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Period {
    Hour,
    Day,
}

impl Period {
    /// The start of the period holding `at` (UTC).
    pub fn start_of(self, at: OffsetDateTime) -> OffsetDateTime {
        let at = at.to_offset(time::UtcOffset::UTC);
        match self {
            Period::Hour => at.replace_time(Time::from_hms(at.hour(), 0, 0).expect("an hour of the day")),
            Period::Day => at.replace_time(Time::MIDNIGHT),
        }
    }

    pub fn length(self) -> Duration {
        match self {
            Period::Hour => Duration::HOUR,
            Period::Day => Duration::DAY,
        }
    }

    /// The key of the period starting at `start`, ordered as time is: `h2026-12-07T13`,
    /// `d2026-12-07`.
    pub fn key(self, start: OffsetDateTime) -> String {
        let (y, m, d) = (start.year(), u8::from(start.month()), start.day());
        match self {
            Period::Hour => format!("h{y:04}-{m:02}-{d:02}T{:02}", start.hour()),
            Period::Day => format!("d{y:04}-{m:02}-{d:02}"),
        }
    }

    /// The start of the period a [`Self::key`] names.
    pub fn start_of_key(key: &str) -> Option<(Period, OffsetDateTime)> {
        let (period, rest) = match key.split_at_checked(1)? {
            ("h", rest) => (Period::Hour, rest),
            ("d", rest) => (Period::Day, rest),
            _ => return None,
        };
        let (date, hour) = match period {
            Period::Hour => rest
                .split_once('T')
                .map(|(date, hour)| (date, hour.parse::<u8>().ok()))?,
            Period::Day => (rest, Some(0)),
        };
        let format = time::macros::format_description!("[year]-[month]-[day]");
        let date = time::Date::parse(date, format).ok()?;
        let time = Time::from_hms(hour?, 0, 0).ok()?;
        Some((period, date.with_time(time).assume_utc()))
    }
}

/// What a count counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Series {
    /// Transactions that reached `status` on `rail`, moving money `direction`.
    Transactions {
        direction: String,
        rail: String,
        status: String,
    },
    /// Work items of `queue` opened, or closed.
    WorkItems { queue: String, opened: bool },
}

impl Series {
    /// The series as stored: `transactions:credit:<rail>:confirmed`, `work_items:exceptions:opened`.
    pub fn key(&self) -> String {
        match self {
            Series::Transactions {
                direction,
                rail,
                status,
            } => format!("transactions:{direction}:{rail}:{status}"),
            Series::WorkItems { queue, opened } => {
                format!("work_items:{queue}:{}", if *opened { "opened" } else { "closed" })
            }
        }
    }

    /// The series a [`Self::key`] names (a rail's name may hold `:`; the status never does).
    pub fn of_key(key: &str) -> Option<Series> {
        let (kind, rest) = key.split_once(':')?;
        match kind {
            "transactions" => {
                let (direction, rest) = rest.split_once(':')?;
                let (rail, status) = rest.rsplit_once(':')?;
                Some(Series::Transactions {
                    direction: direction.into(),
                    rail: rail.into(),
                    status: status.into(),
                })
            }
            "work_items" => {
                let (queue, change) = rest.split_once(':')?;
                let opened = match change {
                    "opened" => true,
                    "closed" => false,
                    _ => return None,
                };
                Some(Series::WorkItems {
                    queue: queue.into(),
                    opened,
                })
            }
            _ => None,
        }
    }
}

/// A count to add, in the changeset of what it counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    pub customer_id: CustomerId,
    pub period: Period,
    pub starts_at: OffsetDateTime,
    pub series: Series,
    /// The id of (the first of) what is counted: a store spreads one busy series over a few
    /// counters by it, so concurrent changes rarely meet on one.
    pub spread_by: String,
    pub count: i64,
}

impl Tally {
    pub fn new(customer_id: &CustomerId, period: Period, at: OffsetDateTime, series: Series, spread_by: &str) -> Tally {
        Tally {
            customer_id: customer_id.clone(),
            period,
            starts_at: period.start_of(at),
            series,
            spread_by: spread_by.into(),
            count: 1,
        }
    }

    /// The period's key, as [`Period::key`].
    pub fn period_key(&self) -> String {
        self.period.key(self.starts_at)
    }

    /// Whether `other` adds to the same counter (its customer's series in one period).
    pub fn counts_with(&self, other: &Tally) -> bool {
        self.customer_id == other.customer_id
            && self.period == other.period
            && self.starts_at == other.starts_at
            && self.series == other.series
    }
}

/// A series' count in one period, summed over customers and over a store's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct TallyCount {
    pub starts_at: OffsetDateTime,
    pub series: Series,
    pub count: i64,
}

/// The store's port for tallies.
#[async_trait::async_trait]
pub trait TallyStore: Send + Sync {
    /// The counts of the periods of `period` starting in `[from, to)`: a customer's, or (none)
    /// every customer's summed; series without a count in a period are absent.
    async fn tallies(
        &self,
        customer_id: Option<&CustomerId>,
        period: Period,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<TallyCount>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_periods_key_orders_as_time_and_names_its_start() {
        let at = datetime!(2026-12-07 13:45:12.5 +01:00);
        let hour = Period::Hour.start_of(at);
        assert_eq!(Period::Hour.key(hour), "h2026-12-07T12");
        assert_eq!(Period::start_of_key("h2026-12-07T12"), Some((Period::Hour, hour)));
        let day = Period::Day.start_of(at);
        assert_eq!(Period::Day.key(day), "d2026-12-07");
        assert_eq!(Period::start_of_key("d2026-12-07"), Some((Period::Day, day)));
        assert!(Period::Hour.key(hour) < Period::Hour.key(hour + Duration::HOUR));
        assert_eq!(Period::start_of_key("x2026"), None);
        assert_eq!(Period::start_of_key("h2026-12-07T25"), None);
    }

    #[test]
    fn a_series_key_reads_back_even_with_a_colon_in_the_rail() {
        let series = [
            Series::Transactions {
                direction: "credit".into(),
                rail: "bank:cl".into(),
                status: "confirmed".into(),
            },
            Series::WorkItems {
                queue: "exceptions".into(),
                opened: false,
            },
        ];
        for one in series {
            assert_eq!(Series::of_key(&one.key()), Some(one));
        }
        assert_eq!(Series::of_key("work_items:exceptions:moved"), None);
    }

    #[test]
    fn tallies_of_one_series_and_period_add_up_in_one_changeset() {
        use crate::ports::{Changeset, Write};
        let customer = CustomerId::from("cus_1");
        let at = time::macros::datetime!(2026-12-07 13:00 UTC);
        let opened = |queue: &str| Series::WorkItems {
            queue: queue.into(),
            opened: true,
        };
        let mut changes = Changeset::default();
        changes.push(Write::Tally(Tally::new(
            &customer,
            Period::Day,
            at,
            opened("exceptions"),
            "wi_1",
        )));
        changes.push(Write::Tally(Tally::new(
            &customer,
            Period::Day,
            at + Duration::HOUR,
            opened("exceptions"),
            "wi_2",
        )));
        changes.push(Write::Tally(Tally::new(
            &customer,
            Period::Day,
            at,
            opened("approvals"),
            "wi_3",
        )));
        let counts: Vec<(i64, &str)> = changes
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::Tally(t) => Some((t.count, t.spread_by.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(counts, [(2, "wi_1"), (1, "wi_3")]);
    }
}
