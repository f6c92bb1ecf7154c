//! Reading requests: the bearer key, JSON bodies and query strings, each failure a precise 4xx.

use crate::deadline::BodyDeadlinePassed;
use crate::duplicates::{read_json, BodyJson};
use crate::error::ApiError;
use crate::App;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::Method;
use ops_domain::access::{Allowance, Principal, RequestKind};
use ops_domain::ids::TypedId;
use ops_domain::DomainError;
use serde::de::DeserializeOwned;

pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The address a request came from, as the entry point saw it (the peer on the local server,
/// API Gateway's `sourceIp` on Lambda): failed authentications are limited per address.
#[derive(Debug, Clone)]
pub struct ClientAddress(pub std::net::IpAddr);

/// Where the caller's [`Allowance`] is left for the answer's `RateLimit-*` headers
/// ([`crate::access::identify`] puts it in each request).
#[derive(Clone, Default)]
pub struct AllowanceSlot(pub std::sync::Arc<std::sync::OnceLock<Allowance>>);

/// The authenticated caller.
pub struct Caller(pub Principal);

impl FromRequestParts<App> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Self::Rejection> {
        let secret = match parts.headers.get(AUTHORIZATION) {
            None => None,
            Some(value) => {
                let bearer = value
                    .to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim);
                Some(bearer.filter(|s| !s.is_empty()).ok_or_else(|| {
                    DomainError::unauthenticated("invalid_authorization_header", "Use 'Authorization: Bearer <key>'.")
                })?)
            }
        };
        let source = parts.extensions.get::<ClientAddress>().map(|a| a.0);
        let request = match parts.method {
            Method::GET | Method::HEAD => RequestKind::Read,
            _ => RequestKind::Change,
        };
        let authenticated = app.service.authenticate(secret, source, request).await?;
        crate::access::record_caller(&authenticated.principal);
        if let (Some(allowance), Some(AllowanceSlot(slot))) = (authenticated.allowance, parts.extensions.get()) {
            let _ = slot.set(allowance);
        }
        Ok(Caller(authenticated.principal))
    }
}

/// The one path parameter of a route (an id or a name), with a malformed path (bad percent
/// encoding) answered in the API's error shape.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| PathParam(value))
            .map_err(|e| DomainError::invalid("path", "invalid_path", format!("The URL path is malformed: {e}")).into())
    }
}

/// The query of an endpoint whose only parameter is `customer_id` (whose workflow it reads or
/// saves, whose webhook endpoints it lists); any other parameter is refused.
pub struct CustomerQuery(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for CustomerQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut pairs = query_pairs(parts.uri.query(), &["customer_id"])?;
        Ok(CustomerQuery(pairs.pop().map(|(_, value)| value)))
    }
}

/// A path parameter that is an id, read into its type: an id of another shape names nothing,
/// so it is answered 404 here, before any use case runs.
pub struct PathId<T>(pub T);

impl<S: Send + Sync, T: TypedId> FromRequestParts<S> for PathId<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let PathParam(raw) = PathParam::from_request_parts(parts, state).await?;
        T::parse(&raw)
            .map(PathId)
            .ok_or_else(|| DomainError::not_found(T::RESOURCE, raw).into())
    }
}

/// The two path parameters of a nested route (`/v1/customers/{id}/approval_floors/{type}`).
pub struct PathParams(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path((first, second))| PathParams(first, second))
            .map_err(|e| DomainError::invalid("path", "invalid_path", format!("The URL path is malformed: {e}")).into())
    }
}

/// A JSON body (an empty body reads as `{}`) of at most `LIMIT` bytes, kept as a value so it
/// can be fingerprinted before it is parsed into a command.
pub struct JsonBody<const LIMIT: usize = MAX_BODY_BYTES>(pub serde_json::Value);

/// A statement's body: 4 MiB base64-encoded, within a Lambda function's 6 MB request.
pub const STATEMENT_BODY_BYTES: usize = 6 * 1024 * 1024;

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for JsonBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        let is_json = content_type_is(&request, "application/json");
        let bytes = read_body(request, LIMIT).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(serde_json::json!({})));
        }
        if is_json == Some(false) {
            return Err(ApiError::UnsupportedMediaType {
                expected: "application/json",
            });
        }
        let value = read_json(&bytes).map_err(|error| match error {
            BodyJson::Invalid(e) => ApiError::InvalidJson(e.to_string()),
            BodyJson::RepeatedKey(path) => repeated_key(path).into(),
        })?;
        Ok(JsonBody(value))
    }
}

