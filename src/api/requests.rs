//! Server functions for the requests of agents runlens does not run
//! (`POST /api/approval-requests`, `POST /api/questions`; see
//! `runlens_engine::model::AgentRequest`): list the current project's
//! pending ones for the approvals inbox, approve (with edited arguments and
//! a comment), reject (with a reason) or answer one, and list the requests
//! a run's trace shows.
//!
//! A request is decided like a run's call: the caller needs the approver
//! role in the request's project, and a request of a project the caller has
//! no role in is "not found", like one that does not exist. Decisions fail
//! with [`RequestError`], which names the request (so the page puts the
//! message on the right card) and, when someone decided first, carries the
//! request as it now stands (so the card can show that outcome); see
//! [`super::action_error`].

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{AgentRequest, Role};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;
#[cfg(any(feature = "ssr", test))]
use super::action_error::ErrorKind;

/// Pending requests on one page of the inbox.
pub const REQUESTS_PAGE_SIZE: u32 = 50;

/// Recently decided requests the inbox reads along (to show the outcome of
/// a request decided elsewhere in place of its card).
pub const RECENT_DECIDED: u32 = 50;

/// One page of the current project's pending requests (both kinds, oldest
/// first), the newest decided ones, and the server's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRequests {
    pub requests: Vec<AgentRequest>,
    /// Where the next page starts; `None` on the last one.
    pub next_cursor: Option<String>,
    /// The newest decided requests, without their arguments and context
    /// (the page only needs their outcome).
    pub recent: Vec<AgentRequest>,
    /// The caller's role in the project (a viewer sees the cards without
    /// the buttons).
    pub role: Option<Role>,
    pub now: DateTime<Utc>,
}

/// A decision on a request that could not be applied: about the request
/// (its id), with the request as decided when someone decided first.
pub type RequestError = ActionError<String, AgentRequest>;

/// A page's cursor as `<ms>_<id>` (the `next_cursor` of the previous page).
pub fn parse_cursor(text: &str) -> Option<(i64, String)> {
    let (ms, id) = text.split_once('_')?;
    let ms = ms.parse::<i64>().ok()?;
    runlens_engine::model::RequestKind::of_id(id).map(|_| (ms, id.to_owned()))
}

/// One page of the current project's pending requests, oldest first, with
/// the newest decided ones. `cursor` defaults: a browser sends nothing for
/// the first page.
#[server]
pub async fn list_agent_requests(#[server(default)] cursor: Option<String>) -> Result<PendingRequests, ServerFnError> {
    use runlens_engine::store::RequestFilter;

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let after = match super::ssr::non_empty(cursor) {
        Some(text) => Some(
            parse_cursor(&text)
                .ok_or_else(|| ServerFnError::new("this page's place in the requests is not valid; start over"))?,
        ),
        None => None,
    };
    let filter = |pending: bool, after: Option<(i64, String)>, limit: u32| RequestFilter {
        project: caller.project.clone(),
        kind: None,
        pending,
        after,
        limit,
    };
    let (page, decided) = tokio::try_join!(
        engine.requests().agent_requests(filter(true, after, REQUESTS_PAGE_SIZE)),
        engine.requests().agent_requests(filter(false, None, RECENT_DECIDED)),
    )
    .map_err(super::ssr::to_server_error)?;
    let recent = decided
        .requests
        .into_iter()
        .map(|r| AgentRequest { arguments: None, context: None, choices: None, ..r })
        .collect();
    let role = caller.role_in(&caller.project);
    Ok(PendingRequests { requests: page.requests, next_cursor: page.next_cursor, recent, role, now: Utc::now() })
}

