//! The rows of the trace page's step tree: one per step, with its tool calls,
//! small enough that a window of a 100,000-step run costs a few kilobytes.
//!
//! The page builds the rows of the steps it already holds itself
//! ([`TreeRow::of`], the same on the server and in the browser, so hydration
//! matches) and asks for the others a block of [`TREE_BLOCK`] steps at a
//! time as the tree is scrolled to them ([`get_tree_rows`]).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Step, StepStatus, ToolCall, ToolCallStatus};
use serde::{Deserialize, Serialize};

/// Steps per block the tree loads.
pub const TREE_BLOCK: u32 = 100;

/// One step of the tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeRow {
    pub index: u32,
    pub kind: String,
    pub status: StepStatus,
    /// What the row says of the step: a handoff's text, else the start of
    /// the model's text (see [`one_line`]).
    pub preview: Option<String>,
    pub tokens: u64,
    /// At today's prices; `None`: the model has no price.
    pub cost: Option<f64>,
    pub started_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub calls: Vec<TreeCall>,
}

/// One tool call of a tree row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeCall {
    pub id: String,
    pub tool_name: String,
    pub status: ToolCallStatus,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    /// The run a sub-agent call started.
    pub child_run_id: Option<String>,
    /// A person decided on it (approved or rejected).
    pub decided: bool,
}

impl TreeRow {
    pub fn of(step: &Step, cost: Option<f64>) -> Self {
        let text = step.response.text();
        let preview = if step.kind == "handoff" { text.map(str::to_string) } else { text.and_then(one_line) };
        Self {
            index: step.index,
            kind: step.kind.clone(),
            status: step.status,
            preview,
            tokens: step.usage.total_tokens,
            cost,
            started_at: step.started_at,
            completed_at: step.completed_at,
            calls: step.tool_calls.iter().map(TreeCall::of).collect(),
        }
    }

    /// Whether the row may still change (the step or one of its calls is
    /// under way).
    pub fn settled(&self) -> bool {
        self.status != StepStatus::Running && self.calls.iter().all(|c| c.completed_at.is_some())
    }
}

impl TreeCall {
    fn of(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            status: call.status,
            started_at: call.started_at.or(call.requested_at),
            completed_at: call.completed_at,
            child_run_id: call.child_run_id.clone(),
            decided: call.approval.is_some(),
        }
    }
}

/// Characters of a step's text a row shows.
pub const PREVIEW_CHARS: usize = 90;

/// The start of `text` on one line (whitespace runs become one space),
/// cut to [`PREVIEW_CHARS`] with an ellipsis; `None` for blank text.
pub fn one_line(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    let mut line = String::from(words.next()?);
    let mut more = false;
    for word in words {
        if line.chars().count() > PREVIEW_CHARS {
            more = true;
            break;
        }
        line.push(' ');
        line.push_str(word);
    }
    if more || line.chars().count() > PREVIEW_CHARS {
        let cut: String = line.chars().take(PREVIEW_CHARS).collect();
        return Some(format!("{}…", cut.trim_end()));
    }
    Some(line)
}

/// `→ name, name, name +2`: the first `shown` of the tools a step called,
/// in order, the rest counted; `None` for no call.
pub fn tool_names_line<'a>(names: impl ExactSizeIterator<Item = &'a str>, shown: usize) -> Option<String> {
    let count = names.len();
    let first: Vec<&str> = names.take(shown.max(1)).collect();
    if first.is_empty() {
        return None;
    }
    let more = count - first.len();
    let more = if more > 0 { format!(" +{more}") } else { String::new() };
    Some(format!("→ {}{more}", first.join(", ")))
}

