//! The trace page's scores: what people, programs and scorers judged of the
//! run (a summary per score name, then each score with its value, who gave
//! it, why, and when), and for operators a form to add their own. Loaded
//! with the page, again when the run's status changes and after a score is
//! added. Ingested runs are scored too (runlens did not run them, but
//! anyone may judge them). Hidden for a viewer when the run has no scores.

use leptos::html::Form;
use leptos::prelude::*;
use runlens_engine::model::{Role, Score, ScoreSource, ScoreSummary, ScoreValue, MAX_SCORE_NAME_CHARS};

use crate::api::scores::{get_run_scores, AddRunScore, RunScores};
use crate::format;

/// The page's scores and the form's action, page-level (like the trace's own).
#[derive(Clone, Copy)]
pub struct PageScores {
    list: crate::resource::Res<Result<Option<RunScores>, ServerFnError>>,
    add: ServerAction<AddRunScore>,
}

/// Creates the page's [`PageScores`] for run `id` and provides it to [`ScoresSection`].
pub fn provide(id: Memo<String>, status_changed: RwSignal<u64>) {
    let add = ServerAction::<AddRunScore>::new();
    let list = crate::resource::new(
        move || (id.get(), status_changed.get(), add.version().get()),
        |(id, ..)| get_run_scores(id),
    );
    provide_context(PageScores { list, add });
}

/// The section, where the trace page mounts it; `role`: the caller's in the run's project.
#[component]
pub fn ScoresSection(run_id: String, role: Option<Role>) -> impl IntoView {
    let Some(PageScores { list, add }) = use_context::<PageScores>() else {
        return ().into_any();
    };
    let can_score = role.is_some_and(|r| r >= Role::Operator);
    view! {
        <Transition fallback=|| ()>
            {move || {
                let run_id = run_id.clone();
                Suspend::new(async move {
                    match list.await {
                        Ok(Some(data)) if can_score || !data.scores.is_empty() => {
                            view! { <ScoresBody data run_id add can_score/> }.into_any()
                        }
                        _ => ().into_any(),
                    }
                })
            }}
        </Transition>
    }
    .into_any()
}

#[component]
fn ScoresBody(data: RunScores, run_id: String, add: ServerAction<AddRunScore>, can_score: bool) -> impl IntoView {
    let count = data.scores.len();
    let summary = (!data.summary.is_empty()).then(|| {
        let chips = data.summary.into_iter().map(summary_chip).collect::<Vec<_>>();
        view! { <ul class="score-summary" aria-label="Summary by name" data-testid="score-summary">{chips}</ul> }
    });
    let table = (count > 0).then(|| {
        let rows = data.scores.into_iter().rev().map(score_row).collect::<Vec<_>>();
        view! {
            <div class="table-scroll">
                <table class="table scores" data-testid="scores-table">
                    <caption class="visually-hidden">"Scores, newest first"</caption>
                    <thead>
                        <tr>
                            <th scope="col">"Name"</th>
                            <th scope="col">"Value"</th>
                            <th scope="col">"By"</th>
                            <th scope="col">"Comment or reason"</th>
                            <th scope="col">"On"</th>
                            <th scope="col">"When"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        }
    });
    let empty = (count == 0).then(|| {
        view! {
            <p class="muted" data-testid="scores-empty">
                "No scores yet. Score this run below, from a program with " <code>"POST /api/scores"</code>
                ", or with built-in scorers: " <code>"POST /api/runs/…/evaluate"</code> "."
            </p>
        }
    });
    view! {
        <section class="section" id="scores" data-testid="scores" aria-labelledby="scores-title">
            <h2 id="scores-title">"Scores " <span class="count">{count}</span></h2>
            {summary}
            {table}
            {empty}
            {can_score.then(|| view! { <ScoreForm run_id add/> })}
        </section>
    }
}

fn summary_chip(s: ScoreSummary) -> impl IntoView {
    let yes_no = s.yes + s.no;
    let value = match (s.mean, s.labels.first()) {
        // Only yes/no values: how many were yes.
        (Some(_), _) if yes_no == s.count => format!("yes {} of {yes_no}", s.yes),
        (Some(mean), _) => format!("mean {}", ScoreValue::Number(mean).display()),
        (None, Some((label, n))) => format!("{label} ×{n}"),
        (None, None) => String::new(),
    };
    let more = if s.labels.len() > 1 { format!(" (+{} more labels)", s.labels.len() - 1) } else { String::new() };
    let name = s.name.clone();
    view! {
        <li class="score-chip" data-testid="score-chip" data-name=name>
            <strong>{s.name}</strong> " " {value} {more} " "
            <span class="muted">{format!("· {} {}", s.count, if s.count == 1 { "score" } else { "scores" })}</span>
        </li>
    }
}

