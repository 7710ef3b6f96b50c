//! Tools: the trait every tool implements, and the registry that validates
//! arguments against each tool's JSON Schema before a call.
//!
//! Built-in tools live one per file, each a [`TypedTool`]: typed arguments
//! whose JSON Schema is derived from their type (see `typed`). HTTP and MCP
//! tools implement [`Tool`] with the schema they are given: MCP servers'
//! tools are shared by every project ([`ToolRegistry::replace_source`]),
//! HTTP tools belong to one project ([`ToolRegistry::put_project_tool`]). A call that fails says why with a
//! [`ToolError`], whose text the model is shown.

pub mod calculator;
pub mod config;
mod current_time;
mod error;
pub mod http;
pub mod mcp;
pub mod select;
mod send_email;
mod typed;
mod wait;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::{McpServerStatus, ToolInfo, SOURCE_BUILTIN};
use crate::store::Outbox;

pub use calculator::Calculator;
pub use current_time::CurrentTime;
pub use error::ToolError;
pub use send_email::SendEmail;
pub use typed::{arguments_schema, CannotTell, TypedTool};
pub use wait::Wait;

/// What a tool call may know about the run it serves.
#[derive(Clone)]
pub struct ToolContext {
    pub run_id: String,
    pub call_id: String,
    /// The run's `context` (never shown to the model).
    pub context: Value,
    /// Cancelled when the run is cancelled; long tools must watch it.
    pub cancel: CancellationToken,
    /// For tools whose effect is recorded by runlens itself: the outbox
    /// (and nothing else of the store).
    pub outbox: Arc<dyn Outbox>,
}

/// A function the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn schema(&self) -> Value;
    /// Whether a person must approve each call by default.
    fn requires_approval(&self) -> bool {
        false
    }
    /// Whether the call may safely run again after a crash interrupted it.
    /// Tools with outside effects (sending email) say no, so recovery reports
    /// the interruption to the model instead of repeating the effect.
    fn idempotent(&self) -> bool {
        true
    }
    /// Where the tool comes from: `builtin`, `mcp:NAME` or `http`.
    fn source(&self) -> String {
        SOURCE_BUILTIN.to_owned()
    }
    /// Runs the tool. An `Err` goes back to the model; it never fails the run.
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError>;
    /// After a crash interrupted a call of a tool with side effects: what
    /// the tool can tell of that call from its own record. The default
    /// cannot tell, so the interruption is reported to the model.
    async fn recover(&self, _ctx: &ToolContext) -> Recovery {
        Recovery::Unknown
    }
}

/// What a tool knows of a call a crash interrupted (see [`Tool::recover`]).
#[derive(Debug)]
pub enum Recovery {
    /// Its effect is on record: the call ended with this result.
    Done(Value),
    /// Its effect is provably absent: the call may run now.
    NotRun,
    /// The tool cannot tell.
    Unknown,
}

struct Registered {
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
    info: ToolInfo,
}

type Table = Arc<BTreeMap<String, Arc<Registered>>>;

#[derive(Default)]
struct Tables {
    /// Built-in and MCP tools: every project has them.
    global: Table,
    /// Each project's own (HTTP) tools.
    projects: HashMap<String, Table>,
    /// How each configured MCP server is doing, by name.
    mcp: BTreeMap<String, McpServerStatus>,
}

/// The tools the engine knows, by name: the built-ins and MCP servers'
/// tools for every project, plus each project's own HTTP tools. The
/// registry is live and shared (clones see the same tables): MCP servers
/// announce new tool lists and projects register tools while runs go on.
/// A run reads a [`ToolSet`] snapshot for its project with [`Self::view`].
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tables: Arc<RwLock<Tables>>,
}

fn registered(tool: Arc<dyn Tool>) -> Result<Arc<Registered>, String> {
    let schema = tool.schema();
    let validator =
        jsonschema::validator_for(&schema).map_err(|e| format!("tool `{}` has an invalid schema: {e}", tool.name()))?;
    let info = ToolInfo {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        schema,
        requires_approval: tool.requires_approval(),
        source: tool.source(),
        idempotent: tool.idempotent(),
    };
    Ok(Arc::new(Registered { tool, validator, info }))
}

impl ToolRegistry {
    /// The built-in tools: calculator, current_time, wait, send_email.
    pub fn with_builtins() -> Self {
        let reg = Self::default();
        let builtins: [Arc<dyn Tool>; 4] =
            [Arc::new(Calculator), Arc::new(CurrentTime), Arc::new(Wait), Arc::new(SendEmail)];
        for tool in builtins {
            reg.register(tool).expect("built-in tool schemas are valid");
        }
        reg
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a tool every project has; fails when its schema is not a valid
    /// JSON Schema. A tool of the same name is replaced.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<(), String> {
        let reg = registered(tool)?;
        Arc::make_mut(&mut self.write().global).insert(reg.info.name.clone(), reg);
        Ok(())
    }

