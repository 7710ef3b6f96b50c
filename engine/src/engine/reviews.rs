//! Review queues (see [`crate::model::review`]): made, read and deleted,
//! filled with runs (or a step of each), and worked through by reviewers.
//!
//! A reviewer's verdict keeps each value as a person's score of the run
//! (or its step) through [`super::Scores`], so every score is checked
//! against the run and audited like any other; a correction goes into the
//! queue's dataset as a new item of the run's turn with the correction as
//! its `expected`. An item is reviewed once: a second verdict on it is a
//! conflict. Who may review is the server's decision (operators and
//! above); a queue with assignees takes verdicts from them (and the
//! project's admins) only.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
use crate::model::{
    Actor, AddedReviewItems, NewReviewItems, NewReviewQueue, NewScore, ReviewField, ReviewItem, ReviewItemPage,
    ReviewQueue, ReviewStatus, ReviewSubmit, ReviewerProgress, RunToDataset, ScoreSource, MAX_CORRECTION_CHARS,
    MAX_PROJECT_QUEUES, MAX_QUEUE_ITEMS, MAX_RUN_SCORES, MAX_SCORE_COMMENT_CHARS,
};
use crate::runtime::now;
use crate::store::{ItemsAdded, QueueCount, QueueRow};

crate::engine::facade_group!(Reviews, reviews, "Review queues: runs put in front of people to score.");

/// A queue's settings as kept (its `spec` column).
#[derive(Serialize, Deserialize, Default)]
struct Spec {
    description: Option<String>,
    fields: Vec<ReviewField>,
    dataset_id: Option<String>,
    assignees: Vec<String>,
}

fn short(id: &str) -> String {
    id.chars().take(crate::model::limits::MAX_ID_CHARS).collect()
}

fn queue_not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("review queue `{}`", short(id)))
}

