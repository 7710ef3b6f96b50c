//! Transcript messages, in the Inferable message model: `human`, `agent`
//! (with its tool invocations) and `invocation-result`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call the model asked for, as recorded on an `agent` message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Invocation {
    pub id: String,
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    pub input: Value,
}

/// Whether a tool call produced a value or an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ResultType {
    Resolution,
    Rejection,
}

/// The content of a transcript message, in the Inferable message model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MessageBody {
    Human {
        message: String,
    },
    Agent {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        invocations: Vec<Invocation>,
    },
    #[serde(rename_all = "camelCase")]
    InvocationResult {
        id: String,
        tool_name: String,
        result_type: ResultType,
        result: Value,
    },
}

impl MessageBody {
    /// The message type as stored (`human`, `agent`, `invocation-result`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Human { .. } => "human",
            Self::Agent { .. } => "agent",
            Self::InvocationResult { .. } => "invocation-result",
        }
    }
}

/// One transcript message: what the model sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    pub id: String,
    pub run_id: String,
    /// Position in the run's transcript, from 0.
    pub seq: u64,
    /// The step that produced it (none for human messages).
    pub step_index: Option<u32>,
    pub created_at: DateTime<Utc>,
    #[serde(flatten)]
    pub body: MessageBody,
}
