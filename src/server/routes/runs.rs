//! Runs: create, list, read and cancel them; the child runs a run's agent
//! calls started, and the usage of its whole tree; the models a run can use
//! (its tools: `super::tools`) and what runs sent (the outbox).
//!
//! Reads answer each run with its `cost_usd` at today's prices ([`PricedRun`]).

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::cost::Pricing;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET, MAX_QUERY_TEXT_CHARS, MAX_SESSION_ID_CHARS};
use runlens_engine::model::{
    CreateRun, Email, OutcomeFilter, Run, RunFilter, RunPage, RunStatus, SearchMatch, TreeUsage,
};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded, Flag};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{offset_or_cursor, ListOffset};
use super::ProjectHeader;
use super::RunPath;
use runlens_engine::model::{Role, ScoreSummary};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_run, list_runs))
        .routes(routes!(get_run))
        .routes(routes!(cancel))
        .routes(routes!(children))
        .routes(routes!(tree))
        .routes(routes!(models))
        .routes(routes!(outbox))
}

/// A run with what it cost at today's prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricedRun {
    #[serde(flatten)]
    pub run: Run,
    /// The cost at today's prices (USD); null when the model has no price.
    pub cost_usd: Option<f64>,
}

impl PricedRun {
    pub fn new(run: Run, pricing: &Pricing) -> Self {
        let cost_usd = pricing.run_cost_usd(&run);
        PricedRun { run, cost_usd }
    }
}

/// One page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<PricedRun>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
    /// With `q`: where each run of the page matched, in the page's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<SearchMatch>,
    /// The scores of the page's runs, by run id and then per score name (count, mean of numbers and yes/no,
    /// yes and no counts; `labels` empty: `GET /api/runs/{id}/scores` has them); runs without scores are absent.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub scores: BTreeMap<String, Vec<ScoreSummary>>,
}

impl RunList {
    pub fn new(page: RunPage, pricing: &Pricing, scores: BTreeMap<String, Vec<ScoreSummary>>) -> Self {
        let runs = page.runs.into_iter().map(|run| PricedRun::new(run, pricing)).collect();
        RunList { runs, next_cursor: page.next_cursor, matches: page.matches, scores }
    }
}

/// Create a run; it starts at once.
///
/// With `agent_id` (a saved agent of the project), the run starts from the agent's current version, or from
/// `agent_version`; any other field given here overrides the agent's (the run lists them in `agent_overrides`),
/// and `input` must match the agent's `input_schema` (400 naming the field). `input_items` seed the transcript
/// before `initial_prompt` (every agent invocation among them answered by an invocation-result item after it);
/// `metadata` is any JSON object, shown and searchable; `reasoning_traces` asks the model for a short reason
/// with each tool call.
///
/// A client-supplied `id` that exists already returns that run (200) instead of creating one (201); an id in
/// use outside the project is a 409 that says nothing of whether or where a run has it. A run id has no `~`:
/// ids with one are the server's (AG-UI threads, ingested traces).
#[utoipa::path(
    post,
    path = "/api/runs",
    tag = "runs",
    params(ProjectHeader),
    request_body(content = CreateRun, examples(
        ("prompt" = (summary = "A prompt with tools", value = json!({
            "initial_prompt": "What is 2+2?", "tools": ["calculator"], "max_turns": 5,
            "metadata": {"ticket": "T-7"}
        }))),
        ("agent" = (summary = "A saved agent's version, with input items", value = json!({
            "agent_id": "math-agent", "agent_version": 2, "initial_prompt": "And times 3?",
            "input_items": [
                {"type": "human", "data": {"message": "What is 2+2?"}},
                {"type": "agent", "data": {"message": "4"}}
            ],
            "reasoning_traces": true
        }))),
    )),
    responses(
        (status = 200, description = "A run with this id existed already: that run", body = Run),
        (status = 201, description = "Created", body = Run),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn create_run(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<CreateRun>,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Operator)?;
    let (run, created) = engine.runs().create_run_in(req, project, Some(&caller.actor)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(run)).into_response())
}

/// A run status to filter by.
#[derive(Clone, Copy, Debug)]
pub struct StatusFilter(pub RunStatus);

impl std::str::FromStr for StatusFilter {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        RunStatus::parse(text).map(StatusFilter).ok_or_else(|| {
            let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("must be one of {}, not `{text}`", all.join(", "))
        })
    }
}

/// An `outcome` filter, read from its name.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeParam(pub OutcomeFilter);

