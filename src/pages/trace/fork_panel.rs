//! Time travel on the trace page: the "Fork from here" panel of a completed
//! model step, the marker at the fork point of a fork made from a step, and
//! the replay form and notice of the header.
//!
//! The panel is a `<details>` holding an `ActionForm` (`fork_run`): it works
//! as a plain form post without JavaScript (the server redirects to the
//! fork, or back here with the error, which opens the panel again). Each
//! tool call of the step has a textarea prefilled with its result and a
//! hidden copy of that text, so the server replaces only the results that
//! changed. Like the message editor, its open state and text live in the
//! DOM, so a live refresh keeps what was typed.

use leptos::prelude::*;
use runlens_engine::model::{Replay, ReplayMode, Run, RunStatus, Step};
use serde_json::{json, Value};

use crate::api::{ForkRun, ReplayRun};
use crate::components::tool_result::ResultShape;
use crate::format;

/// The page's fork and replay actions (in context): they outlive the views a
/// live refresh re-creates.
#[derive(Clone, Copy)]
pub struct ForkActions {
    pub fork: ServerAction<ForkRun>,
    pub replay: ServerAction<ReplayRun>,
}

impl ForkActions {
    /// Creates both actions for the page of run `id`. An error is about the
    /// run it was shown on (fork errors name a step index, which every run
    /// has), so moving to another run forgets it; the first run of the
    /// effect keeps the error a plain form post came back with.
    pub fn provide(id: Memo<String>) -> Self {
        let actions = ForkActions { fork: ServerAction::new(), replay: ServerAction::new() };
        provide_context(actions);
        Effect::new(move |previous: Option<String>| {
            let id = id.get();
            if previous.is_some_and(|p| p != id) {
                actions.fork.value().set(None);
                actions.replay.value().set(None);
            }
            id
        });
        actions
    }
}

/// Where a fork made from a step continues its parent.
#[derive(Clone, Debug, PartialEq)]
pub struct ForkPoint {
    pub step: u32,
    pub parent_id: String,
    /// The parent's name (its id when unknown or unnamed).
    pub parent_name: String,
}

impl ForkPoint {
    /// The fork point of `run`, named from its `family` when it is there.
    pub fn of(run: &Run, family: &[runlens_engine::model::FamilyMember]) -> Option<Self> {
        let (step, parent_id) = (run.forked_from_step?, run.parent_run_id.clone()?);
        let parent_name = family
            .iter()
            .find(|m| m.id == parent_id)
            .map(|m| m.name.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| parent_id.clone());
        Some(ForkPoint { step, parent_id, parent_name })
    }
}

/// The line between the inherited steps of a fork and its own.
#[component]
pub fn ForkPointMarker(point: ForkPoint) -> impl IntoView {
    let href = format!("/runs/{}", format::url_encode(&point.parent_id));
    let step_href = format!("{href}#{}", crate::api::trace_scan::step_node_id(point.step));
    view! {
        <div class="fork-point-marker" data-testid="fork-point" data-step=point.step.to_string()>
            <span aria-hidden="true">"⑂ "</span>
            "Forked from " <a href=step_href>"step " {point.step}</a> " of "
            <a href=href data-testid="fork-parent" data-run-id=point.parent_id.clone()>{point.parent_name}</a>
            <span class="muted">" — steps up to it are the parent's (marked inherited), the ones after it this run's own."</span>
        </div>
    }
}

/// One tool call of the step as the panel offers it.
struct CallField {
    id: String,
    tool: String,
    /// The prefilled result text; `None` when it cannot be edited here (a
    /// preview, or a result kept out of the transcript).
    text: Option<String>,
}

/// The result of a call as the model saw it: its value, or `{"error": …}`.
fn result_text(result: Option<&Value>, error: Option<&str>) -> Option<String> {
    match (result, error) {
        (Some(v), _) if ResultShape::of(v) != ResultShape::Plain => None,
        (Some(v), _) => Some(format::pretty_json(v)),
        (None, Some(e)) => Some(format::pretty_json(&json!({ "error": e }))),
        (None, None) => Some("null".into()),
    }
}

