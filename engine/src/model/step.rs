//! Steps (one model turn each) and the tool calls inside them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    pub run_id: String,
    pub index: u32,
    /// `model_turn` for every step today; kept open for other kinds.
    pub kind: String,
    pub status: StepStatus,
    /// What was sent: message count, tools offered, settings.
    pub request: Value,
    /// What came back: text, tool calls, finish reason.
    pub response: Value,
    pub usage: Usage,
    pub started_at: DateTime<Utc>,
    /// When the model answered.
    pub model_completed_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub tool_calls: Vec<ToolCall>,
}

impl Step {
    /// The model this step's request recorded: on the first step and on
    /// every step where it changed; `None` means the run's model.
    pub fn recorded_model(&self) -> Option<&str> {
        self.request.get("model").and_then(Value::as_str)
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
    /// The model's text before the call (its reasoning), if any.
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
}
