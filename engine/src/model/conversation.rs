//! Conversation types: follow-up messages and the family tree of forks.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{limits, RunStatus};

/// A follow-up message on a finished run (`POST /api/runs/{id}/messages`),
/// with optional overrides for the continuation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FollowUp {
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::human_message, required = true))]
    pub message: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::max_turns))]
    pub max_turns: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::tool_list))]
    pub tools: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_name))]
    pub model: Option<String>,
}

impl FollowUp {
    /// Checks the message and the overrides' bounds (see [`limits`]); the
    /// engine checks that the named tools and model exist.
    pub fn check_bounds(&self) -> Result<(), String> {
        limits::check_message("message", &self.message)?;
        limits::check_max_turns(self.max_turns)?;
        if let Some(tools) = &self.tools {
            limits::check_tool_list("tools", tools)?;
        }
        if let Some(model) = &self.model {
            limits::check_chars("model", model, limits::MAX_ID_CHARS)?;
        }
        Ok(())
    }
}

/// A run with its ancestors and forks (the trace page's branch tree).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFamily {
    /// Every run of the family, oldest first; `parent_run_id` links them.
    pub runs: Vec<FamilyMember>,
}

/// One run in a [`RunFamily`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FamilyMember {
    pub id: String,
    pub name: String,
    pub status: RunStatus,
    pub parent_run_id: Option<String>,
    pub forked_from_message_id: Option<String>,
    /// The edited message's text in the fork (where it diverged).
    pub forked_message: Option<String>,
    /// For a fork made from a step: the parent's step it continues after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from_step: Option<u32>,
    /// For a replay: `recorded` or `live`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<super::ReplayMode>,
    pub created_at: DateTime<Utc>,
}
