//! The timeline (waterfall) of a trace: every step's model time and every
//! tool call's approval wait and run time as bars on one time axis, drawn as
//! SVG on the server and hydrated like any other markup.
//!
//! One row per step (its model call) and one per tool call (the wait for a
//! decision, then the run). Bars of things still going end at the server's
//! "now". Each bar has a tooltip (`<title>`) and a duration label; clicking
//! one selects its node in the trace ([`select_node`]).
//!
//! The axis is active time: a gap no bar covers for over a second (a run
//! sitting finished until a follow-up) is drawn as a dashed mark, its real
//! length in its tooltip and the legend. A fork's steps copied from its
//! parent ran before the fork existed: they are one folded row saying how
//! long they took there, and the axis starts at the fork's own first step.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Step, ToolCall, ToolCallStatus};

use super::node_select::select_node;
use crate::api::trace_scan::{call_node_id, step_node_id};
use crate::format;

const WIDTH: f64 = 1000.0;
const LABEL_X: f64 = 4.0;
const PLOT_X: f64 = 170.0;
const PLOT_W: f64 = 760.0;
const ROW: f64 = 18.0;
const BAR_H: f64 = 12.0;
const AXIS_H: f64 = 20.0;
const TICKS: i64 = 4;
/// Bars shorter than this (in SVG units) are widened so they stay visible.
const MIN_BAR: f64 = 1.5;

/// One bar: what it times, from and to (ms after the first step started).
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// `model`, `handoff`, `tool`, `agent` (a sub-agent's child run) or `approval`.
    pub kind: &'static str,
    pub start: i64,
    pub end: i64,
}

/// One row: a step's model call or one tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    /// DOM id of the node in the step tree.
    pub node: String,
    pub bars: Vec<Bar>,
}

/// A gap no bar covers, longer than [`GAP_MS`]: drawn as a mark, not to
/// scale (the time a run sat finished before a follow-up, above all).
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    /// Where it is on the compressed axis (ms).
    pub at: i64,
    /// How long it really was (ms).
    pub idle: i64,
}

/// A fork's steps copied from its parent: they ran before the fork existed,
/// at their own times, so they are one folded row, not bars on its axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Inherited {
    pub first: u32,
    pub last: u32,
    /// From the first one's start to the last one's end, as they ran.
    pub wall: i64,
}

/// What the timeline draws.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub rows: Vec<Row>,
    /// The compressed axis' length (ms): active time.
    pub span: i64,
    pub gaps: Vec<Gap>,
    pub inherited: Option<Inherited>,
}

/// Uncovered time longer than this is a [`Gap`].
pub const GAP_MS: i64 = 1_000;

/// The rows of `steps` on an axis of active time: steps that started before
/// `own_since` (a fork's creation) are [`Inherited`], and gaps no bar covers
/// are compressed to marks.
pub fn layout(steps: &[Step], now: DateTime<Utc>, own_since: Option<DateTime<Utc>>) -> Layout {
    let (old, own): (Vec<&Step>, Vec<&Step>) =
        steps.iter().partition(|s| own_since.is_some_and(|since| s.started_at < since));
    let inherited = match (old.first(), old.last()) {
        (Some(a), Some(b)) => {
            let end = b.tool_calls.iter().filter_map(|c| c.completed_at).chain(b.completed_at).max();
            let wall = (end.unwrap_or(b.started_at) - a.started_at).num_milliseconds().max(0);
            Some(Inherited { first: a.index, last: b.index, wall })
        }
        _ => None,
    };
    // Bars in absolute ms, then the gaps between the union of their spans.
    let abs = |t: DateTime<Utc>| t.timestamp_millis();
    let bar = |kind, start: DateTime<Utc>, end: Option<DateTime<Utc>>| Bar {
        kind,
        start: abs(start),
        end: abs(end.unwrap_or(now).max(start)),
    };
    let mut rows = Vec::new();
    for step in own {
        let model_end = step.model_completed_at.or(step.completed_at);
        // A handoff step records the switch to another agent (no model call).
        let kind = if step.kind == "handoff" { "handoff" } else { "model" };
        rows.push(Row {
            label: format!("#{} {kind}", step.index),
            node: step_node_id(step.index),
            bars: vec![bar(kind, step.started_at, model_end)],
        });
        rows.extend(step.tool_calls.iter().map(|c| Row {
            label: match c.child_run_id {
                Some(_) => format!("  ↳ {}", c.tool_name),
                None => format!("  {}", c.tool_name),
            },
            node: call_node_id(&c.id),
            bars: call_bars(c).into_iter().map(|(k, s, e)| bar(k, s, e)).collect(),
        }));
    }
    let mut spans: Vec<(i64, i64)> = rows.iter().flat_map(|r| &r.bars).map(|b| (b.start, b.end)).collect();
    spans.sort_unstable();
    let Some(&(t0, _)) = spans.first() else {
        return Layout { rows, span: 0, gaps: Vec::new(), inherited };
    };
    // (start, length) of each gap, in absolute ms.
    let mut raw_gaps = Vec::new();
    let mut covered = t0;
    for (start, end) in spans {
        if start - covered > GAP_MS {
            raw_gaps.push((covered, start - covered));
        }
        covered = covered.max(end);
    }
    let squeeze = |t: i64| {
        let skipped: i64 = raw_gaps.iter().map(|&(g, len)| (t - g).clamp(0, len)).sum();
        t - t0 - skipped
    };
    for b in rows.iter_mut().flat_map(|r| &mut r.bars) {
        (b.start, b.end) = (squeeze(b.start), squeeze(b.end));
    }
    let gaps = raw_gaps.iter().map(|&(g, idle)| Gap { at: squeeze(g), idle }).collect();
    let span = rows.iter().flat_map(|r| &r.bars).map(|b| b.end).max().unwrap_or(0).max(1);
    Layout { rows, span, gaps, inherited }
}

