//! What a span recorded, read for assembly: its attributes as text and
//! counts, and the messages it captured — OpenInference's flattened
//! `llm.input_messages.N.message.*`, GenAI's `gen_ai.input.messages` /
//! `gen_ai.output.messages` JSON or `gen_ai.*.message` events, and
//! the AI SDK's `ai.prompt.messages` / `ai.response.*`, and `input.value` /
//! `output.value` (a provider's request or response); and
//! the model, token usage, sampling settings, tool payloads and failure a
//! span recorded.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::model::Usage;
use crate::otel::attrs as a;
use crate::store::StoredSpan;

pub(super) fn text<'s>(s: &'s StoredSpan, key: &str) -> Option<&'s str> {
    s.attributes.get(key).and_then(Value::as_str).filter(|t| !t.is_empty())
}

pub(super) fn first_text<'s>(s: &'s StoredSpan, keys: &[&str]) -> Option<&'s str> {
    keys.iter().find_map(|k| text(s, k))
}

/// A count attribute: an integer, or a number or digits in a string.
pub(super) fn count(s: &StoredSpan, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| match s.attributes.get(*k)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(t) => t.trim().parse().ok(),
        _ => None,
    })
}

/// The model a model span called.
pub(super) fn model_of(s: &StoredSpan) -> Option<&str> {
    first_text(
        s,
        &[a::GEN_AI_RESPONSE_MODEL, a::GEN_AI_REQUEST_MODEL, a::LLM_MODEL_NAME, a::AI_RESPONSE_MODEL, a::AI_MODEL_ID],
    )
}

/// The tokens a model span recorded (one request).
pub(super) fn usage_of(s: &StoredSpan) -> Usage {
    let input = count(
        s,
        &[
            a::GEN_AI_USAGE_INPUT_TOKENS,
            "gen_ai.usage.prompt_tokens",
            a::LLM_TOKEN_COUNT_PROMPT,
            "ai.usage.inputTokens",
            "ai.usage.promptTokens",
        ],
    );
    let output = count(
        s,
        &[
            a::GEN_AI_USAGE_OUTPUT_TOKENS,
            "gen_ai.usage.completion_tokens",
            a::LLM_TOKEN_COUNT_COMPLETION,
            "ai.usage.outputTokens",
            "ai.usage.completionTokens",
        ],
    );
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: count(
            s,
            &[
                "gen_ai.usage.cache_read.input_tokens",
                "gen_ai.usage.cache_read_input_tokens",
                "llm.token_count.prompt_details.cache_read",
                "ai.usage.cachedInputTokens",
            ],
        )
        .unwrap_or(0),
        reasoning_tokens: count(
            s,
            &[
                "gen_ai.usage.reasoning.output_tokens",
                "llm.token_count.completion_details.reasoning",
                "ai.usage.reasoningTokens",
            ],
        )
        .unwrap_or(0),
        total_tokens: count(s, &["llm.token_count.total", "ai.usage.totalTokens"]).unwrap_or(input + output),
        requests: 1,
    }
}

/// A tool's arguments or result: the JSON a string holds, else the string.
pub(super) fn payload(s: &StoredSpan, keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|k| json_or_text(s.attributes.get(*k)?))
}

/// The JSON a string holds, else the string; other values as they are
/// (`None` for null).
pub(super) fn json_or_text(v: &Value) -> Option<Value> {
    match v {
        Value::String(t) => Some(serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone()))),
        Value::Null => None,
        other => Some(other.clone()),
    }
}

/// The span ended with an error status.
pub(super) fn failed(s: &StoredSpan) -> bool {
    s.status_code == 2
}

/// Why a span failed: its status message, else its exception event's.
pub(super) fn error_of(s: &StoredSpan, what: &str) -> String {
    s.status_message
        .clone()
        .or_else(|| {
            s.events
                .iter()
                .find(|e| e.name == "exception")
                .and_then(|e| e.attributes.get("exception.message").and_then(Value::as_str).map(str::to_owned))
        })
        .unwrap_or_else(|| format!("the {what} `{}` ended with an error", s.name))
}

