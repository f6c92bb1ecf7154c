//! Answers too large for a Lambda response (6 MB; a long report) are written to the blob
//! store and answered `303 See Other` with a short-lived link to them, so the client gets the
//! whole answer, by one more GET, however large it is. Local mode streams instead.

use crate::App;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ops_domain::ids::{IdGenerator, IdKind, UlidGenerator};
use std::sync::LazyLock;

/// What a Lambda function may answer inline: its 6 MB payload limit, less room for headers
/// and the envelope.
pub const LAMBDA_RESPONSE_LIMIT: usize = 5_500_000;
/// How long the link to a spilled answer works.
pub const LINK_VALID_FOR: time::Duration = time::Duration::minutes(15);

static KEYS: LazyLock<UlidGenerator> = LazyLock::new(UlidGenerator::default);

/// Middleware: answers larger than `limit` bytes go to the blob store behind a link.
pub async fn spill_large_answers(State((app, limit)): State<(App, usize)>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    // A function's answer is whole in memory anyway (Lambda sends it in one piece).
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::error!(%error, "an answer could not be read to its end");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    if bytes.len() <= limit {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let key = format!("answers/{}", KEYS.new_id(IdKind::Request));
    let blobs = &app.service.blobs;
    let link = match blobs.put(&key, &content_type, bytes.to_vec()).await {
        Ok(()) => blobs.link(&key, LINK_VALID_FOR).await,
        Err(error) => Err(error),
    };
    match link {
        Ok(Some(url)) => {
            let expires_at = app.service.clock.now() + LINK_VALID_FOR;
            let body = serde_json::json!({
                "object": "answer_link",
                "url": url,
                "bytes": bytes.len(),
                "content_type": content_type,
                "expires_at": expires_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
            });
            let mut response = (StatusCode::SEE_OTHER, axum::Json(body)).into_response();
            if let Ok(location) = HeaderValue::from_str(&url) {
                response.headers_mut().insert(LOCATION, location);
            }
            response
        }
        // No link to give (a store without them): the answer as it is.
        Ok(None) => Response::from_parts(parts, Body::from(bytes)),
        Err(error) => {
            tracing::error!(%error, "an oversized answer could not be kept");
            crate::ApiError::from(ops_domain::DomainError::from(error)).into_response()
        }
    }
}
