//! The trace page's clock for work in progress: the server's time of the
//! latest read, moved on by the browser's own clock, ticking once a second
//! while the run is active. Durations of running calls and steps, the run's
//! duration and the timeline read it, so they grow between reads instead of
//! standing at the moment of the last one. On the server (and before the
//! page has hydrated) it is the read's own time.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// How often the clock ticks while something runs.
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone, Copy)]
pub struct LiveClock {
    /// The server's time at the latest read, and the browser's monotonic
    /// clock (ms) when the page took it.
    base: RwSignal<Option<(DateTime<Utc>, f64)>>,
    tick: RwSignal<u64>,
    running: RwSignal<bool>,
}

impl LiveClock {
    /// Creates the clock and, in the browser, its ticking interval.
    pub fn new() -> Self {
        let clock = LiveClock { base: RwSignal::new(None), tick: RwSignal::new(0), running: RwSignal::new(false) };
        Effect::new(move |_| {
            let tick = move || {
                if clock.running.get_untracked() {
                    clock.tick.update(|t| *t += 1);
                }
            };
            if let Ok(handle) = set_interval_with_handle(tick, TICK) {
                on_cleanup(move || handle.clear());
            }
        });
        clock
    }

    /// A read made at the server's `now`; `running`: whether the run is
    /// still active (the clock ticks only then).
    pub fn set(self, now: DateTime<Utc>, running: bool) {
        self.base.set(Some((now, browser_ms())));
        if self.running.get_untracked() != running {
            self.running.set(running);
        }
    }

    /// The time now, reactively; `read_at` (the view's own read time) until
    /// the page has set the clock.
    pub fn now(self, read_at: DateTime<Utc>) -> DateTime<Utc> {
        self.tick.track();
        match self.base.get() {
            Some((server, at)) if server >= read_at => {
                let elapsed = (browser_ms() - at).max(0.0) as i64;
                server + chrono::Duration::milliseconds(elapsed)
            }
            _ => read_at,
        }
    }

    /// The page's clock, when the page provides one.
    pub fn get() -> Option<Self> {
        use_context::<Self>()
    }
}

/// The browser's monotonic clock in ms (0 on the server).
fn browser_ms() -> f64 {
    #[cfg(feature = "hydrate")]
    {
        window().performance().map_or(0.0, |p| p.now())
    }
    #[cfg(not(feature = "hydrate"))]
    {
        0.0
    }
}
