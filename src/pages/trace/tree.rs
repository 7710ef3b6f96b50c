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

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos::tachys::html::attribute::custom::custom_attribute;
use runlens_engine::model::{StepStatus, ToolCallStatus};

use crate::api::trace_tree::{TreeCall, TreeRow, TREE_BLOCK};
use crate::api::trace_window::LiveTrace;
use crate::components::token_chart::cost_text;
use crate::format;

/// Height of one line in pixels (the CSS `.tree-row` height).
pub const LINE_PX: f64 = 28.0;
/// Lines rendered beyond each edge of the view.
const OVERSCAN: usize = 12;
/// The view's height before the browser has measured it (the server
/// renders this much, and hydration the same).
const DEFAULT_VIEW_PX: f64 = 560.0;
/// Rows the cache holds at most; beyond, those far from the view go.
const MAX_CACHED: usize = 3_000;

/// A line of the tree: a step, or one of its tool calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Step(u32),
    Call(u32, String),
    /// A span of a run recorded from OpenTelemetry that is neither a model
    /// nor a tool call (see `spans`), by its id.
    Span(String),
}

impl Node {
    /// The DOM id of the node in the detail (`step-3`, `call-…`).
    pub fn detail_id(&self) -> String {
        match self {
            Node::Step(i) => crate::api::trace_scan::step_node_id(*i),
            Node::Call(_, id) => crate::api::trace_scan::call_node_id(id),
            Node::Span(id) => super::spans::span_node_id(id),
        }
    }
    fn row_id(&self) -> String {
        format!("tree-{}", self.detail_id())
    }
    /// The step the line belongs to (`None`: a span).
    fn step(&self) -> Option<u32> {
        match self {
            Node::Step(i) | Node::Call(i, _) => Some(*i),
            Node::Span(_) => None,
        }
    }
}

/// The tree's state; page-level, so it survives the live refreshes that
/// rebuild the page's views.
#[derive(Clone, Copy)]
pub struct TreeState {
    run: RwSignal<String>,
    count: RwSignal<u32>,
    rows: RwSignal<BTreeMap<u32, TreeRow>>,
    /// Blocks being fetched.
    loading: StoredValue<HashSet<u32>>,
    /// Steps whose calls are lines (a run the page holds whole: all).
    expanded: RwSignal<BTreeSet<u32>>,
    all_expanded: RwSignal<bool>,
    scroll_top: RwSignal<f64>,
    view_px: RwSignal<f64>,
    cursor: RwSignal<Option<Node>>,
    /// The user picked a line: stop following the newest step.
    picked: StoredValue<bool>,
    /// The scroll position to restore (or set) once the list is in the DOM.
    scroll_to: StoredValue<Option<f64>>,
    /// The steps on the page (the detail): `(first, last)`.
    shown: RwSignal<(u32, u32)>,
    active: RwSignal<bool>,
    /// The server's clock when the window was read.
    now: RwSignal<DateTime<Utc>>,
    /// A recorded run's other spans: lines after its steps.
    spans: RwSignal<Vec<SpanLine>>,
    /// The steps a filter keeps, in order (`None`: every step).
    order: RwSignal<Option<Arc<Vec<u32>>>>,
    /// The filter's `<select>` value (`""`, `errors`, `decisions`, `tool:NAME`).
    filter: RwSignal<String>,
    /// The filter matched more steps than it keeps.
    truncated: RwSignal<bool>,
    /// The run's tools, to filter by.
    tools: RwSignal<Vec<String>>,
}

/// A span's line.
#[derive(Clone, Debug, PartialEq)]
struct SpanLine {
    id: String,
    name: String,
    kind: String,
    status: String,
    duration_ms: Option<i64>,
    /// How many of its ancestors are spans of the list too.
    depth: usize,
}

/// Spans deeper than this are drawn at this depth.
const MAX_SPAN_DEPTH: usize = 6;

fn span_lines(spans: &[runlens_engine::model::SpanNode]) -> Vec<SpanLine> {
    let parents: std::collections::HashMap<&str, Option<&str>> =
        spans.iter().map(|s| (s.span_id.as_str(), s.parent_span_id.as_deref())).collect();
    spans
        .iter()
        .map(|s| {
            let mut depth = 0;
            let mut up = s.parent_span_id.as_deref();
            while let Some(parent) = up.filter(|_| depth < MAX_SPAN_DEPTH) {
                match parents.get(parent) {
                    Some(next) => {
                        depth += 1;
                        up = *next;
                    }
                    None => break,
                }
            }
            SpanLine {
                id: s.span_id.clone(),
                name: s.name.clone(),
                kind: s.kind.clone(),
                status: s.status.clone(),
                duration_ms: s.duration_ms(),
                depth,
            }
        })
        .collect()
}

