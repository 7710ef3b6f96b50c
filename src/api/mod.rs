//! Server functions behind the pages: thin wrappers over the engine.
//!
//! Each one reads the [`runlens_engine::Engine`] from context (provided by the
//! server both while rendering routes and while handling server-function
//! calls), so the same function serves the server render and the hydrated
//! page's refetches. Values that depend on "now" are computed here, on the
//! server, and shipped with the data: the browser bundle has no clock of its
//! own (chrono's clock is unavailable on `wasm32-unknown-unknown`) and the
//! server-rendered HTML must match what hydration renders.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Email, RunPage, RunTrace, ToolInfo};
use serde::{Deserialize, Serialize};

pub mod action_error;
mod agents;
mod approvals;
mod compare;
mod conversation;
pub mod datasets;
pub mod deliveries;
pub mod evaluators;
pub mod experiments;
pub mod forks;
mod http_tools;
mod identity;
pub mod preview;
pub mod prices;
pub mod requests;
pub mod retention;
pub mod reviews;
#[cfg(feature = "ssr")]
pub mod run_form;
pub mod run_tree;
pub mod scores;
pub mod servers;
mod sessions;
pub mod tools;
pub mod trace_scan;
pub mod trace_tree;
pub mod trace_window;
pub use action_error::{ActionError, ErrorKind};
pub use agents::*;
pub use approvals::*;
pub use compare::*;
pub use conversation::*;
pub use forks::*;
pub use http_tools::*;
pub use identity::*;
pub use sessions::*;

/// How many runs one page of the runs table shows.
pub const PAGE_SIZE: u32 = 50;

/// How many outbox emails the outbox page shows.
pub const OUTBOX_LIMIT: u32 = 100;

/// One page of runs plus the server's clock, for durations of active runs,
/// and the price table, for each run's cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunList {
    pub page: RunPage,
    pub now: DateTime<Utc>,
    pub pricing: runlens_engine::cost::Pricing,
    /// The caller's role in the project (the import form is for operators).
    pub role: Option<runlens_engine::model::Role>,
    /// The page's runs' scores, by run id, per score name.
    pub scores: std::collections::BTreeMap<String, Vec<runlens_engine::model::ScoreSummary>>,
}

/// A run's full trace plus the server's clock at the time it was read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceView {
    pub trace: RunTrace,
    pub now: DateTime<Utc>,
}

/// What the playground form offers: model names, attachable tools and the
/// project's saved agents (with the one picked, at the version picked).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlaygroundOptions {
    pub models: Vec<String>,
    pub tools: Vec<ToolInfo>,
    /// The caller's role in the current project (starting a run needs `operator`).
    pub role: Option<runlens_engine::model::Role>,
    pub agents: Vec<AgentChoice>,
    /// The agent picked (its current version unless one was asked for).
    pub agent: Option<runlens_engine::model::AgentVersion>,
    /// Why the agent picked could not be read (unknown agent or version).
    pub agent_error: Option<String>,
}

/// The runs list's filters, as the page's GET form submits them: empty
/// strings mean "no filter" (that is what an untouched form submits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunsQuery {
    pub status: Option<String>,
    /// `clean`, `rejected`, `tool_error` or `issues` (see `OutcomeFilter`).
    #[serde(default)]
    pub outcome: Option<String>,
    pub tag: Option<String>,
    /// Text in the name, prompt or metadata.
    pub q: Option<String>,
    /// Runs of this saved agent (by id).
    pub agent: Option<String>,
    /// `key:value` (or `key=value`) in the runs' metadata.
    pub metadata: Option<String>,
    /// Runs of this session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Runs that served this end user.
    #[serde(default)]
    pub user: Option<String>,
    /// Runs with a score passing this test (see `RunFilter::score`).
    #[serde(default)]
    pub score: Option<String>,
    /// Child runs too (by default only root runs are listed).
    #[serde(default)]
    pub all: bool,
    pub cursor: Option<String>,
}