/// The sampling settings a model span recorded.
pub(super) fn settings_of(s: &StoredSpan) -> Option<Map<String, Value>> {
    let mut settings = Map::new();
    for (key, name) in [
        ("gen_ai.request.temperature", "temperature"),
        ("gen_ai.request.max_tokens", "max_tokens"),
        ("gen_ai.request.top_p", "top_p"),
        ("gen_ai.request.seed", "seed"),
    ] {
        if let Some(v @ Value::Number(_)) = s.attributes.get(key) {
            settings.insert(name.to_owned(), v.clone());
        }
    }
    (!settings.is_empty()).then_some(settings)
}

/// A message as captured: role, text, and the tool calls it asked for.
#[derive(Clone, Debug, Default)]
pub(super) struct Captured {
    pub(super) role: String,
    pub(super) text: Option<String>,
    /// The tool calls it asked for.
    pub(super) tool_calls: Vec<Asked>,
    pub(super) finish_reason: Option<String>,
}

/// A tool call a model asked for, as recorded.
#[derive(Clone, Debug, Default)]
pub(super) struct Asked {
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    /// The arguments the model wrote (a JSON text is read as its JSON).
    pub(super) arguments: Option<Value>,
}

/// A tool call in any of the shapes instrumentations record: OpenAI's
/// `{id, function: {name, arguments}}`, GenAI's `{id, name, arguments}`,
/// LangChain's `{id, name, args}`, the AI SDK's `{toolCallId, toolName, input}`.
fn asked_call(c: &Value) -> Asked {
    let field = |path: &str| c.pointer(path).and_then(Value::as_str).map(str::to_owned);
    let arguments = ["/function/arguments", "/arguments", "/args", "/input"].iter().find_map(|p| c.pointer(p));
    Asked {
        id: field("/id").or_else(|| field("/toolCallId")),
        name: field("/function/name").or_else(|| field("/name")).or_else(|| field("/toolName")),
        arguments: arguments.and_then(json_or_text),
    }
}

/// The text of a message's content: a string, or the text parts of a list.
pub(super) fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::String(t) => Some(t.clone()),
        Value::Array(parts) => {
            let texts: Vec<String> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(t) => Some(t.clone()),
                    Value::Object(o) => {
                        let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
                        let is_text = matches!(kind, "text" | "output_text" | "input_text");
                        is_text
                            .then(|| o.get("content").or(o.get("text")).and_then(Value::as_str).map(str::to_owned))?
                    }
                    _ => None,
                })
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
    .filter(|t| !t.trim().is_empty())
}

/// One message of a JSON list (GenAI `parts`, or OpenAI-style `content`).
pub(super) fn json_message(v: &Value) -> Option<Captured> {
    let o = v.as_object()?;
    let role = o.get("role").and_then(Value::as_str).unwrap_or("assistant").to_owned();
    // GenAI's `parts`, or a `content` list of parts (the AI SDK's).
    let parts = o.get("parts").or(o.get("content")).and_then(Value::as_array);
    let text = match parts {
        Some(parts) => content_text(&Value::Array(parts.clone())),
        None => o.get("content").and_then(content_text),
    };
    let mut tool_calls: Vec<Asked> = parts
        .into_iter()
        .flatten()
        .filter(|p| matches!(p.get("type").and_then(Value::as_str), Some("tool_call" | "tool-call")))
        .map(asked_call)
        .collect();
    tool_calls.extend(o.get("tool_calls").and_then(Value::as_array).into_iter().flatten().map(asked_call));
    let finish_reason = o.get("finish_reason").and_then(Value::as_str).map(str::to_owned);
    Some(Captured { role, text, tool_calls, finish_reason })
}

