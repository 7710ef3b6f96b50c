//! Review queues: runs (or one step of a run) put in front of people to
//! score. A queue says which scores its reviewers fill ([`ReviewField`]:
//! a yes/no, a number within bounds, or one of some labels), who reviews
//! (its assignees, or any operator), and where corrections go (a dataset:
//! the output the run should have given becomes an item's `expected`).
//! Each item is pending until a reviewer scores it (done) or skips it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Actor, ScoreValue};

/// Queues of one project, at most.
pub const MAX_PROJECT_QUEUES: u32 = 50;
/// Items of one queue, at most.
pub const MAX_QUEUE_ITEMS: u32 = 10_000;
/// Fields of one queue, at most.
pub const MAX_REVIEW_FIELDS: usize = 8;
/// Runs one request adds to a queue, at most.
pub const MAX_RUNS_PER_ADD: usize = 100;
/// Assignees of one queue, at most.
pub const MAX_ASSIGNEES: usize = 20;
/// A correction: at most this many characters.
pub const MAX_CORRECTION_CHARS: usize = 32_000;

/// What a field holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    /// Yes or no.
    #[default]
    YesNo,
    /// A number from `min` to `max`.
    Number,
    /// One of `labels`.
    Label,
}

/// One score a reviewer fills.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReviewField {
    /// The score's name (as `POST /api/scores` takes it).
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.:-]([A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?$", min_length = 1, max_length = 64)
    )]
    pub name: String,
    #[serde(default)]
    pub kind: FieldKind,
    /// A number field's bounds (default 0 and 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// A label field's labels, 2 to 9 (a reviewer picks one with the keys 1-9).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 9))]
    pub labels: Vec<String>,
}

impl ReviewField {
    /// The bounds of a number field.
    pub fn bounds(&self) -> (f64, f64) {
        (self.min.unwrap_or(0.0), self.max.unwrap_or(1.0))
    }

    fn problem(&self) -> Option<String> {
        if let Some(p) = super::score_name_problem(&self.name) {
            return Some(format!("name: {p}"));
        }
        match self.kind {
            FieldKind::Label => {
                if !(2..=9).contains(&self.labels.len()) {
                    return Some("labels: 2 to 9".into());
                }
                if let Some(l) = self.labels.iter().find(|l| ScoreValue::Label((*l).clone()).problem().is_some()) {
                    return Some(format!("labels: `{l}` is not a label (1-200 characters, not blank)"));
                }
                (1..self.labels.len())
                    .find(|&i| self.labels[..i].contains(&self.labels[i]))
                    .map(|i| format!("labels: `{}` is given twice", self.labels[i]))
            }
            FieldKind::Number => {
                let (min, max) = self.bounds();
                (!(min.is_finite() && max.is_finite() && min < max && min.abs() <= 1e12 && max.abs() <= 1e12))
                    .then(|| "min, max: finite numbers with min < max".to_owned())
            }
            FieldKind::YesNo => None,
        }
        .or_else(|| {
            (self.kind != FieldKind::Label && !self.labels.is_empty()).then(|| "labels: only for a label field".into())
        })
    }

    /// Why `value` cannot fill this field, if it cannot.
    pub fn refuses(&self, value: &ScoreValue) -> Option<String> {
        match (self.kind, value) {
            (FieldKind::YesNo, ScoreValue::Bool(_)) => None,
            (FieldKind::Number, ScoreValue::Number(n)) => {
                let (min, max) = self.bounds();
                (!(min..=max).contains(n)).then(|| format!("{}: a number from {min} to {max}", self.name))
            }
            (FieldKind::Label, ScoreValue::Label(l)) => {
                (!self.labels.contains(l)).then(|| format!("{}: one of {}", self.name, self.labels.join(", ")))
            }
            (FieldKind::YesNo, _) => Some(format!("{}: yes or no (true or false)", self.name)),
            (FieldKind::Number, _) => Some(format!("{}: a number", self.name)),
            (FieldKind::Label, _) => Some(format!("{}: one of {}", self.name, self.labels.join(", "))),
        }
    }
}

