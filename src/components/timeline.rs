//! The timeline (waterfall) of a trace: every step's model time and every
//! tool call's approval wait and run time as bars on one time axis, drawn as
//! SVG on the server and hydrated like any other markup.
//!
//! One row per step (its model call) and one per tool call (the wait for a
//! decision, then the run). Bars of things still going end at the server's
//! "now". Each bar has a tooltip (`<title>`) and a duration label; clicking
//! one selects its node in the step tree ([`select_node`]).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Step, ToolCall, ToolCallStatus};

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

/// The rows of `steps`, and the span of time they cover (ms).
pub fn rows(steps: &[Step], now: DateTime<Utc>) -> (Vec<Row>, i64) {
    let Some(t0) = steps.iter().map(|s| s.started_at).min() else {
        return (Vec::new(), 0);
    };
    let ms = |t: DateTime<Utc>| (t - t0).num_milliseconds().max(0);
    let bar = |kind, start: DateTime<Utc>, end: Option<DateTime<Utc>>| Bar {
        kind,
        start: ms(start),
        end: ms(end.unwrap_or(now).max(start)),
    };
    let mut rows = Vec::new();
    for step in steps {
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
    let span = rows.iter().flat_map(|r| &r.bars).map(|b| b.end).max().unwrap_or(0).max(1);
    (rows, span)
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
pub fn Timeline(steps: Vec<Step>, now: DateTime<Utc>) -> impl IntoView {
    let (rows, span) = rows(&steps, now);
    if rows.is_empty() {
        return view! { <p class="muted" data-testid="timeline-empty">"Nothing to show yet."</p> }.into_any();
    }
    let x = move |ms: i64| PLOT_X + PLOT_W * ms as f64 / span as f64;
    let height = AXIS_H + ROW * rows.len() as f64 + 4.0;
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
    let rows = rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let y = AXIS_H + ROW * i as f64;
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
                <span class="muted">"Click a row (or focus it and press Enter) to show its step or call."</span>
            </div>
            <div class="timeline-scroll">
                <svg viewBox=view_box width="100%" role="group" aria-label="Timeline of steps and tool calls">
                    {ticks}
                    {rows}
                </svg>
            </div>
        </div>
    }
    .into_any()
}

/// Opens the step-tree node with DOM id `id` (and the steps around it),
/// scrolls to it and marks it selected; `false` when it is not on the page.
pub fn select_node(id: &str) -> bool {
    #[cfg(feature = "hydrate")]
    {
        let doc = document();
        let Some(el) = doc.get_element_by_id(id) else { return false };
        let mut open = Some(el.clone());
        while let Some(e) = open {
            if e.tag_name().eq_ignore_ascii_case("details") {
                let _ = e.set_attribute("open", "");
            }
            open = e.parent_element();
        }
        if let Ok(Some(old)) = doc.query_selector("[data-selected]") {
            let _ = old.remove_attribute("data-selected");
        }
        let _ = el.set_attribute("data-selected", "true");
        el.scroll_into_view_with_bool(true);
        true
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = id;
        false
    }
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
        let (rows, span) = rows(&[step], now);
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
        let (rows, _) = rows(&steps, "2026-01-01T00:00:06Z".parse().unwrap());
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["#0 model", "  ↳ math_helper", "#1 handoff"]);
        assert_eq!(rows[1].bars[0].kind, "agent");
        assert_eq!((rows[2].bars[0].kind, rows[2].bars[0].start, rows[2].bars[0].end), ("handoff", 5_000, 5_000));
    }
}
