//! The runs list's query ([`RunFilter`], with its bounds) and its pages.

use serde::{Deserialize, Serialize};

use super::{limits, OutcomeFilter, Run, RunStatus};

/// Filter for listing runs (`GET /api/runs`). An unknown parameter is refused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub agent_id: Option<String>,
    /// `key:value`
    pub tag: Option<String>,
    /// Substring of the name, prompt or metadata.
    pub q: Option<String>,
    /// `key:value`: runs whose metadata has `key` equal to `value` (a string,
    /// or the JSON text of a number or boolean).
    pub metadata: Option<String>,
    /// Child runs are listed too (by default only root runs are).
    pub all: Option<bool>,
    /// Only runs of this outcome (see [`OutcomeFilter`]).
    pub outcome: Option<OutcomeFilter>,
    /// Only the runs of this session.
    pub session_id: Option<String>,
    /// Only the runs that served this end user.
    pub user: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    /// Runs to skip before the page (beside `cursor`, which it cannot be combined with).
    pub offset: Option<u32>,
    /// The project to list (set by the server from the caller, never from the query).
    #[serde(skip)]
    pub project: Option<String>,
}

impl RunFilter {
    /// `limit` is 1 to [`limits::MAX_LIST_LIMIT`]; the texts are bounded too.
    pub fn check_bounds(&self) -> Result<(), String> {
        if let Some(limit) = self.limit {
            if !(1..=limits::MAX_LIST_LIMIT).contains(&limit) {
                return Err(format!("limit must be a number from 1 to {}, not {limit}", limits::MAX_LIST_LIMIT));
            }
        }
        if let Some(offset) = self.offset {
            if offset > limits::MAX_LIST_OFFSET {
                return Err(format!("offset must be at most {}, not {offset}", limits::MAX_LIST_OFFSET));
            }
            if self.cursor.is_some() {
                return Err("offset and cursor cannot be combined".into());
            }
        }
        if let Some(meta) = &self.metadata {
            let key_ok = |k: &str| {
                (1..=64).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            };
            if !meta.split_once(':').is_some_and(|(k, _)| key_ok(k)) {
                return Err("metadata must be `key:value`, the key 1-64 letters, digits, `_`, `-` or `.`".into());
            }
        }
        for (field, text) in [
            ("agent_id", &self.agent_id),
            ("tag", &self.tag),
            ("q", &self.q),
            ("cursor", &self.cursor),
            ("metadata", &self.metadata),
        ] {
            if let Some(text) = text {
                limits::check_chars(field, text, limits::MAX_QUERY_TEXT_CHARS)?;
            }
        }
        for (field, id) in [("session_id", &self.session_id), ("user", &self.user)] {
            if let Some(id) = id {
                limits::check_chars(field, id, limits::MAX_SESSION_ID_CHARS)?;
            }
        }
        Ok(())
    }
}

/// One page of runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    pub runs: Vec<Run>,
    pub next_cursor: Option<String>,
}
