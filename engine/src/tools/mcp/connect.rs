//! One connection to a server: a child process on stdio, or a streamable
//! HTTP session, with the MCP handshake done (rmcp's `initialize`, which
//! every server version understands).
//!
//! A stdio server runs in a process group of its own with only the
//! environment its section gives it (plus PATH, HOME and the like); its
//! stderr is read line by line into the debug log and the last line is kept
//! for the error shown when it dies (secrets blotted out).

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

use super::config::{McpServer, Transport};

/// A live connection.
pub(super) type Session = RunningService<RoleClient, Handler>;

/// What the client does with what the server sends on its own: a
/// `notifications/tools/list_changed` wakes the supervisor to list again.
pub(super) struct Handler {
    pub tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.tools_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("runlens", env!("CARGO_PKG_VERSION")))
    }
}

/// The last line a stdio server wrote to stderr (redacted), for errors.
#[derive(Clone, Default)]
pub(super) struct LastWords(Arc<Mutex<Option<String>>>);

impl LastWords {
    pub fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn set(&self, line: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
    }
}

/// Starts the server (or opens the session) and does the handshake. The
/// error is fit to show: redacted and short.
pub(super) async fn open(server: &McpServer, handler: Handler, last_words: &LastWords) -> Result<Session, String> {
    let redact = |e: &(dyn std::error::Error + 'static)| super::describe(e, &server.secrets);
    match &server.transport {
        Transport::Stdio { program, args, env } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).env_clear().envs(env.iter().map(|(k, v)| (k, v)));
            let mut wrapped = process_wrap::tokio::CommandWrap::from(command);
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader()).wrap(process_wrap::tokio::KillOnDrop);
            let (process, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{program}`: {}", redact(&e)))?;
            if let Some(stderr) = stderr {
                tokio::spawn(read_stderr(server.name.clone(), server.secrets.clone(), stderr, last_words.clone()));
            }
            handler.serve(process).await.map_err(|e| {
                let words = last_words.take().map(|w| format!(" (its last words: {w})")).unwrap_or_default();
                format!("the MCP handshake failed: {}{words}", redact(&e))
            })
        }
        Transport::Http { url, headers } => {
            // rmcp's reqwest uses the process TLS provider, which this sets (net.rs).
            let _ = crate::net::http_builder();
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers.iter().cloned().collect())
                .max_json_response_size(super::result::MAX_WIRE_BYTES);
            let transport = StreamableHttpClientTransport::from_config(config);
            handler.serve(transport).await.map_err(|e| format!("the MCP handshake failed: {}", redact(&e)))
        }
    }
}

async fn read_stderr(
    server: String,
    secrets: super::config::Secrets,
    stderr: tokio::process::ChildStderr,
    last: LastWords,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = super::short(&secrets.redact(line.trim_end()));
        if line.is_empty() {
            continue;
        }
        tracing::debug!(server = %server, "MCP server stderr: {line}");
        last.set(line);
    }
}
