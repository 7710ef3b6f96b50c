//! The trace's tree pane: every step of the run, with its tool calls, in one
//! scrolling list beside the steps it details, however long the run is.
//!
//! Virtualized: the list is as tall as all its lines (a line is
//! [`LINE_PX`] high), and only the lines in view, plus [`OVERSCAN`] either
//! side, are in the DOM. The rows of the steps the page holds are built from
//! them ([`TreeRow::of`]); the others come a block of [`TREE_BLOCK`] steps at
//! a time as they scroll into view ([`get_tree_rows`]), into a cache of at
//! most [`MAX_CACHED`] rows that outlives the live refreshes of the page.
//!
//! A step's tool calls are lines under it while it is expanded: every step of
//! a run the page holds whole, else the ones the user expanded (or selected).
//!
//! Keyboard (the tree is one tab stop): ↑/↓ move, Home/End, PageUp/PageDown,
//! → expands a step (or goes to its first call), ← collapses it (or goes
//! from a call to its step), Enter opens the line in the detail — the step
//! or call on the page, marked selected and in the URL; a step on another
//! page of a long run loads that page (`?from=N#step-N`). A click does the
//! same. The tree follows a selection made elsewhere (the timeline, search,
//! `j`/`k`, a link), and while the run is live it follows its newest step
//! until the user picks a line.
//!
//! A run recorded from OpenTelemetry spans lists its other spans (agent,
//! chain… see `spans`) after its steps, indented by their nesting; Enter
//! opens one in the page's "Other spans".
//!
//! The rows are links to their step (`?from=N#step-N`): a middle click opens
//! the node in a new tab.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos::tachys::html::attribute::custom::custom_attribute;
use runlens_engine::model::{StepStatus, ToolCallStatus};

use crate::api::trace_tree::{tool_names_line, TreeCall, TreeRow};
use crate::components::token_chart::cost_text;
use crate::format;

mod state;

pub use state::TreeState;
use state::{Node, SpanLine, LINE_PX, OVERSCAN};

/// How long the view stays put before the rows in it are fetched.
const LOAD_AFTER_MS: u64 = 50;

