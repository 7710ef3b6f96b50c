//! The built-in model `builtin`: deterministic, no key, no network.
//!
//! Two modes, chosen by the run's `model_settings`:
//! - `script`: a list of turns played in order, each `{"text": "..."}`,
//!   `{"tool_calls": [{"name": "...", "arguments": {...}}]}` (text and tool
//!   calls may be combined) or `{"error": "..."}` (a provider failure). The turn
//!   played is the number of agent messages already in the transcript; a script
//!   that runs out before a final text fails the run with a clear reason.
//! - without a script, a small planner (see `builtin_plan`).
//!
//! `latency_ms` delays each turn (spread over its chunks), so long runs can
//! be demonstrated. Token usage is counted from the text read and written.

use std::time::Duration;

use async_trait::async_trait;
use futures::{stream, StreamExt};
use serde_json::Value;

use super::builtin_plan::{plan, Turn};
use super::tokens::count;
use super::{Model, ModelChunk, ModelError, ModelRequest, ModelStream};
use crate::model::{MessageBody, Usage};

/// See the module docs.
pub struct BuiltinModel;

/// Checks `model_settings` for the built-in model before a run is created.
pub fn validate_settings(settings: &Value) -> Result<(), String> {
    if settings.is_null() {
        return Ok(());
    }
    let Some(obj) = settings.as_object() else {
        return Err("model_settings must be a JSON object".into());
    };
    if let Some(window) = obj.get("context_window") {
        if window.as_u64().is_none_or(|w| w < 256) {
            return Err("model_settings.context_window must be an integer of at least 256".into());
        }
    }
    if let Some(latency) = obj.get("latency_ms") {
        if !latency.is_u64() {
            return Err("model_settings.latency_ms must be a non-negative integer".into());
        }
    }
    if let Some(script) = obj.get("script") {
        let turns = script.as_array().ok_or("model_settings.script must be a list of turns")?;
        for (i, turn) in turns.iter().enumerate() {
            Turn::from_script(turn).map_err(|e| format!("model_settings.script[{i}]: {e}"))?;
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
        let turn = match req.settings.get("script").and_then(Value::as_array) {
            _ if summarizing => summary_turn(&req),
            Some(script) => scripted_turn(&req, script)?,
            None => plan(&req),
        };
        if let Some(error) = turn.error {
            return Err(ModelError::new(error));
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
        let finish = if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" };
        chunks.push(ModelChunk::Usage(usage));
        chunks.push(ModelChunk::Finish(finish.into()));

        let latency = req.settings.get("latency_ms").and_then(Value::as_u64).unwrap_or(0);
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
    let turn = script.get(played).ok_or_else(|| {
        ModelError::new(format!(
            "the built-in model's script ran out: all {} scripted turns were played without a final text answer",
            script.len()
        ))
    })?;
    Turn::from_script(turn).map_err(ModelError::new)
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
    fn text_is_split_into_chunks_that_join_back() {
        let text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
        let parts = split_text(text);
        assert!(parts.len() > 1 && parts.len() <= 16);
        assert_eq!(parts.concat(), text);
    }
}
