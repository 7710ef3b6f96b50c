//! Server functions of the compare page: two runs aligned (one page of rows
//! each for steps and messages), a comparison group's members, and the runs
//! one run can be compared with (its fork family and the project's latest).
//!
//! A run the caller cannot see, or that does not exist, reads as `None` (the
//! page says "not found" for both, as the REST API answers 404 for both).

use leptos::prelude::*;
use runlens_engine::model::{CompareGroup, CompareQuery, Comparison, FamilyMember, Run};
use serde::{Deserialize, Serialize};

/// Runs offered to compare a run with.
pub const CANDIDATES: u32 = 20;

/// What "Compare with…" offers for one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidates {
    /// The run picked first (long fields cut).
    pub run: Run,
    /// Its ancestors and forks, oldest first (without itself).
    pub family: Vec<FamilyMember>,
    /// The project's latest root runs (without itself), newest first.
    pub recent: Vec<Run>,
}

/// Runs `query.a` and `query.b` compared; `None` when either is not found.
/// A bad page bound is an error with the reason.
#[server]
pub async fn get_comparison(query: CompareQuery) -> Result<Option<Comparison>, ServerFnError> {
    use runlens_engine::EngineError;

    for id in [&query.a, &query.b] {
        if super::ssr::run_or_none(id, super::ssr::Role::Viewer).await?.is_none() {
            return Ok(None);
        }
    }
    let engine = super::ssr::engine()?;
    match engine.comparisons().compare(&query).await {
        Ok(comparison) => Ok(Some(comparison)),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

/// Comparison group `id`; `None` when there is none the caller can see.
#[server]
pub async fn get_compare_group(id: String) -> Result<Option<CompareGroup>, ServerFnError> {
    use runlens_engine::EngineError;

    let engine = super::ssr::engine()?;
    let caller = super::ssr::caller()?;
    let group = match engine.comparisons().compare_group(&id).await {
        Ok(group) => group,
        Err(EngineError::NotFound(_)) | Err(EngineError::Invalid(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    if !caller.can(&group.project, super::ssr::Role::Viewer) {
        return Ok(None);
    }
    let mut group = group;
    for member in &mut group.members {
        super::preview::cut_text(&mut member.name);
        if let Some(reason) = member.failure_reason.as_mut() {
            super::preview::cut_text(reason);
        }
        if let Some(result) = member.result.as_mut() {
            super::preview::cut_value(result);
        }
    }
    Ok(Some(group))
}

/// What run `id` can be compared with; `None` when it is not found.
#[server]
pub async fn get_compare_candidates(id: String) -> Result<Option<Candidates>, ServerFnError> {
    use runlens_engine::model::RunFilter;

    let Some((engine, _, head)) = super::ssr::run_or_none(&id, super::ssr::Role::Viewer).await? else {
        return Ok(None);
    };
    let filter = RunFilter { limit: Some(CANDIDATES + 1), project: Some(head.project.clone()), ..Default::default() };
    let (run, family, page) = tokio::try_join!(
        engine.runs().get_run(&id),
        engine.conversation().family(&id),
        engine.runs().list_runs(&filter)
    )
    .map_err(super::ssr::to_server_error)?;
    let mut run = run;
    super::preview::cut_run(&mut run);
    let mut family: Vec<FamilyMember> = family.runs.into_iter().filter(|m| m.id != id).collect();
    for member in &mut family {
        super::preview::cut_text(&mut member.name);
        member.forked_message = None;
    }
    let mut recent: Vec<Run> = page.runs.into_iter().filter(|r| r.id != id).take(CANDIDATES as usize).collect();
    recent.iter_mut().for_each(|r| {
        super::preview::cut_run(r);
    });
    Ok(Some(Candidates { run, family, recent }))
}