impl TreeState {
    pub fn new() -> Self {
        Self {
            run: RwSignal::new(String::new()),
            count: RwSignal::new(0),
            rows: RwSignal::new(BTreeMap::new()),
            loading: StoredValue::new(HashSet::new()),
            expanded: RwSignal::new(BTreeSet::new()),
            all_expanded: RwSignal::new(false),
            scroll_top: RwSignal::new(0.0),
            view_px: RwSignal::new(DEFAULT_VIEW_PX),
            cursor: RwSignal::new(None),
            picked: StoredValue::new(false),
            scroll_to: StoredValue::new(None),
            shown: RwSignal::new((0, 0)),
            active: RwSignal::new(false),
            now: RwSignal::new(DateTime::<Utc>::MIN_UTC),
            spans: RwSignal::new(Vec::new()),
            order: RwSignal::new(None),
            filter: RwSignal::new(String::new()),
            truncated: RwSignal::new(false),
            tools: RwSignal::new(Vec::new()),
        }
    }

    /// Takes in a (re)loaded trace window: its steps' rows replace the
    /// cached ones, rows of steps still under way elsewhere are dropped (to
    /// be fetched again), and a live run's newest step is followed.
    pub fn sync(self, view: &LiveTrace) {
        let run_id = &view.run.id;
        let count = view.run.step_count.max(view.steps.last().map_or(0, |s| s.index + 1));
        let first_time = self.run.with_untracked(|r| r != run_id);
        if first_time {
            self.run.set(run_id.clone());
            self.rows.set(BTreeMap::new());
            self.loading.set_value(HashSet::new());
            self.expanded.set(BTreeSet::new());
            self.cursor.set(None);
            self.picked.set_value(false);
            self.scroll_top.set(0.0);
            self.order.set(None);
            self.filter.set(String::new());
            self.truncated.set(false);
        }
        if self.tools.with_untracked(|t| *t != view.run.tools) {
            self.tools.set(view.run.tools.clone());
        }
        let active = !view.run.status.is_terminal();
        // A run that was live when last seen is followed to its last step.
        let was_active = !first_time && self.active.get_untracked();
        self.active.set(active);
        self.now.set(view.now);
        let spans = span_lines(&view.spans);
        if self.spans.with_untracked(|s| *s != spans) {
            self.spans.set(spans);
        }
        self.all_expanded.set(!view.paged());
        self.count.set(count);
        let from = view.steps_from();
        self.shown.set((from, view.steps.last().map_or(from, |s| s.index)));
        self.rows.update(|rows| {
            rows.retain(|_, r| r.settled());
            for step in view.steps.iter().chain(view.latest_step.as_ref()) {
                rows.insert(step.index, TreeRow::of(step, view.step_cost(step)));
            }
        });
        let filtered = self.order.with_untracked(Option::is_some);
        let following = (active || was_active) && !self.picked.get_value() && !filtered;
        let target = if following {
            count.checked_sub(1).map(|last| {
                let node = Node::Step(last);
                self.cursor.set(Some(node.clone()));
                f64::MAX
            })
        } else if first_time {
            // A long run opens its tree at the page shown.
            let line = self.line_of(&Node::Step(from)) as f64;
            Some((line * LINE_PX - LINE_PX).max(0.0))
        } else {
            None
        };
        if let Some(top) = target {
            let top = top.min(self.max_scroll());
            self.scroll_top.set(top);
            self.scroll_to.set_value(Some(top));
        }
    }

    /// Whether a run is loaded (the pane shows once one is).
    pub fn is_shown(self) -> bool {
        self.run.with(|r| !r.is_empty())
    }

    fn max_scroll(self) -> f64 {
        (self.total_lines() as f64 * LINE_PX - self.view_px.get_untracked()).max(0.0)
    }

    /// Whether step `index`'s calls are lines.
    fn is_expanded(self, index: u32) -> bool {
        self.all_expanded.get_untracked() || self.expanded.with_untracked(|e| e.contains(&index))
    }

