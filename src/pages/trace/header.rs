//! The trace page header: name, status, facts, prompt, result, cancel button,
//! with room (`children`) for what needs attention first, i.e. approvals.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{ApprovalTools, Run, RunOutput};
use serde_json::Value;

use crate::api::run_tree::RunTree;
use crate::api::trace_scan::call_node_id;
use crate::api::CancelRun;
use crate::components::preview::{page_cuts, ShowAll};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::CallerRole;
use crate::components::{server_error_message, ErrorBox, Fact, JsonBlock, OutcomeBadge, Tags, UsageLine};
use crate::format;
use crate::pages::runs::{MetadataChips, SessionChips};
use runlens_engine::model::Role;

/// The run's name, or its id when it has none.
pub fn display_name(run: &Run) -> String {
    if run.name.trim().is_empty() {
        run.id.clone()
    } else {
        run.name.clone()
    }
}

#[component]
pub fn RunHeader(
    run: Run,
    /// The run's cost at today's prices; `None` when its model has no price.
    cost: Option<f64>,
    now: DateTime<Utc>,
    cancel: ServerAction<CancelRun>,
    /// The runs around it in its tree of agent calls.
    tree: Option<RunTree>,
    /// Shown right under the title, above the facts.
    children: Children,
) -> impl IntoView {
    let active = !run.status.is_terminal();
    view! {
        <div class="page-head">
            <div>
                <div class="crumbs">
                    <a href="/runs">"Runs"</a>
                    " / "
                    <span class="mono" data-testid="run-id">{run.id.clone()}</span>
                </div>
                <h1>
                    <span data-testid="run-name">{display_name(&run)}</span>
                    " "
                    <OutcomeBadge outcome=run.outcome.clone() status=run.status testid="run-status"/>
                    {active.then(|| view! { <span class="live" title="updating live">"live"</span> })}
                </h1>
            </div>
            <RunActions run=run.clone() cancel/>
        </div>
        {run.source.clone().map(|source| {
            let service = source.service.clone().unwrap_or_else(|| "an unnamed service".into());
            view! {
                <div class="notice read-only" data-testid="run-source-notice">
                    <strong>"Recorded from OpenTelemetry spans"</strong>
                    " sent by " <span class="mono">{service}</span>
                    " (trace " <span class="mono">{source.trace_id.clone()}</span> "). "
                    "runlens did not run it, so it cannot be resumed, approved, cancelled, forked or followed up: "
                    "this page has no controls for that."
                </div>
            }
        })}
        {run.replay.clone().map(|replay| view! {
            <super::fork_panel::ReplayInfo replay status=run.status/>
        })}
        {run.failure_reason.clone().map(|reason| view! {
            <ErrorBox message=format!("Failed: {reason}") testid="run-failure"/>
        })}
        {children()}
        <RunFacts run=run.clone() cost now tree=tree.unwrap_or_default()/>
        <div class="grid-2">
            <PromptCard run=run.clone()/>
            <ResultCard run/>
        </div>
    }
}

/// A "show all" link to the run in full when its `field` is cut to a
/// preview on this page.
fn show_all(run_id: &str, field: &str) -> Option<impl IntoView> {
    page_cuts().run_field(field).then(|| view! { <ShowAll href=format!("/api/runs/{}", format::url_encode(run_id))/> })
}

/// The header's buttons: re-run in the playground, compare, export, cancel
/// or replay.
#[component]
fn RunActions(run: Run, cancel: ServerAction<CancelRun>) -> impl IntoView {
    let active = !run.status.is_terminal();
    // Re-run from the playground only what the form would carry whole.
    let cuts = page_cuts();
    let rerun_cut = ["initial_prompt", "system_prompt", "context", "result_schema", "input", "metadata"]
        .iter()
        .any(|f| cuts.run_field(f));
    let rerun = (!rerun_cut && run.source.is_none()).then(|| rerun_href(&run));
    // `download` lets the browser, not the client-side router, follow it.
    let export = format!("/api/runs/{}/state?download=1", format::url_encode(&run.id));
    let compare_with = format!("/compare?a={}", format::url_encode(&run.id));
    // A fork (of a message or a step); a child run's parent is not one.
    let forked = run.forked_from_message_id.is_some() || run.forked_from_step.is_some();
    let compare_parent = forked
        .then_some(run.parent_run_id.as_ref())
        .flatten()
        .map(|parent| format!("/compare?a={}&b={}", format::url_encode(parent), format::url_encode(&run.id)));
    view! {
        <div class="actions">
            {match rerun {
                Some(href) => view! { <a class="button subtle" href=href>"Re-run in playground"</a> }.into_any(),
                None if run.source.is_some() => ().into_any(),
                None => view! {
                    <span class="button subtle disabled" data-testid="rerun-too-long" aria-disabled="true"
                        title="Its prompt is too long for the playground form; start it through the API">
                        "Re-run in playground"
                    </span>
                }.into_any(),
            }}
            {compare_parent.map(|href| view! {
                <a class="button subtle" href=href data-testid="compare-parent"
                    title="This run is a fork: see how it differs from the run it was forked from">"Compare with parent"</a>
            })}
            {run.group_id.as_ref().map(|g| {
                let href = format!("/compare?group={}", format::url_encode(g));
                view! {
                    <a class="button subtle" href=href data-testid="compare-group"
                        title="This run is one of a comparison across models: see them side by side">"Compare models"</a>
                }
            })}
            <a class="button subtle" href=compare_with data-testid="compare-with"
                title="Line this run up step by step with another run">"Compare with…"</a>
            <a class="button subtle" href=export download="" data-testid="export-run"
                title="Download this run's state as JSON (import it from the runs list)">"Export"</a>
            {(active && CallerRole::may(Role::Operator)).then(|| view! { <CancelButton id=run.id.clone() cancel/> })}
            {(!active && run.source.is_none() && CallerRole::may(Role::Operator)).then(|| view! {
                <super::fork_panel::ReplayForm run_id=run.id.clone()/>
            })}
        </div>
    }
}

