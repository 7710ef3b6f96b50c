//! Every HTTP route of the API, grouped by resource, and the page forms.
//!
//! [`api`] is the one route list of the JSON API: each handler carries its
//! OpenAPI description (`#[utoipa::path]`), and `routes!` registers it with
//! the router and the document at once, so a route cannot be served
//! undocumented or documented unserved (see `super::openapi`).
//!
//! - [`runs`]: create, list, read, cancel; a run's children and tree;
//!   models, the outbox
//! - [`sessions`]: a session's runs (one conversation or thread) and totals
//! - [`tools`]: the tools a project's runs can call, MCP servers' health
//! - [`agents`]: saved agents and their versions
//! - [`http_tools`]: a project's own HTTP tools
//! - [`traces`]: steps, the outline, the transcript, one tool call
//! - [`compare`]: two runs aligned step by step and message by message
//! - [`groups`]: comparison groups: one run on several models at once
//!   (`POST /api/runs/batch`), a group's members side by side
//! - [`conversation`]: follow-ups, edits (forks), the family, state
//!   export and import, large-result blobs
//! - [`approvals`]: approve, reject, the inbox
//! - [`datasets`]: versioned datasets of inputs and expected answers, their
//!   items (added, uploaded, made from runs, edited, deleted)
//! - [`requests`]: approvals and questions for agents runlens does not run
//! - [`events`]: the Server-Sent Event streams
//! - [`prices`]: the price table
//! - [`identity`]: the caller, projects, members, users; [`keys`]: API keys;
//!   [`audit`]: the audit log
//! - [`webhooks`]: status webhooks: subscriptions, secrets, a run's deliveries
//! - [`servers`]: the servers sharing the database (instance admins)
//! - [`agui`]: AG-UI clients run agents and follow them (`POST /api/agui`)
//! - [`otlp`]: OpenTelemetry spans of other agents in, as read-only runs (`POST /v1/traces`)
//! - [`docs`]: `/healthz`, the OpenAPI document and the `/api/docs` page
//! - [`forms`]: the pages' plain form posts (`/playground`, `/runs/import`),
//!   outside the API

pub mod agents;
pub mod agui;
pub mod approvals;
pub mod audit;
pub mod compare;
pub mod conversation;
pub mod datasets;
pub mod docs;
pub mod evaluators;
pub mod events;
pub mod experiments;
pub mod exports;
pub mod forms;
pub mod groups;
pub mod http_tools;
pub mod identity;
pub mod keys;
mod listing;
pub mod otlp;
pub mod prices;
pub mod requests;
pub mod retention;
pub mod reviews;
pub mod runs;
pub mod scores;
pub mod servers;
pub mod sessions;
pub mod tools;
pub mod traces;
pub mod webhooks;

use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;

use super::state::AppState;

/// The JSON API: every documented route, with its document.
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(super::openapi::base())
        .merge(runs::routes())
        .merge(sessions::routes())
        .merge(exports::routes())
        .merge(tools::routes())
        .merge(agents::routes())
        .merge(http_tools::routes())
        .merge(traces::routes())
        .merge(compare::routes())
        .merge(groups::routes())
        .merge(conversation::routes())
        .merge(approvals::routes())
        .merge(scores::routes())
        .merge(evaluators::routes())
        .merge(experiments::routes())
        .merge(reviews::routes())
        .merge(datasets::routes())
        .merge(requests::routes())
        .merge(events::routes())
        .merge(prices::routes())
        .merge(retention::routes())
        .merge(identity::routes())
        .merge(keys::routes())
        .merge(audit::routes())
        .merge(webhooks::routes())
        .merge(servers::routes())
        .merge(agui::routes())
        .merge(otlp::routes())
        .merge(docs::routes())
}

/// The project a collection request is about: `X-Runlens-Project` (see
/// `super::auth::PROJECT_HEADER`). Documented on the operations that act on
/// "the current project"; a project the caller has no role in is a 404.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct ProjectHeader {
    /// The project this request is about; without it, the session's current project, the key's project, or
    /// `default`. A project the caller has no role in answers 404.
    #[serde(rename = "X-Runlens-Project")]
    #[param(value_type = Option<ProjectName>, inline)]
    pub project: Option<String>,
}

/// A project name's schema.
pub struct ProjectName;

impl utoipa::PartialSchema for ProjectName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let name =
            serde_json::json!({"type": "string", "minLength": 1, "maxLength": 40, "pattern": "^[a-z0-9][a-z0-9-]*$"});
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(name))
    }
}

/// The path of a run's own endpoints.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// A run id.
    pub id: String,
}

/// The path of one tool call of a run.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CallPath {
    /// A run id.
    pub id: String,
    /// A tool call id of the run.
    pub call_id: String,
}
