//! Approval types: which calls need a person's decision, and the decisions.
//!
//! A run's [`ApprovalPolicy`] says which tools need approval beyond those
//! whose definition requires it; an [`ApprovalDecision`] is the audited
//! record of who decided what, with the original and final arguments.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits;

/// Which tools need approval in a run: `"all"` or `{"tools": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalPolicy {
    /// Tools beyond those whose definition requires approval; none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ApprovalTools>,
    /// Undecided calls are rejected this many seconds after they were requested.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::approval_timeout))]
    pub timeout_s: Option<u64>,
}

/// The tools an [`ApprovalPolicy`] covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApprovalTools {
    /// `"all"`: every tool call.
    All(AllTools),
    List(Vec<String>),
}

/// The literal string `"all"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum AllTools {
    #[default]
    All,
}

/// What a request or an agent asks for: `"all"` (every tool call), or a
/// policy object. Kept as written, so an agent shows back what was saved;
/// [`ApprovalRequest::policy`] is what a run applies. Anything else is
/// refused while the body is read, with the reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ApprovalRequest {
    All(AllTools),
    Policy(ApprovalPolicy),
}

impl ApprovalRequest {
    /// `"all"`.
    pub fn all() -> ApprovalRequest {
        ApprovalRequest::All(AllTools::All)
    }

    /// `{"tools": [...]}` of the given tools.
    pub fn tools<S: Into<String>>(tools: impl IntoIterator<Item = S>) -> ApprovalRequest {
        let tools = tools.into_iter().map(Into::into).collect();
        ApprovalRequest::Policy(ApprovalPolicy { tools: Some(ApprovalTools::List(tools)), timeout_s: None })
    }

    /// `{"timeout_s": N}` only: no tools beyond those that require approval.
    pub fn timeout_s(secs: u64) -> ApprovalRequest {
        ApprovalRequest::Policy(ApprovalPolicy { tools: None, timeout_s: Some(secs) })
    }

    /// The same, with undecided calls rejected after `secs`.
    pub fn with_timeout_s(self, secs: u64) -> ApprovalRequest {
        ApprovalRequest::Policy(ApprovalPolicy { timeout_s: Some(secs), ..self.policy() })
    }

    /// The policy a run applies.
    pub fn policy(&self) -> ApprovalPolicy {
        match self {
            ApprovalRequest::All(_) => {
                ApprovalPolicy { tools: Some(ApprovalTools::All(AllTools::All)), timeout_s: None }
            }
            ApprovalRequest::Policy(policy) => policy.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for ApprovalRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::String(s) if s == "all" => Ok(ApprovalRequest::All(AllTools::All)),
            v @ Value::Object(_) => serde_json::from_value(v)
                .map(ApprovalRequest::Policy)
                .map_err(|e| D::Error::custom(format!("approval: {e}"))),
            _ => Err(D::Error::custom("approval must be \"all\" or an object like {\"tools\": [\"send_email\"]}")),
        }
    }
}

impl ApprovalPolicy {
    /// Whether `tool` needs approval under this policy (`by_default`: its definition says so).
    pub fn covers(&self, tool: &str, by_default: bool) -> bool {
        by_default
            || match &self.tools {
                None => false,
                Some(ApprovalTools::All(_)) => true,
                Some(ApprovalTools::List(list)) => list.iter().any(|t| t == tool),
            }
    }

    /// Checks `timeout_s` (1 to [`limits::MAX_APPROVAL_TIMEOUT_S`]) and the
    /// length of the tool list, so a deadline can always be computed.
    pub fn check_bounds(&self) -> Result<(), String> {
        if let Some(t) = self.timeout_s {
            if !(1..=limits::MAX_APPROVAL_TIMEOUT_S).contains(&t) {
                return Err(format!(
                    "approval.timeout_s must be between 1 and {} seconds (30 days), not {t}",
                    limits::MAX_APPROVAL_TIMEOUT_S
                ));
            }
        }
        limits::check_tool_list("approval.tools", self.listed_tools())
    }

    pub fn listed_tools(&self) -> &[String] {
        match &self.tools {
            Some(ApprovalTools::List(list)) => list,
            _ => &[],
        }
    }
}

/// Approved or rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Decision {
    Approved,
    Rejected,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }
}

/// The audited record of one decision on one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalDecision {
    pub decision: Decision,
    /// The name of who decided: a user's or an API key's name, or `runlens`
    /// for a timeout (decisions stored before identity existed say `web` or `api`).
    pub decided_by: String,
    /// Who decided, by id: `user:<id>`, `key:<id>` or `system`.
    #[serde(default)]
    pub decided_by_id: Option<String>,
    pub decided_at: DateTime<Utc>,
    /// Also applies to this tool for the rest of the run.
    pub always: bool,
    pub original_arguments: Value,
    /// Set when the person edited the arguments before approving.
    pub edited_arguments: Option<Value>,
    /// The approval comment or the rejection reason (the model sees a reason).
    pub comment: Option<String>,
}

