//! Full-text search across runs (`q`): every piece of a run is found by its
//! words, through every path that writes it, newest first, in its project
//! only, paged, with where it matched and a marked snippet.

use runlens_engine::model::{
    Actor, CreateRun, DecisionRequest, FollowUp, MatchedIn, RunFilter, RunPage, RunStatus, DEFAULT_PROJECT,
};
use serde_json::json;

use crate::support::{engine, run_to_end, scripted, SETTLE};

fn search(q: &str) -> RunFilter {
    RunFilter { q: Some(q.into()), project: Some(DEFAULT_PROJECT.into()), ..RunFilter::default() }
}

async fn found(engine: &runlens_engine::Engine, q: &str) -> RunPage {
    engine.runs().list_runs(&search(q)).await.unwrap()
}

fn ids(page: &RunPage) -> Vec<&str> {
    page.runs.iter().map(|r| r.id.as_str()).collect()
}

/// That the snippet of the page's `i`th run marks `word` (once or more)
/// and nothing else.
fn assert_hits(page: &RunPage, i: usize, word: &str) {
    let hits: Vec<String> = page.matches[i].snippet.iter().filter(|p| p.hit).map(|p| p.text.to_lowercase()).collect();
    assert!(!hits.is_empty() && hits.iter().all(|w| w == word), "{word}: {:?}", page.matches[i]);
}

#[tokio::test]
async fn every_piece_of_a_run_is_found_with_where_and_a_snippet() {
    let (engine, _dir) = engine().await;
    let calc = json!({"name": "calculator", "arguments": {"expression": "1717 + 1"}});
    let mut req = scripted(json!([{"tool_calls": [calc]}, {"text": "The answer is certainly aubergine."}]));
    req.initial_prompt = "Compute the zucchini sum please".into();
    req.metadata = Some(json!({"ticket": "KALE-42"}));
    let run = run_to_end(&engine, req).await;
    let failed = run_to_end(&engine, scripted(json!([{"error": "upstream parsnip outage"}]))).await;
    assert_eq!(failed.status, RunStatus::Failed);

    let page = found(&engine, "zucchini").await;
    assert_eq!(ids(&page), [run.id.as_str()]);
    assert_eq!((page.matches[0].run_id.as_str(), page.matches[0].matched_in), (run.id.as_str(), MatchedIn::Run));
    assert_hits(&page, 0, "zucchini");
    let text: String = page.matches[0].snippet.iter().map(|p| p.text.as_str()).collect();
    assert!(text.contains("Compute the zucchini sum"), "{text}");

    let page = found(&engine, "aubergine").await;
    assert_eq!(
        (ids(&page), page.matches[0].matched_in, page.matches[0].step_index),
        (vec![run.id.as_str()], MatchedIn::Answer, Some(1))
    );
    // The tool call's arguments and its result (1718).
    for word in ["1717", "1718"] {
        let page = found(&engine, word).await;
        assert_eq!(ids(&page), [run.id.as_str()], "{word}");
        assert_eq!((page.matches[0].matched_in, page.matches[0].step_index), (MatchedIn::ToolCall, Some(0)), "{word}");
        assert_hits(&page, 0, word);
    }
    assert_eq!(ids(&found(&engine, "kale 42").await), [run.id.as_str()], "metadata");
    assert_eq!(ids(&found(&engine, "PARSNIP outage").await), [failed.id.as_str()], "an error, any case");
    // Words are whole.
    assert!(found(&engine, "parsnip outa").await.runs.is_empty());
    // Every word must be there.
    assert!(found(&engine, "zucchini parsnip").await.runs.is_empty());

    // A follow-up message is found once it is sent.
    assert!(found(&engine, "rutabaga").await.runs.is_empty());
    let follow = FollowUp { message: "and now the rutabaga".into(), ..FollowUp::default() };
    engine.conversation().follow_up(&run.id, follow).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    let page = found(&engine, "rutabaga").await;
    assert_eq!(ids(&page), [run.id.as_str()]);
    assert!(matches!(page.matches[0].matched_in, MatchedIn::Message | MatchedIn::Answer), "{:?}", page.matches[0]);
}

