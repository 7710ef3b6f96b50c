//! Calls of other agents. A sub-agent call starts a child run (of the
//! called agent, with the call's arguments as its input) and waits for it:
//! the parent's driver stops while its children run, and is started again
//! when one ends, taking the finished children's results from the store.
//! A handoff call switches the run to another agent from the next turn.
//!
//! A child's id is derived from its parent and the call (see `child_id`),
//! so starting it is idempotent: a crash between creating the child and
//! recording the call running can never start a second one.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::error::Result;
use crate::model::{
    AgentLink, CreateRun, ModelAnswer, Run, RunStatus, Step, StepRequest, StepResponse, StepStatus, ToolCall,
    ToolCallStatus, Usage,
};
use crate::runtime::{child_prompt, create, now, Runtime};
use crate::store::AgentSwitch;
use crate::tools::ToolError;

use super::child_id::{child_id, is_child_of};

/// The link of tool `name` among the run's sub-agents.
pub(super) fn sub_agent<'r>(run: &'r Run, name: &str) -> Option<&'r AgentLink> {
    run.sub_agents.iter().find(|l| l.tool == name)
}

/// The link of tool `name` among the run's handoff targets.
pub(super) fn handoff<'r>(run: &'r Run, name: &str) -> Option<&'r AgentLink> {
    run.handoffs.iter().find(|l| l.tool == name)
}

/// What a pending sub-agent call may do about its child run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// The child exists already (a start interrupted by a crash): wait for it.
    Exists,
    /// Start it, when the depth allows.
    New,
    /// Past the run's fan-out limit: the call fails.
    Denied,
}

/// What each of a step's pending sub-agent calls may do, by call id: a call
/// whose child exists waits for it; the others, in order, start one as
/// long as the run's fan-out limit leaves room. One read of the run's
/// children for the whole step.
pub(super) async fn starts(rt: &Runtime, run: &Run, step: &Step) -> Result<HashMap<String, Start>> {
    let pending: Vec<&ToolCall> = (step.tool_calls.iter())
        .filter(|c| c.status == ToolCallStatus::Pending && sub_agent(run, &c.tool_name).is_some())
        .collect();
    if pending.is_empty() {
        return Ok(HashMap::new());
    }
    let children: HashSet<String> = rt.store.children(&run.id).await?.into_iter().map(|c| c.id).collect();
    let mut room = (rt.config.max_children as usize).saturating_sub(children.len());
    let mut starts = HashMap::new();
    for call in pending {
        let start = if children.contains(&child_id(rt, run, &call.id).await?) {
            Start::Exists
        } else if room > 0 {
            room -= 1;
            Start::New
        } else {
            Start::Denied
        };
        starts.insert(call.id.clone(), start);
    }
    Ok(starts)
}

