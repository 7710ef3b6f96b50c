//! Keyboard shortcuts, and the `?` overlay that lists them.
//!
//! One `keydown` listener on the window, installed once by [`Shortcuts`]
//! (rendered inside the router by the app root), handles every shortcut;
//! the server renders only the overlay's closed `<dialog>` (the listener
//! and all DOM work are compiled for the browser only). Shortcuts never
//! fire while the focus is in a text field, select or editable element, nor
//! with Ctrl, Alt or Meta held.
//!
//! - `j` / `k`: the next / previous step of a trace (`details.step`): it is
//!   marked selected (`data-selected`, the mark the timeline and the search
//!   use), its summary focused and scrolled into view; the current step is
//!   the one holding the focus, else the selected one.
//! - `o`, or Enter with nothing focused: fold / unfold the current step
//!   (Enter on a focused summary folds it natively).
//! - `]` / `[`: the next / previous tool call (opening its step).
//! - The selected step or call is in the URL's fragment (`#step-3`), so a
//!   copied link opens the trace on it.
//! - `/`: the trace's search field.
//! - `g r`, `g a`, `g p`: runs, approvals, playground (the second key within
//!   [`SEQUENCE_MS`]).
//! - `a` / `r` on an approval card: start approving it / start rejecting
//!   it. The card acted on is the one holding the focus, else the first on
//!   the page; it carries `data-kbd-target` (outlined, with a hint). Neither
//!   key decides by itself: `a` focuses the card's Approve button and marks
//!   the card `data-confirm-approve` (a hint says what next), and a second
//!   `a` (or Enter) there approves; `r` focuses the card's reason field, and
//!   Enter there (or the Reject button) rejects. Escape in either gives up
//!   and returns the focus to the card.
//! - `?`: the overlay; Escape closes it and the focus returns where it was.

use leptos::prelude::*;

/// How long the second key of a `g` sequence may wait, in milliseconds.
pub const SEQUENCE_MS: f64 = 1500.0;

/// Every shortcut: the keys as shown, and what they do.
pub const SHORTCUTS: &[(&[&str], &str)] = &[
    (&["?"], "Show or hide this list"),
    (&["j"], "Trace: next step"),
    (&["k"], "Trace: previous step"),
    (&["o"], "Trace: fold or unfold the current step (Enter too)"),
    (&["]"], "Trace: next tool call"),
    (&["["], "Trace: previous tool call"),
    (&["/"], "Trace: search this trace"),
    (&["g", "r"], "Go to runs"),
    (&["g", "a"], "Go to approvals"),
    (&["g", "p"], "Go to the playground"),
    (&["a"], "Approval card: approve — then a again (or Enter) to confirm (the focused card, else the first)"),
    (&["r"], "Approval card: reject — type a reason, then Enter to confirm (Escape gives up)"),
];

/// The `?` overlay (a closed `<dialog>` until asked for) and, in the
/// browser, the keyboard listener. Render it once, inside the router.
#[component]
pub fn Shortcuts() -> impl IntoView {
    let dialog = NodeRef::<leptos::html::Dialog>::new();
    #[cfg(feature = "hydrate")]
    browser::install(dialog);
    let rows = SHORTCUTS
        .iter()
        .map(|(keys, what)| {
            let keys = keys
                .iter()
                .enumerate()
                .map(|(i, k)| view! { {(i > 0).then_some(" then ")} <kbd>{*k}</kbd> })
                .collect::<Vec<_>>();
            view! { <tr><td class="nowrap">{keys}</td><td>{*what}</td></tr> }
        })
        .collect::<Vec<_>>();
    view! {
        <dialog class="shortcuts-dialog" node_ref=dialog aria-labelledby="shortcuts-title"
            data-testid="shortcuts-dialog" on:close=move |_| {
                #[cfg(feature = "hydrate")]
                browser::restore_focus();
            }>
            <div class="shortcuts-head">
                <h2 id="shortcuts-title">"Keyboard shortcuts"</h2>
                <form method="dialog" class="inline-form">
                    <button type="submit" class="button small" data-testid="shortcuts-close">"Close"</button>
                </form>
            </div>
            <table class="table compact shortcuts-table">
                <thead><tr><th scope="col">"Keys"</th><th scope="col">"What it does"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <p class="muted">"Shortcuts do nothing while you type in a field, or with Ctrl, Alt or Meta held."</p>
        </dialog>
    }
}

