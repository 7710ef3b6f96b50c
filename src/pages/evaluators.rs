//! `/evaluators`: the project's online evaluators — what each watches, its
//! sample, its scorers, the runs it has looked at and scored — with a form
//! that makes one and, for operators, Turn off/on and Delete. Their scores
//! show in the runs list, whose Score filter finds them.

use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::model::{Evaluator, Role};

use crate::api::evaluators::{get_evaluators, CreateEvaluator, EvaluatorsView, RemoveEvaluator, SwitchEvaluator};
use crate::components::Loaded;
use crate::format;

/// What an evaluator watches, in words.
fn watches(e: &Evaluator) -> String {
    let t = &e.target;
    let mut parts = Vec::new();
    if let Some(agent) = &t.agent_id {
        parts.push(format!("agent {agent}"));
    }
    if let Some(tag) = &t.tag {
        parts.push(format!("tag {tag}"));
    }
    if let Some(service) = &t.service {
        parts.push(format!("service {service}"));
    }
    if parts.is_empty() {
        "every run".into()
    } else {
        parts.join(" · ")
    }
}

/// Its scorers, as `name (kind)`.
fn scorers(e: &Evaluator) -> String {
    e.scorers.iter().map(|s| format!("{} ({})", s.score_name(), s.scorer.kind())).collect::<Vec<_>>().join(", ")
}

#[component]
pub fn EvaluatorsPage() -> impl IntoView {
    let create = ServerAction::<CreateEvaluator>::new();
    let switch = ServerAction::<SwitchEvaluator>::new();
    let remove = ServerAction::<RemoveEvaluator>::new();
    let list = crate::resource::new(
        move || (create.version().get(), switch.version().get(), remove.version().get()),
        |_| get_evaluators(),
    );
    view! {
        <Title text="Evaluators · runlens"/>
        <div class="page-head">
            <h1>"Evaluators"</h1>
        </div>
        <p class="muted">
            "Scorers that score a share of the runs that end from now on — of an agent, a tag, an ingested "
            "service, or every run. Their scores show in the " <a href="/runs">"runs list"</a>
            ", whose Score filter finds them (" <code>"judge<0.5"</code> "). Also through the API ("
            <a href="/api/docs#tag/evaluators">"evaluators"</a> ")."
        </p>
        <Loaded load=move || async move { list.await } loading="Loading the evaluators…" keep_previous=true let:view>
            <EvaluatorsBody view create switch remove/>
        </Loaded>
    }
}

#[component]
fn EvaluatorsBody(
    view: EvaluatorsView,
    create: ServerAction<CreateEvaluator>,
    switch: ServerAction<SwitchEvaluator>,
    remove: ServerAction<RemoveEvaluator>,
) -> impl IntoView {
    let EvaluatorsView { evaluators, agents, models, role } = view;
    let operator = role.is_some_and(|r| r >= Role::Operator);
    let table = if evaluators.is_empty() {
        view! { <p class="empty" data-testid="evaluators-empty">"No evaluators yet."</p> }.into_any()
    } else {
        let rows = evaluators.into_iter().map(|e| evaluator_row(e, operator, switch, remove)).collect::<Vec<_>>();
        view! {
            <div class="table-scroll">
                <table class="table" data-testid="evaluators-table">
                    <thead>
                        <tr>
                            <th scope="col">"Name"</th>
                            <th scope="col">"Watches"</th>
                            <th scope="col">"Sample"</th>
                            <th scope="col">"Scorers"</th>
                            <th scope="col">"Runs seen"</th>
                            <th scope="col">"Scored"</th>
                            <th scope="col">"State"</th>
                            <th scope="col"><span class="visually-hidden">"Actions"</span></th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        }
        .into_any()
    };
    let form = operator.then(|| view! { <EvaluatorForm create agents models/> });
    view! { {table} {form} }
}

