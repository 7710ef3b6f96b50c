//! The approval card: one pending tool call with its arguments, the model's
//! reasoning, and the Approve / Reject forms (always-toggles, an argument
//! editor, a comment and a reason).
//!
//! Both forms are `ActionForm`s, so they also work as plain form posts
//! without JavaScript. The card is re-rendered in place by every live refresh
//! of its page; what the user is typing survives because the inputs carry no
//! reactive value: the editor's text, the checkboxes and the `<details>` that
//! opens the editor keep their state in the DOM, and only the error line and
//! the disabled state are reactive (read from the page-level actions).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Decision, Interruption, Role, RunRef};

use super::preview::{page_cuts, ShowAll};
use super::{CallerRole, JsonBlock};
use crate::api::{ApprovalError, ApproveCall, RejectCall};
use crate::format;

/// The page's two decision actions, shared by all of its cards: results are
/// matched to cards by call id, and the actions outlive the cards (which a
/// live refresh re-creates).
#[derive(Clone, Copy)]
pub struct DecisionActions {
    pub approve: ServerAction<ApproveCall>,
    pub reject: ServerAction<RejectCall>,
}

/// App-wide counter of decisions made from any page, bumped after each one so
/// the nav badge refreshes at once instead of at its next poll.
#[derive(Clone, Copy)]
pub struct DecisionsMade(pub RwSignal<u64>);

impl DecisionActions {
    /// Creates both actions. Without JavaScript, a failed decision comes back
    /// in the redirect's `__err` parameter and shows up as their value.
    pub fn new() -> Self {
        let actions = DecisionActions { approve: ServerAction::new(), reject: ServerAction::new() };
        if let Some(DecisionsMade(made)) = use_context::<DecisionsMade>() {
            Effect::new(move |previous: Option<(usize, usize)>| {
                let now = actions.version();
                if previous.is_some_and(|p| p != now) {
                    made.update(|n| *n += 1);
                }
                now
            });
        }
        actions
    }

    /// Changes (tracked) whenever a decision completes: part of the sources of
    /// the resources that must refetch after one.
    pub fn version(&self) -> (usize, usize) {
        (self.approve.version().get(), self.reject.version().get())
    }

    /// Whether a decision on `call_id` is in flight (tracked).
    pub fn busy(&self, call_id: &str) -> bool {
        self.approve.input().with(|i| i.as_ref().is_some_and(|i| i.call_id == call_id))
            || self.reject.input().with(|i| i.as_ref().is_some_and(|i| i.call_id == call_id))
    }

    /// The last approve error, when it was about `call_id` (tracked).
    pub fn approve_error(&self, call_id: &str) -> Option<ApprovalError> {
        self.approve.value().with(|v| match v {
            Some(Err(e)) if e.is_about(call_id) => Some(e.clone()),
            _ => None,
        })
    }

    /// The last reject error, when it was about `call_id` (tracked).
    pub fn reject_error(&self, call_id: &str) -> Option<ApprovalError> {
        self.reject.value().with(|v| match v {
            Some(Err(e)) if e.is_about(call_id) => Some(e.clone()),
            _ => None,
        })
    }
}

impl Default for DecisionActions {
    fn default() -> Self {
        Self::new()
    }
}

/// `requested 12:00:01 UTC (35.2 s ago)`.
pub fn requested_text(requested_at: &DateTime<Utc>, now: DateTime<Utc>) -> String {
    let age = format::duration_ms((now - *requested_at).num_milliseconds());
    format!("requested {} UTC ({age} ago)", format::time(requested_at))
}

/// `rejected automatically at 12:05:01 UTC (in 4m 10s)`.
pub fn deadline_text(deadline: &DateTime<Utc>, now: DateTime<Utc>) -> String {
    let left = (*deadline - now).num_milliseconds();
    if left > 0 {
        format!("rejected automatically at {} UTC (in {})", format::time(deadline), format::duration_ms(left))
    } else {
        "past its deadline: being rejected automatically".to_string()
    }
}

/// The anchor of a call's card, linked from the call in the trace tree.
pub fn card_anchor(call_id: &str) -> String {
    format!("approval-{call_id}")
}

