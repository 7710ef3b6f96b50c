//! Steps (one model turn each), what each sent to the model and got back,
//! and the tool calls inside them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{ApprovalDecision, Usage};

/// Lifecycle of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum StepStatus {
    /// The model answered; its tool calls are still running.
    Running,
    Completed,
    /// The step ended because the run was cancelled or failed.
    Interrupted,
}

/// One turn of the loop: a model call, then its tool calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// `<run id>:s<index>` (see [`Step::id_for`]); the API takes it or the index.
    #[serde(default)]
    pub id: String,
    pub run_id: String,
    pub index: u32,
    /// `model_turn` for every step today; kept open for other kinds.
    pub kind: String,
    pub status: StepStatus,
    /// What was sent: message count, tools offered, settings.
    pub request: StepRequest,
    /// What came back: text, tool call count, finish reason — or the error.
    pub response: StepResponse,
    pub usage: Usage,
    pub started_at: DateTime<Utc>,
    /// When the model answered.
    pub model_completed_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub tool_calls: Vec<ToolCall>,
}

impl Step {
    /// The id of step `index` of run `run_id`.
    pub fn id_for(run_id: &str, index: u32) -> String {
        format!("{run_id}:s{index}")
    }

    /// The step index a step id or index names in run `run_id`. Indexes
    /// are written the one way ids write them: decimal digits, no sign, no
    /// leading zero (`7`, not `+7` or `007`).
    pub fn parse_ref(run_id: &str, text: &str) -> Option<u32> {
        let canonical =
            |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && (t == "0" || !t.starts_with('0'));
        let digits = if canonical(text) { text } else { text.strip_prefix(run_id)?.strip_prefix(":s")? };
        canonical(digits).then(|| digits.parse().ok()).flatten()
    }

    /// The model this step's request recorded: on the first step and on
    /// every step where it changed; `None` means the run's model.
    pub fn recorded_model(&self) -> Option<&str> {
        self.request.model.as_deref()
    }
}

/// What a step sent to the model, in brief: the messages themselves are the
/// transcript's.
///
/// The fields are in alphabetical order, the order of the JSON object
/// earlier versions wrote, so a step is stored as the same text. Every field
/// may be missing from stored data (zero or `None`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct StepRequest {
    /// The model's context window in tokens; recorded with `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The oldest transcript messages left out to fit the context window
    /// (absent when none were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_messages: Option<u64>,
    /// Transcript messages sent.
    pub messages: u64,
    /// The model called: recorded on the first step and whenever it, the
    /// context window or the tools changed (so long traces stay small);
    /// absent means as on the step before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The sampling settings passed through to the provider, as sent
    /// (`temperature`, `max_tokens`, `top_p`, `seed`; absent when none were).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub settings: Option<Map<String, Value>>,
    /// The system prompt sent (with the result-schema instruction when the
    /// run has one; `""` for none): recorded on a driver's first step and
    /// whenever it changed (a handoff); absent means as on the step before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Names of the tools offered; recorded with `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Which tools this turn offered and why, when the run has more
    /// attached than one turn offers (recorded on every such step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<super::ToolSelection>,
}

/// What came back from a step's model call: an answer, or the error that
/// failed the run. Stored as the answer's object, or as `{"error": …}`.
/// (Its OpenAPI schema is written in `crate::model::openapi`: an answer's fields
/// are all optional, so `{"error"}` would match both shapes of a `oneOf`.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged, from = "StoredResponse")]
pub enum StepResponse {
    /// The model answered.
    Answer(ModelAnswer),
    /// The model call failed (the run failed with this message).
    Failed { error: String },
}

impl Default for StepResponse {
    fn default() -> Self {
        Self::Answer(ModelAnswer::default())
    }
}

impl StepResponse {
    /// The answer, unless the call failed.
    pub fn answer(&self) -> Option<&ModelAnswer> {
        match self {
            Self::Answer(a) => Some(a),
            Self::Failed { .. } => None,
        }
    }

    pub fn answer_mut(&mut self) -> Option<&mut ModelAnswer> {
        match self {
            Self::Answer(a) => Some(a),
            Self::Failed { .. } => None,
        }
    }

