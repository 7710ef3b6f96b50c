//! The built-in model `builtin`: deterministic, no key, no network.
//!
//! Three modes, chosen by the run's `model_settings`:
//! - `script`: a list of turns played in order, each `{"text": "..."}`,
//!   `{"tool_calls": [{"name": "...", "arguments": {...}, "reasoning": "..."}]}` (text and tool
//!   calls may be combined) or `{"error": "..."}` (a provider failure). The turn
//!   played is the number of agent messages already in the transcript; a script
//!   that runs out before a final text fails the run with a clear reason.
//! - `judge: true`: a deterministic judge of a judge scorer's prompt (see
//!   `builtin_judge`).
//! - otherwise, a small planner (see `builtin_plan`).
//!
//! `latency_ms` delays each turn (spread over its chunks), so long runs can
//! be demonstrated. Token usage is counted from the text read and written.

use std::time::Duration;

use async_trait::async_trait;
use futures::{stream, StreamExt};
use serde_json::Value;

use super::builtin_judge::judge_turn;
use super::builtin_plan::{plan, Turn};
use super::tokens::count;
use super::{Model, ModelChunk, ModelError, ModelRequest, ModelStream};
use crate::model::limits::{
    MAX_CONTEXT_WINDOW, MAX_LATENCY_MS, MAX_SCRIPT_TURNS, MAX_TEMPERATURE, MAX_TOP_P, MIN_CONTEXT_WINDOW,
};
use crate::model::{MessageBody, Usage};

/// See the module docs.
pub struct BuiltinModel;

/// The keys the built-in model accepts in `model_settings`. The sampling
/// settings are accepted (and bounded like a provider's) so a run can be
/// moved between models, though the built-in model is deterministic.
pub const SETTINGS: [&str; 8] =
    ["script", "latency_ms", "context_window", "temperature", "top_p", "max_tokens", "seed", "judge"];

/// Checks `model_settings` for the built-in model before a run is created:
/// unknown keys and out-of-range numbers are refused, naming the bound.
pub fn validate_settings(settings: &Value) -> Result<(), String> {
    if settings.is_null() {
        return Ok(());
    }
    let Some(obj) = settings.as_object() else {
        return Err("model_settings must be a JSON object".into());
    };
    if let Some(key) = obj.keys().find(|k| !SETTINGS.contains(&k.as_str())) {
        return Err(format!(
            "model_settings.{key} is not supported by the built-in model; it accepts {}",
            SETTINGS.join(", ")
        ));
    }
    let window = check_context_window(obj.get("context_window"))?;
    check_sampling(obj, window)?;
    if let Some(latency) = obj.get("latency_ms") {
        if latency.as_u64().is_none_or(|ms| ms > MAX_LATENCY_MS) {
            return Err(format!(
                "model_settings.latency_ms must be an integer from 0 to {MAX_LATENCY_MS}, not {latency}"
            ));
        }
    }
    if obj.get("judge").is_some_and(|j| !j.is_boolean()) {
        return Err("model_settings.judge must be true or false".into());
    }
    if let Some(script) = obj.get("script") {
        let turns = script.as_array().ok_or("model_settings.script must be a list of turns")?;
        if turns.len() > MAX_SCRIPT_TURNS {
            return Err(format!("model_settings.script has {} turns; the limit is {MAX_SCRIPT_TURNS}", turns.len()));
        }
        for (i, turn) in turns.iter().enumerate() {
            Turn::from_script(turn).map_err(|e| format!("model_settings.script[{i}]: {e}"))?;
        }
    }
    Ok(())
}

/// `context_window`, when set: an integer from [`MIN_CONTEXT_WINDOW`] to
/// [`MAX_CONTEXT_WINDOW`] tokens. Shared with the OpenAI-compatible models.
pub(crate) fn check_context_window(window: Option<&Value>) -> Result<Option<u64>, String> {
    let Some(w) = window else { return Ok(None) };
    match w.as_u64() {
        Some(n) if (MIN_CONTEXT_WINDOW..=MAX_CONTEXT_WINDOW).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "model_settings.context_window must be an integer from {MIN_CONTEXT_WINDOW} to {MAX_CONTEXT_WINDOW}, not {w}"
        )),
    }
}

