//! Server functions of the agents pages: the project's saved agents, one
//! agent with its versions, runs and per-version stats, and the form that
//! creates an agent or saves its next version.
//!
//! Reading needs `viewer`; saving needs `operator` (like starting runs). An
//! agent of another project is not found, exactly like one that does not
//! exist. The form's fields arrive as text (a plain form post works without
//! JavaScript): [`spec_from_form`] turns them into an [`AgentSpec`], naming
//! the field at fault, and the engine checks the rest (unknown tools,
//! models, linked agents, taken names) with its own messages.

// `save_agent` takes one argument per form field (the server function's
// client side, generated for the browser, cannot carry an `allow` of its own).
#![allow(clippy::too_many_arguments)]

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{
    AgentDetail, AgentPage, AgentSpec, AgentVersion, ApprovalRequest, ApprovalTools, Role, RunPage, ToolInfo,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Agents one page of `/agents` lists.
pub const AGENT_PAGE: u32 = 50;
/// Agents offered as choices (sub-agents, handoffs, the playground, filters).
pub const AGENT_CHOICES: u32 = 200;
/// Versions listed on an agent's page.
pub const VERSION_PAGE: u32 = 50;
/// Runs listed on an agent's page (its latest, child runs included).
pub const AGENT_RUNS: u32 = 20;

/// An agent as a choice in a form: id, name and what it does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentChoice {
    pub id: String,
    pub name: String,
    pub description: String,
    pub version: u32,
}

/// One page of the project's agents, by name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentList {
    pub page: AgentPage,
    /// What the "New agent" form offers.
    pub options: AgentFormOptions,
}

/// What the agent form offers: models, registered tools, the project's
/// other agents, and the caller's role (saving needs `operator`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentFormOptions {
    pub models: Vec<String>,
    pub tools: Vec<ToolInfo>,
    pub agents: Vec<AgentChoice>,
    pub role: Option<Role>,
}

impl AgentFormOptions {
    pub fn may_edit(&self) -> bool {
        self.role.is_some_and(|r| r >= Role::Operator)
    }
}

/// Everything `/agents/:id` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentView {
    /// The agent at its current version, with stats per version.
    pub detail: AgentDetail,
    /// Its versions, newest first (at most [`VERSION_PAGE`]).
    pub versions: Vec<AgentVersion>,
    /// Its latest runs, child runs included.
    pub runs: RunPage,
    pub pricing: runlens_engine::cost::Pricing,
    pub options: AgentFormOptions,
    pub now: DateTime<Utc>,
}

/// The text of the agent form's fields, as submitted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentFormFields {
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    pub model: String,
    pub model_settings: String,
    pub tools: Vec<String>,
    /// `none`, `all` or `tools` (the listed `approval_tools`).
    pub approval: String,
    pub approval_tools: Vec<String>,
    pub approval_timeout_s: String,
    pub result_schema: String,
    pub input_schema: String,
    pub max_turns: String,
    pub agents: Vec<String>,
    pub handoffs: Vec<String>,
    pub reasoning_traces: bool,
    /// JSON: `{"runs": N, "depth": N, "turns": N, "tokens": N}`, any of them.
    pub tree_budget: String,
}

/// Parses a JSON text field; blank is `None`. The error names the field.
pub fn json_field(label: &str, text: &str) -> Result<Option<Value>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text).map(Some).map_err(|e| format!("{label} is not valid JSON: {e}."))
}

/// How the form shows an agent's approval policy: the mode, the listed
/// tools and the timeout (`"all"` and `{"tools": "all"}` are both "all").
pub fn approval_parts(approval: Option<&ApprovalRequest>) -> (&'static str, Vec<String>, Option<u64>) {
    let policy = approval.map(ApprovalRequest::policy).unwrap_or_default();
    match policy.tools {
        Some(ApprovalTools::All(_)) => ("all", Vec::new(), policy.timeout_s),
        Some(ApprovalTools::List(list)) if !list.is_empty() => ("tools", list, policy.timeout_s),
        _ => ("none", Vec::new(), policy.timeout_s),
    }
}

