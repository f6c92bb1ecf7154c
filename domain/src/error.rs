use thiserror::Error;

/// Everything a use case can refuse. The HTTP layer maps each variant to a status code in one
/// place (`ops_api::error`); nothing here knows about status codes.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum DomainError {
    /// Bad input: names the offending parameter where there is one.
    #[error("{message}")]
    InvalidRequest {
        code: &'static str,
        param: Option<String>,
        message: String,
    },
    #[error("No such {resource}: '{id}'")]
    NotFound { resource: &'static str, id: String },
    #[error("{message}")]
    Unauthenticated { code: &'static str, message: String },
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// A transition not allowed from the current status (or a decision already taken).
    #[error("{message}")]
    InvalidState { code: &'static str, message: String },
    #[error("Keys for idempotent requests can only be used with the same parameters they were first used with.")]
    IdempotencyKeyReused,
    #[error("A request with this idempotency key is still being processed; retry later.")]
    IdempotencyKeyInUse,
    /// A key, its customer or a source made more requests this second than it may; nothing
    /// was done.
    #[error("{message}")]
    RateLimited { code: &'static str, message: String },
    /// The store could not be reached or failed; nothing was written.
    #[error("the store failed: {0}")]
    Store(String),
}

impl DomainError {
    pub fn invalid(param: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        DomainError::InvalidRequest {
            code,
            param: Some(param.into()),
            message: message.into(),
        }
    }

    pub fn missing(param: impl Into<String>) -> Self {
        let param = param.into();
        let message = format!("Missing required param: {param}.");
        DomainError::InvalidRequest {
            code: "parameter_missing",
            param: Some(param),
            message,
        }
    }

    pub fn not_found(resource: &'static str, id: impl Into<String>) -> Self {
        DomainError::NotFound {
            resource,
            id: id.into(),
        }
    }

    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::Forbidden {
            code,
            message: message.into(),
        }
    }

    pub fn unauthenticated(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::Unauthenticated {
            code,
            message: message.into(),
        }
    }

    pub fn invalid_state(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::InvalidState {
            code,
            message: message.into(),
        }
    }
}
