//! Server functions of the live trace page: a window of a run that stays small
//! however long the run is, and single tool calls in full.
//!
//! A run of up to [`ALL_STEPS_UP_TO`] steps comes whole. A longer one comes a
//! page of [`STEP_PAGE`] steps at a time (read through the `(run_id, index)`
//! key), with long payloads cut to a preview that the page loads in full when
//! the node is expanded, and without its transcript, whose latest
//! [`MESSAGE_TAIL`] messages the page loads once it is up. With the window come the price table (for costs) and the event
//! `seq` the page's live stream starts after.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::cost::Pricing;
use runlens_engine::model::{Message, ModelCall, Role, Run, SpanNode, Step, ToolCall};
use serde::{Deserialize, Serialize};

/// Runs with at most this many steps show them all on one page.
pub const ALL_STEPS_UP_TO: u32 = 100;
/// Steps per page of a longer run.
pub const STEP_PAGE: u32 = 50;
/// Messages of a long transcript shown: its latest.
pub const MESSAGE_TAIL: usize = 100;

/// What the trace page shows of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveTrace {
    pub run: Run,
    /// All steps of a short run, else one page of them (see [`Self::paged`]).
    pub steps: Vec<Step>,
    /// The run's latest step when the page shown does not hold it (the
    /// approvals area and the live step need it).
    pub latest_step: Option<Step>,
    /// The whole transcript of a short run; empty for a paged run, whose
    /// latest messages the page loads after it is up ([`get_transcript_tail`]).
    pub messages: Vec<Message>,
    pub message_total: usize,
    pub pricing: Pricing,
    /// Tool calls whose payloads were cut to a preview.
    pub cut_calls: Vec<String>,
    /// The event `seq` the live stream starts after: the latest one, or just
    /// before the step being streamed, so a reload shows all of its text.
    pub stream_after: u64,
    /// The server's clock when this was read.
    pub now: DateTime<Utc>,
    /// The caller's role in the run's project: a viewer sees no buttons.
    pub role: Option<Role>,
    /// The runs around this one in its tree of agent calls (`None` for a
    /// run outside any tree that runs no saved agent).
    pub tree: Option<super::run_tree::RunTree>,
    /// For a run recorded from OpenTelemetry spans: its spans that are not
    /// model or tool spans (at most [`MAX_SHOWN_SPANS`]), shown as "Other spans".
    #[serde(default)]
    pub spans: Vec<SpanNode>,
}

/// Generic spans of a recorded run the trace page shows.
pub const MAX_SHOWN_SPANS: usize = 500;

impl LiveTrace {
    /// Whether the steps come a page at a time.
    pub fn paged(&self) -> bool {
        is_paged(self.run.step_count)
    }

    /// Index of the first step shown.
    pub fn steps_from(&self) -> u32 {
        self.steps.first().map_or(0, |s| s.index)
    }

    /// The latest step, whether or not it is on the page shown.
    pub fn latest(&self) -> Option<&Step> {
        self.latest_step.as_ref().or(self.steps.last())
    }

    /// A step's cost in USD at today's prices (`None`: the model has no price).
    pub fn step_cost(&self, step: &Step) -> Option<f64> {
        self.pricing.step_cost_usd(&self.run.model, step)
    }

    /// Whether the caller has at least `need` in the run's project.
    pub fn may(&self, need: Role) -> bool {
        self.role.is_some_and(|r| r >= need)
    }
}

pub fn is_paged(step_count: u32) -> bool {
    step_count > ALL_STEPS_UP_TO
}

/// The first step of the page holding step `step`.
pub fn page_start(step: u32) -> u32 {
    step - step % STEP_PAGE
}

/// The page to show when the URL names none: the first one of a finished
/// run, the latest one of a run still going (that is where things happen).
pub fn default_from(run: &Run) -> u32 {
    match run.status.is_terminal() {
        true => 0,
        false => page_start(run.step_count.saturating_sub(1)),
    }
}

/// Cuts a run's long `model_settings` (a scripted run carries its whole
/// script there) to a preview: no page shows them, and a 10,000-step
/// script would weigh a megabyte in every page that lists the run.
#[cfg(feature = "ssr")]
pub fn light_run(run: &mut Run) {
    if let Some(p) = runlens_engine::paging::preview(&run.model_settings) {
        run.model_settings = serde_json::Value::String(p);
    }
}