    /// The expanded steps with their call counts, in order (a step whose row
    /// is not loaded counts none).
    fn openings(self) -> Vec<(u32, usize)> {
        let kept = |i: &u32| self.order.with(|o| o.as_ref().is_none_or(|o| o.binary_search(i).is_ok()));
        self.rows.with(|rows| {
            if self.all_expanded.get() {
                rows.iter().filter(|(i, r)| !r.calls.is_empty() && kept(i)).map(|(i, r)| (*i, r.calls.len())).collect()
            } else {
                self.expanded.with(|e| {
                    e.iter()
                        .filter(|i| kept(i))
                        .filter_map(|i| rows.get(i).map(|r| (*i, r.calls.len())).filter(|(_, n)| *n > 0))
                        .collect()
                })
            }
        })
    }

    /// How many steps the tree shows (the filter's, else all).
    fn shown_steps(self) -> usize {
        self.order.with(|o| o.as_ref().map_or(self.count.get() as usize, |o| o.len()))
    }

    /// Where step `index` is among the steps shown (where it would be, when
    /// the filter does not keep it).
    fn pos_of(self, index: u32) -> usize {
        self.order.with_untracked(|o| match o {
            Some(o) => o.binary_search(&index).unwrap_or_else(|at| at),
            None => index as usize,
        })
    }

    /// The step shown at `pos`.
    fn step_at(self, pos: usize) -> Option<u32> {
        self.order.with_untracked(|o| match o {
            Some(o) => o.get(pos).copied(),
            None => (pos < self.count.get_untracked() as usize).then_some(pos as u32),
        })
    }

    /// Lines of the steps and their calls (the spans' come after).
    fn step_lines(self, openings: &[(u32, usize)]) -> usize {
        untrack(|| self.shown_steps()) + openings.iter().map(|(_, n)| n).sum::<usize>()
    }

    fn total_lines(self) -> usize {
        self.step_lines(&self.openings_untracked()) + self.spans.with_untracked(Vec::len)
    }

    fn openings_untracked(self) -> Vec<(u32, usize)> {
        untrack(|| self.openings())
    }

    /// The line `node` is on.
    fn line_of(self, node: &Node) -> usize {
        let openings = self.openings_untracked();
        let Some(step) = node.step() else {
            let Node::Span(id) = node else { unreachable!("only a span has no step") };
            let pos = self.spans.with_untracked(|s| s.iter().position(|l| &l.id == id).unwrap_or(0));
            return self.step_lines(&openings) + pos;
        };
        let before: usize = openings.iter().take_while(|(i, _)| *i < step).map(|(_, n)| n).sum();
        let base = self.pos_of(step) + before;
        match node {
            Node::Step(_) => base,
            Node::Span(_) => unreachable!("a span was answered above"),
            Node::Call(_, id) => {
                let pos = self.rows.with_untracked(|rows| {
                    rows.get(&step).and_then(|r| r.calls.iter().position(|c| &c.id == id)).unwrap_or(0)
                });
                base + 1 + pos
            }
        }
    }

    /// The node on `line`, given the openings.
    fn node_at(self, line: usize, openings: &[(u32, usize)]) -> Option<Node> {
        let steps = self.step_lines(openings);
        if line >= steps {
            return self.spans.with_untracked(|s| s.get(line - steps).map(|l| Node::Span(l.id.clone())));
        }
        let mut offset = 0usize;
        for &(step, calls) in openings {
            let at = self.pos_of(step) + offset;
            if line <= at {
                break;
            }
            if line <= at + calls {
                let pos = line - at - 1;
                let id = self
                    .rows
                    .with_untracked(|rows| rows.get(&step).and_then(|r| r.calls.get(pos)).map(|c| c.id.clone()))?;
                return Some(Node::Call(step, id));
            }
            offset += calls;
        }
        self.step_at(line - offset).map(Node::Step)
    }

    /// Loads the blocks holding `steps` that are not cached yet.
    fn load(self, steps: &[u32]) {
        let count = self.count.get_untracked();
        let blocks: BTreeSet<u32> = steps.iter().filter(|i| **i < count).map(|i| i / TREE_BLOCK).collect();
        for block in blocks {
            let start = block * TREE_BLOCK;
            let end = (start + TREE_BLOCK).min(count);
            let complete = self.rows.with_untracked(|rows| rows.range(start..end).count() as u32 == end - start);
            let in_flight = self.loading.with_value(|l| l.contains(&block));
            if complete || in_flight {
                continue;
            }
            self.loading.update_value(|l| {
                l.insert(block);
            });
            let run_id = self.run.get_untracked();
            leptos::task::spawn_local(async move {
                let fetched = crate::api::trace_tree::get_tree_rows(run_id.clone(), start, end - start).await;
                self.loading.update_value(|l| {
                    l.remove(&block);
                });
                // The page moved to another run meanwhile: drop the answer.
                if self.run.get_untracked() != run_id {
                    return;
                }
                if let Ok(fetched) = fetched {
                    let center = (self.scroll_top.get_untracked() / LINE_PX) as i64;
                    self.rows.update(|rows| {
                        for row in fetched {
                            rows.entry(row.index).or_insert(row);
                        }
                        if rows.len() > MAX_CACHED {
                            let keep = MAX_CACHED as i64 / 2;
                            rows.retain(|i, _| (*i as i64 - center).abs() <= keep);
                        }
                    });
                }
            });
        }
    }

