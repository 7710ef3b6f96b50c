//! `/tools/http`: the current project's HTTP tools — its own functions,
//! which runs call with a signed `POST`.
//!
//! Everyone with a role reads the list (header names only: their values
//! and the signing secret are never shown). Admins register tools — the
//! signing secret is shown once, right after, in a field to copy, with a
//! warning — edit them (the headers are kept unless replaced), rotate their
//! secret and delete them. Every form is an `ActionForm` (it also posts
//! without JavaScript); the engine's message for bad input shows above
//! the form that sent it.

use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::model::limits::{DEFAULT_HTTP_TOOL_TIMEOUT_MS, MAX_HTTP_TOOL_TIMEOUT_MS, MIN_HTTP_TOOL_TIMEOUT_MS};
use runlens_engine::model::HttpTool;

use crate::api::{
    list_http_tools, DeleteHttpTool, HttpToolsView, RotateHttpToolSecret, SaveHttpTool, HTTP_TOOLS_SHOWN,
};
use crate::components::copy_secret::CopySecret;
use crate::components::{server_error_message, ErrorBox, JsonBlock, Loaded};
use crate::format;
use crate::pages::agents::form::{text_area, JsonArea};

#[component]
pub fn HttpToolsPage() -> impl IntoView {
    let create = ServerAction::<SaveHttpTool>::new();
    let edit = ServerAction::<SaveHttpTool>::new();
    let rotate = ServerAction::<RotateHttpToolSecret>::new();
    let delete = ServerAction::<DeleteHttpTool>::new();
    let list = crate::resource::new(
        move || (create.version().get(), edit.version().get(), rotate.version().get(), delete.version().get()),
        |_| list_http_tools(),
    );
    // The secret of the last registration or rotation, shown once (until
    // the page is left: nothing stores it).
    let shown = RwSignal::new(None::<(String, String)>);
    Effect::new(move |_| {
        if let Some(Ok(saved)) = create.value().get() {
            if let Some(secret) = saved.secret {
                shown.set(Some((saved.tool.name, secret)));
            }
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(rotated)) = rotate.value().get() {
            shown.set(Some((rotated.tool.name, rotated.secret)));
        }
    });
    let secret = move || shown.get().map(|(name, secret)| view! { <NewSecret name secret/> });
    let notes = move || {
        let failed = [
            edit.value().get().and_then(|r| r.err()),
            rotate.value().get().and_then(|r| r.err()),
            delete.value().get().and_then(|r| r.err()),
        ];
        let error = failed.into_iter().flatten().next();
        let deleted = delete.value().get().and_then(|r| r.ok());
        let edited = edit.value().get().and_then(|r| r.ok()).map(|s| format!("Saved the HTTP tool {}.", s.tool.name));
        view! {
            {error.map(|e| view! { <ErrorBox message=server_error_message(&e) testid="http-tool-error"/> })}
            {deleted.or(edited).map(|note| view! { <p class="notice" data-testid="http-tool-note">{note}</p> })}
        }
    };
    view! {
        <Title text="HTTP tools · runlens"/>
        <div class="page-head">
            <div>
                <h1>"HTTP tools"</h1>
                <span class="muted">
                    "The project's own functions: a call is a signed POST of "
                    <code>"{\"run_id\", \"call_id\", \"tool\", \"arguments\", \"context\"}"</code>
                    " to the tool's URL, and its JSON answer is the result."
                </span>
            </div>
        </div>
        {secret}
        {notes}
        <Loaded load=move || async move { list.await } loading="Loading HTTP tools…" keep_previous=true let:view>
            <HttpTools view create edit rotate delete/>
        </Loaded>
    }
}

/// A secret just made, with the warning that it is shown once.
#[component]
fn NewSecret(name: String, secret: String) -> impl IntoView {
    view! {
        <div class="new-key" role="status" data-testid="http-tool-secret-box">
            <p>
                <strong>"Copy the signing secret now: it is not shown again."</strong>
                " The receiver of " <code>{name}</code> " checks each call's "
                <code>"runlens-signature"</code> " with it (see the README)."
            </p>
            <CopySecret secret label="Signing secret" testid="http-tool-secret"/>
        </div>
    }
}