/// The spec the form describes; `Err` is a message naming the field.
pub fn spec_from_form(f: &AgentFormFields) -> Result<AgentSpec, String> {
    let text = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    let max_turns = match text(&f.max_turns) {
        Some(v) => Some(v.parse::<u32>().map_err(|_| format!("Max turns must be a whole number, not {v:?}."))?),
        None => None,
    };
    let timeout = match text(&f.approval_timeout_s) {
        Some(v) => Some(v.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            format!("The approval timeout must be a whole number of seconds (1 or more), not {v:?}.")
        })?),
        None => None,
    };
    let tools = match f.approval.as_str() {
        "" | "none" => None,
        "all" => Some(ApprovalRequest::all()),
        "tools" => {
            if f.approval_tools.is_empty() {
                return Err("Approval: choose the tools that need approval, or pick \"none\" or \"all\".".into());
            }
            Some(ApprovalRequest::tools(dedup(&f.approval_tools)))
        }
        other => return Err(format!("Approval must be none, all or listed tools, not {other:?}.")),
    };
    let approval = match (tools, timeout) {
        (tools, None) => tools,
        (Some(tools), Some(t)) => Some(tools.with_timeout_s(t)),
        (None, Some(t)) => Some(ApprovalRequest::timeout_s(t)),
    };
    Ok(AgentSpec {
        name: f.name.trim().to_string(),
        description: f.description.trim().to_string(),
        system_prompt: text(&f.system_prompt),
        model: text(&f.model),
        model_settings: json_field("Model settings", &f.model_settings)?,
        tools: dedup(&f.tools),
        approval,
        result_schema: json_field("Result schema", &f.result_schema)?,
        max_turns,
        input_schema: json_field("Input schema", &f.input_schema)?,
        agents: dedup(&f.agents),
        handoffs: dedup(&f.handoffs),
        reasoning_traces: f.reasoning_traces,
        tree_budget: match json_field("Tree budget", &f.tree_budget)? {
            None => None,
            Some(v) => Some(serde_json::from_value(v).map_err(|e| format!("Tree budget is not valid: {e}."))?),
        },
    })
}

/// The non-blank values, trimmed, each once, in order.
fn dedup(values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
        if !out.iter().any(|o| o == v) {
            out.push(v.to_string());
        }
    }
    out
}

/// The project's agents, a page at a time (`cursor`: the last name shown).
#[server]
pub async fn list_agents(cursor: Option<String>) -> Result<AgentList, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let cursor = super::ssr::non_empty(cursor);
    let (page, options) = tokio::try_join!(
        engine.agents().list(&caller.project, cursor.as_deref(), 0, AGENT_PAGE),
        ssr::options(&engine, &caller)
    )
    .map_err(super::ssr::to_server_error)?;
    Ok(AgentList { page, options })
}

/// What the form offers, on its own (the playground's agent picker).
#[server]
pub async fn agent_choices() -> Result<Vec<AgentChoice>, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    ssr::choices(&engine, &caller.project).await.map_err(super::ssr::to_server_error)
}