/// "Fork from here" on a completed model step (`cut`: the step's or some
/// calls' payloads are previews on this page).
#[component]
pub fn ForkFromHere(
    run_id: String,
    step: Step,
    /// The step's answer is a preview.
    cut: bool,
    /// Calls whose payloads are previews.
    cut_calls: std::sync::Arc<std::collections::HashSet<String>>,
    /// The run's model and tools, shown as what a blank field keeps.
    model: String,
    tools: String,
) -> impl IntoView {
    let Some(actions) = use_context::<ForkActions>() else { return ().into_any() };
    let fork = actions.fork;
    let index = step.index;
    let calls: Vec<CallField> = step
        .tool_calls
        .iter()
        .map(|c| CallField {
            id: c.id.clone(),
            tool: c.tool_name.clone(),
            text: if cut_calls.contains(&c.id) { None } else { result_text(c.result.as_ref(), c.error.as_deref()) },
        })
        .collect();
    let answer_calls: Vec<Value> =
        step.tool_calls.iter().map(|c| json!({ "name": c.tool_name, "arguments": c.arguments })).collect();
    let calls_text =
        if answer_calls.is_empty() || cut { String::new() } else { format::pretty_json(&json!(answer_calls)) };
    let model_text = if cut { String::new() } else { step.response.text().unwrap_or_default().to_string() };
    let has_calls = !calls.is_empty();
    let error = move || {
        fork.value().with(|v| match v {
            Some(Err(e)) if e.is_for(&index) => Some(view! {
                <p class="inline-error" role="alert" data-testid="fork-error">{e.message.clone()}</p>
            }),
            _ => None,
        })
    };
    // Reopened when it comes back with an error (without JavaScript, too).
    let failed = move || fork.value().with(|v| matches!(v, Some(Err(e)) if e.about == Some(index)));
    let pending = Signal::derive(move || {
        fork.pending().get() && fork.input().with(|i| i.as_ref().is_some_and(|i| i.from_step == index))
    });
    let result_fields = result_fields(calls);
    let models = RwSignal::new(Vec::<String>::new());

    view! {
        <details class="fork-from" data-testid="fork-from-step" data-step=index.to_string() open=failed
            on:toggle=models_loader(models)>
            <summary class="button subtle small">"Fork from here"</summary>
            <ActionForm action=fork attr:class="fork-panel" attr:data-testid="fork-panel">
                <input type="hidden" name="run_id" value=run_id/>
                <input type="hidden" name="from_step" value=index.to_string()/>
                <p class="hint">
                    "Starts a new run with this run's history up to the end of step " {index}
                    ", changed as you say here; this run stays as it is."
                </p>
                <ForkModes has_calls/>
                {has_calls.then(|| view! {
                    <div class="fork-group">
                        <div class="label">"Tool results " <em>"(only the ones you change are replaced)"</em></div>
                        {result_fields}
                    </div>
                })}
                <ForkAnswerGroup model_text calls_text/>
                <ForkNextTurnGroup index models model tools/>
                {error}
                <div class="edit-actions">
                    <button type="submit" class="button primary" data-testid="fork-submit"
                        disabled=move || pending.get()>
                        {move || if pending.get() { "Forking…" } else { "Fork" }}
                    </button>
                </div>
            </ActionForm>
        </details>
    }
    .into_any()
}

/// The configured models, asked for once the panel is first opened (they
/// fill `models`, the model field's suggestions).
fn models_loader(models: RwSignal<Vec<String>>) -> impl Fn(leptos::ev::Event) + 'static {
    let asked = RwSignal::new(false);
    move |ev: leptos::ev::Event| {
        let opened = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
        if opened && !asked.get_untracked() {
            asked.set(true);
            leptos::task::spawn_local(async move {
                if let Ok(names) = crate::api::fork_models().await {
                    models.try_set(names);
                }
            });
        }
    }
}

/// The panel's choice: replace tool results (the default when the step
/// called tools), or the model's answer.
#[component]
fn ForkModes(has_calls: bool) -> impl IntoView {
    let results_label =
        if has_calls { "Replace tool results" } else { "Keep this answer (change only the configuration)" };
    view! {
        <fieldset class="fork-modes">
            <legend>"What to change at this step"</legend>
            <label>
                <input type="radio" name="mode" value="results" checked=has_calls
                    data-testid="fork-mode-results"/>
                " " {results_label}
            </label>
            <label>
                <input type="radio" name="mode" value="answer" checked=!has_calls
                    data-testid="fork-mode-answer"/>
                " Replace the model's answer (its tool calls run anew)"
            </label>
        </fieldset>
    }
}

/// One field per tool call: its result to edit, with the call id and the
/// original text beside it; or a note when it cannot be edited here.
fn result_fields(calls: Vec<CallField>) -> Vec<AnyView> {
    let mut field_index = 0usize;
    calls
        .into_iter()
        .map(|call| {
            let label = format!("Result of {} ({})", call.tool, call.id);
            match call.text {
                Some(text) => {
                    let i = field_index;
                    field_index += 1;
                    let rows = (text.lines().count() + 1).clamp(2, 12).to_string();
                    view! {
                        <label class="field">
                            <span>{label}</span>
                            <textarea name=format!("call_results[{i}]") rows=rows spellcheck="false"
                                class="mono" data-testid="fork-tool-result"
                                data-call-id=call.id.clone()>{format::rcdata_text(&text)}</textarea>
                        </label>
                        <input type="hidden" name=format!("call_ids[{i}]") value=call.id.clone()/>
                        <input type="hidden" name=format!("call_originals[{i}]") value=text/>
                    }
                    .into_any()
                }
                None => view! {
                    <p class="hint" data-testid="fork-result-too-long">
                        {label} ": too long to edit here; replace it through the API (POST /api/runs/{id}/fork)."
                    </p>
                }
                .into_any(),
            }
        })
        .collect()
}

