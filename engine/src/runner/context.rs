//! What the model is sent each turn: the history trimmed to the context
//! window, and the result-schema instruction; and checking a final answer
//! against the run's `result_schema`. Also what a loop loads of a run's
//! history when it starts (the transcript's tail, the turns since a person
//! last wrote).

use std::borrow::Borrow;
use std::sync::Arc;

use serde_json::Value;

use crate::llm::tokens::count;
use crate::model::{Message, MessageBody, Run, ToolInfo};
use crate::runtime::Runtime;

/// Starts the text of the human message that asks the model to repair an
/// answer that did not match the result schema. Such messages do not count
/// as a new human turn.
pub(crate) const REPAIR_PREFIX: &str = "[runlens] ";

/// Tokens one message costs in a request.
pub(super) fn message_tokens(m: &Message) -> u64 {
    match &m.body {
        MessageBody::Human { message } => count(message) + 4,
        other => count(&serde_json::to_string(other).unwrap_or_default()) + 4,
    }
}

/// Tokens of what every request carries besides the history.
pub(super) fn fixed_tokens(system: Option<&str>, tools: &[ToolInfo]) -> u64 {
    let tools: u64 = tools.iter().map(|t| count(&t.name) + count(&t.description) + count(&t.schema.to_string())).sum();
    system.map_or(0, count) + tools
}

/// Tokens of history a request may carry: the model's window less what
/// every request carries and an eighth kept for the answer.
pub(super) fn budget(window: u64, system: Option<&str>, tools: &[ToolInfo]) -> u64 {
    window.saturating_sub(fixed_tokens(system, tools) + window / 8)
}

/// Whether `tail`, the newest messages of a transcript, is all a resumed
/// run needs of it: more tokens than `budget` (so the window cut falls
/// inside it, exactly where it would on the whole history), and the latest
/// message a person wrote, or `max_turns` model turns after the start of
/// the tail (the run stops there anyway, whatever came before).
pub(super) fn tail_suffices<M: Borrow<Message>>(tail: &[M], budget: u64, max_turns: u32) -> bool {
    let tokens: u64 = tail.iter().map(|m| message_tokens(m.borrow())).sum();
    let mut turns = 0;
    let mut person = false;
    for m in tail.iter().rev().map(Borrow::borrow) {
        if is_person(m) {
            person = true;
            break;
        }
        if matches!(m.body, MessageBody::Agent { .. }) {
            turns += 1;
        }
    }
    tokens > budget && (person || turns >= max_turns)
}

/// The part of the history that fits the context window, kept up to date
/// as messages are appended, so a long run does not rescan its history on
/// every turn. The history only grows within one driver, so the first kept
/// message only moves forward.
#[derive(Default)]
pub(super) struct Window {
    tokens: Vec<u64>,
    from: usize,
    kept: u64,
}

impl Window {
    pub(super) fn new<M: Borrow<Message>>(messages: &[M]) -> Window {
        let mut w = Window::default();
        messages.iter().for_each(|m| w.push(m.borrow()));
        w
    }

    pub(super) fn push(&mut self, m: &Message) {
        let t = message_tokens(m);
        self.tokens.push(t);
        self.kept += t;
    }

    /// Index of the first message to send so that the history fits `budget`
    /// tokens: the oldest are dropped first, the latest message is always
    /// kept, and a tool result is never sent without the call it answers.
    pub(super) fn first_kept<M: Borrow<Message>>(&mut self, messages: &[M], budget: u64) -> usize {
        while self.kept > budget && self.from + 1 < messages.len() {
            self.kept -= self.tokens[self.from];
            self.from += 1;
        }
        while self.from + 1 < messages.len()
            && matches!(messages[self.from].borrow().body, MessageBody::InvocationResult { .. })
        {
            self.kept -= self.tokens[self.from];
            self.from += 1;
        }
        self.from
    }
}

/// The system prompt with the result-schema instruction appended.
pub(crate) fn system_prompt(base: Option<&str>, schema: Option<&Value>) -> Option<String> {
    let Some(schema) = schema else { return base.map(str::to_owned) };
    let instruction = format!(
        "When you give your final answer (without calling a tool), reply with only a JSON value that \
         matches this JSON Schema:\n{schema}"
    );
    Some(match base {
        Some(b) => format!("{b}\n\n{instruction}"),
        None => instruction,
    })
}

/// Parses the final answer and validates it against `schema`.
pub(super) fn check_result(schema: &Value, text: Option<&str>) -> Result<Value, String> {
    let text = text.unwrap_or("").trim();
    let body = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let value: Value = serde_json::from_str(body).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("the result schema is invalid: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems.join("; "))
    }
}