/// Marks the approval card `a` and `r` act on (see the module docs); call
/// it when cards come and go. Does nothing on the server.
pub fn refresh_card_target() {
    #[cfg(feature = "hydrate")]
    request_animation_frame(browser::mark_card_target);
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::{Cell, RefCell};

    use leptos::prelude::*;
    use leptos_router::hooks::use_navigate;
    use wasm_bindgen::JsCast;
    use web_sys::{Element, HtmlElement, KeyboardEvent};

    thread_local! {
        /// When `g` was pressed (the event's time stamp), waiting for its second key.
        static G_AT: Cell<Option<f64>> = const { Cell::new(None) };
        /// What had the focus before the overlay opened.
        static BEFORE_OVERLAY: RefCell<Option<HtmlElement>> = const { RefCell::new(None) };
    }

    const CARD: &str = "[data-testid=\"approval-card\"]";
    const TARGET: &str = "data-kbd-target";
    /// On a card whose Approve button waits for a second `a` (or Enter).
    const CONFIRM_APPROVE: &str = "data-confirm-approve";

    pub fn install(dialog: NodeRef<leptos::html::Dialog>) {
        let navigate = use_navigate();
        let keys = window_event_listener(leptos::ev::keydown, move |ev: KeyboardEvent| {
            on_key(&ev, dialog, &navigate);
        });
        let focus = window_event_listener(leptos::ev::focusin, |_| mark_card_target());
        // The app root lives as long as the page.
        std::mem::forget(keys);
        std::mem::forget(focus);
    }

    fn on_key(
        ev: &KeyboardEvent,
        dialog: NodeRef<leptos::html::Dialog>,
        navigate: &impl Fn(&str, leptos_router::NavigateOptions),
    ) {
        if ev.default_prevented() || ev.ctrl_key() || ev.alt_key() || ev.meta_key() || ev.is_composing() {
            return;
        }
        let key = ev.key();
        let doc = document();
        let active = doc.active_element();
        if let Some(dialog) = dialog.get_untracked() {
            if dialog.open() {
                // The dialog closes itself on Escape; `?` closes it too.
                if key == "?" {
                    ev.prevent_default();
                    dialog.close();
                }
                return;
            }
        }
        if key == "Escape" {
            // Giving up a decision: back from the reason field or the
            // Approve button to its card.
            let testid = active.as_ref().and_then(|a| a.get_attribute("data-testid"));
            if let Some(field) =
                active.as_ref().filter(|_| matches!(testid.as_deref(), Some("reject-reason" | "approve-button")))
            {
                if let Some(card) = field.closest(CARD).ok().flatten().and_then(|c| c.dyn_into::<HtmlElement>().ok()) {
                    let _ = card.remove_attribute("data-confirming");
                    let _ = card.remove_attribute(CONFIRM_APPROVE);
                    let _ = card.focus();
                }
            }
            return;
        }
        if active.as_ref().is_some_and(is_typing_target) {
            return;
        }
        let after_g = G_AT.with(|g| g.take()).is_some_and(|at| ev.time_stamp() - at <= super::SEQUENCE_MS);
        if after_g {
            let to = match key.as_str() {
                "r" => "/runs",
                "a" => "/approvals",
                "p" => "/playground",
                _ => "",
            };
            if !to.is_empty() {
                ev.prevent_default();
                navigate(to, Default::default());
                return;
            }
        }
        let handled = match key.as_str() {
            "?" => {
                if let Some(dialog) = dialog.get_untracked() {
                    BEFORE_OVERLAY.with(|b| *b.borrow_mut() = active.and_then(|a| a.dyn_into::<HtmlElement>().ok()));
                    let _ = dialog.show_modal();
                }
                true
            }
            "g" => {
                G_AT.with(|g| g.set(Some(ev.time_stamp())));
                true
            }
            "j" => move_step(1),
            "k" => move_step(-1),
            "o" => toggle_step(),
            "]" => move_call(1),
            "[" => move_call(-1),
            "Enter" => active.is_none_or(|a| doc.body().is_some_and(|b| *b == a)) && toggle_step(),
            "/" => focus_search(),
            "a" => decide(true),
            "r" => decide(false),
            _ => false,
        };
        if handled {
            ev.prevent_default();
        }
    }

    /// A field the person types in: no shortcut while it has the focus.
    fn is_typing_target(el: &Element) -> bool {
        let tag = el.tag_name().to_ascii_lowercase();
        matches!(tag.as_str(), "input" | "textarea" | "select")
            || el.dyn_ref::<HtmlElement>().is_some_and(|h| h.is_content_editable())
    }

    /// The step holding the focus, else the selected one (or the one
    /// holding the selected call).
    fn selected_step() -> Option<HtmlElement> {
        let doc = document();
        let within = |el: Element| el.closest("#steps details.step").ok().flatten();
        doc.active_element()
            .and_then(within)
            .or_else(|| doc.query_selector("#steps [data-selected]").ok().flatten().and_then(within))
            .and_then(|s| s.dyn_into::<HtmlElement>().ok())
    }

    /// [`selected_step`], else the step the detail pane shows.
    fn current_step() -> Option<HtmlElement> {
        selected_step()
            .or_else(|| document().query_selector("#steps details.step").ok().flatten().and_then(|s| s.dyn_into().ok()))
    }

    /// Selects the step `by` steps from the selected one (from none: the
    /// run's first going forward, its last going back), loading the page of
    /// a long run that holds it, and focuses its summary line.
    fn move_step(by: i32) -> bool {
        let Some(nav) = crate::components::node_select::navigator() else { return false };
        let index = selected_step().and_then(|s| s.get_attribute("data-index")?.parse::<u32>().ok());
        let next = match index {
            Some(i) => nav.step_after(i, by),
            None if by > 0 => nav.step_after(0, 0),
            None => nav.step_after(u32::MAX, 0),
        };
        let Some(next) = next else { return false };
        crate::components::node_select::select_and_focus(&crate::api::trace_scan::step_node_id(next))
    }

    /// Selects the next (`by` 1) or previous (-1) tool call after the
    /// selected node — the selected call, else the first call of the current
    /// step — opening it and its step.
    fn move_call(by: i32) -> bool {
        let Some(nav) = crate::components::node_select::navigator() else { return false };
        let doc = document();
        let selected = doc.query_selector("#steps [data-selected]").ok().flatten().map(|s| s.id());
        let from = selected.filter(|id| id.starts_with("call-")).or_else(|| current_step().map(|s| s.id()));
        match from.and_then(|from| nav.call_after(&from, by)) {
            Some(call) => crate::components::node_select::select_node(&call),
            None => false,
        }
    }

    fn toggle_step() -> bool {
        let Some(step) = current_step() else { return false };
        if step.has_attribute("open") {
            let _ = step.remove_attribute("open");
        } else {
            let _ = step.set_attribute("open", "");
        }
        true
    }

    fn focus_search() -> bool {
        let field = document().query_selector("[data-testid=\"trace-search\"]").ok().flatten();
        match field.and_then(|f| f.dyn_into::<HtmlElement>().ok()) {
            Some(field) => {
                let _ = field.focus();
                true
            }
            None => false,
        }
    }

    /// The card `a` and `r` act on: the one holding the focus, else the first.
    fn target_card() -> Option<HtmlElement> {
        let doc = document();
        doc.active_element()
            .and_then(|a| a.closest(CARD).ok().flatten())
            .or_else(|| doc.query_selector(CARD).ok().flatten())
            .and_then(|c| c.dyn_into::<HtmlElement>().ok())
    }

    pub fn mark_card_target() {
        let doc = document();
        let target = target_card();
        if let Ok(list) = doc.query_selector_all(&format!("[{TARGET}]")) {
            for el in (0..list.length()).filter_map(|i| list.item(i)?.dyn_into::<Element>().ok()) {
                if target.as_ref().is_none_or(|t| **t != el) {
                    let _ = el.remove_attribute(TARGET);
                    let _ = el.remove_attribute("data-confirming");
                }
            }
        }
        if let Some(card) = target {
            let _ = card.set_attribute(TARGET, "");
        }
        // An approval waits for its second `a` only while its button has the focus.
        if let Ok(list) = doc.query_selector_all(&format!("[{CONFIRM_APPROVE}]")) {
            let active = doc.active_element();
            for el in (0..list.length()).filter_map(|i| list.item(i)?.dyn_into::<Element>().ok()) {
                let waiting = active.as_ref().is_some_and(|a| {
                    a.get_attribute("data-testid").as_deref() == Some("approve-button")
                        && el.contains(Some(a.unchecked_ref()))
                });
                if !waiting {
                    let _ = el.remove_attribute(CONFIRM_APPROVE);
                }
            }
        }
    }

    fn decide(approve: bool) -> bool {
        let Some(card) = target_card() else { return false };
        let testid = if approve { "approve-button" } else { "reject-reason" };
        let Some(control) = card
            .query_selector(&format!("[data-testid=\"{testid}\"]"))
            .ok()
            .flatten()
            .and_then(|c| c.dyn_into::<HtmlElement>().ok())
        else {
            return false;
        };
        mark_card_target();
        if approve {
            if control.has_attribute("disabled") {
                return true;
            }
            // The second `a`, with the Approve button still focused, approves.
            let armed = card.has_attribute(CONFIRM_APPROVE)
                && document().active_element().is_some_and(|a| a == *control.unchecked_ref::<Element>());
            if armed {
                let _ = card.remove_attribute(CONFIRM_APPROVE);
                control.click();
            } else {
                let _ = card.set_attribute(CONFIRM_APPROVE, "");
                let _ = control.focus();
            }
        } else {
            let _ = card.set_attribute("data-confirming", "");
            let _ = control.focus();
        }
        true
    }

    pub fn restore_focus() {
        if let Some(el) = BEFORE_OVERLAY.with(|b| b.borrow_mut().take()) {
            if el.is_connected() {
                let _ = el.focus();
            }
        }
    }
}
