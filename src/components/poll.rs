//! Live refresh for pages that show runs which may still change.

use std::time::Duration;

use leptos::prelude::*;

/// Starts, in the browser only (effects never run on the server), an interval
/// that bumps `tick` every `every` while `active` is true. Pages put `tick` in
/// their resource's source, so each bump refetches; the interval is cleared
/// when the page unmounts. A refetch still in flight is superseded by the next
/// one rather than piling up.
pub fn poll_while(active: RwSignal<bool>, tick: RwSignal<u64>, every: Duration) {
    Effect::new(move |_| {
        let poll = move || {
            if active.get_untracked() {
                tick.update(|t| *t += 1);
            }
        };
        if let Ok(handle) = set_interval_with_handle(poll, every) {
            on_cleanup(move || handle.clear());
        }
    });
}
