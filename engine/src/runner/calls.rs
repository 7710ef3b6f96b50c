//! Tool calls of one step: checked, run concurrently, recorded one by one.
//!
//! Nothing a tool does can fail the run: bad arguments, an unknown tool, an
//! error or even a panic become a failed ToolCall whose error goes back to the
//! model as an `invocation-result` rejection.
//!
//! A run whose `tool_answers` answers a call (an experiment's recorded
//! results or mocks) has it answered at planning, before the gate: no tool
//! runs for it, and the answer grants nothing.

use futures::future::join_all;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::delegate;
use super::gate::{self, Admitted, Verdict};
use crate::events::EventKind;
use crate::llm::ModelResponse;
use crate::model::{Invocation, MessageBody, ResultType, Run, Step, ToolCall, ToolCallStatus, ToolSelection};
use crate::runtime::{now, Runtime};
use crate::tools::{Recovery, ToolContext, ToolError};

/// Turns the model's requested calls into ToolCalls: `pending` when they may
/// run, `awaiting_approval` when a person must decide first, already
/// `failed` when the arguments or the tool name are wrong or the turn did not
/// offer the tool (`selection`: the turn's, when it offered only some of
/// the attached tools), and `rejected` when a decision in this run said
/// "always reject" for the tool.
pub(crate) fn plan(
    rt: &Runtime,
    run: &Run,
    step_index: u32,
    response: &ModelResponse,
    selection: Option<&ToolSelection>,
) -> Vec<ToolCall> {
    let at = now();
    response
        .tool_calls
        .iter()
        .map(|req| {
            let (arguments, reason, error) = match &req.arguments {
                Err(e) => (Value::String(req.raw_arguments.clone()), None, Some(e.clone())),
                Ok(args) => {
                    let (args, reason) = take_reason(run, args);
                    let error =
                        offered(run, &req.name, selection).and_then(|()| check(rt, run, &req.name, &args)).err();
                    (args, reason, error)
                }
            };
            let mut call = ToolCall {
                id: req.id.clone(),
                run_id: run.id.clone(),
                step_index,
                tool_name: req.name.clone(),
                arguments,
                result: None,
                status: ToolCallStatus::Pending,
                reasoning: reason.or_else(|| req.reasoning.clone()).or_else(|| response.text.clone()),
                requested_at: None,
                approval: None,
                completed_at: None,
                error: None,
                started_at: None,
                child_run_id: None,
            };
            let name = &req.name;
            if let Some(e) = error {
                finish(&mut call, Err(e));
            } else if run.always_reject.iter().any(|t| t == name) {
                call.status = ToolCallStatus::Rejected;
                call.error = Some(format!("rejected: `{name}` calls are always rejected in this run"));
                call.completed_at = Some(at);
            } else if let Some(answer) = substitute(run, name, &call.arguments) {
                // Answered without the tool: nothing runs, so nothing is asked.
                call.started_at = Some(at);
                finish(&mut call, answer.map_err(ToolError::Failed));
            } else if needs_approval(rt, run, name) {
                call.status = ToolCallStatus::AwaitingApproval;
                call.requested_at = Some(at);
            }
            call
        })
        .collect()
}

/// What answers a call of `name` instead of its tool, when the run's
/// `tool_answers` (an experiment's recorded results or mocks) has
/// something: the call then never reaches the gate or the tool. A handoff
/// is never substituted (it runs nothing; it changes the agent in charge).
fn substitute(run: &Run, name: &str, arguments: &Value) -> Option<Result<Value, String>> {
    if delegate::handoff(run, name).is_some() {
        return None;
    }
    run.tool_answers.as_ref()?.substitute(name, arguments)
}

/// Whether planning asks a person at once: the call needs approval (see
/// `gate`) and no "always" in this run covers its tool. Planning saves a
/// pause where an "always" was given; the gate still checks its grant.
fn needs_approval(rt: &Runtime, run: &Run, tool: &str) -> bool {
    gate::needs_approval(rt, run, tool) && !run.always_approve.iter().any(|t| t == tool)
}

