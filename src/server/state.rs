//! The one application state: the engine and the Leptos options.
//!
//! Handlers extract just the part they need (`State<Engine>`) through
//! `FromRef`, so no handler depends on more than it uses.

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use runlens_engine::Engine;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub leptos_options: LeptosOptions,
    /// The origin browsers reach the app at when it is not the request's
    /// `Host` (a reverse proxy): unsafe requests from it are allowed too.
    pub public_origin: Option<String>,
}

impl FromRef<AppState> for Engine {
    fn from_ref(state: &AppState) -> Engine {
        state.engine.clone()
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> LeptosOptions {
        state.leptos_options.clone()
    }
}
