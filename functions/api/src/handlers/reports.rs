//! Reports, streamed.

use super::*;
use crate::extract::Caller;
use crate::App;
use axum::extract::{RawQuery, State};

/// `GET /v1/reports/operations?from=&to=[&customer_id=][&format=csv|json]`, streamed.
pub async fn operations_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service.report_page(&caller, &query, before.as_deref()).await
    })
    .await
}

/// `GET /v1/reports/transactions?from=&to=[&customer_id=][&format=csv|json]`: the
/// transactions of the period's operations, streamed.
pub async fn transactions_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service
            .transactions_report_page(&caller, &query, before.as_deref())
            .await
    })
    .await
}

/// `GET /v1/reports/movements?from=&to=&customer_id=[&format=csv|json]`: the movements on a
/// customer's accounts in the period, streamed.
pub async fn movements_report(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    crate::report::report(app, caller, raw, |app, caller, query, before| async move {
        app.service
            .movements_report_page(&caller, &query, before.as_deref())
            .await
    })
    .await
}
