//! `/approvals`: the inbox of the tool calls waiting for a decision, across
//! runs, oldest first, 50 to a page, with the same card as the trace page.
//!
//! The page's place and filters live in the URL query (`tool`,
//! `older_than_s`, `newer_than_s`, `cursor`) and are set by a plain GET form
//! and plain links ("Next page", "First page"), so the page works and can be
//! bookmarked without JavaScript. The count above the cards is every call
//! waiting in the project, whatever the filters (the store keeps it).
//!
//! The hydrated page refetches its page when the all-runs event stream
//! reports a change (a run pausing, a call being decided), after each
//! decision here, and every 15 s while that stream is down.
//! Cards keep their place for the life of the page: a call that stops being
//! pending (decided here, elsewhere, or by a timeout) leaves a note where its
//! card was instead of vanishing, so the other cards never shift and what the
//! user is typing in them stays attached to the right call.
//!
//! Above them, "From other agents": the pending requests of agents runlens
//! does not run (approval requests and questions, see [`RequestsInbox`]),
//! kept in place the same way, paged by their own `requests_cursor`.

use std::collections::HashMap;
use std::time::Duration;

use leptos::either::Either;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::{AgentRequest, ApprovalDecision, Interruption, Role};

use crate::api::requests::PendingRequests;
use crate::api::{list_pending_approvals, ErrorKind, InboxQuery, PendingApprovals};
use crate::components::approval_card::{ApprovalCard, DecisionActions};
use crate::components::approval_decision::SettledCall;
use crate::components::request_card::{RequestActions, RequestCard, SettledRequest};
use crate::components::{server_error_message, ErrorBox, Loaded};
use crate::format;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;
use crate::pages::approvals_decided::ApprovalTabs;

/// How often the inbox looks for new pending calls while the stream is down.
const POLL_EVERY: Duration = Duration::from_secs(15);

/// How often the inbox looks for new (or decided) requests of other agents:
/// the all-runs stream does not carry them.
const REQUESTS_POLL_EVERY: Duration = Duration::from_secs(10);

/// The age filters' choices: (seconds, label).
const AGES: [(u64, &str); 5] =
    [(300, "5 minutes"), (3600, "1 hour"), (86_400, "1 day"), (604_800, "1 week"), (2_592_000, "30 days")];

/// The inbox query as the URL says it; a value that is not a number is no
/// filter.
fn read_query(get: impl Fn(&str) -> Option<String>) -> InboxQuery {
    let text = |k: &str| get(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let secs = |k: &str| text(k).and_then(|v| v.parse::<u64>().ok());
    InboxQuery {
        tool: text("tool"),
        older_than_s: secs("older_than_s"),
        newer_than_s: secs("newer_than_s"),
        cursor: text("cursor"),
    }
}

/// `/approvals` with `query`'s filters, at `cursor` (the first page for `None`).
fn inbox_href(query: &InboxQuery, cursor: Option<&str>) -> String {
    let (older, newer) = (query.older_than_s.map(|s| s.to_string()), query.newer_than_s.map(|s| s.to_string()));
    let qs = format::query_string([
        ("tool", query.tool.as_deref().unwrap_or_default()),
        ("older_than_s", older.as_deref().unwrap_or_default()),
        ("newer_than_s", newer.as_deref().unwrap_or_default()),
        ("cursor", cursor.unwrap_or_default()),
    ]);
    if qs.is_empty() {
        "/approvals".to_owned()
    } else {
        format!("/approvals?{qs}")
    }
}

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let actions = DecisionActions::new();
    let tick = RwSignal::new(0u64);
    let feed = RunsFeed::get();
    poll_while(feed.failed, tick, POLL_EVERY);
    let url = use_query_map();
    let query = Memo::new(move |_| read_query(|k| url.read().get(k)));
    // Each answer comes with the query it answers (what the cards' slots are kept for).
    let list = crate::resource::new(
        move || (query.get(), feed.version.get(), tick.get(), actions.version()),
        |(q, ..)| async move { list_pending_approvals(q.clone()).await.map(|page| (q, page)) },
    );
    // Every call shown on this page (these filters, this place) since it
    // loaded, in order of first appearance.
    let seen = StoredValue::new((InboxQuery::default(), Vec::<Interruption>::new()));
    // Decisions learnt from this page's own actions, by call id.
    let outcomes = RwSignal::new(HashMap::<String, ApprovalDecision>::new());
    remember_outcomes(actions, outcomes);

    view! {
        <Title text="Approvals · runlens"/>
        <div class="page-head">
            <h1>"Approvals"</h1>
            <span class="muted">"Tool calls waiting for a person, oldest first"</span>
        </div>
        <ApprovalTabs decided=false/>
        <RequestsInbox/>
        <InboxFilters query/>
        <Loaded load=move || async move { list.await } loading="Loading approvals…" keep_previous=true let:answer>
            {
                let (current, pending) = answer;
                seen.update_value(|(at, slots)| {
                    if *at != current {
                        *at = current.clone();
                        slots.clear();
                    }
                    merge_seen(slots, &pending.items)
                });
                let slots = seen.with_value(|(_, slots)| slots.clone());
                view! { <Inbox pending query=current slots outcomes=outcomes.get() actions/> }
            }
        </Loaded>
    }
}