/// The tree pane of the run [`TreeState::sync`] took in.
#[component]
pub fn TreePane(state: TreeState) -> impl IntoView {
    let list = NodeRef::<leptos::html::Div>::new();
    let navigate = leptos_router::hooks::use_navigate();
    let clock = super::clock::LiveClock::get();
    let now_of = move || {
        let now = state.now.get();
        clock.map_or(now, |c| c.now(now))
    };

    // The lines in view.
    let lines = Memo::new(move |_| {
        let openings = state.openings();
        let total = state.shown_steps() + openings.iter().map(|(_, n)| n).sum::<usize>() + state.spans.with(Vec::len);
        let top = state.scroll_top.get();
        let view = state.view_px.get();
        let first = ((top / LINE_PX) as usize).saturating_sub(OVERSCAN);
        let last = (((top + view) / LINE_PX).ceil() as usize + OVERSCAN).min(total);
        state.rows.with(|rows| {
            (first..last)
                .filter_map(|line| state.node_at(line, &openings).map(|n| (line, n)))
                .map(|(line, n)| {
                    let version = fingerprint(n.step().and_then(|i| rows.get(&i)));
                    (line, n, version)
                })
                .collect::<Vec<_>>()
        })
    });
    let total_px = move || {
        let lines =
            state.shown_steps() + state.openings().iter().map(|(_, n)| n).sum::<usize>() + state.spans.with(Vec::len);
        format!("height: {}px", lines as f64 * LINE_PX)
    };
    // Fetch what comes into view (in the browser), once the view has
    // stayed put for a moment: a fast scroll through 100,000 steps asks
    // for the blocks it stops at, not for one per frame.
    let asked = StoredValue::new(0u64);
    Effect::new(move |_| {
        let steps: Vec<u32> = lines.with(|l| l.iter().filter_map(|(_, n, _)| n.step()).collect());
        let n = asked.get_value() + 1;
        asked.set_value(n);
        set_timeout(
            move || {
                if asked.try_get_value() == Some(n) {
                    state.load(&steps);
                }
            },
            std::time::Duration::from_millis(LOAD_AFTER_MS),
        );
    });
    // Once in the DOM: measure the view, and scroll where asked.
    Effect::new(move |_| {
        let Some(el) = list.get() else { return };
        let height = el.client_height() as f64;
        if height > 0.0 && (height - state.view_px.get_untracked()).abs() > 0.5 {
            state.view_px.set(height);
        }
        state.scroll_top.track();
        if let Some(top) = state.scroll_to.get_value() {
            state.scroll_to.set_value(None);
            let top = top.min(state.max_scroll());
            el.set_scroll_top(top as i32);
            state.scroll_top.set(el.scroll_top() as f64);
        }
    });
    // A selection made elsewhere.
    #[cfg(feature = "hydrate")]
    {
        let event =
            leptos::ev::Custom::<leptos::web_sys::CustomEvent>::new(crate::components::node_select::SELECT_EVENT);
        let handle = window_event_listener(event, move |ev| {
            if let Some(detail) = ev.detail().as_string() {
                state.follow_selection(&detail);
            }
        });
        on_cleanup(move || handle.remove());
    }

    let open = {
        let navigate = navigate.clone();
        move |node: Node| {
            let run_id = state.run.get_untracked();
            state.picked.set_value(true);
            state.move_to(node.clone());
            let (first, last) = state.shown.get_untracked();
            // A span is always on the page; a step or call when its step is.
            let on_page = node.step().is_none_or(|step| step >= first && step <= last);
            if !(on_page && crate::components::node_select::select_node(&node.detail_id())) {
                navigate(&detail_href(&run_id, &node), Default::default());
            }
        }
    };
    let open_click = open.clone();
    let on_key = move |ev: leptos::ev::KeyboardEvent| {
        let openings = state.openings_untracked();
        let total = state.total_lines();
        if total == 0 {
            return;
        }
        let page = ((state.view_px.get_untracked() / LINE_PX) as usize).max(1);
        let cur = state.cursor.get_untracked();
        let cur_line = cur.as_ref().map(|n| state.line_of(n));
        let top_line = (state.scroll_top.get_untracked() / LINE_PX) as usize;
        let go = |line: usize| state.node_at(line.min(total - 1), &openings);
        let target = match ev.key().as_str() {
            "ArrowDown" => go(cur_line.map_or(top_line, |l| l + 1)),
            "ArrowUp" => go(cur_line.map_or(top_line, |l| l.saturating_sub(1))),
            "PageDown" => go(cur_line.unwrap_or(top_line) + page),
            "PageUp" => go(cur_line.unwrap_or(top_line).saturating_sub(page)),
            "Home" => go(0),
            "End" => go(total - 1),
            "ArrowRight" => match &cur {
                Some(Node::Step(i)) => {
                    let calls = state.rows.with_untracked(|r| r.get(i).map(|r| r.calls.len()).unwrap_or(0));
                    if calls > 0 && !state.is_expanded(*i) {
                        state.expanded.update(|e| {
                            e.insert(*i);
                        });
                        cur.clone()
                    } else {
                        go(state.line_of(&Node::Step(*i)) + 1)
                    }
                }
                _ => cur.clone(),
            },
            "ArrowLeft" => match &cur {
                Some(Node::Call(i, _)) => Some(Node::Step(*i)),
                Some(Node::Span(_)) => cur.clone(),
                Some(Node::Step(i)) => {
                    state.expanded.update(|e| {
                        e.remove(i);
                    });
                    cur.clone()
                }
                None => None,
            },
            "Enter" => {
                if let Some(node) = cur {
                    ev.prevent_default();
                    open(node);
                }
                return;
            }
            _ => return,
        };
        ev.prevent_default();
        state.picked.set_value(true);
        if let Some(node) = target {
            state.move_to(node);
        }
    };
    let active_descendant = move || state.cursor.with(|c| c.as_ref().map(Node::row_id));

    let row_view = move |(line, node, _): (usize, Node, u64)| {
        let y = format!("top: {}px", line as f64 * LINE_PX);
        let row = node.step().and_then(|i| state.rows.with_untracked(|rows| rows.get(&i).cloned()));
        let row_id = node.row_id();
        let cursor = {
            let node = node.clone();
            Memo::new(move |_| state.cursor.with(|c| c.as_ref() == Some(&node)))
        };
        let href = detail_href(&state.run.get_untracked(), &node);
        let open = open_click.clone();
        let click_node = node.clone();
        let click = move |ev: leptos::ev::MouseEvent| {
            ev.prevent_default();
            // The tree keeps the focus (its keys go on from the clicked line).
            if let Some(el) = list.get_untracked() {
                let _ = el.focus();
            }
            open(click_node.clone());
        };
        let count = untrack(|| state.shown_steps());
        let posinset = |index: u32| (state.pos_of(index) + 1).to_string();
        match (node, row) {
            (Node::Step(index), None) => view! {
                <div class="tree-row tree-loading" role="treeitem" {..custom_attribute("aria-level", "1")} id=row_id style=y
                    aria-setsize=count.to_string() aria-posinset=posinset(index) aria-busy="true"
                    aria-selected=move || cursor.get().to_string() class:cursor=cursor on:click=click>
                    <a href=href tabindex="-1" class="tree-link">
                        <span class="tree-index">"#" {index}</span>
                        <span class="muted">"loading…"</span>
                    </a>
                </div>
            }
            .into_any(),
            (Node::Step(index), Some(row)) => {
                let has_calls = !row.calls.is_empty();
                let expanded = move || state.all_expanded.get() || state.expanded.with(|e| e.contains(&index));
                let toggle = move |ev: leptos::ev::MouseEvent| {
                    ev.prevent_default();
                    ev.stop_propagation();
                    if state.all_expanded.get_untracked() {
                        return;
                    }
                    state.expanded.update(|e| {
                        if !e.remove(&index) {
                            e.insert(index);
                        }
                    });
                };
                let status = super::steps::step_status(row.status);
                let running = row.status == StepStatus::Running;
                let (started, completed) = (row.started_at, row.completed_at);
                let duration = move || {
                    let end = completed.or(running.then(now_of));
                    format::opt_duration(format::span_ms(Some(started), end))
                };
                let handoff = row.kind == "handoff";
                let calls = (!handoff).then(|| tool_names_line(row.calls.iter().map(|c| c.tool_name.as_str()), 2)).flatten();
                view! {
                    <div class="tree-row tree-step" role="treeitem" {..custom_attribute("aria-level", "1")} id=row_id style=y
                        aria-setsize=count.to_string() aria-posinset=posinset(index)
                        aria-selected=move || cursor.get().to_string() class:cursor=cursor
                        aria-expanded=move || has_calls.then(|| expanded().to_string())
                        data-testid="tree-step" data-index=index.to_string() data-status=status on:click=click>
                        <span class="tree-twisty" aria-hidden="true" on:click=toggle>
                            {move || match (has_calls, expanded()) {
                                (false, _) => "",
                                (true, true) => "▾",
                                (true, false) => "▸",
                            }}
                        </span>
                        <a href=href tabindex="-1" class="tree-link">
                            <span class="tree-index">"#" {index}</span>
                            <span class=if handoff { "tree-kind mono handoff" } else { "tree-kind mono" }>
                                {if handoff { "handoff".to_string() } else { short_kind(&row.kind) }}
                            </span>
                            {calls.map(|c| view! { <span class="tree-calls mono">{c}</span> })}
                            <span class="tree-preview" data-testid="tree-preview">{row.preview.unwrap_or_default()}</span>
                        </a>
                        <span class="tree-metrics">
                            <span title="duration" data-testid="tree-duration">{duration}</span>
                            <span title=format!("{} total tokens", row.tokens)>{compact(row.tokens)} " tok"</span>
                            {row.cost.filter(|c| *c > 0.0).map(|c| view! {
                                <span title="cost at today's prices">{cost_text(Some(c))}</span>
                            })}
                        </span>
                        <span class=format!("tree-dot dot-{status}") title=status role="img" aria-label=status></span>
                    </div>
                }
                .into_any()
            }
            (Node::Span(id), _) => {
                let Some(span) = state.spans.with_untracked(|s| s.iter().find(|l| l.id == id).cloned()) else {
                    return ().into_any();
                };
                span_row(span, row_id, y, cursor, click).into_any()
            }
            (Node::Call(index, id), row) => {
                let call = row.and_then(|r| r.calls.into_iter().find(|c| c.id == id));
                let Some(call) = call else { return ().into_any() };
                call_row(call, index, row_id, y, href, cursor, click, now_of).into_any()
            }
        }
    };

    view! {
        <nav class="tree-pane" aria-label="Steps and tool calls" data-testid="tree-pane">
            <div class="tree-head">
                <span class="label">"Tree"</span>
                <label class="tree-filter">
                    <span class="visually-hidden">"Show"</span>
                    <select data-testid="tree-filter" prop:value=move || state.filter.get()
                        on:change=move |ev| state.apply_filter(event_target_value(&ev))>
                        <option value="">"All steps"</option>
                        <option value="errors">"Errors"</option>
                        <option value="decisions">"Waiting or rejected"</option>
                        {move || state.tools.get().into_iter().map(|t| {
                            let value = format!("tool:{t}");
                            view! { <option value=value>"Tool: " {t}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <span class="muted tree-count" data-testid="tree-filter-count" aria-live="polite">
                    {move || state.order.with(|o| o.as_ref().map(|o| {
                        let more = if state.truncated.get() { " (the first)" } else { "" };
                        format!("{}{more} of {} steps", o.len(), state.count.get())
                    }))}
                </span>
            </div>
            <p class="visually-hidden" id="tree-keys">
                "Arrow keys move, right and left show or fold a step's calls, Enter shows the line beside the tree."
            </p>
            <div class="tree" role="tree" tabindex="0" aria-label="Steps and tool calls" node_ref=list
                aria-describedby="tree-keys" title="↑↓ move · → ← show or fold calls · Enter shows"
                data-testid="tree" aria-activedescendant=active_descendant on:keydown=on_key
                on:scroll=move |_| {
                    if let Some(el) = list.get_untracked() {
                        state.scroll_top.set(el.scroll_top() as f64);
                    }
                }>
                <div class="tree-space" style=total_px>
                    <For each=move || lines.get() key=|line| line.clone() children=row_view/>
                </div>
            </div>
        </nav>
    }
}

/// What a row shows changes with this (a live refresh re-renders the
/// rows whose step changed, and only those).
fn fingerprint(row: Option<&TreeRow>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Some(r) = row {
        (r.status as u8, r.completed_at, r.tokens, &r.preview, r.calls.len()).hash(&mut h);
        for c in &r.calls {
            (c.status as u8, c.completed_at, c.decided).hash(&mut h);
        }
    } else {
        0u8.hash(&mut h);
    }
    h.finish()
}

/// Where a line's node is shown: its page of the run, at the node.
fn detail_href(run_id: &str, node: &Node) -> String {
    match node.step() {
        Some(step) => format!("/runs/{}?from={step}#{}", format::url_encode(run_id), node.detail_id()),
        None => format!("/runs/{}#{}", format::url_encode(run_id), node.detail_id()),
    }
}

fn span_row(
    span: SpanLine,
    row_id: String,
    y: String,
    cursor: Memo<bool>,
    click: impl FnMut(leptos::ev::MouseEvent) + 'static,
) -> impl IntoView {
    let level = (span.depth + 1).to_string();
    let indent = format!("{y}; padding-left: {}px", 12 + 14 * span.depth);
    let status = span.status.clone();
    let (dot, label) = (format!("tree-dot span-dot-{status}"), status.clone());
    view! {
        <div class="tree-row tree-span" role="treeitem" {..custom_attribute("aria-level", level)} id=row_id
            style=indent aria-selected=move || cursor.get().to_string() class:cursor=cursor
            data-testid="tree-span" data-status=status.clone() on:click=click>
            <span class="tree-link">
                <span class="tag">{span.kind}</span>
                <span class="mono tree-tool">{span.name}</span>
            </span>
            <span class="tree-metrics"><span title="duration">{format::opt_duration(span.duration_ms)}</span></span>
            <span class=dot title=label.clone() role="img" aria-label=label></span>
        </div>
    }
}

/// `model_turn` reads as `model`.
fn short_kind(kind: &str) -> String {
    match kind {
        "model_turn" => "model".into(),
        other => other.to_string(),
    }
}

/// `950`, `6.8k`, `1.2M`.
fn compact(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[allow(clippy::too_many_arguments)]
fn call_row(
    call: TreeCall,
    index: u32,
    row_id: String,
    y: String,
    href: String,
    cursor: Memo<bool>,
    click: impl FnMut(leptos::ev::MouseEvent) + 'static,
    now_of: impl Fn() -> DateTime<Utc> + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let status = call.status.as_str();
    let going = matches!(call.status, ToolCallStatus::Running | ToolCallStatus::Pending);
    let (started, completed) = (call.started_at, call.completed_at);
    let duration = move || {
        let end = completed.or((going && started.is_some()).then(now_of));
        format::opt_duration(format::span_ms(started, end))
    };
    let child = call.child_run_id.map(|id| {
        let href = format!("/runs/{}", format::url_encode(&id));
        view! { <a href=href class="tree-child" tabindex="-1" data-testid="tree-child-run"
        on:click=|ev: leptos::ev::MouseEvent| ev.stop_propagation()>"↳ run"</a> }
    });
    let decided =
        call.decided.then(|| view! { <span class="tree-decided" title="A person decided on this call">"✋"</span> });
    view! {
        <div class="tree-row tree-call" role="treeitem" {..custom_attribute("aria-level", "2")} id=row_id style=y
            aria-selected=move || cursor.get().to_string() class:cursor=cursor
            data-testid="tree-call" data-step=index.to_string() data-status=status on:click=click>
            <a href=href tabindex="-1" class="tree-link">
                <span class="tree-branch" aria-hidden="true">"↳"</span>
                <span class="mono tree-tool">{call.tool_name}</span>
                {decided}
            </a>
            {child}
            <span class="tree-metrics">
                <span title="duration" data-testid="tree-duration">{duration}</span>
            </span>
            <span class=format!("tree-dot dot-{status}") title=status role="img" aria-label=status></span>
        </div>
    }
}
