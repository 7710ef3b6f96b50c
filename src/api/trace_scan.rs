//! Server functions that scan all of a run's steps so the browser never
//! loads them: search within a trace, and the token chart's buckets.
//!
//! Both read the steps a chunk at a time through the `(run_id, index)` key
//! and send back only what the page shows: at most [`MAX_HITS`] hits with a
//! short snippet each, and at most [`MAX_BARS`] buckets.

use leptos::prelude::*;
use runlens_engine::cost::Pricing;
use runlens_engine::model::{Step, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most hits one search returns (the count still covers all of them).
pub const MAX_HITS: usize = 500;
/// Most bars of the token chart: longer runs are bucketed.
pub const MAX_BARS: u32 = 200;
/// Characters of context around a match in a snippet.
const SNIPPET_CONTEXT: usize = 40;

/// A step or tool call that matches a search.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    pub step: u32,
    /// The matching tool call; `None` when the step's own text matched.
    pub call_id: Option<String>,
    /// The tool's name for a call.
    pub name: String,
    /// Which field matched: `name`, `arguments`, `result`, `error`, `reasoning`, `text`.
    pub field: String,
    /// The match with a little context around it.
    pub snippet: String,
}

impl SearchHit {
    /// The DOM id of the node in the step tree.
    pub fn node_id(&self) -> String {
        match &self.call_id {
            Some(c) => call_node_id(c),
            None => step_node_id(self.step),
        }
    }
}

pub fn step_node_id(index: u32) -> String {
    format!("step-{index}")
}

pub fn call_node_id(call_id: &str) -> String {
    format!("call-{call_id}")
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    /// All matches, including those past [`MAX_HITS`].
    pub total: usize,
}

/// Token counts of one bar of the chart: one step, or a bucket of steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenBucket {
    pub first: u32,
    pub last: u32,
    /// Input tokens, cache reads included.
    pub input: u64,
    pub cache_read: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    pub reasoning: u64,
    pub cost: Option<f64>,
}

/// Sums steps into at most [`MAX_BARS`] buckets of consecutive steps.
pub struct Bucketer {
    size: u32,
    pub buckets: Vec<TokenBucket>,
}

impl Bucketer {
    /// For a run of `steps` steps.
    pub fn new(steps: u32) -> Self {
        Bucketer { size: steps.div_ceil(MAX_BARS).max(1), buckets: Vec::new() }
    }

    /// Adds step `index` with its usage and cost.
    pub fn add(&mut self, index: u32, u: &Usage, cost: Option<f64>) {
        let slot = (index / self.size) as usize;
        while self.buckets.len() <= slot {
            let first = self.buckets.len() as u32 * self.size;
            self.buckets.push(TokenBucket { first, last: first, ..TokenBucket::default() });
        }
        let b = &mut self.buckets[slot];
        b.last = b.last.max(index);
        b.input += u.input_tokens;
        b.cache_read += u.cache_read_tokens;
        b.output += u.output_tokens;
        b.reasoning += u.reasoning_tokens;
        if let Some(c) = cost {
            b.cost = Some(b.cost.unwrap_or(0.0) + c);
        }
    }
}

/// The chart's bars for steps already loaded.
pub fn buckets_of(steps: &[Step], model: &str, pricing: &Pricing) -> Vec<TokenBucket> {
    let mut b = Bucketer::new(steps.last().map_or(0, |s| s.index + 1));
    steps.iter().for_each(|s| b.add(s.index, &s.usage, pricing.step_cost_usd(model, s)));
    b.buckets
}

/// `text` around its first occurrence of `needle` (lowercase ASCII), if any.
pub fn snippet(text: &str, needle: &str) -> Option<String> {
    let at = text.to_ascii_lowercase().find(needle)?;
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(at.saturating_sub(SNIPPET_CONTEXT));
    let end = floor((at + needle.len() + SNIPPET_CONTEXT).min(text.len()));
    let (pre, post) = (if start > 0 { "…" } else { "" }, if end < text.len() { "…" } else { "" });
    Some(format!("{pre}{}{post}", &text[start..end]))
}

fn as_text(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => s.into(),
        other => other.to_string().into(),
    }
}

/// The first field of a call that contains `needle`, with its snippet.
fn match_call(call: &ToolCall, needle: &str) -> Option<(&'static str, String)> {
    let fields: [(&str, Option<std::borrow::Cow<str>>); 5] = [
        ("name", Some(call.tool_name.as_str().into())),
        ("arguments", Some(as_text(&call.arguments))),
        ("result", call.result.as_ref().map(as_text)),
        ("error", call.error.as_deref().map(Into::into)),
        ("reasoning", call.reasoning.as_deref().map(Into::into)),
    ];
    fields.into_iter().find_map(|(field, text)| Some((field, snippet(&text?, needle)?)))
}

/// The hits of one step: its text, then each of its calls.
pub fn search_step(step: &Step, needle: &str, out: &mut Vec<SearchHit>, total: &mut usize) {
    let text = step.response.text();
    let own = text.and_then(|t| snippet(t, needle)).map(|s| ("text", s, None, String::new()));
    let calls = step
        .tool_calls
        .iter()
        .filter_map(|c| match_call(c, needle).map(|(field, s)| (field, s, Some(c.id.clone()), c.tool_name.clone())));
    for (field, snippet, call_id, name) in own.into_iter().chain(calls) {
        *total += 1;
        if out.len() < MAX_HITS {
            out.push(SearchHit { step: step.index, call_id, name, field: field.into(), snippet });
        }
    }
}