/// The run's facts: model, usage, cost, times, tools, tags, and its place
/// among agents and runs.
#[component]
fn RunFacts(run: Run, cost: Option<f64>, now: DateTime<Utc>, tree: RunTree) -> impl IntoView {
    // While the run is active its duration grows with the page's clock.
    let clock = super::clock::LiveClock::get().filter(|_| !run.status.is_terminal());
    let duration = {
        let run = run.clone();
        move || format::opt_duration(run.duration_ms(clock.map_or(now, |c| c.now(now))))
    };
    // After follow-ups: the wall time too, idle gaps included.
    let wall = (run.idle_ms > 0).then(|| {
        let title =
            format!("{} idle between the end of a turn and the next message", format::duration_ms(run.idle_ms as i64));
        let wall = format::opt_duration(run.wall_ms(now));
        view! { <div class="sub" data-testid="run-wall-time" title=title>{wall} " wall"</div> }
    });
    let tools = if run.tools.is_empty() { "none".to_string() } else { run.tools.join(", ") };
    let tree_facts = view! { <TreeFacts run=run.clone() tree/> };
    view! {
        <dl class="facts">
            <Fact label="Model"><span class="mono">{run.model.clone()}</span></Fact>
            <Fact label="Usage"><UsageLine usage=run.usage testid="run-tokens"/></Fact>
            <Fact label="Cost">
                <span data-testid="run-cost" title="at today's prices">{cost_text(cost)}</span>
                " " <a class="sub" href="/settings">"prices"</a>
            </Fact>
            <Fact label="Steps">{run.step_count} " / max " {run.max_turns}</Fact>
            <Fact label="Duration">
                <span data-testid="run-duration" title="active time: the idle time between turns left out">{duration}</span>
                {wall}
            </Fact>
            <Fact label="Created">{format::time(&run.created_at)}</Fact>
            <Fact label="Started">{format::opt_time(run.started_at.as_ref())}</Fact>
            <Fact label="Finished">{format::opt_time(run.finished_at.as_ref())}</Fact>
            <Fact label="Tools"><span class="mono">{tools}</span></Fact>
            <Fact label="Tags"><Tags tags=run.tags.clone()/></Fact>
            {(run.session_id.is_some() || run.end_user.is_some()).then(|| view! {
                <Fact label="Session">
                    <SessionChips session=run.session_id.clone() user=run.end_user.clone()/>
                </Fact>
            })}
            {(!run.metadata.is_empty()).then(|| view! {
                <Fact label="Metadata"><MetadataChips metadata=run.metadata.clone()/></Fact>
            })}
            {run.reasoning_traces.then(|| view! {
                <Fact label="Reasoning traces"><span data-testid="run-reasoning-traces">"on"</span></Fact>
            })}
            {tree_facts}
        </dl>
    }
}

