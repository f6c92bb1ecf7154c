//! Banking calendars and rails' cut-offs.

use super::*;
use crate::extract::{parse, Caller, CreateBody, JsonBody, PathId, PathParam};
use crate::idempotency::create_once;
use axum::extract::RawQuery;
use ops_domain::access::require_platform_admin;
use ops_domain::ids::CalendarId;

/// `POST /v1/calendars {name, timezone, working_days?, holidays?: [{date, name}]}`.
pub async fn create_calendar(State(app): State<App>, Caller(caller): Caller, request: CreateBody) -> Answer {
    let command = parse(&request.body)?;
    create_once(&app, &caller, require_platform_admin(&caller), &request, |ticket| {
        app.service.create_calendar(&caller, command, ticket)
    })
    .await
}

pub async fn get_calendar(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<CalendarId>) -> Answer {
    ok(app.service.get_calendar(&caller, &id).await?)
}

/// `POST /v1/calendars/{id}/holidays {year, format: csv|ical, file}`: the year's holidays
/// replaced by the file's.
pub async fn import_holidays(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<CalendarId>,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    ok(app.service.import_holidays(&caller, &id, command).await?)
}

/// `PUT /v1/rails/{rail}/cutoffs {calendar_id, cutoffs: ["HH:MM", …], after_last_cutoff?}`.
pub async fn put_rail_cutoffs(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(rail): PathParam,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    ok(app.service.put_rail_cutoffs(&caller, &rail, command).await?)
}

/// `GET /v1/rails/{rail}/next_cutoff[?at=<RFC 3339>]`.
pub async fn next_cutoff(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(rail): PathParam,
    RawQuery(raw): RawQuery,
) -> Answer {
    let mut at = None;
    for (name, value) in query_pairs(raw.as_deref(), &["at"])? {
        at = Some(ops_domain::validate::rfc3339_time(&value, &name)?);
    }
    ok(app.service.next_cutoff(&caller, &rail, at).await?)
}