/// The trace page's view of run `id`, at the page holding step `from` (the
/// default page without it); `Ok(None)` when there is no such run.
#[server]
pub async fn get_live_trace(id: String, from: Option<u32>) -> Result<Option<LiveTrace>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, caller, head)) = super::ssr::run_or_none(&id, Role::Viewer).await? else {
        return Ok(None);
    };
    // The seq is read before the state: events in between are applied twice
    // at worst, which is harmless (see `Engine::last_event_seq`).
    let last_seq = match engine.traces().last_event_seq(&id).await {
        Ok(seq) => seq,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let mut run = engine.runs().get_run(&id).await.map_err(super::ssr::to_server_error)?;
    light_run(&mut run);
    let stream_after = match run.status.is_terminal() {
        true => last_seq,
        false => ssr::stream_start(&engine, &id, last_seq).await,
    };
    let tree = super::run_tree::ssr::load(&engine, &head.project, &run);
    let window = ssr::window(&engine, run.clone(), from, stream_after);
    let (mut view, tree) = tokio::try_join!(window, tree).map_err(super::ssr::to_server_error)?;
    view.role = caller.role_in(&head.project);
    view.tree = tree;
    Ok(Some(view))
}

/// The latest [`MESSAGE_TAIL`] messages of run `run_id`'s transcript and
/// how many it has.
#[server]
pub async fn get_transcript_tail(run_id: String) -> Result<(Vec<Message>, usize), ServerFnError> {
    let (engine, _, _) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    let (messages, total) =
        engine.traces().messages_tail(&run_id, MESSAGE_TAIL as u32).await.map_err(super::ssr::to_server_error)?;
    Ok((messages, total as usize))
}

/// The messages a model call's detail shows at most (the latest of those
/// sent; the transcript has the rest).
pub const MODEL_CALL_MESSAGES: u32 = 200;

/// Step `index`'s model call in full: the messages as sent, the tools
/// offered, and the provider's request and response bodies (loaded when a
/// step's "Model call" is unfolded).
#[server]
pub async fn get_model_call(run_id: String, index: u32) -> Result<ModelCall, ServerFnError> {
    let (engine, _, _) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    (engine.traces().model_call(&run_id, index, MODEL_CALL_MESSAGES).await).map_err(super::ssr::to_server_error)
}

/// One tool call with its full payloads (for a node whose preview was cut).
#[server]
pub async fn get_tool_call(run_id: String, call_id: String) -> Result<ToolCall, ServerFnError> {
    let (engine, _, _) = super::ssr::for_run(&run_id, super::ssr::Role::Viewer).await?;
    engine.traces().tool_call(&run_id, &call_id).await.map_err(super::ssr::to_server_error)
}

#[cfg(feature = "ssr")]
mod ssr {
    use chrono::Utc;
    use runlens_engine::events::EventKind;
    use runlens_engine::model::{Run, Step};
    use runlens_engine::paging::{preview, preview_text};
    use runlens_engine::{Engine, EngineError};
    use serde_json::Value;

    use super::{default_from, is_paged, page_start, LiveTrace, ALL_STEPS_UP_TO, STEP_PAGE};

    /// Events read per query while looking back for the step being streamed.
    const LOOK_BACK: u64 = 1000;