impl Reviews<'_> {
    /// Makes `req` a queue of `project`. `NotFound` for a dataset not of
    /// `project`; `Conflict` for a name in use or a project at its cap.
    pub async fn create(self, project: &str, req: NewReviewQueue, by: &Actor) -> Result<ReviewQueue> {
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        if let Some(dataset) = &req.dataset_id {
            self.datasets().get(project, dataset).await?;
        }
        let spec = Spec {
            description: req.description.filter(|d| !d.trim().is_empty()),
            fields: req.fields,
            dataset_id: req.dataset_id,
            assignees: req.assignees,
        };
        let row = QueueRow {
            id: uuid::Uuid::now_v7().to_string(),
            name: req.name.trim().to_owned(),
            spec: serde_json::to_string(&spec).map_err(|e| EngineError::Internal(e.to_string()))?,
            created_by: by.clone(),
            created_at: now(),
        };
        (self.rt.store.reviews().insert_queue(project, &row, MAX_PROJECT_QUEUES).await?).kept(
            "a review queue",
            "review queues",
            &row.name,
            MAX_PROJECT_QUEUES,
        )?;
        self.identity().audit(Some(project), by, "review_queue_created", Some(&row.id), Some(row.name.clone())).await;
        Ok(self.with_counts(vec![row]).await?.remove(0))
    }

    /// `rows` with their counts and their reviewers' progress (one read).
    async fn with_counts(self, rows: Vec<QueueRow>) -> Result<Vec<ReviewQueue>> {
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let mut counts: HashMap<String, Vec<QueueCount>> = HashMap::new();
        for c in self.rt.store.reviews().queue_counts(&ids).await? {
            counts.entry(c.queue_id.clone()).or_default().push(c);
        }
        Ok(rows
            .into_iter()
            .map(|row| {
                let c = counts.remove(&row.id).unwrap_or_default();
                counted(row, c)
            })
            .collect())
    }

    /// Queue `id` of `project`, with its counts.
    pub async fn get(self, project: &str, id: &str) -> Result<ReviewQueue> {
        let row = self.rt.store.reviews().queue(project, id).await?.ok_or_else(|| queue_not_found(id))?;
        Ok(self.with_counts(vec![row]).await?.remove(0))
    }

    /// `project`'s queues by name, with their counts.
    pub async fn list(self, project: &str) -> Result<Vec<ReviewQueue>> {
        let rows = self.rt.store.reviews().queues(project, MAX_PROJECT_QUEUES).await?;
        self.with_counts(rows).await
    }

    /// Deletes queue `id` and its items (the scores given stay).
    pub async fn delete(self, project: &str, id: &str, by: &Actor) -> Result<()> {
        let queue = self.get(project, id).await?;
        if !self.rt.store.reviews().delete_queue(project, id).await? {
            return Err(queue_not_found(id));
        }
        self.identity().audit(Some(project), by, "review_queue_deleted", Some(id), Some(queue.name)).await;
        Ok(())
    }

    /// Puts `req.run_ids` (runs of `project`; one at `req.step_index`), or
    /// `req.session_ids` (sessions of `project`, each kept with its latest
    /// run), in queue `id`. `Invalid` naming a run or session that is not
    /// the project's (or a step a run lacks); `Conflict` past the queue's
    /// cap. All or none.
    pub async fn add_items(self, project: &str, id: &str, req: NewReviewItems, by: &Actor) -> Result<AddedReviewItems> {
        self.get(project, id).await?;
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        let at = now();
        let item = |run_id: String, step_index: Option<u32>, session_id: Option<String>| ReviewItem {
            id: uuid::Uuid::now_v7().to_string(),
            queue_id: id.to_owned(),
            run_id,
            step_index,
            session_id,
            status: ReviewStatus::Pending,
            reviewed_by: None,
            reviewed_at: None,
            correction: None,
            added_at: at,
        };
        let mut items = Vec::with_capacity(req.run_ids.len() + req.session_ids.len());
        for (i, run_id) in req.run_ids.iter().enumerate() {
            let head = match self.rt.store.run_head(run_id).await? {
                Some(head) if head.project == project => head,
                _ => {
                    return Err(EngineError::Invalid(format!(
                        "run_ids[{i}]: no run `{}` in the project",
                        short(run_id)
                    )))
                }
            };
            if let Some(step) = req.step_index.filter(|s| *s >= head.step_count) {
                return Err(EngineError::Invalid(format!(
                    "step_index: run `{run_id}` has {} steps, no step {step}",
                    head.step_count
                )));
            }
            items.push(item(run_id.clone(), req.step_index, None));
        }
        for (i, session_id) in req.session_ids.iter().enumerate() {
            let session = self.runs().session(project, session_id).await?;
            let Some(latest) = session.runs.last() else {
                return Err(EngineError::Invalid(format!(
                    "session_ids[{i}]: no session `{}` in the project",
                    short(session_id)
                )));
            };
            items.push(item(latest.id.clone(), None, Some(session_id.clone())));
        }
        match self.rt.store.reviews().insert_items(project, id, &items, MAX_QUEUE_ITEMS).await? {
            ItemsAdded::Added(added, already) => {
                let detail = format!("{added} items");
                self.identity().audit(Some(project), by, "review_items_added", Some(id), Some(detail)).await;
                Ok(AddedReviewItems { added, already })
            }
            ItemsAdded::Full => Err(EngineError::Conflict(format!(
                "the queue would hold more than {MAX_QUEUE_ITEMS} items; nothing was added"
            ))),
        }
    }

    /// Queue `id`'s items (of `status`) after the item `after`, at most `limit`.
    pub async fn items(
        self,
        project: &str,
        id: &str,
        status: Option<ReviewStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<ReviewItemPage> {
        self.get(project, id).await?;
        let limit = limit.clamp(1, crate::model::limits::MAX_LIST_LIMIT);
        let mut items = self.rt.store.reviews().items(id, status, after, limit + 1).await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|i| i.id.clone())
        } else {
            None
        };
        Ok(ReviewItemPage { items, next_cursor })
    }

    /// Item `item_id` of queue `id` of `project`.
    pub async fn item(self, project: &str, id: &str, item_id: &str) -> Result<ReviewItem> {
        self.get(project, id).await?;
        (self.rt.store.reviews().item(id, item_id).await?)
            .ok_or_else(|| EngineError::NotFound(format!("item `{}` of review queue `{}`", short(item_id), short(id))))
    }

    /// Whether `by` may give verdicts in `queue`: an assignee, or any
    /// reviewer when it has none; `admin` (the project's) always may.
    pub fn may_review(queue: &ReviewQueue, by: &Actor, admin: bool) -> bool {
        admin || queue.assignees.is_empty() || queue.assignees.contains(&by.id)
    }

    /// `by`'s verdict on item `item_id` of queue `id`: skipped, or each
    /// value kept as a person's score and the correction added to the
    /// queue's dataset. `Forbidden` for someone the queue is not assigned
    /// to; `Invalid` for a value its field refuses (nothing kept);
    /// `Conflict` for an item already reviewed.
    pub async fn submit(
        self,
        project: &str,
        id: &str,
        item_id: &str,
        req: ReviewSubmit,
        by: &Actor,
        admin: bool,
    ) -> Result<ReviewItem> {
        let queue = self.get(project, id).await?;
        if !Self::may_review(&queue, by, admin) {
            return Err(EngineError::Forbidden("this queue is assigned to other reviewers".into()));
        }
        let item = self.item(project, id, item_id).await?;
        if item.status != ReviewStatus::Pending {
            return Err(EngineError::Conflict(format!(
                "item `{}` is already {}",
                short(item_id),
                item.status.as_str()
            )));
        }
        let correction = req.correction.as_deref().map(str::trim).filter(|c| !c.is_empty());
        if req.skip {
            if !req.scores.is_empty() || correction.is_some() {
                return Err(EngineError::Invalid("skip: a skipped item takes no scores or correction".into()));
            }
            return self.finish(project, &queue, &item, ReviewStatus::Skipped, by, None).await;
        }
        if req.scores.is_empty() && correction.is_none() {
            return Err(EngineError::Invalid("scores: give at least one, or a correction, or skip".into()));
        }
        for (name, value) in &req.scores {
            let field = (queue.fields.iter().find(|f| f.name == *name))
                .ok_or_else(|| EngineError::Invalid(format!("scores.{name}: the queue has no such field")))?;
            if let Some(why) = field.refuses(value) {
                return Err(EngineError::Invalid(format!("scores.{why}")));
            }
        }
        if req.comment.as_ref().is_some_and(|c| c.chars().count() > MAX_SCORE_COMMENT_CHARS) {
            return Err(EngineError::Invalid(format!("comment: at most {MAX_SCORE_COMMENT_CHARS} characters")));
        }
        if correction.is_some_and(|c| c.chars().count() > MAX_CORRECTION_CHARS) {
            return Err(EngineError::Invalid(format!("correction: at most {MAX_CORRECTION_CHARS} characters")));
        }
        if correction.is_some() && queue.dataset_id.is_none() {
            return Err(EngineError::Invalid("correction: this queue keeps no corrections (it has no dataset)".into()));
        }
        // The run must have room for every score, or none is kept and the item stays pending.
        let had = self.rt.store.scores().run_scores(&item.run_id, MAX_RUN_SCORES).await?.len();
        if had + req.scores.len() > MAX_RUN_SCORES as usize {
            return Err(EngineError::Conflict(format!(
                "run `{}` has {had} scores; these {} would pass the {MAX_RUN_SCORES} a run may have",
                short(&item.run_id),
                req.scores.len()
            )));
        }
        // Claimed first, so two reviewers of one item cannot both keep scores.
        let finished = self.finish(project, &queue, &item, ReviewStatus::Done, by, correction).await?;
        for (name, value) in req.scores {
            let new = NewScore {
                run_id: item.run_id.clone(),
                step_index: item.step_index,
                call_id: None,
                name,
                value,
                comment: req.comment.clone(),
            };
            self.scores().add(project, new, ScoreSource::Human, None, by).await?;
        }
        if let (Some(correction), Some(dataset)) = (correction, &queue.dataset_id) {
            let req = RunToDataset {
                dataset_id: dataset.clone(),
                expected: Some(serde_json::Value::String(correction.to_owned())),
                up_to_step: item.step_index,
            };
            self.datasets().add_run(project, &item.run_id, req, by).await?;
        }
        Ok(finished)
    }

    async fn finish(
        self,
        project: &str,
        queue: &ReviewQueue,
        item: &ReviewItem,
        status: ReviewStatus,
        by: &Actor,
        correction: Option<&str>,
    ) -> Result<ReviewItem> {
        let at = now();
        if !self.rt.store.reviews().finish_item(&queue.id, &item.id, status, by, at, correction).await? {
            return Err(EngineError::Conflict(format!("item `{}` was reviewed meanwhile", short(&item.id))));
        }
        let detail = match &item.session_id {
            Some(session) => format!("{} of session {session}", status.as_str()),
            None => format!("{} of run {}", status.as_str(), item.run_id),
        };
        self.identity().audit(Some(project), by, "review_item_reviewed", Some(&queue.id), Some(detail)).await;
        self.item(project, &queue.id, &item.id).await
    }
}