    /// The answer's text, if it had any.
    pub fn text(&self) -> Option<&str> {
        self.answer()?.text.as_deref()
    }

    /// Why the model stopped (`stop`, `tool_calls`, `length`…), if it said.
    pub fn finish_reason(&self) -> Option<&str> {
        self.answer()?.finish_reason.as_deref()
    }

    /// The final answer as the run's result (see [`ModelAnswer::result`]).
    pub fn result(&self) -> Option<&Value> {
        self.answer()?.result.as_ref()
    }

    /// Why the final answer did not match the run's `result_schema`.
    pub fn schema_error(&self) -> Option<&str> {
        self.answer()?.schema_error.as_deref()
    }

    /// The error of a failed model call.
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Failed { error } => Some(error),
            Self::Answer(_) => None,
        }
    }
}

/// A model's answer as a step records it: the requested tool calls
/// themselves are the step's [`ToolCall`]s.
///
/// Fields in alphabetical order, as [`StepRequest`]'s; `finish_reason`,
/// `text` and `tool_calls` are always written (`null` when absent).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ModelAnswer {
    pub finish_reason: Option<String>,
    /// On a final answer (no tool calls): the run's result — the JSON the
    /// text held, or the text itself; `null` when there was no text. Kept
    /// as stored, `null` included.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub result: Option<Value>,
    /// Why a final answer did not match the run's `result_schema`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_error: Option<String>,
    pub text: Option<String>,
    /// How many tool calls the model asked for.
    pub tool_calls: u64,
}

/// A stored value, `null` included, is `Some`; only a missing one is `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A stored response as it reads: an object with `error` is a failed call,
/// any other an answer (missing fields read as absent). Read field by field
/// rather than tried variant by variant: no step is buffered on the way.
#[derive(Default, Deserialize)]
#[serde(default)]
struct StoredResponse {
    error: Option<String>,
    finish_reason: Option<String>,
    #[serde(deserialize_with = "present")]
    result: Option<Value>,
    schema_error: Option<String>,
    text: Option<String>,
    tool_calls: u64,
}

impl From<StoredResponse> for StepResponse {
    fn from(r: StoredResponse) -> Self {
        match r.error {
            Some(error) => Self::Failed { error },
            None => Self::Answer(ModelAnswer {
                finish_reason: r.finish_reason,
                result: r.result,
                schema_error: r.schema_error,
                text: r.text,
                tool_calls: r.tool_calls,
            }),
        }
    }
}

/// Lifecycle of one tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ToolCallStatus {
    Pending,
    /// Waiting for a person to approve or reject it.
    AwaitingApproval,
    Running,
    Succeeded,
    Failed,
    /// A person (or an approval timeout) rejected it.
    Rejected,
    Cancelled,
}

impl ToolCallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Rejected => "rejected",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "awaiting_approval" => Self::AwaitingApproval,
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "rejected" => Self::Rejected,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Rejected | Self::Cancelled)
    }
}

