//! A child run nested under the agent call that started it: a `<details>`
//! whose summary says which agent runs, how it is doing and where its own
//! trace is, and which, unfolded, shows the run in brief — its prompt, its
//! answer, its first steps with their tool calls — loaded then
//! (`get_child_brief`). A child's own agent calls nest the same way.
//!
//! What was loaded and which children are unfolded live at page level
//! ([`Briefs`]): a live refresh rebuilds the step tree, and an unfolded child
//! stays unfolded with its brief. A brief is loaded again when the child's
//! summary in the refreshed trace shows it moved on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use leptos::prelude::*;
use runlens_engine::model::{Run, RunOutput, Step, ToolCall};

use crate::api::run_tree::{agent_name, get_child_brief, ChildBrief};
use crate::components::token_chart::thousands;
use crate::components::tool_result::ToolResult;
use crate::components::{server_error_message, Badge, JsonBlock, OutcomeBadge};
use crate::format;

/// The page's unfolded children and their loaded briefs.
#[derive(Clone, Copy)]
pub struct Briefs {
    loaded: RwSignal<HashMap<String, Result<ChildBrief, String>>>,
    open: RwSignal<HashSet<String>>,
}

impl Briefs {
    pub fn new() -> Self {
        Briefs { loaded: RwSignal::new(HashMap::new()), open: RwSignal::new(HashSet::new()) }
    }

    /// Loads (again) the brief of child run `id`.
    fn load(self, id: String) {
        leptos::task::spawn_local(async move {
            let got = match get_child_brief(id.clone()).await {
                Ok(Some(brief)) => Ok(brief),
                Ok(None) => Err("The child run is gone.".to_string()),
                Err(e) => Err(server_error_message(&e)),
            };
            self.loaded.try_update(|map| {
                map.insert(id, got);
            });
        });
    }
}

impl Default for Briefs {
    fn default() -> Self {
        Self::new()
    }
}

/// What tells whether a loaded brief is out of date.
fn progress(run: &Run) -> (String, u32, chrono::DateTime<chrono::Utc>) {
    (run.status.as_str().to_string(), run.step_count, run.updated_at)
}

