//! Why a tool call failed. Nothing here fails a run: the error's text goes
//! back to the model as the call's result, and is what the call records
//! (`ToolCall::error` stays a string in the stored JSON).

/// Why a tool call failed or did not run. `Display` gives the text the
/// model sees.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The model named a tool this server does not have.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The model named a tool the run does not have.
    #[error("unknown tool `{name}`; the tools available are: {}", available.join(", "))]
    NotAvailable { name: String, available: Vec<String> },
    /// The run has the tool, but this turn did not offer it (the run has
    /// more tools than one turn offers): the model is told what it was.
    #[error("`{name}` was not offered in this turn; the tools offered are: {}", offered.join(", "))]
    NotOffered { name: String, offered: Vec<String> },
    /// The model's argument text is not JSON.
    #[error("the tool arguments are not valid JSON: {0}")]
    MalformedArguments(String),
    /// The arguments do not match the tool's JSON Schema: every problem,
    /// each with where it is.
    #[error("invalid arguments for `{tool}`: {}", problems.join("; "))]
    InvalidArguments { tool: String, problems: Vec<String> },
    /// The tool ran and failed, in its own words.
    #[error("{0}")]
    Failed(String),
    /// The run was cancelled before the call finished; the text says what
    /// did not happen (see [`ToolError::cancelled`] for the usual one).
    #[error("{0}")]
    Cancelled(String),
    /// The tool panicked.
    #[error("the tool panicked: {0}")]
    Panicked(String),
    /// A server restart interrupted a call of this tool, which has side
    /// effects: it was not run again.
    #[error(
        "the call was interrupted by a server restart before it finished; `{0}` has side effects, so it was not \
         run again"
    )]
    Interrupted(String),
    /// The call's start could not be recorded, so it did not run (a call
    /// with side effects runs only once it is on record).
    #[error("the call was not run: its start could not be recorded ({0})")]
    NotRecorded(String),
}

impl ToolError {
    /// The run was cancelled while the call was pending or running.
    pub fn cancelled() -> Self {
        Self::Cancelled("cancelled: the run was cancelled".into())
    }
}

/// A tool's own message is a failure (so `?` works on `Result<_, String>`).
impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_what_the_model_is_told() {
        let unknown = ToolError::NotAvailable { name: "teleport".into(), available: vec!["a".into(), "b".into()] };
        assert_eq!(unknown.to_string(), "unknown tool `teleport`; the tools available are: a, b");
        let invalid = ToolError::InvalidArguments { tool: "wait".into(), problems: vec!["p1".into(), "/x: p2".into()] };
        assert_eq!(invalid.to_string(), "invalid arguments for `wait`: p1; /x: p2");
        assert_eq!(ToolError::cancelled().to_string(), "cancelled: the run was cancelled");
        assert_eq!(ToolError::Panicked("kaboom".into()).to_string(), "the tool panicked: kaboom");
        assert_eq!(ToolError::from("division by zero").to_string(), "division by zero");
        assert!(ToolError::Interrupted("send_email".into()).to_string().ends_with("so it was not run again"));
    }
}