/// One tool invocation inside a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    /// The call id the model gave (unique within the run).
    pub id: String,
    pub run_id: String,
    pub step_index: u32,
    pub tool_name: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub status: ToolCallStatus,
    /// Why the model made the call: its reason when the run asks for
    /// reasoning traces, else its text before the call, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// When approval was requested (set for calls that needed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<DateTime<Utc>>,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalDecision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// For a call of another agent: the child run it started and waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The text the store holds, written and read back unchanged.
    fn round_trip<T: Serialize + serde::de::DeserializeOwned>(stored: &str) -> String {
        serde_json::to_string(&serde_json::from_str::<T>(stored).unwrap()).unwrap()
    }

    #[test]
    fn step_refs_are_an_index_or_an_id_written_one_way() {
        assert_eq!(Step::parse_ref("r:1", "0"), Some(0));
        assert_eq!(Step::parse_ref("r:1", "12"), Some(12));
        assert_eq!(Step::parse_ref("r:1", "r:1:s12"), Some(12));
        for bad in ["", "+1", "007", "-1", "1 ", "r:1:s", "r:1:s01", "other:s1", "4294967296"] {
            assert_eq!(Step::parse_ref("r:1", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn payloads_are_written_as_the_json_objects_earlier_versions_stored() {
        // What the loop wrote before these types: `json!` objects (sorted maps).
        let old_request = json!({"messages": 3, "dropped_messages": 2, "model": "builtin", "context_window": 8192,
            "tools": ["calculator"], "settings": {"seed": 7, "temperature": 0.2}});
        let request = StepRequest {
            context_window: Some(8192),
            dropped_messages: Some(2),
            messages: 3,
            model: Some("builtin".into()),
            settings: json!({"temperature": 0.2, "seed": 7}).as_object().cloned(),
            system_prompt: None,
            tools: Some(vec!["calculator".into()]),
            selection: None,
        };
        assert_eq!(serde_json::to_string(&request).unwrap(), old_request.to_string());
        // A recorded system prompt sits where a sorted map puts it.
        let with_prompt = StepRequest { system_prompt: Some("Be brief.".into()), ..request.clone() };
        let mut sorted = old_request.clone();
        sorted["system_prompt"] = json!("Be brief.");
        assert_eq!(serde_json::to_string(&with_prompt).unwrap(), sorted.to_string());
        let brief = StepRequest { messages: 5, ..StepRequest::default() };
        assert_eq!(serde_json::to_string(&brief).unwrap(), json!({"messages": 5}).to_string());

        let old_answer =
            json!({"text": "4", "tool_calls": 0, "finish_reason": "stop", "result": 4, "schema_error": "x"});
        let answer = StepResponse::Answer(ModelAnswer {
            finish_reason: Some("stop".into()),
            result: Some(json!(4)),
            schema_error: Some("x".into()),
            text: Some("4".into()),
            tool_calls: 0,
        });
        assert_eq!(serde_json::to_string(&answer).unwrap(), old_answer.to_string());
        let calls = StepResponse::Answer(ModelAnswer { tool_calls: 2, ..ModelAnswer::default() });
        let old_calls = json!({"text": null, "tool_calls": 2, "finish_reason": null});
        assert_eq!(serde_json::to_string(&calls).unwrap(), old_calls.to_string());
        let failed = StepResponse::Failed { error: "boom".into() };
        assert_eq!(serde_json::to_string(&failed).unwrap(), r#"{"error":"boom"}"#);
    }

    #[test]
    fn stored_payloads_read_back_unchanged_and_older_ones_load() {
        for stored in [
            r#"{"finish_reason":"stop","result":null,"text":null,"tool_calls":0}"#,
            r#"{"finish_reason":"tool_calls","text":"Let me see.","tool_calls":2}"#,
            r#"{"finish_reason":"stop","result":{"total":3},"schema_error":"`total` is missing","text":"{}","tool_calls":0}"#,
            r#"{"error":"openai/gpt: the provider answered 401 Unauthorized: bad key"}"#,
        ] {
            assert_eq!(round_trip::<StepResponse>(stored), stored);
        }
        let stored = r#"{"context_window":8192,"messages":1,"model":"builtin","settings":{"max_tokens":5},"tools":[]}"#;
        assert_eq!(round_trip::<StepRequest>(stored), stored);

        // Fields older or hand-written data may lack read as absent.
        let request: StepRequest = serde_json::from_str(r#"{"model":"m-2"}"#).unwrap();
        assert_eq!((request.messages, request.model.as_deref()), (0, Some("m-2")));
        let response: StepResponse = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
        assert_eq!((response.text(), response.finish_reason(), response.error()), (Some("hi"), None, None));
        assert_eq!(serde_json::from_str::<StepResponse>("{}").unwrap(), StepResponse::default());
        let failed: StepResponse = serde_json::from_str(r#"{"error":"boom"}"#).unwrap();
        assert_eq!((failed.error(), failed.text(), failed.answer()), (Some("boom"), None, None));
        // A payload of the wrong shape is refused, naming the problem.
        let wrong = serde_json::from_str::<StepResponse>(r#"{"text":5}"#).unwrap_err().to_string();
        assert!(wrong.contains("invalid type: integer `5`, expected a string"), "{wrong}");
    }
}
