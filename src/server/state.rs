//! The one application state: the engine, the Leptos options, the public
//! origin, the connection limits and the open long-lived responses.
//!
//! Handlers extract just the part they need (`State<Engine>`) through
//! `FromRef`, so no handler depends on more than it uses. [`Closing`] is
//! the server's shutdown, seen by the streams that would outlive it.

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
    /// Connection limits and timeouts (see `super::connections`).
    pub limits: super::connections::Limits,
    /// The open event streams and long-polls (see `super::live`).
    pub streams: std::sync::Arc<super::live::Streams>,
}

impl AppState {
    /// The state with the default [`Limits`](super::connections::Limits).
    pub fn new(engine: Engine, leptos_options: LeptosOptions, public_origin: Option<String>) -> Self {
        let limits = super::connections::Limits::default();
        let streams = std::sync::Arc::new(super::live::Streams::new(engine.clone(), limits.max_streams_per_client));
        AppState { engine, leptos_options, public_origin, limits, streams }
    }

    /// The state with `limits` instead of the defaults.
    pub fn with_limits(self, limits: super::connections::Limits) -> Self {
        let streams =
            std::sync::Arc::new(super::live::Streams::new(self.engine.clone(), limits.max_streams_per_client));
        AppState { limits, streams, ..self }
    }
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

/// Tells long-lived responses (the SSE streams) that the server is shutting
/// down, so they end instead of holding the graceful shutdown open. `run`
/// adds it to every request as an extension; a router used without `run`
/// (tests with `oneshot`) has none, and its streams never see a shutdown.
#[derive(Clone)]
pub struct Closing(tokio::sync::watch::Receiver<bool>);

impl Closing {
    /// A handle and the sender that starts the shutdown (`send(true)`).
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Closing) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Closing(rx))
    }

    /// Resolves once the shutdown has begun (or its sender is gone).
    pub async fn closed(mut self) {
        let _ = self.0.wait_for(|closing| *closing).await;
    }
}
