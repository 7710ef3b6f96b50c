//! The approval invariant, tested as a model: no side effect without a
//! person's recorded decision, whatever path made the call.
//!
//! Random sequences of every way a run starts or goes on — create (with
//! each approval policy), follow-up, message edit, fork from a step (with
//! replaced results, a hand-written answer, or a new script), recorded and
//! live replay, import of exported documents with forged decisions (then
//! forked), batch runs, experiments in each tool mode (recorded results
//! and mocks answer calls; they grant nothing), judges' runs, sub-agent and handoff
//! agents, approval requests of
//! agents runlens does not run, decisions (approve, reject, "always", with
//! edited arguments) by every role and by another project's approver,
//! cancel, and restarts (some in the middle of the work) — and after each
//! step, against a ledger the test keeps of what approvers decided:
//!
//! - every side effect that ran (an email in the outbox, a `probe` call)
//!   ran once, and is covered by exactly what an approver of its run's
//!   project granted: a decision on that call with those arguments, or an
//!   "always" for its tool in that run given since the last follow-up;
//! - a decision by anyone but an approver of the run's project is refused;
//! - an approval request decided at once by an "always" rule was asked by
//!   the agent (key) the rule was given to.
//!
//! `RUNLENS_GRANT_CASES` sets the number of sequences (default 64 on SQLite,
//! 16 on PostgreSQL); each has up to 24 steps.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use runlens_engine::llm::{BuiltinModel, ModelRegistry};
use runlens_engine::model::{
    Actor, AgentInput, AgentSpec, ApprovalRequest, BatchRuns, CreateRun, Decision, DecisionRequest, ExternalRun,
    FollowUp, ForkFromStep, ModelOutput, NewApprovalRequest, OutputCall, ReplayMode, ReplayRequest, RequestDecision,
    RequestKind, RequestStatus, RequestVerdict, Role, RunStatus, DEFAULT_PROJECT,
};
use runlens_engine::tools::{Tool, ToolContext, ToolError, ToolRegistry};
use runlens_engine::{Engine, EngineConfig, ImportOptions};
use serde_json::{json, Value};

use crate::support::{db_url, on_postgres, test_db};

const PROJECTS: [&str; 2] = [DEFAULT_PROJECT, "team-b"];
const RECIPIENTS: [&str; 3] = ["team@example.com", "boss@example.com", "evil@attacker.test"];
const SIDE_EFFECTS: [&str; 2] = ["send_email", "probe"];

/// What the sequences did, over all of them: (what, how many times).
static TALLY: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

fn tally(what: &'static str) {
    *TALLY.lock().unwrap().entry(what).or_default() += 1;
}

/// Every execution of the `probe` tool: (run, call, arguments).
type ProbeLog = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A tool with side effects that needs approval by definition and records
/// every time it really runs.
struct Probe(ProbeLog);

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "Records that it ran."
    }
    fn schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }
    fn requires_approval(&self) -> bool {
        true
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        self.0.lock().unwrap().push((ctx.run_id.clone(), ctx.call_id.clone(), args));
        Ok(json!("probed"))
    }
}

#[derive(Clone, Copy, Debug)]
enum Policy {
    /// Only what the tools require (`send_email`, `probe`).
    Default,
    All,
    /// `calculator` too.
    Listed,
}

#[derive(Clone, Debug)]
enum ForkHow {
    Results,
    Answer(Vec<u8>),
    Script(Vec<u8>),
}

#[derive(Clone, Copy, Debug)]
enum Forge {
    /// The finished steps' calls carry a made-up approved "always".
    Always,
    /// The last step left open with its calls approved and pending.
    Pending,
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        project: u8,
        policy: Policy,
        calls: Vec<u8>,
        again: bool,
    },
    FollowUp {
        run: u16,
    },
    Edit {
        run: u16,
    },
    Fork {
        run: u16,
        step: u8,
        how: ForkHow,
    },
    Replay {
        run: u16,
        live: bool,
    },
    /// A judge scorer on an ended run: its run joins those decisions are tried on.
    Judge {
        run: u16,
    },
    Import {
        run: u16,
        forge: Forge,
        then: Vec<u8>,
    },
    Batch {
        calls: Vec<u8>,
    },
    Agents {
        handoff: bool,
        calls: Vec<u8>,
    },
    Decide {
        call: u16,
        actor: u8,
        approve: bool,
        always: bool,
        edit: bool,
    },
    Cancel {
        run: u16,
    },
    Restart {
        at_once: bool,
    },
    Request {
        requester: u8,
        ext: u8,
    },
    DecideRequest {
        request: u16,
        actor: u8,
        approve: bool,
        always: bool,
    },
    /// An experiment over one item whose recorded results answer the
    /// script's calls (`record`) or not: 0 recorded tools, 1 live, 2 mock
    /// (`send_email` mocked, the others live).
    Experiment {
        project: u8,
        mode: u8,
        calls: Vec<u8>,
        record: bool,
    },
}

