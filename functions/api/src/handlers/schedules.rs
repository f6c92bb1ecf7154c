//! Recurring operations.

use super::*;
use crate::extract::{parse, query_pairs, Caller, CreateBody, JsonBody, PathId};
use crate::idempotency::create_once;
use crate::App;
use axum::extract::{RawQuery, State};
use ops_domain::access::Scope;
use ops_domain::ids::{CustomerId, IdKind, ScheduleId};
use ops_domain::schedules::{ScheduleQuery, MAX_UPCOMING};

pub async fn create_schedule(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &request,
        |ticket| app.service.create_schedule(&caller, command, ticket),
    )
    .await
}

pub async fn list_schedules(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::Schedule, &[])?;
    let query = ScheduleQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(ScheduleId::from),
        limit: params.limit,
    };
    ok(app.service.list_schedules(&caller, query).await?)
}

pub async fn get_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.get_schedule(&caller, &id).await?)
}

pub async fn delete_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.delete_schedule(&caller, &id).await?)
}

pub async fn pause_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.pause_schedule(&caller, &id).await?)
}

pub async fn resume_schedule(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<ScheduleId>) -> Answer {
    ok(app.service.resume_schedule(&caller, &id).await?)
}

/// A schedule's occurrences, newest first; `before` (RFC 3339) pages back in time. With
/// `upcoming=N` (1 to 50), the next N times it will run instead.
pub async fn schedule_occurrences(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ScheduleId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let mut limit = 10;
    let mut before = None;
    let mut upcoming = None;
    for (name, value) in query_pairs(raw.as_deref(), &["limit", "before", "upcoming"])? {
        match name.as_str() {
            "limit" => limit = page_limit(&value)?,
            "upcoming" => {
                let count = value.parse::<usize>().ok().filter(|n| (1..=MAX_UPCOMING).contains(n));
                upcoming = Some(count.ok_or_else(|| {
                    ApiError::from(DomainError::invalid(
                        "upcoming",
                        "invalid_upcoming",
                        format!("upcoming is a count from 1 to {MAX_UPCOMING}."),
                    ))
                })?);
            }
            _ => before = Some(ops_domain::validate::rfc3339_time(&value, &name)?),
        }
    }
    if let Some(count) = upcoming {
        return ok(app.service.upcoming_occurrences(&caller, &id, count).await?);
    }
    ok(app.service.schedule_occurrences(&caller, &id, before, limit).await?)
}

/// Makes the occurrences of a past range the schedule did not make, each once.
pub async fn backfill_schedule(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ScheduleId>,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    ok(app.service.backfill_schedule(&caller, &id, command).await?)
}
