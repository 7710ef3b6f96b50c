//! A project's own HTTP tools: register, edit, delete, read, rotate the
//! signing secret, and load them all into the live tool registry at start.
//!
//! Every change is stored first, then made in the registry (runs see it at
//! their next turn), under one lock so the registry ends as the store did
//! when two changes of a tool race. A run that attached a tool deleted
//! since gets "unknown tool" for its later calls (a tool error the model
//! reads), never a failure. Secrets (header values, the signing secret)
//! are kept out of every answer but the one that made the secret, and out
//! of the audit log.

use std::sync::Arc;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::{
    http_tool_name_problem, limits, Actor, HttpTool, HttpToolPage, HttpToolSecret, HttpToolSpec, NewHttpTool,
};
use crate::net;
use crate::runtime::{create, now};
use crate::store::{HttpToolWrite, StoredHttpTool};
use crate::tools::http::HttpTool as CallableHttpTool;

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::Invalid(msg.into())
}

/// Held while a change is stored and made in the registry (see the module docs).
static WRITES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn not_found(name: &str) -> EngineError {
    EngineError::NotFound(format!(
        "HTTP tool `{}`",
        name.chars().take(limits::MAX_HTTP_TOOL_NAME_CHARS).collect::<String>()
    ))
}

impl Engine {
    async fn stored_http_tool(&self, project: &str, name: &str) -> Result<StoredHttpTool> {
        if http_tool_name_problem(name).is_some() {
            return Err(not_found(name));
        }
        self.rt.store.http_tools().http_tool(project, name).await?.ok_or_else(|| not_found(name))
    }

    /// Everything of a registration but the name: bounds, the schema (it
    /// must compile), and the URL (a literal private address is refused
    /// unless the operator allows private networks).
    fn check_http_spec(&self, spec: &HttpToolSpec) -> Result<()> {
        spec.check_bounds().map_err(invalid)?;
        create::check_schema("schema", &spec.schema)?;
        net::check_url(&spec.url, self.rt.config.allow_private_networks).map_err(|e| invalid(format!("url: {e}")))?;
        Ok(())
    }

    fn callable(&self, stored: &StoredHttpTool) -> Result<Arc<CallableHttpTool>> {
        let tool = CallableHttpTool::new(stored, self.rt.config.allow_private_networks).map_err(invalid)?;
        Ok(Arc::new(tool))
    }

    fn put_http_tool(&self, project: &str, tool: Arc<CallableHttpTool>) -> Result<()> {
        self.rt.tools.put_project_tool(project, tool).map_err(EngineError::Internal)
    }
}

/// What is shown of a tool saved from `spec`.
fn shown(
    project: &str,
    name: String,
    spec: &HttpToolSpec,
    headers: &std::collections::BTreeMap<String, String>,
    (created_at, updated_at): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    by: &Actor,
) -> HttpTool {
    HttpTool {
        name,
        project: project.to_owned(),
        description: spec.description.clone(),
        schema: spec.schema.clone(),
        url: spec.url.clone(),
        header_names: headers.keys().cloned().collect(),
        timeout_ms: spec.timeout_ms(),
        idempotent: spec.idempotent,
        requires_approval: spec.requires_approval(),
        created_at,
        updated_at,
        updated_by: Some(by.clone()),
        secret_created_at: updated_at,
    }
}

