//! Run state export and import: one self-contained, versioned JSON document.
//!
//! Import is strict: an unknown `$schemaVersion`, a missing field, a
//! dangling reference or an unknown tool or model fails the whole import
//! with a message naming the problem, before anything is written (the run
//! and its history are then inserted in one transaction).
//!
//! Round trip: export → import → export yields the same document except the
//! run id and what embeds it (blob ids). Timestamps, including the run's
//! `created_at`, are kept as exported. Documents are written compact (fields
//! derivable from position and the run id left out); import accepts compact
//! and full documents alike.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Engine;

mod compact;

use crate::error::{EngineError, Result};
use crate::model::{Message, MessageBody, Run, RunStatus, Step, ToolCallStatus};
use crate::store::Blob;
pub use compact::compact;
use compact::expand;

/// The `$schemaVersion` this server writes and reads.
pub const STATE_SCHEMA_VERSION: &str = "runlens.run-state.v1";

/// Keys every exported run object has; an import missing one is refused.
const RUN_KEYS: [&str; 31] = [
    "id",
    "name",
    "status",
    "model",
    "model_settings",
    "system_prompt",
    "initial_prompt",
    "input",
    "tools",
    "tags",
    "context",
    "max_turns",
    "agent_id",
    "approval",
    "always_approve",
    "always_reject",
    "interactive",
    "result_schema",
    "call_summarization",
    "parent_run_id",
    "forked_from_message_id",
    "result",
    "summary",
    "failure_reason",
    "usage",
    "step_count",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "interruptions",
];

/// A run's whole state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunState {
    #[serde(rename = "$schemaVersion")]
    pub schema_version: String,
    pub run: Run,
    pub messages: Vec<Message>,
    pub steps: Vec<Step>,
    pub blobs: Vec<BlobState>,
}

/// A stored large tool result; `data` is the result's JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobState {
    pub id: String,
    pub call_id: Option<String>,
    pub content_type: String,
    pub data: Value,
}

/// How an imported run continues.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Keep the exported id (409 when it exists) instead of a new one.
    pub keep_id: bool,
    pub max_turns: Option<u32>,
    pub tools: Option<Vec<String>>,
    pub model: Option<String>,
}

impl Engine {
    /// The run's state document.
    pub async fn export_state(&self, run_id: &str) -> Result<RunState> {
        let mut run = self.get_run(run_id).await?;
        run.interruptions.clear(); // derived from the tool calls on import
        let (messages, steps, blobs) = tokio::try_join!(
            self.inner.store.messages(run_id),
            self.inner.store.steps(run_id),
            self.inner.store.run_blobs(run_id)
        )?;
        let blobs = blobs
            .into_iter()
            .map(|b| BlobState {
                data: serde_json::from_slice(&b.data).unwrap_or(Value::Null),
                id: b.id,
                call_id: b.call_id,
                content_type: b.content_type,
            })
            .collect();
        Ok(RunState { schema_version: STATE_SCHEMA_VERSION.into(), run, messages, steps, blobs })
    }

    /// The state document as written to files and the API: derivable fields
    /// left out (see [`compact()`]).
    pub async fn export_document(&self, run_id: &str) -> Result<Value> {
        let state = self.export_state(run_id).await?;
        Ok(compact(serde_json::to_value(state).unwrap_or_default()))
    }

    /// Creates a run from a state document (see the module docs).
    pub async fn import_state(&self, doc: &Value, opts: ImportOptions) -> Result<Run> {
        let mut state = parse(doc)?;
        let overrides = self.check_overrides(opts.max_turns, opts.tools, opts.model)?;
        self.check_references(&state)?;
        let old_id = state.run.id.clone();
        let id = if opts.keep_id { old_id.clone() } else { uuid::Uuid::now_v7().to_string() };
        if opts.keep_id && self.inner.store.get_run(&id).await?.is_some() {
            return Err(EngineError::Conflict(format!("a run with id `{id}` exists already")));
        }
        rehome(&mut state, &old_id, &id);
        let run = &mut state.run;
        if let Some(n) = overrides.max_turns {
            run.max_turns = n;
        }
        if let Some(t) = overrides.tools {
            run.tools = t;
        }
        if let Some(m) = overrides.model {
            run.model = m;
        }
        if self.inner.models.get(&run.model).is_none() {
            return Err(EngineError::Invalid(format!("unknown model `{}`", run.model)));
        }
        // A run that was mid-flight continues from its last step.
        let resume = matches!(run.status, RunStatus::Running | RunStatus::Pending);
        if resume {
            run.status = RunStatus::Pending;
        }
        if !self.inner.store.insert_run_with_history(&state.run, &state.messages, &state.steps).await? {
            return Err(EngineError::Conflict(format!("a run with id `{id}` exists already")));
        }
        for b in state.blobs {
            let blob = Blob {
                id: b.id,
                run_id: id.clone(),
                call_id: b.call_id,
                content_type: b.content_type,
                data: b.data.to_string().into_bytes(),
                created_at: state.run.created_at,
            };
            self.inner.store.insert_blob(&blob).await?;
        }
        if resume {
            self.spawn(id.clone());
        }
        self.get_run(&id).await
    }

