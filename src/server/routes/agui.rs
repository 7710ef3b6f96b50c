//! AG-UI: `POST /api/agui` runs an agent for an AG-UI client
//! (`@ag-ui/client`'s `HttpAgent`, CopilotKit…) and streams what it does as
//! AG-UI events over Server-Sent Events (see `crate::server::agui`).
//!
//! The thread is a run of the current project, whose id is
//! `<project>~thread~<threadId>` (see `scoped_run_id`): a thread id is the
//! project's own, so the same `threadId` in another project is another
//! thread, and no client of another project can take it first.
//! - a new thread creates the run in the current project (the `operator`
//!   role, as `POST /api/runs`): the last message (the user's) is the
//!   prompt, earlier user, assistant and tool messages its transcript,
//!   system and developer messages and the `context` entries its system
//!   prompt; `context` and `state` are kept in the run's `context` under
//!   `ag_ui`; of `tools`, those named like a tool the project can call are
//!   attached (none given: every tool); front-end tools the client would run
//!   itself are not supported and left out;
//! - a `done` run gets the last message as a follow-up (`operator`);
//! - a `paused` run takes the decisions of `resume` (`approver`): one entry
//!   per interrupt, `interruptId` the call's id, `status` `resolved` with the
//!   decision as `payload` — `true`, `false`, or `{"approved", "always",
//!   "arguments", "comment", "reason"}` as the approvals API takes them —
//!   or `cancelled` (a rejection). Entries naming no call awaiting a
//!   decision are ignored, as AG-UI asks; a call left undecided is asked
//!   about again;
//! - a `pending` or `running` run is a 409 (its own stream is
//!   `GET /api/runs/{id}/events`), and so is a failed or cancelled one.
//!
//! Everything is checked before the stream starts: bad input is a JSON 4xx
//! and changes nothing. The stream is the run's own event stream (replay,
//! then live: nothing between the change and the stream is missed)
//! translated as it is read; it ends with `RUN_FINISHED` (success,
//! cancelled, or an interrupt listing every call awaiting a decision) or
//! `RUN_ERROR`, when the client goes away, or when the server shuts down.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::Event as SseEvent;
use axum::response::Response;
use futures::stream;
use runlens_engine::error::EngineError;
use runlens_engine::events::{RunEvents, StreamEnd};
use runlens_engine::model::limits::scoped_run_id;
use runlens_engine::model::{CreateRun, FollowUp, Role, RunStatus};
use runlens_engine::Engine;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::agui::events::{run_error, Next, Translator};
use super::super::agui::schema::{AguiInput, AguiStreamMessage};
use super::super::agui::{self, Checked, Decision, RunAgentInput};
use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppJson;
use super::super::live::Live;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(agui))
}

/// The metadata key and value of runs started through AG-UI.
pub const METADATA: (&str, &str) = ("protocol", "ag-ui");