/// What a create reads besides its caller: its headers (the idempotency key among them), its
/// path as routed (what the key stands for, with the body) and its JSON body.
pub struct CreateBody<const LIMIT: usize = MAX_BODY_BYTES> {
    pub headers: axum::http::HeaderMap,
    pub path: String,
    pub body: serde_json::Value,
}

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for CreateBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = request.headers().clone();
        let path = request.uri().path().to_owned();
        let JsonBody(body) = JsonBody::<LIMIT>::from_request(request, state).await?;
        Ok(CreateBody { headers, path, body })
    }
}

/// A body that repeats a key is refused with the key's path: which value would win is not
/// something a client should have to guess.
pub fn repeated_key(path: String) -> DomainError {
    let message = format!("The body repeats the key {path}; send each key once.");
    DomainError::invalid(path, "duplicate_key", message)
}

/// Whether the request's `Content-Type` is `media_type` (parameters aside); `None` without one.
fn content_type_is(request: &Request, media_type: &str) -> Option<bool> {
    request.headers().get(CONTENT_TYPE).map(|v| {
        v.to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case(media_type)
    })
}

/// A file's body, at most [`MAX_FILE_BYTES`]: a payroll CSV (`Content-Type: text/csv`) or a
/// pain.001 (`application/xml` or `text/xml`); any other type is refused.
///
/// [`MAX_FILE_BYTES`]: ops_domain::files::MAX_FILE_BYTES
pub struct FileBody(pub ops_domain::files::FileFormat, pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for FileBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        use ops_domain::files::FileFormat;
        let format = if content_type_is(&request, "text/csv") == Some(true) {
            FileFormat::Csv
        } else if ["application/xml", "text/xml"]
            .iter()
            .any(|xml| content_type_is(&request, xml) == Some(true))
        {
            FileFormat::Pain001
        } else {
            return Err(ApiError::UnsupportedMediaType {
                expected: "text/csv' (a payroll CSV) or 'application/xml' (a pain.001",
            });
        };
        Ok(FileBody(
            format,
            read_body(request, ops_domain::files::MAX_FILE_BYTES).await?,
        ))
    }
}

/// The raw body, for requests whose signature covers the exact bytes.
pub struct RawBody(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        Ok(RawBody(read_body(request, MAX_BODY_BYTES).await?))
    }
}

/// The whole body, at most `limit` bytes. Reading it fails three ways, each answered for what
/// it is: too long (413), not arrived by its deadline (408, local mode's [`body_deadline`]), or
/// cut off or malformed on the wire (400).
///
/// [`body_deadline`]: crate::deadline::body_deadline
async fn read_body(request: Request, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(request.into_body(), limit).await.map_err(|error| {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = cause {
            if current.is::<http_body_util::LengthLimitError>() {
                return ApiError::BodyTooLarge { limit };
            }
            if let Some(BodyDeadlinePassed(within)) = current.downcast_ref() {
                return ApiError::BodyTimeout { within: *within };
            }
            cause = current.source();
        }
        ApiError::BodyUnreadable(error.to_string())
    })
}

/// Parses a command out of a JSON value, naming the offending field on failure.
pub fn parse<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, ApiError> {
    Ok(ops_domain::body::parse(value)?)
}

/// Refuses a request to an endpoint that takes no query parameters if it has any: a filter
/// the endpoint would ignore must not look applied (`GET /v1/workflows/{name}?customer_id=`).
pub async fn refuse_query(request: Request, next: axum::middleware::Next) -> axum::response::Response {
    match query_pairs(request.uri().query(), &[]) {
        Ok(_) => next.run(request).await,
        Err(refused) => axum::response::IntoResponse::into_response(refused),
    }
}

