//! The table of runs shared by the runs list, an agent's page and a
//! session's page: status, name (with its parent, children, source,
//! session, end user and metadata), agent, model,
//! steps, tokens, cost, duration, creation time.
//!
//! With `select`, each row starts with a tick box belonging to the
//! `compare-runs` form ([`CompareSelected`]): ticking two runs and pressing
//! Compare opens `/compare?run=A&run=B`, a plain GET form that works
//! without JavaScript.

use std::sync::Arc;

use leptos::prelude::*;
use std::collections::BTreeMap;

use runlens_engine::model::{MatchedIn, Metadata, Run, ScoreSummary, ScoreValue, SearchMatch};

use crate::api::run_tree::agent_name;
use crate::components::token_chart::{cost_text, thousands};
use crate::components::OutcomeBadge;
use crate::format;

/// The id of the form the tick boxes belong to.
pub const COMPARE_FORM: &str = "compare-runs";

/// The Compare button and the form the rows' tick boxes submit with.
#[component]
pub fn CompareSelected() -> impl IntoView {
    view! {
        <form id=COMPARE_FORM method="get" action="/compare" class="compare-selected" data-testid="compare-selected">
            <button type="submit" class="button" data-testid="compare-selected-submit"
                title="Tick two runs below, then compare them side by side">"Compare ticked runs"</button>
        </form>
    }
}