/// Whether the turn offered `name`: every tool when it offered them all,
/// else the selected ones and the sub-agent and handoff tools (always
/// offered). A tool the run does not have is left to [`check`].
fn offered(run: &Run, name: &str, selection: Option<&ToolSelection>) -> Result<(), ToolError> {
    let Some(selection) = selection else { return Ok(()) };
    let wiring = run.sub_agents.iter().chain(&run.handoffs).map(|l| &l.tool);
    if !run.tools.iter().any(|t| t == name)
        || selection.offered.iter().any(|o| o.name == name)
        || wiring.clone().any(|t| t == name)
    {
        return Ok(());
    }
    let offered = selection.offered.iter().map(|o| o.name.clone()).chain(wiring.cloned()).collect();
    Err(ToolError::NotOffered { name: name.to_owned(), offered })
}

fn check(rt: &Runtime, run: &Run, name: &str, args: &Value) -> Result<(), ToolError> {
    if let Some(link) = delegate::sub_agent(run, name).or_else(|| delegate::handoff(run, name)) {
        return validate(name, &link.schema, args);
    }
    let known = rt.tools.view(&run.project);
    if !run.tools.iter().any(|t| t == name) || !known.contains(name) {
        let available =
            (run.tools.iter()).chain(run.sub_agents.iter().chain(&run.handoffs).map(|l| &l.tool)).cloned().collect();
        return Err(ToolError::NotAvailable { name: name.to_owned(), available });
    }
    known.validate(name, args)
}

/// Arguments checked against an agent tool's schema.
fn validate(tool: &str, schema: &Value, args: &Value) -> Result<(), ToolError> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ToolError::Failed(format!("the schema of `{tool}` is not valid: {e}")))?;
    let problems: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ToolError::InvalidArguments { tool: tool.to_owned(), problems })
    }
}

/// With reasoning traces, the model's `reasoning` argument is its reason
/// for the call: taken off the arguments and kept on the call.
fn take_reason(run: &Run, args: &Value) -> (Value, Option<String>) {
    let mut args = args.clone();
    if !run.reasoning_traces {
        return (args, None);
    }
    let reason = match args.as_object_mut().and_then(|o| o.remove("reasoning")) {
        Some(Value::String(text)) if !text.trim().is_empty() => Some(text),
        _ => None,
    };
    (args, reason)
}

/// Before a step interrupted by a crash goes on: calls that finished keep
/// their result, idempotent ones run again, and a call with side effects
/// ends as its tool's record says (sent, or run now); when the tool cannot
/// tell, it is reported to the model as interrupted rather than repeated.
pub(super) async fn resume(rt: &Runtime, run: &Run, step: &mut Step, cancel: &CancellationToken) {
    for (pos, call) in step.tool_calls.iter_mut().enumerate() {
        if call.status.is_finished() || call.status == ToolCallStatus::AwaitingApproval {
            continue;
        }
        if let (ToolCallStatus::Running, Some(child)) = (call.status, call.child_run_id.clone()) {
            // An agent call: done when its child run is (read from the store).
            match rt.store.get_run(&child).await {
                Ok(Some(child)) => {
                    // A run that is not this call's child never answers it.
                    let outcome = match super::child_id::is_child_of(&child, run, &call.id) {
                        true => delegate::child_outcome(&child),
                        false => Some(Err(ToolError::Failed("the sub-agent run is not this call's".into()))),
                    };
                    if let Some(outcome) = outcome {
                        finish(call, outcome);
                        if let Err(e) = persist(rt, call, pos, true).await {
                            tracing::warn!(run_id = %call.run_id, call_id = %call.id, error = %e, "could not record a tool call");
                        }
                    }
                }
                // Not created after all (the start was recorded, the child
                // not): started again, under the same id.
                Ok(None) => call.status = ToolCallStatus::Pending,
                Err(e) => {
                    tracing::warn!(run_id = %call.run_id, call_id = %call.id, error = %e, "could not read a child run")
                }
            }
            continue;
        }
        // `pending`: it never started, so it is safe to run now. `running`
        // is only recorded for calls with side effects (see `execute`), so a
        // running call of a tool not (yet) known — an MCP server that has
        // not listed its tools again — is one of those too.
        let tool = rt.tools.view(&run.project).get(&call.tool_name);
        if call.status == ToolCallStatus::Pending || tool.as_ref().is_some_and(|t| t.idempotent()) {
            call.status = ToolCallStatus::Pending;
            continue;
        }
        // A call with side effects that was running: its tool may know from
        // its own record whether the effect happened.
        let recovery = match &tool {
            Some(tool) => tool.recover(&context(rt, run, call, cancel)).await,
            None => Recovery::Unknown,
        };
        match recovery {
            Recovery::NotRun => {
                call.status = ToolCallStatus::Pending;
                continue;
            }
            Recovery::Done(result) => finish(call, Ok(result)),
            Recovery::Unknown => finish(call, Err(ToolError::Interrupted(call.tool_name.clone()))),
        }
        if let Err(e) = persist(rt, call, pos, true).await {
            // The step's final write records it again.
            tracing::warn!(run_id = %call.run_id, call_id = %call.id, error = %e, "could not record a tool call");
        }
    }
    execute(rt, run, step, cancel).await;
}