/// Lists runs, newest first, root runs only unless `query.all`.
#[server]
pub async fn list_runs(query: RunsQuery) -> Result<RunList, ServerFnError> {
    use runlens_engine::model::{OutcomeFilter, RunFilter, RunStatus};

    let (engine, caller) = ssr::for_project(ssr::Role::Viewer)?;
    let status = match ssr::non_empty(query.status) {
        Some(s) => Some(RunStatus::parse(&s).ok_or_else(|| ServerFnError::new(format!("unknown status {s:?}")))?),
        None => None,
    };
    let outcome = match ssr::non_empty(query.outcome) {
        Some(o) => Some(OutcomeFilter::parse(&o).ok_or_else(|| ServerFnError::new(format!("unknown outcome {o:?}")))?),
        None => None,
    };
    let filter = RunFilter {
        status,
        outcome,
        tag: ssr::non_empty(query.tag).map(|t| crate::format::key_value(&t)),
        q: ssr::non_empty(query.q),
        agent_id: ssr::non_empty(query.agent),
        metadata: ssr::non_empty(query.metadata).map(|m| crate::format::key_value(&m)),
        session_id: ssr::non_empty(query.session_id),
        user: ssr::non_empty(query.user),
        score: ssr::non_empty(query.score).map(|s| s.trim().to_owned()),
        all: query.all.then_some(true),
        cursor: ssr::non_empty(query.cursor),
        limit: Some(PAGE_SIZE),
        project: Some(caller.project.clone()),
        ..Default::default()
    };
    let (mut page, pricing) =
        tokio::try_join!(engine.runs().list_runs(&filter), engine.traces().pricing(&caller.project))
            .map_err(ssr::to_server_error)?;
    page.runs.iter_mut().for_each(|run| {
        preview::cut_run(run);
    });
    let role = caller.role_in(&caller.project);
    let ids: Vec<String> = page.runs.iter().map(|r| r.id.clone()).collect();
    let scores = engine.scores().summaries(&caller.project, &ids).await.map_err(ssr::to_server_error)?;
    Ok(RunList { page, now: Utc::now(), pricing, role, scores })
}

/// The trace of one run; `Ok(None)` when there is no such run.
#[server]
pub async fn get_trace(id: String) -> Result<Option<TraceView>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, _)) = ssr::run_or_none(&id, ssr::Role::Viewer).await? else { return Ok(None) };
    match engine.runs().trace(&id).await {
        Ok(trace) => Ok(Some(TraceView { trace, now: Utc::now() })),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(ssr::to_server_error(e)),
    }
}

/// Cancels an active run. Fails with a readable message when the run is
/// unknown or already finished.
#[server]
pub async fn cancel_run(id: String) -> Result<(), ServerFnError> {
    let (engine, caller, _) = ssr::for_run(&id, ssr::Role::Operator).await?;
    engine.runs().cancel_by(&id, Some(&caller.actor)).await.map_err(ssr::to_server_error)?;
    Ok(())
}

/// Models, tools and agents for the playground form (any signed-in
/// caller), and agent `agent_id` at `agent_version` (its current one when
/// absent) when one is picked.
#[server]
pub async fn get_playground_options(
    agent_id: Option<String>,
    agent_version: Option<u32>,
) -> Result<PlaygroundOptions, ServerFnError> {
    use runlens_engine::model::AgentVersion;

    let engine = ssr::engine()?;
    let caller = ssr::caller()?;
    let role = caller.role_in(&caller.project);
    let may_read = role.is_some();
    let agents = match may_read {
        true => agents::choices_in(&engine, &caller.project).await.map_err(ssr::to_server_error)?,
        false => Vec::new(),
    };
    let (mut agent, mut agent_error) = (None, None);
    if let Some(id) = ssr::non_empty(agent_id).filter(|_| may_read) {
        let read = match agent_version {
            Some(v) => engine.agents().agent_version(&caller.project, &id, v).await,
            None => engine.agents().agent_in(&caller.project, &id).await.map(|a| AgentVersion {
                agent_id: a.id,
                version: a.version,
                created_at: a.updated_at,
                created_by: a.updated_by,
                spec: a.spec,
            }),
        };
        match read {
            Ok(v) => agent = Some(v),
            Err(e) => agent_error = Some(ssr::classify(e, "reading an agent").message),
        }
    }
    Ok(PlaygroundOptions {
        models: engine.models(),
        tools: engine.tools(&caller.project),
        role,
        agents,
        agent,
        agent_error,
    })
}

/// The outbox page's emails, long ones cut to a preview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outbox {
    pub emails: Vec<Email>,
    /// Ids of the emails whose subject or body was cut.
    pub cut: Vec<String>,
}

/// The most recent emails written by the `send_email` tool, newest first.
#[server]
pub async fn list_outbox() -> Result<Outbox, ServerFnError> {
    let (engine, caller) = ssr::for_project(ssr::Role::Viewer)?;
    let mut emails = engine.project_outbox(&caller.project, OUTBOX_LIMIT).await.map_err(ssr::to_server_error)?;
    let cut = emails.iter_mut().filter_map(|e| preview::cut_email(e).then(|| e.id.clone())).collect();
    Ok(Outbox { emails, cut })
}

#[cfg(feature = "ssr")]
mod ssr {
    use leptos::prelude::*;
    use runlens_engine::{Engine, EngineError};

    /// The engine the server put into context.
    pub fn engine() -> Result<Engine, ServerFnError> {
        use_context::<Engine>().ok_or_else(|| ServerFnError::new("the run engine is not available"))
    }

    /// An engine error as the pages show it: classified once for the REST
    /// API and the pages alike (`crate::server::error::ClientError`).
    pub fn to_server_error(err: EngineError) -> ServerFnError {
        ServerFnError::new(classify(err, "a server function").message)
    }

