//! One model call of a run, in full: what the model was sent and what came
//! back, for a trace's detail pane (`Traces::model_call`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Message, ToolInfo};

/// Step `step_index`'s model call: the messages exactly as sent (the system
/// prompt recorded on the step, and the transcript messages the context
/// window kept), the tools offered, the settings, and the provider's own
/// request and response bodies.
///
/// Nothing here is stored twice: the transcript is the run's, and a step
/// records only what changed since the step before (model, tools, system
/// prompt), so a long run's calls cost no more storage than its transcript.
/// The bodies are what the model's provider adapter builds from these parts
/// (the same function it sends with); the response is the answer as
/// assembled from its stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelCall {
    pub step_index: u32,
    /// The model called.
    pub model: String,
    /// The system prompt sent; `None` when none was. See `system_prompt_known`.
    pub system_prompt: Option<String>,
    /// False for a step recorded before steps kept their system prompt, in
    /// a run whose agent changed since: the prompt is then not known.
    pub system_prompt_known: bool,
    /// The transcript messages sent, oldest first (at most the latest of
    /// them that were asked for; see `omitted_messages`).
    pub messages: Vec<Message>,
    /// Messages sent that are not in `messages` (older ones, left out to
    /// keep the answer bounded): the run's transcript has them.
    pub omitted_messages: u64,
    /// The oldest transcript messages left out to fit the context window.
    pub dropped_messages: u64,
    /// The tools offered, as defined today (a tool's definition is not
    /// recorded per step).
    pub tools: Vec<ToolInfo>,
    /// Tools the step offered that are no longer defined.
    pub undefined_tools: Vec<String>,
    /// The sampling settings passed through to the provider.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub settings: Map<String, Value>,
    /// The request body in the provider's wire format (for the built-in
    /// model, which runs in-process, the engine's own request).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub request_body: Value,
    /// The response in the provider's wire format; `None` while the model
    /// has not answered, or when the call failed (see `error`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub response_body: Option<Value>,
    /// Why the call failed.
    pub error: Option<String>,
}
