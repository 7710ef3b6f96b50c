//! Pages stay small whatever the payloads: long texts and JSON values (a
//! prompt, a message, tool arguments and results, step payloads, a result)
//! are cut on the server to a preview of [`PAGE_PREVIEW_CHARS`] characters
//! before a page renders them or ships them for hydration. [`Cuts`] says
//! what was cut, so the page can offer each value in full (a link to the
//! JSON endpoint that has it, which works without JavaScript).

use leptos::prelude::*;
use runlens_engine::model::{
    Email, Interruption, Message, MessageBody, Run, RunOutput, Step, StepRequest, StepResponse, ToolCall,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trace_window::LiveTrace;

/// Characters of a long text or JSON value a page shows.
pub const PAGE_PREVIEW_CHARS: usize = 2_000;

/// What was cut to a preview in one page's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cuts {
    /// Fields of the run: `initial_prompt`, `system_prompt`, `input`,
    /// `context`, `result`, `summary`, `failure_reason`, `metadata`, `output`.
    pub run: Vec<String>,
    /// Messages (by `seq`) with a cut text, result or invocation input.
    pub messages: Vec<u64>,
    /// Steps (by index) with a cut request or response.
    pub steps: Vec<u32>,
    /// Tool calls (by id) with cut arguments, result, reasoning or error.
    pub calls: Vec<String>,
}

impl Cuts {
    pub fn run_field(&self, field: &str) -> bool {
        self.run.iter().any(|f| f == field)
    }

    pub fn message(&self, seq: u64) -> bool {
        self.messages.contains(&seq)
    }

    pub fn step(&self, index: u32) -> bool {
        self.steps.contains(&index)
    }

    pub fn call(&self, id: &str) -> bool {
        self.calls.iter().any(|c| c == id)
    }
}

/// The trace page's data: the live window with its long values cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TracePage {
    pub trace: LiveTrace,
    pub cuts: Cuts,
}

/// Cuts `text` to [`PAGE_PREVIEW_CHARS`] characters and an ellipsis; `true`
/// when it was longer.
pub fn cut_text(text: &mut String) -> bool {
    if text.len() <= PAGE_PREVIEW_CHARS {
        return false; // byte length ≥ char count: certainly short enough
    }
    match text.char_indices().nth(PAGE_PREVIEW_CHARS) {
        Some((at, _)) => {
            text.truncate(at);
            text.push('…');
            true
        }
        None => false,
    }
}

/// Cuts a long string in place; any other long value (as compact JSON)
/// becomes a string holding its preview. `true` when cut. A result the
/// engine stored as a blob keeps its shape (the page links to the blob).
pub fn cut_value(value: &mut Value) -> bool {
    match value {
        Value::String(s) => cut_text(s),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
        Value::Object(blob) if blob.contains_key("blob_id") => {
            let mut cut = false;
            for key in ["summary", "preview", "note"] {
                if let Some(Value::String(text)) = blob.get_mut(key) {
                    cut |= cut_text(text);
                }
            }
            cut
        }
        other => {
            let mut text = other.to_string();
            let cut = cut_text(&mut text);
            if cut {
                *other = Value::String(text);
            }
            cut
        }
    }
}

fn cut_opt_text(text: &mut Option<String>) -> bool {
    text.as_mut().is_some_and(cut_text)
}

/// Cuts a run's long fields; returns the names of those cut.
pub fn cut_run(run: &mut Run) -> Vec<String> {
    let mut cut = Vec::new();
    let mut note = |field: &str, was_cut: bool| {
        if was_cut {
            cut.push(field.to_owned());
        }
    };
    note("initial_prompt", cut_text(&mut run.initial_prompt));
    note("system_prompt", cut_opt_text(&mut run.system_prompt));
    note("summary", cut_opt_text(&mut run.summary));
    note("failure_reason", cut_opt_text(&mut run.failure_reason));
    note("name", cut_text(&mut run.name));
    note("input", run.input.as_mut().is_some_and(cut_value));
    note("context", cut_value(&mut run.context));
    note("result", run.result.as_mut().is_some_and(cut_value));
    note("result_schema", run.result_schema.as_mut().is_some_and(cut_value));
    let mut metadata_cut = false;
    for value in run.metadata.values_mut() {
        metadata_cut |= cut_value(value);
    }
    note("metadata", metadata_cut);
    // The output union repeats the result, summary or failure reason.
    let output_cut = match run.output.as_mut() {
        Some(RunOutput::Structured { value }) => cut_value(value),
        Some(RunOutput::LastMessage { message, value }) => {
            cut_opt_text(message) | value.as_mut().is_some_and(cut_value)
        }
        Some(RunOutput::Error { message }) => cut_text(message),
        None => false,
    };
    note("output", output_cut);
    for item in &mut run.interruptions {
        cut_interruption(item);
    }
    if let Some(p) = runlens_engine::paging::preview(&run.model_settings) {
        run.model_settings = Value::String(p);
    }
    cut
}