/// Agent `id` of the current project with its versions, runs and stats;
/// `Ok(None)` when there is no such agent in the project.
#[server]
pub async fn get_agent(id: String) -> Result<Option<AgentView>, ServerFnError> {
    use runlens_engine::model::RunFilter;
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let project = caller.project.clone();
    let detail = match engine.agents().agent_detail(&project, &id).await {
        Ok(d) => d,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let filter = RunFilter {
        agent_id: Some(id.clone()),
        all: Some(true),
        limit: Some(AGENT_RUNS),
        project: Some(project.clone()),
        ..Default::default()
    };
    let (versions, mut runs, pricing, options) = tokio::try_join!(
        engine.agents().agent_versions(&project, &id, None, VERSION_PAGE),
        engine.runs().list_runs(&filter),
        engine.traces().pricing(&project),
        ssr::options(&engine, &caller),
    )
    .map_err(super::ssr::to_server_error)?;
    runs.runs.iter_mut().for_each(|run| {
        super::preview::cut_run(run);
    });
    Ok(Some(AgentView { detail, versions, runs, pricing, options, now: Utc::now() }))
}

/// Version `version` of agent `id`; `Ok(None)` when there is none.
#[server]
pub async fn get_agent_version(id: String, version: u32) -> Result<Option<AgentVersion>, ServerFnError> {
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    match engine.agents().agent_version(&caller.project, &id, version).await {
        Ok(v) => Ok(Some(v)),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

/// Creates an agent (no `id`) or saves the next version of agent `id`
/// (`base_version`: the version the form was filled from; someone else's
/// save since then is a conflict). Then goes to the agent's page, with or
/// without JavaScript; returns the agent's id.
#[server]
pub async fn save_agent(
    id: Option<String>,
    base_version: Option<String>,
    name: Option<String>,
    description: Option<String>,
    system_prompt: Option<String>,
    model: Option<String>,
    model_settings: Option<String>,
    #[server(default)] tools: Vec<String>,
    approval: Option<String>,
    #[server(default)] approval_tools: Vec<String>,
    approval_timeout_s: Option<String>,
    result_schema: Option<String>,
    input_schema: Option<String>,
    max_turns: Option<String>,
    #[server(default)] agents: Vec<String>,
    #[server(default)] handoffs: Vec<String>,
    #[server(default)] reasoning_traces: bool,
    tree_budget: Option<String>,
) -> Result<String, ServerFnError> {
    use axum::http::StatusCode;
    use runlens_engine::model::AgentInput;
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Operator)?;
    let fields = AgentFormFields {
        name: name.unwrap_or_default(),
        description: description.unwrap_or_default(),
        system_prompt: system_prompt.unwrap_or_default(),
        model: model.unwrap_or_default(),
        model_settings: model_settings.unwrap_or_default(),
        tools,
        approval: approval.unwrap_or_default(),
        approval_tools,
        approval_timeout_s: approval_timeout_s.unwrap_or_default(),
        result_schema: result_schema.unwrap_or_default(),
        input_schema: input_schema.unwrap_or_default(),
        max_turns: max_turns.unwrap_or_default(),
        agents,
        handoffs,
        reasoning_traces,
        tree_budget: tree_budget.unwrap_or_default(),
    };
    let spec = spec_from_form(&fields).map_err(|msg| {
        super::ssr::set_status(StatusCode::BAD_REQUEST);
        ServerFnError::new(msg)
    })?;
    let project = caller.project.clone();
    let saved = match super::ssr::non_empty(id) {
        None => engine.agents().create_agent(&project, AgentInput { id: None, spec }, &caller.actor).await,
        Some(id) => {
            let base = super::ssr::non_empty(base_version).and_then(|v| v.parse::<u32>().ok());
            match engine.agents().agent_in(&project, &id).await {
                Ok(current) if base.is_some_and(|b| b != current.version) => Err(EngineError::Conflict(format!(
                    "agent `{}` was saved by someone else meanwhile (it is at version {} now, the form was \
                     filled from version {}); reload the page",
                    current.spec.name,
                    current.version,
                    base.unwrap_or_default()
                ))),
                Ok(_) => engine.agents().update_agent(&project, &id, spec, &caller.actor).await,
                Err(e) => Err(e),
            }
        }
    };
    match saved {
        Ok(agent) => {
            leptos_axum::redirect(&format!("/agents/{}", crate::format::url_encode(&agent.id)));
            Ok(agent.id)
        }
        Err(e) => {
            let error = super::ssr::classify(e, "saving an agent");
            super::ssr::set_status(error.status());
            Err(ServerFnError::new(error.message))
        }
    }
}

/// The project's agents as choices, by name (for the other server functions).
#[cfg(feature = "ssr")]
pub async fn choices_in(
    engine: &runlens_engine::Engine,
    project: &str,
) -> Result<Vec<AgentChoice>, runlens_engine::EngineError> {
    ssr::choices(engine, project).await
}

/// The project's agents as choices, by name (other forms offer them too).
#[cfg(feature = "ssr")]
pub(crate) use ssr::choices as project_agent_choices;

#[cfg(feature = "ssr")]
mod ssr {
    use runlens_engine::{Engine, EngineError};

    use super::{AgentChoice, AgentFormOptions, AGENT_CHOICES};
    use crate::server::auth::Caller;

    /// The project's agents as choices, by name.
    pub async fn choices(engine: &Engine, project: &str) -> Result<Vec<AgentChoice>, EngineError> {
        let page = engine.agents().list(project, None, 0, AGENT_CHOICES).await?;
        Ok(page
            .agents
            .into_iter()
            .map(|a| AgentChoice { id: a.id, name: a.spec.name, description: a.spec.description, version: a.version })
            .collect())
    }

    pub async fn options(engine: &Engine, caller: &Caller) -> Result<AgentFormOptions, EngineError> {
        Ok(AgentFormOptions {
            models: engine.models(),
            tools: engine.tools(&caller.project),
            agents: choices(engine, &caller.project).await?,
            role: caller.role_in(&caller.project),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> AgentFormFields {
        AgentFormFields { name: " math_helper ".into(), approval: "none".into(), ..Default::default() }
    }

    #[test]
    fn a_minimal_form_is_a_minimal_spec() {
        let spec = spec_from_form(&form()).unwrap();
        assert_eq!(spec, AgentSpec { name: "math_helper".into(), ..AgentSpec::default() });
    }

    #[test]
    fn every_field_reaches_the_spec() {
        let f = AgentFormFields {
            description: "Does sums".into(),
            system_prompt: "Be exact.".into(),
            model: "builtin".into(),
            model_settings: r#"{"temperature": 0}"#.into(),
            tools: vec!["calculator".into(), " calculator ".into(), "wait".into()],
            approval: "tools".into(),
            approval_tools: vec!["wait".into()],
            approval_timeout_s: "30".into(),
            result_schema: r#"{"type": "object"}"#.into(),
            input_schema: r#"{"type": "object", "required": ["n"]}"#.into(),
            max_turns: " 7 ".into(),
            agents: vec!["agent-a".into()],
            handoffs: vec!["agent-b".into(), "".into()],
            reasoning_traces: true,
            tree_budget: r#"{"runs": 20, "depth": 2}"#.into(),
            ..form()
        };
        let spec = spec_from_form(&f).unwrap();
        assert_eq!(spec.tools, ["calculator", "wait"]);
        assert_eq!(spec.approval, Some(ApprovalRequest::tools(["wait"]).with_timeout_s(30)));
        assert_eq!(spec.model_settings, Some(json!({"temperature": 0})));
        assert_eq!(spec.result_schema, Some(json!({"type": "object"})));
        assert_eq!(spec.input_schema, Some(json!({"type": "object", "required": ["n"]})));
        assert_eq!(spec.max_turns, Some(7));
        assert_eq!(
            (spec.agents.as_slice(), spec.handoffs.as_slice()),
            (&["agent-a".to_string()][..], &["agent-b".to_string()][..])
        );
        assert!(spec.reasoning_traces);
        let budget = spec.tree_budget.unwrap();
        assert_eq!((budget.runs, budget.depth, budget.turns), (Some(20), Some(2), None));
        assert_eq!(spec.system_prompt.as_deref(), Some("Be exact."));
    }

    #[test]
    fn approval_modes_round_trip_through_the_form() {
        let all = spec_from_form(&AgentFormFields { approval: "all".into(), ..form() }).unwrap();
        assert_eq!(all.approval, Some(ApprovalRequest::all()));
        assert_eq!(approval_parts(all.approval.as_ref()), ("all", vec![], None));
        let timed =
            spec_from_form(&AgentFormFields { approval: "all".into(), approval_timeout_s: "9".into(), ..form() })
                .unwrap();
        assert_eq!(timed.approval, Some(ApprovalRequest::all().with_timeout_s(9)));
        assert_eq!(approval_parts(timed.approval.as_ref()), ("all", vec![], Some(9)));
        let listed = ApprovalRequest::tools(["send_email"]);
        assert_eq!(approval_parts(Some(&listed)), ("tools", vec!["send_email".to_string()], None));
        assert_eq!(approval_parts(None), ("none", vec![], None));
        let none = spec_from_form(&form()).unwrap();
        assert_eq!(none.approval, None);
    }

    #[test]
    fn bad_fields_are_named() {
        let bad_json = AgentFormFields { input_schema: "{nope".into(), ..form() };
        let err = spec_from_form(&bad_json).unwrap_err();
        assert!(err.starts_with("Input schema is not valid JSON"), "{err}");
        let err = spec_from_form(&AgentFormFields { result_schema: "[1,".into(), ..form() }).unwrap_err();
        assert!(err.starts_with("Result schema is not valid JSON"), "{err}");
        let err = spec_from_form(&AgentFormFields { max_turns: "ten".into(), ..form() }).unwrap_err();
        assert!(err.contains("whole number"), "{err}");
        let err = spec_from_form(&AgentFormFields { approval_timeout_s: "0".into(), ..form() }).unwrap_err();
        assert!(err.contains("approval timeout"), "{err}");
        let err = spec_from_form(&AgentFormFields { approval: "tools".into(), ..form() }).unwrap_err();
        assert!(err.contains("choose the tools"), "{err}");
        let err = spec_from_form(&AgentFormFields { approval: "some".into(), ..form() }).unwrap_err();
        assert!(err.contains("none, all or listed"), "{err}");
    }
}
