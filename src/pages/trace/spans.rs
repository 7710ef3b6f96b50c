//! "Other spans" of a run recorded from OpenTelemetry spans: every span that
//! is neither a model call (a step) nor a tool call, with its attributes and
//! events, folded by default (see `runlens_engine::otel::ingest`).

use leptos::prelude::*;
use runlens_engine::model::SpanNode;

use crate::format;

/// The DOM id of a span's entry (the tree pane and links select it).
pub fn span_node_id(span_id: &str) -> String {
    format!("span-{span_id}")
}

/// The spans as a collapsible list; nothing for a run runlens ran.
#[component]
pub fn OtherSpans(spans: Vec<SpanNode>) -> impl IntoView {
    (!spans.is_empty()).then(|| {
        let count = spans.len();
        let items = spans.into_iter().map(|span| view! { <SpanItem span/> }).collect::<Vec<_>>();
        view! {
            <section class="section" id="other-spans">
                <details data-testid="other-spans">
                    <summary>
                        <h2 class="inline">"Other spans " <span class="count">{count}</span></h2>
                        <span class="sub">" agent, chain and other spans that are not model or tool calls"</span>
                    </summary>
                    <ol class="span-list">{items}</ol>
                </details>
            </section>
        }
    })
}

#[component]
fn SpanItem(span: SpanNode) -> impl IntoView {
    let duration = format::opt_duration(span.duration_ms());
    let attributes = (!span.attributes.is_empty()).then(|| {
        let text = serde_json::to_string_pretty(&span.attributes).unwrap_or_default();
        view! { <pre class="json">{text}</pre> }
    });
    let events = span
        .events
        .into_iter()
        .map(|e| {
            let attrs = (!e.attributes.is_empty())
                .then(|| serde_json::to_string_pretty(&e.attributes).unwrap_or_default())
                .map(|t| view! { <pre class="json">{t}</pre> });
            view! {
                <li class="span-event" data-testid="span-event">
                    <span class="mono">{e.name}</span> " " <span class="sub">{format::time(&e.at)}</span>
                    {attrs}
                </li>
            }
        })
        .collect::<Vec<_>>();
    let status = span.status.clone();
    let message = span.status_message.clone().map(|m| view! { <span class="inline-error">" " {m}</span> });
    view! {
        <li class="span-node" data-testid="span-node" data-span-id=span.span_id.clone()>
            <details id=span_node_id(&span.span_id)>
                <summary>
                    <span class="mono">{span.name}</span>
                    " " <span class="tag">{span.kind}</span>
                    " " <span class="sub">{duration}</span>
                    " " <span class=format!("span-status {status}")>{status.clone()}</span>
                    {message}
                </summary>
                {attributes}
                {(!events.is_empty()).then(|| view! { <ul class="span-events">{events}</ul> })}
            </details>
        </li>
    }
}
