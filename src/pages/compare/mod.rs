//! `/compare`: why one run differs from another.
//!
//! - `?a=RUN&b=RUN` (or two `run=` values, as the runs list's tick boxes
//!   submit them): the two runs aligned ([`pair`]), opened at the first
//!   difference; `steps_from` / `messages_from` page through the rest.
//! - `?group=ID`: a comparison group's runs as columns ([`group`]).
//! - `?a=RUN` alone: the runs it can be compared with (its fork family and
//!   the project's latest runs); with nothing, a form for two run ids.
//!
//! The place lives in the URL and every control is a link or a GET form, so
//! the page works and can be bookmarked without JavaScript. The hydrated
//! page refetches while a run it shows is still active: on each change the
//! all-runs stream reports, and every 2 s (steps and tokens grow between
//! status changes).

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::CompareQuery;

use crate::api::{get_compare_candidates, get_compare_group, get_comparison, Candidates};
use crate::components::{Badge, Loaded};
use crate::format;
use crate::live_updates::{poll_while, RunsFeed};

mod diff;
mod group;
mod pair;

/// How often a page with active runs refetches.
const POLL_EVERY: Duration = Duration::from_secs(2);

/// What the URL asks the page to show.
#[derive(Clone, Debug, PartialEq)]
enum Ask {
    Pair(CompareQuery),
    Group(String),
    Pick(String),
    Nothing { problem: Option<String> },
}

/// Reads the URL: `get_all(key)` gives every value of `key`, in order.
fn read_ask(get_all: impl Fn(&str) -> Vec<String>) -> Ask {
    let one = |k: &str| get_all(k).into_iter().map(|v| v.trim().to_owned()).find(|v| !v.is_empty());
    let number = |k: &str| one(k).and_then(|v| v.parse::<u32>().ok());
    if let Some(group) = one("group") {
        return Ask::Group(group);
    }
    let ticked: Vec<String> =
        get_all("run").into_iter().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect();
    let (a, b) = match (one("a"), one("b")) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) if ticked.is_empty() => return Ask::Pick(a),
        _ if ticked.len() == 2 => (ticked[0].clone(), ticked[1].clone()),
        _ if !ticked.is_empty() => {
            let problem = format!("Tick exactly two runs to compare ({} ticked).", ticked.len());
            return Ask::Nothing { problem: Some(problem) };
        }
        _ => return Ask::Nothing { problem: None },
    };
    Ask::Pair(CompareQuery {
        a,
        b,
        steps_from: number("steps_from"),
        steps_limit: number("steps_limit"),
        messages_from: number("messages_from"),
        messages_limit: number("messages_limit"),
    })
}

/// The page's URL for `q` (unset bounds left out).
pub fn compare_href(q: &CompareQuery) -> String {
    let n = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    let (sf, sl, mf, ml) = (n(q.steps_from), n(q.steps_limit), n(q.messages_from), n(q.messages_limit));
    let qs = format::query_string([
        ("a", q.a.as_str()),
        ("b", q.b.as_str()),
        ("steps_from", sf.as_str()),
        ("steps_limit", sl.as_str()),
        ("messages_from", mf.as_str()),
        ("messages_limit", ml.as_str()),
    ]);
    format!("/compare?{qs}")
}

/// Which list of rows a pager moves through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Steps,
    Messages,
}

impl Place {
    /// `q` with this list starting at `row`.
    pub fn set(self, q: &CompareQuery, row: u32) -> CompareQuery {
        let mut q = q.clone();
        match self {
            Place::Steps => q.steps_from = Some(row),
            Place::Messages => q.messages_from = Some(row),
        }
        q
    }