fn evaluator_row(
    e: Evaluator,
    operator: bool,
    switch: ServerAction<SwitchEvaluator>,
    remove: ServerAction<RemoveEvaluator>,
) -> impl IntoView {
    let (watch, scorer_text) = (watches(&e), scorers(&e));
    let state = if e.enabled { ("badge badge-done", "on") } else { ("badge badge-cancelled", "off") };
    let actions = operator.then(|| {
        let (id, again) = (e.id.clone(), e.id.clone());
        let (label, next) = if e.enabled { ("Turn off", "false") } else { ("Turn on", "true") };
        view! {
            <ActionForm action=switch attr:class="inline-form">
                <input type="hidden" name="id" value=id/>
                <input type="hidden" name="enabled" value=next/>
                <button type="submit" class="button" data-testid="evaluator-switch">{label}</button>
            </ActionForm>
            <ActionForm action=remove attr:class="inline-form">
                <input type="hidden" name="id" value=again/>
                <button type="submit" class="button danger" data-testid="evaluator-delete">"Delete"</button>
            </ActionForm>
        }
    });
    let runs_href = e.scorers.first().map(|s| format!("/runs?score={}", format::url_encode(&s.score_name())));
    view! {
        <tr data-testid="evaluator-row" data-name=e.name.clone()>
            <td>{e.name.clone()}</td>
            <td>{watch}</td>
            <td data-testid="evaluator-sample">{format!("{} %", e.sample_percent)}</td>
            <td>{scorer_text}</td>
            <td data-testid="evaluator-seen">{e.runs_seen}</td>
            <td data-testid="evaluator-scored">
                {match runs_href {
                    Some(href) => view! { <a href=href title="The runs with its score">{e.runs_scored}</a> }.into_any(),
                    None => view! { {e.runs_scored} }.into_any(),
                }}
            </td>
            <td><span class=state.0 data-testid="evaluator-state">{state.1}</span></td>
            <td class="nowrap">{actions}</td>
        </tr>
    }
}

#[component]
fn EvaluatorForm(
    create: ServerAction<CreateEvaluator>,
    agents: Vec<crate::api::AgentChoice>,
    models: Vec<String>,
) -> impl IntoView {
    let agent_options = agents
        .into_iter()
        .map(|a| view! { <option value=format!("agent:{}", a.id)>{format!("runs of agent {}", a.name)}</option> })
        .collect::<Vec<_>>();
    let judge_options = models
        .into_iter()
        .map(|m| view! { <option value=format!("judge:{m}")>{format!("LLM as judge: {m} (setting: the rubric)")}</option> })
        .collect::<Vec<_>>();
    let error = crate::components::form_error::error_line(create.value(), "evaluator-error");
    view! {
        <section class="section" aria-labelledby="new-evaluator">
            <h2 id="new-evaluator">"New evaluator"</h2>
            <ActionForm action=create attr:class="experiment-form" attr:data-testid="new-evaluator">
                <label class="field">
                    <span>"Name"</span>
                    <input type="text" name="name" required maxlength="200" autocomplete="off"
                        data-testid="evaluator-name" aria-describedby="evaluator-error"/>
                </label>
                <label class="field">
                    <span>"Watch"</span>
                    <select name="watch" data-testid="evaluator-watch">
                        <option value="all" selected>"every run"</option>
                        {agent_options}
                        <option value="tag">"runs with the tag below"</option>
                        <option value="service">"runs of the service below"</option>
                    </select>
                </label>
                <label class="field">
                    <span>"Tag " <em>"(key:value)"</em></span>
                    <input type="text" name="tag" maxlength="321" autocomplete="off" placeholder="env:prod"
                        data-testid="evaluator-tag"/>
                </label>
                <label class="field">
                    <span>"Service"</span>
                    <input type="text" name="service" maxlength="256" autocomplete="off" data-testid="evaluator-service"/>
                </label>
                <label class="field">
                    <span>"Sample %"</span>
                    <input type="number" name="sample_percent" min="0" max="100" value="10" required
                        data-testid="evaluator-sample-input"/>
                </label>
                <label class="field">
                    <span>"Scorer"</span>
                    <select name="scorer" data-testid="evaluator-scorer">
                        {judge_options}
                        <option value="contains">"answer contains (setting: the text)"</option>
                        <option value="not_contains">"answer does not contain (setting: the text)"</option>
                        <option value="regex">"answer matches (setting: a regular expression)"</option>
                        <option value="max_turns">"at most N turns (setting: N)"</option>
                    </select>
                </label>
                <label class="field grow">
                    <span>"Setting"</span>
                    <input type="text" name="setting" maxlength="16000" autocomplete="off"
                        placeholder="Answers the question and stays polite." data-testid="evaluator-setting"
                        aria-describedby="evaluator-error"/>
                </label>
                <button type="submit" class="button" data-testid="evaluator-create">"Make evaluator"</button>
                {error}
            </ActionForm>
        </section>
    }
}