/// A decision on one tool call, with the call it was about (the audit view
/// of the store's decisions, the Decided tab of the approvals page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecidedCall {
    pub run_id: String,
    pub run_name: String,
    pub call_id: String,
    pub step_index: u32,
    pub tool_name: String,
    #[serde(flatten)]
    pub decision: ApprovalDecision,
}

impl DecidedCall {
    /// The cursor of the next page after this one (newest first):
    /// `<decided_at ms>_<run id>/<call id>` (a run id has no `/`).
    pub fn cursor(&self) -> String {
        format!("{}_{}/{}", self.decision.decided_at.timestamp_millis(), self.run_id, self.call_id)
    }
}

/// A decision as asked for by a client.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecisionRequest {
    pub always: bool,
    /// Approve only: replaces the arguments (validated against the tool's schema).
    pub arguments: Option<Value>,
    /// Approve only: a note kept in the audit record.
    pub comment: Option<String>,
    /// Reject only: why; the model receives it.
    pub reason: Option<String>,
}

impl DecisionRequest {
    /// Checks the sizes of the comment, the reason and the edited arguments
    /// (see [`limits`]); the engine checks the arguments against the tool.
    pub fn check_bounds(&self) -> Result<(), String> {
        for (field, text) in [("comment", &self.comment), ("reason", &self.reason)] {
            if let Some(text) = text {
                limits::check_chars(field, text, limits::MAX_DECISION_TEXT_CHARS)?;
            }
        }
        if let Some(args) = &self.arguments {
            limits::check_json("arguments", args, limits::MAX_DECISION_ARGUMENTS_BYTES)?;
        }
        Ok(())
    }
}

/// What lets a call that needs approval run: written only with a decision
/// by an approver of the run's project, read only by the runner's gate.
/// Never copied: a fork, replay, import or child run has none until a
/// person decides in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Grant {
    pub run_id: String,
    /// The call the decision was made on.
    pub call_id: String,
    pub tool_name: String,
    pub scope: GrantScope,
    /// The arguments approved (a `call` grant runs that call with exactly these).
    pub arguments: Value,
    /// Who decided, by id (`user:<id>` or `key:<id>`).
    pub grantor_id: String,
    pub grantor_name: String,
    /// The grantor's role in the run's project when deciding.
    pub grantor_role: super::Role,
    pub granted_at: DateTime<Utc>,
    /// When a `run` grant stopped applying (a follow-up continued the conversation).
    pub ended_at: Option<DateTime<Utc>>,
}

/// What a [`Grant`] covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum GrantScope {
    /// The decided call, with its approved arguments.
    Call,
    /// "Always": every call of the tool in this run, until a follow-up.
    Run,
}

impl GrantScope {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Call => "call",
            GrantScope::Run => "run",
        }
    }

    pub fn parse(text: &str) -> Option<GrantScope> {
        match text {
            "call" => Some(GrantScope::Call),
            "run" => Some(GrantScope::Run),
            _ => None,
        }
    }
}

/// A call waiting for a decision, as listed on a paused run and in the inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Interruption {
    pub run_id: String,
    pub run_name: String,
    pub call_id: String,
    pub step_index: u32,
    pub tool_name: String,
    pub arguments: Value,
    /// What the model said before the call, if anything.
    pub reasoning: Option<String>,
    pub requested_at: DateTime<Utc>,
    /// When it is rejected automatically, if the run has a timeout.
    pub deadline: Option<DateTime<Utc>>,
    /// For a call of a child run: the runs above it, root first (each
    /// waiting on the one after it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<RunRef>,
}

/// A run named in a chain of runs (see [`Interruption::chain`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunRef {
    pub id: String,
    pub name: String,
    /// The agent in charge of it, if it runs a saved agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_parse_from_the_documented_forms() {
        let parse = |v: Value| serde_json::from_value::<ApprovalRequest>(v).map(|r| r.policy());
        let all = parse(json!("all")).unwrap();
        assert!(all.covers("calculator", false));
        let listed = parse(json!({"tools": ["calculator"], "timeout_s": 30})).unwrap();
        assert!(listed.covers("calculator", false) && !listed.covers("wait", false));
        assert_eq!(listed.timeout_s, Some(30));
        let nested_all = parse(json!({"tools": "all"})).unwrap();
        assert!(nested_all.covers("wait", false));
        let none = ApprovalPolicy::default();
        assert!(!none.covers("wait", false) && none.covers("send_email", true));
        assert!(parse(json!(5)).unwrap_err().to_string().starts_with("approval must be \"all\" or an object"));
        assert!(parse(json!({"tools": "some"})).unwrap_err().to_string().starts_with("approval: "));
        assert!(parse(json!({"tool": ["x"]})).is_err(), "unknown fields are refused");
        assert_eq!(serde_json::to_value(ApprovalPolicy::default()).unwrap(), json!({"timeout_s": null}));
        // Written back as given: "all" stays "all", an object stays an object.
        for v in [json!("all"), json!({"tools": ["calculator"], "timeout_s": 30})] {
            let request: ApprovalRequest = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(&request).unwrap(), v);
        }
        let request: Option<ApprovalRequest> = serde_json::from_value(json!(null)).unwrap();
        assert_eq!(request, None);
    }
}
