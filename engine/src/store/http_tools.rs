//! The HTTP-tools half of the store: each project's own HTTP tools, with
//! the secrets a call needs (header values, the signing secret).

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;

use crate::error::Result;
use crate::model::HttpTool;

/// An HTTP tool as stored: what is shown of it, and its secrets.
#[derive(Clone, PartialEq)]
pub struct StoredHttpTool {
    pub tool: HttpTool,
    /// Header name → value, sent with each call.
    pub headers: BTreeMap<String, String>,
    /// The HMAC key of the `runlens-signature` header.
    pub secret: String,
}

/// Never prints a header value or the secret.
impl fmt::Debug for StoredHttpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredHttpTool")
            .field("tool", &self.tool)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// What [`HttpToolStore::insert_http_tool`] and
/// [`HttpToolStore::update_http_tool`] did; only `Saved` wrote anything.
#[derive(Debug, PartialEq, Eq)]
pub enum HttpToolWrite {
    Saved,
    /// Another HTTP tool of the project has the name.
    NameTaken,
    /// No such tool (an update).
    NotFound,
    /// The project has as many HTTP tools as it may.
    TooMany,
}

#[async_trait]
pub trait HttpToolStore: Send + Sync {
    /// Inserts a new tool when its name is free in its project and the
    /// project then has at most `max` HTTP tools.
    async fn insert_http_tool(&self, tool: &StoredHttpTool, max: u32) -> Result<HttpToolWrite>;
    /// Replaces everything of a stored tool but its creation time.
    async fn update_http_tool(&self, tool: &StoredHttpTool) -> Result<HttpToolWrite>;
    /// Deletes a tool; whether it was there.
    async fn delete_http_tool(&self, project: &str, name: &str) -> Result<bool>;
    async fn http_tool(&self, project: &str, name: &str) -> Result<Option<StoredHttpTool>>;
    /// A project's tools by name, after the name `after` when given,
    /// skipping `offset`, at most `limit`.
    async fn http_tools(
        &self,
        project: &str,
        after: Option<&str>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<StoredHttpTool>>;
    /// Every project's tools (loaded into the tool registry at start-up).
    async fn every_http_tool(&self) -> Result<Vec<StoredHttpTool>>;
    /// Whether an agent of `project` is named `name` (agents are tools too).
    async fn agent_named(&self, project: &str, name: &str) -> Result<bool>;
}
