//! How a delivery that failed is tried again: the default schedule, or one the endpoint's
//! owner sets (exponential or linear waits), each with a maximum age past which the delivery
//! has failed, with its work item, as when the default schedule runs out.

use super::{retry_delay, RETRY_SPAN};
use crate::error::DomainError;
use serde::{Deserialize, Serialize};
use time::Duration;

/// The shortest wait a policy may set: a receiver is not hammered.
pub const MIN_WAIT_SECONDS: u32 = 10;
/// The longest wait between two tries, and where an exponential policy stops doubling.
pub const MAX_WAIT_SECONDS: u32 = 86_400;
/// The oldest a delivery may be tried at: a week.
pub const MAX_AGE_HOURS: u32 = 168;

/// An endpoint's retry policy; endpoints stored before policies were kept have the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RetryPolicy {
    /// 1 and 5 minutes, 30 minutes, 2, 5, 10, 10 and 24 hours (about 51.6 hours in all).
    #[default]
    Default,
    /// The first wait, then each twice the one before (up to a day), until the maximum age.
    Exponential {
        first_wait_seconds: u32,
        max_age_hours: u32,
    },
    /// The same wait each time, until the maximum age.
    Linear { wait_seconds: u32, max_age_hours: u32 },
}

impl RetryPolicy {
    /// The oldest a delivery is tried at.
    pub fn max_age(&self) -> Duration {
        match self {
            RetryPolicy::Default => RETRY_SPAN,
            RetryPolicy::Exponential { max_age_hours, .. } | RetryPolicy::Linear { max_age_hours, .. } => {
                Duration::hours(i64::from(*max_age_hours))
            }
        }
    }

    /// The wait before retry number `retry` (0-based) of a delivery `age` old, with up to 10%
    /// jitter (`jitter` in [0, 1)); `None` when there is no retry left: the schedule ran out,
    /// or the retry would come past the maximum age.
    pub fn next_wait(&self, retry: usize, age: Duration, jitter: f64) -> Option<Duration> {
        let base = match self {
            RetryPolicy::Default => return retry_delay(retry, jitter),
            RetryPolicy::Exponential { first_wait_seconds, .. } => {
                let doubled = u64::from(*first_wait_seconds) << retry.min(20);
                doubled.min(u64::from(MAX_WAIT_SECONDS))
            }
            RetryPolicy::Linear { wait_seconds, .. } => u64::from(*wait_seconds),
        };
        let base = Duration::seconds(base as i64);
        let wait = base + base * (0.1 * jitter.clamp(0.0, 1.0));
        (age + wait <= self.max_age()).then_some(wait)
    }

    /// Refuses a policy out of bounds, naming its field under `retry_policy.`.
    pub fn check(&self) -> Result<(), DomainError> {
        let (wait_field, wait, max_age_hours) = match self {
            RetryPolicy::Default => return Ok(()),
            RetryPolicy::Exponential {
                first_wait_seconds,
                max_age_hours,
            } => ("first_wait_seconds", *first_wait_seconds, *max_age_hours),
            RetryPolicy::Linear {
                wait_seconds,
                max_age_hours,
            } => ("wait_seconds", *wait_seconds, *max_age_hours),
        };
        if !(MIN_WAIT_SECONDS..=MAX_WAIT_SECONDS).contains(&wait) {
            return Err(DomainError::invalid(
                format!("retry_policy.{wait_field}"),
                "invalid_retry_policy",
                format!("{wait_field} is from {MIN_WAIT_SECONDS} to {MAX_WAIT_SECONDS} seconds (a day)."),
            ));
        }
        if !(1..=MAX_AGE_HOURS).contains(&max_age_hours) {
            return Err(DomainError::invalid(
                "retry_policy.max_age_hours",
                "invalid_retry_policy",
                format!("max_age_hours is from 1 to {MAX_AGE_HOURS} (a week)."),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_waits_as_it_says_and_stops_at_its_maximum_age() {
        let exponential = RetryPolicy::Exponential {
            first_wait_seconds: 60,
            max_age_hours: 2,
        };
        let waits: Vec<i64> = (0..4)
            .map(|retry| {
                exponential
                    .next_wait(retry, Duration::ZERO, 0.0)
                    .unwrap()
                    .whole_seconds()
            })
            .collect();
        assert_eq!(waits, [60, 120, 240, 480]);
        assert_eq!(
            exponential.next_wait(30, Duration::ZERO, 0.0),
            None,
            "a day's wait is past two hours"
        );
        let linear = RetryPolicy::Linear {
            wait_seconds: 600,
            max_age_hours: 1,
        };
        assert_eq!(
            linear.next_wait(5, Duration::minutes(50), 0.0),
            Some(Duration::minutes(10))
        );
        assert_eq!(linear.next_wait(6, Duration::minutes(51), 0.0), None);
        assert_eq!(
            RetryPolicy::Default.next_wait(0, Duration::ZERO, 0.0),
            Some(Duration::minutes(1))
        );
        assert_eq!(RetryPolicy::Default.max_age(), RETRY_SPAN);
        assert!(RetryPolicy::Linear {
            wait_seconds: 5,
            max_age_hours: 1
        }
        .check()
        .is_err());
        assert!(RetryPolicy::Exponential {
            first_wait_seconds: 60,
            max_age_hours: 169
        }
        .check()
        .is_err());
    }
}