    pub fn name(self) -> &'static str {
        match self {
            Place::Steps => "steps",
            Place::Messages => "messages",
        }
    }
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let url = use_query_map();
    let ask = Memo::new(move |_| read_ask(|k| url.read().get_all(k).unwrap_or_default()));
    view! {
        <Title text="Compare · runlens"/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/runs">"Runs"</a> " / compare"</div>
                <h1>"Compare runs"</h1>
            </div>
        </div>
        {move || match ask.get() {
            Ask::Pair(query) => view! { <PairPage query/> }.into_any(),
            Ask::Group(id) => view! { <GroupPage id/> }.into_any(),
            Ask::Pick(id) => view! { <PickPage id/> }.into_any(),
            Ask::Nothing { problem } => view! { <IdsForm problem/> }.into_any(),
        }}
    }
}

/// A refetch trigger for pages whose runs may still change: the all-runs
/// stream's version and a 2 s tick while `active`.
fn live_source(active: RwSignal<bool>) -> impl Fn() -> (u64, u64) + Copy {
    let feed = RunsFeed::get();
    let tick = RwSignal::new(0u64);
    poll_while(active, tick, POLL_EVERY);
    move || (if active.get() { feed.version.get() } else { 0 }, tick.get())
}

#[component]
fn PairPage(query: CompareQuery) -> impl IntoView {
    let active = RwSignal::new(false);
    let live = live_source(active);
    let asked = query.clone();
    let cmp = crate::resource::new(move || (asked.clone(), live()), |(q, _)| get_comparison(q));
    view! {
        <Loaded load=move || async move { cmp.await } loading="Comparing…" keep_previous=true let:found>
            {match found {
                Some(cmp) => {
                    let running = !cmp.a.status.is_terminal() || !cmp.b.status.is_terminal();
                    if active.get_untracked() != running {
                        active.set(running);
                    }
                    view! { <pair::PairView cmp query=query.clone()/> }.into_any()
                }
                None => view! {
                    <div class="empty" data-testid="compare-not-found">
                        <p>"One of these runs was not found (or is in a project you cannot see)."</p>
                        <p><a href="/compare">"Compare other runs"</a></p>
                    </div>
                }
                .into_any(),
            }}
        </Loaded>
    }
}

#[component]
fn GroupPage(id: String) -> impl IntoView {
    let active = RwSignal::new(false);
    let live = live_source(active);
    let asked = id.clone();
    let group = crate::resource::new(move || (asked.clone(), live()), |(id, _)| get_compare_group(id));
    view! {
        <Loaded load=move || async move { group.await } loading="Loading the group…" keep_previous=true let:found>
            {match found {
                Some(group) => {
                    let running = group.members.iter().any(|m| !m.status.is_terminal());
                    if active.get_untracked() != running {
                        active.set(running);
                    }
                    view! { <group::GroupView group/> }.into_any()
                }
                None => view! {
                    <div class="empty" data-testid="compare-not-found">
                        <p>"No comparison group " <span class="mono">{id.clone()}</span> " here."</p>
                    </div>
                }
                .into_any(),
            }}
        </Loaded>
    }
}

/// Run ids typed or pasted: a plain GET form.
#[component]
fn IdsForm(problem: Option<String>, #[prop(optional)] a: Option<String>) -> impl IntoView {
    view! {
        {problem.map(|p| view! { <p class="notice compare-problem" role="alert" data-testid="compare-problem">{p}</p> })}
        <form method="get" action="/compare" class="filters" data-testid="compare-ids">
            <label class="grow"><span>"Run A"</span>
                <input type="text" name="a" required value=a.unwrap_or_default() placeholder="run id" data-testid="compare-a"/></label>
            <label class="grow"><span>"Run B"</span>
                <input type="text" name="b" required placeholder="run id" data-testid="compare-b"/></label>
            <button type="submit" class="button primary">"Compare"</button>
        </form>
        <p class="muted">"Or tick two runs in the " <a href="/runs">"runs list"</a> " and choose Compare."</p>
    }
}

