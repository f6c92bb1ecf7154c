//! The one place where errors become HTTP responses (the API's error shape).

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ops_domain::files::LineError;
use ops_domain::DomainError;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("The request body is larger than {limit} bytes.")]
    BodyTooLarge { limit: usize },
    #[error("The request body did not arrive whole within {} seconds of its headers.", .within.as_secs_f64())]
    BodyTimeout { within: std::time::Duration },
    #[error("The request body could not be read to its end ({0}); send it again, whole.")]
    BodyUnreadable(String),
    #[error("The request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("Send this body with 'Content-Type: {expected}'.")]
    UnsupportedMediaType { expected: &'static str },
    #[error("Unrecognized request URL ({0}).")]
    UnknownRoute(String),
    #[error("This URL does not accept this method.")]
    MethodNotAllowed,
}

impl ApiError {
    /// (status, type, code, param)
    fn parts(&self) -> (StatusCode, &'static str, &'static str, Option<&str>) {
        use DomainError as D;
        match self {
            ApiError::Domain(error) => match error {
                D::InvalidRequest { code, param, .. } => {
                    (StatusCode::BAD_REQUEST, "invalid_request_error", code, param.as_deref())
                }
                D::NotFound { param, .. } => (
                    StatusCode::NOT_FOUND,
                    "invalid_request_error",
                    "resource_missing",
                    param.as_deref(),
                ),
                D::Unauthenticated { code, .. } => (StatusCode::UNAUTHORIZED, "authentication_error", code, None),
                D::Forbidden { code, .. } => (StatusCode::FORBIDDEN, "permission_error", code, None),
                D::InvalidState { code, param, .. } => (StatusCode::CONFLICT, "state_error", code, *param),
                D::IdempotencyKeyReused => (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_error",
                    "idempotency_key_reused",
                    Some("Idempotency-Key"),
                ),
                D::IdempotencyKeyInUse => (
                    StatusCode::CONFLICT,
                    "idempotency_error",
                    "idempotency_key_in_use",
                    Some("Idempotency-Key"),
                ),
                D::RateLimited { code, .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", code, None),
                D::InvalidFile { .. } => (
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "invalid_file",
                    Some("file"),
                ),
                D::RailUnavailable { .. } => (StatusCode::BAD_GATEWAY, "api_error", "rail_unavailable", None),
                D::Store(_) | D::Queue(_) | D::Secrets(_) | D::Bus(_) | D::Timer(_) | D::Blob(_) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, "api_error", "internal_error", None)
                }
            },
            ApiError::BodyTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "body_too_large",
                None,
            ),
            ApiError::BodyTimeout { .. } => (
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                "body_timeout",
                None,
            ),
            ApiError::BodyUnreadable(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "body_unreadable",
                None,
            ),
            ApiError::InvalidJson(_) => (StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_json", None),
            ApiError::UnsupportedMediaType { .. } => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                "unsupported_media_type",
                Some("Content-Type"),
            ),
            ApiError::UnknownRoute(_) => (StatusCode::NOT_FOUND, "invalid_request_error", "unknown_route", None),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "method_not_allowed",
                None,
            ),
        }
    }
}

/// An error and every error beneath it, for the log (an SDK error's detail is in its sources).
fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl ApiError {
    /// The status and the `error` object of this error, as a response (or one answer of a
    /// bulk request) carries them.
    pub fn into_status_and_body(self) -> (StatusCode, ErrorObject) {
        let (status, kind, code, param) = self.parts();
        let param = param.map(str::to_owned);
        let message = match &self {
            // Internal details go to the log, not to the client.
            ApiError::Domain(
                failure @ (DomainError::Store(_)
                | DomainError::Queue(_)
                | DomainError::Secrets(_)
                | DomainError::Bus(_)
                | DomainError::Timer(_)
                | DomainError::Blob(_)),
            ) => {
                tracing::error!(error = %with_sources(failure), "infrastructure failure");
                // Not "nothing was changed": a store that failed mid-write may have written part,
                // which the key's record settles. A retry under the key finishes the request once,
                // or is told the key is in use until that record's lock (a minute) has passed.
                "Something went wrong on our side. Retry with the same Idempotency-Key: the request is done once at most, and a retry may be told the key is in use for up to a minute."
                    .to_string()
            }
            other => other.to_string(),
        };
        let (errors, error_count) = match self {
            ApiError::Domain(DomainError::InvalidFile { errors, total }) => (Some(errors), Some(total)),
            _ => (None, None),
        };
        let error = ErrorObject {
            kind,
            code,
            message,
            param,
            errors,
            error_count,
            request_id: crate::access::request_id(),
        };
        (status, error)
    }
}

/// The `error` object, its keys in the order the design gives them.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorObject {
    #[serde(rename = "type")]
    kind: &'static str,
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<String>,
    /// A refused file's first line errors, and how many it had in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<Vec<LineError>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_count: Option<usize>,
    request_id: String,
}

#[derive(Serialize)]
struct ErrorBody {
    error: ErrorObject,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let held_to = match &self {
            ApiError::Domain(DomainError::RateLimited { limit, .. }) => Some(*limit),
            _ => None,
        };
        let (status, error) = self.into_status_and_body();
        let mut response = (status, axum::Json(ErrorBody { error })).into_response();
        if let Some(limit) = held_to {
            // Windows are one second long: the next one admits the key again.
            let headers = response.headers_mut();
            headers.insert("retry-after", HeaderValue::from_static("1"));
            crate::access::rate_limit_headers(headers, limit, 0);
        }
        response
    }
}
