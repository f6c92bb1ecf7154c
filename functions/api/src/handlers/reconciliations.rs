//! Statements imported and matched.

use super::*;
use crate::error::ApiError;
use crate::extract::{parse, query_pairs, Caller, CreateBody, JsonBody, PathId, PathParam, STATEMENT_BODY_BYTES};
use crate::idempotency::create_once;
use crate::App;
use axum::extract::{RawQuery, State};
use ops_domain::access::require_platform_admin;
use ops_domain::ids::ReconciliationId;
use ops_domain::DomainError;

/// `POST /v1/reconciliations {rail, statement (base64), format, period?}`: the statement
/// matched now; the answer is the reconciliation with its counts per outcome.
pub async fn import_statement(
    State(app): State<App>,
    Caller(caller): Caller,
    request: CreateBody<STATEMENT_BODY_BYTES>,
) -> Answer {
    let command: ops_domain::reconciliations::ImportStatement = parse(&request.body)?;
    if command.dry_run {
        // Changes nothing, so nothing to do once: no idempotency key is claimed.
        return ok(app.service.preview_statement(&caller, command).await?);
    }
    create_once(&app, &caller, require_platform_admin(&caller), &request, |ticket| {
        app.service.import_statement(&caller, command, ticket)
    })
    .await
}

/// `GET /v1/reconciliations[?rail=][&starting_after=<rec_…>][&limit=]`: newest import first.
pub async fn list_reconciliations(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let (mut rail, mut after, mut limit) = (None, None, 10);
    for (name, value) in query_pairs(raw.as_deref(), &["rail", "starting_after", "limit"])? {
        match name.as_str() {
            "rail" => rail = Some(value),
            "starting_after" => match ReconciliationId::parse(&value) {
                Some(id) => after = Some(id),
                None => {
                    let message = format!(
                        "'{value}' is not a reconciliation id (rec_ and 26 characters, as the list gives them)."
                    );
                    return Err(DomainError::invalid(name, "invalid_id", message).into());
                }
            },
            _ => limit = page_limit(&value)?,
        }
    }
    ok(app
        .service
        .list_reconciliations(&caller, rail, after.as_ref(), limit)
        .await?)
}

pub async fn get_reconciliation(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ReconciliationId>,
) -> Answer {
    ok(app.service.get_reconciliation(&caller, &id).await?)
}

/// `GET /v1/reconciliations/{id}/lines[?outcome=][&starting_after=<line number>][&limit=]`.
pub async fn reconciliation_lines(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<ReconciliationId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let (mut outcome, mut after, mut limit) = (None, None, 10);
    for (name, value) in query_pairs(raw.as_deref(), &["outcome", "starting_after", "limit"])? {
        let bad = |code, message: &str| ApiError::from(DomainError::invalid(name.clone(), code, message));
        match name.as_str() {
            "outcome" => {
                outcome = Some(serde_json::from_value(value.clone().into()).map_err(|_| {
                    bad(
                    "invalid_outcome",
                    "outcome is matched, matched_with_difference, mismatched, unmatched, wrong_direction, missing or balance_mismatch.",
                )
                })?)
            }
            "starting_after" => {
                after = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| bad("invalid_line", "starting_after is a line number."))?,
                )
            }
            _ => limit = page_limit(&value)?,
        }
    }
    ok(app
        .service
        .reconciliation_lines(&caller, &id, outcome, after, limit)
        .await?)
}

/// `GET /v1/reconciliation_rules/{rail}`: the rules the rail's statements are matched by
/// (version 0: the defaults).
pub async fn get_reconciliation_rules(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(rail): PathParam,
) -> Answer {
    ok(app.service.get_reconciliation_rules(&caller, &rail).await?)
}

/// `PUT /v1/reconciliation_rules/{rail} {match_order?, tolerance?, date_window_days?,
/// many_to_one?, difference_work_item_above?}`: a new version, audited.
pub async fn put_reconciliation_rules(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(rail): PathParam,
    JsonBody(body): JsonBody,
) -> Answer {
    let put: ops_domain::reconciliations::PutMatchingRules = parse(&body)?;
    ok(app.service.put_reconciliation_rules(&caller, &rail, put).await?)
}

/// `GET /v1/reconciliation_rules/{rail}/history`: every saved version, oldest first.
pub async fn reconciliation_rules_history(
    State(app): State<App>,
    Caller(caller): Caller,
    PathParam(rail): PathParam,
) -> Answer {
    ok(app.service.reconciliation_rules_history(&caller, &rail).await?)
}