impl std::str::FromStr for OutcomeParam {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        OutcomeFilter::parse(text).map(OutcomeParam).ok_or_else(|| {
            let all: Vec<&str> = OutcomeFilter::ALL.iter().map(|o| o.as_str()).collect();
            format!("must be one of {}, not `{text}`", all.join(", "))
        })
    }
}

impl PartialSchema for OutcomeParam {
    fn schema() -> RefOr<Schema> {
        let mut names: Vec<&str> = OutcomeFilter::ALL.iter().map(|o| o.as_str()).collect();
        names.push("");
        RefOr::T(raw(json!({ "type": "string", "enum": names })))
    }
}

/// The run list's filters and page; an empty value is no filter. An
/// unknown parameter is a 400.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListRunsQuery {
    /// Only runs in this status.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<StatusFilter>, inline)]
    pub status: Option<StatusFilter>,
    /// Only runs of this agent.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TextFilter>, inline)]
    pub agent_id: Option<String>,
    /// Only runs with this tag, as `key:value`.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TagFilter>, inline)]
    pub tag: Option<String>,
    /// Words to search for in the runs' text: name, prompts and follow-ups, answers, tool calls' arguments and
    /// results, errors, summaries and metadata. A word is a run of letters and digits, any case; every word must
    /// appear, whole; the first 16 words are searched (a q with none finds nothing). The page is then in order of the runs' creation as stored, newest first, with `matches`; an
    /// `offset` passes over matching runs among the first 5,000 matching pieces (follow `next_cursor` beyond).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TextFilter>, inline)]
    pub q: Option<String>,
    /// Only runs whose metadata has this key with this value, as `key:value`
    /// (a string value, or the JSON text of a number or boolean).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<MetadataFilter>, inline)]
    pub metadata: Option<String>,
    /// Only the runs of this session (their `session_id`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<SessionFilter>, inline)]
    pub session_id: Option<String>,
    /// Only the runs that served this end user (their `end_user`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<SessionFilter>, inline)]
    pub user: Option<String>,
    /// `true`: child runs (started by agent calls) too; by default only root runs.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Flag>, inline)]
    pub all: Option<Flag>,
    /// Only runs of this outcome: `clean` (done, no rejected or failed call, not stopped by `max_turns`),
    /// `rejected` (a call was rejected), `tool_error` (a call failed), `issues` (finished and not clean).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<OutcomeParam>, inline)]
    pub outcome: Option<OutcomeParam>,
    /// Only runs with a score named NAME: `NAME` (any value), `NAME=yes`, `NAME=no`, `NAME=LABEL` (a label
    /// value or a judge's label), `NAME=N`, or `NAME<N`, `NAME<=N`, `NAME>N`, `NAME>=N` (numbers; yes = 1).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ScoreFilterText>, inline)]
    pub score: Option<String>,
    /// Runs in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<RunsPageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CursorText>, inline)]
    pub cursor: Option<String>,
    /// Runs to skip before the page (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

impl ListRunsQuery {
    /// The store's filter for `project`.
    pub fn into_filter(self, project: &str) -> RunFilter {
        RunFilter {
            status: self.status.map(|s| s.0),
            agent_id: self.agent_id,
            tag: self.tag,
            q: self.q,
            limit: self.limit.map(Bounded::as_u32),
            cursor: self.cursor,
            project: Some(project.to_owned()),
            all: self.all.map(|f| f.0),
            outcome: self.outcome.map(|o| o.0),
            metadata: self.metadata,
            session_id: self.session_id,
            user: self.user,
            score: self.score,
            offset: self.offset.map(Bounded::as_u32),
        }
    }
}

crate::bounded_param!(
    /// Runs in a page.
    RunsPageSize = 1, MAX_LIST_LIMIT.into()
);

impl PartialSchema for StatusFilter {
    fn schema() -> RefOr<Schema> {
        let mut names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        names.push("");
        RefOr::T(raw(json!({ "type": "string", "enum": names })))
    }
}

/// A text filter's schema.
struct TextFilter;

impl PartialSchema for TextFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS })))
    }
}

/// The score filter's schema: a score's name, then optionally `=`, `<`,
/// `<=`, `>` or `>=` and a value (what the engine checks), or empty.
struct ScoreFilterText;

impl PartialSchema for ScoreFilterText {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS,
            "pattern": "^$|^[A-Za-z0-9_.:-]([A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?( *(=|<=?|>=?) *[^ ].*)?$"
        })))
    }
}

/// The tag filter's schema: `key:value`, or empty.
struct TagFilter;

impl PartialSchema for TagFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|:" })))
    }
}

/// The metadata filter's schema: `key:value`, the key 1 to 64 letters,
/// digits, `_`, `-` or `.` (what the engine checks), or empty.
struct MetadataFilter;

