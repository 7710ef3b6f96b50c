//! The message transcript of the trace page: what the model saw, in order.
//!
//! Three kinds of message: `human` (the prompt and follow-ups), `agent` (model
//! text, an optional structured result and tool invocations) and
//! `invocation-result` (a tool's resolution or rejection). Human messages
//! that runlens wrote itself (the schema-repair request, `[runlens] …`) are
//! shown as notes.
//!
//! Every other human message has an Edit button: a `<details>` holding an
//! `ActionForm` that forks the run with the edited text and navigates to the
//! fork. Its open state and text live in the DOM, so a live refresh of the
//! page keeps an editor open with what was typed; it also works as a plain
//! form post without JavaScript (the server redirects to the fork).

use leptos::prelude::*;
use runlens_engine::model::{Invocation, Message, MessageBody, ResultType};

use crate::api::EditMessage;
use crate::components::preview::{page_cuts, ShowAll};
use crate::components::tool_result::ToolResult;
use crate::components::{Badge, JsonBlock};
use crate::format;

/// How runlens marks the human messages it writes itself.
pub const NOTE_PREFIX: &str = "[runlens] ";

pub fn result_type(rt: ResultType) -> &'static str {
    match rt {
        ResultType::Resolution => "resolution",
        ResultType::Rejection => "rejection",
    }
}

#[component]
pub fn Transcript(messages: Vec<Message>, run_id: String, edit: ServerAction<EditMessage>) -> impl IntoView {
    if messages.is_empty() {
        return view! { <p class="muted">"No messages yet."</p> }.into_any();
    }
    let items = messages
        .into_iter()
        .map(|message| view! { <MessageView message run_id=run_id.clone() edit/> })
        .collect::<Vec<_>>();
    view! { <ol class="transcript" data-testid="transcript">{items}</ol> }.into_any()
}

#[component]
fn MessageView(message: Message, run_id: String, edit: ServerAction<EditMessage>) -> impl IntoView {
    let kind = message.body.kind();
    let note = matches!(&message.body, MessageBody::Human { message } if message.starts_with(NOTE_PREFIX));
    let (label, class) = match &message.body {
        MessageBody::Human { .. } if note => ("runlens note", "msg msg-note".to_string()),
        MessageBody::Human { .. } => ("human", "msg msg-human".to_string()),
        MessageBody::Agent { .. } => ("agent", format!("msg msg-{kind}")),
        MessageBody::InvocationResult { .. } => ("tool result", format!("msg msg-{kind}")),
    };
    let step = message.step_index.map(|i| format!(" · step #{i}"));
    let message_id = message.id.clone();
    // A long message comes cut to a preview: link to it in full, and do not
    // offer to edit the preview (saving it would fork with the cut text).
    let cut = page_cuts().message(message.seq);
    let full = cut.then(|| {
        let href = format!("/api/runs/{}/messages?from={}&limit=1", format::url_encode(&run_id), message.seq);
        view! { <ShowAll href/> }
    });
    let body = match message.body {
        MessageBody::Human { message } if note => {
            let text = message.trim_start_matches(NOTE_PREFIX).to_string();
            view! { <p class="note-text" data-testid="system-note">{text}</p> }.into_any()
        }
        MessageBody::Human { message } if cut => view! {
            <pre class="text msg-text">{message}</pre>
            <p class="hint" data-testid="message-too-long">"Too long to edit here: fork it through the API."</p>
        }
        .into_any(),
        MessageBody::Human { message } if crate::components::CallerRole::may(runlens_engine::model::Role::Operator) => {
            view! {
                <pre class="text msg-text">{message.clone()}</pre>
                <MessageEditor run_id message_id text=message edit/>
            }
            .into_any()
        }
        MessageBody::Human { message } => view! { <pre class="text msg-text">{message}</pre> }.into_any(),
        MessageBody::Agent { message, result, invocations } => view! {
            {message.map(|m| view! { <pre class="text msg-text">{m}</pre> })}
            {result.map(|r| view! {
                <div class="label">"Result"</div>
                <JsonBlock value=r cut/>
            })}
            {invocations.into_iter().map(|inv| view! { <InvocationView inv cut/> }).collect::<Vec<_>>()}
        }
        .into_any(),
        MessageBody::InvocationResult { id, tool_name, result_type: rt, result } => view! {
            <div class="invocation-head">
                <span class="mono tool-name">{tool_name}</span>
                <Badge status=result_type(rt) testid="result-type"/>
                <span class="mono sub" title="tool call id">{id}</span>
            </div>
            <ToolResult value=result/>
        }
        .into_any(),
    };

    view! {
        <li class=class data-testid="message" data-kind=kind data-note=note.then_some("true")
            data-message-id=message.id>
            <div class="msg-head">
                <span class="msg-kind">{label}</span>
                <span class="muted">
                    "#" {message.seq} {step} " · " {format::clock(&message.created_at)}
                </span>
            </div>
            <div class="msg-body">{body} {full}</div>
        </li>
    }
}

