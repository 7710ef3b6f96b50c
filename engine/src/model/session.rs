//! Sessions: the runs of one conversation or thread (a run's `session_id`,
//! given at create or named by an ingested trace), and what they add up to.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{OutcomeTone, Run, Usage};

/// Runs a session shows at most: its latest ones.
pub const MAX_SESSION_RUNS: u32 = super::limits::MAX_LIST_LIMIT;

/// The runs of a session, oldest first, with their totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    pub session_id: String,
    /// Its root runs, oldest first: the latest 200 at most.
    pub runs: Vec<Run>,
    /// Each run's cost at today's prices (USD), in the order of `runs`; null
    /// where the model has no price.
    pub costs_usd: Vec<Option<f64>>,
    /// The session has more runs than `runs` holds (its earliest are left out).
    pub truncated: bool,
    pub totals: SessionTotals,
}

/// What the runs of a session add up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionTotals {
    pub runs: u32,
    pub usage: Usage,
    /// At today's prices (USD), over the runs whose model has a price; null
    /// when none has.
    pub cost_usd: Option<f64>,
    /// The runs' active time, summed (ms; a run still going counts until now).
    pub duration_ms: i64,
    /// Runs by status (`done`, `failed`, `paused`…).
    pub statuses: BTreeMap<String, u32>,
    /// Runs whose outcome is not clean (a call rejected or failed, stopped
    /// by `max_turns`, failed, cancelled).
    pub with_issues: u32,
    /// The end users its runs served, in the order they first appear.
    pub end_users: Vec<String>,
    /// When its first run (of `runs`) started and its last one was last active.
    pub first_at: Option<DateTime<Utc>>,
    pub last_at: Option<DateTime<Utc>>,
}

impl Session {
    /// The session `session_id` of `runs` (newest first, as the runs list
    /// gives them; `more`: the list had more) with `costs` beside them.
    pub fn new(
        session_id: &str,
        mut runs: Vec<Run>,
        more: bool,
        cost: impl Fn(&Run) -> Option<f64>,
        now: DateTime<Utc>,
    ) -> Self {
        runs.reverse();
        let costs_usd: Vec<Option<f64>> = runs.iter().map(cost).collect();
        let mut totals = SessionTotals { runs: runs.len() as u32, ..SessionTotals::default() };
        for (run, cost) in runs.iter().zip(&costs_usd) {
            totals.usage.add(&run.usage);
            if let Some(c) = cost {
                *totals.cost_usd.get_or_insert(0.0) += c;
            }
            totals.duration_ms += run.duration_ms(now).unwrap_or(0);
            *totals.statuses.entry(run.status.as_str().to_owned()).or_default() += 1;
            if matches!(run.outcome.tone, OutcomeTone::Warning | OutcomeTone::Error) {
                totals.with_issues += 1;
            }
            if let Some(user) = run.end_user.as_ref().filter(|u| !totals.end_users.contains(u)) {
                totals.end_users.push(user.clone());
            }
            totals.first_at = Some(totals.first_at.map_or(run.created_at, |t| t.min(run.created_at)));
            totals.last_at = Some(totals.last_at.map_or(run.updated_at, |t| t.max(run.updated_at)));
        }
        Session { session_id: session_id.to_owned(), runs, costs_usd, truncated: more, totals }
    }
}
