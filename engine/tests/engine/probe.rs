//! A store that records which reads and writes the engine makes, and can
//! fault one kind of write: it wraps the real store (SQLite or PostgreSQL) and forwards
//! everything else unchanged, so the engine under test is the real one.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use runlens_engine::cost::ModelPrice;
use runlens_engine::error::{EngineError, Result};
use runlens_engine::events::Event;
use runlens_engine::model::{
    Email, FamilyMember, Interruption, Message, Run, RunFilter, RunPage, RunStatus, Step, StepOutline, ToolCall,
    ToolCallStatus,
};
use runlens_engine::store::recovery::{CallCursor, CallDeadline, RecoveryStore, RunCursor, Undecodable};
use runlens_engine::store::{
    AgentStore, ApprovalStore, Blob, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, Directory, EventStore,
    HistoryInsert, HistoryWrite, HttpToolStore, InboxFilter, PendingCalls, PriceStore, RunHead, RunOverrides, RunPatch,
    RunStore, SecretStore, StepStore, StepWrite, Store, WebhookStore,
};
use tokio::sync::Notify;

/// The faults a [`Probe`] can inject.
#[derive(Default)]
pub struct Faults {
    /// A move of a run to this status never returns (a crash while it is
    /// under way: the test then tears the runtime down).
    pub hang_transition_to: Option<RunStatus>,
    /// Recording a call as `running` fails.
    pub fail_running_record: bool,
    /// Storing several runs at once fails, with nothing stored.
    pub fail_insert_runs: bool,
    /// After an email is written, the write waits for `release`, having
    /// signalled `written` (a call whose side effect happened, not yet returned).
    pub email_gate: Option<(Arc<Notify>, Arc<Notify>)>,
}

pub struct Probe {
    inner: Arc<dyn Store>,
    faults: Faults,
    /// Each call, as `name` or `name(args)`.
    log: Mutex<Vec<String>>,
    /// Set once a faulted transition hangs.
    pub hung: Arc<Notify>,
}

impl Probe {
    pub fn new(inner: Arc<dyn Store>, faults: Faults) -> Self {
        Self { inner, faults, log: Mutex::default(), hung: Arc::new(Notify::new()) }
    }

    fn note(&self, call: impl Into<String>) {
        self.log.lock().unwrap().push(call.into());
    }

    /// The calls recorded since the last `take`.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl Store for Probe {
    fn directory(&self) -> &dyn Directory {
        self.inner.directory()
    }
    fn agents(&self) -> &dyn AgentStore {
        self.inner.agents()
    }
    fn webhooks(&self) -> &dyn WebhookStore {
        self.inner.webhooks()
    }
    fn http_tools(&self) -> &dyn HttpToolStore {
        self.inner.http_tools()
    }
    fn spans(&self) -> &dyn runlens_engine::store::SpanStore {
        self.inner.spans()
    }
    fn requests(&self) -> &dyn runlens_engine::store::RequestStore {
        self.inner.requests()
    }
    fn trees(&self) -> &dyn runlens_engine::store::TreeStore {
        self.inner.trees()
    }
    fn scores(&self) -> &dyn runlens_engine::store::ScoreStore {
        self.inner.scores()
    }
    fn datasets(&self) -> &dyn runlens_engine::store::DatasetStore {
        self.inner.datasets()
    }
    fn experiments(&self) -> &dyn runlens_engine::store::ExperimentStore {
        self.inner.experiments()
    }
    fn evaluators(&self) -> &dyn runlens_engine::store::EvaluatorStore {
        self.inner.evaluators()
    }
    fn reviews(&self) -> &dyn runlens_engine::store::ReviewStore {
        self.inner.reviews()
    }
}

#[async_trait]
impl runlens_engine::store::GrantStore for Probe {
    async fn grant_for(&self, run_id: &str, call_id: &str, tool: &str) -> Result<Option<runlens_engine::model::Grant>> {
        self.note("grant_for");
        self.inner.grant_for(run_id, call_id, tool).await
    }
    async fn grants(&self, run_id: &str) -> Result<Vec<runlens_engine::model::Grant>> {
        self.note("grants");
        self.inner.grants(run_id).await
    }
}