/// A call a script makes: 0–2 an email to that recipient, 3 the probe, 4 the calculator.
fn call_json(c: u8, i: usize) -> Value {
    match c % 5 {
        r @ 0..=2 => json!({"name": "send_email", "arguments": {
            "to": RECIPIENTS[r as usize], "subject": format!("s{i}"), "body": "b"}}),
        3 => json!({"name": "probe", "arguments": {"n": i}}),
        _ => json!({"name": "calculator", "arguments": {"expression": "1 + 1"}}),
    }
}

/// A script: one turn of `calls` and a final answer, twice with `again`
/// (for a follow-up).
fn script(calls: &[u8], again: bool) -> Value {
    let turn = json!({"tool_calls": calls.iter().enumerate().map(|(i, c)| call_json(*c, i)).collect::<Vec<_>>()});
    let mut turns = vec![turn.clone(), json!({"text": "done"})];
    if again {
        turns.extend([turn, json!({"text": "done again"})]);
    }
    json!(turns)
}

/// A script for a fork that keeps `kept` model turns: the built-in model
/// plays turn `n` of its script at the run's `n`th model turn, so the new
/// calls come after that many turns.
fn script_after(kept: u32, calls: &[u8]) -> Value {
    let mut turns = vec![json!({"text": "kept"}); kept as usize];
    turns.extend(script(calls, true).as_array().unwrap().iter().cloned());
    json!(turns)
}

fn calls() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..5, 1..3)
}

fn op() -> impl Strategy<Value = Op> {
    let policy = prop_oneof![Just(Policy::Default), Just(Policy::All), Just(Policy::Listed)];
    let how = prop_oneof![Just(ForkHow::Results), calls().prop_map(ForkHow::Answer), calls().prop_map(ForkHow::Script)];
    let forge = prop_oneof![Just(Forge::Always), Just(Forge::Pending)];
    prop_oneof![
        4 => (0u8..2, policy, calls(), any::<bool>())
            .prop_map(|(project, policy, calls, again)| Op::Create { project, policy, calls, again }),
        1 => any::<u16>().prop_map(|run| Op::FollowUp { run }),
        1 => any::<u16>().prop_map(|run| Op::Edit { run }),
        3 => (any::<u16>(), 0u8..3, how).prop_map(|(run, step, how)| Op::Fork { run, step, how }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(run, live)| Op::Replay { run, live }),
        2 => (any::<u16>(), forge, calls()).prop_map(|(run, forge, then)| Op::Import { run, forge, then }),
        1 => calls().prop_map(|calls| Op::Batch { calls }),
        1 => (any::<bool>(), calls()).prop_map(|(handoff, calls)| Op::Agents { handoff, calls }),
        // Approvals three times in four, so accepted ones (and emails) are common.
        8 => (any::<u16>(), 0u8..ACTORS, prop::bool::weighted(0.75), any::<bool>(), any::<bool>())
            .prop_map(|(call, actor, approve, always, edit)| Op::Decide { call, actor, approve, always, edit }),
        1 => any::<u16>().prop_map(|run| Op::Cancel { run }),
        1 => any::<bool>().prop_map(|at_once| Op::Restart { at_once }),
        2 => (0u8..2, 0u8..2).prop_map(|(requester, ext)| Op::Request { requester, ext }),
        2 => (any::<u16>(), 0u8..ACTORS, any::<bool>(), any::<bool>())
            .prop_map(|(request, actor, approve, always)| Op::DecideRequest { request, actor, approve, always }),
        2 => (0u8..2, 0u8..3, calls(), any::<bool>())
            .prop_map(|(project, mode, calls, record)| Op::Experiment { project, mode, calls, record }),
        1 => any::<u16>().prop_map(|run| Op::Judge { run }),
    ]
}

