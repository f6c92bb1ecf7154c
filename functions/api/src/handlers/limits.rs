//! A customer's payout limits.

use super::*;
use crate::extract::{parse, Caller, JsonBody, PathParam};
use crate::App;
use axum::extract::State;

/// `GET /v1/customers/{id}/payout_limits`: each currency's limits with today's and this
/// month's use.
pub async fn get_payout_limits(State(app): State<App>, Caller(caller): Caller, PathParam(id): PathParam) -> Answer {
    ok(app.service.payout_limits(&caller, &id).await?)
}

/// `PUT /v1/customers/{id}/payout_limits {limits: [...], reason?}`: replaces them all.
pub async fn put_payout_limits(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(id): PathParam,
    JsonBody(body): JsonBody,
) -> Answer {
    let command = parse(&body)?;
    ok(app.service.set_payout_limits(&caller, &id, command).await?)
}