    fn check_references(&self, s: &RunState) -> Result<()> {
        let bad = |m: String| Err(EngineError::Invalid(m));
        if let Some(t) = s.run.tools.iter().find(|t| !self.inner.tools.contains(t)) {
            return bad(format!("unknown tool `{t}` in run.tools"));
        }
        for (i, m) in s.messages.iter().enumerate() {
            if m.seq != i as u64 || m.run_id != s.run.id {
                return bad(format!("messages[{i}]: expected seq {i} of run `{}`", s.run.id));
            }
        }
        let mut calls = HashSet::new();
        for (i, step) in s.steps.iter().enumerate() {
            if step.index != i as u32 || step.run_id != s.run.id {
                return bad(format!("steps[{i}]: expected index {i} of run `{}`", s.run.id));
            }
            for c in &step.tool_calls {
                if c.step_index != step.index || c.run_id != s.run.id {
                    return bad(format!("tool call `{}` does not belong to steps[{i}]", c.id));
                }
                if !calls.insert(c.id.as_str()) {
                    return bad(format!("tool call id `{}` appears twice", c.id));
                }
                let unfinished = !c.status.is_finished();
                if unfinished && !self.inner.tools.contains(&c.tool_name) {
                    return bad(format!("unknown tool `{}` in tool call `{}`", c.tool_name, c.id));
                }
                if let Some(blob) = c.result.as_ref().and_then(|r| r.get("blob_id")).and_then(Value::as_str) {
                    if !s.blobs.iter().any(|b| b.id == blob) {
                        return bad(format!("dangling reference: tool call `{}` names blob `{blob}`", c.id));
                    }
                }
            }
        }
        let mut invoked = HashSet::new();
        for m in &s.messages {
            match &m.body {
                MessageBody::Agent { invocations, .. } => invoked.extend(invocations.iter().map(|i| i.id.as_str())),
                MessageBody::InvocationResult { id, .. } if !invoked.contains(id.as_str()) => {
                    return bad(format!(
                        "dangling reference: invocation-result `{}` answers no earlier tool call `{id}`",
                        m.id
                    ));
                }
                _ => {}
            }
        }
        let awaiting =
            s.steps.iter().flat_map(|st| &st.tool_calls).any(|c| c.status == ToolCallStatus::AwaitingApproval);
        if s.run.status == RunStatus::Paused && !awaiting {
            return bad("a paused run must have a tool call awaiting approval".into());
        }
        Ok(())
    }
}

/// Checks the version and the shape of a document.
fn parse(doc: &Value) -> Result<RunState> {
    let invalid = |m: String| EngineError::Invalid(m);
    match doc.get("$schemaVersion").and_then(Value::as_str) {
        Some(STATE_SCHEMA_VERSION) => {}
        Some(other) => {
            return Err(invalid(format!(
                "unsupported $schemaVersion `{other}`; this server reads `{STATE_SCHEMA_VERSION}`"
            )))
        }
        None => return Err(invalid("missing field `$schemaVersion`".into())),
    }
    let run = doc.get("run").and_then(Value::as_object).ok_or_else(|| invalid("missing field `run`".into()))?;
    if let Some(k) = RUN_KEYS.iter().find(|k| !run.contains_key(**k)) {
        return Err(invalid(format!("missing field `run.{k}`")));
    }
    serde_json::from_value(expand(doc.clone())).map_err(|e| invalid(format!("invalid run state: {e}")))
}

/// Gives the state a new run id, and everything that embeds it.
fn rehome(s: &mut RunState, old: &str, new: &str) {
    if old == new {
        return;
    }
    s.run.id = new.to_owned();
    let blob_prefix = format!("{old}-");
    let new_blob = |id: &str| id.strip_prefix(&blob_prefix).map_or(id.to_owned(), |rest| format!("{new}-{rest}"));
    for m in &mut s.messages {
        m.run_id = new.to_owned();
        m.id = format!("{new}-m{}", m.seq);
        if let MessageBody::InvocationResult { result, .. } = &mut m.body {
            if let Some(Value::String(b)) = result.get_mut("blob_id") {
                *b = new_blob(b);
            }
        }
    }
    for step in &mut s.steps {
        step.run_id = new.to_owned();
        for c in &mut step.tool_calls {
            c.run_id = new.to_owned();
            if let Some(Value::String(b)) = c.result.as_mut().and_then(|r| r.get_mut("blob_id")) {
                *b = new_blob(b);
            }
        }
    }
    for b in &mut s.blobs {
        b.id = new_blob(&b.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_keys_match_the_run_type() {
        let run: Run = serde_json::from_value(serde_json::json!({
            "id": "r", "name": "n", "status": "done", "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 1, "agent_id": null, "result": null, "summary": null,
            "failure_reason": null, "usage": {}, "step_count": 0, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null
        }))
        .unwrap();
        let v = serde_json::to_value(run).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = RUN_KEYS.to_vec();
        keys.sort();
        expected.sort();
        assert_eq!(keys, expected);
    }
}
