//! An endpoint's health, as its deliveries' attempts tell it: the success rate over the last
//! hour or two, the failures in a row and since when, the last success. Its circuit breaker
//! reads it: warnings at 50, 70 and 90 % of the failures in a row that disable the endpoint,
//! and the endpoint disabled once they have gone on for long enough (or at once on a
//! `410 Gone`, as Standard Webhooks asks).

use crate::error::DomainError;
use crate::ids::WebhookEndpointId;
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

/// The window the success rate counts over: this hour and the one before.
const WINDOW: Duration = Duration::hours(1);

/// The warning levels, in per cent of the failures in a row that disable the endpoint.
pub const WARNING_LEVELS: [u8; 3] = [50, 70, 90];

/// When an endpoint's breaker opens: after `failures` failed attempts in a row spread over at
/// least `over_hours` hours (both must hold, so a burst of failures over a minute does not
/// disable an endpoint that had one bad minute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Breaker {
    pub failures: u32,
    pub over_hours: u32,
}

impl Default for Breaker {
    /// Twenty failures in a row over at least twelve hours.
    fn default() -> Breaker {
        Breaker {
            failures: 20,
            over_hours: 12,
        }
    }
}

impl Breaker {
    pub fn check(&self) -> Result<(), DomainError> {
        if !(3..=1_000).contains(&self.failures) {
            return Err(DomainError::invalid(
                "breaker.failures",
                "invalid_breaker",
                "failures is from 3 to 1000 failed attempts in a row.",
            ));
        }
        if self.over_hours > 168 {
            return Err(DomainError::invalid(
                "breaker.over_hours",
                "invalid_breaker",
                "over_hours is from 0 to 168 (a week).",
            ));
        }
        Ok(())
    }

    /// The failures in a row at which a warning of `level` per cent is sent.
    pub fn warning_at(&self, level: u8) -> u32 {
        (self.failures * u32::from(level)).div_ceil(100)
    }
}

/// An endpoint's health; one that never had an attempt has none stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointHealth {
    pub endpoint_id: WebhookEndpointId,
    pub consecutive_failures: u32,
    /// When the failures in a row began.
    #[serde(with = "time::serde::rfc3339::option")]
    pub failing_since: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_success_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_failure_at: Option<OffsetDateTime>,
    /// The start of the current hour's counts.
    #[serde(with = "time::serde::rfc3339")]
    pub window_start: OffsetDateTime,
    pub attempts: u32,
    pub successes: u32,
    /// The hour before's.
    pub previous_attempts: u32,
    pub previous_successes: u32,
    /// The highest warning level sent for the failures in a row (0: none).
    pub warned: u8,
    pub version: u64,
}

/// One attempt as the health counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub at: OffsetDateTime,
    pub delivered: bool,
    /// The receiver said `410 Gone`: it wants nothing more.
    pub gone: bool,
}

/// What the attempts of a batch did to an endpoint's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tripped {
    /// Warning levels newly passed: those above `from` (the level warned before, or none
    /// after a success in the batch) up to `to`.
    Warning { from: u8, to: u8 },
    /// The endpoint is to be disabled: its failures went on long enough, or it said it is gone.
    Disable { gone: bool },
}

impl EndpointHealth {
    pub fn new(endpoint_id: WebhookEndpointId, now: OffsetDateTime) -> EndpointHealth {
        EndpointHealth {
            endpoint_id,
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: None,
            last_failure_at: None,
            window_start: now,
            attempts: 0,
            successes: 0,
            previous_attempts: 0,
            previous_successes: 0,
            warned: 0,
            version: 0,
        }
    }

    /// Successes over attempts in this hour and the one before; none without attempts.
    pub fn success_rate(&self) -> Option<f64> {
        let attempts = self.attempts + self.previous_attempts;
        (attempts > 0).then(|| f64::from(self.successes + self.previous_successes) / f64::from(attempts))
    }

