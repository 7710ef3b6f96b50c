//! Run state export and import: one self-contained, versioned JSON document.
//!
//! Import is strict: an unknown `$schemaVersion`, a missing field, a
//! dangling reference, an unknown tool or model, or settings a new run could
//! not have fail the whole import with a message naming the problem, and
//! nothing is stored (the run, its history and its blobs are inserted in one
//! transaction). An import never runs a call that needs approval without a
//! recorded approve decision: such a call is imported `awaiting_approval`
//! and its run `paused`, with its approval timeout armed (see
//! `check::settle_calls`). Blobs are named after the new run, whatever ids
//! the document gives them, and stored as `application/json`.
//!
//! Round trip: export → import → export yields the same document except the
//! run id and what embeds it (blob ids). Timestamps, including the run's
//! `created_at`, are kept as exported. Documents are written compact (fields
//! derivable from position and the run id left out); import accepts compact
//! and full documents alike.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Engine;

mod check;
mod compact;
mod parse;

use crate::error::{EngineError, Result};
use crate::model::{Message, MessageBody, Run, RunStatus, Step, ToolCallStatus};
use crate::store::{Blob, HistoryInsert, HistoryWrite};
pub use compact::compact;

/// The `$schemaVersion` this server writes and reads.
pub const STATE_SCHEMA_VERSION: &str = "runlens.run-state.v1";

/// Keys every exported run object has; an import missing one is refused.
const RUN_KEYS: [&str; 33] = [
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
    "project",
    "created_by",
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
///
/// `content_type` is written for readers of the document; an import ignores
/// it (a blob's data is JSON, so it is stored as `application/json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobState {
    pub id: String,
    pub call_id: Option<String>,
    #[serde(default)]
    pub content_type: String,
    pub data: Value,
}

/// The content type of every blob: a tool result's JSON.
pub(crate) const BLOB_CONTENT_TYPE: &str = "application/json";

/// How an imported run continues.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Keep the exported id (409 when it exists) instead of a new one.
    pub keep_id: bool,
    pub max_turns: Option<u32>,
    pub tools: Option<Vec<String>>,
    pub model: Option<String>,
    /// The project the run is imported into (default: `default`); the
    /// document's own `project` is ignored.
    pub project: Option<String>,
    /// Who imported it, recorded as the run's creator.
    pub by: Option<crate::model::Actor>,
}

impl Engine {
    /// Arms the approval timeouts of an imported paused run, from when each
    /// call was requested (an expired one fires at once).
    fn arm_timeouts(&self, run: &Run, steps: &[Step]) {
        let Some(secs) = run.approval.timeout_s else { return };
        let now = chrono::Utc::now();
        for c in steps.iter().flat_map(|s| &s.tool_calls).filter(|c| c.status == ToolCallStatus::AwaitingApproval) {
            let requested = c.requested_at.unwrap_or(now);
            let deadline = chrono::Duration::try_seconds(secs as i64).and_then(|d| requested.checked_add_signed(d));
            let left = deadline.map_or(Duration::ZERO, |d| (d - now).to_std().unwrap_or(Duration::ZERO));
            self.arm_after(&run.id, c.id.clone(), left);
        }
    }
}

/// `id` moved from run `old` into run `new`: every blob of a run is named
/// `<run id>-<rest>`, so a document (or a fork) can never name a blob of
/// another run.
pub(crate) fn blob_id_in(id: &str, old: &str, new: &str) -> String {
    let rest = id.strip_prefix(old).and_then(|r| r.strip_prefix('-')).unwrap_or(id);
    format!("{new}-{rest}")
}

/// Rewrites the blob a result names with [`blob_id_in`]; returns the old and
/// new ids when it did.
pub(crate) fn rebase_blob_ref(result: Option<&mut Value>, old: &str, new: &str) -> Option<(String, String)> {
    let Some(Value::String(b)) = result?.get_mut("blob_id") else { return None };
    let moved = blob_id_in(b, old, new);
    Some((std::mem::replace(b, moved.clone()), moved))
}

/// Gives the state a new run id, and everything that embeds it.
fn rehome(s: &mut RunState, blobs: &mut [Blob], old: &str, new: &str) {
    s.run.id = new.to_owned();
    s.run.root_run_id = new.to_owned();
    for m in &mut s.messages {
        m.run_id = new.to_owned();
        m.id = format!("{new}-m{}", m.seq);
        if let MessageBody::InvocationResult { result, .. } = &mut m.body {
            rebase_blob_ref(Some(result), old, new);
        }
    }
    for step in &mut s.steps {
        step.run_id = new.to_owned();
        for c in &mut step.tool_calls {
            c.run_id = new.to_owned();
            rebase_blob_ref(c.result.as_mut(), old, new);
        }
    }
    for b in blobs {
        b.id = blob_id_in(&b.id, old, new);
        b.run_id = new.to_owned();
    }
}