/// Run an agent for an AG-UI client: create the thread's run, follow it up, or resume it with decisions; the
/// answer streams AG-UI events.
///
/// The thread is the run `<project>~thread~<threadId>` of the current project (the same `threadId` in another
/// project is another thread). A new thread creates a run in the current project from `messages` (the last
/// one, the user's, is the prompt); a `done` run takes the last message as a follow-up; a `paused` run takes
/// the decisions of `resume` (`interruptId`: the call's id; `payload`: `true`, `false` or `{"approved", …}`; a
/// `cancelled` entry rejects). A running, failed or cancelled run is a 409. Of `tools`, those named like a
/// tool the project can call are attached; front-end tools are not supported.
///
/// The stream: `RUN_STARTED`, `STEP_STARTED`/`STEP_FINISHED` per model turn, `TEXT_MESSAGE_*` around the
/// model's text, `TOOL_CALL_START`/`ARGS`/`END` per call and `TOOL_CALL_RESULT` when it finishes (or fails),
/// then `RUN_FINISHED` — with the interrupt outcome while calls await a decision, one interrupt per call — or
/// `RUN_ERROR`.
#[utoipa::path(
    post,
    path = "/api/agui",
    tag = "agui",
    params(ProjectHeader),
    request_body(content = AguiInput, description = "AG-UI's RunAgentInput"),
    responses(
        (status = 200, description = "The AG-UI event stream; each message's data is one event",
            body = AguiStreamMessage, content_type = "text/event-stream"),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 429, response = TooManyStreams),
        (status = 500, response = Internal),
    )
)]
async fn agui(
    State(engine): State<Engine>,
    caller: Caller,
    live: Live,
    AppJson(input): AppJson<RunAgentInput>,
) -> Result<Response, AppError> {
    let Checked { input, decisions } = agui::check(input).map_err(AppError::BadRequest)?;
    let mut translator = Translator::new(&input.thread_id, &input.run_id);
    // The thread's run: the current project's (see the module docs).
    let thread = scoped_run_id(&caller.project, "thread", &input.thread_id);
    let head = match engine.runs().run_head(&thread).await {
        Ok(_) => Some(caller.run(&engine, &thread, Role::Viewer).await?),
        Err(EngineError::NotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    // The answer streams the thread's run: opened before anything changes,
    // so a caller over its limit changes nothing.
    let project = head.as_ref().map_or(caller.project.as_str(), |h| h.project.as_str());
    let live = live.open(project, Role::Viewer)?;
    let mut queue = VecDeque::from([translator.started()]);
    let after = match head.map(|h| h.status) {
        None => {
            create(&engine, &caller, &input).await?;
            0
        }
        Some(RunStatus::Done) => {
            caller.run(&engine, &thread, Role::Operator).await?;
            let message = match agui::last_user_text(&input.messages) {
                Ok(message) => message,
                // Answers to interrupts decided meanwhile (a timeout, a person).
                Err(_) if !decisions.is_empty() => {
                    return Err(conflict(format!(
                        "run `{thread}` is done: the calls its interrupts asked about were decided meanwhile"
                    )))
                }
                Err(e) => return Err(AppError::BadRequest(e)),
            };
            let after = engine.traces().last_event_seq(&thread).await?;
            engine.conversation().follow_up(&thread, FollowUp { message, ..FollowUp::default() }).await?;
            after
        }
        Some(RunStatus::Paused) => {
            caller.run(&engine, &thread, Role::Approver).await?;
            if decisions.is_empty() {
                return Err(conflict(format!(
                    "run `{thread}` is paused awaiting approval: answer its interrupts with `resume` entries"
                )));
            }
            let after = engine.traces().last_event_seq(&thread).await?;
            decide(&engine, &caller, &thread, decisions).await?;
            let run = engine.runs().get_run(&thread).await?;
            if run.status == RunStatus::Paused {
                // Calls are still undecided: ask about them again.
                let mut out = Vec::new();
                if translator.interrupted(&run.interruptions, &mut out) {
                    queue.extend(out);
                    return Ok(live.sse(answer(engine, thread, translator, queue, None)));
                }
            }
            after
        }
        Some(status) => {
            let why = match status {
                RunStatus::Pending | RunStatus::Running => format!(
                    "run `{thread}` is {status}: a thread takes a new message once its run is done (follow it at \
                     GET /api/runs/{thread}/events)"
                ),
                _ => format!("run `{thread}` is {status}: its thread takes no more messages; start a new thread"),
            };
            return Err(conflict(why));
        }
    };
    let events = engine.traces().run_events(&thread, after).await?;
    Ok(live.sse(answer(engine, thread, translator, queue, Some(events))))
}

fn conflict(message: String) -> AppError {
    EngineError::Conflict(message).into()
}

/// Creates the thread's run (see the module docs).
async fn create(engine: &Engine, caller: &Caller, input: &RunAgentInput) -> Result<(), AppError> {
    let project = caller.require_current(Role::Operator)?;
    let conversation = agui::conversation(input).map_err(AppError::BadRequest)?;
    let tools = (!input.tools.is_empty()).then(|| {
        let known: Vec<String> = engine.tools(project).into_iter().map(|t| t.name).collect();
        input.tools.iter().map(|t| t.name.clone()).filter(|name| known.contains(name)).collect()
    });
    let metadata = json!({ METADATA.0: METADATA.1 });
    let req = CreateRun {
        initial_prompt: conversation.prompt,
        system_prompt: conversation.system_prompt,
        input_items: (!conversation.items.is_empty()).then_some(conversation.items),
        tools,
        context: agui::run_context(input),
        metadata: Some(metadata),
        ..CreateRun::default()
    };
    engine.create_scoped_run(req, project, Some(&caller.actor), ("thread", &input.thread_id)).await?;
    Ok(())
}

/// Applies the decisions on calls awaiting one; entries naming another call
/// are ignored (AG-UI: an unrecognised entry does not fail the run). Edited
/// arguments are checked first, so a bad one changes nothing.
async fn decide(engine: &Engine, caller: &Caller, thread: &str, decisions: Vec<Decision>) -> Result<(), AppError> {
    let run = engine.runs().get_run(thread).await?;
    let pending = |id: &str| run.interruptions.iter().find(|p| p.call_id == id);
    let mut known = Vec::new();
    for (i, d) in decisions.into_iter().enumerate() {
        let Some(call) = pending(&d.call_id) else {
            tracing::warn!(run_id = thread, interrupt_id = d.call_id, "AG-UI resume entry names no pending call");
            continue;
        };
        if let Some(args) = &d.request.arguments {
            let tools = engine.tool_registry().view(&run.project);
            if tools.contains(&call.tool_name) {
                tools.validate(&call.tool_name, args).map_err(|e| AppError::BadRequest(format!("resume[{i}]: {e}")))?;
            }
        }
        known.push(d);
    }
    for d in known {
        let decided = if d.approve {
            engine.approvals().approve(thread, &d.call_id, d.request, &caller.actor).await
        } else {
            engine.approvals().reject(thread, &d.call_id, d.request, &caller.actor).await
        };
        match decided {
            Ok(_) => {}
            // Decided meanwhile (by a person, a timeout, another request).
            Err(EngineError::AlreadyDecided { .. } | EngineError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// What the answer's stream holds between messages.
struct Answer {
    engine: Engine,
    thread: String,
    translator: Translator,
    /// AG-UI events translated and not sent yet.
    queue: VecDeque<Value>,
    /// The run's events; `None` once the last AG-UI event is queued.
    events: Option<RunEvents>,
}

/// The AG-UI events of `events` after those of `queue`, as SSE messages.
fn answer(
    engine: Engine,
    thread: String,
    translator: Translator,
    queue: VecDeque<Value>,
    events: Option<RunEvents>,
) -> impl futures::Stream<Item = Result<SseEvent, Infallible>> + Send + 'static {
    let state = Answer { engine, thread, translator, queue, events };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.queue.pop_front() {
                return Some((Ok(SseEvent::default().data(event.to_string())), st));
            }
            let events = st.events.as_mut()?;
            let mut out = Vec::new();
            let next = match events.next().await {
                Some(Ok(e)) => st.translator.event(&e.kind, &mut out),
                Some(Err(StreamEnd::Lagged(n))) => {
                    // This stream read too slowly: read on from the log.
                    tracing::info!(run_id = st.thread, lagged = n, "AG-UI stream fell behind; reading on from the log");
                    let after = events.last_seq();
                    match st.engine.traces().run_events(&st.thread, after).await {
                        Ok(reopened) => st.events = Some(reopened),
                        Err(e) => {
                            out.push(run_error(&format!("the run's events could not be read: {e}"), "stream_failed"));
                            st.events = None;
                        }
                    }
                    Next::Continue
                }
                Some(Err(StreamEnd::Store(e))) => {
                    out.push(run_error(&format!("the run's events could not be read: {e}"), "stream_failed"));
                    Next::End
                }
                None => {
                    out.push(run_error("the run's event stream ended before the run did", "stream_ended"));
                    Next::End
                }
            };
            match next {
                Next::Continue => {}
                Next::End => st.events = None,
                Next::Paused => match st.engine.runs().get_run(&st.thread).await {
                    Ok(run) if run.status == RunStatus::Paused => {
                        if st.translator.interrupted(&run.interruptions, &mut out) {
                            st.events = None;
                        }
                    }
                    // Decided meanwhile: the run goes on, and so does the stream.
                    Ok(_) => {}
                    Err(e) => {
                        out.push(run_error(&format!("the run could not be read: {e}"), "stream_failed"));
                        st.events = None;
                    }
                },
                Next::Failed => {
                    let reason = match st.engine.runs().get_run(&st.thread).await {
                        Ok(run) => run.failure_reason.unwrap_or_else(|| format!("the run is {}", run.status)),
                        Err(e) => format!("the run failed and could not be read: {e}"),
                    };
                    st.translator.failed(&reason, &mut out);
                    st.events = None;
                }
            }
            st.queue.extend(out);
        }
    })
}
