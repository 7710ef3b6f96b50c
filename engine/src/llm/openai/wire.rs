//! The Chat Completions wire format: the request we send, the answers we read.
//!
//! Only this file knows OpenAI's JSON shapes. The run's transcript (the
//! Inferable message model) maps onto `system`/`user`/`assistant`/`tool`
//! messages; answers, streamed or whole, become [`ModelChunk`]s so the engine
//! assembles every provider's output the same way (see `llm::collect`).
//!
//! Response types are lenient on purpose (`#[serde(default)]`, `Option`
//! everywhere): the many "OpenAI-compatible" servers omit or `null` fields
//! that OpenAI always sends, and a missing usage count must not fail a run.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::llm::{ModelChunk, ModelRequest};
use crate::model::{Invocation, MessageBody, Usage};

/// The run settings passed through to the provider, as named in the API.
pub const SETTINGS: [&str; 4] = ["temperature", "max_tokens", "top_p", "seed"];

/// Checks a run's `model_settings` for an OpenAI-compatible model, so a typo
/// or an out-of-range value is a 400 at creation, not a failed run later.
/// Besides [`SETTINGS`], a run may set `context_window` (how much history the
/// runner keeps; not sent to the provider). `max_tokens` must fit the run's
/// window, else the provider's configured one.
pub fn validate_settings(settings: &Value, provider_window: Option<u64>) -> Result<(), String> {
    let obj = match settings {
        Value::Null => return Ok(()),
        Value::Object(obj) => obj,
        _ => return Err("model_settings must be a JSON object".into()),
    };
    if let Some(key) = obj.keys().find(|k| !SETTINGS.contains(&k.as_str()) && *k != "context_window") {
        return Err(format!(
            "model_settings.{key} is not supported by this model; it accepts {} and context_window",
            SETTINGS.join(", ")
        ));
    }
    let run_window = crate::llm::builtin::check_context_window(obj.get("context_window"))?;
    crate::llm::builtin::check_sampling(obj, run_window.or(provider_window))
}

/// The JSON body of a `POST {base_url}/chat/completions`.
pub fn request_body(model: &str, req: &ModelRequest, stream: bool) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({ "role": "system", "content": system }));
    }
    messages.extend(req.messages.iter().map(|m| message(&m.body)));
    let mut body = json!({ "model": model, "messages": messages });
    let obj = body.as_object_mut().expect("an object");
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            json!({
                "type": "function",
                "function": { "name": t.name, "description": t.description, "parameters": t.schema },
            })
        });
        obj.insert("tools".into(), tools.collect());
    }
    if stream {
        obj.insert("stream".into(), json!(true));
        // Without this, streamed answers carry no token counts at all.
        obj.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    for key in SETTINGS {
        if let Some(v) = req.settings.get(key).filter(|v| !v.is_null()) {
            obj.insert(key.into(), v.clone());
        }
    }
    body
}

/// A Chat Completions response (`chat.completion`, not streamed) carrying
/// `answer`: what a trace shows as the provider's response. Calls whose
/// arguments were not valid JSON carry them verbatim, as the model sent them.
pub fn response_body(model: &str, answer: &crate::llm::Answered<'_>) -> Value {
    let mut message = json!({ "role": "assistant", "content": answer.text });
    if !answer.calls.is_empty() {
        let calls = answer.calls.iter().map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": { "name": c.tool_name, "arguments": text_of(&c.arguments) },
            })
        });
        message["tool_calls"] = calls.collect();
    }
    let usage = answer.usage;
    json!({
        "object": "chat.completion",
        "model": model,
        "choices": [{ "index": 0, "message": message, "finish_reason": answer.finish_reason }],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": { "cached_tokens": usage.cache_read_tokens },
            "completion_tokens_details": { "reasoning_tokens": usage.reasoning_tokens },
        },
    })
}