impl Snapshots<'_> {
    /// The run's state document.
    pub async fn export_state(self, run_id: &str) -> Result<RunState> {
        let mut run = self.runs().get_run(run_id).await?;
        run.interruptions.clear(); // derived from the tool calls on import
        run.group_id = None; // how it was started here, not its state: an import joins no group
        run.experiment = None; // nor an experiment
        let (messages, steps, blobs) = tokio::try_join!(
            self.rt.store.messages(run_id),
            self.rt.store.steps(run_id),
            self.rt.store.run_blobs(run_id)
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
    pub async fn export_document(self, run_id: &str) -> Result<Value> {
        let state = self.snapshots().export_state(run_id).await?;
        Ok(compact(serde_json::to_value(state).unwrap_or_default()))
    }

    /// Creates a run from a state document given as JSON bytes (see the
    /// module docs): the import API reads request bodies with this.
    pub async fn import_bytes(self, doc: &[u8], opts: ImportOptions) -> Result<Run> {
        let (mut state, mut blobs) = parse::parse(doc)?;
        if let Some(why) = state.run.read_only("imported") {
            return Err(EngineError::Conflict(why));
        }
        let project = opts.project.clone().unwrap_or_else(|| crate::model::DEFAULT_PROJECT.to_owned());
        let overrides = self.check_overrides(&project, opts.max_turns, opts.tools, opts.model)?;
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
        run.project = project;
        run.created_by = opts.by.clone();
        // An imported run is the root of its own tree here: its parent (if
        // it had one) is not part of the document.
        if run.parent_call_id.take().is_some() {
            run.parent_run_id = None;
        }
        run.depth = 0;
        run.child_count = 0;
        run.output = None;
        run.outcome = Default::default();
        // Nor is it in the comparison group or the experiment a document may name.
        run.group_id = None;
        run.experiment = None;
        check::run_settings(&self.rt, &state)?;
        if let Some(hook) = &state.run.on_status_change {
            crate::runtime::create::check_hook(&self.rt, hook).map_err(|e| match e {
                EngineError::Invalid(why) => EngineError::Invalid(format!("run.{why}")),
                other => other,
            })?;
        }
        self.check_hook_secret(&state.run.project, state.run.on_status_change.as_ref()).await?;
        check::references(&state, &blobs)?;
        check::settle_calls(&self.rt, &mut state)?;
        let old_id = state.run.id.clone();
        let id = if opts.keep_id {
            check::kept_id(&old_id)?;
            old_id.clone()
        } else {
            uuid::Uuid::now_v7().to_string()
        };
        rehome(&mut state, &mut blobs, &old_id, &id);
        let RunState { mut run, messages, steps, .. } = state;
        run.outcome = crate::model::RunOutcome::of_steps(&run, &steps);
        let write = HistoryWrite { run: &run, messages: &messages, steps: &steps, blobs: &blobs, copies: &[] };
        match self.rt.store.insert_run_with_blobs(write).await? {
            HistoryInsert::Inserted => {}
            HistoryInsert::RunExists => {
                let existing = self.rt.store.get_run(&id).await?.filter(|r| r.project == run.project);
                let Some(existing) = existing else { return Err(super::unusable_id(&id)) };
                return Err(EngineError::Conflict(
                    existing
                        .read_only("imported over")
                        .unwrap_or_else(|| format!("a run with id `{id}` exists already")),
                ));
            }
            HistoryInsert::BlobTaken(b) => {
                return Err(EngineError::Invalid(format!(
                    "blobs: id `{b}` appears twice in the document (or is taken already)"
                )))
            }
        }
        drop(blobs);
        if let Some(by) = &opts.by {
            self.identity().audit(Some(&run.project), by, "imported", Some(&id), None).await;
        }
        // The run as imported, read before its driver or timers can move it
        // (an expired approval deadline fires at once).
        let imported = self.runs().get_run(&id).await?;
        match run.status {
            RunStatus::Pending => self.spawn(id.clone()),
            RunStatus::Paused => self.arm_timeouts(&run, &steps),
            _ => {}
        }
        Ok(imported)
    }

    /// Creates a run from a state document (see [`Snapshots::import_bytes`]).
    pub async fn import_state(self, doc: &Value, opts: ImportOptions) -> Result<Run> {
        let bytes = serde_json::to_vec(doc).map_err(|e| EngineError::Invalid(format!("invalid run state: {e}")))?;
        self.snapshots().import_bytes(&bytes, opts).await
    }
}

crate::engine::facade_group!(Snapshots, snapshots, "A run's state exported as a document, and imported back.");

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys an exported run object has since saved agents: an import
    /// without them reads their defaults (a root run of no saved agent), so
    /// documents written before them still load.
    const AGENT_RUN_KEYS: [&str; 14] = [
        "parent_call_id",
        "root_run_id",
        "depth",
        "child_count",
        "agent_version",
        "agent_overrides",
        "current_agent",
        "current_agent_version",
        "sub_agents",
        "handoffs",
        "handoff_turns",
        "reasoning_traces",
        "metadata",
        "output",
    ];

    /// Keys an exported run object has since run outcomes: derived on
    /// every read, so an import without them loses nothing.
    const OUTCOME_RUN_KEYS: [&str; 1] = ["outcome"];

    /// Keys an exported run object has since active durations: an import
    /// without them reads no idle time (its duration is its wall time).
    const IDLE_RUN_KEYS: [&str; 1] = ["idle_ms"];

    /// Keys an exported run object has since status webhooks: an import
    /// without them reads no hook.
    const WEBHOOK_RUN_KEYS: [&str; 1] = ["on_status_change"];

    /// Keys an exported run object has since OTLP ingest: an import without
    /// them reads a run runlens ran.
    const SOURCE_RUN_KEYS: [&str; 1] = ["source"];

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
        let mut expected = [
            &RUN_KEYS[..],
            &AGENT_RUN_KEYS[..],
            &WEBHOOK_RUN_KEYS[..],
            &SOURCE_RUN_KEYS[..],
            &OUTCOME_RUN_KEYS[..],
            &IDLE_RUN_KEYS[..],
        ]
        .concat();
        keys.sort();
        expected.sort();
        assert_eq!(keys, expected);
    }
}
