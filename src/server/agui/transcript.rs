//! What a new thread's messages become: the run's prompt, its earlier
//! transcript and its system prompt ([`Conversation`]), and its context.

use std::collections::HashMap;

use runlens_engine::model::limits::{self, MAX_INPUT_ITEMS, MAX_PROMPT_BYTES, MAX_SYSTEM_PROMPT_BYTES};
use runlens_engine::model::{Invocation, MessageBody, ResultType};
use serde_json::{json, Value};

use super::{InputMessage, InputToolCall, RunAgentInput};

/// The new human message: the text of the last message, which must be the
/// user's.
pub fn last_user_text(messages: &[InputMessage]) -> Result<String, String> {
    let i =
        messages.len().checked_sub(1).ok_or("messages: no message to answer; the last message must be the user's")?;
    let InputMessage::User { content, .. } = &messages[i] else {
        return Err(format!("messages[{i}]: the last message must be the user's (a new message to answer)"));
    };
    let text = content.text();
    limits::check_message(&format!("messages[{i}].content"), &text)?;
    Ok(text.trim().to_owned())
}

/// What a new thread's messages become: the prompt (the last, user message),
/// the transcript before it, and the system prompt (system and developer
/// messages, then the context entries).
#[derive(Debug)]
pub struct Conversation {
    pub prompt: String,
    pub items: Vec<MessageBody>,
    pub system_prompt: Option<String>,
}

/// Reads a new thread's messages (see [`Conversation`]). Earlier user and
/// assistant messages become transcript items; a tool call is kept with the
/// first tool message answering it after it, and left out without one.
pub fn conversation(input: &RunAgentInput) -> Result<Conversation, String> {
    let prompt = last_user_text(&input.messages)?;
    let earlier = &input.messages[..input.messages.len() - 1];
    let answers = Answers::of(earlier);
    let mut system = Vec::new();
    let mut items = Vec::new();
    let mut tool_of: HashMap<&str, &str> = HashMap::new();
    for (i, m) in earlier.iter().enumerate() {
        match m {
            InputMessage::System { content, .. } | InputMessage::Developer { content, .. } => {
                if !content.trim().is_empty() {
                    system.push(content.trim().to_owned());
                }
            }
            InputMessage::User { content, .. } => {
                let text = content.text();
                if !text.trim().is_empty() {
                    limits::check_message(&format!("messages[{i}].content"), &text)?;
                    items.push(MessageBody::Human { message: text.trim().to_owned() });
                }
            }
            InputMessage::Assistant { content, tool_calls, .. } => {
                items.extend(answer_item(content.as_deref(), tool_calls.iter().flatten(), &answers, &mut tool_of));
            }
            InputMessage::Tool { content, tool_call_id, error, .. } => {
                if answers.answered_at.get(&i) != Some(&tool_call_id.as_str()) {
                    continue;
                }
                let tool_name = tool_of.get(tool_call_id.as_str()).copied().unwrap_or_default().to_owned();
                let (result_type, result) = match error {
                    Some(e) => (ResultType::Rejection, json!({ "error": e })),
                    None => {
                        let text = content.text();
                        (ResultType::Resolution, serde_json::from_str(&text).unwrap_or(Value::String(text)))
                    }
                };
                items.push(MessageBody::InvocationResult { id: tool_call_id.clone(), tool_name, result_type, result });
            }
            InputMessage::Activity { .. } | InputMessage::Reasoning { .. } => {}
        }
    }
    let system_prompt = system_prompt(system, input, items.len())?;
    debug_assert!(prompt.len() <= MAX_PROMPT_BYTES);
    Ok(Conversation { prompt, items, system_prompt })
}

/// Which earlier message answers which call: the first tool message after
/// it with its id, both ways.
struct Answers<'m> {
    answer_of: HashMap<&'m str, usize>,
    answered_at: HashMap<usize, &'m str>,
}

impl<'m> Answers<'m> {
    fn of(earlier: &'m [InputMessage]) -> Self {
        let mut answers = Answers { answer_of: HashMap::new(), answered_at: HashMap::new() };
        for (i, m) in earlier.iter().enumerate() {
            let InputMessage::Assistant { tool_calls: Some(calls), .. } = m else { continue };
            for call in calls {
                if answers.answer_of.contains_key(call.id.as_str())
                    || call.id.is_empty()
                    || call.function.name.is_empty()
                {
                    continue;
                }
                let answer = earlier[i + 1..]
                    .iter()
                    .position(|r| matches!(r, InputMessage::Tool { tool_call_id, .. } if *tool_call_id == call.id));
                if let Some(j) = answer {
                    answers.answer_of.insert(&call.id, i + 1 + j);
                    answers.answered_at.insert(i + 1 + j, &call.id);
                }
            }
        }
        answers
    }
}

/// An assistant message as a transcript item: its text and the calls that
/// were answered (each once), or nothing when it has neither.
fn answer_item<'m>(
    content: Option<&str>,
    calls: impl Iterator<Item = &'m InputToolCall>,
    answers: &Answers<'m>,
    tool_of: &mut HashMap<&'m str, &'m str>,
) -> Option<MessageBody> {
    let mut invocations = Vec::new();
    for c in calls {
        if !answers.answer_of.contains_key(c.id.as_str()) || tool_of.contains_key(c.id.as_str()) {
            continue;
        }
        tool_of.insert(&c.id, &c.function.name);
        let input = serde_json::from_str::<Value>(&c.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        invocations.push(Invocation { id: c.id.clone(), tool_name: c.function.name.clone(), reasoning: None, input });
    }
    let message = content.map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
    (message.is_some() || !invocations.is_empty()).then_some(MessageBody::Agent { message, result: None, invocations })
}

/// The system and developer messages and the request's context as one
/// system prompt, within its bound; checks the transcript's length too.
fn system_prompt(mut system: Vec<String>, input: &RunAgentInput, items: usize) -> Result<Option<String>, String> {
    if items > MAX_INPUT_ITEMS {
        return Err(format!(
            "messages: a new thread's earlier messages make {items} transcript items; the limit is {MAX_INPUT_ITEMS}"
        ));
    }
    if !input.context.is_empty() {
        let lines: Vec<String> = input.context.iter().map(|c| format!("- {}: {}", c.description, c.value)).collect();
        system.push(format!("Context:\n{}", lines.join("\n")));
    }
    let system_prompt = (!system.is_empty()).then(|| system.join("\n\n"));
    if let Some(s) = &system_prompt {
        if s.len() > MAX_SYSTEM_PROMPT_BYTES {
            return Err(format!(
                "messages: the system and developer messages and the context make {} bytes of system prompt; the \
                 limit is {MAX_SYSTEM_PROMPT_BYTES}",
                s.len()
            ));
        }
    }
    Ok(system_prompt)
}

/// The run's `context`: `{"ag_ui": {"context": [...], "state": ...}}`, when
/// the request has either.
pub fn run_context(input: &RunAgentInput) -> Option<Value> {
    let state = input.state.as_ref().filter(|s| !s.is_null() && *s != &json!({}));
    if input.context.is_empty() && state.is_none() {
        return None;
    }
    let mut agui = serde_json::Map::new();
    if !input.context.is_empty() {
        agui.insert("context".into(), json!(input.context));
    }
    if let Some(state) = state {
        agui.insert("state".into(), state.clone());
    }
    Some(json!({ "ag_ui": agui }))
}
