//! runlens-engine: the agent run engine, with no web types.
//!
//! - [`model`]: the serde data model (runs, steps, tool calls, messages), also
//!   compiled into the browser bundle (without the `runtime` feature).
//! - [`Engine`]: creates runs and schedules them (one tokio task per run
//!   under a semaphore, cancellation, approval timers, recovery); each task
//!   drives its run through the loop (model turn → tool calls → next turn)
//!   with a runtime that persists every step through a [`store::Store`] and
//!   publishes every change on the [`events::EventBus`]. Dependencies run
//!   one way: engine → runner → runtime → store, events, tools, llm.
//! - [`llm`]: the streaming model interface and the built-in deterministic model.
//! - [`tools`]: the tool trait, the registry with schema validation, and the
//!   built-in tools, one file each.
//! - `openapi` (feature `openapi`, in `model`): the schemas of fields the
//!   model types' `ToSchema` derives cannot describe alone, for the server's
//!   API document.
//! - [`cost`] prices usage per model; [`paging`] pages and previews huge traces
//!   (both also compiled into the browser bundle).

#[cfg(feature = "runtime")]
pub mod compare;
pub mod cost;
pub mod model;
pub mod paging;
pub mod status;

#[cfg(feature = "runtime")]
pub mod config;
#[cfg(feature = "runtime")]
mod engine;
#[cfg(feature = "runtime")]
pub mod error;
#[cfg(feature = "runtime")]
pub mod eval;
#[cfg(feature = "runtime")]
pub mod events;
#[cfg(feature = "runtime")]
pub mod identity;
#[cfg(feature = "runtime")]
pub mod llm;
#[cfg(feature = "runtime")]
pub mod net;
#[cfg(feature = "runtime")]
pub mod otel;
#[cfg(feature = "runtime")]
mod runner;
#[cfg(feature = "runtime")]
mod runtime;
#[cfg(feature = "runtime")]
pub mod store;
#[cfg(feature = "runtime")]
pub mod tools;

#[cfg(feature = "runtime")]
pub use config::RunlensConfig;
#[cfg(feature = "runtime")]
pub use engine::identity::{key_actor, user_actor, SETUP_TOKEN_TTL};
#[cfg(feature = "runtime")]
pub use engine::Datasets;
#[cfg(feature = "runtime")]
pub use engine::Evaluators;
#[cfg(feature = "runtime")]
pub use engine::Experiments;
#[cfg(feature = "runtime")]
pub use engine::Reviews;
/// The groups of the engine's methods (`engine.runs()`, `engine.approvals()`, …).
#[cfg(feature = "runtime")]
pub use engine::{
    Agents, Approvals, Cluster, Comparisons, Conversation, HttpTools, Identity, Otel, Requests, Runs, Scores,
    Snapshots, Traces, Webhooks,
};
#[cfg(feature = "runtime")]
pub use engine::{
    BlobState, CreatedRequest, Engine, ImportOptions, OtlpReport, PaceControl, Recovered, RecoveryPace, RunState,
    APPROVAL_DECIDED, JUDGE_TAG, JUDGE_TIMEOUT, LOOP_STEPS, MAX_RUN_REQUESTS, QUESTION_ANSWERED, STATE_SCHEMA_VERSION,
};
#[cfg(feature = "runtime")]
pub use error::EngineError;
/// The schemas of the API document (see `model::openapi`).
#[cfg(feature = "openapi")]
pub use model::openapi;
#[cfg(feature = "runtime")]
pub use runtime::EngineConfig;
