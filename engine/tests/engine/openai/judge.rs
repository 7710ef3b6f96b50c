//! A `judge` scorer through an OpenAI-compatible model: what the judge is
//! sent (the instructions, the tagged prompt, temperature 0, no tools), its
//! answer kept as a score with its label and run, a label outside the
//! choices repaired once through the run's result schema, and a judge that
//! never answers well giving no score.

use runlens_engine::model::{Actor, CreateRun, EvaluateRun, NamedScorer, RunStatus, ScoreValue, Scorer};
use serde_json::json;

use super::mock::{Mock, Reply};
use super::*;
use crate::support::SETTLE;

fn judge_answer(body: &str) -> Reply {
    Reply::sse(&[text(body), finish("stop"), usage(120, 30, 0, 0)], 11)
}

/// A finished run of the built-in model that answered "Paris".
async fn answered(engine: &Engine) -> String {
    let req = CreateRun {
        initial_prompt: "What is the capital of France?".into(),
        model_settings: Some(json!({"script": [{"text": "Paris"}]})),
        ..CreateRun::default()
    };
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    run.id
}

fn judged_by_mock(labels: &[&str]) -> EvaluateRun {
    EvaluateRun {
        scorers: vec![NamedScorer {
            name: Some("faithful".into()),
            scorer: Scorer::Judge {
                rubric: "Names the capital correctly.".into(),
                model: Some(MODEL.into()),
                labels: labels.iter().map(|l| l.to_string()).collect(),
            },
        }],
        expected: Some(json!("Paris")),
    }
}

#[tokio::test]
async fn a_providers_model_judges_a_run() {
    let mock = Mock::start(vec![
        // A label outside the choices: the run's schema asks once for a repair.
        judge_answer(r#"{"score": 0.9, "label": "great", "reasoning": "Names Paris."}"#),
        judge_answer(r#"{"score": 0.9, "label": "good", "reasoning": "It names Paris, the capital."}"#),
    ])
    .await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let run = answered(&engine).await;
    let scores =
        engine.scores().evaluate("default", &run, judged_by_mock(&["good", "bad"]), &Actor::system()).await.unwrap();

    let score = &scores[0];
    assert_eq!((score.value.clone(), score.label.as_deref()), (ScoreValue::Number(0.9), Some("good")));
    assert_eq!(score.comment.as_deref(), Some("It names Paris, the capital."));
    assert_eq!(score.scorer.as_deref(), Some("judge"));
    let judge = engine.runs().get_run(score.judge_run_id.as_deref().unwrap()).await.unwrap();
    assert_eq!((judge.status, judge.model.as_str(), judge.usage.requests), (RunStatus::Done, MODEL, 2));
    assert_eq!(judge.tags["runlens.judge"], "faithful");

    let sent = mock.requests();
    assert_eq!(sent.len(), 2);
    let body = &sent[0].body;
    assert_eq!(body["temperature"], json!(0));
    assert!(body.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)), "{body}");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(messages[0]["content"].as_str().unwrap().starts_with("You are an evaluator."));
    let prompt = messages[1]["content"].as_str().unwrap();
    for part in [
        "<rubric>\nNames the capital correctly.\n</rubric>",
        "<labels>\ngood\nbad\n</labels>",
        "<input>\nWhat is the capital of France?\n</input>",
        "<answer>\nParis\n</answer>",
        "<expected>\nParis\n</expected>",
    ] {
        assert!(prompt.contains(part), "{part} in {prompt}");
    }
    let repair = sent[1].body["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(repair.contains("great") || repair.contains("enum"), "the repair names the problem: {repair}");
}

#[tokio::test]
async fn a_judge_that_never_answers_well_gives_no_score() {
    let mock = Mock::start(vec![
        judge_answer("I think it is fine."),
        judge_answer(r#"{"score": 7, "label": "good", "reasoning": "x"}"#),
    ])
    .await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let run = answered(&engine).await;
    let err = engine
        .scores()
        .evaluate("default", &run, judged_by_mock(&["good", "bad"]), &Actor::system())
        .await
        .unwrap_err();
    assert!(matches!(err, runlens_engine::EngineError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("scorers[0]: judge: "), "{err}");
    assert!(engine.scores().of_run("default", &run).await.unwrap().is_empty(), "nothing is kept");

    // A provider that fails: the judge's run fails, and says so.
    let failing = Mock::start(vec![Reply::error(400, "model overloaded")]).await;
    let (engine, _dir) = engine_with(provider(&failing)).await;
    let run = answered(&engine).await;
    let err =
        engine.scores().evaluate("default", &run, judged_by_mock(&[]), &Actor::system()).await.unwrap_err().to_string();
    assert!(err.contains("ended failed"), "{err}");
}