#[component]
fn HttpTools(
    view: HttpToolsView,
    create: ServerAction<SaveHttpTool>,
    edit: ServerAction<SaveHttpTool>,
    rotate: ServerAction<RotateHttpToolSecret>,
    delete: ServerAction<DeleteHttpTool>,
) -> impl IntoView {
    let HttpToolsView { tools, more, may_edit, project } = view;
    let table = match tools.is_empty() {
        true => view! {
            <div class="empty" data-testid="http-tools-empty">
                <p>"No HTTP tools in " <code>{project.clone()}</code> " yet."</p>
            </div>
        }
        .into_any(),
        false => {
            let rows = tools.into_iter().map(|t| tool_row(t, may_edit, edit, rotate, delete)).collect::<Vec<_>>();
            view! {
                <div class="table-scroll">
                    <table class="table" data-testid="http-tools-table">
                        <thead>
                            <tr>
                                <th>"Name"</th><th>"URL"</th><th>"Headers"</th><th class="num">"Timeout"</th>
                                <th>"Idempotent"</th><th>"Approval"</th><th>"Updated (UTC)"</th>
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            }
            .into_any()
        }
    };
    let more = more.then(|| {
        view! {
            <p class="muted">"Only the first " {HTTP_TOOLS_SHOWN} " are listed; " <code>"GET /api/tools/http"</code> " pages through all."</p>
        }
    });
    let form = match may_edit {
        true => view! {
            <section class="section" id="new-http-tool" data-testid="new-http-tool">
                <h2>"Register an HTTP tool"</h2>
                <HttpToolForm action=create current=None/>
            </section>
        }
        .into_any(),
        false => view! {
            <p class="muted" data-testid="http-tools-read-only">"Admins of " <code>{project}</code> " register and edit HTTP tools."</p>
        }
        .into_any(),
    };
    view! { {table} {more} {form} }
}

fn tool_row(
    t: HttpTool,
    may_edit: bool,
    edit: ServerAction<SaveHttpTool>,
    rotate: ServerAction<RotateHttpToolSecret>,
    delete: ServerAction<DeleteHttpTool>,
) -> impl IntoView {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let headers = if t.header_names.is_empty() { format::NONE.to_string() } else { t.header_names.join(", ") };
    let controls = may_edit.then(|| {
        let (rotate_name, delete_name) = (t.name.clone(), t.name.clone());
        let current = t.clone();
        view! {
            <tr class="http-tool-controls">
                <td colspan="7">
                    <details data-testid="http-tool-edit">
                        <summary>"Edit, rotate the secret, delete"</summary>
                        <HttpToolForm action=edit current=Some(current)/>
                        <div class="field-row">
                            <ActionForm action=rotate attr:class="inline-form">
                                <input type="hidden" name="name" value=rotate_name/>
                                <button type="submit" class="button small" data-testid="http-tool-rotate">"Rotate the signing secret"</button>
                            </ActionForm>
                            <ActionForm action=delete attr:class="inline-form">
                                <input type="hidden" name="name" value=delete_name/>
                                <button type="submit" class="button small danger" data-testid="http-tool-delete">"Delete"</button>
                            </ActionForm>
                        </div>
                    </details>
                </td>
            </tr>
        }
    });
    view! {
        <tr data-testid="http-tool-row" data-tool=t.name.clone()>
            <td>
                <span class="mono">{t.name.clone()}</span>
                <div class="muted">{t.description.clone()}</div>
                <details>
                    <summary class="muted">"Arguments schema"</summary>
                    <JsonBlock value=t.schema.clone()/>
                </details>
            </td>
            <td class="mono" data-testid="http-tool-url">{t.url.clone()}</td>
            <td data-testid="http-tool-headers">{headers}</td>
            <td class="num">{format!("{} ms", t.timeout_ms)}</td>
            <td>{yes_no(t.idempotent)}</td>
            <td>{if t.requires_approval { "every call" } else { "none" }}</td>
            <td class="nowrap">{format::time(&t.updated_at)}</td>
        </tr>
        {controls}
    }
}

