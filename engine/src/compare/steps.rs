//! The aligned steps of two runs: keys, rows, each row classified, and the
//! page's rows built in full (see the parent module).
//!
//! A step's exact key is whether it has text and its calls' tools and
//! arguments in order; its loose key the tools' names alone. An aligned
//! pair is `changed` when its text, its tool calls (tool, arguments,
//! result, error, status) or its status differ; tokens, cost and duration
//! are listed in `differences` but change nothing by themselves.

use std::hash::{Hash, Hasher};

use super::align::{align, Keys, Row};
use super::{counts, cut_text, cut_value, hash_value, hasher, page_bounds, FirstDiff, RunData};
use crate::cost::Pricing;
use crate::model::{CallPair, CallSide, Change, Step, StepPair, StepRows, StepSide, StepStatus, ToolCall};

/// Both runs' steps aligned and classified.
pub(super) struct StepList<'a> {
    a: &'a [Step],
    b: &'a [Step],
    a_model: &'a str,
    b_model: &'a str,
    pricing: &'a Pricing,
    rows: Vec<Row>,
    changes: Vec<Change>,
    folded: usize,
    /// The first row that is not `equal`.
    pub first_diff: Option<usize>,
}

impl<'a> StepList<'a> {
    /// Aligns the steps; the first `shared` step indexes are the fork's
    /// shared history (folded).
    pub fn new(a: &RunData<'a>, b: &RunData<'a>, shared: u32, pricing: &'a Pricing) -> Self {
        let below = |steps: &[Step]| steps.iter().take_while(|s| s.index < shared).count();
        let folded = below(a.steps).min(below(b.steps));
        let (ka, kb) = (keys(a.steps), keys(b.steps));
        let rows = align(Keys { exact: &ka.0, loose: &ka.1 }, Keys { exact: &kb.0, loose: &kb.1 }, folded);
        let mut list = StepList {
            a: a.steps,
            b: b.steps,
            a_model: &a.run.model,
            b_model: &b.run.model,
            pricing,
            rows,
            changes: Vec::new(),
            folded,
            first_diff: None,
        };
        list.changes = list
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| match (r.a, r.b) {
                _ if i < folded => Change::Equal,
                (Some(x), Some(y)) if changed(&list.a[x], &list.b[y]) => Change::Changed,
                (Some(_), Some(_)) => Change::Equal,
                (Some(_), None) => Change::Deleted,
                _ => Change::Inserted,
            })
            .collect();
        list.first_diff = list.changes.iter().position(|c| *c != Change::Equal);
        list
    }

    /// One page of rows (see [`StepRows`]).
    pub fn page(&self, from: Option<u32>, limit: u32) -> StepRows {
        let total = self.rows.len();
        let (start, end) = page_bounds(total, self.folded, self.first_diff, from, limit);
        StepRows {
            total: total as u32,
            folded: self.folded as u32,
            counts: counts(&self.changes),
            from: start as u32,
            rows: (start..end).map(|i| self.pair(i)).collect(),
            next_from: (end < total).then_some(end as u32),
        }
    }

    /// Row `i` in full.
    fn pair(&self, i: usize) -> StepPair {
        let row = self.rows[i];
        let (x, y) = (row.a.map(|j| &self.a[j]), row.b.map(|j| &self.b[j]));
        let (sa, sb) = (x.map(|s| self.side(s, self.a_model)), y.map(|s| self.side(s, self.b_model)));
        let mut differences = Vec::new();
        let mut text = Vec::new();
        if let (Some(x), Some(y), Some(sa), Some(sb)) = (x, y, &sa, &sb) {
            differences = self.differences(x, y, sa, sb);
            if let (Some(ta), Some(tb)) = (&sa.text, &sb.text) {
                if ta != tb {
                    text = super::words::word_diff(ta, tb);
                }
            }
        }
        StepPair {
            row: i as u32,
            change: self.changes[i],
            a: sa,
            b: sb,
            differences,
            text,
            calls: call_pairs(x.map_or(&[], |s| &s.tool_calls), y.map_or(&[], |s| &s.tool_calls)),
        }
    }

    fn side(&self, s: &Step, model: &str) -> StepSide {
        StepSide {
            index: s.index,
            status: s.status,
            text: full_text(s).map(|t| cut_text(&t)),
            tools: s.tool_calls.iter().map(|c| c.tool_name.clone()).collect(),
            usage: s.usage,
            cost_usd: self.pricing.step_cost_usd(model, s),
            duration_ms: s.completed_at.map(|end| (end - s.started_at).num_milliseconds().max(0) as u64),
        }
    }

    fn differences(&self, x: &Step, y: &Step, sa: &StepSide, sb: &StepSide) -> Vec<String> {
        [
            ("text", x.response.text() != y.response.text() || x.response.error() != y.response.error()),
            ("tool_calls", !same_calls(&x.tool_calls, &y.tool_calls)),
            ("status", x.status != y.status),
            ("tokens", x.usage != y.usage),
            ("cost", sa.cost_usd != sb.cost_usd),
            ("duration", sa.duration_ms != sb.duration_ms),
        ]
        .into_iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| name.to_owned())
        .collect()
    }

    /// What differs first at row `i`, in words.
    pub fn describe(&self, i: usize) -> FirstDiff<u32> {
        let pair = self.pair(i);
        let (a, b) = (pair.a.as_ref().map(|s| s.index), pair.b.as_ref().map(|s| s.index));
        let label = match (a, b) {
            (Some(x), Some(y)) if x != y => format!("step {x} (step {y} in b)"),
            (Some(x), _) | (None, Some(x)) => format!("step {x}"),
            (None, None) => String::new(),
        };
        let what = |s: &Option<StepSide>| match s {
            Some(s) if !s.tools.is_empty() => s.tools.join(", "),
            _ => "text".to_owned(),
        };
        let summary = match pair.change {
            Change::Inserted => format!("{label}: only in b ({})", what(&pair.b)),
            Change::Deleted => format!("{label}: only in a ({})", what(&pair.a)),
            _ => match pair.calls.iter().find(|c| c.change != Change::Equal) {
                Some(call) => describe_call(&label, call),
                None if pair.differences.iter().any(|d| d == "text") => format!("{label}: text differs"),
                None => {
                    let status = |s: &Option<StepSide>| s.as_ref().map_or("", |s| status_name(s.status));
                    format!("{label}: status {} in a, {} in b", status(&pair.a), status(&pair.b))
                }
            },
        };
        FirstDiff { a, b, summary, human: false }
    }
}