/// Creates the child run of agent call `call` (or finds it, when it
/// exists), after the depth and fan-out checks (`start`: see [`starts`]);
/// the error is the call's failure.
pub(super) async fn start_child(
    rt: &Runtime,
    run: &Run,
    call: &ToolCall,
    link: &AgentLink,
    start: Start,
) -> std::result::Result<String, ToolError> {
    let fail = |e: crate::error::EngineError| ToolError::Failed(format!("the sub-agent run could not start: {e}"));
    let id = child_id(rt, run, &call.id).await.map_err(fail)?;
    if start == Start::Exists {
        return Ok(id);
    }
    let depth = run.depth + 1;
    if depth > rt.config.max_depth {
        return Err(ToolError::Failed(format!(
            "`{}` was not called: the run is at depth {} and the engine allows at most {} levels of agent calls",
            link.tool, run.depth, rt.config.max_depth
        )));
    }
    if start == Start::Denied {
        return Err(ToolError::Failed(format!(
            "`{}` was not called: this run would start more than {} child runs, the most the engine allows",
            link.tool, rt.config.max_children
        )));
    }
    super::budget::admit_child(rt, run, link).await?;
    let agent = rt.resolve_agent(&run.project, &link.agent_id, None, "agents").await.map_err(fail)?;
    let has_schema = agent.spec.input_schema.is_some();
    let req = CreateRun {
        id: Some(id.clone()),
        name: Some(format!("{} · {}", link.agent_name, create::name_from(&child_prompt(&call.arguments)))),
        initial_prompt: child_prompt(&call.arguments),
        input: has_schema.then(|| call.arguments.clone()),
        context: Some(run.context.clone()),
        tags: run.tags.clone(),
        agent_id: Some(link.agent_id.clone()),
        // A child answers its parent's call; follow-ups go to the parent.
        interactive: Some(false),
        ..CreateRun::default()
    };
    let (mut child, messages) = create::prepare(rt, &run.project, req, Some(&agent)).map_err(fail)?;
    child.project.clone_from(&run.project);
    child.created_by.clone_from(&run.created_by);
    child.parent_run_id = Some(run.id.clone());
    child.parent_call_id = Some(call.id.clone());
    child.root_run_id.clone_from(&run.root_run_id);
    child.depth = depth;
    if !rt.store.insert_run_with_history(&child, &messages, &[]).await.map_err(fail)? {
        // Its id is in use: by this very child (another start won the race)
        // and it is waited for, else by no run of this call, and it fails.
        match rt.store.get_run(&id).await.map_err(fail)? {
            Some(existing) if is_child_of(&existing, run, &call.id) => {}
            _ => return Err(ToolError::Failed("the sub-agent run could not start: its run id is in use".into())),
        }
    }
    Ok(id)
}

/// What an agent call gets once its child run ended; `None` while it has not.
pub(super) fn child_outcome(child: &Run) -> Option<std::result::Result<Value, ToolError>> {
    let agent = child.agent_id.as_deref().unwrap_or("the sub-agent");
    match child.status {
        RunStatus::Done => Some(Ok(match &child.result {
            Some(v) if !v.is_null() => v.clone(),
            _ => json!({ "message": child.summary.clone().unwrap_or_default() }),
        })),
        RunStatus::Failed => Some(Err(ToolError::Failed(format!(
            "the run of {agent} failed: {}",
            child.failure_reason.as_deref().unwrap_or("no reason given")
        )))),
        RunStatus::Cancelled => Some(Err(ToolError::Failed(format!("the run of {agent} was cancelled")))),
        _ => None,
    }
}

/// The step that records a handoff to `switch`'s agent, at `index`.
pub(super) fn handoff_step(run: &Run, index: u32, from: &str, to: &AgentLink, switch: &AgentSwitch) -> Step {
    let at = now();
    let tools: Vec<String> = (switch.tools.iter().cloned())
        .chain(switch.sub_agents.iter().chain(&switch.handoffs).map(|l| l.tool.clone()))
        .collect();
    Step {
        id: Step::id_for(&run.id, index),
        run_id: run.id.clone(),
        index,
        kind: "handoff".into(),
        status: StepStatus::Completed,
        request: StepRequest { model: Some(switch.model.clone()), tools: Some(tools), ..StepRequest::default() },
        response: StepResponse::Answer(ModelAnswer {
            text: Some(format!("Handed off from {from} to {} (version {}).", to.agent_name, switch.version)),
            finish_reason: Some("handoff".into()),
            ..ModelAnswer::default()
        }),
        usage: Usage::default(),
        started_at: at,
        model_completed_at: None,
        completed_at: Some(at),
        tool_calls: Vec::new(),
    }
}

/// The handoff a completed step made, if any: its first succeeded handoff call.
pub(super) fn handoff_made<'r>(run: &'r Run, step: &Step) -> Option<&'r AgentLink> {
    (step.kind == "model_turn")
        .then(|| {
            step.tool_calls
                .iter()
                .filter(|c| c.status == ToolCallStatus::Succeeded)
                .find_map(|c| handoff(run, &c.tool_name))
        })
        .flatten()
}

/// The switch to `link`'s agent at its current version.
pub(super) async fn switch_to(rt: &Runtime, run: &Run, link: &AgentLink) -> Result<AgentSwitch> {
    let agent = rt.resolve_agent(&run.project, &link.agent_id, None, "handoffs").await?;
    rt.switch_for(&run.project, &agent)
}
