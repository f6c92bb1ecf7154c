//! The schedules' timer on EventBridge Scheduler: one schedule there per schedule here, named
//! by its id in the stack's schedule group, invoking the `schedule-fire` function with the
//! schedule id and the time of the occurrence (the Scheduler fills in the time).

use async_trait::async_trait;
use aws_sdk_scheduler::error::ProvideErrorMetadata;
use aws_sdk_scheduler::primitives::DateTime;
use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target};
use aws_sdk_scheduler::Client;
use ops_domain::ids::ScheduleId;
use ops_domain::ports::TimerError;
use ops_domain::schedules::{Schedule, ScheduleStatus, ScheduleTimers};
use time::OffsetDateTime;

/// Where the timers live and what they invoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerTarget {
    /// The stack's schedule group.
    pub group: String,
    /// The `schedule-fire` function.
    pub function_arn: String,
    /// The role the Scheduler assumes to invoke it.
    pub role_arn: String,
}

pub struct EventBridgeTimers {
    client: Client,
    target: TimerTarget,
}

impl EventBridgeTimers {
    pub fn new(client: Client, target: TimerTarget) -> EventBridgeTimers {
        EventBridgeTimers { client, target }
    }

    /// What the Scheduler sends `schedule-fire`: the id, and the occurrence's time as the
    /// Scheduler's context attribute.
    pub fn input(id: &ScheduleId) -> String {
        serde_json::json!({
            "schedule_id": id,
            "scheduled_at": "<aws.scheduler.scheduled-time>",
        })
        .to_string()
    }

    fn parts(&self, schedule: &Schedule) -> Result<(FlexibleTimeWindow, Target), TimerError> {
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(TimerError::new)?;
        let target = Target::builder()
            .arn(&self.target.function_arn)
            .role_arn(&self.target.role_arn)
            .input(Self::input(&schedule.id))
            .build()
            .map_err(TimerError::new)?;
        Ok((window, target))
    }
}

fn date(at: OffsetDateTime) -> DateTime {
    DateTime::from_secs(at.unix_timestamp())
}

/// Where the Scheduler starts: the next run when it is still ahead (a rate then counts from
/// it, as here), else at once.
fn start(schedule: &Schedule, now: OffsetDateTime) -> Option<DateTime> {
    schedule.next_run_at.filter(|next| *next > now).map(date)
}

#[async_trait]
impl ScheduleTimers for EventBridgeTimers {
    async fn put(&self, schedule: &Schedule) -> Result<(), TimerError> {
        let (window, target) = self.parts(schedule)?;
        let state = match schedule.status {
            ScheduleStatus::Active => ScheduleState::Enabled,
            _ => ScheduleState::Disabled,
        };
        let now = OffsetDateTime::now_utc();
        let created = self
            .client
            .create_schedule()
            .name(schedule.id.as_str())
            .group_name(&self.target.group)
            .schedule_expression(&schedule.expression)
            .schedule_expression_timezone(&schedule.timezone)
            .set_start_date(start(schedule, now))
            .set_end_date(schedule.end_at.map(date))
            .flexible_time_window(window.clone())
            .target(target.clone())
            .state(state.clone())
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some("ConflictException") => self
                .client
                .update_schedule()
                .name(schedule.id.as_str())
                .group_name(&self.target.group)
                .schedule_expression(&schedule.expression)
                .schedule_expression_timezone(&schedule.timezone)
                .set_start_date(start(schedule, now))
                .set_end_date(schedule.end_at.map(date))
                .flexible_time_window(window)
                .target(target)
                .state(state)
                .send()
                .await
                .map(|_| ())
                .map_err(TimerError::new),
            Err(error) => Err(TimerError::new(error)),
        }
    }

    async fn remove(&self, id: &ScheduleId) -> Result<(), TimerError> {
        match self
            .client
            .delete_schedule()
            .name(id.as_str())
            .group_name(&self.target.group)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some("ResourceNotFoundException") => Ok(()),
            Err(error) => Err(TimerError::new(error)),
        }
    }
}