/// Cuts a message's long text, result and invocation inputs.
pub fn cut_message(message: &mut Message) -> bool {
    match &mut message.body {
        MessageBody::Human { message } => cut_text(message),
        MessageBody::Agent { message, result, invocations } => {
            let mut cut = cut_opt_text(message);
            cut |= result.as_mut().is_some_and(cut_value);
            for inv in invocations {
                cut |= cut_value(&mut inv.input);
                cut |= cut_opt_text(&mut inv.reasoning);
            }
            cut
        }
        MessageBody::InvocationResult { result, .. } => cut_value(result),
    }
}

/// Cuts a tool call's long arguments, result, reasoning and error.
pub fn cut_call(call: &mut ToolCall) -> bool {
    let mut cut = cut_value(&mut call.arguments);
    cut |= call.result.as_mut().is_some_and(cut_value);
    cut |= cut_opt_text(&mut call.reasoning);
    cut |= cut_opt_text(&mut call.error);
    cut
}

/// Cuts a step's long request and response values (see [`cut_request`] and
/// [`cut_response`]) and its calls; `true` when its request or response was
/// cut. Cut calls go to `cut_calls`.
pub fn cut_step(step: &mut Step, cut_calls: &mut Vec<String>) -> bool {
    let cut = cut_request(&mut step.request) | cut_response(&mut step.response);
    for call in &mut step.tool_calls {
        if cut_call(call) && !cut_calls.contains(&call.id) {
            cut_calls.push(call.id.clone());
        }
    }
    cut
}

/// Cuts a step request's long model name and settings, and keeps of a long
/// list of tools the names that fit a preview; `true` when cut.
pub fn cut_request(request: &mut StepRequest) -> bool {
    let mut cut = cut_opt_text(&mut request.model);
    for value in request.settings.iter_mut().flat_map(|s| s.values_mut()) {
        cut |= cut_value(value);
    }
    if let Some(tools) = &mut request.tools {
        let mut chars = 0;
        let fit = tools
            .iter()
            .take_while(|name| {
                chars += name.chars().count() + 3; // quotes and comma
                chars <= PAGE_PREVIEW_CHARS
            })
            .count();
        cut |= fit < tools.len();
        tools.truncate(fit);
    }
    cut
}

/// Cuts a step response's long text, result, schema error or error; `true` when cut.
pub fn cut_response(response: &mut StepResponse) -> bool {
    match response {
        StepResponse::Answer(answer) => {
            let mut cut = cut_opt_text(&mut answer.text);
            cut |= answer.result.as_mut().is_some_and(cut_value);
            cut |= cut_opt_text(&mut answer.schema_error);
            cut |= cut_opt_text(&mut answer.finish_reason);
            cut
        }
        StepResponse::Failed { error } => cut_text(error),
    }
}

/// Cuts a pending call's long arguments and reasoning; `true` when cut.
pub fn cut_interruption(item: &mut Interruption) -> bool {
    cut_text(&mut item.run_name);
    cut_value(&mut item.arguments) | cut_opt_text(&mut item.reasoning)
}

/// Cuts an email's long subject and body; `true` when cut.
pub fn cut_email(email: &mut Email) -> bool {
    cut_text(&mut email.subject) | cut_text(&mut email.body)
}

/// Cuts everything long in a trace window.
pub fn cut_trace(trace: &mut LiveTrace) -> Cuts {
    let run = cut_run(&mut trace.run);
    let steps = trace
        .steps
        .iter_mut()
        .chain(trace.latest_step.as_mut())
        .filter_map(|s| cut_step(s, &mut trace.cut_calls).then_some(s.index))
        .collect();
    let messages = trace.messages.iter_mut().filter_map(|m| cut_message(m).then_some(m.seq)).collect();
    Cuts { run, messages, steps, calls: trace.cut_calls.clone() }
}

