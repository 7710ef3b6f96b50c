//! Assembling a streamed model answer into one response.
//!
//! Providers split text and tool-call arguments across chunks; this is the
//! single place that puts them back together, so every provider gets the same
//! handling of partial and malformed tool arguments.

use futures::StreamExt;
use serde_json::Value;

use super::{ModelChunk, ModelError, ModelStream};
use crate::model::Usage;
use crate::tools::ToolError;

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestedCall {
    pub id: String,
    pub name: String,
    /// The parsed arguments, or why the argument text is not valid JSON
    /// (that goes back to the model as a tool error, it does not fail the run).
    pub arguments: Result<Value, ToolError>,
    /// The raw argument text as the model sent it.
    pub raw_arguments: String,
    /// Why the model made this call, when it said so for the call alone.
    pub reasoning: Option<String>,
}

/// One complete model turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelResponse {
    pub text: Option<String>,
    pub tool_calls: Vec<RequestedCall>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    reasoning: Option<String>,
}

/// Drains `stream`, calling `on_delta` with each text chunk as it arrives.
pub async fn collect(mut stream: ModelStream, mut on_delta: impl FnMut(&str)) -> Result<ModelResponse, ModelError> {
    let mut text = String::new();
    let mut calls: Vec<PartialCall> = Vec::new();
    let mut usage = Usage::default();
    let mut finish_reason = None;
    while let Some(chunk) = stream.next().await {
        match chunk? {
            ModelChunk::TextDelta(delta) => {
                on_delta(&delta);
                text.push_str(&delta);
            }
            ModelChunk::ToolCallDelta { index, id, name, arguments } => {
                if calls.len() <= index {
                    calls.resize_with(index + 1, PartialCall::default);
                }
                let call = &mut calls[index];
                if id.is_some() {
                    call.id = id;
                }
                if name.is_some() {
                    call.name = name;
                }
                call.arguments.push_str(&arguments);
            }
            ModelChunk::CallReasoning { index, text } => {
                if calls.len() <= index {
                    calls.resize_with(index + 1, PartialCall::default);
                }
                calls[index].reasoning = Some(text);
            }
            ModelChunk::Usage(u) => usage = u,
            ModelChunk::Finish(reason) => finish_reason = Some(reason),
        }
    }
    let tool_calls =
        calls.into_iter().enumerate().filter(|(_, c)| c.name.is_some()).map(|(i, c)| finish_call(i, c)).collect();
    if usage.total_tokens == 0 {
        usage.total_tokens = usage.input_tokens + usage.output_tokens;
    }
    usage.requests = usage.requests.max(1);
    Ok(ModelResponse { text: (!text.is_empty()).then_some(text), tool_calls, usage, finish_reason })
}

fn finish_call(index: usize, call: PartialCall) -> RequestedCall {
    let raw = call.arguments;
    let arguments = if raw.trim().is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str::<Value>(&raw).map_err(|e| ToolError::MalformedArguments(e.to_string()))
    };
    RequestedCall {
        id: call.id.unwrap_or_else(|| format!("call_{index}")),
        name: call.name.unwrap_or_default(),
        arguments,
        raw_arguments: raw,
        reasoning: call.reasoning.filter(|r| !r.trim().is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    fn chunks(items: Vec<ModelChunk>) -> ModelStream {
        stream::iter(items.into_iter().map(Ok)).boxed()
    }

    #[tokio::test]
    async fn reassembles_split_tool_arguments() {
        let s = chunks(vec![
            ModelChunk::TextDelta("Let me ".into()),
            ModelChunk::TextDelta("check.".into()),
            ModelChunk::ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("calculator".into()),
                arguments: "{\"expr".into(),
            },
            ModelChunk::ToolCallDelta { index: 0, id: None, name: None, arguments: "ession\": \"1+1\"}".into() },
            ModelChunk::ToolCallDelta {
                index: 1,
                id: Some("c2".into()),
                name: Some("wait".into()),
                arguments: "{oops".into(),
            },
            ModelChunk::Finish("tool_calls".into()),
        ]);
        let mut deltas = Vec::new();
        let r = collect(s, |d| deltas.push(d.to_owned())).await.unwrap();
        assert_eq!(deltas, ["Let me ", "check."]);
        assert_eq!(r.text.as_deref(), Some("Let me check."));
        assert_eq!(r.tool_calls[0].arguments, Ok(serde_json::json!({"expression": "1+1"})));
        assert!(r.tool_calls[1].arguments.as_ref().unwrap_err().to_string().contains("not valid JSON"));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage.requests, 1);
    }

    #[tokio::test]
    async fn a_stream_error_is_returned() {
        let s =
            stream::iter(vec![Ok(ModelChunk::TextDelta("x".into())), Err(ModelError::Scripted("boom".into()))]).boxed();
        assert_eq!(collect(s, |_| {}).await.unwrap_err().to_string(), "boom");
    }
}
