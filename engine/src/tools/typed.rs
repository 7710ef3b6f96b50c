//! Tools with typed arguments: the arguments are a Rust type, and the JSON
//! Schema the model and `GET /api/tools` see is derived from it (schemars),
//! so it is written once and always matches what the tool reads.
//!
//! Every [`TypedTool`] is a [`Tool`] (the object-safe trait the registry
//! stores): the blanket impl below gives the schema, reads the checked
//! arguments into `Args` and writes `Output` back as JSON. Tools whose
//! schema is only known at run time (HTTP, MCP) implement [`Tool`] itself.

use async_trait::async_trait;
use schemars::generate::SchemaSettings;
use schemars::transform::RestrictFormats;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::{Recovery, Tool, ToolContext, ToolError};

/// A function the model can call, with typed arguments and output.
#[async_trait]
pub trait TypedTool: Send + Sync {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// The arguments object. Doc comments on its fields become the
    /// properties' descriptions; `#[schemars(...)]` sets bounds and examples;
    /// `#[serde(deny_unknown_fields)]` refuses unknown properties.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// What a call returns (sent back to the model as JSON).
    type Output: Serialize;

    fn description(&self) -> &str;
    /// Whether a person must approve each call by default (see [`Tool::requires_approval`]).
    fn requires_approval(&self) -> bool {
        false
    }
    /// Whether the call may safely run again after a crash (see [`Tool::idempotent`]).
    fn idempotent(&self) -> bool {
        true
    }
    /// Runs the tool on arguments the registry already checked against the schema.
    async fn run(&self, args: Self::Args, ctx: &ToolContext) -> Result<Self::Output, ToolError>;
    /// What the tool's own record says of a call a crash interrupted (see [`Tool::recover`]).
    async fn recover(&self, _ctx: &ToolContext) -> Result<Option<Self::Output>, CannotTell> {
        Err(CannotTell)
    }
}

/// A tool cannot tell whether an interrupted call took effect.
#[derive(Debug)]
pub struct CannotTell;

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }
    fn description(&self) -> &str {
        TypedTool::description(self)
    }
    fn schema(&self) -> Value {
        arguments_schema::<T::Args>()
    }
    fn requires_approval(&self) -> bool {
        TypedTool::requires_approval(self)
    }
    fn idempotent(&self) -> bool {
        TypedTool::idempotent(self)
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        // The registry checked `args` against the schema derived from
        // `Args`, so this only fails where the two disagree.
        let args = serde_json::from_value(args)
            .map_err(|e| ToolError::InvalidArguments { tool: T::NAME.to_owned(), problems: vec![e.to_string()] })?;
        let output = self.run(args, ctx).await?;
        serde_json::to_value(output).map_err(|e| ToolError::Failed(format!("the result is not valid JSON: {e}")))
    }
    async fn recover(&self, ctx: &ToolContext) -> Recovery {
        match TypedTool::recover(self, ctx).await {
            Ok(Some(output)) => serde_json::to_value(output).map_or(Recovery::Unknown, Recovery::Done),
            Ok(None) => Recovery::NotRun,
            Err(CannotTell) => Recovery::Unknown,
        }
    }
}

/// The JSON Schema of a tool's arguments type `A`, as models are given it:
/// a JSON Schema 2020-12 object schema without `$schema`, `title` or a
/// top-level `description` (the tool's own name and description are sent
/// beside it), with nested types inline rather than in `$defs`, and with
/// only the `format`s the standard defines (none of schemars' `double`,
/// `uint32`…: the types and bounds say it all).
pub fn arguments_schema<A: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let generator = settings.with_transform(RestrictFormats::default()).into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Some(root) = schema.as_object_mut() {
        for noise in ["$schema", "title", "description"] {
            root.remove(noise);
        }
    }
    schema
}
