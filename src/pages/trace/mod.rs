//! `/runs/:id`: one run's trace as a workbench, updated live while the run
//! is active: the tree pane of every step and call on the left ([`tree`]);
//! on the right the header, timeline and token chart, the detail pane —
//! one step in full, the one selected ([`detail`]) — and the transcript,
//! folded.
//!
//! Live updates: the hydrated page follows the run's event stream (see
//! [`stream`]) and refetches the trace when something was stored, while
//! streamed text grows in place. Without JavaScript a `<noscript>` meta
//! refresh reloads the page instead, except while the run is paused: the
//! person is then filling in an approval form, which a reload would wipe.
//!
//! Scale: a long run's steps come a page at a time (`?from=N` shows the page
//! holding step N), its transcript by its latest messages, and its token
//! chart after the page is up; search runs on the server (see [`search`]).
//!
//! Conversation control: the transcript's human messages can be edited (which
//! forks the run), a follow-up box sits under the transcript, and a branch
//! tree shows the run's family. Time travel (see [`fork_panel`]): each
//! completed model step can be forked from with its tool results or answer
//! changed, a fork made so marks its inherited steps and the fork point, and
//! a finished run can be replayed. The page content is rebuilt from scratch
//! when the route moves to another run (a fork, a family link), so no DOM
//! state (open editors, folded steps) carries over from one run to the next.

mod approvals;
mod child_run;
mod clock;
mod deliveries;
mod detail;
mod family;
mod follow_up;
mod fork_panel;
mod header;
mod model_call;
mod overview;
mod requests;
mod scores;
mod search;
mod selection;
mod spans;
mod steps;
mod stream;
mod to_dataset;
mod tool_call;
mod transcript;
mod transcript_tail;
mod tree;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use runlens_engine::model::{FamilyMember, RunStatus};

use crate::api::preview::{get_trace_page, Cuts, TracePage as TracePageData};
use crate::api::trace_window::LiveTrace;
use crate::api::{get_family, CancelRun, EditMessage, SendFollowUp};
use crate::components::approval_card::DecisionActions;
use crate::components::Loaded;
use crate::format;
use crate::pages::to_review::{AddToReview, ReviewTarget};