pub(super) fn json_messages(v: &Value) -> Vec<Captured> {
    match v {
        Value::Array(items) => items.iter().filter_map(json_message).collect(),
        Value::Object(o) => match o.get("messages").or(o.get("input")) {
            Some(list @ Value::Array(_)) => json_messages(list),
            _ => json_message(v).into_iter().collect(),
        },
        _ => Vec::new(),
    }
}

/// A JSON attribute: an array or object, or its JSON text.
pub(super) fn json_attr(v: Option<&Value>) -> Option<Value> {
    match v? {
        Value::String(t) => serde_json::from_str(t).ok(),
        other @ (Value::Array(_) | Value::Object(_)) => Some(other.clone()),
        _ => None,
    }
}

/// OpenInference's flattened messages: `{prefix}.{i}.message.role` and so on.
pub(super) fn flattened_messages(s: &StoredSpan, prefix: &str) -> Vec<Captured> {
    let mut by_index: BTreeMap<usize, Captured> = BTreeMap::new();
    let mut contents: BTreeMap<(usize, usize), String> = BTreeMap::new();
    let mut calls: BTreeMap<(usize, usize), Asked> = BTreeMap::new();
    for (key, value) in &s.attributes {
        let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else { continue };
        let Some((index, field)) = rest.split_once('.') else { continue };
        let Ok(index) = index.parse::<usize>() else { continue };
        let Some(field) = field.strip_prefix("message.") else { continue };
        let m = by_index.entry(index).or_default();
        match field {
            "role" => m.role = value.as_str().unwrap_or_default().to_owned(),
            "content" => m.text = value.as_str().filter(|t| !t.trim().is_empty()).map(str::to_owned),
            f if f.starts_with("tool_calls.") => {
                let Some((k, what)) = f["tool_calls.".len()..].split_once('.') else { continue };
                let Ok(k) = k.parse::<usize>() else { continue };
                let call = calls.entry((index, k)).or_default();
                match what {
                    "tool_call.id" => call.id = value.as_str().map(str::to_owned),
                    "tool_call.function.name" => call.name = value.as_str().map(str::to_owned),
                    "tool_call.function.arguments" => call.arguments = json_or_text(value),
                    _ => {}
                }
            }
            f => {
                // `contents.{j}.message_content.text`
                if let Some((j, "message_content.text")) = f.strip_prefix("contents.").and_then(|r| r.split_once('.')) {
                    if let (Ok(j), Some(t)) = (j.parse::<usize>(), value.as_str()) {
                        contents.insert((index, j), t.to_owned());
                    }
                }
            }
        }
    }
    for ((index, _), t) in contents {
        // `contents` repeat `content` when both are recorded.
        if let Some(m) = by_index.get_mut(&index) {
            match &mut m.text {
                None => m.text = Some(t),
                Some(existing) if !existing.contains(&t) => {
                    existing.push('\n');
                    existing.push_str(&t);
                }
                Some(_) => {}
            }
        }
    }
    for ((index, _), call) in calls {
        if let Some(m) = by_index.get_mut(&index) {
            m.tool_calls.push(call);
        }
    }
    by_index.into_values().collect()
}

/// GenAI messages recorded as span events (`gen_ai.user.message`, `gen_ai.choice`…).
pub(super) fn event_messages(s: &StoredSpan, output: bool) -> Vec<Captured> {
    let mut out = Vec::new();
    for e in &s.events {
        let key = if output { a::GEN_AI_OUTPUT_MESSAGES } else { a::GEN_AI_INPUT_MESSAGES };
        if let Some(list) = json_attr(e.attributes.get(key)) {
            out.extend(json_messages(&list));
            continue;
        }
        let role = match e.name.as_str() {
            "gen_ai.system.message" if !output => "system",
            "gen_ai.user.message" if !output => "user",
            "gen_ai.assistant.message" if !output => "assistant",
            "gen_ai.tool.message" if !output => "tool",
            "gen_ai.choice" if output => "assistant",
            _ => continue,
        };
        let body = json_attr(e.attributes.get("message")).or_else(|| e.attributes.get("message").cloned());
        let mut m = match &body {
            Some(v @ Value::Object(_)) => json_message(v).unwrap_or_default(),
            _ => Captured::default(),
        };
        m.role = role.to_owned();
        if m.text.is_none() {
            m.text = e.attributes.get("content").and_then(content_text);
        }
        if let Some(f) = e.attributes.get("finish_reason").and_then(Value::as_str) {
            m.finish_reason = Some(f.to_owned());
        }
        out.push(m);
    }
    out
}

