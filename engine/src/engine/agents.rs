//! Saved agents: create, version, read, and how each version's runs went;
//! and the tree of runs below a run (its children, its usage rolled up).

use std::collections::BTreeMap;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::{
    limits, Actor, Agent, AgentDetail, AgentInput, AgentPage, AgentSpec, AgentVersion, AgentVersionStats, Run,
    RunStatus, TreeUsage, VersionScore, HANDOFF_PREFIX,
};

/// (Version, score name) pairs an agent's page reads, at most.
const MAX_VERSION_SCORES: u32 = 2000;
use crate::runtime::{create, now};
use crate::store::AgentInsert;

/// Agents read, at most, when a save looks for a cycle of sub-agent calls
/// (past them it stops looking: every tree of runs is bounded anyway).
const MAX_CYCLE_SEARCH: usize = 1000;

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::Invalid(msg.into())
}

impl Engine {
    /// A spec is saved only when a run could start from it: its bounds, its
    /// model and settings, tools, approval, schemas and linked agents.
    async fn check_spec(&self, project: &str, id: &str, spec: &AgentSpec) -> Result<()> {
        spec.check_bounds().map_err(invalid)?;
        if spec.name.starts_with(HANDOFF_PREFIX) || self.rt.tools.view(project).contains(&spec.name) {
            return Err(invalid(format!("name `{}` is taken by a tool", spec.name)));
        }
        let settings = spec.model_settings.clone().unwrap_or_default();
        create::check_model(&self.rt, spec.model.as_deref(), &settings)?;
        // Kept as written (`all`, `mcp:NAME`…): each run expands it anew.
        let attached = crate::runtime::attach_tools(&self.rt, project, "tools: ", &spec.tools)?;
        create::check_approval(&self.rt, project, spec.approval.as_ref())?;
        for (field, schema) in [("result_schema", &spec.result_schema), ("input_schema", &spec.input_schema)] {
            if let Some(schema) = schema {
                create::check_schema(field, schema)?;
            }
        }
        for (field, list) in [("agents", &spec.agents), ("handoffs", &spec.handoffs)] {
            let mut seen = std::collections::BTreeSet::new();
            for other in list {
                if !seen.insert(other) {
                    return Err(invalid(format!("{field}: `{other}` is listed twice")));
                }
                if field == "handoffs" && other == id {
                    return Err(invalid("handoffs: an agent cannot hand over to itself"));
                }
            }
            let links = self.rt.links(project, list, field, field == "handoffs").await?;
            let mut tools = std::collections::BTreeSet::new();
            for link in &links {
                if attached.contains(&link.tool) || !tools.insert(link.tool.clone()) {
                    return Err(invalid(format!("{field}: the tool name `{}` is used twice", link.tool)));
                }
            }
        }
        if spec.tree_budget.is_none() {
            if let Some(cycle) = self.cycle_through(project, id, spec).await? {
                return Err(invalid(format!(
                    "agents: {} is a cycle of sub-agent calls; an agent that can call itself needs a \
                     `tree_budget` that bounds its trees of runs (`{{}}` for the server's bounds)",
                    cycle.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" → ")
                )));
            }
        }
        Ok(())
    }

    /// The names along a cycle of sub-agent calls (`agents`) from agent
    /// `id`, saved as `spec`, back to it (`[a, b, a]`), through the
    /// project's agents at their current versions; `None` when there is none.
    async fn cycle_through(&self, project: &str, id: &str, spec: &AgentSpec) -> Result<Option<Vec<String>>> {
        use std::collections::{HashMap, HashSet};
        let mut names = HashMap::from([(id.to_owned(), spec.name.clone())]);
        let mut parent: HashMap<String, String> = HashMap::new();
        let mut seen = HashSet::from([id.to_owned()]);
        let mut stack = vec![(id.to_owned(), spec.agents.clone())];
        while let Some((at, links)) = stack.pop() {
            for next in links {
                if next == id {
                    let mut path = vec![at.clone()];
                    while let Some(up) = parent.get(path.last().map_or("", String::as_str)) {
                        path.push(up.clone());
                    }
                    let named = |a: &String| names.get(a).cloned().unwrap_or_else(|| a.clone());
                    let cycle = path.iter().rev().chain([&next]).map(named).collect();
                    return Ok(Some(cycle));
                }
                if seen.len() >= MAX_CYCLE_SEARCH || !seen.insert(next.clone()) {
                    continue;
                }
                let Some(agent) = self.rt.store.agents().agent(&next).await?.filter(|a| a.project == project) else {
                    continue;
                };
                names.insert(next.clone(), agent.spec.name);
                parent.insert(next.clone(), at.clone());
                stack.push((next, agent.spec.agents));
            }
        }
        Ok(None)
    }
}

