//! A secret shown once (an API key, a signing secret): a read-only field
//! that selects itself on focus, and a button that copies it.

use leptos::prelude::*;

/// `secret` in a read-only field named `label`, with a Copy button; the
/// field's test id is `testid`, the button's `{testid}-copy`.
#[component]
pub fn CopySecret(secret: String, label: &'static str, testid: &'static str) -> impl IntoView {
    let copied = RwSignal::new(false);
    let value = secret.clone();
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let _ = window().navigator().clipboard().write_text(&value);
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = &value;
        copied.set(true);
    };
    let select = |ev: leptos::ev::FocusEvent| event_target::<leptos::web_sys::HtmlInputElement>(&ev).select();
    view! {
        <div class="field-row">
            <input type="text" class="secret mono grow" readonly value=secret on:focus=select
                aria-label=label data-testid=testid/>
            <button type="button" class="button small" on:click=copy data-testid=format!("{testid}-copy")>
                {move || if copied.get() { "Copied" } else { "Copy" }}
            </button>
        </div>
    }
}