#[tokio::test]
async fn a_tool_result_is_found_once_it_arrives() {
    let (engine, _dir) = engine().await;
    let email = json!({"name": "send_email", "arguments": {"to": "okra@example.com", "subject": "s", "body": "b"}});
    let (run, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    // The arguments are searchable while the call waits for its decision.
    assert_eq!(ids(&found(&engine, "okra example").await), [run.id.as_str()]);
    let before = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].clone();
    assert!(before.result.is_none());
    let approver = crate::support::approver(&engine, "web").await;
    let call = &run.interruptions[0].call_id;
    engine.approvals().approve(&run.id, call, DecisionRequest::default(), &approver).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    let result = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].result.clone().unwrap();
    // A word of the result, which was not in the arguments.
    let word = result
        .to_string()
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| w.len() > 3 && !"okra example subject body".contains(w))
        .unwrap()
        .to_owned();
    let page = found(&engine, &format!("okra {word}")).await;
    assert_eq!(ids(&page), [run.id.as_str()], "{word} of {result}");
}

#[tokio::test]
async fn a_search_pages_newest_first_and_stays_in_its_project() {
    let (engine, _dir) = engine().await;
    engine.identity().create_project("team-s", &Actor { id: "system".into(), name: "test".into() }).await.unwrap();
    let mut ours = Vec::new();
    for i in 0..5 {
        let req =
            CreateRun { initial_prompt: format!("celeriac number {i}"), ..scripted(json!([{"text": "celeriac"}])) };
        ours.push(run_to_end(&engine, req).await.id);
    }
    let theirs = CreateRun { initial_prompt: "celeriac elsewhere".into(), ..scripted(json!([{"text": "ok"}])) };
    let (theirs, _) = engine.runs().create_run_in(theirs, "team-s", None).await.unwrap();
    engine.runs().wait_until_settled(&theirs.id, SETTLE).await.unwrap();

    let mut seen = Vec::new();
    let mut filter = RunFilter { limit: Some(2), ..search("celeriac") };
    loop {
        let page = engine.runs().list_runs(&filter).await.unwrap();
        assert!(page.runs.len() <= 2);
        assert_eq!(page.matches.len(), page.runs.len());
        seen.extend(page.runs.iter().map(|r| r.id.clone()));
        match page.next_cursor {
            Some(c) => filter.cursor = Some(c),
            None => break,
        }
    }
    ours.reverse();
    assert_eq!(seen, ours, "each run once, newest first, none of the other project's");
    let other = RunFilter { project: Some("team-s".into()), ..search("celeriac") };
    assert_eq!(ids(&engine.runs().list_runs(&other).await.unwrap()), [theirs.id.as_str()]);
    // The other filters still apply.
    let failed = RunFilter { status: Some(RunStatus::Failed), ..search("celeriac") };
    assert!(engine.runs().list_runs(&failed).await.unwrap().runs.is_empty());
}

#[tokio::test]
async fn a_search_refuses_what_it_cannot_search_and_reads_any_text_as_words() {
    let (engine, _dir) = engine().await;
    run_to_end(&engine, scripted(json!([{"text": "a \"quoted\" NEAR(x) answer* OR -not"}]))).await;
    let too_many = (0..17).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    // No word finds nothing; more than 16 search for the first 16 (the
    // search field says both: see `search_problem`).
    assert!(found(&engine, "+++ ---").await.runs.is_empty());
    assert!(search("+++ ---").search_problem().unwrap().contains("no word"));
    assert!(search(&too_many).search_problem().unwrap().contains("at most 16"));
    assert_eq!(search(&too_many).search_words().unwrap().unwrap().len(), 16);
    // The plain list's cursor ends a search, as a search's cursor ends the plain list.
    let filter = RunFilter { cursor: Some("1700000000000_run".into()), ..search("answer") };
    assert!(engine.runs().list_runs(&filter).await.unwrap().runs.is_empty());
    // The search syntax of either database is only words here.
    for q in ["\"quoted\"", "NEAR(x)", "answer*", "OR -not", "a AND answer", "'quoted' & !x", "quoted:*", "quo*"] {
        let page = found(&engine, q).await;
        assert_eq!(page.runs.len(), usize::from(!q.contains("AND") && !q.starts_with("quo*")), "{q}");
    }
    assert_eq!(found(&engine, "quoted answer not").await.runs.len(), 1);
}
