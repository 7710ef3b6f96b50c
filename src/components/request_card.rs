//! The cards of requests from agents runlens does not run (see
//! `runlens_engine::model::AgentRequest`): an approval request (a tool, its
//! arguments in an editor, a comment; or a reason to reject it) or a
//! question (answered in free text, or with one of its choices), each
//! marked with the agent run that asked and the key that asked for it; and,
//! once decided, the outcome in the card's place.
//!
//! Every form is an `ActionForm`, so it also works as a plain form post
//! without JavaScript; a choice is a form of its own (a hidden answer and
//! its button). As on runlens's own approval cards, the inputs carry no
//! reactive value, so what the user types survives live refreshes; only the
//! error line and the disabled state are reactive (read from the page-level
//! actions, which outlive the cards).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{AgentRequest, RequestKind, RequestOutcome, RequestStatus};
use serde_json::Value;

use super::approval_card::{requested_text, DecisionsMade};
use super::approval_decision::decider_label;
use super::{Badge, JsonBlock};
use crate::api::requests::{AnswerAgentQuestion, ApproveAgentRequest, RejectAgentRequest, RequestError};
use crate::api::ErrorKind;
use crate::format;

/// The page's three request actions, shared by all of its cards: results
/// are matched to cards by request id.
#[derive(Clone, Copy)]
pub struct RequestActions {
    pub approve: ServerAction<ApproveAgentRequest>,
    pub reject: ServerAction<RejectAgentRequest>,
    pub answer: ServerAction<AnswerAgentQuestion>,
}

impl RequestActions {
    /// Creates the actions. Without JavaScript, a failed decision comes back
    /// in the redirect's `__err` parameter and shows up as their value.
    pub fn new() -> Self {
        let actions =
            RequestActions { approve: ServerAction::new(), reject: ServerAction::new(), answer: ServerAction::new() };
        // The nav badge counts requests too: refresh it after each decision.
        if let Some(DecisionsMade(made)) = use_context::<DecisionsMade>() {
            Effect::new(move |previous: Option<(usize, usize, usize)>| {
                let now = actions.version();
                if previous.is_some_and(|p| p != now) {
                    made.update(|n| *n += 1);
                }
                now
            });
        }
        actions
    }

    /// Changes (tracked) whenever a decision completes.
    pub fn version(&self) -> (usize, usize, usize) {
        (self.approve.version().get(), self.reject.version().get(), self.answer.version().get())
    }

    /// Whether a decision on request `id` is in flight (tracked).
    pub fn busy(&self, id: &str) -> bool {
        self.approve.input().with(|i| i.as_ref().is_some_and(|i| i.id == id))
            || self.reject.input().with(|i| i.as_ref().is_some_and(|i| i.id == id))
            || self.answer.input().with(|i| i.as_ref().is_some_and(|i| i.id == id))
    }

    /// The last error of any of the actions, when it was about request `id` (tracked).
    pub fn error(&self, id: &str) -> Option<RequestError> {
        let of = |v: &Option<Result<AgentRequest, RequestError>>| match v {
            Some(Err(e)) if e.is_about(id) => Some(e.clone()),
            _ => None,
        };
        self.approve.value().with(of).or_else(|| self.reject.value().with(of)).or_else(|| self.answer.value().with(of))
    }

    /// Calls `record` with each decided request an action learnt about (its
    /// own decision, or the one that beat it).
    pub fn on_decided(&self, record: impl Fn(AgentRequest) + Clone + Send + Sync + 'static) {
        let learn = move |result: Option<Result<AgentRequest, RequestError>>| match result {
            Some(Ok(request)) if request.status != RequestStatus::Pending => Some(request),
            Some(Err(e)) if e.kind == ErrorKind::AlreadyDecided => e.won.map(|c| *c),
            _ => None,
        };
        let (approve, reject, answer) = (self.approve, self.reject, self.answer);
        let r = record.clone();
        Effect::new(move |_| learn(approve.value().get()).map(&r));
        let r = record.clone();
        Effect::new(move |_| learn(reject.value().get()).map(&r));
        Effect::new(move |_| learn(answer.value().get()).map(&record));
    }
}

impl Default for RequestActions {
    fn default() -> Self {
        Self::new()
    }
}

