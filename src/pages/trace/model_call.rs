//! A step's model call in full: the messages exactly as the model got them,
//! shown as a chat (system prompt, person, assistant with its tool calls,
//! tool results), and a toggle to the raw JSON bodies of the provider's
//! request and response. Loaded the first time it is unfolded
//! (`get_model_call`): a page never loads what nobody opens.

use leptos::prelude::*;
use runlens_engine::model::{MessageBody, ModelCall, ResultType};

use super::steps::plural;
use crate::api::trace_window::get_model_call;
use crate::components::{server_error_message, JsonBlock};

/// The folded "Model call" of step `index` of run `run_id`.
#[component]
pub fn ModelCallView(run_id: String, index: u32) -> impl IntoView {
    let loaded = RwSignal::new(None::<Result<ModelCall, String>>);
    let load = move |ev: leptos::ev::Event| {
        let opened = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
        if opened && loaded.get_untracked().is_none() {
            let run_id = run_id.clone();
            leptos::task::spawn_local(async move {
                let got = get_model_call(run_id, index).await.map_err(|e| server_error_message(&e));
                loaded.try_set(Some(got));
            });
        }
    };
    let body = move || match loaded.get() {
        None => view! { <p class="muted" data-testid="model-call-loading">"Loading the model call…"</p> }.into_any(),
        Some(Err(e)) => view! { <p class="inline-error">{e}</p> }.into_any(),
        Some(Ok(call)) => view! { <ModelCallBody call/> }.into_any(),
    };
    view! {
        <details class="model-call" data-testid="model-call" on:toggle=load>
            <summary>"Model call: messages sent, raw request and response"</summary>
            {body}
        </details>
    }
}

#[component]
fn ModelCallBody(call: ModelCall) -> impl IntoView {
    let sent = call.messages.len() as u64 + call.omitted_messages;
    let notes = [
        (call.dropped_messages > 0).then(|| {
            format!("{} oldest transcript messages were left out to fit the context window.", call.dropped_messages)
        }),
        (call.omitted_messages > 0).then(|| {
            format!("The {} oldest messages sent are not shown here; the transcript has them.", call.omitted_messages)
        }),
        (!call.undefined_tools.is_empty())
            .then(|| format!("No longer defined, so not shown: {}.", call.undefined_tools.join(", "))),
    ];
    let notes = notes.into_iter().flatten().map(|n| view! { <p class="muted model-call-note">{n}</p> }).collect_view();
    let tools = call.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>().join(", ");
    let system = match (&call.system_prompt, call.system_prompt_known) {
        (Some(prompt), _) => Some(chat_message("system", "System", view! { <pre class="text">{prompt.clone()}</pre> })),
        (None, true) => None,
        (None, false) => Some(chat_message(
            "system",
            "System",
            view! { <p class="muted">"Not recorded: this step predates recorded prompts and an agent handed off since."</p> },
        )),
    };
    let messages = call.messages.iter().map(|m| message_view(&m.body)).collect_view();
    view! {
        <div class="model-call-body" data-testid="model-call-body">
            <p class="step-meta">
                <span>"model " <span class="mono" data-testid="model-call-model">{call.model.clone()}</span></span>
                <span data-testid="model-call-count">{plural(sent as usize, "message")} " sent"</span>
                <span>{plural(call.tools.len(), "tool")} " offered"</span>
            </p>
            {notes}
            <ol class="chat" data-testid="model-call-messages">
                {system}
                {messages}
            </ol>
            {(!tools.is_empty()).then(|| view! { <p class="muted">"Tools offered: " <span class="mono">{tools}</span></p> })}
            <details class="raw" data-testid="model-call-raw">
                <summary>"Raw provider request and response (JSON)"</summary>
                <p class="muted">
                    "The bodies as the provider adapter builds them from what the run recorded; credentials travel in headers and are never shown."
                </p>
                <div class="label">"Request body"</div>
                <JsonBlock value=call.request_body testid="raw-request"/>
                <div class="label">"Response body"</div>
                {match (call.response_body, call.error) {
                    (Some(body), _) => view! { <JsonBlock value=body testid="raw-response"/> }.into_any(),
                    (None, Some(error)) => view! { <pre class="text error-text">{error}</pre> }.into_any(),
                    (None, None) => view! { <p class="muted">"The model has not answered yet."</p> }.into_any(),
                }}
            </details>
        </div>
    }
}

/// One message of the chat, with its role.
fn chat_message(role: &'static str, label: &'static str, content: impl IntoView + 'static) -> AnyView {
    view! {
        <li class=format!("chat-message chat-{role}") data-role=role>
            <div class="chat-role">{label}</div>
            {content}
        </li>
    }
    .into_any()
}

fn message_view(body: &MessageBody) -> AnyView {
    match body {
        MessageBody::Human { message } => {
            chat_message("user", "User", view! { <pre class="text">{message.clone()}</pre> })
        }
        MessageBody::Agent { message, result, invocations } => {
            let text = message.clone().filter(|t| !t.is_empty());
            let result = result.clone().filter(|r| !r.is_null());
            let calls = invocations
                .iter()
                .map(|inv| {
                    view! {
                        <li class="chat-call">
                            <span class="mono tool-name">{inv.tool_name.clone()}</span>
                            " "
                            <span class="mono sub">{inv.id.clone()}</span>
                            <JsonBlock value=inv.input.clone()/>
                        </li>
                    }
                })
                .collect_view();
            chat_message(
                "assistant",
                "Assistant",
                view! {
                    {text.map(|t| view! { <pre class="text">{t}</pre> })}
                    {result.map(|r| view! { <JsonBlock value=r/> })}
                    {(!invocations.is_empty()).then(|| view! { <ul class="chat-calls">{calls}</ul> })}
                },
            )
        }
        MessageBody::InvocationResult { id, tool_name, result_type, result } => {
            let kind = match result_type {
                ResultType::Resolution => "result",
                ResultType::Rejection => "rejection",
            };
            chat_message(
                "tool",
                "Tool result",
                view! {
                    <p class="chat-call">
                        <span class="mono tool-name">{tool_name.clone()}</span>
                        " " <span class="mono sub">{id.clone()}</span>
                        " " <span class="muted">{kind}</span>
                    </p>
                    <JsonBlock value=result.clone()/>
                },
            )
        }
    }
}