impl PartialSchema for MetadataFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|^[A-Za-z0-9_.-]{1,64}:"
        })))
    }
}

/// The session and end-user filters' schema: an id of at most 128
/// characters, or empty.
struct SessionFilter;

impl PartialSchema for SessionFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_SESSION_ID_CHARS })))
    }
}

/// The cursor's schema: what the store's cursors look like (`<created_at ms>_<id>`, or a search's
/// `t<number>`), or empty.
struct CursorText;

impl PartialSchema for CursorText {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(
            json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|^[-+]?[0-9]{1,18}_|^t[0-9]{1,11}$" }),
        ))
    }
}

/// List runs, newest first, in keyset pages (or by `offset`).
///
/// Root runs only, each with its `child_count`, unless `all=true`.
#[utoipa::path(
    get,
    path = "/api/runs",
    tag = "runs",
    params(ProjectHeader, ListRunsQuery),
    responses(
        (status = 200, description = "OK", body = RunList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_runs(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ListRunsQuery>,
) -> Result<Json<RunList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let filter = q.into_filter(project);
    let (page, pricing) = tokio::try_join!(engine.runs().list_runs(&filter), engine.traces().pricing(project))?;
    let ids: Vec<String> = page.runs.iter().map(|r| r.id.clone()).collect();
    let scores = engine.scores().summaries(project, &ids).await?;
    Ok(Json(RunList::new(page, &pricing, scores)))
}

/// One run, with `cost_usd`, its `output` once finished, and, while paused, its `interruptions`.
///
/// `output` is one of three shapes: `structured` (a result matching `result_schema`), `last_message` (the
/// model's final message) or `error` (failed or cancelled). A child run names its parent (`parent_run_id`,
/// `parent_call_id`), its tree's `root_run_id` and its `depth`; a run of a saved agent its `agent_version`,
/// the `agent_overrides` of its request and, after handoffs, its `current_agent`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = PricedRun),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn get_run(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<PricedRun>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let (run, pricing) = tokio::try_join!(engine.runs().get_run(&id), engine.traces().pricing(&head.project))?;
    Ok(Json(PricedRun::new(run, &pricing)))
}

/// Cancel a run (a wait in flight is interrupted); 409 once it has finished.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/cancel",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "The cancelled run", body = Run),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn cancel(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<Run>, AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    Ok(Json(engine.runs().cancel_by(&id, Some(&caller.actor)).await?))
}

/// A run's child runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChildList {
    /// Oldest first, each with its `parent_call_id` (the agent call that started it).
    pub runs: Vec<PricedRun>,
}

/// The child runs of a run: those its agent calls started, oldest first, each with `cost_usd`.
///
/// A run has at most as many as the server's fan-out limit allows, so they come in one answer. Their own
/// children are theirs to list.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/children",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = ChildList),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn children(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<ChildList>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let (runs, pricing) = tokio::try_join!(engine.agents().children(&id), engine.traces().pricing(&head.project))?;
    Ok(Json(ChildList { runs: runs.into_iter().map(|run| PricedRun::new(run, &pricing)).collect() }))
}

/// Usage and cost of a run and every run below it (its children, theirs, and so on), at today's prices.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/tree",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = TreeUsage),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn tree(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<TreeUsage>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.agents().tree_usage(&id).await?))
}

/// The configured models.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<String>,
    /// The model a run gets when it names none.
    pub default: String,
}

/// The model a run gets when it names none.
pub const DEFAULT_MODEL: &str = "builtin";

/// The configured models.
#[utoipa::path(
    get,
    path = "/api/models",
    tag = "catalog",
    responses((status = 200, description = "OK", body = ModelList), (status = 500, response = Internal))
)]
async fn models(State(engine): State<Engine>, _caller: Caller) -> Json<ModelList> {
    Json(ModelList { models: engine.models(), default: DEFAULT_MODEL.to_owned() })
}

/// Emails written by the `send_email` tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmailList {
    pub emails: Vec<Email>,
}

/// Emails in the outbox listing, at most.
const OUTBOX_LIMIT: u32 = 100;

/// Emails sent by `send_email`, newest first (the latest 100).
#[utoipa::path(
    get,
    path = "/api/outbox",
    tag = "catalog",
    params(ProjectHeader),
    responses((status = 200, description = "OK", body = EmailList), (status = 500, response = Internal))
)]
async fn outbox(State(engine): State<Engine>, caller: Caller) -> Result<Json<EmailList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(EmailList { emails: engine.project_outbox(project, OUTBOX_LIMIT).await? }))
}