/// The sampling settings, when set (`null` counts as unset): `temperature`
/// 0 to 2, `top_p` 0 to 1, `seed` a 64-bit signed integer, `max_tokens` 1 to
/// the context window (else to [`MAX_CONTEXT_WINDOW`]). Shared with the
/// OpenAI-compatible models.
pub(crate) fn check_sampling(obj: &serde_json::Map<String, Value>, window: Option<u64>) -> Result<(), String> {
    let max_tokens = window.unwrap_or(MAX_CONTEXT_WINDOW);
    for key in ["temperature", "top_p", "seed", "max_tokens"] {
        let Some(value) = obj.get(key).filter(|v| !v.is_null()) else { continue };
        let in_range = |max: f64| value.as_f64().is_some_and(|x| x.is_finite() && (0.0..=max).contains(&x));
        let (ok, expected) = match key {
            "temperature" => (in_range(MAX_TEMPERATURE), format!("a number from 0 to {MAX_TEMPERATURE}")),
            "top_p" => (in_range(MAX_TOP_P), format!("a number from 0 to {MAX_TOP_P}")),
            "seed" => (value.is_i64(), format!("an integer from {} to {}", i64::MIN, i64::MAX)),
            _ => (
                value.as_u64().is_some_and(|n| (1..=max_tokens).contains(&n)),
                match window {
                    Some(w) => format!("an integer from 1 to the context window ({w})"),
                    None => format!("an integer from 1 to {max_tokens}"),
                },
            ),
        };
        if !ok {
            return Err(format!("model_settings.{key} must be {expected}, not {value}"));
        }
    }
    Ok(())
}

#[async_trait]
impl Model for BuiltinModel {
    fn validate_settings(&self, settings: &Value) -> Result<(), String> {
        validate_settings(settings)
    }

    /// A small window (8k tokens) so trimming can be seen and tested.
    fn context_window(&self, settings: &Value) -> u64 {
        settings.get("context_window").and_then(Value::as_u64).unwrap_or(8_192)
    }

    async fn stream(&self, req: ModelRequest) -> Result<ModelStream, ModelError> {
        let summarizing = req.settings.get("runlens_task").and_then(Value::as_str) == Some("summarize");
        let judging = req.settings.get("judge").and_then(Value::as_bool) == Some(true);
        let turn = match req.settings.get("script").and_then(Value::as_array) {
            _ if summarizing => summary_turn(&req),
            _ if judging => judge_turn(&req),
            Some(script) => scripted_turn(&req, script)?,
            None => plan(&req),
        };
        if let Some(error) = turn.error {
            return Err(ModelError::Scripted(error));
        }
        let usage = usage_of(&req, &turn);
        let mut chunks = Vec::new();
        if let Some(text) = &turn.text {
            chunks.extend(split_text(text).into_iter().map(ModelChunk::TextDelta));
        }
        for (index, (name, args)) in turn.tool_calls.iter().enumerate() {
            chunks.push(ModelChunk::ToolCallDelta {
                index,
                id: Some(format!("call_{}_{index}", req.turns_taken)),
                name: Some(name.clone()),
                arguments: args.to_string(),
            });
        }
        for (index, text) in &turn.call_reasoning {
            chunks.push(ModelChunk::CallReasoning { index: *index, text: text.clone() });
        }
        let finish = if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" };
        chunks.push(ModelChunk::Usage(usage));
        chunks.push(ModelChunk::Finish(finish.into()));

        // Bounded again here: an imported run's settings were not checked at creation.
        let latency = req.settings.get("latency_ms").and_then(Value::as_u64).unwrap_or(0).min(MAX_LATENCY_MS);
        if latency == 0 {
            return Ok(stream::iter(chunks.into_iter().map(Ok)).boxed());
        }
        let per_chunk = Duration::from_millis(latency) / chunks.len() as u32;
        Ok(stream::iter(chunks)
            .then(move |c| async move {
                tokio::time::sleep(per_chunk).await;
                Ok(c)
            })
            .boxed())
    }
}

