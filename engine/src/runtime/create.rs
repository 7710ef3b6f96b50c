//! Validating a create-run request and building the new run.
//!
//! Everything a client can get wrong is caught here, before anything is
//! stored, so a bad request is a clear 400 and never a half-created run.

use std::collections::BTreeSet;

use serde_json::Value;

use super::attach::{attach_tools, ALL_TOOLS};
use super::{now, Resolved, Runtime};
use crate::error::{EngineError, Result};
use crate::model::limits;
use crate::model::{
    ApprovalPolicy, ApprovalRequest, CreateRun, Message, MessageBody, Metadata, Run, RunOutcome, RunStatus, Usage,
};

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::Invalid(msg.into())
}

/// Checks `req` and builds the run with its transcript: the `input_items`,
/// then the prompt. With `agent`, the run starts from that agent version:
/// what the request leaves out comes from the agent, and what it sets is
/// recorded as an override.
pub(crate) fn prepare(
    rt: &Runtime,
    project: &str,
    req: CreateRun,
    agent: Option<&Resolved>,
) -> Result<(Run, Vec<Message>)> {
    if let Some(id) = &req.id {
        check_id(id)?;
    }
    prepare_as(rt, project, req, agent)
}

/// [`prepare`] for a run whose id (`req.id`) the server made, which need
/// not follow the rules of client-chosen ids (see `limits::scoped_run_id`).
pub(crate) fn prepare_as(
    rt: &Runtime,
    project: &str,
    mut req: CreateRun,
    agent: Option<&Resolved>,
) -> Result<(Run, Vec<Message>)> {
    check_bounds(&req).map_err(invalid)?;
    let mut overrides = Vec::new();
    if let Some(agent) = agent {
        overrides = apply_agent(&mut req, agent)?;
    }
    let prompt = req.initial_prompt.trim().to_owned();
    if prompt.is_empty() {
        return Err(invalid("initial_prompt must not be empty"));
    }
    let checked = check_request(rt, project, &mut req)?;
    let id = req.id.take().unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let at = now();
    let items = req.input_items.take().unwrap_or_default();
    check_items(&items).map_err(invalid)?;
    let seeded_turns = items.iter().filter(|i| matches!(i, MessageBody::Agent { .. })).count() as u32;
    let first = MessageBody::Human { message: with_input(&prompt, req.input.as_ref()) };
    let mut messages: Vec<Message> = (items.into_iter().chain([first]))
        .enumerate()
        .map(|(seq, body)| Message {
            id: format!("{id}-m{seq}"),
            run_id: id.clone(),
            seq: seq as u64,
            step_index: None,
            created_at: at,
            body,
        })
        .collect();
    messages.shrink_to_fit();
    let mut run = new_run(id, project, &prompt, req, checked, agent, at);
    run.agent_overrides = overrides;
    run.handoff_turns = seeded_turns;
    Ok((run, messages))
}

/// What a request's fields become once checked.
struct Checked {
    model: String,
    settings: Value,
    tools: Vec<String>,
    max_turns: u32,
    context: Value,
    approval: ApprovalPolicy,
    metadata: Metadata,
}

/// Checks the fields of `req` a run is made of, taking them out of it.
fn check_request(rt: &Runtime, project: &str, req: &mut CreateRun) -> Result<Checked> {
    let settings = req.model_settings.take().unwrap_or(Value::Null);
    let model = check_model(rt, req.model.as_deref(), &settings)?;
    let tools = match &req.tools {
        None => attach_tools(rt, project, "", &[ALL_TOOLS.to_owned()])?,
        Some(list) => attach_tools(rt, project, "", list)?,
    };
    let max_turns = req.max_turns.unwrap_or(rt.config.default_max_turns);
    limits::check_max_turns(Some(max_turns)).map_err(invalid)?;
    let context = req.context.take().unwrap_or(Value::Null);
    if !is_object_or_null(&context) {
        return Err(invalid("context must be a JSON object"));
    }
    let approval = check_approval(rt, project, req.approval.as_ref())?;
    if let Some(hook) = &req.on_status_change {
        check_hook(rt, hook)?;
    }
    if let Some(schema) = &req.result_schema {
        check_schema("result_schema", schema)?;
    }
    let metadata: Metadata = match req.metadata.take() {
        None | Some(Value::Null) => Metadata::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("metadata must be a JSON object")),
    };
    Ok(Checked { model, settings, tools, max_turns, context, approval, metadata })
}