/// The Edit button of a human message and its inline editor.
#[component]
fn MessageEditor(run_id: String, message_id: String, text: String, edit: ServerAction<EditMessage>) -> impl IntoView {
    let rows = (text.lines().count() + 1).clamp(2, 12).to_string();
    let editor_text = format::rcdata_text(&text);
    let error = {
        let id = message_id.clone();
        move || {
            edit.value().with(|v| match v {
                Some(Err(e)) if e.is_for(&id) => Some(view! {
                    <p class="inline-error" role="alert" data-testid="edit-message-error">{e.message.clone()}</p>
                }),
                _ => None,
            })
        }
    };
    let saving = {
        let id = message_id.clone();
        Signal::derive(move || {
            edit.pending().get() && edit.input().with(|i| i.as_ref().is_some_and(|i| i.message_id == id))
        })
    };
    // Closes the editor; the button's default action (reset) restores the text.
    let close = |ev: leptos::ev::MouseEvent| {
        let button: leptos::web_sys::Element = event_target(&ev);
        if let Ok(Some(details)) = button.closest("details") {
            let _ = details.remove_attribute("open");
        }
    };

    view! {
        <details class="msg-edit">
            <summary class="button subtle small" data-testid="edit-message">"Edit"</summary>
            <ActionForm action=edit attr:class="edit-form">
                <input type="hidden" name="run_id" value=run_id/>
                <input type="hidden" name="message_id" value=message_id/>
                <textarea name="text" rows=rows spellcheck="false" required aria-label="The edited message"
                    data-testid="edit-message-text">{editor_text}</textarea>
                <p class="hint">
                    "Saving starts a new run (a fork) from this message, with the history before it; this run stays as it is."
                </p>
                {error}
                <div class="edit-actions">
                    <button type="submit" class="button primary" data-testid="edit-message-save"
                        disabled=move || saving.get()>
                        {move || if saving.get() { "Forking…" } else { "Save and fork" }}
                    </button>
                    <button type="reset" class="button subtle" data-testid="edit-message-cancel"
                        on:click=close>"Cancel"</button>
                </div>
            </ActionForm>
        </details>
    }
}

/// A tool call the model asked for: name, id, optional reasoning, input
/// (`cut`: a preview).
#[component]
fn InvocationView(inv: Invocation, cut: bool) -> impl IntoView {
    let tool = inv.tool_name.clone();
    view! {
        <div class="invocation" data-testid="invocation" data-tool=tool>
            <div class="invocation-head">
                <span class="arrow">"→"</span>
                <span class="mono tool-name">{inv.tool_name}</span>
                <span class="mono sub" title="tool call id">{inv.id}</span>
            </div>
            {inv.reasoning.map(|r| view! { <p class="reasoning">{r}</p> })}
            <JsonBlock value=inv.input cut/>
        </div>
    }
}