/// A child run under its call: summary, link to its trace, and its brief
/// when unfolded. `names`: agent names by id.
#[component]
pub fn ChildRunView(child: Run, names: Arc<Vec<(String, String)>>) -> impl IntoView {
    let briefs = use_context::<Briefs>().unwrap_or_default();
    let id = child.id.clone();
    // A refreshed summary that moved on makes an unfolded brief stale.
    {
        let (id, now) = (id.clone(), progress(&child));
        Effect::new(move |_| {
            let open = briefs.open.with_untracked(|o| o.contains(&id));
            let stale = briefs.loaded.with_untracked(|l| match l.get(&id) {
                Some(Ok(b)) => progress(&b.run) != now,
                _ => false,
            });
            if open && stale {
                briefs.load(id.clone());
            }
        });
    }
    let on_toggle = {
        let id = id.clone();
        move |ev: leptos::ev::Event| {
            let opened = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
            let was = briefs.open.with_untracked(|o| o.contains(&id));
            if opened == was {
                return;
            }
            briefs.open.update(|o| {
                if opened {
                    o.insert(id.clone());
                } else {
                    o.remove(&id);
                }
            });
            if opened {
                briefs.load(id.clone());
            }
        }
    };
    let is_open = {
        let id = id.clone();
        move || briefs.open.with(|o| o.contains(&id))
    };
    let href = format!("/runs/{}", format::url_encode(&child.id));
    let agent = child.agent_id.as_deref().map(|a| agent_name(&names, a)).unwrap_or_else(|| "run".into());
    let version = child.agent_version.map(|v| format!(" v{v}")).unwrap_or_default();
    let status = child.status.as_str();
    let body = {
        let (id, names) = (id.clone(), names.clone());
        move || {
            let names = names.clone();
            briefs.loaded.with(|l| match l.get(&id) {
                None => view! { <p class="loading">"Loading the child run…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="inline-error">{e.clone()}</p> }.into_any(),
                Some(Ok(brief)) => view! { <BriefView brief=brief.clone() names/> }.into_any(),
            })
        }
    };
    view! {
        <details class="child-run" data-testid="child-run" data-run-id=id.clone() data-status=status
            open=is_open on:toggle=on_toggle>
            <summary>
                <span class="child-mark" aria-hidden="true">"↳"</span>
                <span class="muted">"child run"</span>
                <span class="mono tool-name" data-testid="child-run-agent">{agent}</span>
                <span class="sub">{version}</span>
                <OutcomeBadge outcome=child.outcome.clone() status=child.status testid="child-run-status"
                    note_testid="child-run-outcome"/>
                <span class="metric">{child.step_count} {if child.step_count == 1 { " step" } else { " steps" }}</span>
                <span class="metric">{thousands(child.usage.total_tokens)} " tok"</span>
            </summary>
            // The link to the child's own trace sits in the body, not in the
            // summary: a link inside the summary (itself a control) is a
            // nested control, which screen readers and keyboards handle badly.
            <div class="child-body">
                <p class="child-open">
                    <a href=href data-testid="child-run-link" title=child.id.clone()>"Open its trace →"</a>
                </p>
                {body}
            </div>
        </details>
    }
}

/// A child run in brief: its prompt, its answer and its first steps.
#[component]
fn BriefView(brief: ChildBrief, names: Arc<Vec<(String, String)>>) -> impl IntoView {
    let ChildBrief { run, steps, more_steps, children, agents } = brief;
    // Names the child knows beside those of the page.
    let names: Arc<Vec<(String, String)>> = Arc::new(names.iter().cloned().chain(agents).collect());
    let children = Arc::new(children);
    let href = format!("/runs/{}", format::url_encode(&run.id));
    let answer = answer_view(&run);
    let step_views = steps
        .into_iter()
        .map(|step| view! { <BriefStep step children=children.clone() names=names.clone()/> })
        .collect::<Vec<_>>();
    view! {
        <div class="child-brief" data-testid="child-brief">
            <div class="label">"Prompt"</div>
            <pre class="text" data-testid="child-prompt">{run.initial_prompt.clone()}</pre>
            <div class="label">"Answer"</div>
            {answer}
            <div class="label">"Steps"</div>
            <ol class="brief-steps">{step_views}</ol>
            {more_steps.then(|| view! {
                <p class="muted">"More steps on " <a href=href.clone()>"its own trace"</a> "."</p>
            })}
        </div>
    }
}

/// What a run ended with, or that it has not yet.
fn answer_view(run: &Run) -> AnyView {
    match run.output_union() {
        Some(RunOutput::Structured { value }) => view! { <JsonBlock value testid="child-answer"/> }.into_any(),
        Some(RunOutput::LastMessage { message, value }) => view! {
            <pre class="text" data-testid="child-answer">{message.unwrap_or_default()}</pre>
            {value.filter(|v| !v.is_string()).map(|value| view! { <JsonBlock value/> })}
        }
        .into_any(),
        Some(RunOutput::Error { message }) => {
            view! { <pre class="text error-text" data-testid="child-answer">{message}</pre> }.into_any()
        }
        None => view! {
            <p class="muted" data-testid="child-answer-pending">"Not finished: " {run.status.as_str().replace('_', " ")} "."</p>
        }
        .into_any(),
    }
}

/// One step of a child run in brief: its text and its tool calls.
#[component]
fn BriefStep(step: Step, children: Arc<Vec<Run>>, names: Arc<Vec<(String, String)>>) -> impl IntoView {
    let text = step.response.text().map(str::to_string).filter(|t| !t.is_empty());
    let handoff = step.kind == "handoff";
    let calls = step
        .tool_calls
        .into_iter()
        .map(|call| view! { <BriefCall call children=children.clone() names=names.clone()/> })
        .collect::<Vec<_>>();
    view! {
        <li class="brief-step" class:step-handoff=handoff data-testid="child-step" data-kind=step.kind.clone()>
            <span class="step-index">"#" {step.index}</span> " "
            <span class="mono">{step.kind.clone()}</span>
            {text.map(|t| view! { <pre class="text">{t}</pre> })}
            {(!calls.is_empty()).then(|| view! { <div class="tool-calls">{calls}</div> })}
        </li>
    }
}

/// One tool call of a child run in brief; an agent call nests its own child.
#[component]
fn BriefCall(call: ToolCall, children: Arc<Vec<Run>>, names: Arc<Vec<(String, String)>>) -> impl IntoView {
    let status = call.status.as_str();
    let nested = call.child_run_id.as_ref().and_then(|id| children.iter().find(|c| &c.id == id)).cloned();
    let nested = nested.map(|child| view! { <ChildRunView child names=names.clone()/> }.into_any());
    view! {
        <div class="brief-call" data-testid="child-call" data-tool=call.tool_name.clone() data-status=status>
            <div class="invocation-head">
                <span class="mono tool-name">{call.tool_name.clone()}</span>
                <Badge status=status/>
            </div>
            {call.reasoning.map(|r| view! { <p class="reasoning">{r}</p> })}
            <JsonBlock value=call.arguments testid="child-call-args"/>
            {call.result.map(|value| view! { <ToolResult value testid="child-call-result"/> })}
            {call.error.map(|e| view! { <pre class="text error-text">{e}</pre> })}
            {nested}
        </div>
    }
}

/// The runs of the trace page's tree its tool calls can nest.
#[derive(Clone, Default)]
pub struct TreeInfo {
    pub children: Arc<Vec<Run>>,
    pub names: Arc<Vec<(String, String)>>,
}

/// What an agent call shows of child run `id`: the run, nested, when the
/// page knows it, else a link to its trace.
pub fn nested_child(id: &str) -> AnyView {
    let info = use_context::<TreeInfo>().unwrap_or_default();
    match info.children.iter().find(|c| c.id == id).cloned() {
        Some(child) => view! { <ChildRunView child names=info.names.clone()/> }.into_any(),
        None => {
            let href = format!("/runs/{}", format::url_encode(id));
            view! {
                <p class="child-run-link">
                    "↳ child run " <a href=href data-testid="child-run-link" class="mono">{id.to_string()}</a>
                </p>
            }
            .into_any()
        }
    }
}
