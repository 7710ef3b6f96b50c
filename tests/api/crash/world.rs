//! What the crash test knows: the runs it started, the decisions it made
//! and the answers it got (or lost to a kill), and every decision the server
//! has shown so far.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::plan::Kind;
use super::sse::SseLog;

/// Whether a request's effect is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    Yes,
    /// The server died before answering: it may or may not have happened.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// Not a `FollowUp` run.
    None,
    Todo,
    Unknown,
    Posted,
}

pub struct RunRec {
    pub kind: Kind,
    pub body: serde_json::Value,
    pub created: Known,
    pub follow_up: FollowUp,
    /// The test asked to cancel it (so `cancelled` is expected).
    pub cancel_asked: bool,
    pub sse: Arc<Mutex<SseLog>>,
    pub wake: watch::Sender<u64>,
}

/// A decision the test sent.
#[derive(Clone, Debug)]
pub struct Ours {
    /// `approved` or `rejected`.
    pub decision: String,
    /// The server answered: the decision (ours or the one that won) is stored.
    pub confirmed: bool,
}

/// A decision as the server showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub decision: String,
    pub decided_by: String,
    pub decided_at: String,
    /// When it was first seen: `after restart #k` or `before the first kill`.
    pub seen: String,
}

#[derive(Default)]
pub struct World {
    pub runs: BTreeMap<String, RunRec>,
    pub ours: BTreeMap<(String, String), Ours>,
    pub shown: BTreeMap<(String, String), Shown>,
    /// Invariants that broke, in words, not yet reported.
    pub violations: Vec<String>,
    /// Runs whose received events were already found missing or different
    /// (reported once, not again at every later kill).
    pub bad_streams: std::collections::BTreeSet<String>,
    /// Each violation once, without the moment it was found: a run that
    /// failed is not reported again at every later restart.
    pub reported: std::collections::BTreeSet<String>,
    pub next_run: u32,
}

impl World {
    /// Adds what broke `when` (a phrase inside each message), each once.
    pub fn note(&mut self, when: &str, broke: Vec<String>) {
        for v in broke {
            if self.reported.insert(v.replace(when, "")) {
                self.violations.push(v);
            }
        }
    }

    pub fn kind(&self, run_id: &str) -> String {
        self.runs.get(run_id).map_or("?".into(), |r| format!("{:?}", r.kind))
    }
}
