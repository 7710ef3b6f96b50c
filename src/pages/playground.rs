//! `/playground`: a form that starts a run.
//!
//! The form is a plain `POST /playground` handled by
//! [`crate::server::forms::playground_submit`], so it works without JS. On
//! error the handler redirects back here with every field echoed in the query
//! string plus `error`; this page pre-fills the form from it and shows the error.
//!
//! A saved agent can be picked (`agent_id`, and optionally `agent_version`):
//! its settings pre-fill the form (the "Load" button, a GET submit of the
//! same form, keeps what was typed in the other fields; picking an agent
//! with JavaScript presses it). What is submitted unchanged is taken from
//! the agent; what was changed overrides it (see `crate::api::run_form`).
//!
//! "Compare models" starts the same run on several models at once: with its
//! box (`compare`) checked and two to eight models ticked
//! (`compare_models`), Start creates one run per model as a comparison
//! group and lands on `/compare?group=…`; with one model ticked it is an
//! ordinary run on that model. Ticking a model checks the box when
//! JavaScript runs; without it, the person checks it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::{AgentVersion, ToolInfo, MAX_BATCH_MODELS};

use crate::api::{approval_parts, get_playground_options, PlaygroundOptions};
use crate::components::tool_sources::SourceBoxes;
use crate::components::{ErrorBox, Loaded};
use crate::format;
use crate::pages::agents::form::text_area;

/// The model selected when the query does not name one.
const DEFAULT_MODEL: &str = "builtin";
const DEFAULT_MAX_TURNS: &str = "10";

/// Field values echoed back through the query string.
#[derive(Clone, Debug, Default, PartialEq)]
struct Prefill {
    error: Option<String>,
    prompt: String,
    system_prompt: String,
    model: String,
    /// `None` when the query says nothing about tools: `all` is checked.
    tools: Option<Vec<String>>,
    tags: String,
    context: String,
    max_turns: String,
    /// Tools the run asks approval for (beyond those that always need it).
    approval_tools: Vec<String>,
    approval_timeout_s: String,
    result_schema: String,
    /// Accept follow-ups once done (checked unless the echo says otherwise).
    interactive: bool,
    call_summarization: bool,
    reasoning_traces: bool,
    agent_id: String,
    agent_version: String,
    /// The agent's settings replace the echoed ones ("Load", or a fresh form).
    load_agent: bool,
    input: String,
    metadata: String,
    /// "Compare models" is checked.
    compare: bool,
    /// The models ticked to compare.
    compare_models: Vec<String>,
}

impl Prefill {
    /// The settings of `agent` in place of the echoed ones.
    fn take_agent(&mut self, agent: &AgentVersion, tools: &[ToolInfo]) {
        let spec = &agent.spec;
        self.system_prompt = spec.system_prompt.clone().unwrap_or_default();
        self.model = spec.model.clone().unwrap_or_default();
        self.tools = Some(spec.tools.clone());
        let (mode, listed, timeout) = approval_parts(spec.approval.as_ref());
        self.approval_tools = match mode {
            "all" => tools.iter().map(|t| t.name.clone()).collect(),
            _ => listed,
        };
        self.approval_timeout_s = timeout.map(|t| t.to_string()).unwrap_or_default();
        self.result_schema = spec.result_schema.as_ref().map(format::pretty_json).unwrap_or_default();
        self.max_turns = spec.max_turns.map(|n| n.to_string()).unwrap_or_default();
        self.reasoning_traces = spec.reasoning_traces;
    }
}

