//! The agent form: creates an agent, or saves the next version of one.
//!
//! An `ActionForm` on [`SaveAgent`], so it also works as a plain form post
//! without JavaScript (the server redirects to the agent's page, or back
//! here with the error). List fields are named `tools[]`, `agents[]`…, the
//! notation the server-function decoder reads as lists. The JSON fields
//! say at once, while typing, when their text is not JSON; the server
//! checks again and the engine checks the rest (that a schema is a schema,
//! that the name is free), and its message shows above the form.

use leptos::prelude::*;
use runlens_engine::model::{Agent, AgentSpec, ApprovalRequest, ToolInfo};
use serde_json::Value;

use crate::api::{approval_parts, json_field, AgentChoice, AgentFormOptions, SaveAgent};
use crate::components::tool_sources::SourceBoxes;
use crate::components::{server_error_message, ErrorBox};
use crate::format;

#[component]
pub fn AgentForm(
    options: AgentFormOptions,
    /// The agent whose next version this saves; `None` creates one.
    current: Option<Agent>,
    save: ServerAction<SaveAgent>,
) -> impl IntoView {
    let editing = current.is_some();
    let (id, version, spec) = match current {
        Some(a) => (Some(a.id), a.version, a.spec),
        None => (None, 0, Default::default()),
    };
    let others: Vec<_> = options.agents.iter().filter(|a| Some(&a.id) != id.as_ref()).cloned().collect();
    let pending = save.pending();
    let error = move || {
        save.value().get().and_then(|r| r.err()).map(|e| {
            view! { <ErrorBox message=server_error_message(&e) testid="agent-form-error"/> }
        })
    };
    let submit = if editing { format!("Save as version {}", version + 1) } else { "Create agent".to_string() };

    view! {
        <ActionForm action=save attr:class="agent-form" attr:data-testid="agent-form">
            {id.map(|id| view! {
                <input type="hidden" name="id" value=id/>
                <input type="hidden" name="base_version" value=version.to_string()/>
            })}
            {error}
            <div class="playground-grid">
                <AgentBasics spec=spec.clone() models=options.models.clone()/>
                <div class="stack">
                    <fieldset class="card">
                        <legend>"Tools"</legend>
                        <SourceBoxes field="tools[]" tools=options.tools.clone() chosen=spec.tools.clone()/>
                        {tool_boxes(&options.tools, &spec.tools)}
                    </fieldset>
                    <ApprovalFieldset tools=options.tools.clone() approval=spec.approval.clone()/>
                    <fieldset class="card">
                        <legend>"Agents it may call " <em>"(each call starts a child run)"</em></legend>
                        {link_boxes(&others, "agents[]", &spec.agents, "agent-calls")}
                    </fieldset>
                    <fieldset class="card">
                        <legend>"Handoffs " <em>"(agents it may hand the run over to)"</em></legend>
                        {link_boxes(&others, "handoffs[]", &spec.handoffs, "agent-handoff")}
                    </fieldset>
                </div>
            </div>
            <div>
                <button type="submit" class="button primary" data-testid="agent-save"
                    disabled=move || pending.get()>
                    {move || if pending.get() { "Saving…".to_string() } else { submit.clone() }}
                </button>
            </div>
        </ActionForm>
    }
}