/// Approves an approval request, optionally with edited arguments (the JSON
/// text of the editor; a JSON object) and a comment. Returns the decided
/// request.
#[server]
pub async fn approve_agent_request(
    id: String,
    #[server(default)] arguments: Option<String>,
    #[server(default)] comment: Option<String>,
) -> Result<AgentRequest, RequestError> {
    use runlens_engine::model::{Decision, RequestDecision, RequestKind, RequestVerdict};

    let (engine, actor) = ssr::decider(RequestKind::Approval, &id).await?;
    let arguments = super::parse_edited_arguments(arguments.as_deref()).map_err(|msg| {
        ssr::set_status(ErrorKind::Invalid);
        RequestError::new(Some(id.clone()), ErrorKind::Invalid, msg)
    })?;
    if arguments.as_ref().is_some_and(|a| !a.is_object()) {
        ssr::set_status(ErrorKind::Invalid);
        return Err(RequestError::new(
            Some(id.clone()),
            ErrorKind::Invalid,
            "The edited arguments must be a JSON object.",
        ));
    }
    let d = RequestDecision { arguments, comment: super::ssr::non_empty(comment), ..RequestDecision::default() };
    let verdict = RequestVerdict::Decide(Decision::Approved);
    match engine.requests().decide_request(RequestKind::Approval, &id, verdict, d, &actor).await {
        Ok(request) => Ok(request),
        Err(e) => Err(ssr::to_request_error(&engine, RequestKind::Approval, &id, e).await),
    }
}

/// Rejects an approval request; the agent receives the reason.
#[server]
pub async fn reject_agent_request(
    id: String,
    #[server(default)] reason: Option<String>,
) -> Result<AgentRequest, RequestError> {
    use runlens_engine::model::{Decision, RequestDecision, RequestKind, RequestVerdict};

    let (engine, actor) = ssr::decider(RequestKind::Approval, &id).await?;
    let d = RequestDecision { reason: super::ssr::non_empty(reason), ..RequestDecision::default() };
    let verdict = RequestVerdict::Decide(Decision::Rejected);
    match engine.requests().decide_request(RequestKind::Approval, &id, verdict, d, &actor).await {
        Ok(request) => Ok(request),
        Err(e) => Err(ssr::to_request_error(&engine, RequestKind::Approval, &id, e).await),
    }
}

/// Answers a question: free text, or one of its choices.
#[server]
pub async fn answer_agent_question(
    id: String,
    #[server(default)] answer: Option<String>,
) -> Result<AgentRequest, RequestError> {
    use runlens_engine::model::{RequestDecision, RequestKind, RequestVerdict};

    let (engine, actor) = ssr::decider(RequestKind::Question, &id).await?;
    let Some(answer) = super::ssr::non_empty(answer) else {
        ssr::set_status(ErrorKind::Invalid);
        return Err(RequestError::new(Some(id.clone()), ErrorKind::Invalid, "Write an answer first."));
    };
    let d = RequestDecision { answer: Some(answer), ..RequestDecision::default() };
    match engine.requests().decide_request(RequestKind::Question, &id, RequestVerdict::Answer, d, &actor).await {
        Ok(request) => Ok(request),
        Err(e) => Err(ssr::to_request_error(&engine, RequestKind::Question, &id, e).await),
    }
}

/// The requests a run's trace shows, with the server's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRequests {
    pub requests: Vec<AgentRequest>,
    pub now: DateTime<Utc>,
}

