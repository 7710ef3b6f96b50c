//! The pages' plain HTML form posts, outside the JSON API: they work without
//! JavaScript and answer with redirects (`303 See Other`).
//!
//! - `POST /playground`: the playground's form, turned into a run; on
//!   success the browser lands on the new run's trace. With "Compare
//!   models" checked and two or more models ticked, it is one run per model
//!   as a comparison group, and the browser lands on `/compare?group=…`
//!   (one model ticked: a run on that model). Any error sends it
//!   back to `/playground` with the message and every submitted field in the
//!   query string, so the page can re-fill the form.
//! - `POST /runs/import`: the runs list's Import control, a multipart upload
//!   whose `file` field holds a run state document (as `GET
//!   /api/runs/{id}/state` exports it). On success the browser is sent to the
//!   new run's trace; on any error — no file, not JSON, a document the engine
//!   refuses — back to `/runs?import_error=<message>`, which the runs page
//!   shows. Nothing is stored for a refused document.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use runlens_engine::model::{ApprovalPolicy, ApprovalRequest, ApprovalTools, BatchRuns, CreateRun};
use runlens_engine::{Engine, ImportOptions};
use serde::de::IgnoredAny;
use serde_json::Value;

use super::super::auth::Caller;
use super::super::error::ClientError;
use super::conversation::{import_permit, MAX_CONCURRENT_IMPORTS};
use crate::format::{query_string, url_encode};
use runlens_engine::model::Role;

/// Creates a run from the playground form and redirects to its trace, or back
/// to the form with `error=…` and the submitted fields.
pub async fn playground_submit(
    State(engine): State<Engine>,
    caller: Caller,
    Form(pairs): Form<Vec<(String, String)>>,
) -> Response {
    let project = match caller.require_current(Role::Operator) {
        Ok(p) => p.to_owned(),
        Err(e) => return back_to_form(&pairs, &e.status_and_message().1),
    };
    let mut req = match create_run_from_form(&pairs) {
        Ok(req) => req,
        Err(msg) => return back_to_form(&pairs, &msg),
    };
    // The models ticked under "Compare models", if it is checked.
    let compared = match crate::api::run_form::compare_choice(&pairs) {
        Ok(models) => models.unwrap_or_default(),
        Err(msg) => return back_to_form(&pairs, &msg),
    };
    if let [model] = compared.as_slice() {
        req.model = Some(model.clone());
    }
    // The saved agent, input, metadata and reasoning traces (see `crate::api::run_form`).
    if let Err(msg) = crate::api::run_form::apply(&engine, &project, &pairs, &mut req).await {
        return back_to_form(&pairs, &msg);
    }
    if compared.len() > 1 {
        // The batch gives each run its model.
        let batch = BatchRuns { run: CreateRun { model: None, ..req }, models: compared };
        return match engine.comparisons().create_batch(&project, batch, Some(&caller.actor)).await {
            Ok(created) => Redirect::to(&format!("/compare?group={}", url_encode(&created.group_id))).into_response(),
            Err(err) => back_to_form(
                &pairs,
                &ClientError::from_engine(err, "starting a comparison from the playground").message,
            ),
        };
    }
    match engine.runs().create_run_in(req, &project, Some(&caller.actor)).await {
        Ok((run, _created)) => Redirect::to(&format!("/runs/{}", url_encode(&run.id))).into_response(),
        Err(err) => back_to_form(&pairs, &ClientError::from_engine(err, "creating a run from the playground").message),
    }
}

/// `303` to `/playground?error=<msg>&<every submitted field>`.
fn back_to_form(pairs: &[(String, String)], msg: &str) -> Response {
    let echoed = pairs.iter().filter(|(k, _)| k != "error").map(|(k, v)| (k.as_str(), v.as_str()));
    let qs = query_string(std::iter::once(("error", msg)).chain(echoed));
    Redirect::to(&format!("/playground?{qs}")).into_response()
}

/// Builds the engine request from the form fields; `Err` is a message for the user.
fn create_run_from_form(pairs: &[(String, String)]) -> Result<CreateRun, String> {
    let field =
        |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let prompt = field("prompt").ok_or("The prompt is empty: tell the agent what to do.")?;
    let checked: Vec<String> = pairs.iter().filter(|(k, _)| k == "tools").map(|(_, v)| v.trim().to_string()).collect();
    // Unchecked checkboxes are not submitted at all, so `tools_present` tells
    // "no tool checked" (attach none) apart from "no tools field" (attach all).
    let tools = if field("tools_present").is_some() || !checked.is_empty() { Some(checked) } else { None };
    let max_turns = match field("max_turns") {
        Some(v) => Some(v.parse::<u32>().map_err(|_| format!("Max turns must be a whole number, not {v:?}."))?),
        None => None,
    };
    // Like `tools_present`: unchecked boxes are not submitted, so the marker
    // tells "unchecked" apart from "not on this form" (keep the defaults).
    let flags = field("flags_present").is_some();
    let checked_box = |name: &str| flags.then(|| field(name).is_some());
    Ok(CreateRun {
        name: field("name").map(str::to_string),
        initial_prompt: prompt.to_string(),
        system_prompt: field("system_prompt").map(str::to_string),
        model: field("model").map(str::to_string),
        tools,
        tags: parse_tags(field("tags").unwrap_or(""))?,
        context: field("context").map(parse_context).transpose()?,
        max_turns,
        approval: approval_from_form(pairs)?,
        result_schema: field("result_schema").map(parse_schema).transpose()?,
        interactive: checked_box("interactive"),
        call_summarization: checked_box("call_summarization"),
        ..Default::default()
    })
}

