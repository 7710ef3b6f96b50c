//! Which step the trace's detail pane shows.
//!
//! The tree pane lists the run; the detail pane beside it draws one step
//! in full (its model call, tool calls, fork panel). Without a choice it
//! shows the step the URL's `?from=N` names, else the run's newest step
//! when the page holds it, so a live run is followed (else the page's
//! first). Selecting a node anywhere (tree,
//! timeline, search, `j`/`k`, `[`/`]`, a shared link) pins the pane to its
//! step through [`Detail`], the page's [`Navigator`]: every path that
//! selects goes through `node_select::select_node`, which asks it to reveal
//! the node first.

use leptos::prelude::*;

use crate::api::trace_scan::{call_node_id, step_node_id};
use crate::api::trace_window::LiveTrace;
use crate::components::node_select::Navigator;
use crate::format;

/// The detail pane's choice, and what the page holds to choose from.
#[derive(Clone, Copy)]
pub struct Detail {
    /// The step the user picked (`None`: the default, see the module docs).
    picked: RwSignal<Option<u32>>,
    /// The step `?from=` names.
    asked: Memo<Option<u32>>,
    /// The step the pane shows now (the tree's cursor follows it).
    pub drawn: RwSignal<Option<u32>>,
    outline: StoredValue<Outline>,
}

/// The loaded page of the run: its steps and their calls, in order.
#[derive(Default)]
struct Outline {
    run_id: String,
    /// Steps in the run (they are numbered from 0).
    count: u32,
    steps: Vec<(u32, Vec<String>)>,
}

impl Outline {
    fn holds(&self, index: u32) -> bool {
        self.steps.binary_search_by_key(&index, |(i, _)| *i).is_ok()
    }

    fn step_of_call(&self, call_id: &str) -> Option<u32> {
        self.steps.iter().find(|(_, calls)| calls.iter().any(|c| c == call_id)).map(|(i, _)| *i)
    }
}

impl Detail {
    pub fn new(asked: Memo<Option<u32>>) -> Self {
        Detail {
            picked: RwSignal::new(None),
            asked,
            drawn: RwSignal::new(None),
            outline: StoredValue::new(Outline::default()),
        }
    }

    /// Back to the default (another run is shown).
    pub fn reset(self) {
        self.picked.set(None);
    }

    /// Takes in the page a (re)load brought.
    pub fn load(self, view: &LiveTrace) {
        let count = view.run.step_count.max(view.steps.last().map_or(0, |s| s.index + 1));
        let steps = view.steps.iter().map(|s| (s.index, s.tool_calls.iter().map(|c| c.id.clone()).collect())).collect();
        self.outline.set_value(Outline { run_id: view.run.id.clone(), count, steps });
    }

    /// The step to show among `on_page` (the page's step indexes, in
    /// order): the picked one, else the one `?from=` names, else the newest
    /// when the page holds the run's newest step (`newest_here`), else the
    /// page's first.
    pub fn shown(self, on_page: &[u32], newest_here: bool) -> Option<u32> {
        let holds = |i: &u32| on_page.binary_search(i).is_ok();
        let default = if newest_here { on_page.last() } else { on_page.first() };
        self.picked.get().filter(holds).or_else(|| self.asked.get().filter(holds)).or_else(|| default.copied())
    }

    /// Pins the pane to step `index` (no change when it already is).
    fn pick(self, index: u32) {
        if self.picked.get_untracked() != Some(index) {
            self.picked.set(Some(index));
        }
    }

    /// The page's [`Navigator`] (call where the router is in context).
    pub fn navigator(self) -> impl Navigator {
        let navigate = leptos_router::hooks::use_navigate();
        PageNavigator { detail: self, navigate: Box::new(move |href: &str| navigate(href, Default::default())) }
    }
}

/// [`Detail`] and a way to load another page of the run.
struct PageNavigator {
    detail: Detail,
    navigate: Box<dyn Fn(&str)>,
}

impl PageNavigator {
    /// Loads the page of the run that holds step `index`, selecting it.
    fn load_page_of(&self, index: u32) {
        let run_id = self.detail.outline.with_value(|o| o.run_id.clone());
        let href = format!("/runs/{}?from={index}#{}", format::url_encode(&run_id), step_node_id(index));
        (self.navigate)(&href);
    }
}

impl Navigator for PageNavigator {
    fn reveal(&self, id: &str) -> bool {
        let this = self.detail;
        if let Some(index) = id.strip_prefix("step-").and_then(|i| i.parse::<u32>().ok()) {
            let (on_page, in_run) = this.outline.with_value(|o| (o.holds(index), index < o.count));
            if on_page {
                this.pick(index);
            } else if in_run {
                self.load_page_of(index);
            }
            return in_run;
        }
        if let Some(call) = id.strip_prefix("call-") {
            if let Some(index) = this.outline.with_value(|o| o.step_of_call(call)) {
                this.pick(index);
                return true;
            }
        }
        false
    }

    fn step_after(&self, index: u32, by: i32) -> Option<u32> {
        let count = self.detail.outline.with_value(|o| o.count);
        let next = (index as i64 + by as i64).clamp(0, count.saturating_sub(1) as i64) as u32;
        (count > 0).then_some(next)
    }

    fn call_after(&self, from: &str, by: i32) -> Option<String> {
        self.detail.outline.with_value(|o| {
            let calls: Vec<(u32, &String)> =
                o.steps.iter().flat_map(|(i, calls)| calls.iter().map(move |c| (*i, c))).collect();
            if calls.is_empty() {
                return None;
            }
            let at = match from.strip_prefix("call-") {
                Some(call) => {
                    let i = calls.iter().position(|(_, c)| c.as_str() == call)? as i64;
                    (i + by as i64).clamp(0, calls.len() as i64 - 1) as usize
                }
                None => {
                    let step = from.strip_prefix("step-").and_then(|i| i.parse::<u32>().ok())?;
                    let first_from = calls.iter().position(|(i, _)| *i >= step);
                    match (first_from, by > 0) {
                        (Some(i), true) => i,
                        (None, true) => return None,
                        (Some(i), false) => i.checked_sub(1)?,
                        (None, false) => calls.len() - 1,
                    }
                }
            };
            Some(call_node_id(calls[at].1))
        })
    }
}