    /// Replaces every tool of `source` (an MCP server's new list) with
    /// `tools`. Tools whose schema is invalid are left out, each with the
    /// reason in the returned list; the others are registered.
    pub fn replace_source(&self, source: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<String> {
        let mut problems = Vec::new();
        let fresh: Vec<Arc<Registered>> =
            tools.into_iter().filter_map(|t| registered(t).map_err(|e| problems.push(e)).ok()).collect();
        let mut tables = self.write();
        let global = Arc::make_mut(&mut tables.global);
        global.retain(|_, r| r.info.source != source);
        for reg in fresh {
            global.insert(reg.info.name.clone(), reg);
        }
        problems
    }

    /// Replaces project `project`'s own tools with `tools` (at start-up,
    /// from the store). Fails on the first invalid schema, changing nothing.
    pub fn set_project_tools(&self, project: &str, tools: Vec<Arc<dyn Tool>>) -> Result<(), String> {
        let table: BTreeMap<String, Arc<Registered>> =
            tools.into_iter().map(|t| registered(t).map(|r| (r.info.name.clone(), r))).collect::<Result<_, _>>()?;
        self.write().projects.insert(project.to_owned(), Arc::new(table));
        Ok(())
    }

    /// Adds or replaces one of project `project`'s own tools.
    pub fn put_project_tool(&self, project: &str, tool: Arc<dyn Tool>) -> Result<(), String> {
        let reg = registered(tool)?;
        let mut tables = self.write();
        Arc::make_mut(tables.projects.entry(project.to_owned()).or_default()).insert(reg.info.name.clone(), reg);
        Ok(())
    }

    /// Removes one of project `project`'s own tools; whether it was there.
    pub fn remove_project_tool(&self, project: &str, name: &str) -> bool {
        let mut tables = self.write();
        tables.projects.get_mut(project).is_some_and(|t| Arc::make_mut(t).remove(name).is_some())
    }

    /// The tools a run of project `project` can call, as they are now.
    pub fn view(&self, project: &str) -> ToolSet {
        let tables = self.read();
        ToolSet { global: tables.global.clone(), project: tables.projects.get(project).cloned() }
    }

    /// The tools every project has (built-ins and MCP), by name.
    pub fn shared(&self) -> ToolSet {
        ToolSet { global: self.read().global.clone(), project: None }
    }

    /// Records how MCP server `status.name` is doing (the MCP client does).
    pub fn set_mcp_status(&self, status: McpServerStatus) {
        self.write().mcp.insert(status.name.clone(), status);
    }

    /// Every configured MCP server's status, by name.
    pub fn mcp_status(&self) -> Vec<McpServerStatus> {
        self.read().mcp.values().cloned().collect()
    }
}

/// A snapshot of the tools one project can call: the shared tools plus the
/// project's own. Cheap to take (two reference counts); later registry
/// changes do not show in it.
#[derive(Clone)]
pub struct ToolSet {
    global: Table,
    project: Option<Table>,
}

impl ToolSet {
    fn find(&self, name: &str) -> Option<&Arc<Registered>> {
        self.global.get(name).or_else(|| self.project.as_ref()?.get(name))
    }

    fn all(&self) -> impl Iterator<Item = &Arc<Registered>> {
        let own = self.project.iter().flat_map(|t| t.values());
        let mut all: Vec<&Arc<Registered>> = self.global.values().chain(own).collect();
        all.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        all.into_iter()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.find(name).map(|r| r.tool.clone())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    pub fn info(&self, name: &str) -> Option<ToolInfo> {
        self.find(name).map(|r| r.info.clone())
    }

    /// Every tool, by name.
    pub fn infos(&self) -> Vec<ToolInfo> {
        self.all().map(|r| r.info.clone()).collect()
    }

    /// Every tool's name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.all().map(|r| r.info.name.clone()).collect()
    }

    /// Checks `args` against the tool's schema; the error lists every problem.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), ToolError> {
        let reg = self.find(name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
        let problems: Vec<String> = reg
            .validator
            .iter_errors(args)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolError::InvalidArguments { tool: name.to_owned(), problems })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let reg = ToolRegistry::with_builtins().shared();
        assert_eq!(reg.names(), crate::model::BUILTIN_TOOLS, "the registry registers exactly the listed built-ins");
        assert!(reg.validate("calculator", &json!({"expression": "1+1"})).is_ok());
        let err = reg.validate("calculator", &json!({"expression": 5})).unwrap_err().to_string();
        assert!(err.contains("invalid arguments for `calculator`"), "{err}");
        let err = reg.validate("send_email", &json!({"to": "x@y.z"})).unwrap_err().to_string();
        assert!(err.contains("subject"), "{err}");
        assert!(reg.validate("nope", &json!({})).unwrap_err().to_string().contains("unknown tool"));
    }

