//! The HTML shell and the root component: top navigation (with the count of
//! pending approvals, live from the all-runs event stream) and the route table.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    hooks::use_location,
    path, SsrMode,
};

use crate::api::{pending_approval_count, whoami, Me};
use crate::components::approval_card::DecisionsMade;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;
use crate::pages::{
    access::{KeysPage, ProjectsPage},
    agents::{AgentPage, AgentVersionPage, AgentsPage},
    approvals::ApprovalsPage,
    approvals_decided::DecidedApprovalsPage,
    audit::AuditPage,
    compare::ComparePage,
    datasets::{DatasetPage, DatasetsPage},
    evaluators::EvaluatorsPage,
    experiments::{ExperimentComparePage, ExperimentPage, ExperimentSetPage, ExperimentsPage},
    http_tools::HttpToolsPage,
    login::{LoginPage, SetupPage},
    outbox::OutboxPage,
    playground::PlaygroundPage,
    reviews::{ReviewPage, ReviewQueuePage, ReviewQueuesPage},
    runs::RunsPage,
    sessions::SessionPage,
    settings::SettingsPage,
    tools::ToolsPage,
    trace::TracePage,
};
use crate::theme::ThemeToggle;

/// How often the navigation's approvals badge is refreshed while the live
/// event stream is down.
const BADGE_POLL_EVERY: Duration = Duration::from_secs(15);