/// One pending call and the controls to decide it.
#[component]
pub fn ApprovalCard(
    item: Interruption,
    /// The server's clock when the data was read.
    now: DateTime<Utc>,
    actions: DecisionActions,
    /// Show the run's name with a link to its trace (the inbox does).
    #[prop(optional)]
    show_run: bool,
) -> impl IntoView {
    let Interruption {
        run_id, run_name, call_id, tool_name, arguments, reasoning, requested_at, deadline, chain, ..
    } = item;
    let chain = approval_chain(&chain, &run_id, &run_name, &tool_name);
    // Long arguments come cut to a preview: link to the call in full, and
    // do not offer to edit the preview (approving it would change the call).
    let cut = page_cuts().call(&call_id);
    let full = cut.then(|| {
        let href = format!("/api/runs/{}/tool-calls/{}", format::url_encode(&run_id), format::url_encode(&call_id));
        view! { <ShowAll href/> }
    });
    let pretty = format::pretty_json(&arguments);
    let rows = (pretty.lines().count() + 1).clamp(3, 16).to_string();
    let editor_text = format::rcdata_text(&pretty);
    let run_link = show_run.then(|| run_link(&run_id, &run_name));
    let anchor = card_anchor(&call_id);
    let tool_attr = tool_name.clone();
    // A viewer or operator sees the call, not the buttons.
    let may_decide = CallerRole::may(Role::Approver);
    let forms = match may_decide {
        true => view! {
            <div class="approval-forms">
                <ApproveForm actions run_id=run_id.clone() call_id=call_id.clone() tool=tool_name.clone()
                    editor=(!cut).then_some((editor_text, rows))/>
                <RejectForm actions run_id call_id=call_id.clone() tool=tool_name.clone()/>
            </div>
        }
        .into_any(),
        false => read_only_note().into_any(),
    };

    // The keyboard's `a` / `r` act on the focused card, else the first one:
    // which one that is is marked in the browser as cards come and go.
    Effect::new(|_| crate::shortcuts::refresh_card_target());
    on_cleanup(crate::shortcuts::refresh_card_target);
    let label = format!("Approval request: {tool_name}");

    // Focusable (tabindex 0), so a keyboard user can pick a card for `a` / `r`.
    view! {
        <article class="approval-card" id=anchor data-testid="approval-card"
            data-call-id=call_id.clone() data-tool=tool_attr tabindex="0" aria-label=label>
            <header class="approval-head">
                <span class="badge badge-awaiting_approval">"awaiting approval"</span>
                <span class="mono tool-name" data-testid="approval-tool">{tool_name.clone()}</span>
                {run_link}
                <span class="spacer"></span>
                {may_decide.then(|| view! {
                    <span class="kbd-hint" aria-hidden="true" data-testid="approval-kbd-hint">
                        <kbd>"a"</kbd> " approve · " <kbd>"r"</kbd> " reject"
                    </span>
                })}
                <span class="muted" data-testid="approval-age">{requested_text(&requested_at, now)}</span>
            </header>
            {may_decide.then(|| view! {
                <p class="kbd-confirm" data-testid="approve-confirm-hint">
                    "Press " <kbd>"a"</kbd> " again or " <kbd>"Enter"</kbd> " to approve · " <kbd>"Esc"</kbd> " cancels"
                </p>
            })}
            {chain}
            {deadline.map(|d| view! {
                <p class="approval-deadline" data-testid="approval-deadline">{deadline_text(&d, now)}</p>
            })}
            {reasoning.map(|r| view! {
                <div class="label">"The model's reasoning"</div>
                <p class="reasoning" data-testid="approval-reasoning">{r}</p>
            })}
            <div class="label">"Arguments " {full}</div>
            <JsonBlock value=arguments testid="approval-args" cut/>
            {forms}
        </article>
    }
}

/// A child run's call: the runs above it, each waiting on the next, down
/// to the call; `None` for a call of a top-level run.
fn approval_chain(chain: &[RunRef], run_id: &str, run_name: &str, tool_name: &str) -> Option<impl IntoView> {
    let link = |id: &str, name: &str, agent: Option<&str>| {
        let href = format!("/runs/{}", format::url_encode(id));
        let label = if name.trim().is_empty() { id.to_string() } else { name.to_string() };
        let title = match agent {
            Some(a) => format!("run {id} (agent {a})"),
            None => format!("run {id}"),
        };
        view! { <a href=href data-testid="chain-run" data-run-id=id.to_string() title=title>{label}</a> }
    };
    (!chain.is_empty()).then(|| {
        let above = chain
            .iter()
            .map(|r| view! { {link(&r.id, &r.name, r.agent_id.as_deref())} <span class="chain-arrow">" → "</span> })
            .collect::<Vec<_>>();
        view! {
            <p class="approval-chain" data-testid="approval-chain">
                <span class="muted">"Chain: "</span>
                {above}
                {link(run_id, run_name, None)}
                <span class="chain-arrow">" → "</span>
                <span class="mono tool-name">{tool_name.to_string()}</span>
            </p>
        }
    })
}