fn scripted_turn(req: &ModelRequest, script: &[Value]) -> Result<Turn, ModelError> {
    let played = req.turns_taken;
    let turn = script.get(played).ok_or(ModelError::ScriptRanOut(script.len()))?;
    Turn::from_script(turn).map_err(ModelError::InvalidScript)
}

/// A deterministic summary of the text after the request's first blank line:
/// its size and its beginning.
fn summary_turn(req: &ModelRequest) -> Turn {
    let text = match req.messages.last().map(|m| &m.body) {
        Some(MessageBody::Human { message }) => message.split_once("\n\n").map_or(message.as_str(), |(_, t)| t),
        _ => "",
    };
    let head: String = text.chars().take(300).collect();
    Turn {
        text: Some(format!("A result of {} characters. It begins: {head}…", text.chars().count())),
        ..Turn::default()
    }
}

/// Splits text into word-sized chunks (at most 16) to imitate streaming.
fn split_text(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let per = words.len().div_ceil(16).max(1);
    words.chunks(per).map(|w| w.concat()).collect()
}

fn usage_of(req: &ModelRequest, turn: &Turn) -> Usage {
    let mut input = req.system_prompt.as_deref().map_or(0, count);
    for m in &req.messages {
        input += match &m.body {
            MessageBody::Human { message } => count(message),
            other => count(&serde_json::to_string(other).unwrap_or_default()),
        };
    }
    for t in &req.tools {
        input += count(&t.name) + count(&t.description) + count(&t.schema.to_string());
    }
    let mut output = turn.text.as_deref().map_or(0, count);
    for (name, args) in &turn.tool_calls {
        output += count(name) + count(&args.to_string());
    }
    Usage { input_tokens: input, output_tokens: output, total_tokens: input + output, requests: 1, ..Usage::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_are_checked() {
        assert!(validate_settings(&json!({"script": [{"text": "hi"}]})).is_ok());
        assert!(validate_settings(&json!({"script": "nope"})).is_err());
        let err = validate_settings(&json!({"script": [{"text": "a"}, {"bogus": 1}]})).unwrap_err();
        assert!(err.starts_with("model_settings.script[1]"), "{err}");
        assert!(validate_settings(&json!({"latency_ms": -1})).is_err());
    }

    #[test]
    fn settings_are_bounded_and_unknown_keys_refused() {
        let ok = json!({"script": [{"text": "hi"}], "latency_ms": MAX_LATENCY_MS, "context_window": 4096,
            "temperature": 2, "top_p": 0.5, "max_tokens": 4096, "seed": -3});
        assert_eq!(validate_settings(&ok), Ok(()));
        let err = |v: Value| validate_settings(&v).unwrap_err();
        assert!(err(json!({"latency_ms": 1_000_000_000_000_000u64}))
            .contains("latency_ms must be an integer from 0 to 60000"));
        assert!(err(json!({"latency_ms": 60_001})).contains("60000"));
        assert!(err(json!({"latency_ms": 1.5})).contains("latency_ms"));
        assert!(err(json!({"temperature": 1e300})).contains("model_settings.temperature must be a number from 0 to 2"));
        assert!(err(json!({"bogus": 1})).starts_with("model_settings.bogus is not supported by the built-in model"));
        assert!(err(json!({"runlens_task": "summarize"})).contains("runlens_task"));
        assert!(err(json!({"context_window": 255})).contains("from 256"));
        assert!(err(json!({"context_window": 4096, "max_tokens": 4097})).contains("context window (4096)"));
        let script = |n: usize| json!({"script": vec![json!({"text": "t"}); n]});
        assert!(validate_settings(&script(MAX_SCRIPT_TURNS)).is_ok());
        assert!(err(script(MAX_SCRIPT_TURNS + 1)).contains("the limit is 50000"));
    }

    #[test]
    fn text_is_split_into_chunks_that_join_back() {
        let text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
        let parts = split_text(text);
        assert!(parts.len() > 1 && parts.len() <= 16);
        assert_eq!(parts.concat(), text);
    }
}