/// `rejected automatically at 12:05:01 UTC if undecided (in 4m 10s)`, or
/// for a question `expires at … if unanswered`.
pub fn request_deadline_text(kind: RequestKind, deadline: &DateTime<Utc>, now: DateTime<Utc>) -> String {
    let left = (*deadline - now).num_milliseconds();
    let (verb, unless) = match kind {
        RequestKind::Approval => ("rejected automatically", "undecided"),
        RequestKind::Question => ("expires", "unanswered"),
    };
    if left > 0 {
        format!("{verb} at {} UTC if {unless} (in {})", format::time(deadline), format::duration_ms(left))
    } else {
        format!("past its deadline ({} UTC): {verb}", format::time(deadline))
    }
}

/// Where a request comes from: the agent's run (its name and external id),
/// the key that asked, and the runlens run it is shown in.
#[component]
fn RequestSource(request: AgentRequest) -> impl IntoView {
    let AgentRequest { run, run_id, requested_by, .. } = request;
    let external = run.external_id.map(|ext| {
        view! { " " <span class="mono sub" data-testid="request-external-id" title="the agent's run id">{ext}</span> }
    });
    let link = run_id.map(|id| {
        let href = format!("/runs/{}", format::url_encode(&id));
        view! { " · " <a href=href data-testid="request-run-link" title=id>"Open its run →"</a> }
    });
    view! {
        <p class="request-source" data-testid="request-source">
            <span class="muted">"From "</span>
            <strong data-testid="request-run-name">{run.name}</strong>
            {external}
            <span class="muted">" · asked by "</span>
            <span data-testid="request-requested-by">{requested_by}</span>
            {link}
        </p>
    }
}

/// The request's context: text as it is, a JSON value pretty-printed.
#[component]
fn RequestContext(context: Option<Value>) -> impl IntoView {
    context.filter(|c| !c.is_null()).map(|c| {
        let body = match c {
            Value::String(text) => {
                view! { <p class="request-context" data-testid="request-context">{text}</p> }.into_any()
            }
            other => view! { <JsonBlock value=other testid="request-context"/> }.into_any(),
        };
        view! {
            <div class="label">"Context"</div>
            {body}
        }
    })
}

/// What the card's first line says the request is.
fn kind_words(kind: RequestKind) -> (&'static str, &'static str) {
    match kind {
        RequestKind::Approval => ("badge badge-awaiting_approval", "awaiting approval"),
        RequestKind::Question => ("badge badge-question", "question"),
    }
}

/// One pending request and the controls to decide (answer) it; without the
/// controls for a caller who may not decide (`may_decide`).
#[component]
pub fn RequestCard(
    request: AgentRequest,
    /// The server's clock when the data was read.
    now: DateTime<Utc>,
    actions: RequestActions,
    may_decide: bool,
) -> impl IntoView {
    let id = request.id.clone();
    let kind = request.kind;
    let (badge_class, badge_text) = kind_words(kind);
    let subject = match kind {
        RequestKind::Approval => request.tool.clone().unwrap_or_default(),
        RequestKind::Question => request.question.clone().unwrap_or_default(),
    };
    let label = match kind {
        RequestKind::Approval => format!("Approval request from {}: {subject}", request.run.name),
        RequestKind::Question => format!("Question from {}", request.run.name),
    };
    let tool =
        request.tool.clone().map(|t| view! { <span class="mono tool-name" data-testid="request-tool">{t}</span> });
    let deadline = request.deadline.map(|d| {
        view! { <p class="approval-deadline" data-testid="request-deadline">{request_deadline_text(kind, &d, now)}</p> }
    });
    let question = request.question.clone().map(|q| {
        view! {
            <div class="label">"Question"</div>
            <p class="request-question" data-testid="request-question">{q}</p>
        }
    });
    let body = request_body(&request, actions, may_decide);

    // Why the last decision on this request failed (any of its forms).
    let error = {
        let id = id.clone();
        move || actions.error(&id).map(|e| view! { <RequestErrorLine error=e/> })
    };

    view! {
        <article class="approval-card request-card" data-testid="request-card" data-request-id=id.clone()
            data-kind=kind.as_str() data-status="pending" aria-label=label>
            <header class="approval-head">
                <span class=badge_class>{badge_text}</span>
                {tool}
                <span class="spacer"></span>
                <span class="muted" data-testid="request-age">{requested_text(&request.created_at, now)}</span>
            </header>
            <RequestSource request=request.clone()/>
            {deadline}
            {question}
            <RequestContext context=request.context.clone()/>
            {body}
            {error}
        </article>
    }
}

