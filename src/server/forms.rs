//! `POST /playground`: the playground's plain HTML form, turned into a run.
//!
//! A real form post (not a server function) so starting a run needs no
//! JavaScript and lands on the new run's trace with a `303 See Other`. Any
//! error sends the browser back to `/playground` with the message and every
//! submitted field in the query string, so the page can re-fill the form.

use std::collections::BTreeMap;

use axum::{
    extract::{Form, State},
    response::{IntoResponse, Redirect, Response},
};
use runlens_engine::{model::CreateRun, Engine, EngineError};
use serde_json::Value;

use crate::format::{query_string, url_encode};

/// Creates a run from the playground form and redirects to its trace, or back
/// to the form with `error=…` and the submitted fields.
pub async fn playground_submit(State(engine): State<Engine>, Form(pairs): Form<Vec<(String, String)>>) -> Response {
    let req = match create_run_from_form(&pairs) {
        Ok(req) => req,
        Err(msg) => return back_to_form(&pairs, &msg),
    };
    match engine.create_run(req).await {
        Ok((run, _created)) => Redirect::to(&format!("/runs/{}", url_encode(&run.id))).into_response(),
        Err(err) => {
            let msg = match err {
                EngineError::Invalid(_) | EngineError::NotFound(_) | EngineError::Conflict(_) => err.to_string(),
                other => {
                    tracing::error!(error = %other, "creating a run from the playground failed");
                    "internal error (details are in the server log)".to_string()
                }
            };
            back_to_form(&pairs, &msg)
        }
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
fn approval_from_form(pairs: &[(String, String)]) -> Result<Option<Value>, String> {
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
    let mut policy = serde_json::Map::new();
    if !tools.is_empty() {
        policy.insert("tools".into(), Value::from(tools));
    }
    if let Some(t) = timeout {
        policy.insert("timeout_s".into(), Value::from(t));
    }
    Ok((!policy.is_empty()).then_some(Value::Object(policy)))
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

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