/// The registration form (`current` None) or the edit form of `current`.
#[component]
fn HttpToolForm(action: ServerAction<SaveHttpTool>, current: Option<HttpTool>) -> impl IntoView {
    let editing = current.as_ref().map(|t| t.name.clone());
    let edit_mode = editing.is_some();
    let testid = move |suffix: &str| format!("http-tool-{}{suffix}", if edit_mode { "edit-" } else { "" });
    let t = current.clone();
    let (description, schema, url) = match &t {
        Some(t) => (t.description.clone(), format::pretty_json(&t.schema), t.url.clone()),
        None => (String::new(), String::new(), String::new()),
    };
    let timeout = t.as_ref().map(|t| t.timeout_ms.to_string()).unwrap_or_default();
    let idempotent = t.as_ref().is_some_and(|t| t.idempotent);
    let approval = t.as_ref().is_none_or(|t| t.requires_approval);
    let pending = action.pending();
    // An edit's error shows at the top of the page (one action serves every row's form).
    let error = move || {
        action.value().get().and_then(|r| r.err()).filter(|_| !edit_mode).map(|e| {
            view! { <ErrorBox message=server_error_message(&e) testid="http-tool-form-error"/> }
        })
    };
    let headers_hint = headers_hint(t.as_ref());
    let name_field = name_field(editing);
    let submit = if edit_mode { "Save" } else { "Register" };
    view! {
        <ActionForm action=action attr:class="stack http-tool-form" attr:data-testid=testid("form")>
            {error}
            {name_field}
            <label class="field">
                <span>"Description " <em>"(what it does: the model reads it to decide when to call it)"</em></span>
                {text_area("description", description, 2, "Looks an order up by its id.", if edit_mode { "http-tool-edit-description" } else { "http-tool-description" })}
            </label>
            <label class="field">
                <span>"URL " <em>"(calls are POSTed here; redirects are not followed)"</em></span>
                <input type="url" name="url" required maxlength="2048" value=url placeholder="https://tools.example.com/lookup-order"
                    data-testid=testid("url")/>
            </label>
            <JsonArea name="schema" label="Arguments schema" hint="(JSON Schema of an object; empty: no arguments)"
                value=schema testid=if edit_mode { "http-tool-edit-schema" } else { "http-tool-schema" }/>
            <label class="field">
                <span>"Headers " <em>{headers_hint}</em></span>
                {text_area("headers", String::new(), 2, "Authorization: Bearer …", if edit_mode { "http-tool-edit-headers" } else { "http-tool-headers" })}
            </label>
            {edit_mode.then(|| view! {
                <label class="check">
                    <input type="checkbox" name="replace_headers" value="true" data-testid="http-tool-replace-headers"/>
                    "Replace the headers with these (empty: remove them all)"
                </label>
            })}
            {call_settings(timeout, idempotent, approval, testid)}
            <div>
                <button type="submit" class="button primary" data-testid=testid("submit") disabled=move || pending.get()>
                    {move || if pending.get() { "Saving…" } else { submit }}
                </button>
            </div>
        </ActionForm>
    }
}

/// What the headers field says: kept unless replaced (and which are sent
/// now) when editing, what to put there when registering.
fn headers_hint(current: Option<&HttpTool>) -> String {
    match current {
        Some(t) if !t.header_names.is_empty() => {
            format!("(kept unless replaced below; sent now: {}; values are never shown)", t.header_names.join(", "))
        }
        Some(_) => "(none now; tick \"replace\" below to set some)".to_string(),
        None => "(optional: one `Name: value` per line, an Authorization say; the values are secrets)".to_string(),
    }
}

/// The name: typed when registering, fixed (hidden) when editing `editing`.
fn name_field(editing: Option<String>) -> AnyView {
    match editing {
        Some(name) => view! { <input type="hidden" name="editing" value=name/> }.into_any(),
        None => view! {
            <label class="field">
                <span>"Name " <em>"(A-Z, a-z, 0-9, _ and -; the tool name the model calls)"</em></span>
                <input type="text" name="name" required maxlength="64" autocomplete="off" placeholder="lookup_order"
                    data-testid="http-tool-name"/>
            </label>
        }
        .into_any(),
    }
}

/// How calls are made: the timeout, whether a call may be retried, and
/// whether each needs approval (`testid` names the fields for the form).
fn call_settings(timeout: String, idempotent: bool, approval: bool, testid: impl Fn(&str) -> String) -> impl IntoView {
    view! {
        <div class="field-row">
            <label class="field">
                <span>"Timeout " <em>{format!("(ms, {MIN_HTTP_TOOL_TIMEOUT_MS}-{MAX_HTTP_TOOL_TIMEOUT_MS})")}</em></span>
                <input type="number" name="timeout_ms" min=MIN_HTTP_TOOL_TIMEOUT_MS.to_string() max=MAX_HTTP_TOOL_TIMEOUT_MS.to_string() value=timeout
                    placeholder=DEFAULT_HTTP_TOOL_TIMEOUT_MS.to_string() data-testid=testid("timeout")/>
            </label>
            <label class="check">
                <input type="checkbox" name="idempotent" value="true" checked=idempotent data-testid=testid("idempotent")/>
                "Idempotent: safe to call again (retried on 5xx and connection errors, and after a crash)"
            </label>
            <label class="check">
                <input type="checkbox" name="requires_approval" value="true" checked=approval
                    data-testid=testid("requires-approval")/>
                "Every call needs a person's approval"
            </label>
        </div>
    }
}
