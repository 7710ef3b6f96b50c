//! Comparing two runs (issue 18): scripted runs that are the same, that
//! differ by one inserted step or by one call's arguments, a fork against
//! its parent and against a sibling fork, paging, and the refusals.

use runlens_engine::model::{
    Change, CompareQuery, Comparison, CreateRun, FollowUp, JsonChange, JsonOp, MessageBody, Run, RunStatus,
};
use runlens_engine::{Engine, EngineError};
use serde_json::{json, Value};

use crate::support::*;

/// A scripted turn calling the calculator with `expression`, saying `text`.
fn calc(text: &str, expression: &str) -> Value {
    json!({"text": text, "tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]})
}

fn done() -> Value {
    json!({"text": "All done."})
}

async fn scripted_run(engine: &Engine, turns: &[Value]) -> Run {
    let run = run_to_end(engine, scripted(json!(turns))).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    run
}

fn query(a: &str, b: &str) -> CompareQuery {
    CompareQuery { a: a.into(), b: b.into(), ..CompareQuery::default() }
}

async fn compare(engine: &Engine, a: &str, b: &str) -> Comparison {
    engine.comparisons().compare(&query(a, b)).await.unwrap()
}

fn step_changes(c: &Comparison) -> Vec<Change> {
    c.steps.rows.iter().map(|r| r.change).collect()
}

#[tokio::test]
async fn identical_scripted_runs_compare_as_equal() {
    let (engine, _db) = engine().await;
    let turns = [calc("Adding.", "1 + 1"), calc("Again.", "2 + 2"), done()];
    let a = scripted_run(&engine, &turns).await;
    let b = scripted_run(&engine, &turns).await;
    let c = compare(&engine, &a.id, &b.id).await;
    assert!(c.equal, "{:?}", c.divergence);
    assert_eq!((&c.divergence, &c.fork), (&None, &None));
    assert!(c.config.iter().all(|f| f.equal && f.json.is_empty() && f.words.is_empty()));
    assert_eq!(c.config.len(), 12);
    assert_eq!(step_changes(&c), [Change::Equal; 3]);
    assert_eq!((c.steps.total, c.steps.folded, c.steps.from, c.steps.next_from), (3, 0, 0, None));
    assert_eq!(c.steps.counts.equal, 3);
    assert!(c.steps.rows.iter().all(|r| r.text.is_empty() && r.calls.iter().all(|p| p.change == Change::Equal)));
    assert_eq!(c.steps.rows[0].calls[0].a.as_ref().unwrap().tool_name, "calculator");
    assert!(c.steps.rows[0].calls[0].result_equal);
    // human, then per call step an agent message and a result, then the answer.
    assert_eq!(c.messages.total, 6);
    assert!(c.messages.rows.iter().all(|r| r.change == Change::Equal && r.words.is_empty()));
    assert_eq!(c.messages.rows[1].a.as_ref().unwrap().text, "Adding.\n→ calculator({\"expression\":\"1 + 1\"})");
    assert_eq!(
        (c.totals.a.steps, c.totals.a.tool_calls, c.totals.delta.steps, c.totals.delta.tool_calls),
        (3, 2, 0, 0)
    );
    assert_eq!(c.totals.delta.total_tokens, 0);
    assert_eq!((c.a.id.as_str(), c.b.id.as_str()), (a.id.as_str(), b.id.as_str()));
    assert_eq!((c.a.message_count, c.a.tool_calls), (6, 2));

    // A run compared with itself is equal too.
    assert!(compare(&engine, &a.id, &a.id).await.equal);
}

#[tokio::test]
async fn one_extra_tool_call_in_the_middle_is_one_inserted_step() {
    let (engine, _db) = engine().await;
    let a =
        scripted_run(&engine, &[calc("One.", "1 + 1"), calc("Two.", "2 + 2"), calc("Three.", "3 + 3"), done()]).await;
    let extra = calc("Extra.", "10 * 10");
    let b =
        scripted_run(&engine, &[calc("One.", "1 + 1"), calc("Two.", "2 + 2"), extra, calc("Three.", "3 + 3"), done()])
            .await;
    let c = compare(&engine, &a.id, &b.id).await;
    assert!(!c.equal);
    use Change::*;
    assert_eq!(step_changes(&c), [Equal, Equal, Inserted, Equal, Equal]);
    let inserted = &c.steps.rows[2];
    assert_eq!((inserted.a.as_ref(), inserted.b.as_ref().map(|s| s.index)), (None, Some(2)));
    assert_eq!(inserted.b.as_ref().unwrap().tools, ["calculator"]);
    assert_eq!(inserted.calls[0].change, Inserted);
    // The steps after it pair up again, a's index 2 with b's 3.
    let after: Vec<(u32, u32)> =
        c.steps.rows[3..].iter().map(|r| (r.a.as_ref().unwrap().index, r.b.as_ref().unwrap().index)).collect();
    assert_eq!(after, [(2, 3), (3, 4)]);
    assert_eq!((c.steps.counts.equal, c.steps.counts.inserted, c.steps.counts.changed), (4, 1, 0));
    let d = c.divergence.unwrap();
    assert_eq!((d.step_row, d.a_step, d.b_step), (Some(2), None, Some(2)));
    assert_eq!(d.summary, "step 2: only in b (calculator)");
    // The transcript: the extra agent message and its result, inserted; the
    // page starts two rows before them.
    let messages: Vec<Change> = c.messages.rows.iter().map(|r| r.change).collect();
    assert_eq!((c.messages.from, c.messages.total), (3, 10));
    assert_eq!(messages, [Equal, Equal, Inserted, Inserted, Equal, Equal, Equal]);
    assert_eq!(d.message_row, Some(5));
    assert_eq!((c.totals.delta.steps, c.totals.delta.tool_calls), (1, 1));
}

#[tokio::test]
async fn changed_arguments_show_as_a_json_diff() {
    let (engine, _db) = engine().await;
    let a = scripted_run(&engine, &[calc("Adding.", "2 + 2"), done()]).await;
    let b = scripted_run(&engine, &[calc("Adding.", "2 + 3"), done()]).await;
    let c = compare(&engine, &a.id, &b.id).await;
    assert_eq!(step_changes(&c), [Change::Changed, Change::Equal]);
    let pair = &c.steps.rows[0];
    assert!(pair.differences.contains(&"tool_calls".to_owned()), "{:?}", pair.differences);
    assert!(!pair.differences.contains(&"text".to_owned()));
    assert!(pair.text.is_empty());
    let call = &pair.calls[0];
    assert_eq!(call.change, Change::Changed);
    let change = JsonChange {
        path: "/expression".into(),
        op: JsonOp::Changed,
        a: Some(json!("2 + 2")),
        b: Some(json!("2 + 3")),
    };
    assert_eq!(call.arguments, [change]);
    assert!(!call.result_equal);
    assert_eq!(call.a.as_ref().unwrap().result.as_deref(), Some(r#"{"expression":"2 + 2","value":4}"#));
    assert_eq!(call.b.as_ref().unwrap().result.as_deref(), Some(r#"{"expression":"2 + 3","value":5}"#));
    let d = c.divergence.unwrap();
    assert_eq!((d.step_row, d.a_step, d.b_step), (Some(0), Some(0), Some(0)));
    assert_eq!(d.summary, "step 0: arguments of calculator differ");
    // The agent messages differ word by word.
    let agent = &c.messages.rows[1];
    assert_eq!(agent.change, Change::Changed);
    let words: Vec<(Change, &str)> = agent.words.iter().map(|w| (w.change, w.text.as_str())).collect();
    assert!(words.contains(&(Change::Deleted, "2")) && words.contains(&(Change::Inserted, "3")), "{words:?}");
}

#[tokio::test]
async fn different_text_and_configuration_are_marked() {
    let (engine, _db) = engine().await;
    let a = scripted_run(&engine, &[json!({"text": "The quick brown fox."})]).await;
    let mut req = scripted(json!([{"text": "The slow brown fox."}]));
    req.system_prompt = Some("Be brief.".into());
    let b = run_to_end(&engine, req).await;
    let c = compare(&engine, &a.id, &b.id).await;
    let differing: Vec<&str> = c.config.iter().filter(|f| !f.equal).map(|f| f.field.as_str()).collect();
    assert_eq!(differing, ["model_settings", "system_prompt"]);
    let settings = c.config.iter().find(|f| f.field == "model_settings").unwrap();
    assert_eq!(settings.json[0].path, "/script/0/text");
    assert_eq!(c.divergence.as_ref().unwrap().summary, "step 0: text differs");
    // The same script with a tag: only the configuration differs.
    let mut tagged = scripted(json!([{"text": "The quick brown fox."}]));
    tagged.tags.insert("team".into(), "blue".into());
    let tagged = run_to_end(&engine, tagged).await;
    let t = compare(&engine, &a.id, &tagged.id).await;
    assert!(!t.equal && t.steps.rows.iter().all(|r| r.change == Change::Equal));
    let d = t.divergence.unwrap();
    assert_eq!((d.summary.as_str(), d.step_row, d.message_row), ("configuration: tags", None, None));
    let tags = t.config.iter().find(|f| f.field == "tags").unwrap();
    assert_eq!((tags.json[0].path.as_str(), tags.json[0].op), ("/team", JsonOp::Added));
    let pair = &c.steps.rows[0];
    assert_eq!((pair.change, pair.differences.contains(&"text".to_owned())), (Change::Changed, true));
    let words: Vec<(Change, &str)> = pair.text.iter().map(|w| (w.change, w.text.as_str())).collect();
    assert_eq!(
        words,
        [
            (Change::Equal, "The "),
            (Change::Deleted, "quick"),
            (Change::Inserted, "slow"),
            (Change::Equal, " brown fox.")
        ]
    );
}

/// A run asking for 2 + 3 then, in a follow-up, 4 * 4; returns it done.
async fn two_questions(engine: &Engine) -> Run {
    let ask = CreateRun { initial_prompt: "What is 2 + 3?".into(), ..CreateRun::default() };
    let run = run_to_end(engine, ask).await;
    engine
        .conversation()
        .follow_up(&run.id, FollowUp { message: "And 4 * 4?".into(), ..Default::default() })
        .await
        .unwrap();
    wait_for_status(engine, &run.id, RunStatus::Done).await
}

#[tokio::test]
async fn a_fork_compares_from_its_edited_message() {
    let (engine, _db) = engine().await;
    let parent = two_questions(&engine).await;
    let messages = engine.runs().messages(&parent.id).await.unwrap();
    let second = messages.iter().filter(|m| matches!(m.body, MessageBody::Human { .. })).nth(1).unwrap().clone();
    let fork = engine.conversation().edit_message(&parent.id, &second.id, "And 9 * 9?").await.unwrap();
    let fork = engine.runs().wait_until_settled(&fork.id, SETTLE).await.unwrap();

    let c = compare(&engine, &parent.id, &fork.id).await;
    let relation = c.fork.clone().expect("a fork shares history");
    assert_eq!(relation.ancestor, parent.id);
    assert_eq!((relation.shared_messages, relation.shared_steps), (second.seq, 2));
    assert_eq!((c.messages.folded, c.steps.folded), (second.seq as u32, 2));
    // The page starts at the edited message: nothing folded is listed.
    assert_eq!(c.messages.from, second.seq as u32);
    let first = &c.messages.rows[0];
    assert_eq!((first.row, first.change), (second.seq as u32, Change::Changed));
    assert_eq!(first.a.as_ref().unwrap().text, "And 4 * 4?");
    assert_eq!(first.b.as_ref().unwrap().text, "And 9 * 9?");
    let words: Vec<(Change, &str)> = first.words.iter().map(|w| (w.change, w.text.as_str())).collect();
    use Change::*;
    let nine = [(Equal, "And "), (Deleted, "4"), (Inserted, "9"), (Equal, " * "), (Deleted, "4"), (Inserted, "9")];
    assert_eq!(words, [&nine[..], &[(Equal, "?")]].concat());
    let d = c.divergence.clone().unwrap();
    assert_eq!((d.message_row, d.a_seq, d.b_seq), (Some(second.seq as u32), Some(second.seq), Some(second.seq)));
    assert_eq!(d.summary, format!("message {}: human text differs", second.seq));
    // Steps: the two copied ones folded, the new ones paired and changed.
    assert_eq!((c.steps.total, c.steps.from), (4, 2));
    assert!(c.steps.rows.iter().all(|r| r.row >= 2 && r.change == Change::Changed));
    assert_eq!(d.step_row, Some(2));
    assert_eq!(c.steps.counts.equal, 2, "the folded rows count as equal");

    // Any order: the fork on the left.
    let reverse = compare(&engine, &fork.id, &parent.id).await;
    assert_eq!(reverse.fork, c.fork);

    // A sibling fork at the first message shares nothing with this one
    // beyond their ancestor's first bound: the smaller of the two.
    let sibling = engine.conversation().edit_message(&parent.id, &messages[0].id, "What is 7 + 1?").await.unwrap();
    let sibling = engine.runs().wait_until_settled(&sibling.id, SETTLE).await.unwrap();
    let c = compare(&engine, &fork.id, &sibling.id).await;
    let relation = c.fork.unwrap();
    assert_eq!(
        (relation.ancestor.as_str(), relation.shared_messages, relation.shared_steps),
        (parent.id.as_str(), 0, 0)
    );
    assert_eq!((c.messages.folded, c.messages.rows[0].row), (0, 0));
    assert_eq!(c.divergence.unwrap().summary, "message 0: human text differs");

    // A fork of the fork, later on: back to the parent, the first fork's bound holds.
    let fork_messages = engine.runs().messages(&fork.id).await.unwrap();
    let last_human = fork_messages.iter().rfind(|m| matches!(m.body, MessageBody::Human { .. })).unwrap();
    assert_eq!(last_human.seq, second.seq);
    let grandchild = engine.conversation().edit_message(&fork.id, &last_human.id, "And 3 * 3?").await.unwrap();
    let grandchild = engine.runs().wait_until_settled(&grandchild.id, SETTLE).await.unwrap();
    let c = compare(&engine, &parent.id, &grandchild.id).await;
    let relation = c.fork.unwrap();
    assert_eq!(
        (relation.ancestor, relation.shared_messages, relation.shared_steps),
        (parent.id.clone(), second.seq, 2)
    );
}

#[tokio::test]
async fn pages_walk_every_row_exactly_once() {
    let (engine, _db) = engine().await;
    let a_turns: Vec<Value> =
        (0..7).map(|i| calc(&format!("Step {i}."), &format!("{i} + 1"))).chain([done()]).collect();
    let mut b_turns = a_turns.clone();
    b_turns.insert(3, calc("Extra.", "5 * 5"));
    b_turns.remove(6);
    let (a, b) = (scripted_run(&engine, &a_turns).await, scripted_run(&engine, &b_turns).await);
    let whole = compare(&engine, &a.id, &b.id).await;
    let (mut steps, mut messages) = (Vec::new(), Vec::new());
    let (mut from, mut mfrom) = (Some(0), Some(0));
    while from.is_some() || mfrom.is_some() {
        let q = CompareQuery {
            steps_from: from.or(Some(u32::MAX)),
            steps_limit: Some(3),
            messages_from: mfrom.or(Some(u32::MAX)),
            messages_limit: Some(4),
            ..query(&a.id, &b.id)
        };
        let c = engine.comparisons().compare(&q).await.unwrap();
        steps.extend(c.steps.rows.iter().map(|r| r.row));
        messages.extend(c.messages.rows.iter().map(|r| r.row));
        assert!(c.steps.rows.len() <= 3 && c.messages.rows.len() <= 4);
        (from, mfrom) = (c.steps.next_from, c.messages.next_from);
    }
    assert_eq!(steps, (0..whole.steps.total).collect::<Vec<_>>());
    assert_eq!(messages, (0..whole.messages.total).collect::<Vec<_>>());
    let counts = whole.steps.counts;
    assert_eq!((counts.equal, counts.inserted, counts.deleted, counts.changed), (7, 1, 1, 0));
    // Without a `from`, the page starts two rows before the first difference.
    assert_eq!(whole.divergence.unwrap().step_row, Some(3));
    assert_eq!(whole.steps.from, 1);
}

#[tokio::test]
async fn unknown_runs_other_projects_and_bad_windows_are_refused() {
    let (engine, _db) = engine().await;
    let a = scripted_run(&engine, &[done()]).await;
    engine.identity().create_project("other", &runlens_engine::model::Actor::system()).await.unwrap();
    let (theirs, _) = engine.runs().create_run_in(scripted(json!([done()])), "other", None).await.unwrap();
    engine.runs().wait_until_settled(&theirs.id, SETTLE).await.unwrap();
    for (x, y) in [(&a.id, &theirs.id), (&theirs.id, &a.id)] {
        assert!(matches!(engine.comparisons().compare(&query(x, y)).await, Err(EngineError::NotFound(_))));
    }
    assert!(
        matches!(engine.comparisons().compare(&query(&a.id, "nope")).await, Err(EngineError::NotFound(m)) if m.contains("nope"))
    );
    for (limit, field) in [(0, "steps_limit"), (501, "steps_limit")] {
        let q = CompareQuery { steps_limit: Some(limit), ..query(&a.id, &a.id) };
        assert!(matches!(engine.comparisons().compare(&q).await, Err(EngineError::Invalid(m)) if m.starts_with(field)));
    }
    let q = CompareQuery { messages_limit: Some(0), ..query(&a.id, &a.id) };
    assert!(
        matches!(engine.comparisons().compare(&q).await, Err(EngineError::Invalid(m)) if m.starts_with("messages_limit"))
    );
    assert!(
        matches!(engine.comparisons().compare(&query("", &a.id)).await, Err(EngineError::Invalid(m)) if m.starts_with("a "))
    );
}