/// A new root run, pending, from a checked request.
fn new_run(
    id: String,
    project: &str,
    prompt: &str,
    req: CreateRun,
    c: Checked,
    agent: Option<&Resolved>,
    at: chrono::DateTime<chrono::Utc>,
) -> Run {
    let mut run = Run {
        name: req.name.filter(|n| !n.trim().is_empty()).unwrap_or_else(|| name_from(prompt)),
        root_run_id: id.clone(),
        id,
        status: RunStatus::Pending,
        model: c.model,
        model_settings: c.settings,
        system_prompt: req.system_prompt.filter(|s| !s.trim().is_empty()),
        initial_prompt: prompt.to_owned(),
        input: req.input,
        tools: c.tools,
        tags: req.tags,
        context: c.context,
        max_turns: c.max_turns,
        current_agent: agent.map(|a| a.agent_id.clone()),
        current_agent_version: agent.map(|a| a.version),
        agent_version: agent.map(|a| a.version),
        agent_overrides: Vec::new(),
        sub_agents: agent.map(|a| a.sub_agents.clone()).unwrap_or_default(),
        handoffs: agent.map(|a| a.handoffs.clone()).unwrap_or_default(),
        handoff_turns: 0,
        agent_id: req.agent_id,
        parent_call_id: None,
        depth: 0,
        child_count: 0,
        reasoning_traces: req.reasoning_traces.unwrap_or(false),
        on_status_change: req.on_status_change,
        metadata: c.metadata,
        source: None,
        group_id: None,
        forked_from_step: None,
        replay: None,
        output: None,
        project: project.to_owned(),
        created_by: None,
        approval: c.approval,
        always_approve: Vec::new(),
        always_reject: Vec::new(),
        interruptions: Vec::new(),
        interactive: req.interactive.unwrap_or(true),
        result_schema: req.result_schema,
        call_summarization: req.call_summarization.unwrap_or(false),
        parent_run_id: None,
        forked_from_message_id: None,
        result: None,
        summary: None,
        failure_reason: None,
        usage: Usage::default(),
        step_count: 0,
        created_at: at,
        updated_at: at,
        started_at: None,
        finished_at: None,
        idle_ms: 0,
        session_id: req.session_id,
        end_user: req.user_id,
        tool_answers: None,
        experiment: None,
        outcome: Default::default(),
    };
    run.outcome = RunOutcome::of(&run, 0, 0);
    run
}

/// Fills what `req` leaves out from `agent`, checks `input` against the
/// agent's input schema, and returns the names of the fields `req` set
/// (its overrides).
fn apply_agent(req: &mut CreateRun, agent: &Resolved) -> Result<Vec<String>> {
    let spec = &agent.spec;
    let mut overrides = Vec::new();
    macro_rules! take {
        ($field:ident, $value:expr) => {
            if req.$field.is_some() {
                overrides.push(stringify!($field).to_owned());
            } else {
                req.$field = $value;
            }
        };
    }
    take!(system_prompt, spec.system_prompt.clone());
    take!(model, spec.model.clone());
    take!(model_settings, spec.model_settings.clone());
    take!(tools, Some(spec.tools.clone()));
    take!(approval, spec.approval.clone());
    take!(result_schema, spec.result_schema.clone());
    take!(max_turns, spec.max_turns);
    take!(reasoning_traces, Some(spec.reasoning_traces));
    if let Some(schema) = &spec.input_schema {
        let input = req.input.clone().unwrap_or(Value::Null);
        check_input(schema, &input)?;
    }
    Ok(overrides)
}

/// `input` must match the agent's input schema: a 400 naming the field.
pub(crate) fn check_input(schema: &Value, input: &Value) -> Result<()> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| invalid(format!("the agent's input_schema is not a valid JSON Schema: {e}")))?;
    if let Some(error) = validator.iter_errors(input).next() {
        let path = error.instance_path().to_string();
        let at = if path.is_empty() { "input".to_owned() } else { format!("input{path}") };
        return Err(invalid(format!("{at}: {error}")));
    }
    Ok(())
}

