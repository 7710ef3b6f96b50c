//! The follow-up box under the transcript: on a finished (`done`),
//! interactive run, a message (and optionally a new max-turns limit) that
//! reopens the run; otherwise a line saying why there is none.
//!
//! The form is an `ActionForm`, so it also works as a plain form post
//! without JavaScript (the server redirects back to the page, which then
//! reloads itself while the run is active). With JavaScript the page
//! refetches the trace once the message is accepted and keeps polling while
//! the run works; the box clears itself after a successful send.

use leptos::html::Form;
use leptos::prelude::*;
use runlens_engine::model::{Run, RunStatus};

use crate::api::SendFollowUp;

/// Why a run takes no follow-up right now; `None` when it does.
pub fn unavailable_reason(run: &Run) -> Option<String> {
    if !run.interactive {
        return Some(
            "This run was created with interactive: false, so it takes no follow-up messages. \
             Edit one of its messages above to fork it instead."
                .to_string(),
        );
    }
    match run.status {
        RunStatus::Done => None,
        RunStatus::Pending | RunStatus::Running => Some(
            "The run is still working: you can send a follow-up once it is done.".to_string(),
        ),
        RunStatus::Paused => Some(
            "The run is paused, waiting for a decision on a tool call: you can send a follow-up once it is done."
                .to_string(),
        ),
        other => Some(format!(
            "The run ended as {other}; follow-ups continue done runs only. Edit one of its messages above to fork it instead."
        )),
    }
}

#[component]
pub fn FollowUpBox(run: Run, action: ServerAction<SendFollowUp>) -> impl IntoView {
    if let Some(reason) = unavailable_reason(&run) {
        return view! {
            <p class="follow-up-note muted" data-testid="follow-up-unavailable">{reason}</p>
        }
        .into_any();
    }
    let form = NodeRef::<Form>::new();
    // Clear the box once a message went through (the run continues).
    Effect::new(move |previous: Option<usize>| {
        let version = action.version().get();
        let sent = action.value().with_untracked(|v| matches!(v, Some(Ok(()))));
        if previous.is_some_and(|p| p != version) && sent {
            if let Some(form) = form.get_untracked() {
                form.reset();
            }
        }
        version
    });
    let pending = action.pending();
    let error = move || {
        action.value().with(|v| match v {
            Some(Err(e)) => Some(view! {
                <p class="inline-error" role="alert" data-testid="follow-up-error">{e.message.clone()}</p>
            }),
            _ => None,
        })
    };
    let max_turns = run.max_turns.to_string();

    view! {
        <ActionForm action node_ref=form attr:class="follow-up" attr:data-testid="follow-up">
            <input type="hidden" name="run_id" value=run.id/>
            <label class="field">
                <span>"Follow up " <em>"(the run continues with this message)"</em></span>
                <textarea name="message" rows="3" required placeholder="Ask a follow-up question…"
                    data-testid="follow-up-text"></textarea>
            </label>
            {error}
            <div class="follow-up-actions">
                <label class="field inline">
                    <span>"Max turns " <em>"(optional)"</em></span>
                    <input type="number" name="max_turns" min="1" max="1000" placeholder=max_turns
                        data-testid="follow-up-max-turns"/>
                </label>
                <button type="submit" class="button primary" data-testid="follow-up-send"
                    disabled=move || pending.get()>
                    {move || if pending.get() { "Sending…" } else { "Send" }}
                </button>
            </div>
        </ActionForm>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: RunStatus, interactive: bool) -> Run {
        let mut run: Run = serde_json::from_value(serde_json::json!({
            "id": "r", "name": "n", "status": "done", "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 3, "agent_id": null, "result": null, "summary": null,
            "failure_reason": null, "usage": {}, "step_count": 0, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null
        }))
        .unwrap();
        run.status = status;
        run.interactive = interactive;
        run
    }

    #[test]
    fn only_done_interactive_runs_take_follow_ups() {
        assert_eq!(unavailable_reason(&run(RunStatus::Done, true)), None);
        let why = |s, i| unavailable_reason(&run(s, i)).unwrap();
        assert!(why(RunStatus::Done, false).contains("interactive: false"));
        assert!(why(RunStatus::Running, true).contains("still working"));
        assert!(why(RunStatus::Paused, true).contains("paused"));
        assert!(why(RunStatus::Failed, true).contains("failed"));
    }
}
