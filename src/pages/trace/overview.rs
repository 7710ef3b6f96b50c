//! The trace page's pictures of a run: the timeline of the steps shown and
//! the token chart of the whole run, side by side with the page's pager.
//!
//! A short run's chart is drawn from its steps, on the server. A long
//! (paged) run's chart needs all of its steps: the browser asks the server for
//! at most `MAX_BARS` buckets after the page is up ([`BigChart`]), so the
//! first screen never waits for it; a live long run re-asks every 100 steps
//! and when it finishes.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::Step;

use crate::api::trace_scan::{buckets_of, get_token_chart, TokenBucket};
use crate::api::trace_window::{LiveTrace, STEP_PAGE};
use crate::components::server_error_message;
use crate::components::timeline::Timeline;
use crate::components::token_chart::TokenChart;
use crate::format;
use crate::live_updates::Latest;

/// The token chart of a long run, loaded after the page is up.
#[derive(Clone, Copy)]
pub struct BigChart {
    loaded: RwSignal<Option<Result<Vec<TokenBucket>, String>>>,
    /// The run the chart is of.
    run: StoredValue<Option<String>>,
    /// Run id, finished, hundreds of steps: reloaded when that changes.
    latest: Latest<(String, bool, u32)>,
}

impl BigChart {
    pub fn new() -> Self {
        BigChart { loaded: RwSignal::new(None), run: StoredValue::new(None), latest: Latest::new() }
    }

    /// Loads the chart of `view`'s run if it is paged and changed enough;
    /// a chart shown stays while it reloads, unless it is another run's.
    pub fn track(self, view: &LiveTrace) {
        if !view.paged() {
            return;
        }
        let id = view.run.id.clone();
        if self.run.with_value(|r| r.as_deref() != Some(id.as_str())) {
            self.run.set_value(Some(id.clone()));
            self.loaded.set(None);
        }
        let key = (id, view.run.status.is_terminal(), view.run.step_count / 100);
        self.latest.want(key, move |key: (String, bool, u32)| async move {
            let got = get_token_chart(key.0.clone()).await.map_err(|e| server_error_message(&e));
            if self.run.try_with_value(|r| r.as_deref() == Some(key.0.as_str())) == Some(true) {
                self.loaded.try_set(Some(got));
            }
        });
    }
}

/// Timeline and token chart of the run on the page.
#[component]
pub fn Overview(view: LiveTrace, chart: BigChart, live: super::stream::Live) -> impl IntoView {
    let paged = view.paged();
    let now: DateTime<Utc> = view.now;
    let caption = match (paged, view.steps.first(), view.steps.last()) {
        (true, Some(a), Some(b)) => format!("steps #{}–#{} (this page)", a.index, b.index),
        _ => "all steps".to_string(),
    };
    let steps: Vec<Step> = view.steps.clone();
    // A fork's steps from before it was made are its parent's.
    let run = &view.run;
    let own_since = (run.forked_from_step.is_some() || run.forked_from_message_id.is_some()).then_some(run.created_at);
    // While the run is active the timeline is drawn against the page's
    // clock: running work grows.
    let clock = super::clock::LiveClock::get().filter(|_| !run.status.is_terminal());
    // The model turn under way is not stored until the model answers: the
    // stream's `step.started` draws it meanwhile.
    let run_id = run.id.clone();
    let active = !run.status.is_terminal();
    let timeline = move || {
        let now = clock.map_or(now, |c| c.now(now));
        let mut steps = steps.clone();
        let turn = live.turn_started.get().filter(|(i, _)| active && steps.last().is_none_or(|s| *i > s.index));
        if let Some((index, started_at)) = turn {
            steps.push(turn_under_way(&run_id, index, started_at));
        }
        view! { <Timeline steps now own_since/> }
    };
    let tokens = match paged {
        false => {
            let buckets = buckets_of(&view.steps, &view.run.model, &view.pricing);
            view! { <TokenChart buckets/> }.into_any()
        }
        true => (move || match chart.loaded.get() {
            None => {
                view! { <p class="loading" data-testid="token-chart-loading">"Loading the token chart…"</p> }.into_any()
            }
            Some(Err(e)) => view! { <p class="inline-error">{e}</p> }.into_any(),
            Some(Ok(buckets)) => view! { <TokenChart buckets/> }.into_any(),
        })
        .into_any(),
    };
    view! {
        <div class="overview">
            <section class="section card">
                <h2>"Timeline " <span class="count">{caption}</span></h2>
                {timeline}
            </section>
            <section class="section card">
                <h2>"Tokens " <span class="count">"whole run"</span></h2>
                {tokens}
            </section>
        </div>
    }
}

/// A model turn the stream says started and the store does not hold yet,
/// as the timeline draws it: running since `started_at`.
fn turn_under_way(run_id: &str, index: u32, started_at: DateTime<Utc>) -> Step {
    Step {
        id: Step::id_for(run_id, index),
        run_id: run_id.to_owned(),
        index,
        kind: "model_turn".into(),
        status: runlens_engine::model::StepStatus::Running,
        request: Default::default(),
        response: Default::default(),
        usage: Default::default(),
        started_at,
        model_completed_at: None,
        completed_at: None,
        tool_calls: Vec::new(),
    }
}

/// Page links for a paged run: first, previous, next, last, and a box to go
/// to any step (a GET form: it works without JavaScript too).
#[component]
pub fn StepPager(run_id: String, from: u32, step_count: u32) -> impl IntoView {
    let base = format!("/runs/{}", format::url_encode(&run_id));
    let last_page = (step_count.saturating_sub(1) / STEP_PAGE) * STEP_PAGE;
    let to = (from + STEP_PAGE).min(step_count).saturating_sub(1);
    let link = |label: &'static str, target: Option<u32>, testid: &'static str| match target {
        Some(t) => {
            view! { <a class="button subtle" href=format!("{base}?from={t}") data-testid=testid>{label}</a> }.into_any()
        }
        // Inactive: `aria-disabled` says so (and exempts its faded colours from the contrast rule).
        None => {
            view! { <span class="button subtle disabled" role="link" aria-disabled="true">{label}</span> }.into_any()
        }
    };
    let prev = (from > 0).then(|| from.saturating_sub(STEP_PAGE));
    let next = (from < last_page).then_some(from + STEP_PAGE);
    view! {
        <nav class="steps-pager" data-testid="steps-pager">
            {link("« First", prev.map(|_| 0), "steps-first")}
            {link("‹ Prev", prev, "steps-prev")}
            <span class="pager-range" data-testid="steps-range">
                "steps " {from} "–" {to} " of " {step_count}
            </span>
            {link("Next ›", next, "steps-next")}
            {link("Last »", next.map(|_| last_page), "steps-last")}
            <form method="get" action=base.clone() class="inline-form">
                <input type="number" name="from" min="0" max=step_count.saturating_sub(1).to_string()
                    placeholder="step #" aria-label="Go to step" data-testid="steps-goto"/>
                <button type="submit" class="button subtle">"Go"</button>
            </form>
        </nav>
    }
}