#[component]
pub fn TracePage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let asked_from = Memo::new(move |_| query.read().get("from").and_then(|f| f.trim().parse::<u32>().ok()));
    // Without `?from=`, a long run that was watched live stays on its latest
    // page when it finishes (rather than jumping to its first).
    let follow_latest = RwSignal::new(None::<String>);
    let from = Memo::new(move |_| {
        let latest = follow_latest.with(|f| f.as_deref() == Some(id.read().as_str()));
        asked_from.get().or(latest.then_some(u32::MAX))
    });
    // While the run waits on active child runs, their changes (which its
    // own stream does not carry) come through the all-runs feed.
    let feed = crate::live_updates::RunsFeed::get();
    let watch_tree = RwSignal::new(false);
    let tree_version = Memo::new(move |_| if watch_tree.get() { feed.version.get() } else { 0 });
    let cancel = ServerAction::<CancelRun>::new();
    let actions = DecisionActions::new();
    let conversation = Conversation { follow_up: ServerAction::new(), edit: ServerAction::new() };
    // Forks and replays navigate to the new run; their errors stay here.
    fork_panel::ForkActions::provide(id);
    // Page-level state: it outlives the views a live refetch rebuilds.
    let page = PageState {
        live: stream::Live::new(),
        search: search::Search::new(),
        chart: overview::BigChart::new(),
        tail: transcript_tail::TranscriptTail::new(),
        briefs: child_run::Briefs::new(),
        clock: clock::LiveClock::new(),
        tree: tree::TreeState::new(),
        detail: detail::Detail::new(asked_from),
    };
    crate::components::node_select::provide_navigator(page.detail.navigator());
    // The tree's cursor is on the step the detail pane shows.
    Effect::new(move |_| {
        if let Some(index) = page.detail.drawn.get() {
            page.tree.show_step(index);
        }
    });
    provide_context(page.briefs);
    provide_context(page.clock);
    let trace = crate::resource::new(
        move || {
            (
                id.get(),
                from.get(),
                page.live.changed.get(),
                cancel.version().get(),
                actions.version(),
                conversation.follow_up.version().get(),
                tree_version.get(),
            )
        },
        |(id, from, ..)| get_trace_page(id, from),
    );
    let family = crate::resource::new(
        move || (id.get(), page.live.status_changed.get(), conversation.follow_up.version().get()),
        |(id, ..)| get_family(id),
    );
    deliveries::provide(id, page.live.status_changed);
    requests::provide(id, page.live.status_changed);
    scores::provide(id, page.live.status_changed);
    follow_loaded(trace, page, follow_latest, watch_tree);
    select_from_url(trace);
    Effect::new(move |_| {
        id.track();
        page.search.reset();
        page.live.reset_announcement();
        page.detail.reset();
    });

    // Keyed on the run id: another run gets fresh DOM (see the module docs).
    // The status announcer stays outside, so it is in the page before it speaks.
    let content = move || {
        id.track();
        view! {
            <Loaded load=move || async move { Ok((trace.await?, family.await.unwrap_or_default())) }
                loading="Loading trace…" keep_previous=true let:loaded>
                {match loaded {
                    (Some(data), family) => {
                        let (mut view, cuts) = (data.trace, data.cuts);
                        page.live.apply_calls(&mut view);
                        view! { <Trace view cuts family cancel actions conversation page/> }.into_any()
                    }
                    (None, _) => view! { <RunNotFound id=id.get_untracked()/> }.into_any(),
                }}
            </Loaded>
        }
    };
    // The tree pane lives outside the content a live refresh rebuilds: its
    // scroll position, focus and rows stay while the run moves on.
    // It is drawn on the server too (empty until the trace loads), so the
    // page is laid out once, in its two panes.
    view! {
        <stream::Announcer live=page.live/>
        <div class="trace-workbench">
            <tree::TreePane state=page.tree/>
            <div class="trace-main">{content}</div>
        </div>
    }
}

/// Follows the loaded run's stream while it is active, and keeps the page
/// state in step with it: the chart, the transcript tail, staying on the
/// latest page of a long run watched live (`follow_latest`), and watching
/// the all-runs feed while it waits on child runs (`watch_tree`). An effect,
/// because reading a resource outside <Suspense> during hydration is not
/// allowed (and only the browser needs it).
fn follow_loaded(
    trace: crate::resource::Res<Result<Option<TracePageData>, ServerFnError>>,
    page: PageState,
    follow_latest: RwSignal<Option<String>>,
    watch_tree: RwSignal<bool>,
) {
    Effect::new(move |_| {
        trace.with(|t| {
            if let Some(Ok(Some(page_data))) = t {
                let v = &page_data.trace;
                page.live.track(&v.run.id, !v.run.status.is_terminal(), v.stream_after);
                page.clock.set(v.now, !v.run.status.is_terminal());
                page.chart.track(v);
                if v.paged()
                    && !v.run.status.is_terminal()
                    && follow_latest.with_untracked(|f| f.as_ref() != Some(&v.run.id))
                {
                    follow_latest.set(Some(v.run.id.clone()));
                }
                page.tail.track(v, page.live.changed.get_untracked());
                let waits_on_children = !v.run.status.is_terminal() && v.run.child_count > 0;
                if watch_tree.get_untracked() != waits_on_children {
                    watch_tree.set(waits_on_children);
                }
            }
        })
    });
}

