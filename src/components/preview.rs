//! The "show all" link next to a value the server cut to a preview (see
//! `crate::api::preview`): it opens the JSON endpoint holding the value in
//! full, in a new tab, so it works without JavaScript.

use leptos::prelude::*;

pub use crate::api::preview::Cuts;

/// The cuts of the page being rendered (none when no page provided them).
pub fn page_cuts() -> Cuts {
    use_context::<Cuts>().unwrap_or_default()
}

/// `preview · show all`, linking to `href`.
#[component]
pub fn ShowAll(#[prop(into)] href: String) -> impl IntoView {
    // `target` keeps the client-side router from taking the link.
    view! {
        <a class="show-all" href=href target="_blank" rel="external noopener" data-testid="show-all"
            title="This page shows a preview of a long value; open it in full">
            "preview · show all"
        </a>
    }
}