#[async_trait]
impl RunStore for Probe {
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool> {
        self.note("insert_run");
        self.inner.insert_run(run, first).await
    }
    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool> {
        self.note("insert_run_with_history");
        self.inner.insert_run_with_history(run, messages, steps).await
    }
    async fn insert_runs(&self, runs: &[(Run, Vec<Message>)]) -> Result<bool> {
        self.note("insert_runs");
        if self.faults.fail_insert_runs {
            return Err(EngineError::Internal("injected: storing the runs failed".into()));
        }
        self.inner.insert_runs(runs).await
    }
    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert> {
        self.note("insert_run_with_blobs");
        self.inner.insert_run_with_blobs(write).await
    }
    async fn get_run(&self, id: &str) -> Result<Option<Run>> {
        self.note("get_run");
        self.inner.get_run(id).await
    }
    async fn run_to_drive(&self, id: &str) -> Result<Option<std::result::Result<Run, String>>> {
        self.note("run_to_drive");
        self.inner.run_to_drive(id).await
    }
    async fn run_head(&self, id: &str) -> Result<Option<RunHead>> {
        self.note("run_head");
        self.inner.run_head(id).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<RunPage> {
        self.note("list_runs");
        self.inner.list_runs(filter).await
    }
    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>> {
        self.note("run_ids_with_status");
        self.inner.run_ids_with_status(status).await
    }
    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        self.note(format!("transition({to})"));
        if self.faults.hang_transition_to == Some(to) {
            self.hung.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.transition(id, from, to, patch).await
    }
    async fn follow_up(&self, run_id: &str, text: &str, overrides: &RunOverrides) -> Result<Option<(Run, Message)>> {
        self.note("follow_up");
        self.inner.follow_up(run_id, text, overrides).await
    }
    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>> {
        self.note("family");
        self.inner.family(run_id).await
    }
    async fn children(&self, id: &str) -> Result<Vec<Run>> {
        self.inner.children(id).await
    }
    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, runlens_engine::model::Usage)>> {
        self.inner.tree_sums(id).await
    }
    async fn group_runs(&self, group_id: &str, limit: u32) -> Result<Vec<Run>> {
        self.inner.group_runs(group_id, limit).await
    }
    async fn insert_blob(&self, blob: &Blob) -> Result<()> {
        self.note("insert_blob");
        self.inner.insert_blob(blob).await
    }
    async fn get_blob(&self, id: &str) -> Result<Option<Blob>> {
        self.note("get_blob");
        self.inner.get_blob(id).await
    }
    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>> {
        self.note("run_blobs");
        self.inner.run_blobs(run_id).await
    }
    async fn insert_email(&self, email: &Email) -> Result<()> {
        self.note("insert_email");
        self.inner.insert_email(email).await?;
        if let Some((written, release)) = &self.faults.email_gate {
            written.notify_one();
            release.notified().await;
        }
        Ok(())
    }
    async fn email(&self, id: &str) -> Result<Option<Email>> {
        self.note("email");
        self.inner.email(id).await
    }
    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>> {
        self.note("outbox");
        self.inner.outbox(limit, project).await
    }
}

#[async_trait]
impl StepStore for Probe {
    async fn save_step(&self, write: StepWrite<'_>) -> Result<()> {
        self.note("save_step");
        self.inner.save_step(write).await
    }
    async fn finish_step(&self, write: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        self.note(format!("finish_step({to})"));
        self.inner.finish_step(write, from, to, patch).await
    }
    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()> {
        self.note(format!("save_tool_call({})", call.status.as_str()));
        if self.faults.fail_running_record && call.status == ToolCallStatus::Running {
            return Err(EngineError::Store(sqlx::Error::Protocol("the disk is full".into())));
        }
        self.inner.save_tool_call(call, pos).await
    }
    async fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.note("steps");
        self.inner.steps(run_id).await
    }
    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        self.note(format!("steps_page({from},{limit})"));
        self.inner.steps_page(run_id, from, limit).await
    }
    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        self.note("step_outline");
        self.inner.step_outline(run_id).await
    }
    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        self.note("last_step_index");
        self.inner.last_step_index(run_id).await
    }
    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>> {
        self.note("tool_call");
        self.inner.tool_call(run_id, call_id).await
    }
    async fn messages(&self, run_id: &str) -> Result<Vec<Message>> {
        self.note("messages");
        self.inner.messages(run_id).await
    }
    async fn messages_page(&self, run_id: &str, from: u64, limit: u32) -> Result<Vec<Message>> {
        self.note(format!("messages_page({from},{limit})"));
        self.inner.messages_page(run_id, from, limit).await
    }
    async fn messages_tail(&self, run_id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        self.note(format!("messages_tail({n})"));
        self.inner.messages_tail(run_id, n).await
    }
    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        self.note("last_message_seq");
        self.inner.last_message_seq(run_id).await
    }
    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        self.note(format!("count_messages({kind})"));
        self.inner.count_messages(run_id, kind).await
    }
}

