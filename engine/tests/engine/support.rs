//! Shared helpers: engines on temporary stores (see `test_db`) and small
//! custom tools.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{CreateRun, Run};

#[path = "test_db.rs"]
mod test_db;
use runlens_engine::tools::{Tool, ToolContext, ToolError, ToolRegistry};
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};
pub use test_db::*;

pub const SETTLE: Duration = Duration::from_secs(20);

/// Built-in tools plus `explode` (panics), `slow_side_effect` (not idempotent)
/// and `big_result` (returns `{"data": "xxx…"}` of `chars` characters).
pub fn test_tools() -> ToolRegistry {
    let tools = ToolRegistry::with_builtins();
    tools.register(Arc::new(Explode)).unwrap();
    tools.register(Arc::new(SlowSideEffect)).unwrap();
    tools.register(Arc::new(BigResult)).unwrap();
    tools
}

pub async fn engine_at(url: &str) -> Engine {
    Engine::with_parts(open_store(url).await, test_tools(), ModelRegistry::with_builtin(), EngineConfig::default())
}

pub async fn engine() -> (Engine, TestDb) {
    let db = test_db();
    (engine_at(&db_url(&db)).await, db)
}

/// A run of the built-in model playing `script`.
pub fn scripted(script: Value) -> CreateRun {
    CreateRun {
        initial_prompt: "scripted run".into(),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

pub async fn run_to_end(engine: &Engine, req: CreateRun) -> Run {
    let (run, created) = engine.runs().create_run(req).await.expect("create run");
    assert!(created);
    engine.runs().wait_until_settled(&run.id, SETTLE).await.expect("run settles")
}

struct Explode;

#[async_trait]
impl Tool for Explode {
    fn name(&self) -> &str {
        "explode"
    }
    fn description(&self) -> &str {
        "Panics."
    }
    fn schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        panic!("kaboom")
    }
}

struct SlowSideEffect;

#[async_trait]
impl Tool for SlowSideEffect {
    fn name(&self) -> &str {
        "slow_side_effect"
    }
    fn description(&self) -> &str {
        "Takes five seconds and must not be repeated."
    }
    fn schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn call(&self, _args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => Ok(json!("done")),
            _ = ctx.cancel.cancelled() => Err("cancelled".into()),
        }
    }
}

/// Waits until the run has `status` (polling; for states `wait_until_settled` stops at).
pub async fn wait_for_status(engine: &Engine, id: &str, status: runlens_engine::model::RunStatus) -> Run {
    for _ in 0..2000 {
        let run = engine.runs().get_run(id).await.unwrap();
        if run.status == status {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never became {status}");
}

struct BigResult;

#[async_trait]
impl Tool for BigResult {
    fn name(&self) -> &str {
        "big_result"
    }
    fn description(&self) -> &str {
        "Returns a large result."
    }
    fn schema(&self) -> Value {
        json!({"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]})
    }
    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let n = args["chars"].as_u64().unwrap_or(0) as usize;
        Ok(json!({ "data": "x".repeat(n) }))
    }
}

/// A decider for approvals: a user named `name`.
pub fn by(name: &str) -> runlens_engine::model::Actor {
    runlens_engine::model::Actor { id: format!("user:{name}"), name: name.to_owned() }
}

/// An approver of the `default` project named `name` (an API key with the
/// approver role): only an approver's decision grants a call.
pub async fn approver(engine: &Engine, name: &str) -> runlens_engine::model::Actor {
    approver_in(engine, runlens_engine::model::DEFAULT_PROJECT, name).await
}

/// Approves the first call `run` waits on, as an approver named `name`, and
/// waits until the run settles again.
pub async fn approve_first(engine: &Engine, run: &Run, name: &str) -> Run {
    let call_id = &run.interruptions[0].call_id;
    let approver = approver(engine, name).await;
    let decision = runlens_engine::model::DecisionRequest::default();
    engine.approvals().approve(&run.id, call_id, decision, &approver).await.expect("approved");
    engine.runs().wait_until_settled(&run.id, SETTLE).await.expect("run settles")
}

/// An approver of `project` named `name` (see [`approver`]).
pub async fn approver_in(engine: &Engine, project: &str, name: &str) -> runlens_engine::model::Actor {
    let admin = runlens_engine::model::Actor::system();
    let (key, _) = engine
        .identity()
        .create_key(name, Some(project), runlens_engine::model::Role::Approver, &admin)
        .await
        .expect("an approver key");
    runlens_engine::key_actor(&key)
}
