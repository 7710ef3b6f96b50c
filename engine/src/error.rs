//! Errors the engine reports to its callers.
//!
//! The variants map one to one onto what an API answers (400, 404, 409, 500),
//! so the web layer never has to guess from a message.

use crate::status::IllegalTransition;

/// An error from an engine operation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request itself is wrong (unknown tool, empty prompt…).
    #[error("{0}")]
    Invalid(String),
    /// No such run (or tool call).
    #[error("{0} not found")]
    NotFound(String),
    /// The run is in a state where this cannot be done.
    #[error("{0}")]
    Conflict(String),
    /// The tool call was already decided (or is not awaiting a decision).
    #[error("{message}")]
    AlreadyDecided { message: String, decision: Option<Box<crate::model::ApprovalDecision>> },
    /// The credentials do not allow it (a used setup link).
    #[error("{0}")]
    Forbidden(String),
    /// Something that is not the caller's fault (hashing failed).
    #[error("{0}")]
    Internal(String),
    /// This server no longer holds the run's lease (another server took it
    /// over): the write was refused, and the driver stops without a trace.
    #[error("the lease on run `{0}` was lost")]
    LeaseLost(String),
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
    /// The database failed; details are logged, not shown to users.
    #[error("store error: {0}")]
    Store(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