    /// Moves the cursor to `node` and scrolls it into view.
    fn move_to(self, node: Node) {
        let line = self.line_of(&node) as f64 * LINE_PX;
        let (top, view) = (self.scroll_top.get_untracked(), self.view_px.get_untracked());
        let new_top = if line < top {
            Some(line)
        } else if line + LINE_PX > top + view {
            Some(line + LINE_PX - view)
        } else {
            None
        };
        if let Some(t) = new_top {
            self.scroll_to.set_value(Some(t.max(0.0)));
            self.scroll_top.set(t.max(0.0));
        }
        self.cursor.set(Some(node));
    }

    /// Shows only the steps a filter keeps (`value` as the `<select>` has
    /// it; empty: every step), from the top.
    fn apply_filter(self, value: String) {
        self.filter.set(value.clone());
        self.cursor.set(None);
        self.picked.set_value(true);
        self.scroll_to.set_value(Some(0.0));
        self.scroll_top.set(0.0);
        if value.is_empty() {
            self.order.set(None);
            self.truncated.set(false);
            return;
        }
        let (kind, tool) = match value.split_once(':') {
            Some((kind, name)) => (kind.to_owned(), Some(name.to_owned())),
            None => (value.clone(), None),
        };
        let run_id = self.run.get_untracked();
        leptos::task::spawn_local(async move {
            let found = crate::api::trace_tree::get_tree_matches(run_id.clone(), kind, tool).await;
            // Another run or filter since: drop the answer.
            if self.run.get_untracked() != run_id || self.filter.get_untracked() != value {
                return;
            }
            match found {
                Ok(found) => {
                    self.truncated.set(found.truncated);
                    self.order.set(Some(Arc::new(found.indexes)));
                }
                Err(_) => self.filter.set(String::new()),
            }
            self.scroll_to.set_value(Some(0.0));
            self.scroll_top.set(0.0);
        });
    }

    /// Follows a selection made outside the tree (`step-3`, `call-…`).
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn follow_selection(self, detail_id: &str) {
        let node = if let Some(i) = detail_id.strip_prefix("step-").and_then(|i| i.parse().ok()) {
            Some(Node::Step(i))
        } else if let Some(span) = detail_id.strip_prefix("span-") {
            Some(Node::Span(span.to_owned()))
        } else if let Some(call) = detail_id.strip_prefix("call-") {
            self.rows.with_untracked(|rows| {
                rows.values()
                    .find(|r| r.calls.iter().any(|c| c.id == call))
                    .map(|r| Node::Call(r.index, call.to_owned()))
            })
        } else {
            None
        };
        if let Some(node) = node {
            self.picked.set_value(true);
            if let Node::Call(step, _) = &node {
                if !self.is_expanded(*step) {
                    self.expanded.update(|e| {
                        e.insert(*step);
                    });
                }
            }
            self.move_to(node);
        }
    }
}

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
    // Fetch what comes into view (in the browser).
    Effect::new(move |_| {
        let steps: Vec<u32> = lines.with(|l| l.iter().filter_map(|(_, n, _)| n.step()).collect());
        state.load(&steps);
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
        let event = leptos::ev::Custom::<leptos::web_sys::CustomEvent>::new(crate::components::timeline::SELECT_EVENT);
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
            if !(on_page && crate::components::timeline::select_node(&node.detail_id())) {
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
                let calls = (!handoff).then(|| call_names(&row.calls)).flatten();
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

/// `→ name, name +2`: the tools a step called.
fn call_names(calls: &[TreeCall]) -> Option<String> {
    const SHOWN: usize = 2;
    let first = calls.first()?;
    let mut names = vec![first.tool_name.as_str()];
    names.extend(calls.iter().skip(1).take(SHOWN - 1).map(|c| c.tool_name.as_str()));
    let more = calls.len().saturating_sub(SHOWN);
    let more = if more > 0 { format!(" +{more}") } else { String::new() };
    Some(format!("→ {}{more}", names.join(", ")))
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
