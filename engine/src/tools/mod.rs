//! Tools: the trait every tool implements, and the registry that validates
//! arguments against each tool's JSON Schema before a call.
//!
//! Built-in tools live one per file. HTTP or MCP tools plug in by implementing
//! [`Tool`] and calling [`ToolRegistry::register`]. A call that fails says
//! why with a [`ToolError`], whose text the model is shown.

pub mod calculator;
mod current_time;
mod error;
mod send_email;
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
}
