//! Saved agents as runs see them: an agent version resolved into the links
//! (tools) it offers, the switch a handoff makes, and the tools a run
//! offers for its sub-agents and handoff targets.

use serde_json::{json, Value};

use super::Runtime;
use crate::error::{EngineError, Result};
use crate::model::{AgentLink, AgentSpec, ApprovalRequest, ToolInfo, HANDOFF_PREFIX};
use crate::store::AgentSwitch;

/// One version of an agent, with its links resolved.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub agent_id: String,
    pub version: u32,
    pub spec: AgentSpec,
    /// The agents it may call, as tools.
    pub sub_agents: Vec<AgentLink>,
    pub handoffs: Vec<AgentLink>,
}

/// The arguments of an agent's tool: its input schema when that describes
/// an object, else one `input` text.
fn tool_schema(spec: &AgentSpec) -> Value {
    match &spec.input_schema {
        Some(schema) if schema.get("type").and_then(Value::as_str) == Some("object") => schema.clone(),
        _ => json!({
            "type": "object",
            "properties": {
                "input": { "type": "string", "description": format!("What to ask {}", spec.name) },
            },
            "required": ["input"],
            "additionalProperties": false,
        }),
    }
}

/// The child run's prompt for an agent call's arguments: the `input` text
/// when there is one, else the arguments as JSON.
pub(crate) fn child_prompt(args: &Value) -> String {
    match args.get("input").and_then(Value::as_str).map(str::trim) {
        Some(text) if !text.is_empty() => text.to_owned(),
        _ => format!("Input:\n{}", serde_json::to_string_pretty(args).unwrap_or_default()),
    }
}

impl Runtime {
    /// Agent `id` of `project` at `version` (its current one when `None`),
    /// with its links resolved; `Invalid` naming `field` when there is no
    /// such agent or version.
    pub(crate) async fn resolve_agent(
        &self,
        project: &str,
        id: &str,
        version: Option<u32>,
        field: &str,
    ) -> Result<Resolved> {
        let agents = self.store.agents();
        let agent = agents
            .agent(id)
            .await?
            .filter(|a| a.project == project)
            .ok_or_else(|| EngineError::Invalid(format!("{field}: no agent `{id}` in this project")))?;
        let (version, spec) = match version {
            None => (agent.version, agent.spec),
            Some(v) => {
                let saved = agents.agent_version(id, v).await?.ok_or_else(|| {
                    EngineError::Invalid(format!(
                        "agent_version: agent `{id}` has no version {v} (its latest is {})",
                        agent.version
                    ))
                })?;
                (v, saved.spec)
            }
        };
        let sub_agents = self.links(project, &spec.agents, "agents", false).await?;
        let handoffs = self.links(project, &spec.handoffs, "handoffs", true).await?;
        Ok(Resolved { agent_id: id.to_owned(), version, spec, sub_agents, handoffs })
    }

    /// The links to agents `ids` of `project`, each at its current version.
    pub(crate) async fn links(
        &self,
        project: &str,
        ids: &[String],
        field: &str,
        handoff: bool,
    ) -> Result<Vec<AgentLink>> {
        let mut links = Vec::with_capacity(ids.len());
        for id in ids {
            let target = (self.store.agents().agent(id).await?)
                .filter(|a| a.project == project)
                .ok_or_else(|| EngineError::Invalid(format!("{field}: no agent `{id}` in this project")))?;
            let spec = &target.spec;
            links.push(if handoff {
                AgentLink {
                    tool: format!("{HANDOFF_PREFIX}{}", spec.name),
                    agent_id: id.clone(),
                    agent_name: spec.name.clone(),
                    description: format!("Hand the conversation over to {}. {}", spec.name, spec.description)
                        .trim_end()
                        .to_owned(),
                    schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
                }
            } else {
                AgentLink {
                    tool: spec.name.clone(),
                    agent_id: id.clone(),
                    agent_name: spec.name.clone(),
                    description: if spec.description.is_empty() {
                        format!("Ask the agent {} and get its answer.", spec.name)
                    } else {
                        spec.description.clone()
                    },
                    schema: tool_schema(spec),
                }
            });
        }
        Ok(links)
    }

    /// What a run of project `project` takes from `agent` when it hands
    /// over to it (the agent's tools expanded as they are now).
    pub(crate) fn switch_for(&self, project: &str, agent: &Resolved) -> Result<AgentSwitch> {
        let spec = &agent.spec;
        let approval = spec.approval.as_ref().map(ApprovalRequest::policy).unwrap_or_default();
        Ok(AgentSwitch {
            agent_id: agent.agent_id.clone(),
            version: agent.version,
            system_prompt: spec.system_prompt.clone().filter(|s| !s.trim().is_empty()),
            model: spec.model.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "builtin".into()),
            model_settings: spec.model_settings.clone().unwrap_or(Value::Null),
            tools: super::attach_known(self, project, &spec.tools),
            approval,
            sub_agents: agent.sub_agents.clone(),
            handoffs: agent.handoffs.clone(),
            reasoning_traces: spec.reasoning_traces,
            turns_before: 0,
        })
    }
}

/// The tools a run offers for its sub-agents and handoff targets.
pub(crate) fn agent_tool_infos(sub_agents: &[AgentLink], handoffs: &[AgentLink]) -> Vec<ToolInfo> {
    (sub_agents.iter().chain(handoffs))
        .map(|l| ToolInfo {
            name: l.tool.clone(),
            description: l.description.clone(),
            schema: l.schema.clone(),
            requires_approval: false,
            source: "agent".into(),
            // A child run is started once per call, under an id derived from it.
            idempotent: true,
        })
        .collect()
}
