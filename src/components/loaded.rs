//! `Loaded`: server data awaited inside `<Suspense>` (or `<Transition>`),
//! shown by the caller's view once it arrives, or as the error box when the
//! call failed — the one way pages wait for their data.
//!
//! `load` is called on every (re)render and returns the future to await,
//! usually a resource's (`move || async move { runs.await }`); a page that needs
//! two resources awaits both in one async block, so the server render
//! waits for both.
//!
//! ```ignore
//! <Loaded load=move || async move { runs.await } loading="Loading runs…" keep_previous=true let:list>
//!     <RunTable list/>
//! </Loaded>
//! ```

use std::future::Future;
use std::sync::Arc;

use leptos::prelude::*;

use super::{server_error_message, ErrorBox};

/// Awaits `load()` and renders `children(value)`, or an [`ErrorBox`] with
/// the server's message. Until the first answer arrives it shows `loading`.
#[component]
pub fn Loaded<T, L, Fut, V, F>(
    /// The data to wait for (read resources here: they are tracked).
    load: L,
    /// The placeholder text while the first answer is on its way.
    loading: &'static str,
    /// Keep the previous content on screen while the resource refetches
    /// (a `<Transition>`) instead of going back to the placeholder (a
    /// `<Suspense>`): for pages that refresh live.
    #[prop(optional)]
    keep_previous: bool,
    /// Render the placeholder and the error box as one table row spanning
    /// this many columns (for resources that fill a `<tbody>`).
    #[prop(optional)]
    colspan: Option<u32>,
    children: F,
) -> impl IntoView
where
    T: 'static,
    L: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, ServerFnError>> + Send + 'static,
    V: IntoView + 'static,
    F: Fn(T) -> V + Send + Sync + 'static,
{
    let children = Arc::new(children);
    let content = move || {
        let children = children.clone();
        let data = load();
        Suspend::new(async move {
            match data.await {
                Ok(value) => children(value).into_any(),
                Err(e) => in_row(colspan, view! { <ErrorBox message=server_error_message(&e)/> }.into_any()),
            }
        })
    };
    let fallback = move || match colspan {
        Some(n) => view! { <tr><td colspan=n class="loading">{loading}</td></tr> }.into_any(),
        None => view! { <p class="loading">{loading}</p> }.into_any(),
    };
    if keep_previous {
        view! { <Transition fallback>{content}</Transition> }.into_any()
    } else {
        view! { <Suspense fallback>{content}</Suspense> }.into_any()
    }
}

fn in_row(colspan: Option<u32>, inner: AnyView) -> AnyView {
    match colspan {
        Some(n) => view! { <tr><td colspan=n>{inner}</td></tr> }.into_any(),
        None => inner,
    }
}