/// The full HTML document the server streams for every page. Its
/// `data-theme` is the theme the `runlens_theme` cookie chose (see
/// [`crate::theme`]), so the page comes in its colours from the first paint.
#[cfg(feature = "ssr")]
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let theme = crate::theme::current().as_str();
    view! {
        <!DOCTYPE html>
        <html lang="en" data-theme=theme>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <BundleScripts options/>
                <leptos_meta::MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The browser bundle of this build (its content-hashed file names, see
/// [`crate::server::assets`]): the stylesheet, hints that fetch the script
/// and the wasm at once, and the module that loads them and hydrates the
/// page (and marks `<html data-js>` at once, for styles that need
/// scripting). Until hydration ends the page shows [`HydrationState`]: the module
/// marks `<html data-bundle="loading">` as it starts and `"failed"` if the
/// bundle cannot load, so controls that need it do not fail silently.
#[cfg(feature = "ssr")]
#[component]
fn BundleScripts(options: LeptosOptions) -> impl IntoView {
    let bundle = crate::server::assets::Bundle::of_site(std::path::Path::new(&*options.site_root));
    let pkg = format!("/{}", options.site_pkg_dir);
    let js = format!("{pkg}/{}", bundle.js);
    let wasm = format!("{pkg}/{}", bundle.wasm);
    // The names are plain (letters, digits, `_-.`; checked when the
    // manifest is read), so they sit in the script's strings as they are.
    let script = format!(
        "const html = document.documentElement;\
         html.dataset.bundle = \"loading\";\
         import(\"{js}\")\
         .then(m => m.default({{ module_or_path: \"{wasm}\" }}).then(() => m.hydrate()))\
         .catch(e => {{ html.dataset.bundle = \"failed\"; console.error(e); }});"
    );
    view! {
        // A classic script, run before the body is parsed: styles for pages
        // that scripts drive (the trace's tree pane) apply from the first
        // layout, and not at all without JavaScript.
        <script>"document.documentElement.dataset.js = \"\";"</script>
        <link rel="stylesheet" href=format!("{pkg}/{}", bundle.css)/>
        <link rel="modulepreload" href=js.clone()/>
        <link rel="preload" href=wasm r#as="fetch" r#type="application/wasm" crossorigin=""/>
        <script type="module">{script}</script>
    }
}

/// What the page says while the browser bundle loads (and if it could not):
/// shown only once the bundle's module has started (`<html
/// data-bundle>`), hidden when hydration ends (`<body data-hydrated>`); so
/// without JavaScript, and on a hydrated page, nothing. The same markup on
/// the server and in the browser, so hydration matches.
#[component]
fn HydrationState() -> impl IntoView {
    view! {
        <p class="hydration-state" role="status">
            <span class="hydration-loading">"Loading the page's controls…"</span>
            <span class="hydration-failed">"The page's controls did not load — reload the page to try again."</span>
        </p>
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
            <HydrationState/>
            <TopBar/>
            // Keyboard shortcuts and their `?` overlay (issue 19).
            <crate::shortcuts::Shortcuts/>
            <main class="content">
                <Routes fallback=|| view! { <NotFound/> }>
                    <Route path=path!("/") view=RunsPage ssr=SsrMode::Async/>
                    <Route path=path!("/runs") view=RunsPage ssr=SsrMode::Async/>
                    <Route path=path!("/runs/:id") view=TracePage ssr=SsrMode::Async/>
                    <Route path=path!("/sessions/:id") view=SessionPage ssr=SsrMode::Async/>
                    <Route path=path!("/playground") view=PlaygroundPage ssr=SsrMode::Async/>
                    <Route path=path!("/agents") view=AgentsPage ssr=SsrMode::Async/>
                    <Route path=path!("/agents/:id") view=AgentPage ssr=SsrMode::Async/>
                    <Route path=path!("/agents/:id/versions/:version") view=AgentVersionPage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets") view=DatasetsPage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets/:id") view=DatasetPage ssr=SsrMode::Async/>
                    <Route path=path!("/evaluators") view=EvaluatorsPage ssr=SsrMode::Async/>
                    <Route path=path!("/reviews") view=ReviewQueuesPage ssr=SsrMode::Async/>
                    <Route path=path!("/reviews/:id") view=ReviewQueuePage ssr=SsrMode::Async/>
                    <Route path=path!("/reviews/:id/review") view=ReviewPage ssr=SsrMode::Async/>
                    <Route path=path!("/experiments") view=ExperimentsPage ssr=SsrMode::Async/>
                    <Route path=path!("/experiments/:id") view=ExperimentPage ssr=SsrMode::Async/>
                    <Route path=path!("/experiments/:id/compare") view=ExperimentComparePage ssr=SsrMode::Async/>
                    <Route path=path!("/experiments/sets/:id") view=ExperimentSetPage ssr=SsrMode::Async/>
                    <Route path=path!("/tools") view=ToolsPage ssr=SsrMode::Async/>
                    <Route path=path!("/tools/http") view=HttpToolsPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals") view=ApprovalsPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals/decided") view=DecidedApprovalsPage ssr=SsrMode::Async/>
                    <Route path=path!("/compare") view=ComparePage ssr=SsrMode::Async/>
                    <Route path=path!("/outbox") view=OutboxPage ssr=SsrMode::Async/>
                    <Route path=path!("/settings") view=SettingsPage ssr=SsrMode::Async/>
                    <Route path=path!("/settings/projects") view=ProjectsPage ssr=SsrMode::Async/>
                    <Route path=path!("/settings/keys") view=KeysPage ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async/>
                    <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                    <Route path=path!("/setup") view=SetupPage ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

/// Pages shown before anyone has signed in: their navigation asks the
/// server nothing that needs a caller.
pub fn is_public_page(path: &str) -> bool {
    matches!(path, "/login" | "/setup")
}

/// Where the main navigation's links go.
const NAV_HREFS: [&str; 14] = [
    "/runs",
    "/approvals",
    "/playground",
    "/compare",
    "/datasets",
    "/experiments",
    "/evaluators",
    "/reviews",
    "/agents",
    "/tools",
    "/tools/http",
    "/outbox",
    "/settings",
    "/audit",
];

/// The navigation link of `path`'s section: the longest of [`NAV_HREFS`]
/// that is `path` or a parent of it (`/tools/http` is HTTP tools, not Tools).
fn nav_section(path: &str) -> Option<&'static str> {
    NAV_HREFS
        .iter()
        .copied()
        .filter(|href| path == *href || path.strip_prefix(href).is_some_and(|rest| rest.starts_with('/')))
        .max_by_key(|href| href.len())
}

/// A link of the main navigation, marked `aria-current="page"` when the
/// page is in its section (one link at a time).
#[component]
fn NavLink(href: &'static str, children: Children) -> impl IntoView {
    let location = use_location();
    let current = move || (nav_section(&location.pathname.get()) == Some(href)).then_some("page");
    view! { <a href=href aria-current=current>{children()}</a> }
}

/// A named group of the main navigation's links.
#[component]
fn NavGroup(name: &'static str, children: Children) -> impl IntoView {
    let id = format!("nav-{}", name.to_lowercase());
    let labelled_by = id.clone();
    view! {
        <div class="nav-group" role="group" aria-labelledby=labelled_by>
            <span class="nav-group-name" id=id>{name}</span>
            {children()}
        </div>
    }
}

/// The top bar: the logo, and for a signed-in caller the page links, who
/// they are, the project switcher and the sign-out button. On the sign-in
/// and setup pages only the logo (a plain link: nobody is signed in yet).
#[component]
fn TopBar() -> impl IntoView {
    let location = use_location();
    let public = is_public_page(&location.pathname.get_untracked());
    let logo = view! {
        <a class="logo" href="/runs" rel="external">
            <span class="logo-mark">"◉"</span>
            "runlens"
        </a>
    };
    if public {
        return view! {
            <header class="topbar">
                {logo}
                <span class="spacer"></span>
                <ThemeToggle/>
            </header>
        }
        .into_any();
    }
    RunsFeed::connect();
    let me = crate::resource::new(|| (), |_| whoami());
    view! {
        <header class="topbar">
            {logo}
            // Phones: the links fold behind "Menu" (a checkbox, so it works without JavaScript).
            <input type="checkbox" id="nav-toggle" class="nav-toggle" aria-controls="main-nav"/>
            <label for="nav-toggle" class="nav-toggle-label button small subtle">"Menu"</label>
            <nav class="nav" id="main-nav" aria-label="Main">
                <NavGroup name="Observe">
                    <NavLink href="/runs">"Runs"</NavLink>
                    <NavLink href="/compare">"Compare"</NavLink>
                    <NavLink href="/outbox">"Outbox"</NavLink>
                </NavGroup>
                <NavGroup name="Act">
                    <NavLink href="/playground">"Playground"</NavLink>
                    <NavLink href="/approvals">"Approvals" <ApprovalsBadge/></NavLink>
                </NavGroup>
                <NavGroup name="Evaluate">
                    <NavLink href="/datasets">"Datasets"</NavLink>
                    <NavLink href="/experiments">"Experiments"</NavLink>
                    <NavLink href="/evaluators">"Evaluators"</NavLink>
                    <NavLink href="/reviews">"Reviews"</NavLink>
                </NavGroup>
                <NavGroup name="Build">
                    <NavLink href="/agents">"Agents"</NavLink>
                    <NavLink href="/tools">"Tools"</NavLink>
                    <NavLink href="/tools/http">"HTTP tools"</NavLink>
                </NavGroup>
                <NavGroup name="Admin">
                    <NavLink href="/settings">"Settings"</NavLink>
                    <NavLink href="/audit">"Audit"</NavLink>
                </NavGroup>
            </nav>
            <span class="spacer"></span>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    me.await.ok().flatten().map(|me| view! { <UserArea me/> })
                })}
            </Transition>
            <ThemeToggle/>
        </header>
    }
    .into_any()
}

