use crate::ports::{BlobError, BusError, QueueError, SecretsError, StoreError, TimerError};
use thiserror::Error;

/// Everything a use case can refuse. The HTTP layer maps each variant to a status code in one
/// place (`ops_api::error`); nothing here knows about status codes.
#[derive(Debug, Error)]
pub enum DomainError {
    /// Bad input: names the offending parameter where there is one.
    #[error("{message}")]
    InvalidRequest {
        code: &'static str,
        param: Option<String>,
        message: String,
    },
    /// The resource asked for (in the path, or named by `param`) does not exist, or belongs
    /// to someone the caller may not see.
    #[error("{message}")]
    NotFound { param: Option<String>, message: String },
    #[error("{message}")]
    Unauthenticated { code: &'static str, message: String },
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// A transition not allowed from the current status (or a decision already taken), or a
    /// value (`param`) another resource already holds.
    #[error("{message}")]
    InvalidState {
        code: &'static str,
        param: Option<&'static str>,
        message: String,
    },
    #[error("Keys for idempotent requests can only be used with the same parameters they were first used with.")]
    IdempotencyKeyReused,
    #[error("A request with this idempotency key is still being processed; retry later.")]
    IdempotencyKeyInUse,
    /// A key, its customer or a source made more requests this second than it may; nothing
    /// was done.
    #[error("{message}")]
    RateLimited {
        code: &'static str,
        message: String,
        /// The requests a second the caller was held to.
        limit: u32,
    },
    /// The store could not be reached or failed; nothing was written.
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    Timer(#[from] TimerError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// A rail's adapter could not be reached, or did not answer in time; nothing was changed.
    #[error("{message}")]
    RailUnavailable { message: String },
    /// An uploaded file with errors: each with its line and column (the first ones, and how
    /// many there were). Nothing was written.
    #[error("The file has {total} error(s); nothing was created.")]
    InvalidFile {
        errors: Vec<crate::files::LineError>,
        total: usize,
    },
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

    /// The resource in the request's path does not exist (for this caller).
    pub fn not_found(resource: &'static str, id: impl std::fmt::Display) -> Self {
        DomainError::NotFound {
            param: None,
            message: format!("No such {resource}: '{id}'"),
        }
    }

    /// The resource a request's `param` names does not exist (for this caller).
    pub fn missing_reference(param: impl Into<String>, message: impl Into<String>) -> Self {
        DomainError::NotFound {
            param: Some(param.into()),
            message: message.into(),
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

    /// A change that kept losing races with others to the same thing (409 `conflict`).
    pub fn conflict(message: impl Into<String>) -> Self {
        DomainError::invalid_state("conflict", message)
    }

    pub fn invalid_state(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::InvalidState {
            code,
            param: None,
            message: message.into(),
        }
    }

    /// A 409 for a value another resource already holds (an email, an account's currency):
    /// `param` names the field to change.
    pub fn taken(param: &'static str, code: &'static str, message: impl Into<String>) -> Self {
        DomainError::InvalidState {
            code,
            param: Some(param),
            message: message.into(),
        }
    }
}