/// Once a run's trace has loaded, selects the node the URL's fragment
/// names (`#step-3`, `#call-…`, `#span-…`; see `node_select::mark_selected`), opening
/// it: a shared link lands on the same node. Once per run and page shown
/// (the tree pane opens a node on another page of a long run by loading
/// that page with the node in the fragment); and whenever the fragment
/// changes to a node.
fn select_from_url(trace: crate::resource::Res<Result<Option<TracePageData>, ServerFnError>>) {
    let done_for = StoredValue::new(None::<(String, u32)>);
    Effect::new(move |_| {
        let Some(shown) = trace.with(|t| match t {
            Some(Ok(Some(data))) => Some((data.trace.run.id.clone(), data.trace.steps_from())),
            _ => None,
        }) else {
            return;
        };
        if done_for.with_value(|d| d.as_ref() == Some(&shown)) {
            return;
        }
        done_for.set_value(Some(shown));
        if let Some(node) = node_in_url() {
            request_animation_frame(move || {
                crate::components::node_select::select_node(&node);
            });
        }
    });
    // An in-page link to a node (`href="#step-0"`) shows it in the detail.
    #[cfg(feature = "hydrate")]
    {
        let handle = window_event_listener(leptos::ev::hashchange, move |_| {
            if let Some(node) = node_in_url() {
                crate::components::node_select::select_node(&node);
            }
        });
        on_cleanup(move || handle.remove());
    }
}

/// The trace node the URL's fragment names, if it names one.
fn node_in_url() -> Option<String> {
    let hash = window().location().hash().unwrap_or_default();
    let node = hash.trim_start_matches('#');
    ["step-", "call-", "span-"].iter().any(|p| node.starts_with(p)).then(|| node.to_owned())
}

/// The page's conversation actions; they outlive the views that a live
/// refresh re-creates.
#[derive(Clone, Copy)]
struct Conversation {
    follow_up: ServerAction<SendFollowUp>,
    edit: ServerAction<EditMessage>,
}

/// Live stream, search, and the long-run chart and transcript of the page.
#[derive(Clone, Copy)]
struct PageState {
    live: stream::Live,
    search: search::Search,
    chart: overview::BigChart,
    tail: transcript_tail::TranscriptTail,
    briefs: child_run::Briefs,
    clock: clock::LiveClock,
    tree: tree::TreeState,
    detail: detail::Detail,
}

/// The loaded trace: header (with the approvals), timeline and tokens,
/// the detail pane, transcript.
#[component]
fn Trace(
    view: LiveTrace,
    cuts: Cuts,
    family: Vec<FamilyMember>,
    cancel: ServerAction<CancelRun>,
    actions: DecisionActions,
    conversation: Conversation,
    page: PageState,
) -> impl IntoView {
    let run = view.run.clone();
    let now = view.now;
    let active = !run.status.is_terminal();
    let reload_without_js = active && run.status != RunStatus::Paused;
    // The approvals area looks at the latest step, on this page or not.
    let latest: Vec<_> = view.latest().cloned().into_iter().collect();
    let latest_index = view.latest().map(|s| s.index);
    let area_run = run.clone();
    let cost = view.pricing.run_cost_usd(&run);
    // The run name is user data; leptos_meta does not escape titles.
    let title = format::rcdata_text(&format!("{} · runlens", header::display_name(&run)));
    let run_id = run.id.clone();
    // Long values were cut to previews; the views below link to them in full.
    provide_context(cuts);
    // The controls the caller's role allows (see `CallerRole`).
    // A run recorded from OpenTelemetry spans offers none: runlens did not
    // run it (the header says so).
    let role =
        if run.source.is_some() { view.role.map(|r| r.min(runlens_engine::model::Role::Viewer)) } else { view.role };
    crate::components::CallerRole::provide(role);
    // The child runs the step tree nests under their calls.
    let tree = view.tree.clone();
    provide_context(child_run::TreeInfo {
        children: std::sync::Arc::new(tree.as_ref().map(|t| t.children.clone()).unwrap_or_default()),
        names: std::sync::Arc::new(tree.as_ref().map(|t| t.agents.clone()).unwrap_or_default()),
    });
    let tree_pending = tree.as_ref().map(|t| t.pending.clone()).unwrap_or_default();
    let fork_point = fork_panel::ForkPoint::of(&run, &family);

    view! {
        <Title text=title/>
        {reload_without_js.then(no_script_refresh)}
        <header::RunHeader run=run.clone() cost now cancel tree>
            <approvals::ApprovalArea run=area_run steps=latest now actions/>
            <approvals::TreeApprovals items=tree_pending now actions/>
        </header::RunHeader>
        {active.then(|| view! { <stream::LivePreview live=page.live stored_up_to=latest_index/> })}
        <family::FamilyTree members=family current=run_id/>
        <scores::ScoresSection run_id=run.id.clone() role=view.role/>
        <to_dataset::AddToDataset run_id=run.id.clone() ended=run.status.is_terminal() role=view.role/>
        {run.status.is_terminal().then(|| view! {
            <AddToReview target=ReviewTarget::Run(run.id.clone()) role=view.role/>
        })}
        <requests::RunRequestsSection/>
        <deliveries::Deliveries/>
        <overview::Overview view=view.clone() chart=page.chart live=page.live/>
        <StepsSection view=view.clone() page fork_point/>
        <spans::OtherSpans spans=view.spans.clone()/>
        <transcript_tail::TranscriptSection view tail=page.tail edit=conversation.edit
            follow_up=conversation.follow_up/>
    }
}

