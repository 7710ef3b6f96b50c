//! How a decision on a tool call is shown: who decided what and when, the
//! "always" flag, the comment or reason, and the original next to the edited
//! arguments when a person changed them.

use leptos::prelude::*;
use runlens_engine::model::{ApprovalDecision, Decision};

use super::{Badge, JsonBlock};
use crate::format;

/// Who decided, in words: a person's name; a key's name marked as a key;
/// the approval timeout; or `web` / `api` for decisions recorded before
/// people signed in.
pub fn decider_label(by: &str, by_id: Option<&str>) -> String {
    match (by, by_id) {
        (_, Some("system")) | ("system", None) => "the approval timeout".to_string(),
        (_, Some(id)) if id.starts_with("key:") => format!("{by} (API key)"),
        (_, Some(id)) if id.starts_with("user:") => by.to_string(),
        ("web", None) => "web (the dashboard)".to_string(),
        ("api", None) => "api (the REST API)".to_string(),
        (other, _) => other.to_string(),
    }
}

/// One recorded decision.
#[component]
pub fn DecisionView(
    decision: ApprovalDecision,
    /// The tool the call was for (an approved `send_email` links to the outbox).
    #[prop(into)]
    tool: String,
    /// `data-testid`; `approval-decision` unless told otherwise.
    #[prop(optional)]
    testid: Option<&'static str>,
) -> impl IntoView {
    let ApprovalDecision {
        decision,
        decided_by,
        decided_by_id,
        decided_at,
        always,
        original_arguments,
        edited_arguments,
        comment,
        ..
    } = decision;
    let approved = decision == Decision::Approved;
    let word = decision.as_str();
    let always_text = always.then(|| {
        let verb = if approved { "approve" } else { "reject" };
        view! {
            <span class="decision-always" data-testid="decision-always">
                "always " {verb} " " <code>{tool.clone()}</code> " in this run"
            </span>
        }
    });
    let outbox = (approved && tool == "send_email").then(|| {
        view! { <a class="outbox-link" href="/outbox" data-testid="outbox-link">"See it in the outbox →"</a> }
    });
    let comment_label = if approved { "Comment" } else { "Reason (sent to the model)" };

    view! {
        <div class=format!("approval-decision decision-{word}") data-testid=testid.unwrap_or("approval-decision")
            data-decision=word data-decided-by=decided_by.clone()>
            <div class="decision-line">
                <Badge status=word/>
                <span>
                    "by " <strong data-testid="decision-by">{decider_label(&decided_by, decided_by_id.as_deref())}</strong>
                    " at " <span data-testid="decision-at">{format::time(&decided_at)}</span> " UTC"
                </span>
                {always_text}
                <span class="spacer"></span>
                {outbox}
            </div>
            {comment.map(|c| view! {
                <div class="label">{comment_label}</div>
                <p class="decision-comment" data-testid="decision-comment">{c}</p>
            })}
            {edited_arguments.map(|edited| view! {
                <div class="decision-args">
                    <div>
                        <div class="label">"Original arguments (from the model)"</div>
                        <JsonBlock value=original_arguments testid="decision-original"/>
                    </div>
                    <div>
                        <div class="label">"Edited arguments (what ran)"</div>
                        <JsonBlock value=edited testid="decision-edited"/>
                    </div>
                </div>
            })}
        </div>
    }
}

/// A call that no longer waits for a decision, where its card used to be:
/// the decision when known, or a short note (cancelled, decided elsewhere).
#[component]
pub fn SettledCall(
    #[prop(into)] tool: String,
    #[prop(into)] call_id: String,
    decision: Option<ApprovalDecision>,
    /// Shown when there is no decision to show.
    #[prop(into)]
    note: String,
    /// A link to the run, for lists across runs.
    #[prop(optional)]
    run_href: Option<String>,
    /// Still awaiting approval, just not decidable yet (shown muted).
    #[prop(optional)]
    waiting: bool,
) -> impl IntoView {
    let body = match decision {
        Some(d) => view! { <DecisionView decision=d tool=tool.clone() testid="approval-outcome"/> }.into_any(),
        None => view! { <p class="muted" data-testid="approval-outcome">{note}</p> }.into_any(),
    };
    let (call_attr, tool_attr) = (call_id.clone(), tool.clone());
    let testid = if waiting { "approval-waiting" } else { "approval-settled" };
    view! {
        <article class="approval-card settled" data-testid=testid data-call-id=call_attr
            data-tool=tool_attr>
            <header class="approval-head">
                <span class="mono tool-name">{tool}</span>
                <span class="mono sub" title="tool call id">{call_id}</span>
                <span class="spacer"></span>
                {run_href.map(|href| view! { <a href=href>"Open the run →"</a> })}
            </header>
            {body}
        </article>
    }
}

#[cfg(test)]
mod tests {
    use super::decider_label;

    #[test]
    fn deciders_read_as_people_keys_or_the_timeout() {
        assert_eq!(decider_label("ada", Some("user:0190")), "ada");
        assert_eq!(decider_label("ci", Some("key:key_01")), "ci (API key)");
        assert_eq!(decider_label("runlens", Some("system")), "the approval timeout");
        assert_eq!(decider_label("system", None), "the approval timeout");
        assert_eq!(decider_label("web", None), "web (the dashboard)");
    }
}