/// A queue to make (`POST /api/review-queues`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewReviewQueue {
    /// 1-200 characters.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = "\\S"))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 2000))]
    pub description: Option<String>,
    /// The scores a reviewer fills: 1 to 8, names distinct.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 8))]
    pub fields: Vec<ReviewField>,
    /// Where corrections go: a dataset of the project (the run's turn, with the correction as `expected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    /// Who reviews: user ids (at most 20); none: any operator of the project.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub assignees: Vec<String>,
}

impl NewReviewQueue {
    /// Why it cannot be made as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() || self.name.chars().count() > 200 {
            return Some("name: 1-200 characters".into());
        }
        if self.description.as_ref().is_some_and(|d| d.chars().count() > 2000) {
            return Some("description: at most 2000 characters".into());
        }
        if self.fields.is_empty() || self.fields.len() > MAX_REVIEW_FIELDS {
            return Some(format!("fields: 1 to {MAX_REVIEW_FIELDS}"));
        }
        for (i, field) in self.fields.iter().enumerate() {
            if let Some(p) = field.problem() {
                return Some(format!("fields[{i}].{p}"));
            }
            if self.fields[..i].iter().any(|f| f.name == field.name) {
                return Some(format!("fields[{i}].name: `{}` is given twice", field.name));
            }
        }
        if self.assignees.len() > MAX_ASSIGNEES {
            return Some(format!("assignees: at most {MAX_ASSIGNEES}"));
        }
        if self.assignees.iter().any(|a| a.trim().is_empty() || a.chars().count() > 128) {
            return Some("assignees: user ids of 1-128 characters".into());
        }
        None
    }
}

/// A reviewer's work in a queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewerProgress {
    pub reviewer: Actor,
    pub done: u64,
    pub skipped: u64,
}

/// A queue as kept, with its counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewQueue {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub fields: Vec<ReviewField>,
    pub dataset_id: Option<String>,
    pub assignees: Vec<String>,
    pub created_by: Actor,
    pub created_at: DateTime<Utc>,
    pub pending: u64,
    pub done: u64,
    pub skipped: u64,
    /// Each reviewer's items, most done first.
    pub reviewers: Vec<ReviewerProgress>,
}

/// The project's queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewQueueList {
    pub queues: Vec<ReviewQueue>,
}

/// An item's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    Pending,
    Done,
    Skipped,
}

impl ReviewStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::Pending => "pending",
            ReviewStatus::Done => "done",
            ReviewStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ReviewStatus::Pending),
            "done" => Some(ReviewStatus::Done),
            "skipped" => Some(ReviewStatus::Skipped),
            _ => None,
        }
    }
}

/// Runs, or sessions, to put in a queue (`POST /api/review-queues/{id}/items`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewReviewItems {
    /// Up to 100 runs of the project; one already in the queue (at that step) is passed over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub run_ids: Vec<String>,
    /// Or up to 100 sessions of the project, each reviewed whole (its runs in order); one already
    /// in the queue is passed over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(schema_with = session_ids_schema))]
    pub session_ids: Vec<String>,
    /// With `run_ids`: one step of each run to review; absent: the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u32>,
}

impl NewReviewItems {
    /// Why the request cannot be taken as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        match (self.run_ids.len(), self.session_ids.len()) {
            (0, 0) => Some(format!("run_ids: give 1 to {MAX_RUNS_PER_ADD} runs, or session_ids")),
            (r, s) if r > 0 && s > 0 => Some("session_ids: give runs or sessions, not both".into()),
            (r, s) if r.max(s) > MAX_RUNS_PER_ADD => {
                Some(format!("{}: at most {MAX_RUNS_PER_ADD}", if r > 0 { "run_ids" } else { "session_ids" }))
            }
            (0, _) if self.step_index.is_some() => Some("step_index: only with run_ids".into()),
            _ => self
                .session_ids
                .iter()
                .enumerate()
                .find_map(|(i, id)| super::limits::check_session_id(&format!("session_ids[{i}]"), id).err()),
        }
    }
}

/// `NewReviewItems.session_ids`: session ids as runs carry them.
#[cfg(feature = "openapi")]
fn session_ids_schema() -> utoipa::openapi::schema::Schema {
    let item = super::openapi::printable_name(super::limits::MAX_SESSION_ID_CHARS);
    super::openapi::raw(serde_json::json!({"type": "array", "maxItems": MAX_RUNS_PER_ADD, "items": item}))
}

