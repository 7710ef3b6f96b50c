//! LLM as judge: a `judge` scorer's verdict on a run comes from a run of its
//! own — the judge's prompt (see [`crate::model::judge`]) sent to the chosen
//! model with no tools, answering a score, a label and its reasoning as a
//! structured result. The judge's run is an ordinary run of the project
//! (tagged `runlens.judge`, so it can be filtered out or looked at), which
//! keeps what the judge read and said, its tokens and cost; the score links
//! to it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::Scores;
use crate::model::judge::{answer_schema, read_answer, JudgePrompt, DEFAULT_LABELS, JUDGE_INSTRUCTIONS};
use crate::model::{Actor, CreateRun, NamedScorer, Run, RunStatus, ScoreSubject, ScoreValue, Scorer, Verdict};

/// The tag every judge's run carries (its value: the score's name).
pub const JUDGE_TAG: &str = "runlens.judge";
/// How long a judge's run may take before the verdict is given up (and the run cancelled).
pub const JUDGE_TIMEOUT: Duration = Duration::from_secs(180);
/// Characters of the judged run's prompt and answer the judge reads, at most.
const MAX_JUDGED_CHARS: usize = 32_000;

/// The judge's model (`builtin` when none) and the settings its run uses:
/// the built-in model's judge mode, or a provider's model at temperature 0.
fn judge_model(model: Option<&str>) -> (String, Value) {
    match model.filter(|m| *m != "builtin") {
        Some(m) => (m.to_owned(), json!({"temperature": 0})),
        None => ("builtin".to_owned(), json!({"judge": true})),
    }
}

/// `text`, cut to [`MAX_JUDGED_CHARS`] characters (saying so).
fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_JUDGED_CHARS {
        return text.to_owned();
    }
    text.chars().take(MAX_JUDGED_CHARS).collect::<String>() + "\n(cut here: the rest is longer than the judge reads)"
}

impl Scores<'_> {
    /// Whether `scorer` can be applied in this engine: its configuration
    /// (see [`crate::eval::check`]) and, for a judge, that its model exists.
    pub(crate) fn check_scorer(self, scorer: &Scorer) -> Result<(), String> {
        crate::eval::check(scorer)?;
        if let Scorer::Judge { model, .. } = scorer {
            let (name, settings) = judge_model(model.as_deref());
            crate::runtime::create::check_model(&self.rt, Some(&name), &settings)
                .map_err(|e| format!("judge: model: {e}"))?;
        }
        Ok(())
    }

    /// The verdict of `named`'s scorer on the ended `run` of `project`: a
    /// judge's from its own run (started as `by`, named for the score), any
    /// other scorer's computed here. The error says why there is none.
    pub(super) async fn verdict(
        self,
        project: &str,
        run: &Run,
        named: &NamedScorer,
        subject: &ScoreSubject,
        expected: Option<&Value>,
        by: &Actor,
    ) -> Result<Verdict, String> {
        let Scorer::Judge { rubric, model, labels } = &named.scorer else {
            return crate::eval::score(&named.scorer, subject, expected);
        };
        let name = named.score_name();
        let labels: Vec<String> =
            if labels.is_empty() { DEFAULT_LABELS.map(str::to_owned).to_vec() } else { labels.clone() };
        let expected = expected.filter(|v| !v.is_null()).map(|v| match v {
            Value::String(s) => cut(s),
            other => cut(&other.to_string()),
        });
        let prompt = JudgePrompt {
            rubric: rubric.clone(),
            input: cut(&run.initial_prompt),
            answer: subject.output.as_deref().map(cut),
            expected,
            labels: labels.clone(),
        };
        let (model, settings) = judge_model(model.as_deref());
        let run_name: String = format!("judge {name} · {}", run.name).chars().take(200).collect();
        let req = CreateRun {
            name: Some(run_name),
            initial_prompt: prompt.render(),
            system_prompt: Some(JUDGE_INSTRUCTIONS.to_owned()),
            tools: Some(Vec::new()),
            tags: BTreeMap::from([(JUDGE_TAG.to_owned(), name)]),
            max_turns: Some(3),
            model: Some(model),
            model_settings: Some(settings),
            interactive: Some(false),
            result_schema: Some(answer_schema(&labels)),
            metadata: Some(json!({"judged_run": run.id})),
            ..CreateRun::default()
        };
        let (judge_run, _) = (self.runs().create_run_in(req, project, Some(by)).await)
            .map_err(|e| format!("judge: the judge's run could not start: {e}"))?;
        let ended = match self.runs().wait_until_settled(&judge_run.id, JUDGE_TIMEOUT).await {
            Ok(ended) => ended,
            Err(e) => {
                let _ = self.runs().cancel(&judge_run.id).await;
                return Err(format!("judge: the judge's run `{}` did not end: {e}", judge_run.id));
            }
        };
        if ended.status != RunStatus::Done {
            let why = ended.failure_reason.clone().unwrap_or_else(|| ended.status.to_string());
            return Err(format!("judge: the judge's run `{}` ended {}: {why}", ended.id, ended.status));
        }
        let answer = read_answer(ended.result.as_ref().unwrap_or(&Value::Null), &labels)
            .map_err(|e| format!("judge: {e} (see run `{}`)", ended.id))?;
        let reason = if answer.reasoning.is_empty() {
            format!("The judge chose “{}”.", answer.label)
        } else {
            answer.reasoning
        };
        Ok(Verdict {
            value: ScoreValue::Number(answer.score),
            reason,
            label: Some(answer.label),
            judge_run_id: Some(ended.id),
        })
    }
}