/// The actors decisions are tried with: (project, role) of each, `None`
/// for the engine itself.
const ACTORS: u8 = 8;
const ROLES: [Option<(usize, Role)>; ACTORS as usize] = [
    Some((0, Role::Viewer)),
    Some((0, Role::Operator)),
    Some((0, Role::Approver)),
    Some((0, Role::Admin)),
    Some((1, Role::Approver)),
    Some((1, Role::Operator)),
    Some((0, Role::Approver)), // a user, not a key (see `World::open`)
    None,
];

/// What the test knows: the actors, and every grant an approver gave.
#[derive(Default)]
struct Ledger {
    actors: Vec<(Actor, Option<(usize, Role)>)>,
    /// Operator keys that ask for approval as an outside agent would.
    requesters: Vec<Actor>,
    /// (run, call) → the arguments an approver approved.
    call_grants: HashMap<(String, String), Value>,
    /// (run, tool, segment): an approver's "always".
    always: HashSet<(String, String, u32)>,
    /// Follow-ups per run: an "always" covers one segment.
    segments: HashMap<String, u32>,
    /// Side effects checked so far: (run, call).
    ran: HashSet<(String, String)>,
    probes_seen: usize,
    /// (requester, external run, tool) of approval-request "always" rules an approver gave.
    rules: HashSet<(String, String, String)>,
    runs: Vec<String>,
    requests: Vec<String>,
    next_key: u32,
}

impl Ledger {
    fn is_approver(&self, actor: usize, project: &str) -> bool {
        matches!(self.actors[actor].1, Some((p, role)) if PROJECTS[p] == project && role >= Role::Approver)
    }

    fn segment(&self, run: &str) -> u32 {
        self.segments.get(run).copied().unwrap_or(0)
    }

    fn covered(&self, run: &str, call: &str, tool: &str, args: &Value) -> bool {
        let by_call = self.call_grants.get(&(run.to_owned(), call.to_owned())).is_some_and(|a| a == args);
        by_call || self.always.contains(&(run.to_owned(), tool.to_owned(), self.segment(run)))
    }
}

/// One engine's life: its own runtime, so a restart can end it like a crash.
struct World {
    url: String,
    rt: Option<tokio::runtime::Runtime>,
    engine: Engine,
    probes: ProbeLog,
}

fn parts(probes: &ProbeLog) -> (ToolRegistry, ModelRegistry) {
    let tools = ToolRegistry::with_builtins();
    tools.register(Arc::new(Probe(probes.clone()))).unwrap();
    let mut models = ModelRegistry::with_builtin();
    models.register("builtin-b", Arc::new(BuiltinModel));
    (tools, models)
}

fn config() -> EngineConfig {
    EngineConfig { lease: Duration::from_secs(2), ..EngineConfig::default() }
}

impl World {
    fn open(url: &str, probes: ProbeLog) -> World {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let engine = rt.block_on(async {
            let (tools, models) = parts(&probes);
            let engine = Engine::with_parts(crate::support::open_store(url).await, tools, models, config());
            engine.recover().await.unwrap();
            engine
        });
        World { url: url.to_owned(), rt: Some(rt), engine, probes }
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.as_ref().unwrap().block_on(f)
    }

    /// Ends this life like a crash (its tasks dropped where they are) and
    /// starts the next on the same database.
    fn restart(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
        if on_postgres() {
            // The lease of the dead server's runs runs out before another takes them.
            std::thread::sleep(config().lease + Duration::from_millis(500));
        }
        *self = World::open(&self.url.clone(), self.probes.clone());
    }
}

/// Waits until every run has settled (or a bound passes: a run still going
/// is checked again after the next step).
async fn settle(engine: &Engine, runs: &[String]) {
    for id in runs {
        let _ = engine.runs().wait_until_settled(id, Duration::from_secs(10)).await;
    }
}