/// The tool and age filters: a plain GET form (it starts again at the first page).
#[component]
fn InboxFilters(query: Memo<InboxQuery>) -> impl IntoView {
    let age_options = move |selected: Option<u64>| {
        AGES.iter()
            .map(|(secs, label)| {
                view! { <option value=secs.to_string() selected=selected == Some(*secs)>{*label}</option> }
            })
            .collect::<Vec<_>>()
    };
    view! {
        <form method="get" action="/approvals" class="filters" data-testid="approvals-filter">
            <label>
                <span>"Tool"</span>
                <input type="text" name="tool" placeholder="exact name, e.g. send_email"
                    data-testid="approvals-filter-tool"
                    value=move || query.read().tool.clone().unwrap_or_default()/>
            </label>
            <label>
                <span>"Waited at least"</span>
                <select name="older_than_s" data-testid="approvals-filter-older">
                    <option value="" selected=move || query.read().older_than_s.is_none()>"any time"</option>
                    {move || age_options(query.read().older_than_s)}
                </select>
            </label>
            <label>
                <span>"Waited at most"</span>
                <select name="newer_than_s" data-testid="approvals-filter-newer">
                    <option value="" selected=move || query.read().newer_than_s.is_none()>"any time"</option>
                    {move || age_options(query.read().newer_than_s)}
                </select>
            </label>
            <button type="submit" class="button" data-testid="approvals-filter-submit">"Filter"</button>
            <a class="button subtle" href="/approvals">"Clear"</a>
        </form>
    }
}

/// Appends the calls not seen before, keeping the order of first appearance.
fn merge_seen(seen: &mut Vec<Interruption>, current: &[Interruption]) {
    for item in current {
        match seen.iter_mut().find(|s| s.call_id == item.call_id && s.run_id == item.run_id) {
            Some(known) => *known = item.clone(),
            None => seen.push(item.clone()),
        }
    }
}

/// Records the decision each completed action learnt about (its own, or the
/// one that beat it), so the call's slot can show it.
fn remember_outcomes(actions: DecisionActions, outcomes: RwSignal<HashMap<String, ApprovalDecision>>) {
    let record = move |result: Option<Result<runlens_engine::model::ToolCall, crate::api::ApprovalError>>| {
        let learnt = match result {
            Some(Ok(call)) => call.approval.map(|d| (call.id, d)),
            Some(Err(e)) if e.kind == ErrorKind::AlreadyDecided => e.about.zip(e.won.map(|d| *d)),
            _ => None,
        };
        if let Some((id, decision)) = learnt {
            outcomes.update(|map| {
                map.insert(id, decision);
            });
        }
    };
    Effect::new(move |_| record(actions.approve.value().get()));
    Effect::new(move |_| record(actions.reject.value().get()));
}