fn score_row(s: Score) -> impl IntoView {
    let (class, shown) = match &s.value {
        ScoreValue::Bool(true) => ("badge badge-done", "yes".to_owned()),
        ScoreValue::Bool(false) => ("badge badge-failed", "no".to_owned()),
        v => ("score-value", v.display()),
    };
    let by = match s.source {
        ScoreSource::Scorer => format!("scorer · {}", s.scorer.as_deref().unwrap_or("?")),
        ScoreSource::Api => format!("API · {}", s.author.name),
        ScoreSource::Human => s.author.name.clone(),
    };
    let on = match (&s.call_id, s.step_index) {
        (Some(call), _) => view! { <a href=format!("#call-{call}")>"call " {format::short_id(call)}</a> }.into_any(),
        (None, Some(step)) => view! { <a href=format!("#step-{step}")>"step " {step}</a> }.into_any(),
        (None, None) => view! { <span class="muted">"the run"</span> }.into_any(),
    };
    let name = s.name.clone();
    // A judge's label beside its score, and its own run one click away.
    let label = s.label.map(|l| view! { " " <span class="badge" data-testid="score-label">{l}</span> });
    let judge = s.judge_run_id.map(|id| {
        view! { " " <a href=format!("/runs/{id}") data-testid="judge-run">"judge's run"</a> }
    });
    view! {
        <tr data-testid="score-row" data-name=name data-source=s.source.as_str()>
            <td>{s.name}</td>
            <td><span class=class>{shown}</span>{label}</td>
            <td>{by}</td>
            <td class="score-comment">{s.comment.unwrap_or_default()}{judge}</td>
            <td class="nowrap">{on}</td>
            <td class="nowrap" title=s.created_at.to_rfc3339()>{format::time(&s.created_at)}</td>
        </tr>
    }
}

/// The operator's form: a name, a value (yes/no, a number or a label),
/// what it judges (the run, a step, or a tool call), and an optional
/// comment. A plain form post without JavaScript.
#[component]
fn ScoreForm(run_id: String, add: ServerAction<AddRunScore>) -> impl IntoView {
    let form = NodeRef::<Form>::new();
    // Clear the form once a score was kept.
    Effect::new(move |previous: Option<usize>| {
        let version = add.version().get();
        let kept = add.value().with_untracked(|v| matches!(v, Some(Ok(()))));
        if previous.is_some_and(|p| p != version) && kept {
            if let Some(form) = form.get_untracked() {
                form.reset();
            }
        }
        version
    });
    let error = crate::components::form_error::error_line(add.value(), "score-error");
    let pending = add.pending();
    view! {
        <ActionForm action=add node_ref=form attr:class="score-form" attr:data-testid="score-form">
            <input type="hidden" name="run_id" value=run_id/>
            <label class="field">
                <span>"Name"</span>
                <input name="name" required maxlength=MAX_SCORE_NAME_CHARS list="score-names"
                    placeholder="correct" autocomplete="off" data-testid="score-name"
                    aria-describedby="score-error"/>
            </label>
            <label class="field">
                <span>"Value " <em>"(yes / no, a number, or a label)"</em></span>
                <input name="value" required placeholder="yes" autocomplete="off" data-testid="score-value"
                    aria-describedby="score-error"/>
            </label>
            <label class="field">
                <span>"On " <em>"(blank: the run; step N; or a call's id)"</em></span>
                <input name="on" maxlength="140" placeholder="the run" autocomplete="off" data-testid="score-on"
                    aria-describedby="score-error"/>
            </label>
            <label class="field grow">
                <span>"Comment " <em>"(optional)"</em></span>
                <input name="comment" maxlength="4000" autocomplete="off" data-testid="score-comment"/>
            </label>
            <datalist id="score-names">
                <option value="correct"></option>
                <option value="helpfulness"></option>
                <option value="tone"></option>
            </datalist>
            <button type="submit" class="button" data-testid="score-submit" disabled=move || pending.get()>
                {move || if pending.get() { "Saving…" } else { "Add score" }}
            </button>
            {error}
        </ActionForm>
    }
}