/// Who is signed in, in which project with which role, the project switcher
/// (a plain form: it works without JavaScript) and the sign-out button.
#[component]
fn UserArea(me: Me) -> impl IntoView {
    let location = use_location();
    let next = move || {
        let search = location.search.get();
        let path = location.pathname.get();
        if search.is_empty() {
            path
        } else {
            format!("{path}?{search}")
        }
    };
    let role = me.role.map(|r| r.to_string()).unwrap_or_else(|| "no role".into());
    let switcher = match me.session && !me.projects.is_empty() {
        true => {
            let options = me
                .projects
                .iter()
                .map(|p| {
                    let selected = *p == me.project;
                    view! { <option value=p.clone() selected=selected>{p.clone()}</option> }
                })
                .collect::<Vec<_>>();
            view! {
                <form method="post" action="/session/project" class="project-switch" data-testid="project-switch">
                    <input type="hidden" name="next" value=next/>
                    <select name="project" aria-label="Project" data-testid="project-select">{options}</select>
                    <button type="submit" class="button small subtle" data-testid="project-switch-submit">
                        "Switch"
                    </button>
                </form>
            }
            .into_any()
        }
        false => view! { <span class="project-name" data-testid="project-name">{me.project.clone()}</span> }.into_any(),
    };
    let sign_out = me.session.then(|| {
        view! {
            <form method="post" action="/logout" class="inline-form">
                <button type="submit" class="button small subtle" data-testid="sign-out">"Sign out"</button>
            </form>
        }
    });
    let title = if me.instance_admin { "instance admin".to_string() } else { format!("{role} of {}", me.project) };
    view! {
        <div class="user-area" data-testid="user-area">
            {switcher}
            <span class="user-name" title=title>
                <strong data-testid="user-name">{me.name.clone()}</strong>
                " " <span class="muted" data-testid="user-role">{role}</span>
            </span>
            {sign_out}
        </div>
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
    let count = crate::resource::new(
        move || (feed.version.get(), tick.get(), made.map(|m| m.get())),
        |_| pending_approval_count(),
    );
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

#[cfg(test)]
mod tests {
    use super::nav_section;

    #[test]
    fn one_link_is_current_the_most_specific() {
        assert_eq!(nav_section("/tools/http"), Some("/tools/http"));
        assert_eq!(nav_section("/tools/http/"), Some("/tools/http"));
        assert_eq!(nav_section("/tools"), Some("/tools"));
        assert_eq!(nav_section("/tools/calculator"), Some("/tools"));
        assert_eq!(nav_section("/runs/r1/steps"), Some("/runs"));
        assert_eq!(nav_section("/runsx"), None);
        // Every page of the evaluation group has its link.
        assert_eq!(nav_section("/experiments/sets/s1"), Some("/experiments"));
        assert_eq!(nav_section("/reviews/q1/review"), Some("/reviews"));
        assert_eq!(nav_section("/datasets/d1"), Some("/datasets"));
        assert_eq!(nav_section("/evaluators"), Some("/evaluators"));
        assert_eq!(nav_section("/"), None);
    }
}
