//! Files of operations.

use super::*;
use crate::extract::{query_pairs, Caller, FileBody, PathId};
use crate::idempotency::run_once;
use crate::App;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use ops_domain::access::Scope;
use ops_domain::files::{FileQuery, UploadFile};
use ops_domain::idempotency::fingerprint_bytes;
use ops_domain::ids::{CustomerId, FileId, IdKind};
use ops_domain::DomainError;

/// `POST /v1/files?workflow=…[&customer_id=…][&allow_duplicate=true]` with a payroll CSV, or
/// with a pain.001 and `&rail=…`: validated whole, answered `202` with the file accepted (its
/// operations follow).
pub async fn upload_file(
    State(app): State<App>,
    Caller(caller): Caller,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    FileBody(format, bytes): FileBody,
) -> Answer {
    let mut command = UploadFile {
        format,
        ..UploadFile::default()
    };
    let pairs = query_pairs(raw.as_deref(), &["workflow", "customer_id", "allow_duplicate", "rail"])?;
    for (name, value) in &pairs {
        match name.as_str() {
            "workflow" => command.workflow = Some(value.clone()),
            "customer_id" => command.customer_id = Some(value.clone()),
            "rail" => command.rail = Some(value.clone()),
            _ => {
                command.allow_duplicate = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(DomainError::invalid(
                            "allow_duplicate",
                            "parameter_invalid",
                            "allow_duplicate is true or false.",
                        )
                        .into())
                    }
                }
            }
        }
    }
    // The query is part of the request a key stands for: the same bytes for another workflow
    // are another request.
    let mut query: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
    query.sort();
    let fingerprint = fingerprint_bytes("POST", &format!("/v1/files?{}", query.join("&")), &bytes);
    command.bytes = bytes.to_vec();
    run_once(
        &app,
        &caller,
        caller.require(Scope::OperationsWrite),
        &headers,
        fingerprint,
        StatusCode::ACCEPTED,
        |ticket| app.service.upload_file(&caller, command, ticket),
    )
    .await
}

pub async fn list_files(State(app): State<App>, Caller(caller): Caller, RawQuery(raw): RawQuery) -> Answer {
    let params = list_params(raw.as_deref(), IdKind::File, &[])?;
    let query = FileQuery {
        customer_id: params.customer_id.map(CustomerId::from),
        starting_after: params.starting_after.map(FileId::from),
        limit: params.limit,
    };
    ok(app.service.list_files(&caller, query).await?)
}

pub async fn get_file(State(app): State<App>, Caller(caller): Caller, PathId(id): PathId<FileId>) -> Answer {
    ok(app.service.get_file(&caller, &id).await?)
}

/// `GET /v1/files/{id}/status_report[?format=pain.002]`: a pain.001's status report, as its
/// operations and transactions now stand.
pub async fn file_status_report(
    State(app): State<App>,
    Caller(caller): Caller,
    PathId(id): PathId<FileId>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let pairs = query_pairs(raw.as_deref(), &["format"])?;
    let format = pairs.first().map(|(_, value)| value.as_str());
    let report = app.service.file_status_report(&caller, &id, format).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        report,
    )
        .into_response())
}
