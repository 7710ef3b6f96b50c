//! Small presentational components shared by the pages: status badges, JSON
//! blocks, token usage, tags, key/value facts and error boxes.
//!
//! Everything renders payload text through Leptos text nodes, which the
//! renderer escapes; nothing here sets raw HTML.

pub mod approval_card;
pub mod approval_decision;
pub mod copy_secret;
pub mod form_error;
pub mod loaded;
pub mod mcp_content;
pub mod node_select;
pub mod preview;
pub mod request_card;
pub mod timeline;
pub mod token_chart;
pub mod tool_result;
pub mod tool_sources;

pub use loaded::Loaded;

use runlens_engine::model::Role;

/// The caller's role where the things a page shows belong (the run's
/// project, the current project), provided by the page from its data so
/// its parts can leave out the controls the role does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallerRole(pub Option<Role>);

impl CallerRole {
    pub fn provide(role: Option<Role>) {
        provide_context(CallerRole(role));
    }

    /// Whether the caller has at least `need` (`false` when the page did
    /// not say: the server refuses anyway, so offer nothing).
    pub fn may(need: Role) -> bool {
        use_context::<CallerRole>().and_then(|c| c.0).is_some_and(|r| r >= need)
    }
}

use std::collections::BTreeMap;

use crate::format;
use leptos::prelude::*;
use runlens_engine::model::Usage;
use serde_json::Value;

/// A coloured pill for any status word (`running`, `failed`, `succeeded`,
/// `resolution`…). The colour comes from the `badge-{status}` CSS class; the
/// text reads underscores as spaces (`awaiting_approval` → "awaiting approval").
#[component]
pub fn Badge(
    #[prop(into)] status: String,
    /// Optional `data-testid` for the end-to-end tests.
    #[prop(optional)]
    testid: Option<&'static str>,
    /// A tone that recolours the pill (`tone-{tone}`, see [`OutcomeBadge`]).
    #[prop(optional)]
    tone: Option<&'static str>,
) -> impl IntoView {
    let class = match tone {
        Some(tone) => format!("badge badge-{status} tone-{tone}"),
        None => format!("badge badge-{status}"),
    };
    let text = status.replace('_', " ");
    view! { <span class=class data-testid=testid>{text}</span> }
}

/// A run's status pill and its outcome beside it (`done` then `1 call
/// rejected`): the pill takes the outcome's tone, so a done run with a
/// rejected or failed call is not the green of a clean one.
#[component]
pub fn OutcomeBadge(
    outcome: runlens_engine::model::RunOutcome,
    status: runlens_engine::model::RunStatus,
    /// `data-testid` of the status pill.
    #[prop(optional)]
    testid: Option<&'static str>,
    /// `data-testid` of the note (default `run-outcome`).
    #[prop(optional)]
    note_testid: Option<&'static str>,
) -> impl IntoView {
    let tone = outcome.tone.as_str();
    let note = (!outcome.note.is_empty()).then(|| {
        let class = format!("outcome-note tone-{tone}");
        let testid = note_testid.unwrap_or("run-outcome");
        view! { <span class=class data-testid=testid>{outcome.note.clone()}</span> }
    });
    view! {
        <span class="outcome" title=outcome.label.clone() data-outcome=tone>
            {match testid {
                Some(testid) => view! { <Badge status=status.as_str() testid tone/> }.into_any(),
                None => view! { <Badge status=status.as_str() tone/> }.into_any(),
            }}
            {note}
        </span>
    }
}

/// Pretty-printed JSON in a `<pre>`; `null` shows as `null`.
#[component]
pub fn JsonBlock(
    value: Value,
    #[prop(optional)] testid: Option<&'static str>,
    /// Extra CSS class, e.g. `error` for tool errors.
    #[prop(optional)]
    class: Option<&'static str>,
    /// The value was cut to a preview (see `crate::api::preview`): a string
    /// then holds the start of its JSON text, shown as it is.
    #[prop(optional)]
    cut: bool,
) -> impl IntoView {
    let class = match class {
        Some(extra) => format!("json {extra}"),
        None => "json".to_string(),
    };
    let text = match value {
        Value::String(preview) if cut => preview,
        other => format::pretty_json(&other),
    };
    view! { <pre class=class data-testid=testid>{text}</pre> }
}

/// Token counts: the total prominently (with a test id), then the breakdown.
#[component]
pub fn UsageLine(
    usage: Usage,
    /// `data-testid` of the span holding only the total number.
    testid: &'static str,
) -> impl IntoView {
    view! {
        <span class="usage">
            <span class="usage-total">
                <span data-testid=testid>{usage.total_tokens}</span>
                " tokens"
            </span>
            <UsageParts usage/>
        </span>
    }
}

/// The breakdown of a token count: input, output, cache reads, reasoning, requests.
#[component]
pub fn UsageParts(usage: Usage) -> impl IntoView {
    view! {
        <span class="usage-parts">
            <span title="input tokens">"in " {usage.input_tokens}</span>
            <span title="output tokens">"out " {usage.output_tokens}</span>
            <span title="input tokens served from the prompt cache">
                "cache " {usage.cache_read_tokens}
            </span>
            <span title="output tokens spent reasoning">"reasoning " {usage.reasoning_tokens}</span>
            <span title="model requests">"req " {usage.requests}</span>
        </span>
    }
}

/// A run's tags as `key=value` chips; a dash when there are none.
#[component]
pub fn Tags(tags: BTreeMap<String, String>) -> impl IntoView {
    if tags.is_empty() {
        return view! { <span class="muted">{format::NONE}</span> }.into_any();
    }
    let chips = tags
        .into_iter()
        .map(|(k, v)| {
            view! {
                <span class="tag">
                    <span class="tag-key">{k}</span>
                    "="
                    <span class="tag-value">{v}</span>
                </span>
            }
        })
        .collect::<Vec<_>>();
    view! { <span class="tags">{chips}</span> }.into_any()
}

/// One labelled fact in a header grid (`<dt>`/`<dd>` pair).
#[component]
pub fn Fact(label: &'static str, children: Children) -> impl IntoView {
    view! {
        <div class="fact">
            <dt>{label}</dt>
            <dd>{children()}</dd>
        </div>
    }
}

/// A visible error message.
#[component]
pub fn ErrorBox(#[prop(into)] message: String, #[prop(optional)] testid: Option<&'static str>) -> impl IntoView {
    view! {
        <div class="error" role="alert" data-testid=testid>
            {message}
        </div>
    }
}

/// Message for a failed server call, without the `ServerFnError` prefix noise.
pub fn server_error_message(err: &ServerFnError) -> String {
    match err {
        ServerFnError::ServerError(msg) => msg.clone(),
        other => other.to_string(),
    }
}