/// The form's left column: name, model, turns, texts and schemas.
#[component]
fn AgentBasics(spec: AgentSpec, models: Vec<String>) -> impl IntoView {
    let json = |v: &Option<Value>| v.as_ref().map(format::pretty_json).unwrap_or_default();
    let max_turns = spec.max_turns.map(|n| n.to_string()).unwrap_or_default();
    view! {
        <div class="stack">
            <div class="field-row">
                <label class="field grow">
                    <span>"Name " <em>"(a-z, 0-9 and _; the tool name other agents call it by)"</em></span>
                    <input type="text" name="name" value=spec.name.clone() required
                        autocomplete="off" placeholder="math_helper" data-testid="agent-name"/>
                </label>
                <label class="field">
                    <span>"Model"</span>
                    <select name="model" data-testid="agent-model">{model_options(models, spec.model.clone())}</select>
                </label>
                <label class="field">
                    <span>"Max turns"</span>
                    <input type="number" name="max_turns" min="1" max="100" value=max_turns
                        placeholder="default" data-testid="agent-max-turns"/>
                </label>
            </div>
            <label class="field">
                <span>"Description " <em>"(what it does: shown to people, and to models calling it)"</em></span>
                {text_area("description", spec.description.clone(), 2, "Evaluates arithmetic with the calculator.", "agent-description")}
            </label>
            <label class="field">
                <span>"System prompt " <em>"(its instructions)"</em></span>
                {text_area("system_prompt", spec.system_prompt.clone().unwrap_or_default(), 4, "You are a careful assistant.", "agent-system-prompt")}
            </label>
            <JsonArea name="result_schema" label="Result schema" hint="(JSON Schema, optional: the final answer must match it)"
                value=json(&spec.result_schema) testid="agent-result-schema"/>
            <JsonArea name="input_schema" label="Input schema" hint="(JSON Schema, optional: a run's input, and the arguments of its tool, must match it)"
                value=json(&spec.input_schema) testid="agent-input-schema"/>
            <JsonArea name="model_settings" label="Model settings" hint="(JSON object, optional)"
                value=json(&spec.model_settings) testid="agent-model-settings"/>
            <JsonArea name="tree_budget" label="Tree budget"
                hint="(JSON, optional: {\"runs\": N, \"depth\": N, \"turns\": N, \"tokens\": N} bound the runs this agent's runs start; needed when it can call itself)"
                value=json(&spec.tree_budget.as_ref().and_then(|b| serde_json::to_value(b).ok())) testid="agent-tree-budget"/>
            <label class="check">
                <input type="checkbox" name="reasoning_traces" value="true" checked=spec.reasoning_traces
                    data-testid="agent-reasoning-traces"/>
                "Reasoning traces: ask the model for a short reason with each tool call"
            </label>
        </div>
    }
}

/// The model choices, the agent's own selected (and added when the server
/// no longer offers it); `builtin` when it names none.
fn model_options(mut models: Vec<String>, model: Option<String>) -> Vec<impl IntoView> {
    let selected_model = model.filter(|m| !m.is_empty()).unwrap_or_else(|| "builtin".into());
    if !models.contains(&selected_model) {
        models.push(selected_model.clone());
    }
    models
        .into_iter()
        .map(|m| {
            let selected = m == selected_model;
            view! { <option value=m.clone() selected=selected>{m.clone()}</option> }
        })
        .collect()
}

/// One checkbox per registered tool, ticked for the agent's own.
fn tool_boxes(tools: &[ToolInfo], chosen: &[String]) -> Vec<impl IntoView> {
    tools
        .iter()
        .map(|t| {
            let checked = chosen.contains(&t.name);
            view! {
                <label class="check-option">
                    <input type="checkbox" name="tools[]" value=t.name.clone() checked=checked
                        data-testid="agent-tool"/>
                    <span class="mono tool-name">{t.name.clone()}</span>
                    <span class="desc">{t.description.clone()}</span>
                </label>
            }
        })
        .collect()
}