    /// Counts `outcomes` (in the order they happened) and says what the breaker does: the
    /// highest warning newly reached, or to disable the endpoint.
    pub fn record(&mut self, outcomes: &[Outcome], breaker: &Breaker) -> Option<Tripped> {
        let mut gone = false;
        for outcome in outcomes {
            self.roll_window(outcome.at);
            self.attempts += 1;
            if outcome.delivered {
                self.successes += 1;
                self.consecutive_failures = 0;
                self.failing_since = None;
                self.warned = 0;
                self.last_success_at = Some(outcome.at);
            } else {
                self.consecutive_failures += 1;
                self.failing_since.get_or_insert(outcome.at);
                self.last_failure_at = Some(outcome.at);
                gone |= outcome.gone;
            }
        }
        if gone {
            return Some(Tripped::Disable { gone: true });
        }
        let long_enough = match (self.failing_since, self.last_failure_at) {
            (Some(since), Some(last)) => last - since >= Duration::hours(i64::from(breaker.over_hours)),
            _ => false,
        };
        if self.consecutive_failures >= breaker.failures && long_enough {
            return Some(Tripped::Disable { gone: false });
        }
        let reached = WARNING_LEVELS
            .iter()
            .copied()
            .filter(|level| self.consecutive_failures >= breaker.warning_at(*level))
            .max()
            .filter(|level| *level > self.warned)?;
        let from = std::mem::replace(&mut self.warned, reached);
        Some(Tripped::Warning { from, to: reached })
    }

    fn roll_window(&mut self, at: OffsetDateTime) {
        if at - self.window_start < WINDOW {
            return;
        }
        let (attempts, successes) = match at - self.window_start < WINDOW * 2 {
            true => (self.attempts, self.successes),
            false => (0, 0),
        };
        self.previous_attempts = attempts;
        self.previous_successes = successes;
        self.attempts = 0;
        self.successes = 0;
        self.window_start = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn failed(at: OffsetDateTime) -> Outcome {
        Outcome {
            at,
            delivered: false,
            gone: false,
        }
    }

    #[test]
    fn the_breaker_warns_at_each_level_and_opens_after_its_failures_over_its_hours() {
        let breaker = Breaker {
            failures: 10,
            over_hours: 1,
        };
        let start = datetime!(2026-12-01 00:00 UTC);
        let mut health = EndpointHealth::new("whe_1".into(), start);
        let mut tripped = vec![];
        for minute in 0..12 {
            let at = start + Duration::minutes(minute * 10);
            tripped.push(health.record(&[failed(at)], &breaker));
        }
        assert_eq!(
            tripped,
            [
                None,
                None,
                None,
                None,
                Some(Tripped::Warning { from: 0, to: 50 }),
                None,
                Some(Tripped::Warning { from: 50, to: 70 }),
                None,
                Some(Tripped::Warning { from: 70, to: 90 }),
                // Ten in a row over 90 minutes: over the hour it needs.
                Some(Tripped::Disable { gone: false }),
                Some(Tripped::Disable { gone: false }),
                Some(Tripped::Disable { gone: false }),
            ]
        );
        // A success ends the run, and the warnings start again.
        let later = start + Duration::hours(3);
        let success = Outcome {
            at: later,
            delivered: true,
            gone: false,
        };
        assert_eq!(health.record(&[success], &breaker), None);
        assert_eq!((health.consecutive_failures, health.warned), (0, 0));
        assert_eq!(health.success_rate(), Some(1.0), "the hours before are past the window");
        let gone = Outcome {
            at: later,
            delivered: false,
            gone: true,
        };
        assert_eq!(health.record(&[gone], &breaker), Some(Tripped::Disable { gone: true }));
    }

    #[test]
    fn ten_failures_in_a_minute_do_not_open_a_breaker_that_asks_for_an_hour() {
        let breaker = Breaker {
            failures: 10,
            over_hours: 1,
        };
        let start = datetime!(2026-12-01 00:00 UTC);
        let mut health = EndpointHealth::new("whe_1".into(), start);
        let burst: Vec<Outcome> = (0..10).map(|s| failed(start + Duration::seconds(s))).collect();
        assert_eq!(
            health.record(&burst, &breaker),
            Some(Tripped::Warning { from: 0, to: 90 })
        );
        assert_eq!(health.success_rate(), Some(0.0));
        // A success, then five failures in one batch: the 50 % level is passed again, counted
        // from none (not from the 90 % warned before the success).
        let success = Outcome {
            at: start + Duration::seconds(20),
            delivered: true,
            gone: false,
        };
        let mut batch = vec![success];
        batch.extend((21..26).map(|s| failed(start + Duration::seconds(s))));
        assert_eq!(
            health.record(&batch, &breaker),
            Some(Tripped::Warning { from: 0, to: 50 })
        );
    }
}
