//! Review queues for the pages: the project's queues, one queue with its
//! items, the next item to review with what its run said, and the forms
//! that make a queue, add runs to it and review an item (see
//! `/api/review-queues…`). The review form posts the queue's fields as
//! `f0` … `f7`, in the queue's order, so it works without JavaScript.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use runlens_engine::model::{ReviewItem, ReviewItemPage, ReviewQueue, Role};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;

/// A failed review form.
pub type ReviewError = ActionError<String>;

/// Items a queue's page lists.
pub const ITEMS_SHOWN: u32 = 50;

/// What `/reviews` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewQueuesView {
    pub queues: Vec<ReviewQueue>,
    /// The project's datasets (id, name), for corrections.
    pub datasets: Vec<(String, String)>,
    pub role: Option<Role>,
}

/// What `/reviews/:id` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewQueueView {
    pub queue: ReviewQueue,
    pub items: ReviewItemPage,
    pub role: Option<Role>,
}

/// What a reviewer reads of the run under review.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewedRun {
    pub id: String,
    pub name: String,
    pub status: String,
    pub prompt: String,
    pub answer: Option<String>,
    /// One line per step: its index, and its tool calls or its answer.
    pub steps: Vec<String>,
    /// For an item of a session: each of its runs, oldest first.
    pub turns: Vec<ReviewedTurn>,
}

/// One run of a session under review: what it was asked and answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewedTurn {
    pub run_id: String,
    pub prompt: String,
    pub answer: Option<String>,
}

/// What `/reviews/:id/review` shows: the queue, the next pending item with
/// its run (none left: `None`), and whether the caller may review it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NextReview {
    pub queue: ReviewQueue,
    pub item: Option<(ReviewItem, ReviewedRun)>,
    pub may_review: bool,
}

/// The project's queues, and its datasets for the form.
#[server]
pub async fn get_review_queues() -> Result<ReviewQueuesView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let queues = engine.reviews().list(&caller.project).await.map_err(super::ssr::to_server_error)?;
    let datasets = engine.datasets().list(&caller.project, None, 0, 100).await.map_err(super::ssr::to_server_error)?;
    let datasets = datasets.datasets.into_iter().map(|d| (d.id, d.name)).collect();
    Ok(ReviewQueuesView { queues, datasets, role: caller.role_in(&caller.project) })
}

/// Queue `id` with its first items; `None` when there is no such queue.
#[server]
pub async fn get_review_queue(id: String) -> Result<Option<ReviewQueueView>, ServerFnError> {
    use runlens_engine::EngineError;
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let queue = match engine.reviews().get(&caller.project, &id).await {
        Ok(q) => q,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let items = (engine.reviews().items(&caller.project, &id, None, None, ITEMS_SHOWN).await)
        .map_err(super::ssr::to_server_error)?;
    Ok(Some(ReviewQueueView { queue, items, role: caller.role_in(&caller.project) }))
}

/// The next pending item of queue `id` with its run; `None` for no such queue.
#[server]
pub async fn get_next_review(id: String) -> Result<Option<NextReview>, ServerFnError> {
    use runlens_engine::model::ReviewStatus;
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let queue = match engine.reviews().get(&caller.project, &id).await {
        Ok(q) => q,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let admin = caller.role_in(&caller.project).is_some_and(|r| r >= Role::Admin);
    let operator = caller.role_in(&caller.project).is_some_and(|r| r >= Role::Operator);
    let may_review = operator && runlens_engine::Reviews::may_review(&queue, &caller.actor, admin);
    let next = (engine.reviews().items(&caller.project, &id, Some(ReviewStatus::Pending), None, 1).await)
        .map_err(super::ssr::to_server_error)?;
    let Some(item) = next.items.into_iter().next() else {
        return Ok(Some(NextReview { queue, item: None, may_review }));
    };
    let run = engine.runs().get_run(&item.run_id).await.map_err(super::ssr::to_server_error)?;
    let turns = match &item.session_id {
        Some(session) => (engine.runs().session(&caller.project, session).await)
            .map_err(super::ssr::to_server_error)?
            .runs
            .iter()
            .map(|r| ReviewedTurn {
                run_id: r.id.clone(),
                prompt: clip(&r.initial_prompt, 2000),
                answer: answer_of(r).map(|a| clip(&a, 4000)),
            })
            .collect(),
        None => Vec::new(),
    };
    let steps = (engine.traces().steps_page(&run.id, 0, 50).await.map_err(super::ssr::to_server_error)?)
        .steps
        .into_iter()
        .map(|s| {
            let calls: Vec<String> = s
                .tool_calls
                .iter()
                .map(|c| format!("{}({})", c.tool_name, clip(&c.arguments.to_string(), 120)))
                .collect();
            if calls.is_empty() {
                format!("step {}: answered", s.index)
            } else {
                format!("step {}: {}", s.index, calls.join(", "))
            }
        })
        .collect();
    let reviewed = ReviewedRun {
        id: run.id.clone(),
        name: run.name.clone(),
        status: run.status.to_string(),
        prompt: clip(&run.initial_prompt, 4000),
        answer: answer_of(&run).map(|a| clip(&a, 8000)),
        steps,
        turns,
    };
    Ok(Some(NextReview { queue, item: Some((item, reviewed)), may_review }))
}

/// A run's answer as text: its last message or structured output, or why it failed.
#[cfg(feature = "ssr")]
fn answer_of(run: &runlens_engine::model::Run) -> Option<String> {
    use runlens_engine::model::RunOutput;
    match run.output_union() {
        Some(RunOutput::Structured { value }) => Some(value.to_string()),
        Some(RunOutput::LastMessage { message, value }) => message.or_else(|| value.map(|v| v.to_string())),
        Some(RunOutput::Error { message }) => Some(format!("(failed) {message}")),
        None => None,
    }
}

#[cfg(feature = "ssr")]
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    text.chars().take(max).collect::<String>() + "…"
}

/// Makes a queue (operators). `fields` is one field per line (or `;`):
/// `correct: yes/no`, `quality: 1-5`, `tone: kind | neutral | rude`.
#[server]
pub async fn create_review_queue(
    name: String,
    fields: String,
    dataset_id: Option<String>,
) -> Result<String, ReviewError> {
    use super::ssr::{form_failed, non_empty};
    use runlens_engine::model::NewReviewQueue;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let invalid = |why: String| super::ssr::form_invalid(why);
    let fields = parse_fields(&fields).map_err(invalid)?;
    let req = NewReviewQueue { name, description: None, fields, dataset_id: non_empty(dataset_id), assignees: vec![] };
    let made = engine
        .reviews()
        .create(&caller.project, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "making a review queue"))?;
    leptos_axum::redirect(&format!("/reviews/{}", crate::format::url_encode(&made.id)));
    Ok(made.id)
}