/// "in run …": the card's run, linked (the inbox shows it).
fn run_link(run_id: &str, run_name: &str) -> impl IntoView {
    let href = format!("/runs/{}", format::url_encode(run_id));
    let label = if run_name.trim().is_empty() { run_id.to_string() } else { run_name.to_string() };
    view! {
        <span class="approval-run">
            "in run " <a href=href data-testid="approval-run" title=run_id.to_string()>{label}</a>
        </span>
    }
}

/// In place of the forms for a caller who may not decide.
fn read_only_note() -> impl IntoView {
    view! {
        <p class="muted approval-read-only" data-testid="approval-read-only">
            "Deciding needs the approver role in this run's project."
        </p>
    }
}

/// The Approve form of a call: its ids, the argument editor (`editor`: the
/// pretty-printed arguments and the textarea's height; `None` when the card
/// shows a preview of the arguments, which must not be approved as edited
/// arguments), a comment, and the "always" toggle.
#[component]
fn ApproveForm(
    actions: DecisionActions,
    run_id: String,
    call_id: String,
    tool: String,
    editor: Option<(String, String)>,
) -> impl IntoView {
    let error = {
        let id = call_id.clone();
        move || actions.approve_error(&id)
    };
    let busy = {
        let id = call_id.clone();
        move || actions.busy(&id)
    };
    view! {
        <ActionForm action=actions.approve attr:class="approval-form approve-form">
            <CallIds run_id call_id/>
            {editor.map(|(text, rows)| view! {
                <details class="edit-args">
                    <summary data-testid="edit-toggle">"Edit arguments"</summary>
                    <textarea name="arguments" rows=rows spellcheck="false"
                        data-testid="edit-arguments">{text}</textarea>
                    <p class="hint">"JSON, checked against the tool's schema when you approve."</p>
                </details>
            })}
            {move || error().map(|e| view! { <DecisionError error=e/> })}
            <input type="text" name="comment" placeholder="Comment (optional)"
                aria-label="Comment (optional)" data-testid="approve-comment"/>
            <DecisionButtons decision=Decision::Approved tool busy/>
        </ActionForm>
    }
}

/// The Reject form of a call: its ids, the reason the model sees, and the
/// "always" toggle.
#[component]
fn RejectForm(actions: DecisionActions, run_id: String, call_id: String, tool: String) -> impl IntoView {
    // Call ids repeat across runs (the inbox shows several runs' cards).
    let hint_id = format!("reject-hint-{run_id}-{call_id}");
    let error = {
        let id = call_id.clone();
        move || actions.reject_error(&id)
    };
    let busy = {
        let id = call_id.clone();
        move || actions.busy(&id)
    };
    view! {
        <ActionForm action=actions.reject attr:class="approval-form reject-form">
            <CallIds run_id call_id/>
            <input type="text" name="reason" placeholder="Reason (the model sees it)"
                aria-label="Reason for rejecting (the model sees it)" aria-keyshortcuts="r"
                aria-describedby=hint_id.clone() data-testid="reject-reason"/>
            <p class="kbd-hint reject-confirm-hint" id=hint_id data-testid="reject-confirm-hint">
                "Press Enter to reject with this reason."
            </p>
            {move || error().map(|e| view! { <DecisionError error=e/> })}
            <DecisionButtons decision=Decision::Rejected tool busy/>
        </ActionForm>
    }
}

/// The hidden fields naming the call a decision form decides.
#[component]
fn CallIds(run_id: String, call_id: String) -> impl IntoView {
    view! {
        <input type="hidden" name="run_id" value=run_id/>
        <input type="hidden" name="call_id" value=call_id/>
    }
}

/// Why the last decision on this call failed.
#[component]
fn DecisionError(error: ApprovalError) -> impl IntoView {
    view! { <p class="approval-error" role="alert" data-testid="approval-error">{error.message}</p> }
}

/// A decision form's footer: "Always approve/reject `tool` in this run" and
/// the submit button, disabled while a decision on the call is in flight.
/// The test ids and CSS classes derive from the decision's verb.
#[component]
fn DecisionButtons(decision: Decision, tool: String, busy: impl Fn() -> bool + Send + Sync + 'static) -> impl IntoView {
    let (verb, label, always) = match decision {
        Decision::Approved => ("approve", "Approve", "Always approve "),
        Decision::Rejected => ("reject", "Reject", "Always reject "),
    };
    view! {
        <div class="approval-actions">
            <label class="check">
                <input type="checkbox" name="always" value="true" data-testid=format!("always-{verb}")/>
                {always} <code>{tool}</code> " in this run"
            </label>
            <button type="submit" class=format!("button {verb}") data-testid=format!("{verb}-button")
                aria-keyshortcuts=(decision == Decision::Approved).then_some("a") disabled=busy>{label}</button>
        </div>
    }
}
