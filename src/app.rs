//! The HTML shell and the root component: top navigation (with the count of
//! pending approvals, live from the all-runs event stream) and the route table.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::{
    components::{Route, Router, Routes, A},
    path, SsrMode,
};

use crate::api::pending_approval_count;
use crate::components::approval_card::DecisionsMade;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;
use crate::pages::{
    approvals::ApprovalsPage, outbox::OutboxPage, playground::PlaygroundPage, runs::RunsPage, settings::SettingsPage,
    trace::TracePage,
};

/// How often the navigation's approvals badge is refreshed while the live
/// event stream is down.
const BADGE_POLL_EVERY: Duration = Duration::from_secs(15);

/// The full HTML document the server streams for every page.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <HydrationScripts options/>
                <MetaTags/>
                <link rel="stylesheet" href="/pkg/runlens.css"/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The application: navigation bar plus one page per route.
///
/// Every route renders with [`SsrMode::Async`]: the server waits for the page's
/// data and sends complete HTML, so pages read fine without JavaScript (out-of-order
/// streaming would need JS to move the streamed fragments into place) and the
/// trace page can answer 404 for an unknown run.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(DecisionsMade(RwSignal::new(0)));
    RunsFeed::provide();
    mark_hydrated();

    view! {
        <Router>
            <header class="topbar">
                <a class="logo" href="/runs">
                    <span class="logo-mark">"◉"</span>
                    "runlens"
                </a>
                <nav class="nav">
                    <A href="/runs">"Runs"</A>
                    <A href="/approvals">"Approvals" <ApprovalsBadge/></A>
                    <A href="/playground">"Playground"</A>
                    <A href="/outbox">"Outbox"</A>
                    <A href="/settings">"Settings"</A>
                </nav>
            </header>
            <main class="content">
                <Routes fallback=|| view! { <NotFound/> }>
                    <Route path=path!("/") view=RunsPage ssr=SsrMode::Async/>
                    <Route path=path!("/runs") view=RunsPage ssr=SsrMode::Async/>
                    <Route path=path!("/runs/:id") view=TracePage ssr=SsrMode::Async/>
                    <Route path=path!("/playground") view=PlaygroundPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals") view=ApprovalsPage ssr=SsrMode::Async/>
                    <Route path=path!("/outbox") view=OutboxPage ssr=SsrMode::Async/>
                    <Route path=path!("/settings") view=SettingsPage ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

/// The number of tool calls waiting for a decision, next to "Approvals" in
/// the navigation; hidden when there are none. Refreshed when the all-runs
/// stream reports a status change or a call needing approval changing, right
/// after a decision made here, and every 15 s while the stream is down.
#[component]
fn ApprovalsBadge() -> impl IntoView {
    let tick = RwSignal::new(0u64);
    let feed = RunsFeed::get();
    poll_while(feed.failed, tick, BADGE_POLL_EVERY);
    let made = use_context::<DecisionsMade>().map(|d| d.0);
    let count =
        Resource::new(move || (feed.version.get(), tick.get(), made.map(|m| m.get())), |_| pending_approval_count());
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let n = count.await.unwrap_or(0);
                let title = format!("{n} tool call(s) waiting for a decision");
                view! {
                    <span class="nav-badge" data-testid="approvals-badge" data-count=n.to_string()
                        hidden=n == 0 title=title>{n}</span>
                }
            })}
        </Transition>
    }
}

/// Sets `data-hydrated="true"` on `<body>` once the browser bundle has taken over.
///
/// Effects never run on the server, so the attribute only appears after
/// hydration; the end-to-end tests wait for it before clicking. The write is
/// deferred one animation frame so the resources serialized into the page have
/// resolved and their `<Suspense>` contents are hydrated too.
fn mark_hydrated() {
    Effect::new(move |_| {
        request_animation_frame(|| {
            if let Some(body) = document().body() {
                let _ = body.set_attribute("data-hydrated", "true");
            }
        });
    });
}

/// Shown for any path the router does not know.
#[component]
fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(axum::http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found · runlens"/>
        <div class="empty">
            <h1>"Page not found"</h1>
            <p><a href="/runs">"Back to runs"</a></p>
        </div>
    }
}