/// Steps and tool calls of run `run_id` whose name, arguments, result,
/// error, reasoning or text contain `query` (ASCII case-insensitive).
#[server]
pub async fn search_trace(run_id: String, query: String) -> Result<SearchResults, ServerFnError> {
    let needle = query.trim().to_ascii_lowercase();
    if needle.is_empty() || needle.chars().count() > 200 {
        return Err(ServerFnError::new("search for 1 to 200 characters"));
    }
    let mut results = SearchResults::default();
    ssr::scan(&run_id, |step| search_step(step, &needle, &mut results.hits, &mut results.total)).await?;
    Ok(results)
}

/// The token chart of run `run_id`: at most [`MAX_BARS`] bars.
#[server]
pub async fn get_token_chart(run_id: String) -> Result<Vec<TokenBucket>, ServerFnError> {
    let (engine, _, head) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    // The outline carries usage and timings without payloads: one read of
    // a few milliseconds even for 10,000 steps.
    let ((run, outline), pricing) =
        tokio::try_join!(engine.traces().step_outline(&run_id), engine.traces().pricing(&head.project))
            .map_err(super::ssr::to_server_error)?;
    let mut b = Bucketer::new(outline.last().map_or(0, |s| s.index + 1));
    outline.iter().for_each(|s| b.add(s.index, &s.usage, pricing.outline_cost_usd(&run.model, s)));
    Ok(b.buckets)
}

#[cfg(feature = "ssr")]
mod ssr {
    use leptos::prelude::ServerFnError;
    use runlens_engine::model::Step;

    /// Steps read per query.
    const CHUNK: u32 = 1000;

    /// Calls `f` on every step of the run, in order.
    pub async fn scan(run_id: &str, mut f: impl FnMut(&Step)) -> Result<(), ServerFnError> {
        let (engine, _, _) = super::super::ssr::for_run(run_id, super::super::ssr::Role::Viewer).await?;
        let mut from = Some(0);
        while let Some(start) = from {
            let page =
                engine.traces().steps_page(run_id, start, CHUNK).await.map_err(super::super::ssr::to_server_error)?;
            page.steps.iter().for_each(&mut f);
            from = page.next_from;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(index: u32, text: &str, calls: Value) -> Step {
        serde_json::from_value(json!({
            "run_id": "r", "index": index, "kind": "model_turn", "status": "completed",
            "request": {}, "response": {"text": text},
            "usage": {"input_tokens": 100, "cache_read_tokens": 40, "output_tokens": 10, "reasoning_tokens": 4, "total_tokens": 110},
            "started_at": "2026-01-01T00:00:00Z", "tool_calls": calls,
        }))
        .unwrap()
    }

    fn call(id: &str, args: Value, result: Value) -> Value {
        json!({"id": id, "run_id": "r", "step_index": 0, "tool_name": "calculator", "arguments": args,
               "result": result, "status": "succeeded"})
    }

    #[test]
    fn snippets_keep_context_and_char_boundaries() {
        assert_eq!(snippet("hello world", "world").as_deref(), Some("hello world"));
        assert_eq!(snippet("hello", "nope"), None);
        let long = format!("{}needle{}", "é".repeat(60), "x".repeat(60));
        let s = snippet(&long, "needle").unwrap();
        assert!(s.starts_with('…') && s.ends_with('…') && s.contains("needle"), "{s}");
        assert_eq!(snippet("Case MATTERS not", "matters").as_deref(), Some("Case MATTERS not"));
    }

    #[test]
    fn search_finds_text_and_calls_once_each() {
        let s = step(
            7,
            "Adding 9876 + 1 now",
            json!([call("c7", json!({"expression": "9876 + 1"}), json!({"value": 9877}))]),
        );
        let (mut hits, mut total) = (Vec::new(), 0);
        search_step(&s, "9876 + 1", &mut hits, &mut total);
        assert_eq!(total, 2);
        assert_eq!((hits[0].call_id.as_deref(), hits[0].field.as_str()), (None, "text"));
        assert_eq!(hits[0].node_id(), "step-7");
        assert_eq!((hits[1].call_id.as_deref(), hits[1].field.as_str()), (Some("c7"), "arguments"));
        assert_eq!(hits[1].node_id(), "call-c7");
        hits.clear();
        search_step(&s, "9877", &mut hits, &mut total);
        assert_eq!(hits[0].field, "result");
        hits.clear();
        search_step(&s, "calcul", &mut hits, &mut total);
        assert_eq!(hits[0].field, "name");
    }

    #[test]
    fn long_runs_are_bucketed_to_at_most_max_bars() {
        let mut b = Bucketer::new(10_000);
        for i in 0..10_000 {
            let s = step(i, "", json!([]));
            b.add(s.index, &s.usage, Some(0.001));
        }
        assert_eq!(b.buckets.len(), MAX_BARS as usize);
        let first = &b.buckets[0];
        assert_eq!((first.first, first.last, first.input, first.cache_read), (0, 49, 5000, 2000));
        assert!((first.cost.unwrap() - 0.05).abs() < 1e-9);
        assert_eq!(b.buckets[199].last, 9_999);

        let few: Vec<Step> = (0..3).map(|i| step(i, "", json!([]))).collect();
        let bars = buckets_of(&few, "m", &Pricing::default());
        assert_eq!(bars.iter().map(|b| (b.first, b.last)).collect::<Vec<_>>(), [(0, 0), (1, 1), (2, 2)]);
        assert_eq!(bars[0].cost, None, "no price, no cost");
    }
}
