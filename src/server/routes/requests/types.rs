//! The parameters and bodies of the agent-request routes: paths, the
//! long-poll's wait, list pages and their cursor, decision bodies, and the
//! stream's message schema.

use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{AgentRequest, RequestKind, MAX_WAIT_S};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::super::super::extract::{optional, Bounded};

/// The path of one request.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RequestPath {
    /// The request's id (`apr_…` for an approval request, `q_…` for a question).
    #[param(max_length = 128)]
    pub id: String,
}

crate::bounded_param!(
    /// Seconds to wait for a decision (0 to 30).
    WaitSeconds = 0, MAX_WAIT_S
);

/// How long a read may wait for the decision.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    /// Wait up to this many seconds (0 to 30) for the request to be decided; it answers as soon as it is, or
    /// then with `status: pending`. Absent: answers at once.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<WaitSeconds>, inline)]
    pub wait: Option<Bounded<0, MAX_WAIT_S>>,
}

/// Which requests: `pending` (the default, oldest first) or `decided` (newest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestState(pub bool);

impl std::str::FromStr for RequestState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "pending" => Ok(RequestState(true)),
            "decided" => Ok(RequestState(false)),
            other => Err(format!("must be `pending` or `decided`, not `{other}`")),
        }
    }
}

impl utoipa::PartialSchema for RequestState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let status = serde_json::json!({ "type": "string", "enum": ["pending", "decided", ""] });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(status))
    }
}

/// A page's cursor: the `next_cursor` of the previous page of the same list.
#[derive(Clone, Debug)]
pub struct RequestCursor(pub i64, pub String);

impl std::str::FromStr for RequestCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || "must be the `next_cursor` of a previous page".to_owned();
        if text.len() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        let (ms, id) = text.split_once('_').ok_or_else(bad)?;
        let ms: i64 = ms.parse().map_err(|_| bad())?;
        if RequestKind::of_id(id).is_none() {
            return Err(bad());
        }
        Ok(RequestCursor(ms, id.to_owned()))
    }
}

impl utoipa::PartialSchema for RequestCursor {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let cursor = serde_json::json!({
            "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|^[-+]?[0-9]{1,18}_(apr|q)_.+$"
        });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(cursor))
    }
}

crate::bounded_param!(
    /// Requests in a page.
    RequestsPageSize = 1, MAX_LIST_LIMIT.into()
);

/// A page of requests.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RequestsQuery {
    /// `pending` (the default): awaiting a person, oldest first; `decided`: newest decision first.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<RequestState>, inline)]
    pub status: Option<RequestState>,
    /// Requests in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<RequestsPageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page of the same list.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<RequestCursor>, inline)]
    pub cursor: Option<RequestCursor>,
}

/// An answer to a question.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    /// Free text, or one of the question's `choices` when it has them.
    #[schema(min_length = 1, max_length = 4000, pattern = "\\S")]
    pub answer: String,
}

/// An approval of an agent's request: optionally with edited arguments, a comment, or for the rest of its run.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApproveAgentRequest {
    /// Also approve this tool's later requests from the same agent run (its `run.external_id`, which it must have).
    pub always: bool,
    /// Replaces the arguments (a JSON object, at most 64 KiB).
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<serde_json::Value>,
    /// Kept in the audit record.
    #[schema(schema_with = runlens_engine::openapi::decision_text)]
    pub comment: Option<String>,
}

/// One message of a request's stream: `event: request`, `data:` the request as JSON.
pub struct RequestStreamMessage;

impl utoipa::PartialSchema for RequestStreamMessage {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let message = serde_json::json!({
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": ["request"]},
                "data": {"type": "string", "contentMediaType": "application/json",
                         "contentSchema": {"$ref": "#/components/schemas/AgentRequest"}},
            },
            "description": "One Server-Sent Events message of a request's stream: `event: request`, `data:` the \
                request as JSON. Comment lines (`:`) keep an idle stream open.",
        });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(message))
    }
}

impl ToSchema for RequestStreamMessage {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::Schema>)>) {
        schemas.push((AgentRequest::name().into_owned(), <AgentRequest as utoipa::PartialSchema>::schema()));
        AgentRequest::schemas(schemas);
    }
}