/// The card's controls: the forms that decide (answer) the request, or
/// for a caller who may not decide, what it asks and why there are none.
fn request_body(request: &AgentRequest, actions: RequestActions, may_decide: bool) -> AnyView {
    let id = request.id.clone();
    match (request.kind, may_decide) {
        (RequestKind::Approval, true) => {
            let arguments = request.arguments.clone().unwrap_or(Value::Object(Default::default()));
            view! {
                <div class="approval-forms">
                    <ApproveRequestForm actions id=id.clone() arguments/>
                    <RejectRequestForm actions id=id.clone()/>
                </div>
            }
            .into_any()
        }
        (RequestKind::Question, true) => {
            view! { <AnswerForms actions id=id.clone() choices=request.choices.clone()/> }.into_any()
        }
        (_, false) => {
            let arguments = request.arguments.clone().map(|a| {
                view! {
                    <div class="label">"Arguments"</div>
                    <JsonBlock value=a testid="request-arguments-view"/>
                }
            });
            let choices = request.choices.clone().map(|c| {
                view! { <p class="muted" data-testid="request-choices-view">"Choices: " {c.join(" · ")}</p> }
            });
            view! {
                {arguments}
                {choices}
                <p class="muted approval-read-only" data-testid="request-read-only">
                    "Deciding needs the approver role in this project."
                </p>
            }
            .into_any()
        }
    }
}

/// The Approve form: the arguments as an editable JSON text, a comment.
#[component]
fn ApproveRequestForm(actions: RequestActions, id: String, arguments: Value) -> impl IntoView {
    let pretty = format::pretty_json(&arguments);
    let rows = (pretty.lines().count() + 1).clamp(3, 16).to_string();
    let text = format::rcdata_text(&pretty);
    let (args_id, comment_id, hint_id) =
        (format!("request-args-{id}"), format!("request-comment-{id}"), format!("request-args-hint-{id}"));
    let busy = {
        let id = id.clone();
        move || actions.busy(&id)
    };
    view! {
        <ActionForm action=actions.approve attr:class="approval-form approve-form">
            <input type="hidden" name="id" value=id/>
            <label class="label" for=args_id.clone()>"Arguments"</label>
            <textarea id=args_id name="arguments" rows=rows spellcheck="false" aria-describedby=hint_id.clone()
                data-testid="request-arguments">{text}</textarea>
            <p class="hint request-hint" id=hint_id>"JSON; edit it to change what the agent calls the tool with."</p>
            <label class="label" for=comment_id.clone()>"Comment (optional)"</label>
            <textarea id=comment_id name="comment" rows="2" data-testid="request-comment"></textarea>
            <div class="approval-actions">
                <span></span>
                <button type="submit" class="button approve" data-testid="request-approve-button"
                    disabled=busy>"Approve"</button>
            </div>
        </ActionForm>
    }
}

/// The Reject form: the reason the agent receives.
#[component]
fn RejectRequestForm(actions: RequestActions, id: String) -> impl IntoView {
    let reason_id = format!("request-reason-{id}");
    let busy = {
        let id = id.clone();
        move || actions.busy(&id)
    };
    view! {
        <ActionForm action=actions.reject attr:class="approval-form reject-form">
            <input type="hidden" name="id" value=id/>
            <label class="label" for=reason_id.clone()>"Reason (the agent receives it)"</label>
            <textarea id=reason_id name="reason" rows="2" data-testid="request-reason"></textarea>
            <div class="approval-actions">
                <span></span>
                <button type="submit" class="button reject" data-testid="request-reject-button"
                    disabled=busy>"Reject"</button>
            </div>
        </ActionForm>
    }
}

/// A question's answer: one button per choice (each its own form), or a
/// free-text answer.
#[component]
fn AnswerForms(actions: RequestActions, id: String, choices: Option<Vec<String>>) -> impl IntoView {
    let busy = {
        let id = id.clone();
        move || actions.busy(&id)
    };
    match choices.filter(|c| !c.is_empty()) {
        Some(choices) => {
            let buttons = choices
                .into_iter()
                .map(|choice| {
                    let (busy, id) = (busy.clone(), id.clone());
                    let (value, attr) = (choice.clone(), choice.clone());
                    view! {
                        <ActionForm action=actions.answer attr:class="request-choice-form">
                            <input type="hidden" name="id" value=id/>
                            <input type="hidden" name="answer" value=value/>
                            <button type="submit" class="button" data-testid="request-choice"
                                data-choice=attr disabled=busy>{choice}</button>
                        </ActionForm>
                    }
                })
                .collect::<Vec<_>>();
            let group_id = format!("request-choices-{id}");
            view! {
                <div class="label" id=group_id.clone()>"Answer with one of the choices"</div>
                <div class="request-choices" role="group" aria-labelledby=group_id>
                    {buttons}
                </div>
            }
            .into_any()
        }
        None => {
            let answer_id = format!("request-answer-{id}");
            view! {
                <ActionForm action=actions.answer attr:class="approval-form answer-form">
                    <input type="hidden" name="id" value=id/>
                    <label class="label" for=answer_id.clone()>"Your answer"</label>
                    <textarea id=answer_id name="answer" rows="3" data-testid="request-answer"></textarea>
                    <div class="approval-actions">
                        <span></span>
                        <button type="submit" class="button primary" data-testid="request-answer-button"
                            disabled=busy>"Answer"</button>
                    </div>
                </ActionForm>
            }
            .into_any()
        }
    }
}

