//! `/sessions/:id`: the runs of one session (a conversation or thread),
//! oldest first, with what they add up to: runs, tokens, cost, active
//! time, how they ended and the end users they served. Each run's row links
//! to its trace; the session links back to the runs list filtered to it.

use std::sync::Arc;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use runlens_engine::model::SessionTotals;

use crate::api::{get_session, SessionView};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{Fact, Loaded};
use crate::format;
use crate::pages::runs::RunsTable;
use crate::pages::to_review::{AddToReview, ReviewTarget};

#[component]
pub fn SessionPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let session = crate::resource::new(move || id.get(), get_session);
    view! {
        <Loaded load=move || async move { session.await } loading="Loading the session…" keep_previous=true let:view>
            <SessionDetail view/>
        </Loaded>
    }
}

#[component]
fn SessionDetail(view: SessionView) -> impl IntoView {
    let SessionView { session, agents, now, role } = view;
    let id = session.session_id.clone();
    let title = format::rcdata_text(&format!("Session {id} · runlens"));
    let list_href = format!("/runs?{}", format::query_string([("session_id", id.as_str())]));
    let names: Vec<(String, String)> = agents.into_iter().map(|a| (a.id, a.name)).collect();
    let truncated = session.truncated.then(|| {
        view! {
            <p class="muted" data-testid="session-truncated">
                "The session has more runs: these are its latest " {session.runs.len()} ", and the totals are theirs."
            </p>
        }
    });
    let runs: Vec<_> = session.runs.into_iter().zip(session.costs_usd).collect();
    let has_runs = !runs.is_empty();
    let review_target = ReviewTarget::Session(id.clone());
    let table = match runs.is_empty() {
        true => view! {
            <p class="muted" data-testid="session-empty">
                "No run of this project is in this session. A run joins one with "
                <code>"session_id"</code> " when it is created, or when its trace's spans name it."
            </p>
        }
        .into_any(),
        false => view! { <RunsTable runs now names=Arc::new(names)/> }.into_any(),
    };
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/runs">"Runs"</a> " / session"</div>
                <h1>"Session " <span class="mono" data-testid="session-title">{id}</span></h1>
            </div>
            <div class="actions">
                <a class="button subtle" href=list_href data-testid="session-in-list">"In the runs list"</a>
            </div>
        </div>
        <SessionFacts totals=session.totals/>
        {has_runs.then(|| view! { <AddToReview target=review_target role/> })}
        {truncated}
        <section class="section">
            <h2>"Runs " <span class="count">"oldest first"</span></h2>
            {table}
        </section>
    }
}

/// The session's totals as facts.
#[component]
fn SessionFacts(totals: SessionTotals) -> impl IntoView {
    let statuses = totals.statuses.iter().map(|(status, n)| format!("{n} {status}")).collect::<Vec<_>>().join(", ");
    let users = match totals.end_users.is_empty() {
        true => format::NONE.to_owned(),
        false => totals.end_users.join(", "),
    };
    let span = match (totals.first_at, totals.last_at) {
        (Some(first), Some(last)) => format!("{} – {} UTC", format::time(&first), format::time(&last)),
        _ => format::NONE.to_owned(),
    };
    view! {
        <dl class="facts" data-testid="session-totals">
            <Fact label="Runs"><span data-testid="session-runs">{totals.runs}</span></Fact>
            <Fact label="Tokens">{thousands(totals.usage.total_tokens)}</Fact>
            <Fact label="Cost">{cost_text(totals.cost_usd)}</Fact>
            <Fact label="Active time">{format::duration_ms(totals.duration_ms)}</Fact>
            <Fact label="Ended">
                <span data-testid="session-statuses">{statuses}</span>
                {(totals.with_issues > 0).then(|| view! { " · " {totals.with_issues} " with issues" })}
            </Fact>
            <Fact label="End users"><span data-testid="session-users">{users}</span></Fact>
            <Fact label="Activity">{span}</Fact>
        </dl>
    }
}
