//! A run's place in its tree of agent calls, for the trace page: the run
//! above it (and the root), the child runs its agent calls started, the
//! usage and cost of the whole tree below it, the calls of its descendants
//! waiting for a decision, and the names of the agents involved. Plus a
//! child run in brief, which the trace page shows nested under the call
//! that started it when that call is unfolded.

use leptos::prelude::*;
use runlens_engine::model::{Interruption, Run, RunRef, Step, TreeUsage};
use serde::{Deserialize, Serialize};

/// Steps of a child run shown in brief (the rest are on its own trace).
pub const BRIEF_STEPS: u32 = 20;

/// What the trace page shows about the runs around one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTree {
    /// The run whose agent call started this one (a child run's parent).
    pub parent: Option<RunRef>,
    /// The top of the tree, when it is not the parent.
    pub root: Option<RunRef>,
    /// The runs this run's agent calls started, oldest first (long fields cut).
    pub children: Vec<Run>,
    /// The whole tree (its root and every run below it), for a run in one.
    pub usage: Option<TreeUsage>,
    /// Calls of runs below this one that wait for a decision (each with its
    /// chain of runs, root first).
    pub pending: Vec<Interruption>,
    /// Names of the agents the page mentions, by id.
    pub agents: Vec<(String, String)>,
}

impl RunTree {
    /// The child run agent call `call_id` started.
    pub fn child_of_call(&self, call_id: &str) -> Option<&Run> {
        self.children.iter().find(|c| c.parent_call_id.as_deref() == Some(call_id))
    }

    /// The name of agent `id`, or the id itself when unknown.
    pub fn agent_name(&self, id: &str) -> String {
        agent_name(&self.agents, id)
    }
}

/// The name of agent `id` among `names`, or the id itself.
pub fn agent_name(names: &[(String, String)], id: &str) -> String {
    names.iter().find(|(i, _)| i == id).map_or_else(|| id.to_string(), |(_, n)| n.clone())
}

/// A child run in brief: the run, its first steps and its own children.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildBrief {
    pub run: Run,
    /// Its first [`BRIEF_STEPS`] steps (long values cut).
    pub steps: Vec<Step>,
    /// It has more steps than those.
    pub more_steps: bool,
    /// The runs its own agent calls started.
    pub children: Vec<Run>,
    /// Names of the agents it mentions, by id.
    pub agents: Vec<(String, String)>,
}

/// Child run `id` in brief; `Ok(None)` when there is no such run (or it
/// belongs to a project the caller has no role in).
#[server]
pub async fn get_child_brief(id: String) -> Result<Option<ChildBrief>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, head)) = super::ssr::run_or_none(&id, super::ssr::Role::Viewer).await? else {
        return Ok(None);
    };
    let loaded = tokio::try_join!(
        engine.runs().get_run(&id),
        engine.traces().steps_page(&id, 0, BRIEF_STEPS),
        engine.agents().children(&id)
    );
    let (mut run, page, mut children) = match loaded {
        Ok(got) => got,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let agents = ssr::agent_names(&engine, &head.project, &run, &children).await;
    super::trace_window::light_run(&mut run);
    super::preview::cut_run(&mut run);
    children.iter_mut().for_each(ssr::cut_child);
    let more_steps = page.next_from.is_some();
    let mut steps = page.steps;
    let mut cut_calls = Vec::new();
    for step in &mut steps {
        super::preview::cut_step(step, &mut cut_calls);
    }
    Ok(Some(ChildBrief { run, steps, more_steps, children, agents }))
}

#[cfg(feature = "ssr")]
pub mod ssr {
    use runlens_engine::model::{Run, RunRef, RunStatus};
    use runlens_engine::{Engine, EngineError};

    use super::RunTree;

    /// The tree around `run` (of `project`); `None` for a run outside any
    /// tree that runs no saved agent (nothing to show).
    pub async fn load(engine: &Engine, project: &str, run: &Run) -> Result<Option<RunTree>, EngineError> {
        let in_tree = run.is_child() || run.child_count > 0;
        if !in_tree && run.agent_id.is_none() {
            return Ok(None);
        }
        let mut tree = RunTree::default();
        if let Some(parent) = run.parent_run_id.as_deref().filter(|_| run.is_child()) {
            tree.parent = engine.runs().get_run(parent).await.ok().map(|p| run_ref(&p));
            if run.root_run_id != parent && !run.root_run_id.is_empty() && run.root_run_id != run.id {
                tree.root = engine.runs().get_run(&run.root_run_id).await.ok().map(|r| run_ref(&r));
            }
        }
        if in_tree {
            let root = if run.root_run_id.is_empty() { run.id.as_str() } else { run.root_run_id.as_str() };
            tree.usage = Some(engine.agents().tree_usage(root).await?);
        }
        if run.child_count > 0 {
            tree.children = engine.agents().children(&run.id).await?;
            // Paused with no call of its own: it waits on a child's decision.
            if run.status == RunStatus::Paused && run.interruptions.is_empty() {
                tree.pending = engine.approvals().pending_below(&run.id).await?;
                for item in &mut tree.pending {
                    crate::api::preview::cut_interruption(item);
                }
            }
        }
        tree.agents = agent_names(engine, project, run, &tree.children).await;
        tree.children.iter_mut().for_each(cut_child);
        Ok(Some(tree))
    }

    fn run_ref(run: &Run) -> RunRef {
        RunRef { id: run.id.clone(), name: run.name.clone(), agent_id: run.current_agent.clone() }
    }

    /// A child run as the page lists it: long fields cut.
    pub fn cut_child(child: &mut Run) {
        crate::api::trace_window::light_run(child);
        crate::api::preview::cut_run(child);
    }

    /// Names of the agents `run` and `children` ran (and run now), by id;
    /// an agent that cannot be read is left out (the page shows its id).
    pub async fn agent_names(engine: &Engine, project: &str, run: &Run, children: &[Run]) -> Vec<(String, String)> {
        let mut ids: Vec<&str> = Vec::new();
        for r in std::iter::once(run).chain(children) {
            for id in [r.agent_id.as_deref(), r.current_agent.as_deref()].into_iter().flatten() {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        // Links carry their agents' names already.
        let mut names: Vec<(String, String)> =
            (run.sub_agents.iter().chain(&run.handoffs)).map(|l| (l.agent_id.clone(), l.agent_name.clone())).collect();
        for id in ids {
            if names.iter().any(|(i, _)| i == id) {
                continue;
            }
            if let Ok(agent) = engine.agents().agent_in(project, id).await {
                names.push((agent.id, agent.spec.name));
            }
        }
        names
    }
}