#[async_trait]
impl ApprovalStore for Probe {
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        self.note("decide");
        self.inner.decide(write).await
    }
    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>> {
        self.note("interruptions");
        self.inner.interruptions(run_id, project).await
    }
    async fn pending_inbox(&self, filter: &InboxFilter) -> Result<PendingCalls> {
        self.note("pending_inbox");
        self.inner.pending_inbox(filter).await
    }
    async fn pending_count(&self, project: &str) -> Result<u64> {
        self.note("pending_count");
        self.inner.pending_count(project).await
    }
    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>> {
        self.note("decisions");
        self.inner.decisions(project, before, offset, limit).await
    }
    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64> {
        self.note("cancel_awaiting");
        self.inner.cancel_awaiting(run_id).await
    }
}

#[async_trait]
impl SecretStore for Probe {
    async fn server_secret(&self, name: &str, fresh: &str) -> Result<String> {
        self.note("server_secret");
        self.inner.server_secret(name, fresh).await
    }
}

#[async_trait]
impl runlens_engine::store::RetentionStore for Probe {
    async fn retention(&self, project: &str) -> Result<runlens_engine::model::Retention> {
        self.inner.retention(project).await
    }
    async fn set_retention(&self, project: &str, policy: &runlens_engine::model::Retention) -> Result<bool> {
        self.inner.set_retention(project, policy).await
    }
    async fn retained_projects(&self) -> Result<Vec<(String, runlens_engine::model::Retention)>> {
        self.inner.retained_projects().await
    }
    async fn prune_runs(
        &self,
        project: &str,
        policy: &runlens_engine::model::Retention,
        now: chrono::DateTime<chrono::Utc>,
        batch: u32,
    ) -> Result<Vec<String>> {
        self.note("prune_runs");
        self.inner.prune_runs(project, policy, now, batch).await
    }
}

#[async_trait]
impl RecoveryStore for Probe {
    async fn call_deadlines(
        &self,
        after: Option<&CallCursor>,
        limit: u32,
    ) -> Result<(Vec<CallDeadline>, Option<CallCursor>)> {
        self.note("call_deadlines");
        self.inner.call_deadlines(after, limit).await
    }
    async fn paused_runs_awaiting_nothing(&self) -> Result<Vec<String>> {
        self.note("paused_runs_awaiting_nothing");
        self.inner.paused_runs_awaiting_nothing().await
    }
    async fn undecodable_paused_runs(
        &self,
        after: Option<&RunCursor>,
        limit: u32,
    ) -> Result<(Vec<Undecodable>, Option<RunCursor>)> {
        self.note("undecodable_paused_runs");
        self.inner.undecodable_paused_runs(after, limit).await
    }
    async fn overdue_calls(&self, now: chrono::DateTime<chrono::Utc>, limit: u32) -> Result<Vec<(String, String)>> {
        self.note("overdue_calls");
        self.inner.overdue_calls(now, limit).await
    }
}

#[async_trait]
impl EventStore for Probe {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        // Not noted: the event writer runs on its own schedule.
        self.inner.append_events(events).await
    }
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
        self.inner.events_after(run_id, after, limit).await
    }
    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>> {
        self.inner.last_event(run_id).await
    }
}

#[async_trait]
impl PriceStore for Probe {
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>> {
        self.inner.prices(project).await
    }
    async fn put_price(&self, project: &str, price: &ModelPrice) -> Result<()> {
        self.inner.put_price(project, price).await
    }
    async fn delete_price(&self, project: &str, model: &str) -> Result<bool> {
        self.inner.delete_price(project, model).await
    }
}