/// Query parameters as pairs; parameters not in `allowed` are refused.
pub fn query_pairs(raw: Option<&str>, allowed: &[&str]) -> Result<Vec<(String, String)>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.unwrap_or(""))
        .map_err(|e| DomainError::invalid("query", "invalid_query", format!("The query string is malformed: {e}")))?;
    if let Some((name, _)) = pairs.iter().find(|(name, _)| !allowed.contains(&name.as_str())) {
        return Err(DomainError::invalid(
            name.clone(),
            "parameter_unknown",
            format!("Received unknown parameter: {name}"),
        )
        .into());
    }
    // As with a body's repeated key: which value would win is not for a client to guess.
    let mut seen = std::collections::HashSet::new();
    if let Some((name, _)) = pairs.iter().find(|(name, _)| !seen.insert(name.as_str())) {
        return Err(DomainError::invalid(
            name.clone(),
            "parameter_repeated",
            format!("The query repeats the parameter {name}; send it once."),
        )
        .into());
    }
    Ok(pairs)
}

#[cfg(test)]
mod properties {
    use super::parse;
    use crate::error::ApiError;
    use ops_domain::validate::CreateOperation;
    use ops_domain::DomainError;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
            prop_oneof![
                Just("payout"),
                Just("CLP"),
                Just("auto"),
                Just("psp-local:sandbox"),
                Just("RUT")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("type"),
                        Just("currency"),
                        Just("items"),
                        Just("workflow"),
                        Just("amount"),
                        Just("beneficiary"),
                        Just("destination"),
                        Just("rail"),
                        Just("account"),
                        Just("id"),
                        Just("id_type"),
                        Just("metadata"),
                        Just("x")
                    ]
                    .prop_map(String::from),
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any JSON at all is either a valid operation or a 400 that names a parameter.
        #[test]
        fn any_json_is_a_valid_operation_or_a_precise_refusal(body in json_value()) {
            let outcome = parse::<CreateOperation>(&body).and_then(|c| c.validate(&|rail| rail == "psp-local:sandbox").map_err(ApiError::from));
            match outcome {
                Ok(_) => {}
                Err(ApiError::Domain(DomainError::InvalidRequest { param, .. })) => prop_assert!(param.is_some_and(|p| !p.is_empty())),
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }

    #[test]
    fn a_well_formed_operation_parses() {
        let body = json!({"type": "payout", "currency": "CLP", "workflow": "auto", "items": [{"beneficiary": {"id_type": "RUT", "id": "1"}, "destination": {"rail": "psp-local:sandbox", "account": "1"}, "amount": 5}]});
        assert!(parse::<CreateOperation>(&body)
            .unwrap()
            .validate(&|rail| rail == "psp-local:sandbox")
            .is_ok());
    }
}

#[cfg(test)]
mod reading {
    use super::read_body;
    use crate::deadline::body_deadline;
    use crate::error::ApiError;
    use axum::body::{Body, Bytes};
    use axum::extract::{Request, State};
    use futures_util::stream;
    use std::time::Duration;

    fn request(body: Body) -> Request {
        Request::builder().method("POST").uri("/").body(body).unwrap()
    }

    fn cut_off() -> Body {
        let frames = [
            Ok(Bytes::from_static(b"{\"ty")),
            Err(std::io::Error::other("connection reset")),
        ];
        Body::from_stream(stream::iter(frames))
    }

    #[tokio::test]
    async fn each_way_a_body_fails_to_arrive_is_told_apart() {
        let long = read_body(request(Body::from(vec![b' '; 11])), 10).await;
        assert!(matches!(long, Err(ApiError::BodyTooLarge { limit: 10 })), "{long:?}");

        let broken = read_body(request(cut_off()), 10).await;
        assert!(matches!(broken, Err(ApiError::BodyUnreadable(_))), "{broken:?}");

        let within = Duration::from_millis(50);
        let never = Body::from_stream(stream::pending::<Result<Bytes, std::io::Error>>());
        let late = read_body(body_deadline(State(within), request(never)).await, 10).await;
        assert!(
            matches!(late, Err(ApiError::BodyTimeout { within: w }) if w == within),
            "{late:?}"
        );

        // Under a deadline, a body that breaks is still broken, and one in time is read.
        let broken = read_body(body_deadline(State(within), request(cut_off())).await, 10).await;
        assert!(matches!(broken, Err(ApiError::BodyUnreadable(_))), "{broken:?}");
        let read = read_body(body_deadline(State(within), request(Body::from("{}"))).await, 10).await;
        assert_eq!(read.unwrap(), Bytes::from_static(b"{}"));
    }
}