pub(super) fn input_messages(s: &StoredSpan) -> Vec<Captured> {
    let flat = flattened_messages(s, "llm.input_messages");
    if !flat.is_empty() {
        return flat;
    }
    let list = [a::GEN_AI_INPUT_MESSAGES, a::AI_PROMPT_MESSAGES, "gen_ai.prompt"]
        .iter()
        .find_map(|k| json_attr(s.attributes.get(*k)));
    if let Some(list) = list {
        return json_messages(&list);
    }
    let events = event_messages(s, false);
    if !events.is_empty() {
        return events;
    }
    match s.attributes.get(a::INPUT_VALUE) {
        Some(Value::String(t)) => match serde_json::from_str::<Value>(t) {
            Ok(v @ (Value::Object(_) | Value::Array(_))) => json_messages(&v),
            _ => vec![Captured { role: "user".into(), text: Some(t.clone()), ..Captured::default() }],
        },
        _ => Vec::new(),
    }
}

pub(super) fn output_messages(s: &StoredSpan) -> Vec<Captured> {
    let flat = flattened_messages(s, "llm.output_messages");
    if !flat.is_empty() {
        return flat;
    }
    if let Some(list) = json_attr(s.attributes.get(a::GEN_AI_OUTPUT_MESSAGES)) {
        return json_messages(&list);
    }
    let events = event_messages(s, true);
    if !events.is_empty() {
        return events;
    }
    if let Some(answer) = ai_response(s) {
        return vec![answer];
    }
    // Mastra's `gen_ai.completion`: `{"text": …}`.
    if let Some(text) = json_attr(s.attributes.get("gen_ai.completion")).as_ref().and_then(|v| v.get("text")) {
        let text = content_text(text);
        return vec![Captured { role: "assistant".into(), text, ..Captured::default() }];
    }
    match s.attributes.get(a::OUTPUT_VALUE) {
        Some(Value::String(t)) => {
            let text = match serde_json::from_str::<Value>(t) {
                Ok(v @ Value::Object(_)) => response_text(&v),
                _ => Some(t.clone()),
            };
            vec![Captured { role: "assistant".into(), text, ..Captured::default() }]
        }
        _ => Vec::new(),
    }
}

/// The answer an AI SDK model span recorded: `ai.response.text`,
/// `ai.response.toolCalls` and `ai.response.finishReason`.
fn ai_response(s: &StoredSpan) -> Option<Captured> {
    let calls = json_attr(s.attributes.get(a::AI_RESPONSE_TOOL_CALLS));
    let tool_calls: Vec<Asked> = calls.iter().filter_map(Value::as_array).flatten().map(asked_call).collect();
    let text = text(s, a::AI_RESPONSE_TEXT).map(str::to_owned);
    (text.is_some() || !tool_calls.is_empty()).then(|| Captured {
        role: "assistant".into(),
        text,
        tool_calls,
        finish_reason: self::text(s, a::AI_RESPONSE_FINISH_REASON).map(str::to_owned),
    })
}

/// The answer's text in a provider's response object (Chat Completions or Responses).
pub(super) fn response_text(v: &Value) -> Option<String> {
    if let Some(t) = v.pointer("/choices/0/message/content").and_then(content_text) {
        return Some(t);
    }
    if let Some(t) = v.get("output_text").and_then(content_text) {
        return Some(t);
    }
    let items = v.get("output")?.as_array()?;
    let texts: Vec<String> = items.iter().filter_map(|i| i.get("content").and_then(content_text)).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}