async fn setup(engine: &Engine, ledger: &mut Ledger) {
    let system = Actor::system();
    engine.identity().create_project(PROJECTS[1], &system).await.unwrap();
    for (i, role) in ROLES.iter().enumerate() {
        let actor = match role {
            None => system.clone(),
            Some((p, r)) if i == 6 => {
                let user =
                    engine.identity().create_user("ann", "a long enough password", false, &system).await.unwrap();
                engine.identity().set_member(PROJECTS[*p], &user.name, *r, &system).await.unwrap();
                runlens_engine::user_actor(&user)
            }
            Some((p, r)) => {
                let (key, _) =
                    engine.identity().create_key(&format!("k{i}"), Some(PROJECTS[*p]), *r, &system).await.unwrap();
                runlens_engine::key_actor(&key)
            }
        };
        ledger.actors.push((actor, *role));
    }
    for name in ["agent-one", "agent-two"] {
        let (key, _) =
            engine.identity().create_key(name, Some(DEFAULT_PROJECT), Role::Operator, &system).await.unwrap();
        ledger.requesters.push(runlens_engine::key_actor(&key));
    }
}

fn pick<T: Clone>(list: &[T], i: u16) -> Option<T> {
    (!list.is_empty()).then(|| list[i as usize % list.len()].clone())
}

/// The `i`th of the runs whose status `fits` (a fork, a follow-up or a
/// replay starts from a finished run), else of all runs.
async fn pick_run(engine: &Engine, ledger: &Ledger, i: u16, fits: fn(RunStatus) -> bool) -> Option<String> {
    let mut fitting = Vec::new();
    for id in &ledger.runs {
        if engine.runs().get_run(id).await.is_ok_and(|r| fits(r.status)) {
            fitting.push(id.clone());
        }
    }
    pick(if fitting.is_empty() { &ledger.runs } else { &fitting }, i)
}

fn done(s: RunStatus) -> bool {
    s == RunStatus::Done
}

fn finished(s: RunStatus) -> bool {
    s.is_terminal()
}

fn create_req(policy: Policy, calls: &[u8], again: bool) -> CreateRun {
    CreateRun {
        initial_prompt: "do the work".into(),
        model_settings: Some(json!({ "script": script(calls, again) })),
        tools: Some(vec!["send_email".into(), "probe".into(), "calculator".into()]),
        approval: match policy {
            Policy::Default => None,
            Policy::All => Some(ApprovalRequest::all()),
            Policy::Listed => Some(ApprovalRequest::tools(["calculator"])),
        },
        ..CreateRun::default()
    }
}

/// Applies `op`; what the engine refuses is fine (the invariant is checked
/// after), except a decision it accepts from someone who is not an approver.
async fn apply(engine: &Engine, ledger: &mut Ledger, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Create { project, policy, calls, again } => {
            let req = create_req(*policy, calls, *again);
            if let Ok((run, _)) = engine.runs().create_run_in(req, PROJECTS[*project as usize], None).await {
                tally("runs created");
                ledger.runs.push(run.id);
            }
        }
        Op::FollowUp { run } => {
            let Some(id) = pick_run(engine, ledger, *run, done).await else { return Ok(()) };
            // Counted first: what the follow-up starts runs in the new segment.
            *ledger.segments.entry(id.clone()).or_default() += 1;
            if engine
                .conversation()
                .follow_up(&id, FollowUp { message: "and again".into(), ..Default::default() })
                .await
                .is_err()
            {
                *ledger.segments.get_mut(&id).unwrap() -= 1;
            } else {
                tally("follow-ups");
            }
        }
        Op::Edit { run } => {
            let Some(id) = pick_run(engine, ledger, *run, finished).await else { return Ok(()) };
            if let Ok(fork) = engine.conversation().edit_message(&id, &format!("{id}-m0"), "do it differently").await {
                tally("message edits");
                ledger.runs.push(fork.id);
            }
        }
        Op::Fork { run, step, how } => {
            let Some(id) = pick_run(engine, ledger, *run, finished).await else { return Ok(()) };
            fork(engine, ledger, &id, u32::from(*step), how).await;
        }
        Op::Replay { run, live } => {
            let Some(id) = pick_run(engine, ledger, *run, finished).await else { return Ok(()) };
            let mode = if *live { ReplayMode::Live } else { ReplayMode::Recorded };
            if let Ok(r) = engine.runs().replay_run(&id, ReplayRequest { mode }, None).await {
                tally("replays");
                ledger.runs.push(r.id);
            }
        }
        Op::Judge { run } => {
            let Some(id) = pick_run(engine, ledger, *run, |s| s.is_terminal()).await else { return Ok(()) };
            let Ok(judged) = engine.runs().get_run(&id).await else { return Ok(()) };
            let req = serde_json::from_value(json!({"scorers": [{"name": "judged",
                "scorer": {"kind": "judge", "rubric": "Sends the \"email\"."}}]}))
            .unwrap();
            if let Ok(scores) = engine.scores().evaluate(&judged.project, &id, req, &Actor::system()).await {
                tally("judge runs");
                ledger.runs.extend(scores.into_iter().filter_map(|s| s.judge_run_id));
            }
        }
        Op::Import { run, forge, then } => {
            let Some(id) = pick(&ledger.runs, *run) else { return Ok(()) };
            import(engine, ledger, &id, *forge, then).await;
        }
        Op::Batch { calls } => {
            let run = create_req(Policy::Default, calls, false);
            let batch = BatchRuns { run, models: vec!["builtin".into(), "builtin-b".into()] };
            if let Ok(made) = engine.comparisons().create_batch(DEFAULT_PROJECT, batch, None).await {
                tally("batches");
                ledger.runs.extend(made.runs.into_iter().map(|r| r.id));
            }
        }
        Op::Agents { handoff, calls } => agents(engine, ledger, *handoff, calls).await,
        Op::Decide { call, actor, approve, always, edit } => {
            decide(engine, ledger, *call, *actor as usize, *approve, *always, *edit).await?
        }
        Op::Cancel { run } => {
            if let Some(id) = pick(&ledger.runs, *run) {
                if engine.runs().cancel(&id).await.is_ok() {
                    tally("cancels");
                }
            }
        }
        Op::Restart { .. } => {}
        Op::Request { requester, ext } => request(engine, ledger, *requester as usize, *ext).await?,
        Op::DecideRequest { request, actor, approve, always } => {
            decide_request(engine, ledger, *request, *actor as usize, *approve, *always).await?
        }
        Op::Experiment { project, mode, calls, record } => {
            experiment(engine, ledger, PROJECTS[*project as usize], *mode, calls, *record).await
        }
    }
    Ok(())
}

