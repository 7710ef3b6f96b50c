//! The configurations side by side, each run's identity and outcome, and
//! the totals with their deltas (see the parent module).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::{cut_text, cut_value, RunData};
use crate::cost::Pricing;
use crate::model::{CompareSide, CompareTotals, FieldDiff, Run, Totals, TotalsDelta};

/// The saved agent a run started from, as the `agent` field shows it.
#[derive(Serialize)]
struct AgentRef<'r> {
    id: &'r str,
    version: Option<u32>,
}

/// Every compared configuration field, in the order [`FieldDiff`] lists them.
pub(super) fn fields(a: &Run, b: &Run) -> Vec<FieldDiff> {
    let (va, vb) = (values(a), values(b));
    va.into_iter()
        .zip(vb)
        .map(|((field, a), (_, b))| {
            let (a, b) = (a.as_ref(), b.as_ref());
            let equal = a == b;
            let structured = |v: &Value| v.is_object() || v.is_array();
            let json =
                if !equal && (structured(a) || structured(b)) { super::json::json_diff(a, b) } else { Vec::new() };
            let words = match (a, b) {
                (Value::String(x), Value::String(y)) if !equal => super::words::word_diff(&cut_text(x), &cut_text(y)),
                _ => Vec::new(),
            };
            FieldDiff { field: field.to_owned(), a: cut_value(a), b: cut_value(b), equal, json, words }
        })
        .collect()
}

/// The fields' values; the free-form ones (a scripted run's settings can be
/// megabytes) borrowed.
fn values(r: &Run) -> Vec<(&'static str, Cow<'_, Value>)> {
    fn v<T: Serialize + ?Sized>(x: &T) -> Cow<'static, Value> {
        Cow::Owned(serde_json::to_value(x).unwrap_or(Value::Null))
    }
    let agent = r.agent_id.as_deref().map(|id| AgentRef { id, version: r.agent_version });
    vec![
        ("model", v(&r.model)),
        ("model_settings", Cow::Borrowed(&r.model_settings)),
        ("system_prompt", v(&r.system_prompt)),
        ("initial_prompt", v(&r.initial_prompt)),
        ("input", r.input.as_ref().map_or(Cow::Owned(Value::Null), Cow::Borrowed)),
        ("tools", v(&r.tools)),
        ("context", Cow::Borrowed(&r.context)),
        ("result_schema", r.result_schema.as_ref().map_or(Cow::Owned(Value::Null), Cow::Borrowed)),
        ("max_turns", v(&r.max_turns)),
        ("approval", v(&r.approval)),
        ("agent", v(&agent)),
        ("tags", v(&r.tags)),
    ]
}

/// One run's identity, outcome and figures.
pub(super) fn side(d: &RunData<'_>, pricing: &Pricing, now: chrono::DateTime<chrono::Utc>) -> CompareSide {
    let r = d.run;
    CompareSide {
        id: r.id.clone(),
        name: cut_text(&r.name),
        status: r.status,
        model: r.model.clone(),
        step_count: r.step_count,
        message_count: d.messages.len() as u64,
        tool_calls: d.steps.iter().map(|s| s.tool_calls.len() as u64).sum(),
        usage: r.usage,
        cost_usd: pricing.run_cost_usd(r),
        duration_ms: r.duration_ms(now).map(|ms| ms as u64),
        result: r.result.as_ref().map(cut_value),
        failure_reason: r.failure_reason.as_deref().map(cut_text),
        parent_run_id: r.parent_run_id.clone(),
        group_id: r.group_id.clone(),
        created_at: r.created_at,
    }
}

/// Both sides' totals and `b - a`.
pub(super) fn totals(a: &CompareSide, b: &CompareSide) -> CompareTotals {
    let of = |s: &CompareSide| Totals {
        steps: s.step_count,
        tool_calls: s.tool_calls,
        input_tokens: s.usage.input_tokens,
        output_tokens: s.usage.output_tokens,
        total_tokens: s.usage.total_tokens,
        cost_usd: s.cost_usd,
        duration_ms: s.duration_ms,
    };
    let (ta, tb) = (of(a), of(b));
    let minus = |x: u64, y: u64| (i128::from(y) - i128::from(x)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    let delta = TotalsDelta {
        steps: minus(ta.steps.into(), tb.steps.into()),
        tool_calls: minus(ta.tool_calls, tb.tool_calls),
        input_tokens: minus(ta.input_tokens, tb.input_tokens),
        output_tokens: minus(ta.output_tokens, tb.output_tokens),
        total_tokens: minus(ta.total_tokens, tb.total_tokens),
        cost_usd: ta.cost_usd.zip(tb.cost_usd).map(|(x, y)| y - x),
        duration_ms: ta.duration_ms.zip(tb.duration_ms).map(|(x, y)| minus(x, y)),
    };
    CompareTotals { a: ta, b: tb, delta }
}
