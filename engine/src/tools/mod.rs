//! Tools: the trait every tool implements, and the registry that validates
//! arguments against each tool's JSON Schema before a call.
//!
//! Built-in tools live one per file, each a [`TypedTool`]: typed arguments
//! whose JSON Schema is derived from their type (see `typed`). HTTP or MCP
//! tools plug in by implementing [`Tool`] with the schema they are given and
//! calling [`ToolRegistry::register`]. A call that fails says why with a
//! [`ToolError`], whose text the model is shown.

pub mod calculator;
mod current_time;
mod error;
mod send_email;
mod typed;
mod wait;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::ToolInfo;
use crate::store::Store;

pub use calculator::Calculator;
pub use current_time::CurrentTime;
pub use error::ToolError;
pub use send_email::SendEmail;
pub use typed::{arguments_schema, TypedTool};
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
    /// For tools whose effect is recorded by runlens itself (the outbox).
    pub store: Arc<dyn Store>,
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
    /// Runs the tool. An `Err` goes back to the model; it never fails the run.
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError>;
}

struct Registered {
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
    info: ToolInfo,
}

/// The tools the engine knows, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<Registered>>,
}

impl ToolRegistry {
    /// The built-in tools: calculator, current_time, wait, send_email.
    pub fn with_builtins() -> Self {
        let mut reg = Self::default();
        let builtins: [Arc<dyn Tool>; 4] =
            [Arc::new(Calculator), Arc::new(CurrentTime), Arc::new(Wait), Arc::new(SendEmail)];
        for tool in builtins {
            reg.register(tool).expect("built-in tool schemas are valid");
        }
        reg
    }

    /// Adds a tool; fails when its schema is not a valid JSON Schema.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), String> {
        let schema = tool.schema();
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("tool `{}` has an invalid schema: {e}", tool.name()))?;
        let info = ToolInfo {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            schema,
            requires_approval: tool.requires_approval(),
        };
        self.tools.insert(info.name.clone(), Arc::new(Registered { tool, validator, info }));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).map(|r| r.tool.clone())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    pub fn info(&self, name: &str) -> Option<ToolInfo> {
        self.tools.get(name).map(|r| r.info.clone())
    }

    pub fn infos(&self) -> Vec<ToolInfo> {
        self.tools.values().map(|r| r.info.clone()).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Checks `args` against the tool's schema; the error lists every problem.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), ToolError> {
        let reg = self.tools.get(name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
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
        let reg = ToolRegistry::with_builtins();
        assert_eq!(reg.names(), ["calculator", "current_time", "send_email", "wait"]);
        assert!(reg.validate("calculator", &json!({"expression": "1+1"})).is_ok());
        let err = reg.validate("calculator", &json!({"expression": 5})).unwrap_err().to_string();
        assert!(err.contains("invalid arguments for `calculator`"), "{err}");
        let err = reg.validate("send_email", &json!({"to": "x@y.z"})).unwrap_err().to_string();
        assert!(err.contains("subject"), "{err}");
        assert!(reg.validate("nope", &json!({})).unwrap_err().to_string().contains("unknown tool"));
    }

    /// The derived schemas are the very ones written by hand before (numbers
    /// included: `0` and `3600.0` are told apart), so models and clients see
    /// no change.
    #[test]
    fn derived_schemas_are_the_schemas_sent_before() {
        let reg = ToolRegistry::with_builtins();
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
        let store: Arc<dyn Store> = Arc::new(crate::store::SqliteStore::open(&url).await.unwrap());
        let ctx = ToolContext {
            run_id: "r".into(),
            call_id: "c".into(),
            context: json!({"timezone": "Europe/Paris"}),
            cancel: CancellationToken::new(),
            store,
        };
        let reg = ToolRegistry::with_builtins();
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
