//! `/agents`: the project's saved agents and the "New agent" form;
//! `/agents/:id`: one agent — its current version, how each version's runs
//! went, its versions, its latest runs, and the form that saves its next
//! version; `/agents/:id/versions/:v`: one older version, read-only.
//!
//! Everyone with a role reads; the forms are for operators (a viewer sees
//! no edit controls). The forms post to the `save_agent` server function,
//! with or without JavaScript.

pub(crate) mod form;

use std::sync::Arc;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use runlens_engine::model::{Agent, AgentSpec, AgentVersionStats};

use crate::api::run_tree::agent_name;
use crate::api::{approval_parts, get_agent, get_agent_version, list_agents, AgentList, AgentView, SaveAgent};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{Fact, JsonBlock, Loaded};
use crate::format;
use crate::pages::runs::RunsTable;
use form::AgentForm;

/// Names of the project's agents by id, from the form's choices.
fn names_of(list: &[crate::api::AgentChoice]) -> Vec<(String, String)> {
    list.iter().map(|a| (a.id.clone(), a.name.clone())).collect()
}

#[component]
pub fn AgentsPage() -> impl IntoView {
    let query = use_query_map();
    let cursor = Memo::new(move |_| query.read().get("cursor").filter(|c| !c.is_empty()));
    let save = ServerAction::<SaveAgent>::new();
    let list = crate::resource::new(move || (cursor.get(), save.version().get()), |(cursor, _)| list_agents(cursor));
    view! {
        <Title text="Agents · runlens"/>
        <div class="page-head">
            <div>
                <h1>"Agents"</h1>
                <span class="muted">
                    "Saved, versioned configurations a run starts from; agents can call each other (child runs) or hand a run over."
                </span>
            </div>
        </div>
        <Loaded load=move || async move { list.await } loading="Loading agents…" let:list>
            <AgentsList list save/>
        </Loaded>
    }
}

#[component]
fn AgentsList(list: AgentList, save: ServerAction<SaveAgent>) -> impl IntoView {
    let AgentList { page, options } = list;
    let names = names_of(&options.agents);
    let may_edit = options.may_edit();
    let table = match page.agents.is_empty() {
        true => view! {
            <div class="empty" data-testid="agents-empty">
                <p>"No agents yet."</p>
                {may_edit.then(|| view! { <p><a href="#new-agent">"Create the first one below ↓"</a></p> })}
            </div>
        }
        .into_any(),
        false => {
            let rows = page.agents.into_iter().map(|a| agent_row(a, &names)).collect::<Vec<_>>();
            view! {
                <div class="table-scroll"><table class="table agents" data-testid="agents-table">
                    <thead>
                        <tr>
                            <th>"Name"</th>
                            <th>"Description"</th>
                            <th class="num">"Version"</th>
                            <th>"Model"</th>
                            <th>"Tools"</th>
                            <th>"Calls"</th>
                            <th>"Updated (UTC)"</th>
                            <th></th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table></div>
            }
            .into_any()
        }
    };
    let next = page.next_cursor.map(|c| format!("/agents?{}", format::query_string([("cursor", c.as_str())])));
    let form = may_edit.then(|| {
        view! {
            <section class="section" id="new-agent" data-testid="new-agent">
                <h2>"New agent"</h2>
                <AgentForm options current=None save/>
            </section>
        }
    });
    view! {
        {may_edit.then(|| view! {
            <p class="actions"><a class="button primary" href="#new-agent" data-testid="new-agent-link">"New agent ↓"</a></p>
        })}
        {table}
        <nav class="pager">
            {next.map(|href| view! { <a href=href data-testid="next-page">"Next →"</a> })}
        </nav>
        {form}
    }
}

