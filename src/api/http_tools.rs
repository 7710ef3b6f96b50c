//! Server functions of the HTTP tools page (`/tools/http`): the current
//! project's HTTP tools, and registering, editing, deleting them and
//! rotating their signing secret (admins; see `crate::server::routes::
//! http_tools` for why).
//!
//! The forms post text fields; [`save_http_tool`] reads them into the
//! engine's registration (headers as `Name: value` lines, the schema as
//! JSON) and the engine checks the rest. Errors never quote a header line:
//! its value may be a secret.

// `save_http_tool` takes one argument per form field (the server function's
// client side, generated for the browser, cannot carry an `allow` of its own).
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use runlens_engine::model::{HttpTool, HttpToolSecret};
use serde::{Deserialize, Serialize};

/// HTTP tools the page lists at most (the API pages further).
pub const HTTP_TOOLS_SHOWN: u32 = 200;

/// What the page shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpToolsView {
    pub tools: Vec<HttpTool>,
    /// More than [`HTTP_TOOLS_SHOWN`] exist.
    pub more: bool,
    /// The caller is an admin of the project (the forms are theirs).
    pub may_edit: bool,
    pub project: String,
}

/// What a save did: the tool, and its secret when the save made one (a registration).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedHttpTool {
    pub tool: HttpTool,
    pub secret: Option<String>,
}

/// Never prints the secret.
impl std::fmt::Debug for SavedHttpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedHttpTool").field("tool", &self.tool.name).finish_non_exhaustive()
    }
}

/// The current project's HTTP tools by name.
#[server]
pub async fn list_http_tools() -> Result<HttpToolsView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let page = engine
        .http_tools()
        .list(&caller.project, None, 0, HTTP_TOOLS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?;
    Ok(HttpToolsView {
        tools: page.tools,
        more: page.next_cursor.is_some(),
        may_edit: caller.can(&caller.project, super::ssr::Role::Admin),
        project: caller.project,
    })
}

/// Registers an HTTP tool (no `editing`) or saves tool `editing` (its
/// headers kept unless `replace_headers`). Only a registration's answer
/// carries the signing secret.
#[server]
pub async fn save_http_tool(
    editing: Option<String>,
    name: Option<String>,
    description: Option<String>,
    schema: Option<String>,
    url: Option<String>,
    headers: Option<String>,
    timeout_ms: Option<String>,
    #[server(default)] idempotent: bool,
    #[server(default)] requires_approval: bool,
    #[server(default)] replace_headers: bool,
) -> Result<SavedHttpTool, ServerFnError> {
    use runlens_engine::model::{HttpToolSpec, NewHttpTool};

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
    let text = |v: Option<String>| v.unwrap_or_default().trim().to_owned();
    let editing = super::ssr::non_empty(editing);
    let schema = text(schema);
    let schema = match schema.is_empty() {
        true => serde_json::json!({"type": "object", "properties": {}}),
        false => serde_json::from_str(&schema).map_err(|e| ssr::invalid(format!("schema is not valid JSON: {e}")))?,
    };
    let timeout_ms = match text(timeout_ms) {
        t if t.is_empty() => None,
        t => Some(t.parse::<u64>().map_err(|_| ssr::invalid(format!("timeout_ms must be a whole number, not {t:?}")))?),
    };
    let header_lines = headers.unwrap_or_default();
    let headers = match (editing.is_some(), replace_headers) {
        (true, false) => None,
        _ => Some(ssr::headers(&header_lines).map_err(ssr::invalid)?),
    };
    let spec = HttpToolSpec {
        description: text(description),
        schema,
        url: text(url),
        headers,
        timeout_ms,
        idempotent,
        requires_approval: Some(requires_approval),
    };
    match editing {
        Some(name) => {
            let tool = engine.http_tools().update_http_tool(&caller.project, &name, spec, &caller.actor).await;
            Ok(SavedHttpTool { tool: tool.map_err(ssr::engine_error)?, secret: None })
        }
        None => {
            let new = NewHttpTool {
                name: text(name),
                description: spec.description,
                schema: spec.schema,
                url: spec.url,
                headers: spec.headers,
                timeout_ms: spec.timeout_ms,
                idempotent: spec.idempotent,
                requires_approval: spec.requires_approval,
            };
            let made = engine
                .http_tools()
                .create_http_tool(&caller.project, new, &caller.actor)
                .await
                .map_err(ssr::engine_error)?;
            Ok(SavedHttpTool { tool: made.tool, secret: Some(made.secret) })
        }
    }
}

/// Deletes HTTP tool `name` of the current project.
#[server]
pub async fn delete_http_tool(name: String) -> Result<String, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
    engine.http_tools().delete_http_tool(&caller.project, &name, &caller.actor).await.map_err(ssr::engine_error)?;
    Ok(format!("Deleted the HTTP tool {name}; runs that attached it get \"unknown tool\" from now on."))
}

/// Gives HTTP tool `name` a new signing secret, shown in the answer once.
#[server]
pub async fn rotate_http_tool_secret(name: String) -> Result<HttpToolSecret, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
    engine.http_tools().rotate_http_tool_secret(&caller.project, &name, &caller.actor).await.map_err(ssr::engine_error)
}

#[cfg(feature = "ssr")]
mod ssr {
    use std::collections::BTreeMap;

    use leptos::prelude::ServerFnError;
    use runlens_engine::EngineError;

    use super::super::ssr::{classify, set_status};

    /// An engine error with its status (400, 404, 409…).
    pub fn engine_error(err: EngineError) -> ServerFnError {
        let error = classify(err, "an HTTP tools server function");
        set_status(error.status());
        ServerFnError::new(error.message)
    }

    /// A 400 with `message`.
    pub fn invalid(message: String) -> ServerFnError {
        set_status(axum::http::StatusCode::BAD_REQUEST);
        ServerFnError::new(message)
    }

    /// `Name: value` lines (blank lines skipped); an error names the line,
    /// never its text (the value may be a secret).
    pub fn headers(text: &str) -> Result<BTreeMap<String, String>, String> {
        let mut headers = BTreeMap::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let (name, value) =
                line.split_once(':').ok_or_else(|| format!("headers, line {}: write `Name: value`", n + 1))?;
            headers.insert(name.trim().to_owned(), value.trim().to_owned());
        }
        Ok(headers)
    }
}