#[component]
fn Inbox(
    pending: PendingApprovals,
    query: InboxQuery,
    slots: Vec<Interruption>,
    outcomes: HashMap<String, ApprovalDecision>,
    actions: DecisionActions,
) -> impl IntoView {
    let PendingApprovals { items, now, cut_calls, role, next_cursor, total } = pending;
    crate::components::CallerRole::provide(role);
    // Long arguments come cut to a preview; the cards link to them in full.
    provide_context(crate::components::preview::Cuts { calls: cut_calls, ..Default::default() });
    let filtered = query.tool.is_some() || query.older_than_s.is_some() || query.newer_than_s.is_some();
    let empty = items.is_empty().then(|| {
        let text = if filtered || query.cursor.is_some() {
            Either::Left(view! { <p>"No call waiting for a decision matches these filters on this page."</p> })
        } else {
            Either::Right(view! {
                <p>"Nothing is waiting for a decision."</p>
                <p>"Runs pause here when they call a tool that needs approval, such as "
                    <code>"send_email"</code> "."</p>
            })
        };
        view! { <div class="empty" data-testid="approvals-empty">{text}</div> }
    });
    let cards = slots
        .into_iter()
        .map(|slot| {
            if items.iter().any(|i| i.call_id == slot.call_id && i.run_id == slot.run_id) {
                return Either::Left(view! { <ApprovalCard item=slot now actions show_run=true/> });
            }
            let run_href = format!("/runs/{}", format::url_encode(&slot.run_id));
            let decision = outcomes.get(&slot.call_id).cloned();
            let note = "Decided elsewhere (or timed out): the run's trace shows the decision.";
            Either::Right(view! {
                <SettledCall tool=slot.tool_name call_id=slot.call_id decision note run_href/>
            })
        })
        .collect::<Vec<_>>();
    let first = query.cursor.is_some().then(|| inbox_href(&query, None));
    let next = next_cursor.map(|c| inbox_href(&query, Some(&c)));
    let shown = (!items.is_empty()).then(|| {
        let text = if filtered { " matching on this page" } else { " on this page" };
        view! { <span class="muted" data-testid="approvals-page-count">" · " {items.len()} {text}</span> }
    });

    view! {
        <p class="inbox-count">
            <span data-testid="approvals-count">{total}</span>
            {if total == 1 { " call waits" } else { " calls wait" }} " for a decision"
            {shown}
        </p>
        {empty}
        <div class="approval-list" data-testid="approvals-list">{cards}</div>
        <div class="pager">
            {first.map(|href| view! { <a class="button" href=href data-testid="approvals-first-page">"← First page"</a> })}
            " "
            {next.map(|href| {
                view! { <a class="button" href=href data-testid="approvals-next-page">"Next page (newer) →"</a> }
            })}
        </div>
    }
}

/// "From other agents": one page of the project's pending requests from
/// agents runlens does not run, oldest first, shown when there are any.
/// Refetched after each decision here and every [`REQUESTS_POLL_EVERY`]; a
/// request that stops being pending keeps its place, showing its outcome.
#[component]
fn RequestsInbox() -> impl IntoView {
    use crate::api::requests::list_agent_requests;

    let actions = RequestActions::new();
    let tick = RwSignal::new(0u64);
    poll_while(RwSignal::new(true), tick, REQUESTS_POLL_EVERY);
    let url = use_query_map();
    let cursor = Memo::new(move |_| url.read().get("requests_cursor").filter(|c| !c.trim().is_empty()));
    let list = crate::resource::new(
        move || (cursor.get(), tick.get(), actions.version()),
        |(cursor, ..)| async move { list_agent_requests(cursor.clone()).await.map(|page| (cursor, page)) },
    );
    // Every request shown at this place since the page loaded, in order of
    // first appearance, and the outcomes this page's own decisions learnt.
    let seen = StoredValue::new((None::<String>, Vec::<AgentRequest>::new()));
    let outcomes = RwSignal::new(HashMap::<String, AgentRequest>::new());
    actions.on_decided(move |request| {
        outcomes.update(|map| {
            map.insert(request.id.clone(), request);
        })
    });
    view! {
        // No placeholder while loading: the section shows only when there are requests.
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let (current, page) = match list.await {
                    Ok(answer) => answer,
                    Err(e) => {
                        let message = format!("Requests from other agents: {}", server_error_message(&e));
                        return view! { <ErrorBox message testid="requests-error"/> }.into_any();
                    }
                };
                seen.update_value(|(at, known)| {
                    if *at != current {
                        *at = current.clone();
                        known.clear();
                    }
                    for item in &page.requests {
                        match known.iter_mut().find(|k| k.id == item.id) {
                            Some(k) => *k = item.clone(),
                            None => known.push(item.clone()),
                        }
                    }
                });
                let slots = seen.with_value(|(_, known)| known.clone());
                view! { <RequestList page slots outcomes=outcomes.get() actions current/> }.into_any()
            })}
        </Transition>
    }
}