fn agent_row(agent: Agent, names: &[(String, String)]) -> impl IntoView {
    let href = format!("/agents/{}", format::url_encode(&agent.id));
    let runs = format!("/runs?{}", format::query_string([("agent", agent.id.as_str()), ("all", "1")]));
    let play = format!("/playground?{}", format::query_string([("agent_id", agent.id.as_str())]));
    let model = agent.spec.model.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "builtin".into());
    let tools = if agent.spec.tools.is_empty() { format::NONE.to_string() } else { agent.spec.tools.join(", ") };
    let calls: Vec<String> = agent.spec.agents.iter().map(|id| agent_name(names, id)).collect();
    let handoffs: Vec<String> = agent.spec.handoffs.iter().map(|id| format!("→ {}", agent_name(names, id))).collect();
    let links = calls.into_iter().chain(handoffs).collect::<Vec<_>>().join(", ");
    view! {
        <tr data-testid="agent-row" data-agent-id=agent.id.clone() data-agent-name=agent.spec.name.clone()>
            <td class="name">
                <a href=href data-testid="agent-link">{agent.spec.name.clone()}</a>
                <div class="sub mono" title=agent.id.clone()>{format::short_id(&agent.id)}</div>
            </td>
            <td class="desc">{agent.spec.description.clone()}</td>
            <td class="num" data-testid="agent-version">{agent.version}</td>
            <td class="mono">{model}</td>
            <td class="mono">{tools}</td>
            <td class="mono">{if links.is_empty() { format::NONE.to_string() } else { links }}</td>
            <td class="nowrap">{format::time(&agent.updated_at)}</td>
            <td class="nowrap">
                <a href=runs>"Runs"</a>
                " · "
                <a href=play data-testid="agent-play">"Run"</a>
            </td>
        </tr>
    }
}

#[component]
pub fn AgentPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let save = ServerAction::<SaveAgent>::new();
    let agent = crate::resource::new(move || (id.get(), save.version().get()), |(id, _)| get_agent(id));
    move || {
        id.track();
        view! {
            <Loaded load=move || async move { agent.await } loading="Loading the agent…" keep_previous=true let:view>
                {match view {
                    Some(view) => view! { <AgentDetailView view save/> }.into_any(),
                    None => view! { <AgentNotFound id=id.get_untracked()/> }.into_any(),
                }}
            </Loaded>
        }
    }
}

#[component]
fn AgentDetailView(view: AgentView, save: ServerAction<SaveAgent>) -> impl IntoView {
    let AgentView { detail, versions, runs, pricing, options, now } = view;
    let agent = detail.agent;
    let names = names_of(&options.agents);
    let title = format::rcdata_text(&format!("{} · Agents · runlens", agent.spec.name));
    let enc = format::url_encode(&agent.id);
    let runs_href = format!("/runs?{}", format::query_string([("agent", agent.id.as_str()), ("all", "1")]));
    let play = format!("/playground?{}", format::query_string([("agent_id", agent.id.as_str())]));
    let updated_by = agent.updated_by.as_ref().map(|a| a.name.clone()).unwrap_or_else(|| format::NONE.into());
    let version_rows = versions
        .iter()
        .map(|v| {
            let href = format!("/agents/{enc}/versions/{}", v.version);
            let by = v.created_by.as_ref().map(|a| a.name.clone()).unwrap_or_else(|| format::NONE.into());
            let current = v.version == agent.version;
            view! {
                <li data-testid="agent-version-row" data-version=v.version.to_string()>
                    <a href=href data-testid="agent-version-link">"version " {v.version}</a>
                    {current.then(|| view! { <span class="badge badge-done">"current"</span> })}
                    <span class="muted">" saved " {format::time(&v.created_at)} " UTC by " {by}</span>
                </li>
            }
        })
        .collect::<Vec<_>>();
    let run_list = crate::pages::runs::priced(runs.runs, &pricing);
    let runs_view = match run_list.is_empty() {
        true => view! { <p class="muted" data-testid="agent-no-runs">"No runs yet."</p> }.into_any(),
        false => view! { <RunsTable runs=run_list now names=Arc::new(names.clone())/> }.into_any(),
    };
    let edit = options.may_edit().then(|| {
        let current = agent.clone();
        view! {
            <section class="section" id="edit" data-testid="edit-agent">
                <h2>"Edit " <span class="count">"each save is a new version"</span></h2>
                <AgentForm options current=Some(current) save/>
            </section>
        }
    });
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/agents">"Agents"</a> " / " <span class="mono">{agent.id.clone()}</span></div>
                <h1>
                    <span data-testid="agent-title">{agent.spec.name.clone()}</span>
                    " " <span class="badge badge-pending" data-testid="agent-current-version">"v" {agent.version}</span>
                </h1>
            </div>
            <div class="actions">
                <a class="button subtle" href=runs_href data-testid="agent-runs-link">"All its runs"</a>
                <a class="button primary" href=play data-testid="agent-run-link">"Run in playground"</a>
            </div>
        </div>
        <p class="agent-description" data-testid="agent-about">{agent.spec.description.clone()}</p>
        <SpecView spec=agent.spec.clone() names=names.clone()/>
        <dl class="facts">
            <Fact label="Updated">{format::time(&agent.updated_at)} " UTC by " {updated_by}</Fact>
            <Fact label="Created">{format::time(&agent.created_at)} " UTC"</Fact>
        </dl>
        <section class="section">
            <h2>"Runs per version"</h2>
            <StatsTable stats=detail.stats.clone()/>
        </section>
        <ScoresByVersion stats=detail.stats/>
        <section class="section">
            <h2>"Versions " <span class="count">{versions.len()}</span></h2>
            <ul class="version-list" data-testid="agent-versions">{version_rows}</ul>
        </section>
        <section class="section">
            <h2>"Latest runs " <span class="count">"child runs included"</span></h2>
            {runs_view}
        </section>
        {edit}
    }
}