#[component]
pub fn PlaygroundPage() -> impl IntoView {
    let query = use_query_map();
    let prefill = Memo::new(move |_| {
        let q = query.read();
        let field = |k: &str| q.get(k).unwrap_or_default();
        Prefill {
            error: q.get("error").filter(|e| !e.is_empty()),
            prompt: field("prompt"),
            system_prompt: field("system_prompt"),
            model: field("model"),
            tools: q.get("tools_present").map(|_| q.get_all("tools").unwrap_or_default()),
            tags: field("tags"),
            context: field("context"),
            max_turns: q.get("max_turns").filter(|m| !m.is_empty()).unwrap_or_else(|| DEFAULT_MAX_TURNS.into()),
            approval_tools: q.get_all("approval_tools").unwrap_or_default(),
            approval_timeout_s: field("approval_timeout_s"),
            result_schema: field("result_schema"),
            // Unchecked boxes are not echoed; `flags_present` says the form was.
            interactive: q.get("flags_present").is_none() || q.get("interactive").is_some(),
            call_summarization: q.get("call_summarization").is_some(),
            reasoning_traces: q.get("reasoning_traces").is_some(),
            agent_id: field("agent_id"),
            agent_version: field("agent_version"),
            load_agent: q.get("load_agent").is_some() || q.get("tools_present").is_none(),
            input: field("input"),
            metadata: field("metadata"),
            compare: q.get("compare").is_some(),
            compare_models: q.get_all("compare_models").unwrap_or_default(),
        }
    });
    let agent_key = Memo::new(move |_| {
        let p = prefill.read();
        (p.agent_id.clone(), p.agent_version.trim().parse::<u32>().ok())
    });
    let options = crate::resource::new(move || agent_key.get(), |(id, v)| get_playground_options(Some(id), v));

    view! {
        <Title text="Playground · runlens"/>
        <div class="page-head">
            <h1>"Playground"</h1>
        </div>
        <Loaded load=move || async move { options.await } loading="Loading…" let:options>
            {
                let mut prefill = prefill.get();
                if let Some(agent) = options.agent.as_ref().filter(|_| prefill.load_agent) {
                    prefill.take_agent(agent, &options.tools);
                }
                view! { <PlaygroundForm options prefill/> }
            }
        </Loaded>
    }
}

#[component]
fn PlaygroundForm(options: PlaygroundOptions, prefill: Prefill) -> impl IntoView {
    let can_start = options.role.is_some_and(|r| r >= runlens_engine::model::Role::Operator);
    let error = prefill.error.clone();
    let (agent_id, agent_version) = (prefill.agent_id.clone(), prefill.agent_version.clone());
    let (compare, compare_models) = (prefill.compare, prefill.compare_models.clone());
    // Without a tools list (a fresh form) the run attaches `all`.
    let chosen = prefill.tools.clone().unwrap_or_else(|| vec!["all".to_string()]);
    let (approval_tools, approval_timeout_s) = (prefill.approval_tools.clone(), prefill.approval_timeout_s.clone());

    view! {
        <form method="post" action="/playground" class="playground" data-testid="playground-form">
            {error.map(|e| view! { <ErrorBox message=e testid="form-error"/> })}
            <div class="playground-grid">
                <RunSettings prefill models=options.models.clone() can_start/>
                <div class="stack">
                    // After "Start run" in tree order, so Enter in a field starts the run.
                    <AgentPicker agents=options.agents.clone() agent=options.agent.clone() error=options.agent_error.clone()
                        agent_id agent_version/>
                    <CompareModels models=options.models.clone() on=compare chosen=compare_models/>
                    <ToolsFieldset tools=options.tools chosen approval_tools approval_timeout_s/>
                    <BuiltinHelp/>
                </div>
            </div>
        </form>
    }
}