/// The tree rows of run `run_id`'s steps `from..from + limit` (`limit`
/// at most [`TREE_BLOCK`]; more is a 400).
#[server]
pub async fn get_tree_rows(run_id: String, from: u32, limit: u32) -> Result<Vec<TreeRow>, ServerFnError> {
    if limit == 0 || limit > TREE_BLOCK {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        return Err(ServerFnError::new(format!("limit must be 1 to {TREE_BLOCK}")));
    }
    let (engine, _, head) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    let traces = engine.traces();
    let (page, pricing) = tokio::try_join!(traces.steps_page(&run_id, from, limit), traces.pricing(&head.project))
        .map_err(super::ssr::to_server_error)?;
    Ok(page.steps.iter().map(|s| TreeRow::of(s, pricing.step_cost_usd(&head.model, s))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_previews() {
        assert_eq!(one_line("  \n "), None);
        assert_eq!(one_line("The answer\n\n  is 42."), Some("The answer is 42.".into()));
        let long = "word ".repeat(40);
        let preview = one_line(&long).unwrap();
        assert!(preview.ends_with('…') && preview.chars().count() <= PREVIEW_CHARS + 1, "{preview}");
        let one_word = "x".repeat(200);
        assert_eq!(tool_names_line(["a", "b", "c", "d"].into_iter(), 3).as_deref(), Some("→ a, b, c +1"));
        assert_eq!(tool_names_line(["a"].into_iter(), 2).as_deref(), Some("→ a"));
        assert_eq!(tool_names_line([].into_iter(), 2), None);
        assert_eq!(one_line(&one_word).unwrap().chars().count(), PREVIEW_CHARS + 1);
    }
}

/// Which steps the tree shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeFilter {
    /// Steps that were interrupted, or with a call that failed, was
    /// rejected or was cancelled.
    Errors,
    /// Steps with a call waiting for a decision, or rejected.
    Decisions,
    /// Steps that called this tool.
    Tool(String),
}

/// Matches of a [`TreeFilter`] kept at most (a run's first ones).
pub const MAX_MATCHES: usize = 20_000;
/// Characters of a tool name to filter by, at most.
pub const MAX_TOOL_NAME: usize = 200;

/// The steps of a run a filter keeps, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeMatches {
    pub indexes: Vec<u32>,
    /// More steps matched than [`MAX_MATCHES`].
    pub truncated: bool,
}

impl TreeFilter {
    /// From a form's fields: `kind` is `errors`, `decisions` or `tool`
    /// (with `tool` the tool's name).
    pub fn parse(kind: &str, tool: Option<&str>) -> Result<Self, String> {
        match (kind, tool) {
            ("errors", _) => Ok(Self::Errors),
            ("decisions", _) => Ok(Self::Decisions),
            ("tool", Some(name)) if !name.is_empty() && name.chars().count() <= MAX_TOOL_NAME => {
                Ok(Self::Tool(name.to_owned()))
            }
            ("tool", _) => Err(format!("a tool name is 1 to {MAX_TOOL_NAME} characters")),
            (other, _) => Err(format!("no filter `{other}`: errors, decisions or tool")),
        }
    }

    /// The form fields [`Self::parse`] reads.
    pub fn fields(&self) -> (&'static str, Option<String>) {
        match self {
            Self::Errors => ("errors", None),
            Self::Decisions => ("decisions", None),
            Self::Tool(name) => ("tool", Some(name.clone())),
        }
    }

    /// Whether a step (by its outline) matches.
    pub fn matches(&self, step: &runlens_engine::model::StepOutline) -> bool {
        let calls = &step.tool_calls;
        match self {
            TreeFilter::Errors => {
                step.status == StepStatus::Interrupted
                    || calls.iter().any(|c| {
                        matches!(
                            c.status,
                            ToolCallStatus::Failed | ToolCallStatus::Rejected | ToolCallStatus::Cancelled
                        )
                    })
            }
            TreeFilter::Decisions => {
                calls.iter().any(|c| matches!(c.status, ToolCallStatus::AwaitingApproval | ToolCallStatus::Rejected))
            }
            TreeFilter::Tool(name) => calls.iter().any(|c| &c.tool_name == name),
        }
    }
}

/// The steps of run `run_id` that the filter keeps (the first
/// [`MAX_MATCHES`]; see [`TreeFilter::parse`] for `kind` and `tool`); an
/// unknown filter, or a tool name over [`MAX_TOOL_NAME`] characters, is a 400.
#[server]
pub async fn get_tree_matches(
    run_id: String,
    kind: String,
    tool: Option<String>,
) -> Result<TreeMatches, ServerFnError> {
    let filter = TreeFilter::parse(&kind, tool.as_deref()).map_err(|e| {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ServerFnError::new(e)
    })?;
    let (engine, _, _) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    let (_, outline) = engine.traces().step_outline(&run_id).await.map_err(super::ssr::to_server_error)?;
    let mut matches = outline.iter().filter(|s| filter.matches(s)).map(|s| s.index);
    let indexes: Vec<u32> = matches.by_ref().take(MAX_MATCHES).collect();
    Ok(TreeMatches { indexes, truncated: matches.next().is_some() })
}