/// How each version's runs went, newest version first.
#[component]
fn StatsTable(stats: Vec<AgentVersionStats>) -> impl IntoView {
    let rows = stats
        .into_iter()
        .map(|s| {
            let rate = s.success_rate.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| format::NONE.into());
            view! {
                <tr data-testid="agent-stats-row" data-version=s.version.to_string()>
                    <td>"v" {s.version}</td>
                    <td class="num" data-testid="stats-runs">{s.runs}</td>
                    <td class="num">{s.done}</td>
                    <td class="num">{s.failed}</td>
                    <td class="num">{s.cancelled}</td>
                    <td class="num">{s.active}</td>
                    <td class="num" data-testid="stats-success">{rate}</td>
                    <td class="num" data-testid="stats-tokens">{thousands(s.usage.total_tokens)}</td>
                    <td class="num">{cost_text(s.cost_usd)}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table" data-testid="agent-stats">
            <thead>
                <tr>
                    <th>"Version"</th>
                    <th class="num">"Runs"</th>
                    <th class="num">"Done"</th>
                    <th class="num">"Failed"</th>
                    <th class="num">"Cancelled"</th>
                    <th class="num">"Active"</th>
                    <th class="num" title="done out of the finished runs">"Success rate"</th>
                    <th class="num">"Tokens"</th>
                    <th class="num" title="at today's prices (Settings)">"Cost"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
}

/// The scores of each version's runs, a row per score name and a column
/// per version, oldest first (so a row reads as the score over time): the
/// mean (yes = 1) with a bar when it is a share, the change from the
/// version before, and how many scores, from when to when, on hover.
#[component]
fn ScoresByVersion(stats: Vec<AgentVersionStats>) -> impl IntoView {
    let mut versions: Vec<AgentVersionStats> = stats.into_iter().filter(|s| !s.scores.is_empty()).collect();
    if versions.is_empty() {
        return ().into_any();
    }
    versions.sort_by_key(|s| s.version);
    let mut names: Vec<String> = versions.iter().flat_map(|v| v.scores.iter().map(|s| s.name.clone())).collect();
    names.sort();
    names.dedup();
    let head = versions.iter().map(|v| view! { <th class="num" scope="col">"v" {v.version}</th> }).collect::<Vec<_>>();
    let rows = names
        .into_iter()
        .map(|name| {
            let mut before: Option<f64> = None;
            let cells = versions
                .iter()
                .map(|v| {
                    let Some(score) = v.scores.iter().find(|s| s.name == name) else {
                        return view! { <td class="num muted">{format::NONE}</td> }.into_any();
                    };
                    let title = format!(
                        "{} scores, runs of {} to {}",
                        score.count,
                        format::time(&score.first_run_at),
                        format::time(&score.last_run_at)
                    );
                    let change = match (before, score.mean) {
                        (Some(b), Some(m)) if m > b + 1e-9 => Some(("score-up", "▲")),
                        (Some(b), Some(m)) if m < b - 1e-9 => Some(("score-down", "▼")),
                        _ => None,
                    };
                    if score.mean.is_some() {
                        before = score.mean;
                    }
                    let bar = score.mean.filter(|m| (0.0..=1.0).contains(m)).map(|m| {
                        let width = format!("width: {:.0}%", m * 100.0);
                        view! { <span class="meter" aria-hidden="true"><span style=width></span></span> }
                    });
                    let mean = score.mean.map_or_else(|| "labels".to_owned(), |m| format!("{m:.2}"));
                    view! {
                        <td class="num" title=title data-testid="version-score" data-version=v.version.to_string()>
                            {change.map(|(class, mark)| view! { <span class=class>{mark}" "</span> })}
                            {mean} {bar}
                        </td>
                    }
                    .into_any()
                })
                .collect::<Vec<_>>();
            view! { <tr data-testid="version-score-row" data-name=name.clone()><th scope="row">{name.clone()}</th>{cells}</tr> }
        })
        .collect::<Vec<_>>();
    view! {
        <section class="section">
            <h2>"Scores per version"</h2>
            <p class="muted">"The mean of each score its runs were given (yes = 1), oldest version first; ▲ ▼ against the version before."</p>
            <div class="table-scroll"><table class="table" data-testid="agent-version-scores">
                <thead><tr><th scope="col">"Score"</th>{head}</tr></thead>
                <tbody>{rows}</tbody>
            </table></div>
        </section>
    }
    .into_any()
}

/// One version's settings, read-only (`names`: agent names by id).
#[component]
pub fn SpecView(spec: AgentSpec, names: Vec<(String, String)>) -> impl IntoView {
    let (mode, listed, timeout) = approval_parts(spec.approval.as_ref());
    let approval = match mode {
        "all" => "every call".to_string(),
        "tools" => format!("calls of {}", listed.join(", ")),
        _ => "none beyond the tools that always need it".to_string(),
    };
    let approval = match timeout {
        Some(t) => format!("{approval} (rejected after {t} s undecided)"),
        None => approval,
    };
    let link_list = move |ids: &[String], testid: &'static str| {
        if ids.is_empty() {
            return view! { <span class="muted">{format::NONE}</span> }.into_any();
        }
        let links = ids
            .iter()
            .map(|id| {
                let href = format!("/agents/{}", format::url_encode(id));
                let name = agent_name(&names, id);
                view! { <a href=href class="mono agent-link" data-testid=testid>{name}</a> " " }
            })
            .collect::<Vec<_>>();
        view! { <span>{links}</span> }.into_any()
    };
    let (calls, handoffs) = (link_list(&spec.agents, "spec-agent"), link_list(&spec.handoffs, "spec-handoff"));
    let tools = if spec.tools.is_empty() { format::NONE.to_string() } else { spec.tools.join(", ") };
    let model = spec.model.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| "builtin".into());
    let max_turns = spec.max_turns.map(|n| n.to_string()).unwrap_or_else(|| "default".into());
    view! {
        <dl class="facts" data-testid="agent-spec">
            <Fact label="Model"><span class="mono" data-testid="spec-model">{model}</span></Fact>
            <Fact label="Max turns">{max_turns}</Fact>
            <Fact label="Tools"><span class="mono" data-testid="spec-tools">{tools}</span></Fact>
            <Fact label="Approval"><span data-testid="spec-approval">{approval}</span></Fact>
            <Fact label="Calls agents">{calls}</Fact>
            <Fact label="Hands off to">{handoffs}</Fact>
            <Fact label="Reasoning traces">{if spec.reasoning_traces { "on" } else { "off" }}</Fact>
        </dl>
        <div class="grid-2">
            <section class="card">
                <h3>"System prompt"</h3>
                {match spec.system_prompt.clone() {
                    Some(p) => view! { <pre class="text" data-testid="spec-system-prompt">{p}</pre> }.into_any(),
                    None => view! { <p class="muted">"None."</p> }.into_any(),
                }}
            </section>
            <section class="card">
                <h3>"Schemas and settings"</h3>
                <div class="label">"Result schema"</div>
                {opt_json(spec.result_schema.clone(), "spec-result-schema")}
                <div class="label">"Input schema"</div>
                {opt_json(spec.input_schema.clone(), "spec-input-schema")}
                <div class="label">"Model settings"</div>
                {opt_json(spec.model_settings.clone(), "spec-model-settings")}
                <div class="label">"Tree budget"</div>
                {opt_json(spec.tree_budget.as_ref().and_then(|b| serde_json::to_value(b).ok()), "spec-tree-budget")}
            </section>
        </div>
    }
}