/// The requests shown in run `run_id` (those naming its trace), oldest
/// first; `Ok(None)` when there is no such run (or it belongs to a project
/// the caller has no role in).
#[server]
pub async fn get_run_requests(run_id: String) -> Result<Option<RunRequests>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, _)) = super::ssr::run_or_none(&run_id, super::ssr::Role::Viewer).await? else {
        return Ok(None);
    };
    match engine.requests().run_requests(&run_id).await {
        Ok(requests) => Ok(Some(RunRequests { requests, now: Utc::now() })),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

#[cfg(feature = "ssr")]
mod ssr {
    use runlens_engine::model::{Actor, RequestKind, RequestStatus, Role};
    use runlens_engine::{Engine, EngineError};

    use super::{ErrorKind, RequestError};

    /// The engine and the caller's actor, once the caller may decide request
    /// `id` of `kind` (an approver of its project). A request of a project
    /// the caller has no role in is not found.
    pub async fn decider(kind: RequestKind, id: &str) -> Result<(Engine, Actor), RequestError> {
        let engine = super::super::ssr::engine()
            .map_err(|e| RequestError::new(Some(id.to_string()), ErrorKind::Internal, e.to_string()))?;
        let caller = super::super::ssr::caller()
            .map_err(|e| RequestError::new(Some(id.to_string()), ErrorKind::Forbidden, e.to_string()))?;
        let not_found = || {
            set_status(ErrorKind::NotFound);
            let shown: String = id.chars().take(128).collect();
            RequestError::new(Some(id.to_string()), ErrorKind::NotFound, format!("{} `{shown}` not found", kind.noun()))
        };
        let request = match engine.requests().agent_request(Some(kind), id).await {
            Ok(r) => r,
            Err(EngineError::NotFound(_)) => return Err(not_found()),
            Err(e) => return Err(plain_error(id, e)),
        };
        match caller.role_in(&request.project) {
            None => Err(not_found()),
            Some(role) if role < Role::Approver => {
                set_status(ErrorKind::Forbidden);
                Err(RequestError::new(
                    Some(id.to_string()),
                    ErrorKind::Forbidden,
                    format!(
                        "Deciding needs the approver role in project `{}`; you are {}.",
                        request.project,
                        role.as_str()
                    ),
                ))
            }
            Some(_) => Ok((engine, caller.actor)),
        }
    }

    /// An engine error as the card shows it, answered with the REST API's
    /// status codes.
    fn plain_error(id: &str, err: EngineError) -> RequestError {
        let error = super::super::ssr::classify(err, "deciding an agent request");
        set_status(error.kind);
        RequestError::new(Some(id.to_string()), error.kind, error.message)
    }

    /// [`plain_error`], and for a request decided first (a conflict), the
    /// request as it now stands, so the card shows that outcome.
    pub async fn to_request_error(engine: &Engine, kind: RequestKind, id: &str, err: EngineError) -> RequestError {
        let conflict = matches!(err, EngineError::Conflict(_));
        let mut error = plain_error(id, err);
        if conflict {
            if let Ok(current) = engine.requests().agent_request(Some(kind), id).await {
                if current.status != RequestStatus::Pending {
                    if let Some(d) = &current.decision {
                        error.message = format!(
                            "Someone decided first: {} by {} at {} UTC.",
                            d.outcome,
                            d.decided_by,
                            crate::format::time(&d.decided_at)
                        );
                    }
                    error.kind = ErrorKind::AlreadyDecided;
                    error.won = Some(Box::new(current));
                }
            }
        }
        error
    }

    /// 400/403/404/409/500 instead of the default 500, for the hydrated
    /// page's calls (a plain form post keeps its redirect back).
    pub fn set_status(kind: ErrorKind) {
        super::super::ssr::set_status(kind.status());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_as_time_and_id() {
        assert_eq!(parse_cursor("1700000000000_apr_01ab"), Some((1_700_000_000_000, "apr_01ab".into())));
        assert_eq!(parse_cursor("-5_q_x"), Some((-5, "q_x".into())));
        assert_eq!(parse_cursor("12_run_1"), None);
        assert_eq!(parse_cursor("x_apr_1"), None);
        assert_eq!(parse_cursor("nothing"), None);
    }

    #[test]
    fn request_errors_round_trip_through_the_json_encoding() {
        use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};

        let err = RequestError::new(Some("apr_1".into()), ErrorKind::Invalid, "bad");
        let back = RequestError::de(err.ser());
        assert_eq!(back, err);
        assert!(back.is_about("apr_1") && !back.is_about("q_1"));
        let transport = RequestError::from_server_fn_error(ServerFnErrorErr::Request("down".into()));
        assert_eq!(transport.kind, ErrorKind::Internal);
        assert_eq!(transport.about, None);
    }
}