/// `input_items` (already within their bounds, see `check_bounds`) are
/// well formed: every invocation-result answers an
/// earlier invocation (of the same tool) not answered yet, and every
/// invocation is answered before the prompt.
fn check_items(items: &[MessageBody]) -> std::result::Result<(), String> {
    use std::collections::HashMap;
    let mut open: HashMap<&str, &str> = HashMap::new();
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            MessageBody::Human { message } => {
                if message.trim().is_empty() {
                    return Err(format!("input_items[{i}]: a human message must not be empty"));
                }
            }
            MessageBody::Agent { invocations, message, .. } => {
                if invocations.is_empty() && message.as_deref().is_none_or(|m| m.trim().is_empty()) {
                    return Err(format!("input_items[{i}]: an agent item needs a message or invocations"));
                }
                for inv in invocations {
                    if inv.id.is_empty() || inv.tool_name.is_empty() {
                        return Err(format!("input_items[{i}]: an invocation needs an id and a toolName"));
                    }
                    if !seen.insert(inv.id.as_str()) {
                        return Err(format!("input_items[{i}]: the invocation id `{}` is repeated", inv.id));
                    }
                    open.insert(&inv.id, &inv.tool_name);
                }
            }
            MessageBody::InvocationResult { id, tool_name, .. } => match open.remove(id.as_str()) {
                Some(tool) if tool == tool_name => {}
                Some(tool) => {
                    return Err(format!("input_items[{i}]: the result of `{id}` names `{tool_name}`, not `{tool}`"));
                }
                None => return Err(format!("input_items[{i}]: no open invocation `{id}` for this result")),
            },
        }
    }
    if let Some(id) = open.keys().next() {
        return Err(format!("input_items: the invocation `{id}` has no invocation-result item"));
    }
    Ok(())
}

/// The size bounds of every field (see [`limits`]), checked before anything
/// else so an oversized request costs no further work.
fn check_bounds(req: &CreateRun) -> std::result::Result<(), String> {
    use limits::*;
    check_bytes("initial_prompt", &req.initial_prompt, MAX_PROMPT_BYTES)?;
    if let Some(system) = &req.system_prompt {
        check_bytes("system_prompt", system, MAX_SYSTEM_PROMPT_BYTES)?;
    }
    if let Some(name) = &req.name {
        check_chars("name", name, MAX_NAME_CHARS)?;
    }
    if let Some(agent) = &req.agent_id {
        check_chars("agent_id", agent, MAX_ID_CHARS)?;
    }
    if let Some(model) = &req.model {
        check_chars("model", model, MAX_ID_CHARS)?;
    }
    if let Some(tools) = &req.tools {
        check_tool_list("tools", tools)?;
    }
    if req.tags.len() > MAX_TAGS {
        return Err(format!("tags has {} entries; the limit is {MAX_TAGS}", req.tags.len()));
    }
    for (k, v) in &req.tags {
        if k.is_empty() || k.chars().nth(MAX_TAG_KEY_CHARS).is_some() || k.contains(':') {
            return Err(format!("tag key `{k}` must be 1-{MAX_TAG_KEY_CHARS} characters without `:`"));
        }
        if v.chars().nth(MAX_TAG_VALUE_CHARS).is_some() {
            return Err(format!("tag `{k}` has a value over {MAX_TAG_VALUE_CHARS} characters"));
        }
    }
    if let Some(input) = &req.input {
        check_json("input", input, MAX_INPUT_BYTES)?;
    }
    if let Some(context) = &req.context {
        check_json("context", context, MAX_CONTEXT_BYTES)?;
    }
    if let Some(schema) = &req.result_schema {
        check_json("result_schema", schema, MAX_RESULT_SCHEMA_BYTES)?;
    }
    if let Some(settings) = &req.model_settings {
        check_json("model_settings", settings, MAX_MODEL_SETTINGS_BYTES)?;
    }
    if let Some(metadata) = &req.metadata {
        check_json("metadata", metadata, MAX_METADATA_BYTES)?;
    }
    for (field, id) in [("session_id", &req.session_id), ("user_id", &req.user_id)] {
        if let Some(id) = id {
            check_session_id(field, id)?;
        }
    }
    if let Some(items) = &req.input_items {
        if items.len() > MAX_INPUT_ITEMS {
            return Err(format!("input_items has {} items; the limit is {MAX_INPUT_ITEMS}", items.len()));
        }
        let size: usize = items.iter().map(|i| serde_json::to_value(i).map_or(0, |v| json_size(&v))).sum();
        if size > MAX_INPUT_ITEMS_BYTES {
            return Err(format!("input_items is {size} bytes of JSON; the limit is {MAX_INPUT_ITEMS_BYTES} bytes"));
        }
    }
    Ok(())
}