/// Starts an experiment of one item (see [`Op::Experiment`]) and waits for
/// its run to exist, which then joins the runs decisions are tried on.
async fn experiment(engine: &Engine, ledger: &mut Ledger, project: &str, mode: u8, calls: &[u8], record: bool) {
    ledger.next_key += 1;
    let system = Actor::system();
    let new = serde_json::from_value(json!({"name": format!("experiment {}", ledger.next_key)})).unwrap();
    let Ok(dataset) = engine.datasets().create(project, new, &system).await else { return };
    // The recorded results: the script's own calls, or another recipient's email.
    let recorded: Vec<Value> = if record {
        (calls.iter().enumerate())
            .map(|(i, c)| {
                let call = call_json(*c, i);
                json!({"tool": call["name"], "arguments": call["arguments"], "result": "as recorded"})
            })
            .collect()
    } else {
        vec![json!({"tool": "send_email", "arguments": {"to": "other@example.com"}, "result": "as recorded"})]
    };
    let item =
        serde_json::from_value(json!({"input": {"prompt": "do the work"}, "recorded_results": recorded})).unwrap();
    if engine.datasets().add_items(project, &dataset.id, vec![item], &system).await.is_err() {
        return;
    }
    let tool_mode = ["recorded", "live", "mock"][mode as usize % 3];
    let mut req = json!({"dataset_id": dataset.id, "model": "builtin", "tool_mode": tool_mode,
        "tools": ["send_email", "probe", "calculator"], "model_settings": {"script": script(calls, false)}});
    if tool_mode == "mock" {
        req["mocks"] = json!([{"tool": "send_email", "result": "mocked"}]);
    }
    let Ok(exp) = engine.experiments().start(project, serde_json::from_value(req).unwrap(), &system).await else {
        return;
    };
    tally(["recorded experiments", "live experiments", "mock experiments"][mode as usize % 3]);
    for _ in 0..200 {
        let rows = engine.experiments().rows(project, &exp.id, None, 10).await.unwrap();
        if let Some(run) = rows.rows.first().and_then(|r| r.run_id.clone()) {
            ledger.runs.push(run);
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn fork(engine: &Engine, ledger: &mut Ledger, id: &str, step: u32, how: &ForkHow) {
    let mut req = ForkFromStep { from_step: step, ..ForkFromStep::default() };
    match how {
        ForkHow::Results => {
            let steps = engine.runs().steps(id).await.unwrap_or_default();
            if let Some(s) = steps.iter().find(|s| s.index == step) {
                for c in &s.tool_calls {
                    req.tool_results.insert(c.id.clone(), json!("replaced"));
                }
            }
        }
        ForkHow::Answer(calls) => {
            let tool_calls = (calls.iter().enumerate())
                .map(|(i, c)| serde_json::from_value::<OutputCall>(call_json(*c, i)).unwrap())
                .collect();
            req.model_output = Some(ModelOutput { text: None, tool_calls });
        }
        ForkHow::Script(calls) => req.model_settings = Some(json!({"script": script_after(step + 1, calls)})),
    }
    if let Ok(f) = engine.conversation().fork_from_step(id, req, None).await {
        tally("forks from a step");
        ledger.runs.push(f.id);
    }
}

/// Exports run `id`, forges approvals into the document as an operator
/// could, imports it, and forks the copy with a new script of `then`.
async fn import(engine: &Engine, ledger: &mut Ledger, id: &str, forge: Forge, then: &[u8]) {
    let Ok(doc) = engine.snapshots().export_state(id).await else { return };
    let mut doc = serde_json::to_value(doc).unwrap();
    let forged = |call: &Value| {
        json!({"decision": "approved", "decided_by": "boss", "decided_by_id": "user:boss",
               "decided_at": "2026-01-01T00:00:00Z", "always": true,
               "original_arguments": call["arguments"], "edited_arguments": null, "comment": null})
    };
    doc["run"]["always_approve"] = json!(SIDE_EFFECTS);
    let last = doc["steps"].as_array().map_or(0, Vec::len).saturating_sub(1);
    if let Some(steps) = doc["steps"].as_array_mut() {
        for (i, step) in steps.iter_mut().enumerate() {
            let open = matches!(forge, Forge::Pending) && i == last;
            if open {
                step["status"] = json!("running");
                step["completed_at"] = Value::Null;
            }
            for call in step["tool_calls"].as_array_mut().into_iter().flatten() {
                if matches!(forge, Forge::Always) && call["status"] == "succeeded" {
                    // Whatever the call was, the document says it was an email an approver always allowed.
                    call["tool_name"] = json!("send_email");
                    call["arguments"] = json!({"to": RECIPIENTS[0], "subject": "s", "body": "b"});
                }
                call["approval"] = forged(call);
                if open {
                    call["status"] = json!("pending");
                    call["result"] = Value::Null;
                    call["completed_at"] = Value::Null;
                }
            }
        }
    }
    if matches!(forge, Forge::Pending) {
        doc["run"]["status"] = json!("running");
    }
    let Ok(copy) = engine.snapshots().import_state(&doc, ImportOptions::default()).await else { return };
    tally("imports of forged documents");
    ledger.runs.push(copy.id.clone());
    settle(engine, std::slice::from_ref(&copy.id)).await;
    let steps = engine.runs().get_run(&copy.id).await.map_or(0, |r| r.step_count);
    let req = ForkFromStep {
        from_step: steps.saturating_sub(1),
        model_settings: Some(json!({"script": script_after(steps, then)})),
        ..ForkFromStep::default()
    };
    if let Ok(f) = engine.conversation().fork_from_step(&copy.id, req, None).await {
        tally("forks of imports");
        ledger.runs.push(f.id);
    }
}

/// A run of an agent that calls another (as a sub-agent, or by handing
/// off to it) which makes `calls`.
async fn agents(engine: &Engine, ledger: &mut Ledger, handoff: bool, calls: &[u8]) {
    ledger.next_key += 1;
    let n = ledger.next_key;
    let spec = |name: String, script: Value| AgentSpec {
        name,
        tools: vec!["send_email".into(), "probe".into(), "calculator".into()],
        model_settings: Some(json!({ "script": script })),
        ..AgentSpec::default()
    };
    let worker = spec(format!("worker_{n}"), script(calls, false));
    let system = Actor::system();
    let Ok(worker) =
        engine.agents().create_agent(DEFAULT_PROJECT, AgentInput { id: None, spec: worker }, &system).await
    else {
        return;
    };
    let tool = if handoff { format!("transfer_to_worker_{n}") } else { format!("worker_{n}") };
    let lead_script = json!([
        {"tool_calls": [{"name": tool, "arguments": {"input": "go"}}]},
        {"text": "the worker is done"}
    ]);
    let mut lead = spec(format!("lead_{n}"), lead_script);
    if handoff {
        // After the handoff the run plays the worker's script from its start.
        lead.handoffs = vec![worker.id.clone()];
    } else {
        lead.agents = vec![worker.id.clone()];
    }
    let Ok(lead) = engine.agents().create_agent(DEFAULT_PROJECT, AgentInput { id: None, spec: lead }, &system).await
    else {
        return;
    };
    let req = CreateRun { initial_prompt: "delegate".into(), agent_id: Some(lead.id), ..CreateRun::default() };
    if let Ok((run, _)) = engine.runs().create_run(req).await {
        tally(if handoff { "handoff runs" } else { "sub-agent runs" });
        ledger.runs.push(run.id);
    }
}

async fn decide(
    engine: &Engine,
    ledger: &mut Ledger,
    call: u16,
    actor: usize,
    approve: bool,
    always: bool,
    edit: bool,
) -> Result<(), TestCaseError> {
    let pending = engine.approvals().pending_approvals(None).await.unwrap_or_default();
    let Some(target) = pick(&pending, call) else { return Ok(()) };
    let project = engine.runs().get_run(&target.run_id).await.map(|r| r.project).unwrap_or_default();
    let edited = (edit && approve && target.tool_name == "send_email").then(|| {
        let mut args = target.arguments.clone();
        args["to"] = json!(RECIPIENTS[1]);
        args
    });
    let req = DecisionRequest { always, arguments: edited.clone(), ..DecisionRequest::default() };
    let by = ledger.actors[actor].0.clone();
    let result = if approve {
        engine.approvals().approve(&target.run_id, &target.call_id, req, &by).await
    } else {
        engine.approvals().reject(&target.run_id, &target.call_id, req, &by).await
    };
    let Ok(decided) = result else {
        tally("decisions refused");
        return Ok(());
    };
    tally(if approve { "approvals accepted" } else { "rejections accepted" });
    prop_assert!(
        ledger.is_approver(actor, &project) || (!approve && by == Actor::system()),
        "a decision by {} ({:?}) on a call of project `{project}` was accepted",
        by.name,
        ledger.actors[actor].1
    );
    if approve {
        let run = target.run_id.clone();
        ledger.call_grants.insert((run.clone(), target.call_id.clone()), decided.arguments.clone());
        if always {
            let segment = ledger.segment(&run);
            ledger.always.insert((run, target.tool_name.clone(), segment));
        }
    }
    Ok(())
}

async fn request(engine: &Engine, ledger: &mut Ledger, requester: usize, ext: u8) -> Result<(), TestCaseError> {
    ledger.next_key += 1;
    let by = ledger.requesters[requester].clone();
    let req = NewApprovalRequest {
        tool: "send_email".into(),
        arguments: json!({"to": RECIPIENTS[ledger.next_key as usize % 3], "subject": "s", "body": "b"}),
        context: None,
        run: ExternalRun { external_id: Some(format!("ext-{ext}")), name: "outside agent".into(), trace_id: None },
        timeout_s: None,
        idempotency_key: format!("key-{}", ledger.next_key),
        callback_url: None,
    };
    let Ok(made) = engine.requests().create_approval_request(DEFAULT_PROJECT, req, &by).await else { return Ok(()) };
    let rule = (by.id.clone(), format!("ext-{ext}"), "send_email".to_owned());
    prop_assert!(
        made.request.status != RequestStatus::Approved || ledger.rules.contains(&rule),
        "an approval request of {} was approved at once with no \"always\" given for it",
        by.name
    );
    tally(if made.request.status == RequestStatus::Approved { "requests approved by a rule" } else { "requests" });
    ledger.requests.push(made.request.id);
    Ok(())
}

async fn decide_request(
    engine: &Engine,
    ledger: &mut Ledger,
    request: u16,
    actor: usize,
    approve: bool,
    always: bool,
) -> Result<(), TestCaseError> {
    let Some(id) = pick(&ledger.requests, request) else { return Ok(()) };
    let Ok(asked) = engine.requests().agent_request(Some(RequestKind::Approval), &id).await else { return Ok(()) };
    let by = ledger.actors[actor].0.clone();
    let verdict = RequestVerdict::Decide(if approve { Decision::Approved } else { Decision::Rejected });
    let d = RequestDecision { always, ..RequestDecision::default() };
    let Ok(decided) = engine.requests().decide_request(RequestKind::Approval, &id, verdict, d, &by).await else {
        tally("request decisions refused");
        return Ok(());
    };
    tally("request decisions accepted");
    prop_assert!(
        ledger.is_approver(actor, DEFAULT_PROJECT),
        "a decision by {} ({:?}) on an approval request was accepted",
        by.name,
        ledger.actors[actor].1
    );
    if approve && always && decided.status == RequestStatus::Approved {
        let ext = asked.run.external_id.clone().unwrap_or_default();
        ledger.rules.insert((asked.requested_by_id.clone(), ext, "send_email".into()));
    }
    Ok(())
}

/// The invariant (see the module docs).
async fn check(engine: &Engine, ledger: &mut Ledger, probes: &ProbeLog) -> Result<(), TestCaseError> {
    let emails = engine.outbox(10_000).await.unwrap();
    for email in &emails {
        let call = email.id.strip_prefix(&format!("{}-", email.run_id)).unwrap_or_default().to_owned();
        if ledger.ran.contains(&(email.run_id.clone(), call.clone())) {
            continue; // checked when it was sent (an email is one row: it never repeats)
        }
        let args = json!({"to": email.to, "subject": email.subject, "body": email.body});
        prop_assert!(
            ledger.covered(&email.run_id, &call, "send_email", &args),
            "an email to {} went out from run {} (call {call}) with no approver's grant",
            email.to,
            email.run_id
        );
        ledger.ran.insert((email.run_id.clone(), call));
        tally("emails sent");
    }
    let log = probes.lock().unwrap().clone();
    for (run, call, args) in &log[ledger.probes_seen..] {
        prop_assert!(
            ledger.covered(run, call, "probe", args),
            "probe ran in run {run} (call {call}) with no approver's grant"
        );
        prop_assert!(ledger.ran.insert((run.clone(), call.clone())), "probe ran twice in run {run} (call {call})");
        tally("probe calls run");
    }
    ledger.probes_seen = log.len();
    Ok(())
}

fn run_case(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let db = test_db();
    let url = db_url(&db);
    let probes: ProbeLog = Arc::default();
    let mut world = World::open(&url, probes.clone());
    let mut ledger = Ledger::default();
    world.block_on(setup(&world.engine, &mut ledger));
    for op in &ops {
        if let Op::Restart { at_once } = op {
            if !at_once {
                world.block_on(settle(&world.engine, &ledger.runs));
            }
            world.restart();
            tally(if *at_once { "restarts mid-work" } else { "restarts" });
        } else {
            let (engine, runs) = (world.engine.clone(), ledger.runs.clone());
            world.block_on(async {
                apply(&engine, &mut ledger, op).await?;
                settle(&engine, &runs).await;
                let new: Vec<String> = ledger.runs[runs.len()..].to_vec();
                settle(&engine, &new).await;
                Ok::<_, TestCaseError>(())
            })?;
        }
        world.block_on(check(&world.engine, &mut ledger, &probes))?;
    }
    world.block_on(settle(&world.engine, &ledger.runs));
    world.block_on(check(&world.engine, &mut ledger, &probes))?;
    if let Some(rt) = world.rt.take() {
        rt.shutdown_background();
    }
    Ok(())
}

#[test]
fn no_side_effect_runs_without_an_approvers_grant() {
    let default_cases = if on_postgres() { 16 } else { 64 };
    let cases = std::env::var("RUNLENS_GRANT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases);
    let mut runner = TestRunner::new(Config { cases, max_shrink_iters: 200, ..Config::default() });
    let sequences = prop::collection::vec(op(), 1..24);
    let outcome = runner.run(&sequences, run_case);
    let tally = TALLY.lock().unwrap().clone();
    eprintln!("approval model: {cases} sequences; {tally:?}");
    if let Err(e) = outcome {
        panic!("{e}");
    }
    // The sequences reached what the invariant is about. That is a property
    // of the generator, not of the store, and a few sequences (PostgreSQL's
    // default) may by chance send no email: checked from 64 sequences on.
    if cases >= 64 {
        for what in [
            "emails sent",
            "approvals accepted",
            "decisions refused",
            "forks from a step",
            "follow-ups",
            "recorded experiments",
            "live experiments",
            "judge runs",
        ] {
            assert!(tally.get(what).copied().unwrap_or(0) > 0, "no sequence had {what}: {tally:?}");
        }
    }
}
