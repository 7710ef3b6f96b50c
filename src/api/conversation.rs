//! Server functions for conversation control on the trace page: follow up on
//! a finished run, edit an earlier human message (which forks a new run and
//! navigates to it), and read a run's family for the branch tree.
//!
//! Follow-ups and edits fail with a [`ConversationError`], so an edit error
//! lands in the editor of the message it is about (`about`: the message id;
//! see [`super::action_error`]).

use leptos::prelude::*;
use runlens_engine::model::FamilyMember;

use super::action_error::ActionError;
#[cfg(any(feature = "ssr", test))]
use super::action_error::ErrorKind;

/// A follow-up or an edit that could not be applied: about the edited
/// message (`None` for follow-ups; a transport failure, about no message,
/// shows in every editor).
pub type ConversationError = ActionError<String>;

/// Parses the optional "max turns" override of the follow-up box. Blank
/// means "keep the run's setting".
pub fn parse_max_turns(text: Option<&str>) -> Result<Option<u32>, String> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t.parse::<u32>().map(Some).map_err(|_| format!("Max turns must be a whole number, not {t:?}.")),
    }
}

/// Appends a human message to a `done` run and runs it again. The page
/// refetches the trace afterwards; without JavaScript the form post is
/// redirected back to the page.
#[server]
pub async fn send_follow_up(
    run_id: String,
    message: String,
    max_turns: Option<String>,
) -> Result<(), ConversationError> {
    use runlens_engine::model::FollowUp;

    let (engine, _) = ssr::operator(&run_id, None).await?;
    let max_turns = parse_max_turns(max_turns.as_deref()).map_err(|msg| {
        ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ConversationError::new(None, ErrorKind::Invalid, msg)
    })?;
    let req = FollowUp { message, max_turns, ..FollowUp::default() };
    engine.conversation().follow_up(&run_id, req).await.map_err(|e| ssr::to_error(None, e))?;
    Ok(())
}

/// Forks the run at a human message with `text` in its place, then
/// redirects (with or without JavaScript) to the fork's trace. Returns the
/// fork's id.
#[server]
pub async fn edit_message(run_id: String, message_id: String, text: String) -> Result<String, ConversationError> {
    use crate::format::url_encode;

    let (engine, caller) = ssr::operator(&run_id, Some(&message_id)).await?;
    let fork = engine
        .conversation()
        .edit_message_by(&run_id, &message_id, &text, Some(&caller.actor))
        .await
        .map_err(|e| ssr::to_error(Some(&message_id), e))?;
    leptos_axum::redirect(&format!("/runs/{}", url_encode(&fork.id)));
    Ok(fork.id)
}

/// Every run of the run's family (ancestors and forks, oldest first); empty
/// when there is no such run.
#[server]
pub async fn get_family(run_id: String) -> Result<Vec<FamilyMember>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, _)) = super::ssr::run_or_none(&run_id, super::ssr::Role::Viewer).await? else {
        return Ok(Vec::new());
    };
    match engine.conversation().family(&run_id).await {
        Ok(mut family) => {
            for member in &mut family.runs {
                super::preview::cut_text(&mut member.name);
                if let Some(text) = member.forked_message.as_mut() {
                    super::preview::cut_text(text);
                }
            }
            Ok(family.runs)
        }
        Err(EngineError::NotFound(_)) => Ok(Vec::new()),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

#[cfg(feature = "ssr")]
mod ssr {
    use runlens_engine::{Engine, EngineError};

    use super::{ConversationError, ErrorKind};

    /// An error about message `message_id` (`None`: a follow-up).
    fn error(message_id: Option<&str>, kind: ErrorKind, message: impl Into<String>) -> ConversationError {
        ConversationError::new(message_id.map(str::to_string), kind, message)
    }

    pub fn engine(message_id: Option<&str>) -> Result<Engine, ConversationError> {
        super::super::ssr::engine().map_err(|e| error(message_id, ErrorKind::Internal, e.to_string()))
    }

    /// The engine and the caller, once the caller is an operator of run
    /// `run_id`'s project (another project's run is not found).
    pub async fn operator(run_id: &str, message_id: Option<&str>) -> Result<(Engine, Caller), ConversationError> {
        let engine = engine(message_id)?;
        let refused = |e: crate::server::error::AppError| {
            let (status, message) = e.status_and_message();
            set_status(status);
            error(message_id, ErrorKind::of_status(status), message)
        };
        let caller = super::super::ssr::caller().map_err(|e| error(message_id, ErrorKind::Forbidden, e.to_string()))?;
        caller.run(&engine, run_id, Role::Operator).await.map_err(refused)?;
        Ok((engine, caller))
    }

    use super::super::ssr::{Caller, Role};

    /// Engine errors as the form shows them, answered with the REST API's
    /// status codes (see `super::super::ssr::classify`).
    pub fn to_error(message_id: Option<&str>, err: EngineError) -> ConversationError {
        let classified = super::super::ssr::classify(err, "a conversation server function");
        set_status(classified.status());
        error(message_id, classified.kind, classified.message)
    }

    pub use super::super::ssr::set_status;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_turns_override_parses_or_explains() {
        assert_eq!(parse_max_turns(None), Ok(None));
        assert_eq!(parse_max_turns(Some("  ")), Ok(None));
        assert_eq!(parse_max_turns(Some(" 7 ")), Ok(Some(7)));
        let err = parse_max_turns(Some("ten")).unwrap_err();
        assert!(err.contains("whole number"), "{err}");
    }

    #[test]
    fn errors_find_their_editor_and_round_trip() {
        use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};

        let err = ConversationError::new(Some("m1".into()), ErrorKind::Invalid, "bad");
        assert!(err.is_for("m1") && !err.is_for("m2"));
        assert_eq!(ConversationError::de(err.ser()), err);
        let transport = ConversationError::from_server_fn_error(ServerFnErrorErr::Request("down".into()));
        assert!(transport.is_for("anything"));
    }
}
