//! The compact form of state documents: what follows from position and the
//! run id is left out, and nested timestamps are Unix milliseconds.

use serde_json::Value;

const STEP_TIMES: [&str; 3] = ["started_at", "model_completed_at", "completed_at"];
const CALL_TIMES: [&str; 3] = ["started_at", "completed_at", "requested_at"];

/// Leaves out what a document can derive, so a state stays small (under
/// 1 KB per turn): every nested `run_id`/`runId`, message `id` and `seq`,
/// step `id` and `index`, tool-call `step_index` (all implied by position and the run
/// id), zero usage counters and the default step `kind`; and writes the
/// timestamps of messages, steps and tool calls as Unix milliseconds (the
/// precision runlens keeps). [`expand`] restores all of it.
pub fn compact(mut doc: Value) -> Value {
    if let Some(messages) = doc.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages.iter_mut().filter_map(Value::as_object_mut) {
            for k in ["id", "runId", "seq"] {
                m.remove(k);
            }
            to_millis(m, &["createdAt"]);
        }
    }
    if let Some(steps) = doc.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps.iter_mut().filter_map(Value::as_object_mut) {
            step.remove("run_id");
            step.remove("index");
            step.remove("id");
            if step.get("kind").and_then(Value::as_str) == Some(DEFAULT_KIND) {
                step.remove("kind");
            }
            to_millis(step, &STEP_TIMES);
            if let Some(usage) = step.get_mut("usage").and_then(Value::as_object_mut) {
                usage.retain(|_, v| v.as_u64() != Some(0));
            }
            for c in step.get_mut("tool_calls").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(c) = c.as_object_mut() {
                    c.remove("run_id");
                    c.remove("step_index");
                    to_millis(c, &CALL_TIMES);
                }
            }
        }
    }
    doc
}

const DEFAULT_KIND: &str = "model_turn";

fn to_millis(obj: &mut serde_json::Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = obj.get_mut(*k) {
            if let Some(t) = v.as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
                *v = Value::from(t.timestamp_millis());
            }
        }
    }
}

fn from_millis(obj: &mut serde_json::Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = obj.get_mut(*k) {
            if let Some(t) = v.as_i64().and_then(chrono::DateTime::from_timestamp_millis) {
                *v = serde_json::to_value(t).unwrap_or_default();
            }
        }
    }
}

/// Restores what [`compact`] left out of `messages[i]` (a full message
/// passes unchanged). The run id is not known yet while a document is read:
/// a missing `runId` or `id` is left empty and filled in from the run.
pub(super) fn expand_message(m: &mut Value, i: usize) {
    let Some(m) = m.as_object_mut() else { return };
    m.entry("seq").or_insert(Value::from(i));
    from_millis(m, &["createdAt"]);
    m.entry("runId").or_insert(Value::from(""));
    m.entry("id").or_insert(Value::from(""));
}

/// Restores what [`compact`] left out of `steps[i]` and its tool calls, as
/// [`expand_message`] does.
pub(super) fn expand_step(step: &mut Value, i: usize) {
    let Some(step) = step.as_object_mut() else { return };
    step.entry("index").or_insert(Value::from(i));
    step.entry("run_id").or_insert(Value::from(""));
    step.entry("kind").or_insert(Value::from(DEFAULT_KIND));
    from_millis(step, &STEP_TIMES);
    let index = step["index"].clone();
    for c in step.get_mut("tool_calls").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(c) = c.as_object_mut() {
            c.entry("run_id").or_insert(Value::from(""));
            c.entry("step_index").or_insert(index.clone());
            from_millis(c, &CALL_TIMES);
        }
    }
}
