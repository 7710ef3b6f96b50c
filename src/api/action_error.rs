//! The one error type of the page actions whose failure shows in place: a
//! decision on a tool call or on another agent's request, a follow-up, an
//! edit of a message, a fork from a step, a replay.
//!
//! An [`ActionError`] names what the action was about (`about`: the call,
//! request or message id, the step index), so the card, editor or panel it
//! belongs to shows it, and, when someone else decided first, what won. It
//! travels as JSON both ways: as the response of a hydrated form submit,
//! and (without JavaScript) in the `__err` query parameter the
//! server-function handler adds to the redirect back.

use std::borrow::Borrow;
use std::fmt;

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// What kind of problem an action (or an engine error, for a client) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// Bad input (400): edited arguments that are not JSON or fail the
    /// tool's schema, a blank message, a bad fork.
    Invalid,
    /// No such run, call, request, message, blob or price (404).
    NotFound,
    /// The run is in a state where this cannot be done (409): not paused,
    /// finished, cancelled.
    Conflict,
    /// A decision on what was decided already, or needs none (409); `won`
    /// says what won.
    AlreadyDecided,
    /// The caller's role does not allow it, or a used setup link (403).
    Forbidden,
    /// Anything else, transport errors included (500); the client gets no
    /// details.
    Internal,
}

/// An action that could not be applied, with a message for the user.
///
/// `T` identifies what it was about (a call, request or message id, a step
/// index); `W` is what won a race, for [`ErrorKind::AlreadyDecided`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionError<T, W = ()> {
    /// What the action was about; `None` for transport failures.
    pub about: Option<T>,
    pub kind: ErrorKind,
    pub message: String,
    /// For [`ErrorKind::AlreadyDecided`]: what won (the decision, the
    /// request as decided).
    pub won: Option<Box<W>>,
}

impl<T, W> ActionError<T, W> {
    pub fn new(about: Option<T>, kind: ErrorKind, message: impl Into<String>) -> Self {
        ActionError { about, kind, message: message.into(), won: None }
    }

    /// Whether this error is about `what` (a transport failure is about nothing).
    pub fn is_about<Q: PartialEq + ?Sized>(&self, what: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.about.as_ref().is_some_and(|a| a.borrow() == what)
    }

    /// Whether the form of `what` shows this error: when it is about
    /// `what`, or about nothing (a transport failure shows everywhere).
    pub fn is_for<Q: PartialEq + ?Sized>(&self, what: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.about.as_ref().is_none_or(|a| a.borrow() == what)
    }
}

impl<T, W> fmt::Display for ActionError<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<T, W> FromServerFnError for ActionError<T, W>
where
    T: fmt::Debug + Serialize + DeserializeOwned + 'static,
    W: fmt::Debug + Serialize + DeserializeOwned + 'static,
{
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        ActionError::new(None, ErrorKind::Internal, value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_finds_its_form_and_round_trips() {
        let err: ActionError<String> = ActionError::new(Some("m1".into()), ErrorKind::Invalid, "bad");
        assert!(err.is_about("m1") && !err.is_about("m2"));
        assert!(err.is_for("m1") && !err.is_for("m2"));
        assert_eq!(ActionError::de(err.ser()), err);
        let transport: ActionError<u32> = ActionError::from_server_fn_error(ServerFnErrorErr::Request("down".into()));
        assert_eq!(transport.kind, ErrorKind::Internal);
        assert!(transport.is_for(&3) && !transport.is_about(&3));
    }
}