/// Why the last decision on this request failed.
#[component]
fn RequestErrorLine(error: RequestError) -> impl IntoView {
    view! { <p class="approval-error" role="alert" data-testid="request-error">{error.message}</p> }
}

/// How a request ended: the outcome, who decided and when, and the answer,
/// the reason, the comment or the edited arguments.
#[component]
pub fn RequestOutcomeView(outcome: RequestOutcome) -> impl IntoView {
    let RequestOutcome {
        outcome,
        arguments,
        edited,
        answer,
        reason,
        comment,
        decided_by,
        decided_by_id,
        decided_at,
        ..
    } = outcome;
    let word = outcome.as_str();
    let by = decider_label(&decided_by, Some(decided_by_id.as_str()));
    let reason_label = match outcome {
        RequestStatus::Expired => "Why",
        _ => "Reason (sent to the agent)",
    };
    view! {
        <div class=format!("approval-decision decision-{word}") data-testid="request-outcome" data-outcome=word
            data-decided-by=decided_by.clone()>
            <div class="decision-line">
                <Badge status=word/>
                <span>
                    "by " <strong data-testid="request-decided-by">{by}</strong>
                    " at " <span data-testid="request-decided-at">{format::time(&decided_at)}</span> " UTC"
                </span>
            </div>
            {answer.map(|a| view! {
                <div class="label">"Answer"</div>
                <p class="decision-comment" data-testid="request-outcome-answer">{a}</p>
            })}
            {reason.map(|r| view! {
                <div class="label">{reason_label}</div>
                <p class="decision-comment" data-testid="request-outcome-reason">{r}</p>
            })}
            {comment.map(|c| view! {
                <div class="label">"Comment"</div>
                <p class="decision-comment" data-testid="request-outcome-comment">{c}</p>
            })}
            {arguments.filter(|_| edited).map(|a| view! {
                <div class="label">"Edited arguments (what the agent calls the tool with)"</div>
                <JsonBlock value=a testid="request-outcome-arguments"/>
            })}
        </div>
    }
}

/// A request that no longer waits, where its card was: its outcome when
/// known, else `note`.
#[component]
pub fn SettledRequest(
    request: AgentRequest,
    /// Shown when the outcome is not known.
    #[prop(into)]
    note: String,
) -> impl IntoView {
    let kind = request.kind;
    let subject = match kind {
        RequestKind::Approval => request.tool.clone().unwrap_or_default(),
        RequestKind::Question => request.question.clone().unwrap_or_default(),
    };
    let head_class = match kind {
        RequestKind::Approval => "mono tool-name",
        RequestKind::Question => "request-question",
    };
    let body = match request.decision.clone() {
        Some(outcome) => view! { <RequestOutcomeView outcome/> }.into_any(),
        None => view! { <p class="muted" data-testid="request-settled-note">{note}</p> }.into_any(),
    };
    view! {
        <article class="approval-card settled request-card" data-testid="request-card"
            data-request-id=request.id.clone() data-kind=kind.as_str() data-status=request.status.as_str()>
            <header class="approval-head">
                <span class=head_class>{subject}</span>
            </header>
            <RequestSource request=request.clone()/>
            {body}
        </article>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_say_what_happens_and_when() {
        let now: DateTime<Utc> = "2026-01-01T12:00:00Z".parse().unwrap();
        let later: DateTime<Utc> = "2026-01-01T12:05:00Z".parse().unwrap();
        let approval = request_deadline_text(RequestKind::Approval, &later, now);
        assert!(
            approval.starts_with("rejected automatically at 2026-01-01 12:05:00 UTC if undecided (in "),
            "{approval}"
        );
        let question = request_deadline_text(RequestKind::Question, &later, now);
        assert!(question.starts_with("expires at 2026-01-01 12:05:00 UTC if unanswered"), "{question}");
        assert!(request_deadline_text(RequestKind::Approval, &now, later).starts_with("past its deadline"));
    }
}
