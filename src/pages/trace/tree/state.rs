//! The tree pane's state and its line arithmetic: which node is on which
//! line, given the steps shown (all, or the ones a filter keeps) and the
//! steps whose calls are expanded; and loading the rows of the lines in view.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use leptos::prelude::*;

use crate::api::trace_tree::{TreeRow, TREE_BLOCK};
use crate::api::trace_window::LiveTrace;

/// Height of one line in pixels (the CSS `.tree-row` height).
pub const LINE_PX: f64 = 28.0;
/// Lines rendered beyond each edge of the view.
pub(super) const OVERSCAN: usize = 12;
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
            Node::Span(id) => super::super::spans::span_node_id(id),
        }
    }
    pub(super) fn row_id(&self) -> String {
        format!("tree-{}", self.detail_id())
    }
    /// The step the line belongs to (`None`: a span).
    pub(super) fn step(&self) -> Option<u32> {
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
    pub(super) run: RwSignal<String>,
    pub(super) count: RwSignal<u32>,
    pub(super) rows: RwSignal<BTreeMap<u32, TreeRow>>,
    /// Blocks being fetched.
    pub(super) loading: StoredValue<HashSet<u32>>,
    /// Steps whose calls are lines (a run the page holds whole: all).
    pub(super) expanded: RwSignal<BTreeSet<u32>>,
    pub(super) all_expanded: RwSignal<bool>,
    pub(super) scroll_top: RwSignal<f64>,
    pub(super) view_px: RwSignal<f64>,
    pub(super) cursor: RwSignal<Option<Node>>,
    /// The user picked a line: stop following the newest step.
    pub(super) picked: StoredValue<bool>,
    /// The scroll position to restore (or set) once the list is in the DOM.
    pub(super) scroll_to: StoredValue<Option<f64>>,
    /// The steps on the page (the detail): `(first, last)`.
    pub(super) shown: RwSignal<(u32, u32)>,
    pub(super) active: RwSignal<bool>,
    /// The server's clock when the window was read.
    pub(super) now: RwSignal<DateTime<Utc>>,
    /// A recorded run's other spans: lines after its steps.
    pub(super) spans: RwSignal<Vec<SpanLine>>,
    /// The steps a filter keeps, in order (`None`: every step).
    pub(super) order: RwSignal<Option<Arc<Vec<u32>>>>,
    /// The filter's `<select>` value (`""`, `errors`, `decisions`, `tool:NAME`).
    pub(super) filter: RwSignal<String>,
    /// The filter matched more steps than it keeps.
    pub(super) truncated: RwSignal<bool>,
    /// The run's tools, to filter by.
    pub(super) tools: RwSignal<Vec<String>>,
}

/// A span's line.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SpanLine {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) kind: String,
    pub(super) status: String,
    pub(super) duration_ms: Option<i64>,
    /// How many of its ancestors are spans of the list too.
    pub(super) depth: usize,
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

    pub(super) fn max_scroll(self) -> f64 {
        (self.total_lines() as f64 * LINE_PX - self.view_px.get_untracked()).max(0.0)
    }

    /// Whether step `index`'s calls are lines.
    pub(super) fn is_expanded(self, index: u32) -> bool {
        self.all_expanded.get_untracked() || self.expanded.with_untracked(|e| e.contains(&index))
    }

    /// The expanded steps with their call counts, in order (a step whose row
    /// is not loaded counts none).
    pub(super) fn openings(self) -> Vec<(u32, usize)> {
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
    pub(super) fn shown_steps(self) -> usize {
        self.order.with(|o| o.as_ref().map_or(self.count.get() as usize, |o| o.len()))
    }

    /// Where step `index` is among the steps shown (where it would be, when
    /// the filter does not keep it).
    pub(super) fn pos_of(self, index: u32) -> usize {
        self.order.with_untracked(|o| match o {
            Some(o) => o.binary_search(&index).unwrap_or_else(|at| at),
            None => index as usize,
        })
    }

    /// The step shown at `pos`.
    pub(super) fn step_at(self, pos: usize) -> Option<u32> {
        self.order.with_untracked(|o| match o {
            Some(o) => o.get(pos).copied(),
            None => (pos < self.count.get_untracked() as usize).then_some(pos as u32),
        })
    }

    /// Lines of the steps and their calls (the spans' come after).
    pub(super) fn step_lines(self, openings: &[(u32, usize)]) -> usize {
        untrack(|| self.shown_steps()) + openings.iter().map(|(_, n)| n).sum::<usize>()
    }

    pub(super) fn total_lines(self) -> usize {
        self.step_lines(&self.openings_untracked()) + self.spans.with_untracked(Vec::len)
    }

    pub(super) fn openings_untracked(self) -> Vec<(u32, usize)> {
        untrack(|| self.openings())
    }

    /// The line `node` is on.
    pub(super) fn line_of(self, node: &Node) -> usize {
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
    pub(super) fn node_at(self, line: usize, openings: &[(u32, usize)]) -> Option<Node> {
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
    pub(super) fn load(self, steps: &[u32]) {
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
    pub(super) fn move_to(self, node: Node) {
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
    pub(super) fn apply_filter(self, value: String) {
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
    /// Puts the cursor on step `index`, the one the detail pane shows,
    /// unless it is already there or on one of its calls (the user's pick
    /// and the following of a live run are left as they are).
    pub fn show_step(self, index: u32) {
        let there = self.cursor.with_untracked(|c| c.as_ref().and_then(Node::step) == Some(index));
        if !there {
            self.move_to(Node::Step(index));
        }
    }

    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub(super) fn follow_selection(self, detail_id: &str) {
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