/// The form's left column: the run's texts, model, limits and flags, and
/// the Start button (or why the caller may not start runs).
#[component]
fn RunSettings(prefill: Prefill, models: Vec<String>, can_start: bool) -> impl IntoView {
    let Prefill { prompt, system_prompt, model, tags, context, max_turns, result_schema, input, metadata, .. } =
        prefill.clone();
    view! {
        <div class="stack">
            <label class="field">
                <span>"Prompt"</span>
                {text_area("prompt", prompt, 6, "What is 17 * 23? Then email the answer to ada@example.com", "prompt")}
            </label>
            <label class="field">
                <span>"System prompt " <em>"(optional)"</em></span>
                {text_area("system_prompt", system_prompt, 3, "You are a careful assistant.", "system-prompt")}
            </label>
            <div class="field-row">
                <label class="field">
                    <span>"Model"</span>
                    <select name="model" data-testid="model">{model_options(models, model)}</select>
                </label>
                <label class="field">
                    <span>"Max turns"</span>
                    <input type="number" name="max_turns" min="1" max="100"
                        value=max_turns data-testid="max-turns"/>
                </label>
                <label class="field grow">
                    <span>"Tags " <em>"key=value, key2=value2"</em></span>
                    <input type="text" name="tags" value=tags placeholder="env=dev, team=search"
                        data-testid="tags"/>
                </label>
            </div>
            <label class="field">
                <span>"Context " <em>"(JSON object, given to tools, never to the model)"</em></span>
                {text_area("context", context, 3, r#"{"timezone": "Europe/Paris"}"#, "context")}
            </label>
            <label class="field">
                <span>"Result schema " <em>"(JSON Schema, optional: the final answer must match it)"</em></span>
                {text_area("result_schema", result_schema, 3, r#"{"type": "object", "properties": {"answer": {"type": "number"}}}"#, "result-schema")}
            </label>
            <label class="field">
                <span>"Input " <em>"(JSON, optional: structured input, checked against an agent's input schema)"</em></span>
                {text_area("input", input, 2, r#"{"city": "Paris"}"#, "run-input")}
            </label>
            <label class="field">
                <span>"Metadata " <em>"(JSON object, optional: shown and searchable in the runs list)"</em></span>
                {text_area("metadata", metadata, 2, r#"{"customer": "acme", "ticket": 42}"#, "metadata")}
            </label>
            <RunFlags prefill/>
            <div>
                {match can_start {
                    true => view! {
                        <button type="submit" class="button primary" data-testid="start-run">"Start run"</button>
                    }.into_any(),
                    false => view! {
                        <p class="muted" data-testid="start-run-forbidden">
                            "Starting runs needs the operator role in this project."
                        </p>
                    }.into_any(),
                }}
            </div>
        </div>
    }
}

/// The model choices, `model` (or the default) selected.
fn model_options(models: Vec<String>, model: String) -> Vec<impl IntoView> {
    let selected_model = if model.is_empty() { DEFAULT_MODEL.to_string() } else { model };
    models
        .into_iter()
        .map(|m| {
            let selected = m == selected_model;
            let value = m.clone();
            view! { <option value=value selected=selected>{m}</option> }
        })
        .collect()
}

/// The run's on/off settings; `flags_present` tells the server (and the
/// echo) that unchecked boxes mean off.
#[component]
fn RunFlags(prefill: Prefill) -> impl IntoView {
    let Prefill { interactive, call_summarization, reasoning_traces, .. } = prefill;
    view! {
        <div class="field-row checks">
            <input type="hidden" name="flags_present" value="1"/>
            <label class="check">
                <input type="checkbox" name="interactive" value="true" checked=interactive
                    data-testid="interactive"/>
                "Interactive: accept follow-up messages once done"
            </label>
            <label class="check">
                <input type="checkbox" name="call_summarization" value="true"
                    checked=call_summarization data-testid="call-summarization"/>
                "Summarize tool results over 10,000 characters"
            </label>
            <label class="check">
                <input type="checkbox" name="reasoning_traces" value="true"
                    checked=reasoning_traces data-testid="reasoning-traces"/>
                "Reasoning traces: a short reason with each tool call"
            </label>
        </div>
    }
}

/// The tools to attach (by source, then one by one) and which need approval.
#[component]
fn ToolsFieldset(
    tools: Vec<ToolInfo>,
    chosen: Vec<String>,
    approval_tools: Vec<String>,
    approval_timeout_s: String,
) -> impl IntoView {
    let sources = view! { <SourceBoxes field="tools" tools=tools.clone() chosen=chosen.clone()/> };
    view! {
        <fieldset class="card tools">
            <legend>"Tools"</legend>
            <input type="hidden" name="tools_present" value="1"/>
            {sources}
            {tool_groups(tools, &chosen, &approval_tools)}
            <label class="field approval-timeout">
                <span>"Approval timeout " <em>"(seconds, optional: undecided calls are then rejected)"</em></span>
                <input type="number" name="approval_timeout_s" min="1" value=approval_timeout_s
                    placeholder="none" data-testid="approval-timeout"/>
            </label>
        </fieldset>
    }
}

/// The saved agent to run: a select (picking one with JavaScript loads its
/// settings into the form), a version, and the "Load" button, a GET submit
/// of the whole form back to this page (it works without JavaScript).
#[component]
fn AgentPicker(
    agents: Vec<crate::api::AgentChoice>,
    agent: Option<AgentVersion>,
    error: Option<String>,
    agent_id: String,
    agent_version: String,
) -> impl IntoView {
    let load = NodeRef::<leptos::html::Button>::new();
    let on_change = move |_| {
        if let Some(button) = load.get_untracked() {
            button.click();
        }
    };
    let choices = agents
        .into_iter()
        .map(|a| {
            let selected = a.id == agent_id;
            let label = format!("{} (v{})", a.name, a.version);
            view! { <option value=a.id selected=selected>{label}</option> }
        })
        .collect::<Vec<_>>();
    let note = agent.map(|a| {
        let href = format!("/agents/{}", format::url_encode(&a.agent_id));
        view! {
            <p class="muted agent-note" data-testid="agent-loaded">
                "Running " <a href=href>{a.spec.name.clone()}</a> " version " {a.version}
                ": its settings fill the fields below; what you change overrides it for this run."
            </p>
        }
    });
    view! {
        <fieldset class="card agent-picker" data-testid="agent-picker">
            <legend>"Saved agent"</legend>
            <div class="field-row">
                <label class="field grow">
                    <span>"Agent"</span>
                    <select name="agent_id" data-testid="agent-select" on:change=on_change>
                        <option value="" selected=agent_id.is_empty()>"None: configure the run below"</option>
                        {choices}
                    </select>
                </label>
                <label class="field">
                    <span>"Version " <em>"(optional)"</em></span>
                    <input type="number" name="agent_version" min="1" value=agent_version placeholder="current"
                        data-testid="agent-version"/>
                </label>
                <button type="submit" class="button subtle" formmethod="get" formaction="/playground"
                    formnovalidate name="load_agent" value="1" node_ref=load data-testid="load-agent">
                    "Load its settings"
                </button>
            </div>
            {error.map(|e| view! { <ErrorBox message=e testid="agent-error"/> })}
            {note}
        </fieldset>
    }
}

/// "Compare models" (see the module docs): its box, and one box per model
/// the playground offers, ticked when `chosen` names it.
#[component]
fn CompareModels(models: Vec<String>, on: bool, chosen: Vec<String>) -> impl IntoView {
    let toggle = NodeRef::<leptos::html::Input>::new();
    // Ticking a model means comparing: check the box too.
    let on_pick = move |ev: leptos::ev::Event| {
        if event_target_checked(&ev) {
            if let Some(toggle) = toggle.get_untracked() {
                toggle.set_checked(true);
            }
        }
    };
    let boxes = models
        .into_iter()
        .map(|model| {
            let checked = chosen.contains(&model);
            view! {
                <label class="check">
                    <input type="checkbox" name="compare_models" value=model.clone() checked=checked
                        data-testid="compare-model" data-model=model.clone() on:change=on_pick/>
                    <span class="mono">{model}</span>
                </label>
            }
        })
        .collect::<Vec<_>>();
    let help = format!(
        "Tick 2 to {MAX_BATCH_MODELS} models: Start creates the same run on each and opens them side by side. \
         With one model ticked, the run starts on that model alone."
    );
    view! {
        <fieldset class="card compare-models" data-testid="compare-models">
            <legend>"Compare models"</legend>
            <label class="check">
                <input type="checkbox" name="compare" value="1" checked=on node_ref=toggle
                    data-testid="compare-toggle"/>
                "Start this run on several models at once"
            </label>
            <div class="field-row checks" role="group" aria-label="Models to compare"
                data-testid="compare-model-list">
                {boxes}
            </div>
            <p class="muted">{help}</p>
        </fieldset>
    }
}

/// Groups of a source's tools with more than this start folded.
const OPEN_GROUP_UP_TO: usize = 20;

/// The tools, one group per source: each tool checked when `chosen` names
/// it, its approval box when `approval_tools` does.
fn tool_groups(tools: Vec<ToolInfo>, chosen: &[String], approval_tools: &[String]) -> impl IntoView {
    let mut groups: std::collections::BTreeMap<String, Vec<ToolInfo>> = Default::default();
    for tool in tools {
        groups.entry(tool.source.clone()).or_default().push(tool);
    }
    groups
        .into_iter()
        .map(|(source, tools)| {
            let open = tools.len() <= OPEN_GROUP_UP_TO;
            let summary = format!("{source}: {} tools", tools.len());
            let options = tools
                .into_iter()
                .map(|tool| {
                    let checked = chosen.contains(&tool.name);
                    let approval = approval_tools.contains(&tool.name);
                    view! { <ToolOption tool checked approval/> }
                })
                .collect::<Vec<_>>();
            view! {
                <details class="tool-group" open=open data-testid="tool-group" data-source=source>
                    <summary>{summary}</summary>
                    {options}
                </details>
            }
        })
        .collect::<Vec<_>>()
}

/// One tool: "attach" checkbox with its description, and a second checkbox
/// for "needs approval". A tool whose definition requires approval shows that
/// one checked and disabled: the run cannot opt out of it.
#[component]
fn ToolOption(tool: ToolInfo, checked: bool, approval: bool) -> impl IntoView {
    let always = tool.requires_approval;
    let approval_label = if always { "always requires approval" } else { "requires approval" };
    let approval_title = if always {
        "This tool's definition requires a person to approve every call."
    } else {
        "Pause the run for a person to approve or reject each call of this tool."
    };
    view! {
        <div class="tool-option">
            <label class="tool-pick">
                <input type="checkbox" name="tools" value=tool.name.clone() checked=checked
                    data-testid="tool-checkbox"/>
                <span>
                    <span class="mono tool-name">{tool.name.clone()}</span>
                    <span class="desc">{tool.description}</span>
                </span>
            </label>
            <label class="approval-pick" title=approval_title>
                <input type="checkbox" name="approval_tools" value=tool.name checked=always || approval
                    disabled=always data-testid="approval-checkbox"/>
                <span>{approval_label}</span>
            </label>
        </div>
    }
}

/// What the deterministic built-in model does, so people can drive it on purpose.
#[component]
fn BuiltinHelp() -> impl IntoView {
    view! {
        <aside class="card help">
            <h2 class="h3">"The built-in model"</h2>
            <p>
                <code>"builtin"</code>
                " is a deterministic stand-in for an LLM, for trying runlens without an API key:"
            </p>
            <ul>
                <li>"An arithmetic expression in the prompt (" <code>"17 * 23"</code> ") makes it call "
                    <code>"calculator"</code> "."</li>
                <li>"Naming an attached tool (" <code>"current_time"</code> ", " <code>"wait"</code> ", "
                    <code>"send_email"</code> ") makes it call that tool, with arguments taken from a JSON
                    object in the prompt, e.g. " <code>r#"send_email {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}"#</code> "."</li>
                <li>"It then answers using the tool results."</li>
                <li>"A call of a tool that requires approval pauses the run until someone approves or
                    rejects it, on the run's trace or in " <a href="/approvals">"Approvals"</a> "."</li>
                <li><code>"model_settings.script"</code> " (via the API) plays scripted turns instead."</li>
            </ul>
        </aside>
    }
}