/// A result or input schema must compile as a JSON Schema (values are
/// checked against it), so a schema the validator cannot compile is a 400
/// naming `field` here.
pub(crate) fn check_schema(field: &str, schema: &Value) -> Result<()> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(invalid(format!("{field} must be a JSON Schema: an object (or true/false)")));
    }
    jsonschema::validator_for(schema).map_err(|e| invalid(format!("{field} is not a valid JSON Schema: {e}")))?;
    Ok(())
}

/// The model a run or an agent names (`builtin` when none), with its
/// settings checked.
pub(crate) fn check_model(rt: &Runtime, model: Option<&str>, settings: &Value) -> Result<String> {
    let name = model.filter(|m| !m.is_empty()).unwrap_or("builtin");
    let found = (rt.models.get(name))
        .ok_or_else(|| invalid(format!("unknown model `{name}`; available: {}", rt.models.names().join(", "))))?;
    found.validate_settings(settings).map_err(invalid)?;
    Ok(name.to_owned())
}

/// An approval policy (`"all"` or `{"tools", "timeout_s"}`), within its
/// bounds and naming registered tools.
pub(crate) fn check_approval(rt: &Runtime, project: &str, request: Option<&ApprovalRequest>) -> Result<ApprovalPolicy> {
    let approval = request.map(ApprovalRequest::policy).unwrap_or_default();
    approval.check_bounds().map_err(invalid)?;
    let known = rt.tools.view(project);
    if let Some(name) = approval.listed_tools().iter().find(|name| !known.contains(name)) {
        return Err(invalid(format!("approval: unknown tool `{name}`")));
    }
    Ok(approval)
}

/// A run's own webhook: a URL requests may go to (see
/// [`crate::net::check_url`]) and statuses a run can change to. Whether the
/// project has a secret to sign with is the engine's check (it reads the store).
pub(crate) fn check_hook(rt: &Runtime, hook: &crate::model::OnStatusChange) -> Result<()> {
    crate::net::check_url(&hook.url, rt.config.allow_private_networks)
        .map_err(|e| invalid(format!("on_status_change.url: {e}")))?;
    if let Some(problem) = crate::model::statuses_problem(hook.statuses.as_deref()) {
        return Err(invalid(format!("on_status_change.{problem}")));
    }
    Ok(())
}

pub(crate) fn check_id(id: &str) -> Result<()> {
    match limits::run_id_problem(id) {
        Some(problem) => Err(invalid(format!("id {problem}"))),
        None => Ok(()),
    }
}

/// A short name from the prompt's first line: at most 60 characters, cut at a word.
pub(crate) fn name_from(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or(prompt).trim();
    if line.chars().count() <= 60 {
        return line.to_owned();
    }
    let cut: String = line.chars().take(60).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{}…", cut.trim_end())
}

/// `true` for a JSON object (or null, meaning none).
pub(crate) fn is_object_or_null(v: &Value) -> bool {
    v.is_object() || v.is_null()
}

/// The prompt the model sees: the structured input is merged in as JSON.
fn with_input(prompt: &str, input: Option<&Value>) -> String {
    match input {
        None | Some(Value::Null) => prompt.to_owned(),
        Some(v) => format!("{prompt}\n\nInput:\n{}", serde_json::to_string_pretty(v).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_at_a_word() {
        assert_eq!(name_from("What is 2+2?\nmore"), "What is 2+2?");
        let long = "word ".repeat(30);
        let name = name_from(&long);
        assert!(name.ends_with('…') && name.chars().count() <= 61, "{name}");
    }

    #[test]
    fn ids_are_checked() {
        assert!(check_id("order-123_a.b:c").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("has space").is_err());
        assert!(check_id(&"x".repeat(129)).is_err());
    }

    #[test]
    fn input_is_merged_into_the_prompt() {
        let merged = with_input("Do it", Some(&serde_json::json!({"a": 1})));
        assert!(merged.starts_with("Do it\n\nInput:\n{"));
    }
}