/// The run's approval policy from the `approval_tools` checkboxes and the
/// `approval_timeout_s` field: `{"tools": [...], "timeout_s": N}` without the
/// parts left empty, or `None` when both are. Tools whose definition requires
/// approval (their checkbox is disabled, so never submitted) need no entry.
fn approval_from_form(pairs: &[(String, String)]) -> Result<Option<ApprovalRequest>, String> {
    let mut tools: Vec<&str> = Vec::new();
    for (_, tool) in pairs.iter().filter(|(k, _)| k == "approval_tools") {
        let tool = tool.trim();
        if !tool.is_empty() && !tools.contains(&tool) {
            tools.push(tool);
        }
    }
    let timeout =
        pairs.iter().rev().find(|(k, _)| k == "approval_timeout_s").map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
    let timeout = match timeout {
        Some(v) => Some(v.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            format!("The approval timeout must be a whole number of seconds (1 or more), not {v:?}.")
        })?),
        None => None,
    };
    let tools = (!tools.is_empty()).then(|| ApprovalTools::List(tools.into_iter().map(str::to_owned).collect()));
    let policy = ApprovalPolicy { tools, timeout_s: timeout };
    Ok((policy != ApprovalPolicy::default()).then_some(ApprovalRequest::Policy(policy)))
}

/// `key=value, key2=value2` (commas or newlines between pairs; `key:value` is
/// accepted too, as the runs filter writes tags that way).
fn parse_tags(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for part in text.split([',', '\n']).map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .or_else(|| part.split_once(':'))
            .ok_or_else(|| format!("Tag {part:?} is not of the form key=value."))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("Tag {part:?} has an empty key."));
        }
        tags.insert(key.to_string(), value.trim().to_string());
    }
    Ok(tags)
}

/// The result schema must be JSON; whether it is a valid JSON Schema is
/// for the engine to say (its message comes back the same way).
fn parse_schema(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("Result schema is not valid JSON: {e}."))
}

/// The context must be a JSON object (tools read named keys from it).
fn parse_context(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("Context must be a JSON object, like {\"timezone\": \"Europe/Paris\"}.".to_string()),
        Err(e) => Err(format!("Context is not valid JSON: {e}.")),
    }
}

/// Imports the uploaded document and redirects (see the module docs). It
/// shares the REST import's places ([`MAX_CONCURRENT_IMPORTS`]); when all
/// are taken the upload is not read and the page says to try again.
pub async fn import_submit(
    State(engine): State<Engine>,
    caller: Caller,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let project = match caller.require_current(Role::Operator) {
        Ok(p) => p.to_owned(),
        Err(e) => return back_to_runs(&e.status_and_message().1),
    };
    let Some(_permit) = import_permit() else {
        return back_to_runs(&format!(
            "The server is importing {MAX_CONCURRENT_IMPORTS} runs already; try again in a moment."
        ));
    };
    let doc = match multipart {
        Ok(form) => read_document(form).await,
        Err(e) => Err(format!("The upload could not be read: {}.", e.body_text())),
    };
    let doc = match doc {
        Ok(doc) => doc,
        Err(msg) => return back_to_runs(&msg),
    };
    let opts = ImportOptions { project: Some(project.clone()), by: Some(caller.actor.clone()), ..Default::default() };
    match engine.snapshots().import_bytes(&doc, opts).await {
        Ok(run) => Redirect::to(&format!("/runs/{}", url_encode(&run.id))).into_response(),
        Err(err) => back_to_runs(&ClientError::from_engine(err, "importing a run from the runs page").message),
    }
}

/// The `file` field, checked to be JSON; `Err` is a message for the user.
async fn read_document(mut form: Multipart) -> Result<Bytes, String> {
    let mut file = None;
    loop {
        let field = form.next_field().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
        let Some(field) = field else { break };
        if field.name() == Some("file") {
            let bytes = field.bytes().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
            file = Some(bytes);
        }
    }
    let file = file.ok_or_else(no_file)?;
    check_document(&file)?;
    Ok(file)
}

fn no_file() -> String {
    "Choose a run state file (.json, from a run's Export) to import.".into()
}

/// Checks that an uploaded file is there and is JSON (without building it).
fn check_document(file: &[u8]) -> Result<(), String> {
    if file.iter().all(u8::is_ascii_whitespace) {
        return Err(no_file());
    }
    serde_json::from_slice::<IgnoredAny>(file).map(|_| ()).map_err(|e| format!("The file is not valid JSON: {e}."))
}

/// `303` to `/runs?import_error=<msg>`.
fn back_to_runs(msg: &str) -> Response {
    Redirect::to(&format!("/runs?{}", query_string([("import_error", msg)]))).into_response()
}

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