/// The trace page's view of run `id` (see [`super::trace_window::get_live_trace`])
/// with every long value cut to a preview; `Ok(None)` when there is no such run.
#[server]
pub async fn get_trace_page(id: String, from: Option<u32>) -> Result<Option<TracePage>, ServerFnError> {
    let Some(mut trace) = super::trace_window::get_live_trace(id, from).await? else { return Ok(None) };
    let cuts = cut_trace(&mut trace);
    Ok(Some(TracePage { trace, cuts }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_values_are_cut_short_ones_kept() {
        let mut short = "é".repeat(PAGE_PREVIEW_CHARS);
        assert!(!cut_text(&mut short));
        let mut long = "é".repeat(PAGE_PREVIEW_CHARS + 1);
        assert!(cut_text(&mut long));
        assert_eq!(long.chars().count(), PAGE_PREVIEW_CHARS + 1);
        assert!(long.ends_with('…'));
        let mut n = json!(1e300);
        assert!(!cut_value(&mut n));
        let mut big = json!({ "rows": (0..2000).collect::<Vec<_>>() });
        assert!(cut_value(&mut big));
        assert!(big.as_str().unwrap().starts_with("{\"rows\":[0,1,2"));
        let long = "x".repeat(PAGE_PREVIEW_CHARS * 2);
        let mut blob = json!({ "summary": long, "size_bytes": 9, "blob_id": "b1" });
        assert!(cut_value(&mut blob));
        assert_eq!(blob["blob_id"], "b1", "a blob result keeps its shape");
        assert_eq!(blob["summary"].as_str().unwrap().chars().count(), PAGE_PREVIEW_CHARS + 1);
        let mut small = json!({ "a": 1 });
        assert!(!cut_value(&mut small));
        assert_eq!(small, json!({ "a": 1 }));
    }

    #[test]
    fn a_run_s_output_and_metadata_are_cut_too() {
        let long = "x".repeat(PAGE_PREVIEW_CHARS * 3);
        let mut run: Run = serde_json::from_value(json!({
            "id": "r", "name": "", "status": "done", "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 10, "agent_id": null, "result": null, "summary": long,
            "failure_reason": null, "usage": {}, "step_count": 1, "metadata": {"note": long, "n": 1},
            "output": {"type": "last_message", "message": long},
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "started_at": null, "finished_at": null,
        }))
        .unwrap();
        let cut = cut_run(&mut run);
        assert!(["summary", "metadata", "output"].iter().all(|f| cut.iter().any(|c| c == f)), "{cut:?}");
        match &run.output {
            Some(RunOutput::LastMessage { message: Some(m), .. }) => {
                assert_eq!(m.chars().count(), PAGE_PREVIEW_CHARS + 1)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(run.metadata["n"], json!(1));
        assert!(run.metadata["note"].as_str().unwrap().ends_with('…'));
    }

    #[test]
    fn step_payloads_are_cut_field_by_field() {
        let long = "x".repeat(PAGE_PREVIEW_CHARS * 2);
        let mut request = StepRequest { messages: 2, model: Some("builtin".into()), ..StepRequest::default() };
        assert!(!cut_request(&mut request));
        request.tools = Some((0..200).map(|i| format!("tool_number_{i}")).collect());
        assert!(cut_request(&mut request));
        let kept = request.tools.as_ref().unwrap();
        assert!(!kept.is_empty() && kept.len() < 200 && kept[0] == "tool_number_0");
        assert!(serde_json::to_string(kept).unwrap().len() <= PAGE_PREVIEW_CHARS + 2);

        let mut answer = StepResponse::Answer(runlens_engine::model::ModelAnswer {
            text: Some(long.clone()),
            result: Some(json!({ "rows": (0..2000).collect::<Vec<_>>() })),
            finish_reason: Some("stop".into()),
            ..Default::default()
        });
        assert!(cut_response(&mut answer));
        assert_eq!(answer.text().unwrap().chars().count(), PAGE_PREVIEW_CHARS + 1);
        assert!(answer.result().unwrap().as_str().unwrap().starts_with("{\"rows\":[0,1"));
        assert_eq!(answer.finish_reason(), Some("stop"));
        let mut failed = StepResponse::Failed { error: long };
        assert!(cut_response(&mut failed));
        assert!(failed.error().unwrap().ends_with('…'));
    }
}