/// The search box, the pager of a long run, the detail pane (the step
/// selected among those on the page) and the step being streamed.
#[component]
fn StepsSection(view: LiveTrace, page: PageState, fork_point: Option<fork_panel::ForkPoint>) -> impl IntoView {
    let paged = view.paged();
    let count = if paged { view.run.step_count as usize } else { view.steps.len() };
    let from = view.steps_from();
    let shown = (from, view.steps.last().map_or(from, |s| s.index));
    let on_last_page = view.latest_step.is_none();
    let stored_up_to = view.latest().map(|s| s.index);
    let tree = steps::TreeContext {
        run_id: view.run.id.clone(),
        cut_calls: std::sync::Arc::new(view.cut_calls.iter().cloned().collect()),
        search: page.search,
        fork_point,
        model: view.run.model.clone(),
        tools: view.run.tools.join(", "),
        ingested: view.run.source.is_some(),
    };
    let steps: Vec<_> = view.steps.iter().map(|s| (s.clone(), view.step_cost(s))).collect();
    let pager =
        paged.then(|| view! { <overview::StepPager run_id=view.run.id.clone() from step_count=view.run.step_count/> });
    page.tree.sync(&view);
    page.detail.load(&view);
    view! {
        <section class="section" id="steps">
            <h2>"Steps " <span class="count">{count}</span></h2>
            <search::TraceSearch search=page.search run_id=tree.run_id.clone() shown/>
            {pager}
            <steps::StepDetail steps now=view.now tree detail=page.detail count=count as u32
                newest_here=on_last_page/>
            {on_last_page.then(|| view! { <stream::StreamingStep live=page.live stored_up_to/> })}
        </section>
    }
}

/// `<noscript><meta http-equiv="refresh" content="2"></noscript>`, emitted as
/// one inert element.
///
/// With scripting enabled the browser parses `<noscript>` content as a single
/// text node, so a normal `<meta>` child would not match during hydration; an
/// inert element is hydrated as one opaque node and never looked inside. The
/// markup is a compile-time constant, not user data.
fn no_script_refresh() -> impl IntoView {
    leptos::tachys::html::InertElement::new(r#"<noscript><meta http-equiv="refresh" content="2"></noscript>"#)
}

/// Shown (with a 404 status on the server) when the id matches no run.
#[component]
fn RunNotFound(id: String) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(axum::http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Run not found · runlens"/>
        <div class="empty" data-testid="run-not-found">
            <h1>"Run not found"</h1>
            <p>"There is no run with id " <code>{id}</code> "."</p>
            <p><a href="/runs">"← All runs"</a></p>
        </div>
    }
}
