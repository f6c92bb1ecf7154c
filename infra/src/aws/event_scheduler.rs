//! The schedules' timer on EventBridge Scheduler: one schedule there per schedule here, named
//! by its id in the stack's schedule group, invoking the `schedule-fire` function with the
//! schedule id and the time of the occurrence (the Scheduler fills in the time).

use super::signed_calls::SignedCalls;
use async_trait::async_trait;
use aws_sigv4::http_request::SigningSettings;
use aws_types::SdkConfig;
use ops_domain::ids::ScheduleId;
use ops_domain::ports::TimerError;
use ops_domain::schedules::{Schedule, ScheduleStatus, ScheduleTimers};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::Method;
use serde_json::json;
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

/// What a path segment or query value leaves unescaped: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The Scheduler's three calls (CreateSchedule, UpdateSchedule, DeleteSchedule) on its REST
/// API, signed and sent as `SignedCalls` does.
pub struct EventBridgeTimers {
    calls: SignedCalls,
    /// `https://scheduler.{region}.amazonaws.com`, or the emulator's endpoint.
    endpoint: String,
    target: TimerTarget,
}

impl EventBridgeTimers {
    pub fn new(config: &SdkConfig, target: TimerTarget) -> Result<EventBridgeTimers, TimerError> {
        let calls = SignedCalls::new(config, "scheduler").map_err(TimerError::new)?;
        let endpoint = calls.endpoint("scheduler");
        Ok(EventBridgeTimers {
            calls,
            endpoint,
            target,
        })
    }

    /// What the Scheduler sends `schedule-fire`: the id, and the occurrence's time as the
    /// Scheduler's context attribute.
    pub fn input(id: &ScheduleId) -> String {
        json!({
            "schedule_id": id,
            "scheduled_at": "<aws.scheduler.scheduled-time>",
        })
        .to_string()
    }

    /// CreateSchedule's and UpdateSchedule's body: the whole schedule, times in epoch seconds.
    /// A schedule whose occurrences move to banking days is, while active, a one-off `at()`
    /// of its next run in UTC, which the service sets again after each firing: the
    /// Scheduler has no banking calendar.
    fn body(&self, schedule: &Schedule, now: OffsetDateTime) -> serde_json::Value {
        let state = match schedule.status {
            ScheduleStatus::Active => "ENABLED",
            _ => "DISABLED",
        };
        let one_off = schedule.next_run_at.filter(|_| schedule.moves_occurrences());
        let (expression, timezone) = match one_off {
            Some(next) => (at_expression(next), "UTC"),
            None => (schedule.expression.clone(), schedule.timezone.as_str()),
        };
        let mut body = json!({
            "ClientToken": client_token(),
            "GroupName": self.target.group,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {
                "Arn": self.target.function_arn,
                "RoleArn": self.target.role_arn,
                "Input": Self::input(&schedule.id),
            },
            "State": state,
        });
        if one_off.is_some() {
            return body;
        }
        // Where the Scheduler starts: the next run when it is still ahead (a rate then counts
        // from it, as here), else at once.
        if let Some(next) = schedule.next_run_at.filter(|next| *next > now) {
            body["StartDate"] = next.unix_timestamp().into();
        }
        if let Some(end) = schedule.end_at {
            body["EndDate"] = end.unix_timestamp().into();
        }
        body
    }

    fn schedule_url(&self, id: &ScheduleId) -> String {
        format!(
            "{}/schedules/{}",
            self.endpoint,
            utf8_percent_encode(id.as_str(), UNRESERVED)
        )
    }

    async fn send(&self, method: Method, url: &str, body: &serde_json::Value) -> Result<reqwest::Response, TimerError> {
        let body = match body.is_null() {
            true => Vec::new(),
            false => body.to_string().into_bytes(),
        };
        self.calls
            .send(
                &SigningSettings::default(),
                method,
                url,
                &[("content-type", "application/json")],
                body.into(),
            )
            .await
            .map_err(TimerError::new)
    }
}