    /// A project's own tools are seen by that project only; an MCP
    /// server's new list replaces its old one and nothing else.
    #[test]
    fn projects_see_shared_tools_and_only_their_own() {
        struct Named(&'static str, &'static str);
        #[async_trait]
        impl Tool for Named {
            fn name(&self) -> &str {
                self.0
            }
            fn description(&self) -> &str {
                "test"
            }
            fn schema(&self) -> Value {
                json!({"type": "object"})
            }
            fn source(&self) -> String {
                self.1.to_owned()
            }
            async fn call(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
                Ok(Value::Null)
            }
        }
        let reg = ToolRegistry::with_builtins();
        let before = reg.view("a");
        reg.put_project_tool("a", Arc::new(Named("lookup", "http"))).unwrap();
        reg.replace_source("mcp:x", vec![Arc::new(Named("x__one", "mcp:x")), Arc::new(Named("x__two", "mcp:x"))]);
        assert!(!before.contains("lookup"), "a snapshot does not change");
        assert!(reg.view("a").contains("lookup") && !reg.view("b").contains("lookup"));
        assert!(reg.view("b").contains("x__one") && reg.view("b").contains("calculator"));
        assert_eq!(reg.view("a").info("lookup").unwrap().source, "http");
        reg.replace_source("mcp:x", vec![Arc::new(Named("x__three", "mcp:x"))]);
        let b = reg.view("b").names();
        assert!(b.contains(&"x__three".to_owned()) && !b.contains(&"x__one".to_owned()), "{b:?}");
        assert!(b.contains(&"wait".to_owned()), "other sources stay");
        assert!(reg.remove_project_tool("a", "lookup") && !reg.view("a").contains("lookup"));
        assert!(!reg.remove_project_tool("a", "lookup"));
    }

    /// The derived schemas are the very ones written by hand before (numbers
    /// included: `0` and `3600.0` are told apart), so models and clients see
    /// no change.
    #[test]
    fn derived_schemas_are_the_schemas_sent_before() {
        let reg = ToolRegistry::with_builtins().shared();
        let schema = |name: &str| reg.info(name).unwrap().schema;
        assert_eq!(
            schema("calculator"),
            json!({
                "type": "object",
                "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 1000,
                    "description": "The expression to evaluate"}},
                "required": ["expression"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema("current_time"),
            json!({
                "type": "object",
                "properties": {"timezone": {"type": "string",
                    "description": "IANA time zone; defaults to the run's context.timezone, else UTC"}},
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema("send_email"),
            json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string", "minLength": 3, "maxLength": 320, "pattern": "^[^@\\s]+@[^@\\s]+$",
                           "examples": ["team@example.com"]},
                    "subject": {"type": "string", "maxLength": 500, "examples": ["A message from runlens"]},
                    "body": {"type": "string", "maxLength": 100000, "examples": ["Hello from a runlens agent."]}
                },
                "required": ["to", "subject", "body"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema("wait"),
            json!({
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 3600.0}},
                "required": ["seconds"],
                "additionalProperties": false
            })
        );
    }

    #[tokio::test]
    async fn typed_tools_read_their_arguments_and_write_their_output() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store: Arc<dyn crate::store::Store> = Arc::new(crate::store::SqliteStore::open(&url).await.unwrap());
        let ctx = ToolContext {
            run_id: "r".into(),
            call_id: "c".into(),
            context: json!({"timezone": "Europe/Paris"}),
            cancel: CancellationToken::new(),
            outbox: Arc::new(crate::store::StoreOutbox(store)),
        };
        let reg = ToolRegistry::with_builtins().shared();
        let call = |name: &str, args: Value| {
            let (tool, ctx) = (reg.get(name).unwrap(), ctx.clone());
            async move { tool.call(args, &ctx).await }
        };
        assert_eq!(
            call("calculator", json!({"expression": "(12 + 30) * 2"})).await,
            Ok(json!({"expression": "(12 + 30) * 2", "value": 84}))
        );
        assert_eq!(call("calculator", json!({"expression": "1/4"})).await.unwrap()["value"], 0.25);
        assert_eq!(call("calculator", json!({"expression": "1/0"})).await, Err(ToolError::from("division by zero")));
        let now = call("current_time", json!({})).await.unwrap();
        assert_eq!(now["timezone"], "Europe/Paris", "the run's context gives the zone");
        assert!(now["iso"].is_string() && now["unix"].is_i64() && now["weekday"].is_string(), "{now}");
        let utc = call("current_time", json!({"timezone": "UTC"})).await.unwrap();
        assert!(utc["iso"].as_str().unwrap().ends_with("+00:00"), "{utc}");
        assert!(call("current_time", json!({"timezone": "Mars/Olympus"}))
            .await
            .unwrap_err()
            .to_string()
            .contains("unknown time zone"));
        assert_eq!(call("wait", json!({"seconds": 0})).await, Ok(json!({"waited_seconds": 0.0})));
        let sent = call("send_email", json!({"to": "a@example.com", "subject": "s", "body": "b"})).await;
        assert_eq!(sent, Ok(json!({"id": "r-c", "status": "sent", "to": "a@example.com"})));
        // Arguments the schema would have refused never reach `run`.
        let bad = call("wait", json!({"seconds": "soon"})).await.unwrap_err().to_string();
        assert!(bad.starts_with("invalid arguments for `wait`: invalid type"), "{bad}");
    }
}