/// Runs every pending call of the step the gate lets through at the same
/// time (see `gate`; the others then wait for a decision).
///
/// A call with side effects is recorded as `running` before it starts and
/// again when it ends, so recovery never repeats it. When that first record
/// cannot be written the call does not run at all (fail closed): it fails,
/// and the model is told it did not happen, rather than the run failing for
/// what may be a passing store error — nothing was done, so nothing is lost.
/// An idempotent call is only announced on the bus: the step's final write
/// records it, and after a crash it simply runs again — two fewer writes per
/// call on the hot path.
pub(super) async fn execute(rt: &Runtime, run: &Run, step: &mut Step, cancel: &CancellationToken) {
    let admitted = admit(rt, run, step).await;
    let starts = match delegate::starts(rt, run, step).await {
        Ok(starts) => starts,
        Err(e) => {
            // Nothing is started on a guess: the calls fail, and say why.
            tracing::warn!(run_id = %run.id, error = %e, "could not count the run's children");
            Default::default()
        }
    };
    // One handoff per turn: the first the model asked for.
    let first_handoff = (step.tool_calls.iter())
        .find(|c| c.status == ToolCallStatus::Pending && delegate::handoff(run, &c.tool_name).is_some())
        .map(|c| c.id.clone());
    let known = rt.tools.view(&run.project);
    let runs = admitted.into_iter().map(|(pos, admitted)| {
            let mut call = step.tool_calls[pos].clone();
            let durable = known.get(&call.tool_name).is_some_and(|t| !t.idempotent());
            let first_handoff = first_handoff.clone();
            let start = starts.get(&call.id).copied().unwrap_or(delegate::Start::Denied);
            async move {
                if let Some(link) = delegate::handoff(run, &call.tool_name) {
                    call.started_at = Some(now());
                    let outcome = if first_handoff.as_deref() == Some(call.id.as_str()) {
                        Ok(json!({ "assistant": link.agent_name }))
                    } else {
                        Err(ToolError::Failed("only one handoff per turn is made: this one was not".into()))
                    };
                    finish(&mut call, outcome);
                    let _ = persist(rt, &call, pos, false).await;
                    return (pos, call);
                }
                if let Some(link) = delegate::sub_agent(run, &call.tool_name) {
                    call.started_at = Some(now());
                    match delegate::start_child(rt, run, &call, link, start).await {
                        Ok(child) => {
                            call.status = ToolCallStatus::Running;
                            call.child_run_id = Some(child);
                        }
                        Err(e) => finish(&mut call, Err(e)),
                    }
                    // The child exists before the call says so; should this
                    // write fail, recovery finds the child by its id.
                    if let Err(e) = persist(rt, &call, pos, true).await {
                        tracing::warn!(run_id = %call.run_id, call_id = %call.id, error = %e, "could not record a tool call");
                    }
                    return (pos, call);
                }
                call.status = ToolCallStatus::Running;
                call.started_at = Some(now());
                if let Err(e) = persist(rt, &call, pos, durable).await {
                    tracing::error!(run_id = %call.run_id, call_id = %call.id, error = %e, "not running an unrecorded call");
                    finish(&mut call, Err(ToolError::NotRecorded(e.to_string())));
                    rt.bus.publish(&call.run_id, EventKind::ToolCallUpdated { tool_call: Box::new(call.clone()) });
                    return (pos, call);
                }
                let outcome = invoke(rt, run, &call, admitted, cancel).await;
                finish(&mut call, outcome);
                if cancel.is_cancelled() && call.status == ToolCallStatus::Failed {
                    call.status = ToolCallStatus::Cancelled;
                }
                if let Err(e) = persist(rt, &call, pos, durable).await {
                    // The step's final write records the outcome; until then a
                    // crash reports the call as interrupted, never repeats it.
                    tracing::warn!(run_id = %call.run_id, call_id = %call.id, error = %e, "could not record a tool call");
                }
                (pos, call)
            }
        });
    for (pos, call) in join_all(runs).await {
        step.tool_calls[pos] = call;
    }
}

