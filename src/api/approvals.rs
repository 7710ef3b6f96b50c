//! Server functions for human approvals: decide a pending tool call from the
//! web UI, list the pending calls a page at a time (oldest first, filtered
//! by tool and age), and count them for the nav badge.
//!
//! Decisions fail with an [`ApprovalError`], so the page knows which card a
//! failure belongs to (`about`: the call id) and, when someone else decided
//! first, what they decided (see [`super::action_error`]).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{ApprovalDecision, DecidedCall, Interruption, ToolCall};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;
#[cfg(any(feature = "ssr", test))]
use super::action_error::ErrorKind;

/// The inbox page's filters and place, as its URL carries them
/// (`/approvals?tool=…&older_than_s=…&newer_than_s=…&cursor=…`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxQuery {
    /// Only calls of this tool (its exact name).
    pub tool: Option<String>,
    /// Only calls that have waited at least this many seconds.
    pub older_than_s: Option<u64>,
    /// Only calls that have waited at most this many seconds.
    pub newer_than_s: Option<u64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Calls on one page of the inbox.
pub const INBOX_PAGE_SIZE: u32 = 50;

/// One page of the calls waiting for a decision, oldest first, plus the
/// server's clock (for "requested 2m 05s ago").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApprovals {
    /// Long arguments and reasoning come cut to a preview (see [`super::preview`]).
    pub items: Vec<Interruption>,
    pub now: DateTime<Utc>,
    /// The calls whose arguments or reasoning were cut.
    pub cut_calls: Vec<String>,
    /// The caller's role in the project (a viewer sees the cards without
    /// the buttons).
    pub role: Option<runlens_engine::model::Role>,
    /// Where the next page starts; `None` on the last one.
    pub next_cursor: Option<String>,
    /// Every call waiting for a decision in the project, whatever the filters.
    pub total: u64,
}

/// A decision on a call that could not be applied: about the call (its
/// id), with the decision that won when someone decided first.
pub type ApprovalError = ActionError<String, ApprovalDecision>;

/// Parses the argument editor's text. Blank means "not edited".
pub fn parse_edited_arguments(text: Option<&str>) -> Result<Option<serde_json::Value>, String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    serde_json::from_str(text).map(Some).map_err(|e| format!("The edited arguments are not valid JSON: {e}."))
}

/// Approves a pending call, optionally with edited arguments (the JSON text
/// of the editor), a comment, and "always approve this tool in this run".
/// Returns the decided call.
#[server]
pub async fn approve_call(
    run_id: String,
    call_id: String,
    #[server(default)] always: bool,
    arguments: Option<String>,
    comment: Option<String>,
) -> Result<ToolCall, ApprovalError> {
    use runlens_engine::model::DecisionRequest;

    let (engine, actor) = ssr::decider(&run_id, &call_id).await?;
    let arguments = parse_edited_arguments(arguments.as_deref()).map_err(|msg| {
        ssr::set_status(ErrorKind::Invalid);
        ApprovalError::new(Some(call_id.clone()), ErrorKind::Invalid, msg)
    })?;
    let req = DecisionRequest { always, arguments, comment: super::ssr::non_empty(comment), reason: None };
    engine.approvals().approve(&run_id, &call_id, req, &actor).await.map_err(|e| ssr::to_approval_error(&call_id, e))
}

/// Rejects a pending call; the model receives the reason.
#[server]
pub async fn reject_call(
    run_id: String,
    call_id: String,
    #[server(default)] always: bool,
    reason: Option<String>,
) -> Result<ToolCall, ApprovalError> {
    use runlens_engine::model::DecisionRequest;

    let (engine, actor) = ssr::decider(&run_id, &call_id).await?;
    let req = DecisionRequest { always, reason: super::ssr::non_empty(reason), ..DecisionRequest::default() };
    engine.approvals().reject(&run_id, &call_id, req, &actor).await.map_err(|e| ssr::to_approval_error(&call_id, e))
}

/// One page of the calls awaiting a decision across the project's runs,
/// oldest first, filtered as `query` says. `query` defaults: a browser
/// sends nothing at all for the unfiltered first page (no field is set).
#[server]
pub async fn list_pending_approvals(#[server(default)] query: InboxQuery) -> Result<PendingApprovals, ServerFnError> {
    use runlens_engine::model::limits::MAX_INBOX_AGE_S;
    use runlens_engine::store::{InboxCursor, InboxFilter};

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let after = match super::ssr::non_empty(query.cursor) {
        Some(text) => Some(
            InboxCursor::parse(&text)
                .ok_or_else(|| ServerFnError::new("this page's place in the inbox is not valid; start over"))?,
        ),
        None => None,
    };
    let now = Utc::now();
    let ago = |secs: Option<u64>| secs.map(|s| now.timestamp_millis() - s.min(MAX_INBOX_AGE_S) as i64 * 1000);
    let filter = InboxFilter {
        project: caller.project.clone(),
        after,
        tool: super::ssr::non_empty(query.tool),
        run_id: None,
        requested_from_ms: ago(query.newer_than_s),
        requested_until_ms: ago(query.older_than_s),
        limit: INBOX_PAGE_SIZE,
    };
    let (page, total) =
        tokio::try_join!(engine.approvals().pending_inbox(&filter), engine.approvals().pending_count(&caller.project))
            .map_err(super::ssr::to_server_error)?;
    let mut items = page.items;
    let cut_calls =
        items.iter_mut().filter_map(|i| super::preview::cut_interruption(i).then(|| i.call_id.clone())).collect();
    let role = caller.role_in(&caller.project);
    let next_cursor = page.next.as_ref().map(InboxCursor::encode);
    Ok(PendingApprovals { items, now, cut_calls, role, next_cursor, total })
}