/// What adding runs did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddedReviewItems {
    /// Items made.
    pub added: u32,
    /// Runs already in the queue (at that step).
    pub already: u32,
}

/// One item of a queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewItem {
    pub id: String,
    pub queue_id: String,
    /// The run reviewed; for a session, its latest run when it was added
    /// (where the verdict's scores and correction are kept).
    pub run_id: String,
    pub step_index: Option<u32>,
    /// The session reviewed whole, for an item of a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub status: ReviewStatus,
    pub reviewed_by: Option<Actor>,
    pub reviewed_at: Option<DateTime<Utc>>,
    /// The output it should have given, as the reviewer wrote it.
    pub correction: Option<String>,
    pub added_at: DateTime<Utc>,
}

/// A page of a queue's items, in the order they were added.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewItemPage {
    pub items: Vec<ReviewItem>,
    pub next_cursor: Option<String>,
}

/// A reviewer's verdict on an item (`POST …/items/{item_id}/review`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReviewSubmit {
    /// A value for some of the queue's fields, by name (kept as scores of the run, or its step).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::review_scores))]
    pub scores: std::collections::BTreeMap<String, ScoreValue>,
    /// A comment kept with each score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 4000))]
    pub comment: Option<String>,
    /// The output the run should have given: into the queue's dataset as an item's `expected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 32000))]
    pub correction: Option<String>,
    /// Skip the item (nothing else may be given).
    #[serde(default)]
    pub skip: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(kind: FieldKind) -> ReviewField {
        ReviewField { name: "x".into(), kind, min: None, max: None, labels: vec![] }
    }

    #[test]
    fn fields_take_their_kind_of_value() {
        let yes = field(FieldKind::YesNo);
        assert!(yes.refuses(&ScoreValue::Bool(true)).is_none());
        assert!(yes.refuses(&ScoreValue::Number(1.0)).is_some());
        let n = ReviewField { min: Some(1.0), max: Some(5.0), ..field(FieldKind::Number) };
        assert!(n.refuses(&ScoreValue::Number(3.0)).is_none());
        assert!(n.refuses(&ScoreValue::Number(6.0)).unwrap().contains("from 1 to 5"));
        let l = ReviewField { labels: vec!["good".into(), "bad".into()], ..field(FieldKind::Label) };
        assert!(l.refuses(&ScoreValue::Label("good".into())).is_none());
        assert!(l.refuses(&ScoreValue::Label("meh".into())).is_some());
        assert!(field(FieldKind::Label).problem().is_some(), "a label field needs labels");
        assert!(ReviewField { labels: vec!["a".into()], ..field(FieldKind::YesNo) }.problem().is_some());
        assert!(ReviewField { min: Some(2.0), max: Some(1.0), ..field(FieldKind::Number) }.problem().is_some());
    }

    #[test]
    fn items_are_runs_or_sessions() {
        let runs = NewReviewItems { run_ids: vec!["r".into()], step_index: Some(1), ..Default::default() };
        assert_eq!(runs.problem(), None);
        let sessions = NewReviewItems { session_ids: vec!["chat-1".into()], ..Default::default() };
        assert_eq!(sessions.problem(), None);
        assert!(NewReviewItems::default().problem().unwrap().starts_with("run_ids"));
        let both = NewReviewItems { run_ids: vec!["r".into()], ..sessions.clone() };
        assert!(both.problem().unwrap().contains("not both"));
        let stepped = NewReviewItems { step_index: Some(0), ..sessions.clone() };
        assert!(stepped.problem().unwrap().starts_with("step_index"));
        let bad = NewReviewItems { session_ids: vec!["a\u{7}".into()], ..Default::default() };
        assert!(bad.problem().unwrap().starts_with("session_ids[0]"));
        let many = NewReviewItems { session_ids: vec!["s".into(); MAX_RUNS_PER_ADD + 1], ..Default::default() };
        assert!(many.problem().unwrap().starts_with("session_ids: at most"));
    }
}