impl HttpTools<'_> {
    /// Registers an HTTP tool in `project`; the answer shows its signing
    /// secret, this once. `Invalid` for a bad registration (a name taken by
    /// a built-in, MCP or agent tool included), `Conflict` when another HTTP
    /// tool of the project has the name or the project has as many as it may.
    pub async fn create_http_tool(self, project: &str, new: NewHttpTool, by: &Actor) -> Result<HttpToolSecret> {
        let (name, spec) = new.split();
        if let Some(problem) = http_tool_name_problem(&name) {
            return Err(invalid(problem));
        }
        self.check_http_spec(&spec)?;
        if self.rt.tools.shared().contains(&name) {
            return Err(invalid(format!("name `{name}` is taken by a tool (a built-in or MCP tool)")));
        }
        if self.rt.store.http_tools().agent_named(project, &name).await? {
            return Err(invalid(format!("name `{name}` is taken by a tool: the project's agent `{name}`")));
        }
        let at = now();
        let headers = spec.headers.clone().unwrap_or_default();
        let stored = StoredHttpTool {
            tool: shown(project, name, &spec, &headers, (at, at), by),
            headers,
            secret: net::new_secret(),
        };
        let callable = self.callable(&stored)?;
        let _writing = WRITES.lock().await;
        match self.rt.store.http_tools().insert_http_tool(&stored, limits::MAX_HTTP_TOOLS).await? {
            HttpToolWrite::Saved => {}
            HttpToolWrite::NameTaken => {
                return Err(EngineError::Conflict(format!(
                    "another HTTP tool of the project is named `{}`",
                    stored.tool.name
                )))
            }
            HttpToolWrite::TooMany => {
                return Err(EngineError::Conflict(format!(
                    "project `{project}` has {} HTTP tools, the most it may have; delete one first",
                    limits::MAX_HTTP_TOOLS
                )))
            }
            HttpToolWrite::NotFound => return Err(EngineError::Internal("an insert found nothing".into())),
        }
        self.put_http_tool(project, callable)?;
        drop(_writing);
        let detail = format!("POST {}", stored.tool.url);
        self.identity().audit(Some(project), by, "http_tool_created", Some(&stored.tool.name), Some(detail)).await;
        Ok(HttpToolSecret { tool: stored.tool, secret: stored.secret })
    }

    /// Saves `spec` as HTTP tool `name` of `project` (its headers are kept
    /// when `spec.headers` is `None`, and so is its secret). `NotFound` for
    /// a tool of another project.
    pub async fn update_http_tool(self, project: &str, name: &str, spec: HttpToolSpec, by: &Actor) -> Result<HttpTool> {
        self.check_http_spec(&spec)?;
        let _writing = WRITES.lock().await;
        let current = self.stored_http_tool(project, name).await?;
        let headers = spec.headers.clone().unwrap_or(current.headers);
        let stored = StoredHttpTool {
            tool: HttpTool {
                secret_created_at: current.tool.secret_created_at,
                ..shown(project, name.to_owned(), &spec, &headers, (current.tool.created_at, now()), by)
            },
            headers,
            secret: current.secret,
        };
        let callable = self.callable(&stored)?;
        if self.rt.store.http_tools().update_http_tool(&stored).await? != HttpToolWrite::Saved {
            return Err(not_found(name));
        }
        self.put_http_tool(project, callable)?;
        drop(_writing);
        let detail = format!("POST {}", stored.tool.url);
        self.identity().audit(Some(project), by, "http_tool_updated", Some(name), Some(detail)).await;
        Ok(stored.tool)
    }

    /// Deletes HTTP tool `name` of `project`: runs that attached it get
    /// "unknown tool" for later calls.
    pub async fn delete_http_tool(self, project: &str, name: &str, by: &Actor) -> Result<()> {
        let _writing = WRITES.lock().await;
        if http_tool_name_problem(name).is_some() || !self.rt.store.http_tools().delete_http_tool(project, name).await?
        {
            return Err(not_found(name));
        }
        self.rt.tools.remove_project_tool(project, name);
        drop(_writing);
        self.identity().audit(Some(project), by, "http_tool_deleted", Some(name), None).await;
        Ok(())
    }

    /// Gives HTTP tool `name` a new signing secret, shown in the answer this
    /// once; the old one signs nothing from now on.
    pub async fn rotate_http_tool_secret(self, project: &str, name: &str, by: &Actor) -> Result<HttpToolSecret> {
        let _writing = WRITES.lock().await;
        let mut stored = self.stored_http_tool(project, name).await?;
        let at = now();
        stored.secret = net::new_secret();
        stored.tool.secret_created_at = at;
        stored.tool.updated_at = at;
        stored.tool.updated_by = Some(by.clone());
        let callable = self.callable(&stored)?;
        if self.rt.store.http_tools().update_http_tool(&stored).await? != HttpToolWrite::Saved {
            return Err(not_found(name));
        }
        self.put_http_tool(project, callable)?;
        drop(_writing);
        self.identity().audit(Some(project), by, "http_tool_secret_rotated", Some(name), None).await;
        Ok(HttpToolSecret { tool: stored.tool, secret: stored.secret })
    }

    /// HTTP tool `name` of `project` (without its secrets); `NotFound` otherwise.
    pub async fn http_tool(self, project: &str, name: &str) -> Result<HttpTool> {
        Ok(self.stored_http_tool(project, name).await?.tool)
    }

    /// A page of `project`'s HTTP tools by name: after the name `after`, or
    /// skipping `offset`.
    pub async fn list(self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<HttpToolPage> {
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let rows = self.rt.store.http_tools().http_tools(project, after, offset, limit + 1).await?;
        let mut tools: Vec<HttpTool> = rows.into_iter().map(|s| s.tool).collect();
        let next_cursor = if tools.len() > limit as usize {
            tools.truncate(limit as usize);
            tools.last().map(|t| t.name.clone())
        } else {
            None
        };
        Ok(HttpToolPage { tools, next_cursor })
    }

    /// Puts every project's stored HTTP tools into the tool registry (at
    /// start-up, before runs are recovered); returns how many. A tool that
    /// cannot be loaded is left out and logged, and the others load.
    pub async fn load_http_tools(self) -> Result<usize> {
        let mut loaded = 0;
        for stored in self.rt.store.http_tools().every_http_tool().await? {
            let (project, name) = (&stored.tool.project, &stored.tool.name);
            match self.callable(&stored).and_then(|tool| self.put_http_tool(project, tool)) {
                Ok(()) => loaded += 1,
                Err(e) => tracing::error!(%project, tool = %name, error = %e, "an HTTP tool could not be loaded"),
            }
        }
        Ok(loaded)
    }
}

crate::engine::facade_group!(HttpTools, http_tools, "A project's HTTP tools.");
