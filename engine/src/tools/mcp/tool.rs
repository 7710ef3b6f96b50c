//! One tool of an MCP server as a runlens [`Tool`]: named `NAME__tool`,
//! described and validated by what the server listed, approved and
//! retried as the config and the tool's annotations say, called over the
//! server's current connection with a time limit and the run's cancel.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use super::config::McpServer;
use super::supervisor::Link;
use crate::model::mcp_source;
use crate::tools::{Tool, ToolContext, ToolError};

/// The longest description kept (the model reads it every turn).
const MAX_DESCRIPTION_CHARS: usize = 4000;
/// The largest input schema accepted, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The longest tool name any provider accepts (OpenAI's rule).
const MAX_TOOL_NAME_CHARS: usize = 64;

pub(super) struct McpTool {
    name: String,
    /// The tool's name on the server.
    remote: String,
    description: String,
    schema: Value,
    requires_approval: bool,
    idempotent: bool,
    server: String,
    link: Arc<Link>,
}

/// The runlens name of the server's tool `tool`: `NAME__tool`, with each
/// character a provider refuses (anything but `A-Z a-z 0-9 _ -`) made `_`.
/// `Err` says why there is no valid name.
pub(super) fn tool_name(server: &str, tool: &str) -> Result<String, String> {
    if tool.is_empty() {
        return Err("a tool without a name".into());
    }
    let safe: String =
        tool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    let name = format!("{server}__{safe}");
    if name.chars().count() > MAX_TOOL_NAME_CHARS {
        return Err(format!("`{name}` is longer than the {MAX_TOOL_NAME_CHARS} characters models accept"));
    }
    Ok(name)
}

impl McpTool {
    /// The runlens tool for `listed`, one entry of the server's tool list.
    /// `Err` says why it is left out.
    pub(super) fn new(server: &McpServer, link: &Arc<Link>, listed: &rmcp::model::Tool) -> Result<Self, String> {
        let remote = listed.name.to_string();
        let name = tool_name(&server.name, &remote)?;
        let schema = Value::Object((*listed.input_schema).clone());
        let size = schema.to_string().len();
        if size > MAX_SCHEMA_BYTES {
            return Err(format!("`{remote}` has an input schema of {size} bytes (at most {MAX_SCHEMA_BYTES})"));
        }
        let description = listed
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .or(listed.title.as_deref())
            .map(|d| d.chars().take(MAX_DESCRIPTION_CHARS).collect())
            .unwrap_or_else(|| format!("`{remote}` of the MCP server `{}`", server.name));
        let hints = listed.annotations.as_ref();
        let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
        // A read-only tool has no effect to repeat (the spec reads
        // `idempotentHint` only for tools that are not read-only).
        let idempotent_hint = read_only || hints.and_then(|a| a.idempotent_hint) == Some(true);
        Ok(Self {
            name,
            requires_approval: server.require_approval.as_ref().map_or(!read_only, |m| m.matches(&remote)),
            idempotent: server.idempotent.as_ref().map_or(idempotent_hint, |m| m.matches(&remote)),
            remote,
            description,
            schema,
            server: server.name.clone(),
            link: link.clone(),
        })
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn schema(&self) -> Value {
        self.schema.clone()
    }

    fn requires_approval(&self) -> bool {
        self.requires_approval
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn source(&self) -> String {
        mcp_source(&self.server)
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let peer = self.link.peer().map_err(ToolError::Failed)?;
        let mut params = CallToolRequestParams::new(self.remote.clone());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let server = &self.server;
        let secrets = self.link.secrets();
        let timeout = self.link.timeout();
        // Dropping the request (on a cancel or the time limit) makes rmcp
        // send `notifications/cancelled` for it.
        let outcome = tokio::select! {
            outcome = peer.call_tool(params) => outcome,
            _ = ctx.cancel.cancelled() => {
                return Err(ToolError::Cancelled(format!(
                    "cancelled: the run was cancelled while `{}` ran; the MCP server `{server}` was asked to stop it, \
                     whether it had an effect is not known",
                    self.remote
                )));
            }
            _ = tokio::time::sleep(timeout) => {
                return Err(ToolError::Failed(format!(
                    "`{}` on the MCP server `{server}` did not answer within {} s; it was asked to stop (whether it \
                     had an effect is not known)",
                    self.remote,
                    timeout.as_secs()
                )));
            }
        };
        match outcome {
            Ok(result) => {
                let wire = serde_json::to_value(&result).map_err(|e| {
                    ToolError::Failed(format!("the MCP server `{server}` sent a result runlens cannot read: {e}"))
                })?;
                super::result::convert(&wire, &secrets)
            }
            Err(rmcp::ServiceError::McpError(e)) => Err(ToolError::Failed(format!(
                "the MCP server `{server}` refused the call: {}",
                super::short(&secrets.redact(&e.message))
            ))),
            Err(e) => {
                // The connection failed under the call: the supervisor checks it.
                self.link.suspect();
                Err(ToolError::Failed(format!(
                    "the connection to the MCP server `{server}` failed during the call ({}); the server is being \
                     {}. Whether the call had an effect is not known.",
                    super::describe(&e, &secrets),
                    self.link.restart_verb()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_valid_for_every_provider_or_refused() {
        assert_eq!(tool_name("everything", "get-sum").unwrap(), "everything__get-sum");
        assert_eq!(tool_name("fs", "read.file/v2").unwrap(), "fs__read_file_v2");
        assert_eq!(tool_name("fs", "çava").unwrap(), "fs___ava");
        assert!(tool_name("s", &"t".repeat(62)).unwrap_err().contains("longer than the 64"));
        assert_eq!(tool_name("s", &"t".repeat(61)).unwrap().len(), 64);
        assert!(tool_name("s", "").is_err());
    }
}