/// What the run was asked: system prompt, prompt, input, context.
#[component]
fn PromptCard(run: Run) -> impl IntoView {
    let cuts = page_cuts();
    let (input_cut, context_cut) = (cuts.run_field("input"), cuts.run_field("context"));
    let has_context =
        !matches!(&run.context, Value::Null) && !matches!(&run.context, Value::Object(map) if map.is_empty());
    let (prompt_full, system_full) = (show_all(&run.id, "initial_prompt"), show_all(&run.id, "system_prompt"));
    let (input_full, context_full) = (show_all(&run.id, "input"), show_all(&run.id, "context"));
    view! {
        <section class="card">
            <h2 class="h3">"Prompt"</h2>
            {run.system_prompt.clone().map(|sp| view! {
                <div class="label">"System " {system_full}</div>
                <pre class="text" data-testid="run-system-prompt">{sp}</pre>
            })}
            <div class="label">"User " {prompt_full}</div>
            <pre class="text" data-testid="run-prompt">{run.initial_prompt.clone()}</pre>
            {run.input.clone().map(|input| view! {
                <div class="label">"Input " {input_full}</div>
                <JsonBlock value=input cut=input_cut/>
            })}
            {has_context.then(|| view! {
                <div class="label">"Context (tools only) " {context_full}</div>
                <JsonBlock value=run.context.clone() cut=context_cut/>
            })}
        </section>
    }
}

/// What the run answered: summary, output kind, result value.
#[component]
fn ResultCard(run: Run) -> impl IntoView {
    let result_cut = page_cuts().run_field("result");
    let (summary_full, result_full) = (show_all(&run.id, "summary"), show_all(&run.id, "result"));
    let result = run.result.clone().unwrap_or(Value::Null);
    view! {
        <section class="card">
            <h2 class="h3">"Result"</h2>
            {run.summary.clone().map(|s| view! {
                <div class="label">"Summary " {summary_full}</div>
                <p class="summary" data-testid="run-summary">{s}</p>
            })}
            {run.output.as_ref().map(|o| {
                let kind = match o {
                    RunOutput::Structured { .. } => "structured",
                    RunOutput::LastMessage { .. } => "last_message",
                    RunOutput::Error { .. } => "error",
                };
                view! { <div class="label">"Output " <span class="mono" data-testid="run-output-type">{kind}</span></div> }
            })}
            <div class="label">"Value " {result_full}</div>
            {if run.result.is_none() && !run.status.is_terminal() {
                view! { <p class="muted" data-testid="run-result-pending">"Not yet: the run has not finished."</p> }
                    .into_any()
            } else {
                view! { <JsonBlock value=result testid="run-result" cut=result_cut/> }.into_any()
            }}
        </section>
    }
}

/// Cancel form: a server action, so it also works as a plain form post
/// without JavaScript (the server redirects back to this page).
#[component]
fn CancelButton(id: String, cancel: ServerAction<CancelRun>) -> impl IntoView {
    let pending = cancel.pending();
    let error = move || {
        cancel.value().get().and_then(|r| r.err()).map(|e| {
            view! { <span class="inline-error">{server_error_message(&e)}</span> }
        })
    };
    view! {
        <ActionForm action=cancel attr:class="inline-form">
            <input type="hidden" name="id" value=id/>
            <button type="submit" class="button danger" data-testid="cancel-run"
                disabled=move || pending.get()>
                {move || if pending.get() { "Cancelling…" } else { "Cancel run" }}
            </button>
            {error}
        </ActionForm>
    }
}

