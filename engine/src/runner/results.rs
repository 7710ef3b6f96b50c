//! Tool results too large for the transcript.
//!
//! Over 500 kB a result is stored as a blob and the model is told its size
//! with a short preview. With `call_summarization`, a result over 10,000
//! characters is summarized by one extra model call; the original is kept as
//! a blob, so nothing is lost either way.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::Result;
use crate::llm::{collect, Model, ModelRequest};
use crate::model::{KeptOut, Message, MessageBody, Run, Step, ToolCallStatus, Usage};
use crate::runtime::{now, Runtime};
use crate::store::Blob;

pub(super) const BLOB_BYTES: usize = 500_000;
pub(super) const SUMMARIZE_CHARS: usize = 10_000;
const PREVIEW_CHARS: usize = 500;

/// Replaces large results of the step's calls (see the module docs) and
/// returns the usage of any summarizing calls (already added to the step).
pub(super) async fn shrink(rt: &Runtime, run: &Run, step: &mut Step) -> Result<Usage> {
    let model = rt.models.get(&run.model);
    let mut extra = Usage::default();
    for i in 0..step.tool_calls.len() {
        let call = &step.tool_calls[i];
        let Some(result) = call.result.as_ref().filter(|_| call.status == ToolCallStatus::Succeeded) else { continue };
        if KeptOut::of(result).is_some() {
            continue; // already shrunk (a resumed step)
        }
        let text = result.to_string();
        // Sized as the model reads it: an image the model is not shown (see
        // `tools::mcp::model_view`) does not make a result too large.
        let read = crate::tools::mcp::model_view(result).map(|v| v.to_string());
        let read = read.as_deref().unwrap_or(&text);
        let too_large = read.len() > BLOB_BYTES;
        let wants_summary = run.call_summarization && read.chars().count() > SUMMARIZE_CHARS;
        if !too_large && !wants_summary {
            continue;
        }
        let (call_id, tool) = (call.id.clone(), call.tool_name.clone());
        let blob = Blob {
            id: format!("{}-{}", run.id, call_id),
            run_id: run.id.clone(),
            call_id: Some(call_id),
            content_type: "application/json".into(),
            data: text.clone().into_bytes(),
            created_at: now(),
        };
        rt.store.insert_blob(&blob).await?;
        let summary = match (&model, too_large) {
            (Some(m), false) => summarize(m, run, &tool, read, step.index, &mut extra).await,
            _ => None,
        };
        let preview: String = read.chars().take(PREVIEW_CHARS).collect();
        let size_bytes = text.len() as u64;
        let kept = match summary {
            Some(summary) => KeptOut::Summarized { summary, size_bytes, blob_id: blob.id },
            None => KeptOut::too_large(blob.id, size_bytes, preview),
        };
        step.tool_calls[i].result = Some(kept.to_value());
    }
    step.usage.add(&extra);
    Ok(extra)
}

/// One model call that summarizes a result; its usage counts for the step.
async fn summarize(
    model: &Arc<dyn Model>,
    run: &Run,
    tool: &str,
    text: &str,
    step_index: u32,
    usage: &mut Usage,
) -> Option<String> {
    let window = model.context_window(&run.model_settings) as usize;
    let room = window.saturating_mul(3).max(2_000);
    let excerpt: String = text.chars().take(room).collect();
    let prompt = format!(
        "Summarize this result of the tool `{tool}` for the agent that called it. Keep every number, name \
         and identifier it may need.\n\n{excerpt}"
    );
    let request = ModelRequest {
        run_id: run.id.clone(),
        system_prompt: None,
        messages: vec![Arc::new(Message {
            id: format!("{}-summary-{tool}", run.id),
            run_id: run.id.clone(),
            seq: 0,
            step_index: Some(step_index),
            created_at: now(),
            body: MessageBody::Human { message: prompt },
        })],
        tools: Vec::new(),
        settings: Arc::new(strip_script(&run.model_settings)),
        result_schema: None,
        turns_taken: 0,
    };
    let outcome = async { collect(model.stream(request).await?, |_| {}).await }.await;
    match outcome {
        Ok(r) => {
            usage.add(&r.usage);
            r.text
        }
        Err(e) => {
            tracing::warn!(run_id = %run.id, error = %e, "summarizing a tool result failed; keeping it whole");
            None
        }
    }
}

/// A scripted built-in model must not spend a script turn on a summary, and
/// is told this is a summary task (`runlens_task`; other providers ignore it).
fn strip_script(settings: &Value) -> Value {
    let mut s = settings.clone();
    if let Some(obj) = s.as_object_mut() {
        obj.remove("script");
        obj.insert("runlens_task".into(), json!("summarize"));
    } else {
        s = json!({"runlens_task": "summarize"});
    }
    s
}