/// The fields of `text` (see [`create_review_queue`]).
#[cfg(feature = "ssr")]
fn parse_fields(text: &str) -> Result<Vec<runlens_engine::model::ReviewField>, String> {
    use runlens_engine::model::{FieldKind, ReviewField};
    let mut fields = Vec::new();
    for line in text.split(['\n', ';']).map(str::trim).filter(|l| !l.is_empty()) {
        let (name, kind) = line.split_once(':').ok_or_else(|| format!("fields: `{line}` is not `name: kind`"))?;
        let (name, kind) = (name.trim().to_owned(), kind.trim());
        let field = if kind.eq_ignore_ascii_case("yes/no") || kind.is_empty() {
            ReviewField { name, kind: FieldKind::YesNo, min: None, max: None, labels: vec![] }
        } else if kind.contains('|') {
            let labels = kind.split('|').map(|l| l.trim().to_owned()).collect();
            ReviewField { name, kind: FieldKind::Label, min: None, max: None, labels }
        } else if let Some((min, max)) =
            kind.split_once('-').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
        {
            ReviewField { name, kind: FieldKind::Number, min: Some(min), max: Some(max), labels: vec![] }
        } else {
            return Err(format!("fields: `{kind}` is not yes/no, a range like 1-5, or labels like good | bad"));
        };
        fields.push(field);
    }
    Ok(fields)
}

/// Adds runs (ids separated by spaces, commas or lines), or sessions
/// (`what` = `sessions`: one id per line, as session ids may hold spaces
/// and commas), to queue `queue_id` (operators); (added, already there).
#[server]
pub async fn add_review_items(queue_id: String, ids: String, what: Option<String>) -> Result<(u32, u32), ReviewError> {
    use super::ssr::form_failed;
    use runlens_engine::model::NewReviewItems;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let req = if what.as_deref() == Some("sessions") {
        let session_ids = ids.lines().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        NewReviewItems { session_ids, ..Default::default() }
    } else {
        let run_ids =
            ids.split(|c: char| c.is_whitespace() || c == ',').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        NewReviewItems { run_ids, ..Default::default() }
    };
    let added = engine
        .reviews()
        .add_items(&caller.project, &queue_id, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "adding to a review queue"))?;
    Ok((added.added, added.already))
}

/// A reviewer's verdict on item `item_id` of queue `queue_id`: the queue's
/// fields as `f0` … `f7` in its order (`yes`/`no`, a number, or a label;
/// blank: not given), a comment and a correction, or `skip`.
#[server]
pub async fn submit_review(
    queue_id: String,
    item_id: String,
    f0: Option<String>,
    f1: Option<String>,
    f2: Option<String>,
    f3: Option<String>,
    f4: Option<String>,
    f5: Option<String>,
    f6: Option<String>,
    f7: Option<String>,
    comment: Option<String>,
    correction: Option<String>,
    skip: Option<String>,
) -> Result<(), ReviewError> {
    use super::ssr::{form_failed, non_empty};
    use runlens_engine::model::{FieldKind, ReviewSubmit, ScoreValue};

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let invalid = |why: String| super::ssr::form_invalid(why);
    let queue =
        engine.reviews().get(&caller.project, &queue_id).await.map_err(|e| form_failed(e, "reading a queue"))?;
    let mut req = ReviewSubmit {
        comment: non_empty(comment),
        correction: non_empty(correction),
        skip: skip.is_some_and(|s| !s.is_empty()),
        ..ReviewSubmit::default()
    };
    let given = [f0, f1, f2, f3, f4, f5, f6, f7];
    for (field, value) in queue.fields.iter().zip(given) {
        let Some(value) = non_empty(value).map(|v| v.trim().to_owned()) else { continue };
        let value = match field.kind {
            FieldKind::YesNo => match value.as_str() {
                "yes" | "true" => ScoreValue::Bool(true),
                "no" | "false" => ScoreValue::Bool(false),
                _ => return Err(invalid(format!("{}: yes or no", field.name))),
            },
            FieldKind::Number => {
                ScoreValue::Number(value.parse().map_err(|_| invalid(format!("{}: a number", field.name)))?)
            }
            FieldKind::Label => ScoreValue::Label(value),
        };
        req.scores.insert(field.name.clone(), value);
    }
    if req.skip {
        req.scores.clear();
        req.correction = None;
        req.comment = None;
    }
    let admin = caller.role_in(&caller.project).is_some_and(|r| r >= Role::Admin);
    engine
        .reviews()
        .submit(&caller.project, &queue_id, &item_id, req, &caller.actor, admin)
        .await
        .map_err(|e| form_failed(e, "reviewing an item"))?;
    Ok(())
}
