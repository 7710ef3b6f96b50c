//! Search within a trace: a box that finds steps and tool calls whose name,
//! arguments, result, error, reasoning or text contain the query, counts
//! them, highlights those on the page, and jumps from one to the next —
//! to another page of a long run when the next one is there.
//!
//! The server does the searching (`search_trace` scans the run's steps in
//! the database), so a 10,000-step run is searched without loading it. The
//! state lives at page level: live refreshes rebuild the view, not the search.

use std::collections::HashSet;
use std::time::Duration;

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::api::trace_scan::{search_trace, step_node_id, SearchHit, SearchResults, MAX_HITS};
use crate::components::node_select::select_node;
use crate::components::server_error_message;
use crate::format;
use crate::live_updates::debounced;

/// Hits listed under the box (around the current one).
const LISTED: usize = 8;

#[derive(Clone, Copy)]
pub struct Search {
    query: RwSignal<String>,
    results: RwSignal<Option<SearchResults>>,
    current: RwSignal<Option<usize>>,
    busy: RwSignal<bool>,
    error: RwSignal<Option<String>>,
    /// DOM ids of the hits and of the steps holding them.
    marked: Memo<HashSet<String>>,
    /// Number of the latest request; older answers are dropped.
    asked: StoredValue<u64>,
}

impl Search {
    pub fn new() -> Self {
        let results = RwSignal::new(None::<SearchResults>);
        let marked = Memo::new(move |_| {
            results.with(|r| {
                let hits = r.iter().flat_map(|r| &r.hits);
                hits.flat_map(|h| [h.node_id(), step_node_id(h.step)]).collect()
            })
        });
        Search {
            query: RwSignal::new(String::new()),
            results,
            current: RwSignal::new(None),
            busy: RwSignal::new(false),
            error: RwSignal::new(None),
            marked,
            asked: StoredValue::new(0),
        }
    }

    /// Forgets the search (another run is shown).
    pub fn reset(self) {
        self.asked.set_value(self.asked.get_value() + 1);
        self.query.set(String::new());
        self.results.set(None);
        self.current.set(None);
        self.busy.set(false);
        self.error.set(None);
    }

    /// Whether the node with DOM id `node` matches the current search.
    pub fn is_hit(self, node: &str) -> bool {
        self.marked.with(|m| m.contains(node))
    }

    fn run(self, run_id: String) {
        let query = self.query.get_untracked();
        let n = self.asked.get_value() + 1;
        self.asked.set_value(n);
        self.current.set(None);
        if query.trim().is_empty() {
            self.results.set(None);
            self.error.set(None);
            return;
        }
        self.busy.set(true);
        leptos::task::spawn_local(async move {
            let answer = search_trace(run_id, query).await;
            if self.asked.try_get_value() != Some(n) {
                return;
            }
            self.busy.set(false);
            match answer {
                Ok(r) => {
                    self.results.set(Some(r));
                    self.error.set(None);
                }
                Err(e) => self.error.set(Some(server_error_message(&e))),
            }
        });
    }

    fn hit(self, i: usize) -> Option<SearchHit> {
        self.results.with_untracked(|r| r.as_ref()?.hits.get(i).cloned())
    }

    fn count(self) -> usize {
        self.results.with(|r| r.as_ref().map_or(0, |r| r.hits.len()))
    }
}

/// Selects node `id` once it is on the page (after a page change loads).
fn select_when_shown(id: String, tries: u32) {
    if !select_node(&id) && tries > 0 {
        set_timeout(move || select_when_shown(id, tries - 1), Duration::from_millis(100));
    }
}

/// The search box. `shown`: the first and last step on the page.
#[component]
pub fn TraceSearch(search: Search, run_id: String, shown: (u32, u32)) -> impl IntoView {
    let navigate = use_navigate();
    let id = run_id.clone();
    let go = move |i: usize| {
        let Some(hit) = search.hit(i) else { return };
        search.current.set(Some(i));
        let node = hit.node_id();
        if (shown.0..=shown.1).contains(&hit.step) {
            select_node(&node);
        } else {
            let href = format!("/runs/{}?from={}", format::url_encode(&run_id), hit.step);
            navigate(&href, Default::default());
            select_when_shown(node, 50);
        }
    };
    let go_next = go.clone();
    let step = move |by: isize| {
        let n = search.count() as isize;
        if n > 0 {
            let at = search.current.get_untracked().map_or(if by > 0 { -1 } else { 0 }, |c| c as isize);
            go_next((at + by).rem_euclid(n) as usize);
        }
    };
    let search_soon = debounced(Duration::from_millis(300), move || search.run(id.clone()));
    let count = move || match (search.busy.get(), search.results.get(), search.current.get()) {
        (true, ..) => "searching…".to_string(),
        (_, None, _) => String::new(),
        (_, Some(r), _) if r.total == 0 => "no matches".into(),
        (_, Some(r), None) if r.total == 1 => "1 match".into(),
        (_, Some(r), None) => format!("{} matches", r.total),
        (_, Some(r), Some(c)) if r.total > r.hits.len() => {
            format!("{} of {} (first {MAX_HITS} reachable)", c + 1, r.total)
        }
        (_, Some(r), Some(c)) => format!("{} of {}", c + 1, r.total),
    };
    let prev = step.clone();
    let listed = move || {
        let start = search.current.get().unwrap_or(0).saturating_sub(LISTED / 2);
        let hits = search.results.with(|r| {
            r.iter().flat_map(|r| r.hits.iter().cloned().enumerate()).skip(start).take(LISTED).collect::<Vec<_>>()
        });
        hits.into_iter()
            .map(|(i, h)| {
                let go = go.clone();
                let current = move || search.current.get() == Some(i);
                let what = if h.name.is_empty() {
                    format!("#{} text", h.step)
                } else {
                    format!("#{} {} · {}", h.step, h.name, h.field)
                };
                view! {
                    <li class:current=current>
                        <button type="button" class="link" data-testid="search-hit" on:click=move |_| go(i)>
                            <span class="mono">{what}</span>
                            <span class="snippet">{h.snippet}</span>
                        </button>
                    </li>
                }
            })
            .collect::<Vec<_>>()
    };
    view! {
        <form class="trace-search" role="search" on:submit=move |ev| { ev.prevent_default(); step(1); }>
            <input type="search" data-testid="trace-search" placeholder="Search names, arguments, results…"
                aria-label="Search this trace" prop:value=move || search.query.get()
                on:input=move |ev| { search.query.set(event_target_value(&ev)); search_soon(); }/>
            <span class="search-count" data-testid="search-count">{count}</span>
            <button type="button" class="button subtle" data-testid="search-prev" on:click=move |_| prev(-1)>"↑ Prev"</button>
            <button type="submit" class="button subtle" data-testid="search-next">"↓ Next"</button>
        </form>
        {move || search.error.get().map(|e| view! { <p class="inline-error" data-testid="search-error">{e}</p> })}
        <ol class="search-hits" data-testid="search-hits">{listed}</ol>
    }
}