/// Asks the gate about each pending call of the step: those it lets
/// through are returned (by position) to run; one that needs a decision is
/// put back to `awaiting_approval` (the step then pauses), and one whose
/// grant could not be read fails without running.
async fn admit(rt: &Runtime, run: &Run, step: &mut Step) -> Vec<(usize, Admitted)> {
    let mut admitted = Vec::new();
    for (pos, call) in step.tool_calls.iter_mut().enumerate() {
        if call.status != ToolCallStatus::Pending {
            continue;
        }
        match gate::admit(rt, run, call).await {
            Verdict::Admitted(a) => {
                admitted.push((pos, a));
                continue;
            }
            Verdict::Ungranted => {
                call.status = ToolCallStatus::AwaitingApproval;
                call.requested_at = Some(now());
                call.started_at = None;
            }
            Verdict::Unknown(e) => finish(call, Err(e)),
        }
        rt.bus.publish(&call.run_id, EventKind::ToolCallUpdated { tool_call: Box::new(call.clone()) });
    }
    admitted
}

/// Runs `call`'s tool, which the gate let through (`_admitted`).
async fn invoke(
    rt: &Runtime,
    run: &Run,
    call: &ToolCall,
    _admitted: Admitted,
    cancel: &CancellationToken,
) -> Result<Value, ToolError> {
    let tool = rt
        .tools
        .view(&run.project)
        .get(&call.tool_name)
        .ok_or_else(|| ToolError::UnknownTool(call.tool_name.clone()))?;
    let ctx = context(rt, run, call, cancel);
    let guarded = std::panic::AssertUnwindSafe(tool.call(call.arguments.clone(), &ctx)).catch_unwind();
    if !tool.idempotent() {
        // A call with side effects is never abandoned half-way: it watches
        // `ctx.cancel` itself, and its own outcome says whether the effect
        // happened, so the record always agrees with the effect (an email in
        // the outbox is a succeeded call, even when a cancel came meanwhile).
        return match guarded.await {
            Ok(result) => result,
            Err(panic) => Err(ToolError::Panicked(panic_message(&panic))),
        };
    }
    tokio::select! {
        outcome = guarded => match outcome {
            Ok(result) => result,
            Err(panic) => Err(ToolError::Panicked(panic_message(&panic))),
        },
        _ = cancel.cancelled() => Err(ToolError::cancelled()),
    }
}