/// The message asking for one repair of an answer that failed the schema.
pub(super) fn repair_text(problem: &str) -> String {
    format!(
        "{REPAIR_PREFIX}Your final answer did not match the required result schema: {problem}. \
         Reply again with only a JSON value that matches the schema."
    )
}

/// A human message a person wrote (not a schema-repair request).
pub(super) fn is_person(m: &Message) -> bool {
    matches!(&m.body, MessageBody::Human { message } if !message.starts_with(REPAIR_PREFIX))
}

/// Messages read per page when a run loads its transcript.
const TAIL_PAGE: u32 = 64;

/// The newest messages of the run's transcript (whose last is `last_seq`),
/// read page by page into the past until they hold all the loop needs (see
/// `tail_suffices`), so resuming a long run reads its recent
/// history, not all of it.
pub(super) async fn transcript_tail(
    rt: &Runtime,
    run: &Run,
    last_seq: Option<u64>,
) -> crate::error::Result<Vec<Message>> {
    let budget = match rt.models.get(&run.model) {
        Some(model) => {
            let tools = super::offer::fewest_tools(rt, run);
            let system = system_prompt(run.system_prompt.as_deref(), run.result_schema.as_ref());
            budget(model.context_window(&run.model_settings), system.as_deref(), &tools)
        }
        None => 0, // the run fails before any request
    };
    // Seqs below `cursor` are not read yet.
    let mut cursor = last_seq.map_or(0, |s| s + 1);
    let mut tail = Vec::new();
    while cursor > 0 && (tail.is_empty() || !tail_suffices(&tail, budget, run.max_turns)) {
        let from = cursor.saturating_sub(u64::from(TAIL_PAGE));
        let mut older = rt.store.messages_page(&run.id, from, TAIL_PAGE).await?;
        older.retain(|m| m.seq < cursor);
        older.append(&mut tail);
        tail = older;
        cursor = from;
    }
    Ok(tail)
}

/// Model turns taken since the latest message a person wrote.
pub(super) fn turns_since_person(messages: &[Arc<Message>]) -> u32 {
    messages.iter().rev().take_while(|m| !is_person(m)).filter(|m| matches!(m.body, MessageBody::Agent { .. })).count()
        as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(seq: u64, body: MessageBody) -> Message {
        Message {
            id: format!("r-m{seq}"),
            run_id: "r".into(),
            seq,
            step_index: None,
            created_at: chrono::Utc::now(),
            body,
        }
    }

    /// A transcript of turns of varied sizes: a person's question, an
    /// agent's call, its result, the agent's answer.
    fn transcript(turns: u64) -> Vec<Message> {
        let mut out = Vec::new();
        for t in 0..turns {
            let words = |n: u64| "word ".repeat((n % 7 + 1) as usize * 10);
            let mut push = |body| out.push(message(out.len() as u64, body));
            push(MessageBody::Human { message: words(t) });
            push(MessageBody::Agent { message: Some(words(t + 3)), result: None, invocations: Vec::new() });
            push(MessageBody::InvocationResult {
                id: format!("c{t}"),
                tool_name: "calculator".into(),
                result_type: crate::model::ResultType::Resolution,
                result: json!({ "value": words(t + 5) }),
            });
            push(MessageBody::Agent { message: Some(words(t + 1)), result: None, invocations: Vec::new() });
        }
        out
    }

    /// Whenever a tail suffices, the window cut on it is the cut on the
    /// whole transcript, and the person-turn count is the same.
    #[test]
    fn a_sufficient_tail_cuts_the_window_where_the_whole_transcript_does() {
        let all = transcript(12);
        for budget in [0, 30, 100, 250, 600, 5_000] {
            let whole = Window::new(&all).first_kept(&all, budget);
            let mut checked = 0;
            for start in 0..all.len() {
                let tail = &all[start..];
                if !tail_suffices(tail, budget, 10) {
                    continue;
                }
                checked += 1;
                let cut = start + Window::new(tail).first_kept(tail, budget);
                assert_eq!(cut, whole, "budget {budget}, tail from {start}");
            }
            assert!(checked > 0 || budget == 5_000, "budget {budget}: some tail suffices");
        }
    }

    #[test]
    fn answers_are_checked_against_the_schema() {
        let schema = json!({"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}});
        assert_eq!(check_result(&schema, Some("```json\n{\"total\": 3}\n```")), Ok(json!({"total": 3})));
        assert!(check_result(&schema, Some("three")).unwrap_err().contains("not valid JSON"));
        assert!(check_result(&schema, Some("{\"total\": \"3\"}")).unwrap_err().contains("/total"));
    }
}