/// Exact and loose keys of each step (see the module docs).
fn keys(steps: &[Step]) -> (Vec<u64>, Vec<u64>) {
    steps
        .iter()
        .map(|s| {
            let (mut exact, mut loose) = (hasher(), hasher());
            (s.response.text().is_some() || s.response.error().is_some()).hash(&mut exact);
            for c in &s.tool_calls {
                c.tool_name.hash(&mut exact);
                hash_value(&c.arguments, &mut exact);
                c.tool_name.hash(&mut loose);
            }
            (exact.finish(), loose.finish())
        })
        .unzip()
}

/// Whether an aligned pair is `changed` (text, calls or status differ).
fn changed(x: &Step, y: &Step) -> bool {
    x.status != y.status
        || x.response.text() != y.response.text()
        || x.response.error() != y.response.error()
        || !same_calls(&x.tool_calls, &y.tool_calls)
}

fn same_calls(x: &[ToolCall], y: &[ToolCall]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(c, d)| same_call(c, d))
}

/// The same tool, arguments, outcome and status (ids and times aside).
fn same_call(c: &ToolCall, d: &ToolCall) -> bool {
    c.tool_name == d.tool_name
        && c.status == d.status
        && c.arguments == d.arguments
        && c.result == d.result
        && c.error == d.error
}

/// A step's text: the model's, or the error of a failed model call.
fn full_text(s: &Step) -> Option<String> {
    match (s.response.text(), s.response.error()) {
        (Some(text), _) => Some(text.to_owned()),
        (None, Some(error)) => Some(format!("error: {error}")),
        (None, None) => None,
    }
}

fn status_name(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Running => "running",
        StepStatus::Completed => "completed",
        StepStatus::Interrupted => "interrupted",
    }
}

/// The calls of two aligned steps, aligned by tool and order.
fn call_pairs(x: &[ToolCall], y: &[ToolCall]) -> Vec<CallPair> {
    let keys = |calls: &[ToolCall]| -> (Vec<u64>, Vec<u64>) {
        calls
            .iter()
            .map(|c| {
                let (mut exact, mut loose) = (hasher(), hasher());
                c.tool_name.hash(&mut exact);
                hash_value(&c.arguments, &mut exact);
                c.tool_name.hash(&mut loose);
                (exact.finish(), loose.finish())
            })
            .unzip()
    };
    let (kx, ky) = (keys(x), keys(y));
    let rows = align(Keys { exact: &kx.0, loose: &kx.1 }, Keys { exact: &ky.0, loose: &ky.1 }, 0);
    rows.into_iter()
        .map(|r| {
            let (c, d) = (r.a.map(|i| &x[i]), r.b.map(|j| &y[j]));
            let change = match (c, d) {
                (Some(c), Some(d)) if same_call(c, d) => Change::Equal,
                (Some(_), Some(_)) => Change::Changed,
                (Some(_), None) => Change::Deleted,
                _ => Change::Inserted,
            };
            let arguments = match (c, d) {
                (Some(c), Some(d)) => super::json::json_diff(&c.arguments, &d.arguments),
                _ => Vec::new(),
            };
            let result_equal = matches!((c, d), (Some(c), Some(d)) if c.result == d.result && c.error == d.error);
            CallPair { change, a: c.map(call_side), b: d.map(call_side), arguments, result_equal }
        })
        .collect()
}

fn call_side(c: &ToolCall) -> CallSide {
    CallSide {
        id: c.id.clone(),
        tool_name: c.tool_name.clone(),
        status: c.status,
        arguments: cut_value(&c.arguments),
        result: c.result.as_ref().map(|r| cut_text(&r.to_string())),
        error: c.error.as_deref().map(cut_text),
    }
}

fn describe_call(label: &str, call: &CallPair) -> String {
    let tool = |s: &Option<CallSide>| s.as_ref().map_or(String::new(), |s| s.tool_name.clone());
    let (ta, tb) = (tool(&call.a), tool(&call.b));
    match call.change {
        Change::Inserted => format!("{label}: only b calls {tb}"),
        Change::Deleted => format!("{label}: only a calls {ta}"),
        _ if ta != tb => format!("{label}: {ta} in a, {tb} in b"),
        _ if !call.arguments.is_empty() => format!("{label}: arguments of {ta} differ"),
        _ if !call.result_equal => format!("{label}: result of {ta} differs"),
        _ => format!("{label}: status of {ta} differs"),
    }
}