/// Queue `row` with `counts` (its items by status and reviewer) added up.
fn counted(row: QueueRow, counts: Vec<QueueCount>) -> ReviewQueue {
    let spec: Spec = serde_json::from_str(&row.spec).unwrap_or_default();
    let (mut pending, mut done, mut skipped) = (0, 0, 0);
    let mut reviewers: BTreeMap<String, ReviewerProgress> = BTreeMap::new();
    for QueueCount { status, reviewer: who, count: n, .. } in counts {
        match status {
            ReviewStatus::Pending => pending += n,
            ReviewStatus::Done => done += n,
            ReviewStatus::Skipped => skipped += n,
        }
        if let Some(who) = who {
            let p = (reviewers.entry(who.id.clone())).or_insert_with(|| ReviewerProgress {
                reviewer: who,
                done: 0,
                skipped: 0,
            });
            match status {
                ReviewStatus::Done => p.done += n,
                ReviewStatus::Skipped => p.skipped += n,
                ReviewStatus::Pending => {}
            }
        }
    }
    let mut reviewers: Vec<ReviewerProgress> = reviewers.into_values().collect();
    reviewers.sort_by(|a, b| b.done.cmp(&a.done).then_with(|| a.reviewer.name.cmp(&b.reviewer.name)));
    ReviewQueue {
        id: row.id,
        name: row.name,
        description: spec.description,
        fields: spec.fields,
        dataset_id: spec.dataset_id,
        assignees: spec.assignees,
        created_by: row.created_by,
        created_at: row.created_at,
        pending,
        done,
        skipped,
        reviewers,
    }
}