/// Decisions on one page of the Decided tab.
pub const DECIDED_PAGE_SIZE: u32 = 50;

/// One page of the project's decisions, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecidedApprovals {
    pub items: Vec<DecidedCall>,
    /// The server's clock (for "2m 05s ago").
    pub now: DateTime<Utc>,
    /// Where the next (older) page starts, if there is one.
    pub next_cursor: Option<String>,
}

/// One page of the decisions made in the current project (who, when, what
/// was edited, the comment or reason), newest first, from `cursor` (the
/// `next_cursor` of the page before; none for the first).
#[server]
pub async fn list_decided_approvals(
    #[server(default)] cursor: Option<String>,
) -> Result<DecidedApprovals, ServerFnError> {
    use runlens_engine::store::DecisionCursor;

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let before = match super::ssr::non_empty(cursor) {
        Some(text) => Some(
            DecisionCursor::parse(&text)
                .ok_or_else(|| ServerFnError::new("this page's place in the decisions is not valid; start over"))?,
        ),
        None => None,
    };
    let mut items = engine
        .store()
        .decisions(&caller.project, before.as_ref(), 0, DECIDED_PAGE_SIZE + 1)
        .await
        .map_err(super::ssr::to_server_error)?;
    let more = items.len() > DECIDED_PAGE_SIZE as usize;
    items.truncate(DECIDED_PAGE_SIZE as usize);
    let next_cursor = if more { items.last().map(DecidedCall::cursor) } else { None };
    Ok(DecidedApprovals { items, now: Utc::now(), next_cursor })
}

/// How many calls, and requests from other agents, await a person (the nav
/// badge): two stored counts, kept by the store as calls pause and requests
/// come, and as they are decided.
#[server]
pub async fn pending_approval_count() -> Result<usize, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let (calls, requests) = tokio::try_join!(
        engine.approvals().pending_count(&caller.project),
        engine.requests().pending_request_count(&caller.project)
    )
    .map_err(super::ssr::to_server_error)?;
    Ok(usize::try_from(calls.saturating_add(requests)).unwrap_or(usize::MAX))
}

#[cfg(feature = "ssr")]
mod ssr {
    use runlens_engine::{Engine, EngineError};

    use super::{ApprovalError, ErrorKind};
    use crate::format;

    pub fn engine(call_id: &str) -> Result<Engine, ApprovalError> {
        super::super::ssr::engine()
            .map_err(|e| ApprovalError::new(Some(call_id.to_string()), ErrorKind::Internal, e.to_string()))
    }

    /// The engine and the caller's actor, once the caller may decide on run
    /// `run_id` (an approver of its project).
    pub async fn decider(run_id: &str, call_id: &str) -> Result<(Engine, Actor), ApprovalError> {
        let engine = engine(call_id)?;
        let caller = super::super::ssr::caller()
            .map_err(|e| ApprovalError::new(Some(call_id.to_string()), ErrorKind::Forbidden, e.to_string()))?;
        match caller.run(&engine, run_id, Role::Approver).await {
            Ok(_) => Ok((engine, caller.actor)),
            Err(e) => {
                let (status, message) = e.status_and_message();
                super::super::ssr::set_status(status);
                Err(ApprovalError::new(Some(call_id.to_string()), ErrorKind::of_status(status), message))
            }
        }
    }

    use runlens_engine::model::{Actor, Role};

    /// Engine errors as the card shows them (classified once, see
    /// `super::super::ssr::classify`), answered with the REST API's status codes.
    pub fn to_approval_error(call_id: &str, err: EngineError) -> ApprovalError {
        let error = super::super::ssr::classify(err, "deciding a tool call");
        super::super::ssr::set_status(error.status());
        let message = match error.decision.as_deref() {
            Some(d) => format!(
                "Someone decided first: {} by {} at {} UTC.",
                d.decision.as_str(),
                d.decided_by,
                format::time(&d.decided_at)
            ),
            None => error.message,
        };
        ApprovalError { won: error.decision, ..ApprovalError::new(Some(call_id.to_string()), error.kind, message) }
    }

    /// 400/404/409/500 instead of the default 500, for the hydrated page's
    /// calls (a plain form post keeps its redirect back).
    pub fn set_status(kind: ErrorKind) {
        super::super::ssr::set_status(kind.status());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edited_arguments_parse_or_explain() {
        assert_eq!(parse_edited_arguments(None), Ok(None));
        assert_eq!(parse_edited_arguments(Some("  \n")), Ok(None));
        assert_eq!(parse_edited_arguments(Some(r#"{"to": "a@b.c"}"#)), Ok(Some(serde_json::json!({"to": "a@b.c"}))));
        let err = parse_edited_arguments(Some("{nope")).unwrap_err();
        assert!(err.starts_with("The edited arguments are not valid JSON"), "{err}");
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn errors_round_trip_through_the_json_encoding() {
        use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};

        let err = ApprovalError::new(Some("call_1".into()), ErrorKind::Invalid, "bad");
        let back = ApprovalError::de(err.ser());
        assert_eq!(back, err);
        assert!(back.is_about("call_1") && !back.is_about("call_2"));
        let transport = ApprovalError::from_server_fn_error(ServerFnErrorErr::Request("down".into()));
        assert_eq!(transport.kind, ErrorKind::Internal);
        assert_eq!(transport.about, None);
    }
}
