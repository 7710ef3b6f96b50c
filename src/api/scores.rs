//! Scores for the trace page: a run's scores with their summary, and the
//! form that adds a person's score (see `POST /api/scores`).

use leptos::prelude::*;
use runlens_engine::model::{Score, ScoreSummary, ScoreValue};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;

/// A failed score form (about nothing in particular: the form is one).
pub type ScoreError = ActionError<String>;

/// A run's scores, oldest first, with one summary per name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunScores {
    pub scores: Vec<Score>,
    pub summary: Vec<ScoreSummary>,
}

/// The value a person typed: `yes`/`no` (or `true`/`false`), a number, or
/// else a label.
pub fn parse_value(text: &str) -> ScoreValue {
    let text = text.trim();
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" => return ScoreValue::Bool(true),
        "no" | "false" => return ScoreValue::Bool(false),
        _ => {}
    }
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() => ScoreValue::Number(n),
        _ => ScoreValue::Label(text.to_owned()),
    }
}

/// Run `run_id`'s scores; `Ok(None)` when there is no such run (or it
/// belongs to a project the caller has no role in).
#[server]
pub async fn get_run_scores(run_id: String) -> Result<Option<RunScores>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, head)) = super::ssr::run_or_none(&run_id, super::ssr::Role::Viewer).await? else {
        return Ok(None);
    };
    match engine.scores().of_run(&head.project, &run_id).await {
        Ok(scores) => {
            let summary = ScoreSummary::of(&scores);
            Ok(Some(RunScores { scores, summary }))
        }
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

/// Adds the signed-in person's score to run `run_id` (operators and above).
#[server]
pub async fn add_run_score(
    run_id: String,
    name: String,
    value: String,
    comment: Option<String>,
    on: Option<String>,
) -> Result<(), ScoreError> {
    use super::ssr::{caller, engine, form_error, form_failed, form_refused};
    use super::ErrorKind;
    use runlens_engine::model::NewScore;

    let engine = engine().map_err(|e| form_error(ErrorKind::Internal, e))?;
    let caller = caller().map_err(|e| form_error(ErrorKind::Forbidden, e))?;
    let head = caller.run(&engine, &run_id, super::ssr::Role::Operator).await.map_err(form_refused)?;
    if value.trim().is_empty() {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        return Err(form_error(ErrorKind::Invalid, "value: give one"));
    }
    let (step_index, call_id) = match parse_target(on.as_deref().unwrap_or("")) {
        Ok(target) => target,
        Err(why) => {
            super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
            return Err(form_error(ErrorKind::Invalid, why));
        }
    };
    let new = NewScore {
        run_id,
        step_index,
        call_id,
        name: name.trim().to_owned(),
        value: parse_value(&value),
        comment: super::ssr::non_empty(comment),
    };
    let source = crate::server::routes::scores::source_of(&caller);
    engine
        .scores()
        .add(&head.project, new, source, None, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "adding a score"))?;
    Ok(())
}

/// What a score is on, as typed: blank for the run, `step N` (or `N`) for
/// step N, anything else a tool call's id.
pub fn parse_target(on: &str) -> Result<(Option<u32>, Option<String>), String> {
    let on = on.trim();
    if on.is_empty() || on.eq_ignore_ascii_case("run") || on.eq_ignore_ascii_case("the run") {
        return Ok((None, None));
    }
    let step = on.strip_prefix("step").map(str::trim).unwrap_or(on);
    if step.chars().all(|c| c.is_ascii_digit()) {
        return step.parse().map(|n| (Some(n), None)).map_err(|_| format!("on: `{on}` is not a step index"));
    }
    if on.chars().count() > runlens_engine::model::limits::MAX_ID_CHARS {
        return Err("on: a tool call's id is at most 128 characters".into());
    }
    Ok((None, Some(on.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_is_on_the_run_a_step_or_a_call() {
        assert_eq!(parse_target(""), Ok((None, None)));
        assert_eq!(parse_target("the run"), Ok((None, None)));
        assert_eq!(parse_target("step 3"), Ok((Some(3), None)));
        assert_eq!(parse_target("2"), Ok((Some(2), None)));
        assert_eq!(parse_target("call_0_1"), Ok((None, Some("call_0_1".into()))));
        assert!(parse_target("step 99999999999").is_err());
    }

    #[test]
    fn typed_values_read_as_yes_no_numbers_or_labels() {
        assert_eq!(parse_value(" Yes "), ScoreValue::Bool(true));
        assert_eq!(parse_value("false"), ScoreValue::Bool(false));
        assert_eq!(parse_value("0.75"), ScoreValue::Number(0.75));
        assert_eq!(parse_value("-3"), ScoreValue::Number(-3.0));
        assert_eq!(parse_value("NaN"), ScoreValue::Label("NaN".into()));
        assert_eq!(parse_value("relevant"), ScoreValue::Label("relevant".into()));
    }
}
