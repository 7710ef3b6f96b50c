//! Time travel: a fork from any step of a run (`POST /api/runs/{id}/fork`),
//! with what the model or a tool said at that step changed, and the
//! configuration changed from the next turn.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, check_chars, check_json};

/// How a replay answers the model's turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ReplayMode {
    /// From the original run's recorded answers (the built-in model plays them; no provider call),
    /// while the tools run for real: it stops at the first step whose results differ.
    Recorded,
    /// The original's model is called again; the first step that differs is recorded.
    Live,
}

impl ReplayMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayMode::Recorded => "recorded",
            ReplayMode::Live => "live",
        }
    }
}

/// `POST /api/runs/{id}/replay`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplayRequest {
    pub mode: ReplayMode,
}

/// What a replay run replays, and where it stopped matching.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Replay {
    /// The original run.
    pub of: String,
    pub mode: ReplayMode,
    /// The first step that differs from the original's (a recorded replay stops there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverged_at: Option<u32>,
    /// How it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<String>,
}

/// Tool results a fork may replace at its step.
pub const MAX_REPLACED_RESULTS: usize = 100;
/// Tool calls a replaced model answer may make.
pub const MAX_REPLACED_CALLS: usize = 32;
/// Bytes of one replaced tool result or one replaced call's arguments.
pub const MAX_REPLACED_BYTES: usize = 256 * 1024;

/// `POST /api/runs/{id}/fork`: a new run with the history of run `id` up to
/// the end of step `from_step`, changed there as asked, continuing from there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForkFromStep {
    /// The index of the step the fork keeps last (from 0).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))]
    pub from_step: u32,
    /// Replaces results of that step's tool calls, by call id: the value the tool returned, or
    /// `{"error": "…"}` for a failure. The model sees them at the fork's first turn.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub tool_results: BTreeMap<String, Value>,
    /// Replaces what the model answered at that step; its tool calls then run anew (with
    /// approvals as usual). Not with `tool_results`.
    #[serde(default)]
    pub model_output: Option<ModelOutput>,
    /// From the next turn on: another model.
    #[serde(default)]
    pub model: Option<String>,
    /// From the next turn on: other model settings (the whole object).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub model_settings: Option<Value>,
    /// From the next turn on: another system prompt (an empty one removes it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 65536))]
    pub system_prompt: Option<String>,
    /// From the next turn on: other tools (names, sources or `all`, as when creating a run).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The fork's name (default: the parent's, with "· fork from step N").
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    pub name: Option<String>,
}

/// A model answer written by hand: text, tool calls, or both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelOutput {
    /// What the model says (without tool calls: its final answer, which ends the fork).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 262144))]
    pub text: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub tool_calls: Vec<OutputCall>,
}

/// One tool call of a [`ModelOutput`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputCall {
    /// The tool.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = "\\S"))]
    pub name: String,
    /// Its arguments (a JSON object).
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ForkFromStep {
    /// Checks sizes and shapes (the engine checks them against the run).
    pub fn check_bounds(&self) -> Result<(), String> {
        if !self.tool_results.is_empty() && self.model_output.is_some() {
            return Err("tool_results and model_output cannot be combined: a replaced answer's calls run anew".into());
        }
        if self.tool_results.len() > MAX_REPLACED_RESULTS {
            return Err(format!("tool_results: at most {MAX_REPLACED_RESULTS} calls"));
        }
        for (id, v) in &self.tool_results {
            check_chars("tool_results (a call id)", id, limits::MAX_ID_CHARS)?;
            check_json(&format!("tool_results.{id}"), v, MAX_REPLACED_BYTES)?;
            if let Some(e) = replaced_error(v) {
                if e.is_none() {
                    return Err(format!("tool_results.{id}.error must be a string"));
                }
            }
        }
        if let Some(out) = &self.model_output {
            if let Some(t) = &out.text {
                limits::check_bytes("model_output.text", t, limits::MAX_PROMPT_BYTES)?;
            }
            if out.tool_calls.len() > MAX_REPLACED_CALLS {
                return Err(format!("model_output.tool_calls: at most {MAX_REPLACED_CALLS}"));
            }
            if out.text.as_deref().is_none_or(|t| t.trim().is_empty()) && out.tool_calls.is_empty() {
                return Err("model_output needs text or tool_calls".into());
            }
            for (i, c) in out.tool_calls.iter().enumerate() {
                if c.name.trim().is_empty() {
                    return Err(format!("model_output.tool_calls[{i}].name must not be empty"));
                }
                check_chars(&format!("model_output.tool_calls[{i}].name"), &c.name, 200)?;
                if !c.arguments.is_object() {
                    return Err(format!("model_output.tool_calls[{i}].arguments must be a JSON object"));
                }
                check_json(&format!("model_output.tool_calls[{i}].arguments"), &c.arguments, MAX_REPLACED_BYTES)?;
            }
        }
        if let Some(s) = &self.model_settings {
            if !s.is_object() {
                return Err("model_settings must be a JSON object".into());
            }
            check_json("model_settings", s, limits::MAX_MODEL_SETTINGS_BYTES)?;
        }
        if let Some(p) = &self.system_prompt {
            limits::check_bytes("system_prompt", p, limits::MAX_SYSTEM_PROMPT_BYTES)?;
        }
        if let Some(n) = &self.name {
            check_chars("name", n, limits::MAX_NAME_CHARS)?;
        }
        Ok(())
    }
}

/// A replaced result of the form `{"error": …}`: `Some(Some(text))` for a
/// failure with its message, `Some(None)` when `error` is not a string,
/// `None` for a result value.
pub fn replaced_error(v: &Value) -> Option<Option<&str>> {
    match v.as_object() {
        Some(o) if o.len() == 1 && o.contains_key("error") => Some(o["error"].as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fork(v: Value) -> Result<(), String> {
        serde_json::from_value::<ForkFromStep>(v).map_err(|e| e.to_string())?.check_bounds()
    }

    #[test]
    fn forks_are_checked_before_the_run_is_read() {
        assert!(fork(json!({"from_step": 2})).is_ok());
        assert!(fork(json!({"from_step": 2, "tool_results": {"c1": {"error": "down"}}})).is_ok());
        assert!(fork(json!({"from_step": 2, "tool_results": {"c1": {"error": 5}}})).unwrap_err().contains("string"));
        let both = json!({"from_step": 2, "tool_results": {"c1": 1}, "model_output": {"text": "hi"}});
        assert!(fork(both).unwrap_err().contains("cannot be combined"));
        assert!(fork(json!({"from_step": 0, "model_output": {}})).unwrap_err().contains("text or tool_calls"));
        let bad_args = json!({"from_step": 0, "model_output": {"tool_calls": [{"name": "x", "arguments": [1]}]}});
        assert!(fork(bad_args).unwrap_err().contains("object"));
        assert!(fork(json!({"from_step": 0, "surprise": 1})).is_err());
    }
}