    pub use crate::server::error::{ClientError, ErrorKind};

    /// The one classification of engine errors (see `crate::server::error`).
    pub fn classify(err: EngineError, doing: &str) -> ClientError {
        ClientError::from_engine(err, doing)
    }

    /// Answers a hydrated page's call with `status` instead of the default
    /// (500 for an error). A plain form post (it accepts HTML) is left alone:
    /// it must get the redirect back to the page, with the error in the URL.
    pub fn set_status(status: axum::http::StatusCode) {
        use axum::http::{header::ACCEPT, request::Parts};

        let form_post = use_context::<Parts>().is_some_and(|p| {
            p.headers.get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
        });
        if let (false, Some(response)) = (form_post, use_context::<leptos_axum::ResponseOptions>()) {
            response.set_status(status);
        }
    }

    pub use crate::server::auth::Caller;
    pub use runlens_engine::model::Role;

    /// The caller of this request (see `crate::server::auth`); every page
    /// request and server function call has one, the middleware saw to it.
    pub fn caller() -> Result<Caller, ServerFnError> {
        use axum::http::request::Parts;
        use_context::<Parts>().and_then(|p| p.extensions.get::<Caller>().cloned()).ok_or_else(|| {
            set_status(axum::http::StatusCode::UNAUTHORIZED);
            ServerFnError::new("sign in first")
        })
    }

    /// An authorization refusal (401, 403, 404) as a server function error,
    /// with its status.
    pub fn refused(e: crate::server::error::AppError) -> ServerFnError {
        let (status, message) = e.status_and_message();
        set_status(status);
        ServerFnError::new(message)
    }

    /// The caller and the engine, once the caller has `need` in run `id`'s project.
    pub async fn for_run(id: &str, need: Role) -> Result<(Engine, Caller, RunHead), ServerFnError> {
        let engine = engine()?;
        let caller = caller()?;
        let head = caller.run(&engine, id, need).await.map_err(refused)?;
        Ok((engine, caller, head))
    }

    pub use runlens_engine::store::RunHead;

    /// [`for_run`], with `None` when there is no such run or it belongs to a
    /// project the caller has no role in (the two look the same).
    pub async fn run_or_none(id: &str, need: Role) -> Result<Option<(Engine, Caller, RunHead)>, ServerFnError> {
        use crate::server::error::AppError;

        let engine = engine()?;
        let caller = caller()?;
        match caller.run(&engine, id, need).await {
            Ok(head) => Ok(Some((engine, caller, head))),
            Err(AppError::NotFound(_)) => Ok(None),
            Err(AppError::Engine(e)) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(refused(e)),
        }
    }

    /// The caller and the engine, once the caller has `need` in their current project.
    pub fn for_project(need: Role) -> Result<(Engine, Caller), ServerFnError> {
        let engine = engine()?;
        let caller = caller()?;
        caller.require_current(need).map_err(refused)?;
        Ok((engine, caller))
    }

    /// A form's error for an engine error, answered with the REST API's
    /// status (a form about one thing: `about` is `None`).
    pub fn form_failed(err: EngineError, doing: &str) -> super::ActionError<String> {
        let classified = classify(err, doing);
        set_status(classified.status());
        super::ActionError::new(None, classified.kind, classified.message)
    }

    /// A form's error for a refusal (401, 403, 404), with its status.
    pub fn form_refused(e: crate::server::error::AppError) -> super::ActionError<String> {
        let (status, message) = e.status_and_message();
        set_status(status);
        super::ActionError::new(None, ErrorKind::of_status(status), message)
    }

    /// The engine and the caller for a form, once the caller has `need` in
    /// their current project; the form's error (with its status) otherwise.
    pub fn form_caller(need: Role) -> Result<(Engine, Caller), super::ActionError<String>> {
        let engine = engine().map_err(|e| form_error(ErrorKind::Internal, e))?;
        let caller = caller().map_err(|e| form_error(ErrorKind::Forbidden, e))?;
        caller.require_current(need).map_err(form_refused)?;
        Ok((engine, caller))
    }

    /// A form's 400 for a value the form itself refuses, saying `why`.
    pub fn form_invalid(why: impl ToString) -> super::ActionError<String> {
        set_status(axum::http::StatusCode::BAD_REQUEST);
        form_error(ErrorKind::Invalid, why)
    }

    /// A form's error of `kind` (`Internal`, `Forbidden`) before the form was looked at.
    pub fn form_error(kind: ErrorKind, message: impl ToString) -> super::ActionError<String> {
        super::ActionError::new(None, kind, message.to_string())
    }

    /// `None` for missing or blank values.
    pub fn non_empty(value: Option<String>) -> Option<String> {
        value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }
}
