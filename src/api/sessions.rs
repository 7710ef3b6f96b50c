//! A session's page data: its runs, oldest first, with their totals (see
//! `runlens_engine::model::Session`), and the project's agent names.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::Session;
use serde::{Deserialize, Serialize};

use super::AgentChoice;

/// What `/sessions/:id` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub session: Session,
    /// The project's agents, to name the runs' agents.
    pub agents: Vec<AgentChoice>,
    pub now: DateTime<Utc>,
    /// The caller's role in the project.
    pub role: Option<runlens_engine::model::Role>,
}

/// Session `id` of the current project: its runs and totals (none when no
/// run of the project has it); an error for a malformed id.
#[server]
pub async fn get_session(id: String) -> Result<SessionView, ServerFnError> {
    use runlens_engine::model::Role;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let (mut session, agents) =
        tokio::try_join!(engine.runs().session(&caller.project, &id), super::choices_in(&engine, &caller.project),)
            .map_err(super::ssr::to_server_error)?;
    session.runs.iter_mut().for_each(|run| {
        super::preview::cut_run(run);
    });
    Ok(SessionView { session, agents, now: Utc::now(), role: caller.role_in(&caller.project) })
}