/// The run's agents and its place in its tree of agent calls: the agent
/// it started from (version, overridden fields), the agent in charge now,
/// the agents it may call or hand over to, its parent and root, and the
/// usage and cost of the whole tree below it.
#[component]
fn TreeFacts(run: Run, tree: RunTree) -> impl IntoView {
    let agent_link = |id: &str, version: Option<u32>, testid: &'static str| {
        let href = format!("/agents/{}", format::url_encode(id));
        let version = version.map(|v| format!(" v{v}")).unwrap_or_default();
        let name = tree.agent_name(id);
        view! {
            <a href=href class="mono" data-testid=testid data-agent-id=id.to_string()>{name}</a>
            <span class="sub">{version}</span>
        }
        .into_any()
    };
    let started = run.agent_id.as_deref().map(|id| {
        let link = agent_link(id, run.agent_version, "run-agent");
        let overrides = (!run.agent_overrides.is_empty()).then(|| {
            view! {
                <div class="sub" data-testid="run-agent-overrides" title="fields of the request that overrode the agent's">
                    "overrides: " {run.agent_overrides.join(", ")}
                </div>
            }
        });
        view! { <Fact label="Agent">{link}{overrides}</Fact> }
    });
    let current = run.current_agent.as_deref().map(|id| {
        let link = agent_link(id, run.current_agent_version, "run-current-agent");
        let handed = run.current_agent != run.agent_id;
        view! {
            <Fact label="Current agent">
                {link}
                {handed.then(|| view! { <div class="sub">"after a handoff"</div> })}
            </Fact>
        }
    });
    let links =
        |list: &[runlens_engine::model::AgentLink]| list.iter().map(|l| l.tool.clone()).collect::<Vec<_>>().join(", ");
    let sub_agents = (!run.sub_agents.is_empty()).then(|| {
        let text = links(&run.sub_agents);
        view! { <Fact label="May call"><span class="mono" data-testid="run-sub-agents">{text}</span></Fact> }
    });
    let handoffs = (!run.handoffs.is_empty()).then(|| {
        let text = links(&run.handoffs);
        view! { <Fact label="May hand off"><span class="mono" data-testid="run-handoffs">{text}</span></Fact> }
    });
    let run_link = |r: &runlens_engine::model::RunRef, testid: &'static str| {
        let href = format!("/runs/{}", format::url_encode(&r.id));
        let label = if r.name.trim().is_empty() { r.id.clone() } else { r.name.clone() };
        view! { <a href=href data-testid=testid data-run-id=r.id.clone() title=r.id.clone()>{label}</a> }.into_any()
    };
    let parent = tree.parent.as_ref().map(|p| {
        let link = run_link(p, "run-parent");
        let call = run.parent_call_id.clone().map(|c| {
            let href = format!("/runs/{}#{}", format::url_encode(&p.id), format::url_encode(&call_node_id(&c)));
            view! { <div class="sub">"started by call " <a href=href class="mono" data-testid="run-parent-call">{c}</a></div> }
        });
        view! { <Fact label="Parent run">{link}{call}</Fact> }
    });
    let root = tree.root.as_ref().map(|r| {
        let link = run_link(r, "run-root");
        view! { <Fact label="Root run">{link}</Fact> }
    });
    let depth = (run.depth > 0).then(|| view! { <Fact label="Depth">{run.depth}</Fact> });
    let children = (run.child_count > 0).then(|| {
        view! { <Fact label="Child runs"><span data-testid="run-child-count">{run.child_count}</span></Fact> }
    });
    let usage = tree.usage.clone().map(|u| {
        let runs = u.runs;
        view! {
            <Fact label="Whole tree">
                <span data-testid="tree-usage">
                    <span data-testid="tree-runs">{runs}</span> {if runs == 1 { " run · " } else { " runs · " }}
                    <span data-testid="tree-tokens">{thousands(u.usage.total_tokens)}</span> " tokens · "
                    <span data-testid="tree-cost" title="at today's prices">{cost_text(u.cost_usd)}</span>
                </span>
            </Fact>
        }
    });
    view! { {started} {current} {sub_agents} {handoffs} {parent} {root} {depth} {children} {usage} }
}

/// A playground link pre-filled with this run's settings.
fn rerun_href(run: &Run) -> String {
    let tags = run.tags.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
    let context = match &run.context {
        Value::Null => String::new(),
        Value::Object(map) if map.is_empty() => String::new(),
        other => format::pretty_json(other),
    };
    let max_turns = run.max_turns.to_string();
    let schema = run.result_schema.as_ref().map(format::pretty_json).unwrap_or_default();
    let timeout = run.approval.timeout_s.map(|t| t.to_string()).unwrap_or_default();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("prompt", run.initial_prompt.as_str()),
        ("system_prompt", run.system_prompt.as_deref().unwrap_or("")),
        ("model", run.model.as_str()),
        ("tags", tags.as_str()),
        ("context", context.as_str()),
        ("max_turns", max_turns.as_str()),
        ("tools_present", "1"),
        ("approval_timeout_s", timeout.as_str()),
        ("result_schema", schema.as_str()),
        ("flags_present", "1"),
        ("interactive", if run.interactive { "true" } else { "" }),
        ("call_summarization", if run.call_summarization { "true" } else { "" }),
    ];
    let metadata = match run.metadata.is_empty() {
        true => String::new(),
        false => format::pretty_json(&Value::Object(run.metadata.clone())),
    };
    let input = run.input.as_ref().map(format::pretty_json).unwrap_or_default();
    let agent_version = run.agent_version.map(|v| v.to_string()).unwrap_or_default();
    pairs.extend([
        ("metadata", metadata.as_str()),
        ("input", input.as_str()),
        ("reasoning_traces", if run.reasoning_traces { "true" } else { "" }),
    ]);
    if let Some(agent) = run.agent_id.as_deref() {
        pairs.extend([("agent_id", agent), ("agent_version", agent_version.as_str())]);
    }
    pairs.extend(run.tools.iter().map(|t| ("tools", t.as_str())));
    let approval_tools: Vec<&str> = match &run.approval.tools {
        Some(ApprovalTools::All(_)) => run.tools.iter().map(String::as_str).collect(),
        _ => run.approval.listed_tools().iter().map(String::as_str).collect(),
    };
    pairs.extend(approval_tools.into_iter().map(|t| ("approval_tools", t)));
    format!("/playground?{}", format::query_string(pairs))
}