/// The model's answer to put in place of the step's (its text and tool calls).
#[component]
fn ForkAnswerGroup(model_text: String, calls_text: String) -> impl IntoView {
    view! {
        <div class="fork-group">
            <div class="label">"The model's answer " <em>"(with “Replace the model's answer”)"</em></div>
            <label class="field">
                <span>"Answer text"</span>
                <textarea name="model_text" rows="3"
                    data-testid="fork-model-text">{format::rcdata_text(&model_text)}</textarea>
            </label>
            <label class="field">
                <span>"Tool calls " <em>"(JSON: [{\"name\": …, \"arguments\": {…}}]; none ends the run)"</em></span>
                <textarea name="model_calls_json" rows="4" spellcheck="false" class="mono"
                    data-testid="fork-model-calls">{format::rcdata_text(&calls_text)}</textarea>
            </label>
        </div>
    }
}

/// The configuration from the next turn on (blank fields keep the run's:
/// `model` and `tools` are shown as placeholders); `models` are the
/// suggestions for the model field (without JavaScript it is plain text).
#[component]
fn ForkNextTurnGroup(index: u32, models: RwSignal<Vec<String>>, model: String, tools: String) -> impl IntoView {
    let models_id = format!("fork-{index}-models");
    let model_options =
        move || models.get().into_iter().map(|m| view! { <option value=m></option> }).collect::<Vec<_>>();
    view! {
        <div class="fork-group">
            <div class="label">"From the next turn " <em>"(blank: as in this run)"</em></div>
            <div class="field-row">
                <label class="field grow">
                    <span>"Model"</span>
                    <input type="text" name="model" data-testid="fork-model" autocomplete="off"
                        list=models_id.clone() placeholder=model/>
                    <datalist id=models_id>{model_options}</datalist>
                </label>
                <label class="field grow">
                    <span>"Tools " <em>"(comma-separated)"</em></span>
                    <input type="text" name="tools" data-testid="fork-tools" autocomplete="off"
                        placeholder=tools/>
                </label>
            </div>
            <label class="field">
                <span>"Model settings " <em>"(a JSON object)"</em></span>
                <textarea name="model_settings_json" rows="2" spellcheck="false" class="mono"
                    data-testid="fork-model-settings"></textarea>
            </label>
            <label class="field">
                <span>"System prompt"</span>
                <textarea name="system_prompt" rows="2" data-testid="fork-system-prompt"></textarea>
            </label>
        </div>
    }
}

/// The header's Replay form of a finished run: run it again, from its
/// recorded answers or with its model, as a new run.
#[component]
pub fn ReplayForm(run_id: String) -> impl IntoView {
    let Some(actions) = use_context::<ForkActions>() else { return ().into_any() };
    let replay = actions.replay;
    let pending = replay.pending();
    let error = move || {
        replay.value().with(|v| match v {
            Some(Err(e)) => Some(view! {
                <span class="inline-error" role="alert" data-testid="replay-error">{e.message.clone()}</span>
            }),
            _ => None,
        })
    };
    view! {
        <ActionForm action=replay attr:class="replay-form" attr:data-testid="replay-form">
            <input type="hidden" name="run_id" value=run_id/>
            <select name="mode" aria-label="Replay mode" data-testid="replay-mode"
                title="recorded: the model's recorded answers, tools run for real; live: the model is called again">
                <option value="recorded" data-testid="replay-recorded">"recorded answers"</option>
                <option value="live" data-testid="replay-live">"live model"</option>
            </select>
            <button type="submit" class="button subtle" data-testid="replay-submit" disabled=move || pending.get()
                title="Run this run again as a new run and see where it stops matching">
                {move || if pending.get() { "Replaying…" } else { "Replay" }}
            </button>
            {error}
        </ActionForm>
    }
    .into_any()
}

/// What a replay run replays and how it compares with the original.
#[component]
pub fn ReplayInfo(replay: Replay, status: RunStatus) -> impl IntoView {
    let mode = match replay.mode {
        ReplayMode::Recorded => "recorded",
        ReplayMode::Live => "live",
    };
    let href = format!("/runs/{}", format::url_encode(&replay.of));
    let outcome = match replay.diverged_at {
        Some(step) => {
            let step_href = format!("#{}", crate::api::trace_scan::step_node_id(step));
            let how = replay.divergence.clone().map(|d| format!(": {d}")).unwrap_or_default();
            view! {
                " — " <strong data-testid="replay-diverged" data-step=step.to_string()>
                    "diverged at " <a href=step_href>"step " {step}</a>
                </strong>
                <span data-testid="replay-divergence">{how}</span>
            }
            .into_any()
        }
        None if status == RunStatus::Done => {
            view! { " — " <strong data-testid="replay-identical">"identical to the original"</strong> }.into_any()
        }
        None if status.is_terminal() => view! { <span>" — ended " {status.as_str()}</span> }.into_any(),
        None => view! { <span class="muted">" — no difference so far"</span> }.into_any(),
    };
    view! {
        <div class="notice replay-info" data-testid="replay-info" data-mode=mode>
            "Replay (" {mode} ") of " <a href=href class="mono" data-testid="replay-of"
                data-run-id=replay.of.clone()>{replay.of.clone()}</a>
            {outcome}
        </div>
    }
}
