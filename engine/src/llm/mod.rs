//! The model interface: a model streams chunks, the runner assembles them.
//!
//! Every provider (the built-in model today, OpenAI-compatible servers next)
//! implements [`Model::stream`]. Streaming is the only interface so that text
//! deltas reach the live UI without the runner knowing which provider spoke;
//! [`collect`] turns a stream into one [`ModelResponse`]. A turn that gives
//! no answer fails with a [`ModelError`].

mod builtin;
mod builtin_judge;
mod builtin_plan;
mod collect;
mod error;
pub mod openai;
pub mod providers;
pub mod tokens;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

pub use builtin::{validate_settings as validate_builtin_settings, BuiltinModel};
pub use collect::{collect, ModelResponse, RequestedCall};
pub use error::{ModelError, ProviderError, ProviderFailure};
pub use openai::{OpenAiModel, OpenAiProvider};
pub use providers::{ApiKey, ProviderConfig};

use crate::model::{Message, ToolInfo, Usage};

/// What a model is asked: the transcript so far and the tools it may call.
#[derive(Clone, Debug, Default)]
pub struct ModelRequest {
    pub run_id: String,
    /// The run's system prompt, with the result-schema instruction appended
    /// when the run has a `result_schema`.
    pub system_prompt: Option<String>,
    /// The transcript, possibly without its oldest messages when the whole
    /// history would not fit the model's context window. Shared with the
    /// run's driver, not copied, each turn: the history of a long run is
    /// large, and only a provider that sends it needs to walk it.
    pub messages: Vec<Arc<Message>>,
    pub tools: Vec<ToolInfo>,
    /// The run's `model_settings`, passed through as given. Shared, not
    /// copied, each turn: a scripted run's settings hold its whole script.
    pub settings: Arc<Value>,
    /// The JSON Schema the final answer must match, if any.
    pub result_schema: Option<Value>,
    /// Model turns this run already took (counted on the whole history,
    /// including messages trimmed from `messages`).
    pub turns_taken: usize,
}

/// One piece of a streamed answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelChunk {
    TextDelta(String),
    /// Part of the tool call at `index`; `id` and `name` arrive once, the
    /// argument JSON text may be split across many chunks.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// Why the model made the call at `index`, when it says so apart from
    /// its text (a script's `reasoning`).
    CallReasoning {
        index: usize,
        text: String,
    },
    Usage(Usage),
    Finish(String),
}

pub type ModelStream = BoxStream<'static, Result<ModelChunk, ModelError>>;

/// A chat model that can call tools.
#[async_trait]
pub trait Model: Send + Sync {
    /// Starts a turn; the stream ends when the model has answered.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;

    /// Checks a run's `model_settings` before the run is created, so bad
    /// settings are a 400 for the client rather than a failed run later.
    fn validate_settings(&self, _settings: &Value) -> Result<(), String> {
        Ok(())
    }

    /// Tokens the model accepts per request (the runner trims the oldest
    /// history to fit). `settings.context_window` overrides it per run.
    fn context_window(&self, settings: &Value) -> u64 {
        settings.get("context_window").and_then(Value::as_u64).unwrap_or(128_000)
    }

    /// The body `stream` sends for `request`, in the provider's wire
    /// format: what a trace shows as the raw request. A model that runs
    /// in-process has none; the default is the request itself as JSON.
    fn request_body(&self, request: &ModelRequest) -> Value {
        let tools = request
            .tools
            .iter()
            .map(|t| serde_json::json!({ "name": t.name, "description": t.description, "parameters": t.schema }));
        serde_json::json!({
            "system_prompt": request.system_prompt,
            "messages": request.messages.iter().map(|m| &m.body).collect::<Vec<_>>(),
            "tools": tools.collect::<Vec<_>>(),
            "settings": *request.settings,
        })
    }

    /// `answer` in the provider's wire format, as a whole (not streamed)
    /// response would carry it: what a trace shows as the raw response.
    fn response_body(&self, answer: &Answered<'_>) -> Value {
        let calls = answer
            .calls
            .iter()
            .map(|c| serde_json::json!({ "id": c.id, "name": c.tool_name, "arguments": c.arguments }));
        serde_json::json!({
            "text": answer.text,
            "tool_calls": calls.collect::<Vec<_>>(),
            "finish_reason": answer.finish_reason,
            "usage": answer.usage,
        })
    }
}

/// A model's answer as a step stored it, for [`Model::response_body`].
pub struct Answered<'a> {
    pub text: Option<&'a str>,
    pub calls: &'a [crate::model::ToolCall],
    pub finish_reason: Option<&'a str>,
    pub usage: &'a Usage,
}

/// The models a run can name, by name.
#[derive(Clone, Default)]
pub struct ModelRegistry {
    models: BTreeMap<String, Arc<dyn Model>>,
}

impl ModelRegistry {
    /// The built-in model plus every model of `providers` (checked, keys
    /// resolved: see `providers::resolve`) as `provider/model`.
    pub fn with_providers(providers: &[(String, ProviderConfig)]) -> Result<Self, String> {
        let mut registry = Self::with_builtin();
        for (name, config) in providers {
            let provider = Arc::new(OpenAiProvider::new(name, config)?);
            for model in &config.models {
                registry.register(format!("{name}/{model}"), Arc::new(provider.model(model)));
            }
        }
        Ok(registry)
    }

    /// A registry holding the built-in model as `builtin`.
    pub fn with_builtin() -> Self {
        let mut reg = Self::default();
        reg.register("builtin", Arc::new(BuiltinModel));
        reg
    }

    pub fn register(&mut self, name: impl Into<String>, model: Arc<dyn Model>) {
        self.models.insert(name.into(), model);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Model>> {
        self.models.get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }
}