/// The requests section: a card for each pending request, the outcome (or
/// a note) for each one seen here that was decided since.
#[component]
fn RequestList(
    page: PendingRequests,
    slots: Vec<AgentRequest>,
    outcomes: HashMap<String, AgentRequest>,
    actions: RequestActions,
    current: Option<String>,
) -> impl IntoView {
    let PendingRequests { requests, next_cursor, recent, role, now } = page;
    if slots.is_empty() && current.is_none() {
        return None;
    }
    let may_decide = role.is_some_and(|r| r >= Role::Approver);
    let pending = requests.len();
    let cards = slots
        .into_iter()
        .map(|slot| {
            if let Some(request) = requests.iter().find(|r| r.id == slot.id) {
                return Either::Left(view! { <RequestCard request=request.clone() now actions may_decide/> });
            }
            let decided = outcomes.get(&slot.id).or_else(|| recent.iter().find(|r| r.id == slot.id));
            let request = match decided {
                Some(d) => AgentRequest { status: d.status, decision: d.decision.clone(), ..slot },
                None => slot,
            };
            Either::Right(view! {
                <SettledRequest request note="Decided elsewhere (or timed out); the agent has been told."/>
            })
        })
        .collect::<Vec<_>>();
    let requests_href = |cursor: Option<&str>| {
        let qs = format::query_string([("requests_cursor", cursor.unwrap_or_default())]);
        if qs.is_empty() {
            "/approvals".to_owned()
        } else {
            format!("/approvals?{qs}")
        }
    };
    let first = current.is_some().then(|| requests_href(None));
    let next = next_cursor.map(|c| requests_href(Some(&c)));
    Some(view! {
        <section class="section requests-inbox" data-testid="requests-inbox" aria-labelledby="requests-heading">
            <h2 id="requests-heading">
                "From other agents " <span class="count" data-testid="requests-count">{pending}</span>
            </h2>
            <p class="muted">
                "Approvals and questions that agents sent through the REST API, oldest first. "
                "The agent waits for your decision."
            </p>
            <div class="approval-list" data-testid="requests-list">{cards}</div>
            <div class="pager">
                {first.map(|href| view! { <a class="button" href=href data-testid="requests-first-page">"← First requests"</a> })}
                " "
                {next.map(|href| view! { <a class="button" href=href data-testid="requests-next-page">"More requests →"</a> })}
            </div>
        </section>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_carries_the_filters_and_the_place() {
        let q = read_query(|k| {
            [("tool", " send_email "), ("older_than_s", "3600"), ("newer_than_s", "x"), ("cursor", "1_0_0_r")]
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| (*v).to_owned())
        });
        let expected = InboxQuery {
            tool: Some("send_email".into()),
            older_than_s: Some(3600),
            newer_than_s: None,
            cursor: Some("1_0_0_r".into()),
        };
        assert_eq!(q, expected);
        assert_eq!(
            inbox_href(&q, Some("2_0_1_r x")),
            "/approvals?tool=send_email&older_than_s=3600&cursor=2_0_1_r%20x"
        );
        assert_eq!(inbox_href(&q, None), "/approvals?tool=send_email&older_than_s=3600");
        assert_eq!(inbox_href(&InboxQuery::default(), None), "/approvals");
    }
}