fn opt_json(value: Option<serde_json::Value>, testid: &'static str) -> AnyView {
    match value {
        Some(v) => view! { <JsonBlock value=v testid/> }.into_any(),
        None => view! { <p class="muted">"None."</p> }.into_any(),
    }
}

#[component]
pub fn AgentVersionPage() -> impl IntoView {
    let params = use_params_map();
    let key = Memo::new(move |_| {
        let p = params.read();
        (p.get("id").unwrap_or_default(), p.get("version").and_then(|v| v.parse::<u32>().ok()))
    });
    let version = crate::resource::new(
        move || key.get(),
        |(id, v)| async move {
            match v {
                Some(v) => get_agent_version(id, v).await,
                None => Ok(None),
            }
        },
    );
    let names = crate::resource::new(|| (), |_| crate::api::agent_choices());
    view! {
        <Loaded load=move || async move { Ok((version.await?, names.await.unwrap_or_default())) }
            loading="Loading the version…" let:loaded>
            {match loaded {
                (Some(v), names) => {
                    let enc = format::url_encode(&v.agent_id);
                    let by = v.created_by.as_ref().map(|a| a.name.clone()).unwrap_or_else(|| format::NONE.into());
                    let title = format::rcdata_text(&format!("{} v{} · Agents · runlens", v.spec.name, v.version));
                    view! {
                        <Title text=title/>
                        <div class="page-head">
                            <div>
                                <div class="crumbs">
                                    <a href="/agents">"Agents"</a> " / "
                                    <a href=format!("/agents/{enc}") data-testid="version-agent-link">{v.spec.name.clone()}</a>
                                    " / version " {v.version}
                                </div>
                                <h1>
                                    <span data-testid="agent-title">{v.spec.name.clone()}</span>
                                    " " <span class="badge badge-pending" data-testid="version-number">"v" {v.version}</span>
                                </h1>
                                <span class="muted">"Saved " {format::time(&v.created_at)} " UTC by " {by} " (read-only)"</span>
                            </div>
                            <div class="actions">
                                <a class="button subtle" href=format!("/playground?agent_id={enc}&agent_version={}", v.version)>
                                    "Run this version"
                                </a>
                            </div>
                        </div>
                        <p class="agent-description" data-testid="agent-about">{v.spec.description.clone()}</p>
                        <SpecView spec=v.spec names=names_of(&names)/>
                    }
                    .into_any()
                }
                (None, _) => view! { <AgentNotFound id=key.get_untracked().0/> }.into_any(),
            }}
        </Loaded>
    }
}

/// Shown (with a 404 status on the server) for an unknown agent or version.
#[component]
fn AgentNotFound(id: String) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(axum::http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Agent not found · runlens"/>
        <div class="empty" data-testid="agent-not-found">
            <h1>"Agent not found"</h1>
            <p>"There is no agent (or version) " <code>{id}</code> " in this project."</p>
            <p><a href="/agents">"← All agents"</a></p>
        </div>
    }
}