type Span = (&'static str, DateTime<Utc>, Option<DateTime<Utc>>);

/// A call's waiting-for-approval bar and its run bar, as far as they exist.
fn call_bars(c: &ToolCall) -> Vec<Span> {
    let mut bars = Vec::new();
    if let Some(asked) = c.requested_at {
        let decided = c.approval.as_ref().map(|a| a.decided_at);
        let end = match c.status {
            ToolCallStatus::AwaitingApproval => None,
            _ => decided.or(c.started_at).or(c.completed_at).or(Some(asked)),
        };
        bars.push(("approval", asked, end));
    }
    if let Some(start) = c.started_at {
        let end = if c.status.is_finished() { c.completed_at.or(Some(start)) } else { c.completed_at };
        // An agent call runs as a child run.
        bars.push((if c.child_run_id.is_some() { "agent" } else { "tool" }, start, end));
    }
    bars
}

fn fmt(x: f64) -> String {
    format!("{x:.1}")
}

#[component]
pub fn Timeline(
    steps: Vec<Step>,
    now: DateTime<Utc>,
    /// For a fork: when it was made (its steps from before are its parent's).
    own_since: Option<DateTime<Utc>>,
) -> impl IntoView {
    let Layout { rows, span, gaps, inherited } = layout(&steps, now, own_since);
    if rows.is_empty() && inherited.is_none() {
        return view! { <p class="muted" data-testid="timeline-empty">"Nothing to show yet."</p> }.into_any();
    }
    let x = move |ms: i64| PLOT_X + PLOT_W * ms as f64 / span.max(1) as f64;
    let top = AXIS_H + if inherited.is_some() { ROW } else { 0.0 };
    let height = top + ROW * rows.len() as f64 + 4.0;
    let ticks = (0..=TICKS)
        .map(|i| {
            let t = span * i / TICKS;
            let anchor = if i == TICKS { "end" } else { "start" };
            view! {
                <line class="tick" x1=fmt(x(t)) x2=fmt(x(t)) y1="14" y2=fmt(height)></line>
                <text class="tick-label" x=fmt(x(t)) y="11" text-anchor=anchor>{format::duration_ms(t)}</text>
            }
        })
        .collect::<Vec<_>>();
    let gap_marks = gaps
        .iter()
        .map(|g| {
            let tip = format!("idle {}: nothing ran (not to scale)", format::duration_ms(g.idle));
            view! {
                <g class="timeline-gap" data-testid="timeline-gap" data-idle-ms=g.idle.to_string()>
                    <line class="gap" x1=fmt(x(g.at)) x2=fmt(x(g.at)) y1="14" y2=fmt(height)></line>
                    <title>{tip}</title>
                </g>
            }
        })
        .collect::<Vec<_>>();
    let gap_note = (!gaps.is_empty()).then(|| {
        let idle: Vec<String> = gaps.iter().map(|g| format::duration_ms(g.idle)).collect();
        view! {
            <span class="key key-gap" data-testid="timeline-gap-note">
                "idle, not to scale: " {idle.join(", ")}
            </span>
        }
    });
    let inherited_row = inherited.map(|i| {
        let node = step_node_id(i.first);
        let key_node = node.clone();
        let on_key = move |ev: leptos::ev::KeyboardEvent| {
            if matches!(ev.key().as_str(), "Enter" | " ") {
                ev.prevent_default();
                select_node(&key_node);
            }
        };
        let label = if i.first == i.last {
            format!("#{} inherited", i.first)
        } else {
            format!("#{}–#{} inherited", i.first, i.last)
        };
        let note =
            format!("copied from the parent run, where they took {}; not on this axis", format::duration_ms(i.wall));
        view! {
            <g class="timeline-row inherited" role="link" tabindex="0" data-testid="timeline-inherited"
                data-node=node.clone() on:click=move |_| { select_node(&node); } on:keydown=on_key>
                <rect class="row-hit" x="0" y=fmt(AXIS_H + 1.0) width=fmt(WIDTH) height=fmt(ROW - 2.0)></rect>
                <text class="row-label" x=fmt(LABEL_X) y=fmt(AXIS_H + 13.0)>{label}</text>
                <text class="bar-label" x=fmt(PLOT_X) y=fmt(AXIS_H + 13.0)>{note}</text>
            </g>
        }
    });
    let rows = rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let y = top + ROW * i as f64;
            let bars = row
                .bars
                .into_iter()
                .map(|b| {
                    let (x0, x1) = (x(b.start), x(b.end).max(x(b.start) + MIN_BAR));
                    let took = format::duration_ms(b.end - b.start);
                    let tip = format!("{} · {} {}", row.label.trim(), b.kind, took);
                    let right = x1 + 60.0 < WIDTH;
                    let (lx, anchor) = if right { (x1 + 3.0, "start") } else { (x0 - 3.0, "end") };
                    view! {
                        <rect class=format!("bar bar-{}", b.kind) data-testid="timeline-bar" data-kind=b.kind
                            x=fmt(x0) y=fmt(y + 3.0) width=fmt(x1 - x0) height=fmt(BAR_H) rx="2">
                            <title>{tip}</title>
                        </rect>
                        <text class="bar-label" x=fmt(lx) y=fmt(y + 13.0) text-anchor=anchor>{took}</text>
                    }
                })
                .collect::<Vec<_>>();
            let node = row.node.clone();
            let key_node = row.node.clone();
            // A focusable row: Enter or Space selects it, as a click does.
            let on_key = move |ev: leptos::ev::KeyboardEvent| {
                if matches!(ev.key().as_str(), "Enter" | " ") {
                    ev.prevent_default();
                    select_node(&key_node);
                }
            };
            view! {
                <g class="timeline-row" role="link" tabindex="0" data-node=row.node
                    on:click=move |_| { select_node(&node); } on:keydown=on_key>
                    <rect class="row-hit" x="0" y=fmt(y + 1.0) width=fmt(WIDTH) height=fmt(ROW - 2.0)></rect>
                    <text class="row-label" x=fmt(LABEL_X) y=fmt(y + 13.0)>{row.label}</text>
                    {bars}
                </g>
            }
        })
        .collect::<Vec<_>>();
    let view_box = format!("0 0 {WIDTH} {}", fmt(height));
    view! {
        <div class="timeline" data-testid="timeline">
            <div class="legend">
                <span class="key key-model">"model"</span>
                <span class="key key-tool">"tool"</span>
                <span class="key key-approval">"waiting for approval"</span>
                <span class="key key-agent">"sub-agent run"</span>
                <span class="key key-handoff">"handoff"</span>
                {gap_note}
                <span class="muted">"Click a row (or focus it and press Enter) to show its step or call."</span>
            </div>
            <div class="timeline-scroll">
                <svg viewBox=view_box width="100%" role="group" aria-label="Timeline of steps and tool calls">
                    {ticks}
                    {gap_marks}
                    {inherited_row}
                    {rows}
                </svg>
            </div>
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_approval_and_tool_time_are_separate_bars() {
        let step: Step = serde_json::from_value(json!({
            "run_id": "r", "index": 0, "kind": "model_turn", "status": "completed", "request": {}, "response": {},
            "usage": {}, "started_at": "2026-01-01T00:00:00Z", "model_completed_at": "2026-01-01T00:00:01.5Z",
            "completed_at": "2026-01-01T00:00:09Z",
            "tool_calls": [
                {"id": "a", "run_id": "r", "step_index": 0, "tool_name": "send_email", "arguments": {},
                 "status": "succeeded", "requested_at": "2026-01-01T00:00:01.5Z",
                 "approval": {"decision": "approved", "decided_by": "web", "decided_at": "2026-01-01T00:00:08Z",
                              "always": false, "original_arguments": {}, "edited_arguments": null, "comment": null},
                 "started_at": "2026-01-01T00:00:08Z", "completed_at": "2026-01-01T00:00:09Z"},
                {"id": "b", "run_id": "r", "step_index": 0, "tool_name": "wait", "arguments": {},
                 "status": "running", "started_at": "2026-01-01T00:00:01.5Z"}
            ],
        }))
        .unwrap();
        let now = "2026-01-01T00:00:10Z".parse().unwrap();
        let Layout { rows, span, .. } = layout(&[step], now, None);
        assert_eq!(span, 10_000, "a call still running ends at now");
        assert_eq!(rows.iter().map(|r| r.node.as_str()).collect::<Vec<_>>(), ["step-0", "call-a", "call-b"]);
        let bars = |i: usize| rows[i].bars.iter().map(|b| (b.kind, b.start, b.end)).collect::<Vec<_>>();
        assert_eq!(bars(0), [("model", 0, 1_500)]);
        assert_eq!(bars(1), [("approval", 1_500, 8_000), ("tool", 8_000, 9_000)]);
        assert_eq!(bars(2), [("tool", 1_500, 10_000)]);
    }

    #[test]
    fn handoffs_and_agent_calls_have_their_own_bars() {
        let steps: Vec<Step> = serde_json::from_value(json!([
            {"run_id": "r", "index": 0, "kind": "model_turn", "status": "completed", "request": {}, "response": {},
             "usage": {}, "started_at": "2026-01-01T00:00:00Z", "model_completed_at": "2026-01-01T00:00:01Z",
             "completed_at": "2026-01-01T00:00:05Z",
             "tool_calls": [
                {"id": "a", "run_id": "r", "step_index": 0, "tool_name": "math_helper", "arguments": {},
                 "status": "succeeded", "started_at": "2026-01-01T00:00:01Z",
                 "completed_at": "2026-01-01T00:00:05Z", "child_run_id": "child-1"}
             ]},
            {"run_id": "r", "index": 1, "kind": "handoff", "status": "completed", "request": {}, "response": {},
             "usage": {}, "started_at": "2026-01-01T00:00:05Z", "completed_at": "2026-01-01T00:00:05Z",
             "tool_calls": []}
        ]))
        .unwrap();
        let rows = layout(&steps, "2026-01-01T00:00:06Z".parse().unwrap(), None).rows;
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["#0 model", "  ↳ math_helper", "#1 handoff"]);
        assert_eq!(rows[1].bars[0].kind, "agent");
        assert_eq!((rows[2].bars[0].kind, rows[2].bars[0].start, rows[2].bars[0].end), ("handoff", 5_000, 5_000));
    }

    fn step(index: u32, start: &str, end: &str) -> Step {
        serde_json::from_value(json!({
            "run_id": "r", "index": index, "kind": "model_turn", "status": "completed", "request": {},
            "response": {}, "usage": {}, "started_at": start, "model_completed_at": end, "completed_at": end,
            "tool_calls": []
        }))
        .unwrap()
    }

    #[test]
    fn a_follow_up_gap_is_a_mark_and_the_axis_is_active_time() {
        let steps = [
            step(0, "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z"),
            // Two minutes finished, then a follow-up.
            step(1, "2026-01-01T00:02:02Z", "2026-01-01T00:02:03Z"),
            // Under a second apart: not a gap.
            step(2, "2026-01-01T00:02:03.5Z", "2026-01-01T00:02:04Z"),
        ];
        let l = layout(&steps, "2026-01-01T00:03:00Z".parse().unwrap(), None);
        assert_eq!(l.gaps, [Gap { at: 2_000, idle: 120_000 }]);
        assert_eq!(l.span, 4_000, "2 s, then 1 s, 0.5 s of overhead and 0.5 s");
        let starts: Vec<i64> = l.rows.iter().map(|r| r.bars[0].start).collect();
        assert_eq!(starts, [0, 2_000, 3_500]);
    }

    #[test]
    fn a_forks_inherited_steps_fold_and_its_own_start_the_axis() {
        let steps = [
            step(0, "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z"),
            step(1, "2026-01-01T00:00:02Z", "2026-01-01T00:12:34Z"),
            step(2, "2026-01-02T09:00:00Z", "2026-01-02T09:00:00.036Z"),
        ];
        let forked = "2026-01-02T08:59:59.990Z".parse().unwrap();
        let l = layout(&steps, "2026-01-02T09:00:01Z".parse().unwrap(), Some(forked));
        assert_eq!(l.inherited, Some(Inherited { first: 0, last: 1, wall: 754_000 }));
        assert_eq!(l.rows.len(), 1, "only the fork's own step is on the axis");
        assert_eq!((l.rows[0].bars[0].start, l.span), (0, 36));
        assert!(l.gaps.is_empty(), "the time before the fork is not a gap of its own");
    }
}