/// A table of runs with their costs (`names`: agent names by id); also
/// used by an agent's page.
#[component]
pub fn RunsTable(
    runs: Vec<(Run, Option<f64>)>,
    now: chrono::DateTime<chrono::Utc>,
    names: Arc<Vec<(String, String)>>,
    /// Rows start with a tick box of the [`COMPARE_FORM`] form.
    #[prop(optional)]
    select: bool,
    /// A search's matches: each run's is shown under its name.
    #[prop(optional)]
    matches: Vec<SearchMatch>,
    /// The runs' scores by run id: each run's are shown under its name.
    #[prop(optional)]
    mut scores: BTreeMap<String, Vec<ScoreSummary>>,
) -> impl IntoView {
    let rows = runs
        .into_iter()
        .map(|(run, cost)| {
            let found = matches.iter().find(|m| m.run_id == run.id).cloned();
            let scored = scores.remove(&run.id).unwrap_or_default();
            run_row(run, cost, now, &names, select, found, scored)
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table runs">
            <thead>
                <tr>
                    {select.then(|| view! { <th><span class="visually-hidden">"Compare"</span></th> })}
                    <th>"Status"</th>
                    <th>"Name"</th>
                    <th>"Agent"</th>
                    <th>"Model"</th>
                    <th class="num">"Steps"</th>
                    <th class="num">"Tokens"</th>
                    <th class="num" title="at today's prices (Settings)">"Cost"</th>
                    <th class="num">"Duration"</th>
                    <th>"Created (UTC)"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
}

fn run_row(
    run: Run,
    cost: Option<f64>,
    now: chrono::DateTime<chrono::Utc>,
    names: &[(String, String)],
    select: bool,
    found: Option<SearchMatch>,
    scores: Vec<ScoreSummary>,
) -> impl IntoView {
    let tick = select.then(|| {
        let label = format!("Compare {}", if run.name.trim().is_empty() { &run.id } else { &run.name });
        view! {
            <td class="tick">
                <input type="checkbox" name="run" value=run.id.clone() form=COMPARE_FORM aria-label=label
                    data-testid="run-tick"/>
            </td>
        }
    });
    let href = format!("/runs/{}", format::url_encode(&run.id));
    let name = if run.name.trim().is_empty() { run.id.clone() } else { run.name.clone() };
    let duration = format::opt_duration(run.duration_ms(now));
    let children = (run.child_count > 0).then(|| {
        let n = run.child_count;
        view! {
            <span class="child-count" data-testid="run-child-count" title="runs its agent calls started">
                {n} {if n == 1 { " child run" } else { " child runs" }}
            </span>
        }
    });
    let parent = run.parent_run_id.clone().filter(|_| run.is_child()).map(|p| {
        let href = format!("/runs/{}", format::url_encode(&p));
        view! {
            <span class="child-of" data-testid="run-parent">
                "↳ child of " <a href=href class="mono" title=p.clone()>{format::short_id(&p)}</a>
            </span>
        }
    });
    let agent = run.agent_id.clone().map(|id| {
        let href = format!("/agents/{}", format::url_encode(&id));
        let version = run.agent_version.map(|v| format!(" v{v}")).unwrap_or_default();
        let handed = run.current_agent.clone().filter(|c| *c != id).map(|c| {
            view! { <div class="sub">"now " {agent_name(names, &c)}</div> }
        });
        view! {
            <a href=href data-testid="run-agent">{agent_name(names, &id)}</a>
            <span class="sub">{version}</span>
            {handed}
        }
    });
    let depth = format!("--depth: {}", run.depth);
    let is_child = run.is_child();
    view! {
        <tr data-testid="run-row" data-run-id=run.id.clone() data-status=run.status.as_str()
            data-child=is_child.to_string()>
            {tick}
            <td><OutcomeBadge outcome=run.outcome.clone() status=run.status/></td>
            <td class="name" class:child-row=is_child style=depth>
                <a href=href>{name}</a>
                <div class="sub mono" title=run.id.clone()>{format::short_id(&run.id)}</div>
                {parent}
                {children}
                {run.source.as_ref().map(|s| view! {
                    <span class="tag source" data-testid="run-source"
                        title="recorded from OpenTelemetry spans: runlens did not run it">{s.label()}</span>
                })}
                <SessionChips session=run.session_id.clone() user=run.end_user.clone()/>
                <MetadataChips metadata=run.metadata.clone()/>
                <ScoreChips scores/>
                {found.map(|m| view! { <SearchSnippet found=m/> })}
            </td>
            <td>{agent}</td>
            <td class="mono">{run.model}</td>
            <td class="num">{run.step_count}</td>
            <td class="num">{thousands(run.usage.total_tokens)}</td>
            <td class="num" data-testid="run-row-cost">{cost_text(cost)}</td>
            <td class="num">{duration}</td>
            <td class="nowrap" title=run.created_at.to_rfc3339()>
                {format::time(&run.created_at)}
            </td>
        </tr>
    }
}

/// Scores shown under a run's name at most; the trace page has them all.
const SCORE_CHIPS: usize = 4;

/// A run's scores, one chip per name: `correct yes 2/3`, `helpfulness 0.75`,
/// or `tone ×2` (labels).
#[component]
fn ScoreChips(scores: Vec<ScoreSummary>) -> impl IntoView {
    if scores.is_empty() {
        return ().into_any();
    }
    let more = scores.len().saturating_sub(SCORE_CHIPS);
    let chips = scores
        .into_iter()
        .take(SCORE_CHIPS)
        .map(|s| {
            let value = match s.mean {
                Some(_) if s.yes + s.no == s.count => format!("yes {}/{}", s.yes, s.count),
                Some(mean) => ScoreValue::Number(mean).display(),
                None => format!("×{}", s.count),
            };
            let title = format!("{}: {} {}", s.name, s.count, if s.count == 1 { "score" } else { "scores" });
            let name = s.name.clone();
            view! {
                <span class="tag score" data-testid="run-score" data-name=name title=title>
                    {s.name} " " <strong>{value}</strong>
                </span>
            }
        })
        .collect::<Vec<_>>();
    let more = (more > 0).then(|| view! { <span class="tag score">{format!("+{more}")}</span> });
    view! { <span class="score-chips">{chips}{more}</span> }.into_any()
}

/// Where a run matched a search, linking to the step, and the text around
/// the words found, each word marked (text only: the page escapes it).
#[component]
fn SearchSnippet(found: SearchMatch) -> impl IntoView {
    let run = format::url_encode(&found.run_id);
    let (place, href) = match (found.matched_in, found.step_index) {
        (MatchedIn::Answer, Some(i)) => (format!("step {i}, answer"), format!("/runs/{run}#step-{i}")),
        (MatchedIn::ToolCall, Some(i)) => (format!("step {i}, tool call"), format!("/runs/{run}#step-{i}")),
        (MatchedIn::Message, _) => ("a follow-up".to_owned(), format!("/runs/{run}")),
        _ => ("the run".to_owned(), format!("/runs/{run}")),
    };
    let parts = found
        .snippet
        .into_iter()
        .map(|p| if p.hit { view! { <mark>{p.text}</mark> }.into_any() } else { p.text.into_any() })
        .collect::<Vec<_>>();
    view! {
        <div class="search-match" data-testid="run-match" data-matched-in=format!("{:?}", found.matched_in)>
            <a href=href class="search-place">{place}</a>
            " "
            <span class="snippet">{parts}</span>
        </div>
    }
}

/// A run's session, as a link to the session's page, and its end user, as a
/// link to the runs list of that user; nothing when it has neither.
#[component]
pub fn SessionChips(session: Option<String>, user: Option<String>) -> impl IntoView {
    (session.is_some() || user.is_some()).then(|| {
        let session = session.map(|id| {
            let href = format!("/sessions/{}", format::url_encode(&id));
            view! {
                <a class="tag session" href=href data-testid="run-session" title="the session's runs, oldest first">
                    <span class="tag-key">"session"</span> " " <span class="tag-value">{id}</span>
                </a>
            }
        });
        let user = user.map(|u| {
            let href = format!("/runs?{}", format::query_string([("user", u.as_str())]));
            view! {
                <a class="tag user" href=href data-testid="run-user" title="the runs of this end user">
                    <span class="tag-key">"user"</span> " " <span class="tag-value">{u}</span>
                </a>
            }
        });
        view! { <div class="tags run-session">{session}{user}</div> }
    })
}

/// A run's metadata as `key=value` chips (values other than text as JSON);
/// nothing when it has none.
#[component]
pub fn MetadataChips(metadata: Metadata) -> impl IntoView {
    (!metadata.is_empty()).then(|| {
        let chips = metadata
            .into_iter()
            .map(|(k, v)| {
                let value = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                view! {
                    <span class="tag meta">
                        <span class="tag-key">{k}</span>
                        "="
                        <span class="tag-value">{value}</span>
                    </span>
                }
            })
            .collect::<Vec<_>>();
        view! { <div class="tags run-metadata" data-testid="run-metadata">{chips}</div> }
    })
}