/// `at(yyyy-mm-ddThh:mm:ss)`, the Scheduler's one-off expression.
fn at_expression(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "at({:04}-{:02}-{:02}T{:02}:{:02}:{:02})",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// The idempotency token the Scheduler's create, update and delete take, fresh for each call
/// (as the SDK makes one): a retry of the same call is then applied once.
fn client_token() -> String {
    let mut token = [0u8; 16];
    rand::fill(&mut token);
    hex::encode(token)
}

/// A failed call's answer: its error code as the Scheduler's protocol (restJson1) gives it, in
/// the `x-amzn-errortype` header or the body's `__type`, and the whole answer for the error.
async fn failure(call: &str, answer: reqwest::Response) -> (String, TimerError) {
    let status = answer.status();
    let header = answer
        .headers()
        .get("x-amzn-errortype")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let text = answer.text().await.unwrap_or_default();
    let body_type = || {
        let body: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(body.get("__type").or_else(|| body.get("code"))?.as_str()?.to_owned())
    };
    let code = header.or_else(body_type).unwrap_or_default();
    // `aws.protocols#ConflictException:http://…`: the name alone.
    let code = code.split(':').next().unwrap_or_default();
    let code = code.rsplit('#').next().unwrap_or_default().to_owned();
    (code, TimerError::new(format!("{call} answered {status}: {text}")))
}

#[async_trait]
impl ScheduleTimers for EventBridgeTimers {
    async fn put(&self, schedule: &Schedule) -> Result<(), TimerError> {
        let url = self.schedule_url(&schedule.id);
        let now = OffsetDateTime::now_utc();
        let created = self.send(Method::POST, &url, &self.body(schedule, now)).await?;
        if created.status().is_success() {
            return Ok(());
        }
        match failure("CreateSchedule", created).await {
            // It exists: the same schedule, changed.
            (code, _) if code == "ConflictException" => {
                let updated = self.send(Method::PUT, &url, &self.body(schedule, now)).await?;
                match updated.status().is_success() {
                    true => Ok(()),
                    false => Err(failure("UpdateSchedule", updated).await.1),
                }
            }
            (_, error) => Err(error),
        }
    }

    async fn remove(&self, id: &ScheduleId) -> Result<(), TimerError> {
        let url = format!(
            "{}?groupName={}&clientToken={}",
            self.schedule_url(id),
            utf8_percent_encode(&self.target.group, UNRESERVED),
            client_token()
        );
        let deleted = self.send(Method::DELETE, &url, &serde_json::Value::Null).await?;
        if deleted.status().is_success() {
            return Ok(());
        }
        match failure("DeleteSchedule", deleted).await {
            // Already gone.
            (code, _) if code == "ResourceNotFoundException" => Ok(()),
            (_, error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::failure;

    fn answer(status: u16, header: Option<&str>, body: &str) -> reqwest::Response {
        let mut answer = http::Response::builder().status(status);
        if let Some(header) = header {
            answer = answer.header("x-amzn-errortype", header);
        }
        reqwest::Response::from(answer.body(body.to_owned()).unwrap())
    }

    #[tokio::test]
    async fn the_error_code_is_read_from_the_header_or_the_body_without_its_namespace() {
        let cases = [
            (
                409,
                Some("ConflictException:http://internal.amazon.com/coral/com.amazonaws.scheduler/"),
                "{}",
            ),
            (400, None, r#"{"__type": "ConflictException", "message": "exists"}"#),
            (409, None, r#"{"__type": "com.amazonaws.scheduler#ConflictException"}"#),
        ];
        for (status, header, body) in cases {
            let (code, error) = failure("CreateSchedule", answer(status, header, body)).await;
            assert_eq!(code, "ConflictException", "{header:?} {body}");
            assert!(error.to_string().contains(&status.to_string()), "{error}");
        }
        let (code, _) = failure("DeleteSchedule", answer(500, None, "<html>")).await;
        assert_eq!(code, "");
    }
}