#[component]
fn PickPage(id: String) -> impl IntoView {
    let asked = id.clone();
    let found = crate::resource::new(move || asked.clone(), get_compare_candidates);
    view! {
        <Loaded load=move || async move { found.await } loading="Loading runs…" let:found>
            {match found {
                Some(c) => view! { <Pick candidates=c/> }.into_any(),
                None => view! {
                    <div class="empty" data-testid="compare-not-found"><p>"Run " <span class="mono">{id.clone()}</span> " was not found."</p></div>
                }
                .into_any(),
            }}
        </Loaded>
    }
}

/// "Compare with…": the run's family, then the latest runs, each a link.
#[component]
fn Pick(candidates: Candidates) -> impl IntoView {
    let Candidates { run, family, recent } = candidates;
    let with =
        |other: &str| compare_href(&CompareQuery { a: run.id.clone(), b: other.to_owned(), ..Default::default() });
    let item = |id: &str, name: &str, status: &str, note: String| {
        let href = with(id);
        let name = if name.trim().is_empty() { id.to_owned() } else { name.to_owned() };
        view! {
            <li data-testid="compare-candidate" data-run-id=id.to_owned()>
                <a href=href>{name}</a> " " <Badge status=status.to_owned()/>
                <span class="sub mono">" " {format::short_id(id)} {note}</span>
            </li>
        }
    };
    let family_items = family
        .iter()
        .map(|m| {
            let note =
                if Some(&m.id) == run.parent_run_id.as_ref() { " · its parent".to_owned() } else { String::new() };
            item(&m.id, &m.name, m.status.as_str(), note)
        })
        .collect::<Vec<_>>();
    let recent_items =
        recent.iter().map(|r| item(&r.id, &r.name, r.status.as_str(), format!(" · {}", r.model))).collect::<Vec<_>>();
    let name = if run.name.trim().is_empty() { run.id.clone() } else { run.name.clone() };
    view! {
        <p>"Compare " <a href=format!("/runs/{}", format::url_encode(&run.id))>{name}</a> " with:"</p>
        {(!family_items.is_empty()).then(|| view! {
            <section class="section"><h2>"Its forks and ancestors"</h2><ul class="plain-list">{family_items}</ul></section>
        })}
        <section class="section"><h2>"Latest runs"</h2>
            {if recent_items.is_empty() {
                view! { <p class="muted">"No other runs yet."</p> }.into_any()
            } else {
                view! { <ul class="plain-list" data-testid="compare-candidates">{recent_items}</ul> }.into_any()
            }}
        </section>
        <section class="section"><h2>"Any run"</h2><IdsForm problem=None a=run.id.clone()/></section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(pairs: &[(&str, &str)]) -> Ask {
        read_ask(|k| pairs.iter().filter(|(key, _)| *key == k).map(|(_, v)| (*v).to_owned()).collect())
    }

    #[test]
    fn the_url_says_what_to_compare() {
        let pair = ask(&[("a", "r1"), ("b", " r2 "), ("steps_from", "40"), ("messages_limit", "x")]);
        let expected = CompareQuery { a: "r1".into(), b: "r2".into(), steps_from: Some(40), ..Default::default() };
        assert_eq!(pair, Ask::Pair(expected.clone()));
        assert_eq!(compare_href(&expected), "/compare?a=r1&b=r2&steps_from=40");
        assert_eq!(
            ask(&[("run", "x"), ("run", "y")]),
            Ask::Pair(CompareQuery { a: "x".into(), b: "y".into(), ..Default::default() })
        );
        assert!(matches!(ask(&[("run", "x")]), Ask::Nothing { problem: Some(p) } if p.contains("1 ticked")));
        assert_eq!(ask(&[("group", "g1"), ("a", "r1")]), Ask::Group("g1".into()));
        assert_eq!(ask(&[("a", "r1")]), Ask::Pick("r1".into()));
        assert_eq!(ask(&[]), Ask::Nothing { problem: None });
        assert_eq!(Place::Messages.set(&expected, 7).messages_from, Some(7));
    }
}