fn name_conflict(agent: &Agent, what: AgentInsert) -> EngineError {
    match what {
        AgentInsert::NameTaken => {
            EngineError::Conflict(format!("another agent of the project is named `{}`", agent.spec.name))
        }
        other => EngineError::Conflict(format!("agent `{}` could not be saved ({other:?})", agent.id)),
    }
}

impl Agents<'_> {
    /// Saves a new agent at version 1 in `project`. `Invalid` for a bad
    /// spec, `Conflict` when the id or the name is taken.
    pub async fn create_agent(self, project: &str, input: AgentInput, by: &Actor) -> Result<Agent> {
        let id = match input.id {
            Some(id) => {
                if let Some(problem) = limits::run_id_problem(&id) {
                    return Err(invalid(format!("id {problem}")));
                }
                id
            }
            None => format!("agent-{}", uuid::Uuid::now_v7().simple()),
        };
        self.check_spec(project, &id, &input.spec).await?;
        let at = now();
        let agent = Agent {
            id,
            project: project.to_owned(),
            version: 1,
            created_at: at,
            updated_at: at,
            updated_by: Some(by.clone()),
            spec: input.spec,
        };
        match self.rt.store.agents().insert_agent(&agent).await? {
            AgentInsert::Saved => {}
            AgentInsert::IdTaken => return Err(EngineError::Conflict(format!("the agent id `{}` is taken", agent.id))),
            other => return Err(name_conflict(&agent, other)),
        }
        self.identity()
            .audit(Some(project), by, "agent_created", Some(&agent.id), Some(format!("version 1: {}", agent.spec.name)))
            .await;
        Ok(agent)
    }

    /// Saves `spec` as the next version of agent `id`. `NotFound` for an
    /// agent of another project; `Conflict` when the name is taken or
    /// another save got there first.
    pub async fn update_agent(self, project: &str, id: &str, spec: AgentSpec, by: &Actor) -> Result<Agent> {
        let current = self.agents().agent_in(project, id).await?;
        self.check_spec(project, id, &spec).await?;
        let agent =
            Agent { version: current.version + 1, updated_at: now(), updated_by: Some(by.clone()), spec, ..current };
        match self.rt.store.agents().update_agent(&agent).await? {
            AgentInsert::Saved => {}
            AgentInsert::VersionMoved => {
                return Err(EngineError::Conflict(format!(
                    "agent `{id}` was saved by someone else meanwhile; reload it"
                )))
            }
            other => return Err(name_conflict(&agent, other)),
        }
        let detail = format!("version {}: {}", agent.version, agent.spec.name);
        self.identity().audit(Some(project), by, "agent_updated", Some(id), Some(detail)).await;
        Ok(agent)
    }

    /// Agent `id` of `project` at its current version; `NotFound` otherwise.
    pub async fn agent_in(self, project: &str, id: &str) -> Result<Agent> {
        (self.rt.store.agents().agent(id).await?)
            .filter(|a| a.project == project)
            .ok_or_else(|| EngineError::NotFound(format!("agent `{id}`")))
    }

    /// The agent with how its runs went and the scores they were given, per
    /// version (newest first).
    pub async fn agent_detail(self, project: &str, id: &str) -> Result<AgentDetail> {
        let agent = self.agents().agent_in(project, id).await?;
        let (sums, score_sums, pricing) = tokio::try_join!(
            self.rt.store.agents().agent_run_sums(id),
            self.rt.store.agents().agent_score_sums(id, MAX_VERSION_SCORES),
            self.traces().pricing(project)
        )?;
        // A version's cost is known while every model its runs used has a price.
        let fresh = |version| AgentVersionStats { version, cost_usd: Some(0.0), ..Default::default() };
        let mut stats: BTreeMap<u32, AgentVersionStats> = (1..=agent.version).map(|v| (v, fresh(v))).collect();
        for sum in sums {
            let s = stats.entry(sum.version).or_insert_with(|| fresh(sum.version));
            s.runs += sum.runs;
            match sum.status {
                RunStatus::Done => s.done += sum.runs,
                RunStatus::Failed => s.failed += sum.runs,
                RunStatus::Cancelled => s.cancelled += sum.runs,
                _ => s.active += sum.runs,
            }
            s.usage.add(&sum.usage);
            s.cost_usd = s.cost_usd.zip(pricing.cost_usd(&sum.model, &sum.usage)).map(|(total, c)| total + c);
        }
        for sum in score_sums {
            let s = stats.entry(sum.version).or_insert_with(|| fresh(sum.version));
            s.scores.push(VersionScore {
                name: sum.name,
                count: sum.count,
                mean: (sum.numbers > 0).then(|| sum.sum / sum.numbers as f64),
                first_run_at: crate::store::from_ms(sum.first_ms),
                last_run_at: crate::store::from_ms(sum.last_ms),
            });
        }
        let stats = stats
            .into_values()
            .rev()
            .map(|mut s| {
                let finished = s.done + s.failed + s.cancelled;
                s.success_rate = (finished > 0).then(|| s.done as f64 / finished as f64);
                s
            })
            .collect();
        Ok(AgentDetail { agent, stats })
    }

    /// A page of `project`'s agents by name: after the name `after`, or
    /// skipping `offset`.
    pub async fn list(self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<AgentPage> {
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let mut agents = self.rt.store.agents().agents(project, after, offset, limit + 1).await?;
        let next_cursor = if agents.len() > limit as usize {
            agents.truncate(limit as usize);
            agents.last().map(|a| a.spec.name.clone())
        } else {
            None
        };
        Ok(AgentPage { agents, next_cursor })
    }

    /// Versions of agent `id`, newest first, below `before`, at most `limit`.
    pub async fn agent_versions(
        self,
        project: &str,
        id: &str,
        before: Option<u32>,
        limit: u32,
    ) -> Result<Vec<AgentVersion>> {
        self.agents().agent_in(project, id).await?;
        self.rt.store.agents().agent_versions(id, before, limit.clamp(1, limits::MAX_LIST_LIMIT)).await
    }

    /// One version of agent `id`.
    pub async fn agent_version(self, project: &str, id: &str, version: u32) -> Result<AgentVersion> {
        self.agents().agent_in(project, id).await?;
        (self.rt.store.agents().agent_version(id, version).await?)
            .ok_or_else(|| EngineError::NotFound(format!("version {version} of agent `{id}`")))
    }

    /// The child runs of run `id` (started by its agent calls), oldest first.
    pub async fn children(self, id: &str) -> Result<Vec<Run>> {
        self.runs().run_head(id).await?;
        self.rt.store.children(id).await
    }

    /// Usage and cost of run `id` and every run below it.
    pub async fn tree_usage(self, id: &str) -> Result<TreeUsage> {
        let head = self.runs().run_head(id).await?;
        let (sums, pricing) = tokio::try_join!(self.rt.store.tree_sums(id), self.traces().pricing(&head.project))?;
        let mut tree = TreeUsage { cost_usd: Some(0.0), ..TreeUsage::default() };
        for (model, runs, usage) in sums {
            tree.runs += runs;
            tree.usage.add(&usage);
            tree.cost_usd = tree.cost_usd.zip(pricing.cost_usd(&model, &usage)).map(|(total, c)| total + c);
        }
        Ok(tree)
    }
}

crate::engine::facade_group!(Agents, agents, "A project's agents, their versions and the trees of runs they start.");
