//! runlens web crate: the Leptos app (pages, components, server functions) and,
//! with the `ssr` feature, the axum server that hosts it and the engine.
//!
//! The same library is compiled twice: natively with `ssr` for the server, and
//! to wasm with `hydrate` for the browser bundle that takes over the
//! server-rendered HTML.

#![recursion_limit = "256"]

pub mod api;
pub mod app;
pub mod components;
pub mod format;
pub mod live_updates;
pub mod pages;
pub mod resource;
#[cfg(feature = "ssr")]
pub mod server;
pub mod shortcuts;
pub mod theme;

/// Browser entry point: attaches the reactive app to the server-rendered body.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