    pub async fn window(
        engine: &Engine,
        run: Run,
        from: Option<u32>,
        stream_after: u64,
    ) -> Result<LiveTrace, EngineError> {
        let id = run.id.clone();
        let paged = is_paged(run.step_count);
        let (from, limit) = match paged {
            false => (0, ALL_STEPS_UP_TO),
            true => (page_start(from.unwrap_or_else(|| default_from(&run)).min(run.step_count - 1)), STEP_PAGE),
        };
        let started = std::time::Instant::now();
        // A long run's transcript is not read here (see `get_transcript_tail`).
        let messages = async {
            match paged {
                true => Ok(Vec::new()),
                false => engine.runs().messages(&id).await,
            }
        };
        let (page, messages, pricing, mut spans) = tokio::try_join!(
            engine.traces().steps_page(&id, from, limit),
            messages,
            engine.traces().pricing(&run.project),
            engine.otel().run_spans(&run)
        )?;
        spans.truncate(super::MAX_SHOWN_SPANS);
        let mut steps = page.steps;
        let last_index = run.step_count.saturating_sub(1);
        let latest_step = match steps.last() {
            Some(s) if s.index < last_index => engine.traces().steps_page(&id, last_index, 1).await?.steps.pop(),
            _ => None,
        };
        let mut cut_calls = Vec::new();
        if paged {
            steps.iter_mut().for_each(|s| lighten(s, &mut cut_calls));
        }
        tracing::debug!(run = %id, from, steps = steps.len(), ms = started.elapsed().as_secs_f64() * 1000.0, "read a trace window");
        let message_total = messages.len();
        Ok(LiveTrace {
            run,
            steps,
            latest_step,
            messages,
            message_total,
            pricing,
            cut_calls,
            stream_after,
            now: Utc::now(),
            role: None,
            tree: None,
            spans,
        })
    }

    /// Where a live stream starts: just before the latest `step.started`
    /// that no `step.completed` followed (its text is being streamed), so a
    /// reloaded page shows the whole text; else after `last`. It looks back
    /// a page of events at a time, as far as the step's start: an answer of
    /// any number of streamed pieces is replayed whole. Likewise a step
    /// whose model answered (`step.completed` with its calls planned) and
    /// whose calls are running: a call without side effects is stored only
    /// with its step, so the stream starts after that `step.completed` and
    /// replays the calls' updates (the page lays them over what it read).
    pub async fn stream_start(engine: &Engine, id: &str, last: u64) -> u64 {
        let mut calls_since = false;
        let mut end = last;
        while end > 0 {
            let from = end.saturating_sub(LOOK_BACK);
            let Ok(events) = engine.store().events_after(id, from, (end - from) as u32).await else {
                return last;
            };
            for e in events.iter().rev().filter(|e| e.seq <= end) {
                match &e.kind {
                    EventKind::StepStarted { .. } => return e.seq - 1,
                    EventKind::ToolCallUpdated { .. } => calls_since = true,
                    EventKind::StepCompleted { .. } if calls_since => return e.seq,
                    EventKind::StepCompleted { .. } | EventKind::RunFinished { .. } => return last,
                    _ => {}
                }
            }
            end = from;
        }
        last
    }

    /// Cuts a step's long payloads to previews; notes the calls it cut.
    fn lighten(step: &mut Step, cut_calls: &mut Vec<String>) {
        let shorten = |v: &mut Value| match preview(v) {
            Some(p) => {
                *v = Value::String(p);
                true
            }
            None => false,
        };
        if let Some(answer) = step.response.answer_mut() {
            if let Some(p) = answer.text.as_deref().and_then(preview_text) {
                answer.text = Some(p);
            }
            if let Some(r) = answer.result.as_mut() {
                shorten(r);
            }
        }
        for call in &mut step.tool_calls {
            let mut cut = shorten(&mut call.arguments);
            if let Some(r) = call.result.as_mut() {
                cut |= shorten(r);
            }
            for text in [&mut call.reasoning, &mut call.error].into_iter().flatten() {
                if let Some(p) = preview_text(text) {
                    *text = p;
                    cut = true;
                }
            }
            if cut {
                cut_calls.push(call.id.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_hold_the_step_asked_for() {
        assert_eq!(page_start(0), 0);
        assert_eq!(page_start(49), 0);
        assert_eq!(page_start(9_876), 9_850);
        assert!(!is_paged(ALL_STEPS_UP_TO) && is_paged(ALL_STEPS_UP_TO + 1));
        let mut run: Run = serde_json::from_value(serde_json::json!({
            "id": "r", "name": "", "status": "running", "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 10, "agent_id": null, "result": null, "summary": null,
            "failure_reason": null, "usage": {}, "step_count": 230,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "started_at": null, "finished_at": null,
        }))
        .unwrap();
        assert_eq!(default_from(&run), 200, "an active run opens on its latest page");
        run.status = runlens_engine::model::RunStatus::Done;
        assert_eq!(default_from(&run), 0, "a finished one on its first");
    }
}
