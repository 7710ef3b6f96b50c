//! Client-facing shapes of huge traces: pages of steps and light previews.
//!
//! A 10,000-step trace is too big to send (or render) at once, so clients
//! read steps a page at a time and, in light mode, get payloads cut to a
//! short preview with a `<field>_truncated: true` flag next to each cut one;
//! the full value comes from `GET /api/runs/{id}/tool-calls/{call_id}` (or
//! a one-step page) when the user expands it. No runtime dependencies: the
//! browser bundle uses the same types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{Step, ToolCall};

/// Characters kept of a cut payload.
pub const PREVIEW_CHARS: usize = 200;

/// Steps returned when a client asks for no `limit`: small runs come whole.
pub const DEFAULT_STEP_PAGE: u32 = 1000;

/// Largest page of steps one request may ask for.
pub const MAX_STEP_PAGE: u32 = 10_000;

/// One page of a run's steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepsPage {
    pub steps: Vec<Step>,
    /// The `from` of the next page; `None` on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_from: Option<u32>,
}

/// `v` cut to [`PREVIEW_CHARS`] characters (strings by their text, other
/// values as compact JSON), or `None` when it is short enough to send whole.
pub fn preview(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => preview_text(s),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
        other => preview_text(&other.to_string()),
    }
}

/// `text` cut to [`PREVIEW_CHARS`] characters, or `None` when it is short
/// enough to send whole.
pub fn preview_text(text: &str) -> Option<String> {
    if text.len() <= PREVIEW_CHARS {
        return None; // byte length ≥ char count: certainly short enough
    }
    let mut chars = text.char_indices();
    let cut = chars.nth(PREVIEW_CHARS).map(|(i, _)| i)?;
    Some(format!("{}…", &text[..cut]))
}

/// Replaces `obj[field]` by its preview and sets `<field>_truncated`.
fn cut(obj: &mut Map<String, Value>, field: &str) {
    if let Some(short) = obj.get(field).and_then(preview) {
        obj.insert(field.to_owned(), Value::String(short));
        obj.insert(format!("{field}_truncated"), Value::Bool(true));
    }
}

/// A tool call as JSON with `arguments`, `result`, `reasoning` and `error` cut.
pub fn light_tool_call(call: &ToolCall) -> Value {
    let mut v = serde_json::to_value(call).unwrap_or_default();
    if let Value::Object(obj) = &mut v {
        for field in ["arguments", "result", "reasoning", "error"] {
            cut(obj, field);
        }
    }
    v
}

/// A step as JSON with its response's text (or error) and its tool call
/// payloads cut (see [`light_tool_call`]).
pub fn light_step(step: &Step) -> Value {
    let mut v = serde_json::to_value(step).unwrap_or_default();
    if let Some(Value::Object(resp)) = v.get_mut("response") {
        cut(resp, "text");
        cut(resp, "error");
    }
    if let Some(obj) = v.as_object_mut() {
        obj.insert("tool_calls".into(), step.tool_calls.iter().map(light_tool_call).collect());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_values_become_flagged_previews() {
        assert_eq!(preview(&json!("short")), None);
        assert_eq!(preview(&json!(12)), None);
        let long = "é".repeat(300);
        let p = preview(&json!(long)).unwrap();
        assert_eq!(p.chars().count(), PREVIEW_CHARS + 1);
        let big = json!({ "rows": (0..100).collect::<Vec<_>>() });
        assert!(preview(&big).unwrap().starts_with("{\"rows\":[0,1,2"));
        let mut obj = Map::new();
        obj.insert("result".into(), big);
        obj.insert("arguments".into(), json!({"a": 1}));
        cut(&mut obj, "result");
        cut(&mut obj, "arguments");
        assert_eq!(obj["result_truncated"], true);
        assert!(!obj.contains_key("arguments_truncated"));
    }
}
