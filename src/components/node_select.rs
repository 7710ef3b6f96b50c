//! Selecting a node of the trace page (a step, a tool call, a span): the
//! one mark every selector shares (`data-selected`, the URL's fragment, a
//! window event the tree pane follows), and the page's [`Navigator`], which
//! draws a node the detail pane does not show yet. The timeline, the
//! search, the tree, the keyboard and shared links all select through
//! [`select_node`].

#[cfg(feature = "hydrate")]
use leptos::prelude::*;

/// The window event [`mark_selected`] sends, with the selected node's id as
/// its detail (the trace's tree pane follows it).
pub const SELECT_EVENT: &str = "runlens-select";

/// Marks `el` as the selected node of the step tree (`data-selected`, the
/// one mark the timeline, the search and the keyboard share) and puts its
/// id in the URL's fragment (`#step-3`, `#call-…`), replacing the history
/// entry: a copied link opens the trace on the same node. A window event
/// ([`SELECT_EVENT`]) tells whoever follows the selection.
#[cfg(feature = "hydrate")]
pub fn mark_selected(el: &leptos::web_sys::Element) {
    if let Ok(Some(old)) = document().query_selector("[data-selected]") {
        let _ = old.remove_attribute("data-selected");
    }
    let _ = el.set_attribute("data-selected", "true");
    let id = el.id();
    if !id.is_empty() {
        if let Ok(history) = window().history() {
            let _ = history.replace_state_with_url(&leptos::wasm_bindgen::JsValue::NULL, "", Some(&format!("#{id}")));
        }
        // The trace's tree pane follows (see `pages::trace::tree`).
        let init = leptos::web_sys::CustomEventInit::new();
        init.set_detail(&leptos::wasm_bindgen::JsValue::from_str(&id));
        if let Ok(event) = leptos::web_sys::CustomEvent::new_with_event_init_dict(SELECT_EVENT, &init) {
            let _ = window().dispatch_event(&event);
        }
    }
}

/// Opens the trace node with DOM id `id` (and the `<details>` around it),
/// scrolls to it and marks it selected; `false` when the page cannot show
/// it. A node the page holds but has not drawn (the detail pane shows one
/// step at a time) is first revealed through the page's [`Navigator`], then
/// selected once drawn.
pub fn select_node(id: &str) -> bool {
    select(id, false)
}

/// [`select_node`], and puts the keyboard focus on the node's summary line.
pub fn select_and_focus(id: &str) -> bool {
    select(id, true)
}

/// What the page showing a trace knows of its nodes: it draws one step at
/// a time, so the timeline, the search, the tree and the keyboard ask it to
/// show a node before selecting it, and to name the next one.
pub trait Navigator {
    /// Makes node `id` drawn (now or on the next render, or by loading the
    /// page of a long run that holds it); `false` when it is no node of the
    /// run.
    fn reveal(&self, id: &str) -> bool;
    /// The step `by` steps from step `index`, within the run.
    fn step_after(&self, index: u32, by: i32) -> Option<u32>;
    /// The tool call `by` calls from node `from` (a call, or a step: its
    /// first call going forward, the call before it going back), among the
    /// calls on the page.
    fn call_after(&self, from: &str, by: i32) -> Option<String>;
}

#[cfg(feature = "hydrate")]
thread_local! {
    /// The registered navigator, with the number of its registration.
    static NAVIGATOR: std::cell::RefCell<(u64, Option<std::rc::Rc<dyn Navigator>>)> =
        const { std::cell::RefCell::new((0, None)) };
}

/// Registers the page's [`Navigator`] until the calling owner is cleaned up.
pub fn provide_navigator(navigator: impl Navigator + 'static) {
    #[cfg(feature = "hydrate")]
    {
        let mine = NAVIGATOR.with(|n| {
            let mut n = n.borrow_mut();
            n.0 += 1;
            n.1 = Some(std::rc::Rc::new(navigator));
            n.0
        });
        leptos::prelude::on_cleanup(move || {
            NAVIGATOR.with(|n| {
                let mut n = n.borrow_mut();
                if n.0 == mine {
                    n.1 = None;
                }
            })
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = navigator;
}

/// The registered [`Navigator`], if a trace is shown.
#[cfg(feature = "hydrate")]
pub fn navigator() -> Option<std::rc::Rc<dyn Navigator>> {
    NAVIGATOR.with(|n| n.borrow().1.clone())
}

#[cfg(feature = "hydrate")]
fn select(id: &str, focus: bool) -> bool {
    // Revealing also pins the detail pane to the node.
    let revealed = navigator().is_some_and(|n| n.reveal(id));
    if let Some(el) = document().get_element_by_id(id) {
        show(&el, focus);
        return true;
    }
    if revealed {
        show_when_drawn(id.to_owned(), focus, DRAW_FRAMES);
    }
    revealed
}

#[cfg(not(feature = "hydrate"))]
fn select(id: &str, focus: bool) -> bool {
    let _ = (id, focus);
    false
}

/// Frames [`select_node`] waits for a revealed node to be drawn.
#[cfg(feature = "hydrate")]
const DRAW_FRAMES: u32 = 20;

#[cfg(feature = "hydrate")]
fn show_when_drawn(id: String, focus: bool, frames: u32) {
    request_animation_frame(move || match document().get_element_by_id(&id) {
        Some(el) => show(&el, focus),
        None if frames > 0 => show_when_drawn(id, focus, frames - 1),
        None => {}
    });
}

#[cfg(feature = "hydrate")]
fn show(el: &leptos::web_sys::Element, focus: bool) {
    use leptos::wasm_bindgen::JsCast;
    let mut open = Some(el.clone());
    while let Some(e) = open {
        if e.tag_name().eq_ignore_ascii_case("details") {
            let _ = e.set_attribute("open", "");
        }
        open = e.parent_element();
    }
    mark_selected(el);
    let summary = el.query_selector(":scope > summary").ok().flatten();
    match summary.and_then(|s| s.dyn_into::<leptos::web_sys::HtmlElement>().ok()).filter(|_| focus) {
        Some(summary) => {
            let options = leptos::web_sys::FocusOptions::new();
            options.set_prevent_scroll(true);
            let _ = summary.focus_with_options(&options);
            let options = leptos::web_sys::ScrollIntoViewOptions::new();
            options.set_block(leptos::web_sys::ScrollLogicalPosition::Nearest);
            el.scroll_into_view_with_scroll_into_view_options(&options);
        }
        None => el.scroll_into_view_with_bool(true),
    }
}