fn message(body: &MessageBody) -> Value {
    match body {
        MessageBody::Human { message } => json!({ "role": "user", "content": message }),
        MessageBody::Agent { message, result, invocations } => {
            let content = message.clone().or_else(|| result.as_ref().map(text_of));
            if invocations.is_empty() {
                return json!({ "role": "assistant", "content": content.unwrap_or_default() });
            }
            let calls: Vec<Value> = invocations.iter().map(tool_call).collect();
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        MessageBody::InvocationResult { id, result, .. } => {
            json!({ "role": "tool", "tool_call_id": id, "content": text_of(result) })
        }
    }
}

/// An invocation as the model sent it. Arguments that were not valid JSON are
/// kept as the raw string (see `runner::calls::plan`) and sent back verbatim,
/// next to the tool error that explains them.
fn tool_call(inv: &Invocation) -> Value {
    json!({
        "id": inv.id,
        "type": "function",
        "function": { "name": inv.tool_name, "arguments": text_of(&inv.input) },
    })
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One `data:` event of a streamed answer.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamChunk {
    pub choices: Vec<Choice>,
    pub usage: Option<WireUsage>,
    /// Some servers report a failure mid-stream as an event with `error`.
    pub error: Option<Value>,
}

/// A choice: `delta` when streamed, `message` in a whole answer.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Choice {
    pub delta: Option<WireMessage>,
    pub message: Option<WireMessage>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireMessage {
    pub content: Option<Value>,
    pub tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireToolCall {
    /// Missing on servers that send each call whole: its position is used.
    pub index: Option<usize>,
    pub id: Option<String>,
    pub function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireFunction {
    pub name: Option<String>,
    /// A string per the spec; a few servers send an object.
    pub arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WireUsage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub prompt_tokens_details: Option<PromptDetails>,
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PromptDetails {
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompletionDetails {
    pub reasoning_tokens: Option<u64>,
}

impl WireUsage {
    pub fn to_usage(&self) -> Usage {
        let input = self.prompt_tokens.unwrap_or(0);
        let output = self.completion_tokens.unwrap_or(0);
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0),
            reasoning_tokens: self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens).unwrap_or(0),
            total_tokens: self.total_tokens.unwrap_or(input + output),
            requests: 1,
        }
    }
}

impl StreamChunk {
    /// The engine's chunks for this event (streamed `delta`s and whole
    /// `message`s alike), or the provider's error message.
    pub fn into_chunks(self, out: &mut Vec<ModelChunk>) -> Result<(), String> {
        if let Some(error) = self.error.filter(|e| !e.is_null()) {
            return Err(error_text(&error));
        }
        // `n` is never set, so only the first choice is read.
        if let Some(choice) = self.choices.into_iter().next() {
            if let Some(m) = choice.delta.or(choice.message) {
                if let Some(text) = m.content.as_ref().map(content_text).filter(|t| !t.is_empty()) {
                    out.push(ModelChunk::TextDelta(text));
                }
                for (pos, call) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    let function = call.function.unwrap_or_default();
                    out.push(ModelChunk::ToolCallDelta {
                        index: call.index.unwrap_or(pos),
                        id: call.id.filter(|s| !s.is_empty()),
                        name: function.name.filter(|s| !s.is_empty()),
                        arguments: function.arguments.as_ref().map(text_of).unwrap_or_default(),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason {
                out.push(ModelChunk::Finish(reason));
            }
        }
        if let Some(usage) = self.usage {
            out.push(ModelChunk::Usage(usage.to_usage()));
        }
        Ok(())
    }
}

/// Message content: a string, or (some servers) a list of `{type, text}` parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// What a provider said went wrong, from an error body or event: OpenAI's
/// `{"error": {"message": …}}`, the variants other servers use, or the text.
pub fn error_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => error_text(v.get("error").unwrap_or(&v)),
        Err(_) => {
            let text = body.trim();
            if text.is_empty() {
                return "(empty body)".into();
            }
            truncate(text, 500)
        }
    }
}

fn error_text(error: &Value) -> String {
    let field = |k: &str| error.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match error {
        Value::String(s) => truncate(s, 500),
        _ => match field("message").or_else(|| field("detail")).or_else(|| field("error")) {
            Some(m) => truncate(m, 500),
            None => truncate(&error.to_string(), 500),
        },
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
