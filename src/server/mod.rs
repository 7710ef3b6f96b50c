//! The axum server: one router for the REST API, the Leptos pages and their
//! server functions, and the static site (wasm bundle, CSS).
//!
//! [`router`] builds the whole app from an [`AppState`], so tests drive it
//! with `tower::ServiceExt::oneshot` without a socket; [`run`] serves it on a
//! listener until `shutdown` resolves, within the connection limits of
//! [`connections`]. Event streams and long-polls go through [`live`].

pub mod agui;
pub mod assets;
pub mod auth;
pub mod config;
pub mod connections;
pub mod error;
pub mod eval_cli;
pub mod extract;
pub mod guard;
pub mod live;
pub mod openapi;
pub mod panics;
pub mod routes;
pub mod state;

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::routing::{any, post};
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::services::ServeDir;
use tower_http::trace::TraceLayer;

use crate::app::{shell, App};
pub use config::Config;
pub use state::AppState;

/// Request bodies above this size are refused with 413.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The whole application as one router, behind [`guarded`].
pub fn router(state: AppState) -> Router {
    let origins = guard::Origins::new(state.public_origin.as_deref());
    let secure_cookie = state.public_origin.as_deref().is_some_and(|o| o.starts_with("https://"));
    let sessions = auth::sessions::layer(state.engine.clone(), secure_cookie);
    let app =
        routes(state.clone()).layer(axum::middleware::from_fn_with_state(state, auth::authenticate)).layer(sessions);
    guarded(app, origins)
}

/// The guards around `routes`, outermost last: same-origin checks on unsafe
/// requests ([`guard`]), a 500 for a request whose handler or page data task
/// panics ([`panics`]), `{"error"}` JSON for every API error, and request
/// tracing.
pub fn guarded(routes: Router, origins: guard::Origins) -> Router {
    let routes = routes
        .layer(axum::middleware::from_fn_with_state(std::sync::Arc::new(origins), guard::same_origin))
        .layer(axum::middleware::from_fn(panics::answer_panics))
        .layer(CatchPanicLayer::custom(guard::panic_response));
    // The error answers are made around the whole router, as one service: a
    // layer of the router is a layer of each route, inside the place where
    // axum adds a 405's `Allow` header, so it could not name the methods.
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn(guard::json_errors))
        .layer(TraceLayer::new_for_http())
}

/// Every route of the app, without the guards.
pub fn routes(state: AppState) -> Router {
    // Before Leptos sets its default executor (see `panics`).
    panics::install();
    let routes = generate_route_list(App);
    let context = {
        let engine = state.engine.clone();
        move || provide_context(engine.clone())
    };
    let app_shell = {
        let options = state.leptos_options.clone();
        move || shell(options.clone())
    };
    // The browser bundle: content-hashed names, each with a brotli and a
    // gzip copy beside it written by scripts/build.sh (a release build's
    // wasm crosses the network at about a quarter of its size); see
    // `assets`. The plain file goes to clients that accept neither.
    let pkg_dir = &*state.leptos_options.site_pkg_dir;
    let pkg = ServeDir::new(std::path::Path::new(&*state.leptos_options.site_root).join(pkg_dir))
        .precompressed_br()
        .precompressed_gzip();
    let pkg = Router::new().fallback_service(pkg).layer(axum::middleware::from_fn(assets::cache_control));
    // The API (and its document: see `openapi`) takes JSON bodies only (a
    // browser must then preflight a cross-origin request, and no CORS header
    // here grants one).
    // It takes the query parameters its document names, and no others.
    let (api, document) = routes::api().split_for_parts();
    let known = std::sync::Arc::new(guard::KnownQueries::from_document(&document));
    let api = api
        .route_layer(axum::middleware::from_fn_with_state(known, guard::known_query))
        .route_layer(axum::middleware::from_fn(guard::json_bodies));
    Router::new()
        .merge(api)
        .route("/api", any(guard::api_not_found))
        .route("/api/{*path}", any(guard::api_not_found))
        .route("/login", post(auth::login::login))
        .route("/logout", post(auth::login::logout))
        .route("/setup", post(auth::login::setup))
        .route("/session/project", post(auth::login::switch_project))
        .route("/theme", post(crate::theme::set_theme))
        .route("/playground", post(routes::forms::playground_submit))
        .route(
            "/runs/import",
            post(routes::forms::import_submit).layer(DefaultBodyLimit::max(routes::conversation::MAX_IMPORT_BYTES)),
        )
        .nest_service(&format!("/{pkg_dir}"), pkg)
        .leptos_routes_with_context(&state, routes, context, app_shell)
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// How long a shutdown waits for requests in flight once it has begun;
/// then `run` returns anyway (the final event flush gets the rest of the
/// 10 s a shutdown may take; see `main`).
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(8);

/// Serves `router(state)` on `listener` until `shutdown` completes, then
/// stops accepting connections, ends the open event streams (see
/// [`live`]) and waits for the other requests in flight, at most
/// [`SHUTDOWN_GRACE`]. Connections are bounded by `state.limits` (see
/// [`connections`]).
///
/// Runs in flight are not cancelled by a shutdown: they stay `running` in the
/// database and the next start resumes them (see `Engine::recover`).
pub async fn run(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.limits.clone();
    let (cap, open_files) = connections::capacity(limits.max_connections);
    tracing::info!(
        connections = cap,
        open_file_limit = open_files,
        header_timeout_s = limits.header_timeout.as_secs(),
        keep_alive_s = limits.keep_alive.as_secs(),
        "serving at most this many connections at once"
    );
    let (close, closing) = state::Closing::new();
    let begun = closing.clone();
    let stopped = close.subscribe();
    let app = router(state).layer(axum::Extension(closing));
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: closing event streams, finishing requests in flight");
        let _ = close.send(true);
        // Held until every receiver is gone (the server has returned).
        close.closed().await;
    });
    let server = connections::serve(listener, app, limits, cap, stopped);
    let deadline = async {
        begun.closed().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = server => served,
        () = deadline => {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "requests still open after the grace period; closing them");
            Ok(())
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}