/// What a call of `run` may know of it (see [`ToolContext`]).
fn context(rt: &Runtime, run: &Run, call: &ToolCall, cancel: &CancellationToken) -> ToolContext {
    ToolContext {
        run_id: run.id.clone(),
        call_id: call.id.clone(),
        context: run.context.clone(),
        cancel: cancel.child_token(),
        outbox: rt.outbox.clone(),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn finish(call: &mut ToolCall, outcome: Result<Value, ToolError>) {
    call.completed_at = Some(now());
    match outcome {
        Ok(v) => {
            call.status = ToolCallStatus::Succeeded;
            call.result = Some(v);
        }
        Err(e) => {
            call.status = ToolCallStatus::Failed;
            call.error = Some(e.to_string());
        }
    }
}

/// Records a call's progress (only calls with side effects are written
/// here) and announces it; nothing is announced when the write failed.
async fn persist(rt: &Runtime, call: &ToolCall, pos: usize, durable: bool) -> crate::error::Result<()> {
    if durable {
        rt.store.save_tool_call(call, pos).await?;
    }
    rt.bus.publish(&call.run_id, EventKind::ToolCallUpdated { tool_call: Box::new(call.clone()) });
    Ok(())
}

/// Makes the ids of a turn's requested calls unique within the run: a
/// provider may omit them (they then read `call_{index}`, the same every
/// turn) or repeat them. An id not used before in the run is kept as the
/// provider sent it (when it is short and URL-safe: it names the call in
/// the approval API); any other becomes `call_{step}_{pos}`
/// (with a suffix in the unlikely case that is taken too). The transcript
/// and every record use the new id, so the model sees consistent ids.
pub(super) async fn unique_ids(
    rt: &Runtime,
    run_id: &str,
    known: &mut KnownIds,
    step_index: u32,
    calls: &mut [crate::llm::RequestedCall],
) -> crate::error::Result<()> {
    for (pos, call) in calls.iter_mut().enumerate() {
        let id = call.id.trim().to_owned();
        if url_safe(&id) && !known.taken(rt, run_id, &id).await? {
            known.ids.insert(id.clone());
            call.id = id;
            continue;
        }
        let mut candidate = format!("call_{step_index}_{pos}");
        let mut n = 1;
        while known.taken(rt, run_id, &candidate).await? {
            candidate = format!("call_{step_index}_{pos}_{n}");
            n += 1;
        }
        known.ids.insert(candidate.clone());
        call.id = candidate;
    }
    Ok(())
}

/// The call ids of a run its driver knows are taken: those it gave out,
/// and, when the run had no step before the driver started (a new run),
/// all of them — then no id needs a look in the store.
#[derive(Default)]
pub(super) struct KnownIds {
    ids: std::collections::HashSet<String>,
    complete: bool,
}

impl KnownIds {
    /// For a driver starting on a run with (`had_steps`) or without stored steps.
    pub(super) fn new(had_steps: bool) -> Self {
        Self { ids: Default::default(), complete: !had_steps }
    }

    async fn taken(&self, rt: &Runtime, run_id: &str, id: &str) -> crate::error::Result<bool> {
        if self.ids.contains(id) {
            return Ok(true);
        }
        Ok(!self.complete && rt.store.tool_call(run_id, id).await?.is_some())
    }
}

/// A call id kept as the provider sent it: 1 to 128 characters of
/// `A-Z a-z 0-9 _ - . :`.
fn url_safe(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

/// The `invocations` entry of the agent message for this call, said with
/// `text`: the call's reasoning is kept on it when it is the call's own
/// (not the message's text, which the message already holds).
pub(crate) fn invocation(call: &ToolCall, text: Option<&str>) -> Invocation {
    Invocation {
        id: call.id.clone(),
        tool_name: call.tool_name.clone(),
        reasoning: call.reasoning.clone().filter(|r| Some(r.as_str()) != text),
        input: call.arguments.clone(),
    }
}

/// The `invocation-result` the model sees for a finished call (images and
/// other binary content of an MCP result as a short text: the call keeps them).
pub(crate) fn result_message(call: &ToolCall) -> MessageBody {
    let (result_type, result) = match (&call.status, &call.result, &call.error) {
        (ToolCallStatus::Succeeded, Some(v), _) => {
            (ResultType::Resolution, crate::tools::mcp::model_view(v).unwrap_or_else(|| v.clone()))
        }
        (ToolCallStatus::Rejected, _, Some(e)) => (ResultType::Rejection, json!({ "rejected": true, "error": e })),
        (_, _, Some(e)) => (ResultType::Rejection, json!({ "error": e })),
        _ => (ResultType::Rejection, json!({ "error": "the call did not finish" })),
    };
    MessageBody::InvocationResult { id: call.id.clone(), tool_name: call.tool_name.clone(), result_type, result }
}
