//! A run's steps without their payloads: the outline.
//!
//! Everything a step tree, a timeline or a token chart of a long run draws —
//! indexes, kinds, statuses, token usage, timings, and each tool call's name
//! and status — and nothing they don't (requests, responses, arguments and
//! results load when a node is expanded). A 10,000-step run's outline is read
//! in one pass over narrow covering indexes keyed `(run_id, idx)`, which hold
//! no payload (SQLite store; see `migrations/sqlite/0006_outline_indexes.sql`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Step, StepStatus, ToolCall, ToolCallStatus, Usage};

/// One step of the outline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepOutline {
    pub index: u32,
    pub kind: String,
    pub status: StepStatus,
    /// The model this step called, when its request recorded one (the first
    /// step and every step where it changed); otherwise the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub usage: Usage,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_completed_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<CallOutline>,
}

/// One tool call of the outline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallOutline {
    pub id: String,
    pub tool_name: String,
    pub status: ToolCallStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
}

impl From<&ToolCall> for CallOutline {
    fn from(c: &ToolCall) -> Self {
        CallOutline {
            id: c.id.clone(),
            tool_name: c.tool_name.clone(),
            status: c.status,
            requested_at: c.requested_at,
            started_at: c.started_at,
            completed_at: c.completed_at,
        }
    }
}

impl From<&Step> for StepOutline {
    fn from(s: &Step) -> Self {
        StepOutline {
            index: s.index,
            kind: s.kind.clone(),
            status: s.status,
            model: s.recorded_model().map(str::to_owned),
            usage: s.usage,
            started_at: s.started_at,
            model_completed_at: s.model_completed_at,
            completed_at: s.completed_at,
            tool_calls: s.tool_calls.iter().map(CallOutline::from).collect(),
        }
    }
}
