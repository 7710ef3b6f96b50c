//! The token chart of a trace: per step (or per bucket of steps, past
//! `MAX_BARS` steps) a stacked bar of fresh input, cache-read input,
//! visible output and reasoning tokens, a cumulative line of all tokens,
//! and the totals with their cost. SVG drawn from Rust, no chart library.

use leptos::prelude::*;

use crate::api::trace_scan::TokenBucket;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 200.0;
const PLOT_X: f64 = 56.0;
const PLOT_W: f64 = 880.0;
const TOP: f64 = 10.0;
const PLOT_H: f64 = 160.0;

/// A USD amount: cents for a dollar or more, four significant places below.
pub fn usd(v: f64) -> String {
    if v == 0.0 {
        "$0.00".into()
    } else if v >= 1.0 {
        format!("${v:.2}")
    } else {
        let places = (-v.log10()).ceil().clamp(1.0, 8.0) as usize + 3;
        format!("${:.*}", places.min(10), v)
    }
}

/// A cost, or a note that the model has no price.
pub fn cost_text(cost: Option<f64>) -> String {
    cost.map(usd).unwrap_or_else(|| "no price".into())
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fmt(x: f64) -> String {
    format!("{x:.1}")
}

/// The stacked parts of a bar: (class, tokens).
fn parts(b: &TokenBucket) -> [(&'static str, u64); 4] {
    let cache = b.cache_read.min(b.input);
    let reasoning = b.reasoning.min(b.output);
    [("input", b.input - cache), ("cache", cache), ("output", b.output - reasoning), ("reasoning", reasoning)]
}

#[component]
pub fn TokenChart(buckets: Vec<TokenBucket>) -> impl IntoView {
    let total: u64 = buckets.iter().map(|b| b.input + b.output).sum();
    if buckets.is_empty() {
        return view! { <p class="muted" data-testid="token-chart-empty">"No tokens yet."</p> }.into_any();
    }
    let sum = |f: fn(&TokenBucket) -> u64| buckets.iter().map(f).sum::<u64>();
    let (input, cache, output, reasoning) =
        (sum(|b| b.input), sum(|b| b.cache_read), sum(|b| b.output), sum(|b| b.reasoning));
    let costs: Vec<f64> = buckets.iter().filter_map(|b| b.cost).collect();
    let cost = (!costs.is_empty()).then(|| costs.iter().sum::<f64>());
    let tallest = buckets.iter().map(|b| b.input + b.output).max().unwrap_or(0).max(1);
    let slot = PLOT_W / buckets.len() as f64;
    let bar_w = (slot * 0.8).clamp(0.5, 40.0);
    let y = |n: u64, max: u64| TOP + PLOT_H - PLOT_H * n as f64 / max.max(1) as f64;
    let mut running = 0u64;
    let mut line = Vec::with_capacity(buckets.len());
    let bars = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let x = PLOT_X + slot * i as f64 + (slot - bar_w) / 2.0;
            running += b.input + b.output;
            line.push(format!("{},{}", fmt(x + bar_w / 2.0), fmt(y(running, total))));
            let mut base = 0u64;
            let rects = parts(b)
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(class, n)| {
                    let (top, bottom) = (y(base + n, tallest), y(base, tallest));
                    base += n;
                    view! { <rect class=format!("tok tok-{class}") x=fmt(x) y=fmt(top) width=fmt(bar_w) height=fmt(bottom - top)></rect> }
                })
                .collect::<Vec<_>>();
            let steps = if b.first == b.last { format!("step #{}", b.first) } else { format!("steps #{}–#{}", b.first, b.last) };
            let tip = format!(
                "{steps}: {} in ({} cached), {} out ({} reasoning), {}",
                thousands(b.input), thousands(b.cache_read), thousands(b.output), thousands(b.reasoning), cost_text(b.cost)
            );
            view! { <g class="token-bar" data-testid="token-bar" data-first=b.first.to_string()><title>{tip}</title>{rects}</g> }
        })
        .collect::<Vec<_>>();
    let per = if buckets.iter().any(|b| b.first != b.last) { "bars are buckets of steps" } else { "one bar per step" };
    let view_box = format!("0 0 {WIDTH} {HEIGHT}");
    let base_y = fmt(TOP + PLOT_H);
    view! {
        <div class="token-chart" data-testid="token-chart">
            <div class="legend">
                <span class="key key-input">"input"</span>
                <span class="key key-cache">"cache read"</span>
                <span class="key key-output">"output"</span>
                <span class="key key-reasoning">"reasoning"</span>
                <span class="key key-cumulative">"cumulative"</span>
                <span class="muted">{per}</span>
            </div>
            // Its own scroll box on narrow screens (focusable, so it scrolls by keyboard too).
            <div class="chart-scroll" tabindex="0" role="group" aria-label="Token chart">
            <svg viewBox=view_box width="100%" role="img" aria-label="Tokens per step">
                <line class="axis" x1=fmt(PLOT_X) x2=fmt(PLOT_X + PLOT_W) y1=base_y.clone() y2=base_y></line>
                <text class="tick-label" x=fmt(PLOT_X - 4.0) y=fmt(TOP + 8.0) text-anchor="end">{thousands(tallest)}</text>
                <text class="tick-label" x=fmt(PLOT_X - 4.0) y=fmt(TOP + PLOT_H) text-anchor="end">"0"</text>
                <text class="tick-label cumulative" x=fmt(PLOT_X + PLOT_W + 4.0) y=fmt(TOP + 8.0)>{thousands(total)}</text>
                {bars}
                <polyline class="cumulative-line" points=line.join(" ")></polyline>
            </svg>
            </div>
            <p class="token-totals" data-testid="token-totals">
                <strong data-testid="token-total">{thousands(total)}</strong> " tokens: "
                {thousands(input)} " in (" {thousands(cache)} " cache read), "
                {thousands(output)} " out (" {thousands(reasoning)} " reasoning) · "
                <span data-testid="chart-cost">{cost_text(cost)}</span>
            </p>
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_well() {
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(12.345), "$12.35");
        assert_eq!(usd(0.0123), "$0.01230");
        assert_eq!(usd(0.000015), "$0.00001500");
        assert_eq!(usd(0.5), "$0.5000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