/// Which calls need a person's approval: none, all, or those of listed
/// tools (a tool whose definition requires it is always ticked), and the
/// timeout after which undecided calls are rejected.
#[component]
fn ApprovalFieldset(tools: Vec<ToolInfo>, approval: Option<ApprovalRequest>) -> impl IntoView {
    let (approval_mode, approval_listed, approval_timeout) = approval_parts(approval.as_ref());
    let approval_boxes = tools
        .iter()
        .map(|t| {
            let always = t.requires_approval;
            let checked = always || approval_listed.contains(&t.name);
            let title = if always { "This tool's definition requires approval of every call." } else { "" };
            view! {
                <label class="check-option" title=title>
                    <input type="checkbox" name="approval_tools[]" value=t.name.clone() checked=checked
                        disabled=always data-testid="agent-approval-tool"/>
                    <span class="mono">{t.name.clone()}</span>
                </label>
            }
        })
        .collect::<Vec<_>>();
    let radio = move |value: &'static str, label: &'static str| {
        view! {
            <label class="check">
                <input type="radio" name="approval" value=value checked=approval_mode == value
                    data-testid=format!("agent-approval-{value}")/>
                {label}
            </label>
        }
    };
    let timeout = approval_timeout.map(|n| n.to_string()).unwrap_or_default();
    view! {
        <fieldset class="card" data-testid="agent-approval">
            <legend>"Approval"</legend>
            <div class="field-row">
                {radio("none", "None")}
                {radio("all", "Every call")}
                {radio("tools", "Calls of these tools:")}
            </div>
            {approval_boxes}
            <label class="field">
                <span>"Timeout " <em>"(seconds, optional: undecided calls are then rejected)"</em></span>
                <input type="number" name="approval_timeout_s" min="1" value=timeout placeholder="none"
                    data-testid="agent-approval-timeout"/>
            </label>
        </fieldset>
    }
}

/// One checkbox per other agent of the project (for calls or handoffs).
fn link_boxes(others: &[AgentChoice], field: &'static str, chosen: &[String], testid: &'static str) -> AnyView {
    if others.is_empty() {
        return view! { <p class="muted">"No other agent in this project yet."</p> }.into_any();
    }
    others
        .iter()
        .map(|a| {
            let checked = chosen.contains(&a.id);
            view! {
                <label class="check-option" title=a.description.clone()>
                    <input type="checkbox" name=field value=a.id.clone() checked=checked
                        data-testid=testid data-agent-name=a.name.clone()/>
                    <span class="mono">{a.name.clone()}</span>
                    <span class="desc">{a.description.clone()}</span>
                </label>
            }
        })
        .collect::<Vec<_>>()
        .into_any()
}

/// A `<textarea>` pre-filled with `value` (the playground's and the agent form's).
///
/// An empty value must render no child at all: the renderer writes a space
/// for an empty text node, which inside a textarea would become its content.
/// The value may come from the query string, so it goes through
/// [`format::rcdata_text`] (the renderer does not escape textarea content).
pub fn text_area(
    name: &'static str,
    value: String,
    rows: u32,
    placeholder: &'static str,
    testid: &'static str,
) -> AnyView {
    let rows = rows.to_string();
    if value.is_empty() {
        view! { <textarea name=name rows=rows placeholder=placeholder data-testid=testid></textarea> }.into_any()
    } else {
        view! {
            <textarea name=name rows=rows placeholder=placeholder data-testid=testid>{format::rcdata_text(&value)}</textarea>
        }
        .into_any()
    }
}

/// A JSON text area that says at once, below it, when its text is not JSON.
#[component]
pub fn JsonArea(
    name: &'static str,
    label: &'static str,
    hint: &'static str,
    value: String,
    testid: &'static str,
) -> impl IntoView {
    let problem = move |text: &str| json_field(label, text).err();
    let error = RwSignal::new(problem(&value));
    let on_input = move |ev: leptos::ev::Event| error.set(problem(&event_target_value(&ev)));
    let rows = (value.lines().count() + 1).clamp(3, 14).to_string();
    let area = if value.is_empty() {
        view! {
            <textarea name=name rows=rows spellcheck="false" data-testid=testid on:input=on_input
                aria-invalid=move || error.read().is_some().to_string()></textarea>
        }
        .into_any()
    } else {
        view! {
            <textarea name=name rows=rows spellcheck="false" data-testid=testid on:input=on_input
                aria-invalid=move || error.read().is_some().to_string()>{format::rcdata_text(&value)}</textarea>
        }
        .into_any()
    };
    view! {
        <label class="field">
            <span>{label} " " <em>{hint}</em></span>
            {area}
        </label>
        {move || error.get().map(|e| view! {
            <p class="field-error" role="alert" data-testid=format!("{testid}-error")>{e}</p>
        })}
    }
}
