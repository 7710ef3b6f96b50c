//! Tests of the dataset types: inputs, items and edits as the API takes them,
//! and their bounds.

use serde_json::json;

use super::*;

fn item(v: Value) -> Result<NewDatasetItem, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

#[test]
fn an_input_is_a_prompt_or_a_conversation_ending_with_a_human_message() {
    let ok = item(json!({"input": {"prompt": "hi", "input": {"a": 1}}})).unwrap();
    assert_eq!(ok.problem(), None);
    let run = ok.input.run_request();
    assert_eq!((run.initial_prompt.as_str(), run.input), ("hi", Some(json!({"a": 1}))));
    let talk = item(json!({"input": {"input_items": [
        {"type": "human", "data": {"message": "2 + 2?"}},
        {"type": "agent", "data": {"message": "4"}},
        {"type": "human", "data": {"message": "and 3 * 3?"}},
    ]}}))
    .unwrap();
    assert_eq!(talk.problem(), None);
    let run = talk.input.run_request();
    assert_eq!(run.initial_prompt, "and 3 * 3?");
    assert_eq!(run.input_items.unwrap().len(), 2);

    let problem = |v: Value| item(v).unwrap().problem().unwrap();
    assert_eq!(problem(json!({"input": {}})), "input: give prompt or input_items");
    assert!(problem(json!({"input": {"prompt": "a", "input_items": []}})).contains("not both"));
    assert!(problem(json!({"input": {"prompt": "  "}})).starts_with("input.prompt: "));
    assert!(problem(json!({"input": {"input_items": []}})).starts_with("input.input_items: give"));
    let ends_with_agent = json!({"input": {"input_items": [{"type": "agent", "data": {"message": "4"}}]}});
    assert!(problem(ends_with_agent).contains("the last item must be a human message"));
    assert_eq!(problem(json!({"input": {"prompt": "a", "input": [1]}})), "input.input: must be a JSON object");
    assert!(item(json!({"input": {"prompt": "a"}, "extra": 1})).unwrap_err().contains("unknown field"));
    let bad_key = json!({"input": {"input_items": [{"type": "human", "data": {"message": "x", "usage": 1}}]}});
    assert!(item(bad_key).unwrap_err().contains("input_items[0]: unknown field"));
}

#[test]
fn items_are_bounded_field_by_field() {
    let base = || NewDatasetItem { input: DatasetInput::prompt("p"), ..Default::default() };
    let mut big = base();
    big.expected = Some(json!("x".repeat(MAX_EXPECTED_BYTES)));
    assert_eq!(big.problem().unwrap(), "expected: at most 64 KiB of JSON");
    let mut meta = base();
    meta.metadata = Some([("k".to_owned(), json!("v".repeat(MAX_ITEM_METADATA_BYTES)))].into_iter().collect());
    assert_eq!(meta.problem().unwrap(), "metadata: at most 16 KiB of JSON");
    let mut tags = base();
    tags.tags = vec!["ok".into(), " ".into()];
    assert_eq!(tags.problem().unwrap(), "tags[1]: 1-64 characters, not blank");
    tags.tags = vec!["t".into(); 33];
    assert_eq!(tags.problem().unwrap(), "tags: at most 32 tags");
    let mut recorded = base();
    let one = RecordedResult { tool: "calculator".into(), arguments: json!({}), result: json!("x".repeat(1 << 17)) };
    recorded.recorded_results = vec![one.clone(), one];
    assert_eq!(recorded.problem().unwrap(), "recorded_results: at most 256 KiB of JSON");
    let mut fine = base();
    fine.expected = Some(json!([{"name": "calculator", "arguments": {"expression": "1 + 2"}}]));
    fine.tags = vec!["math".into()];
    assert_eq!(fine.problem(), None);
}

#[test]
fn names_follow_the_score_name_rule_up_to_100_characters() {
    assert_eq!(dataset_name_problem("support: refunds v2"), None);
    assert_eq!(dataset_name_problem(&"x".repeat(100)), None);
    for bad in ["", " x", "x ", "a/b", "é", &"x".repeat(101)] {
        assert!(dataset_name_problem(bad).is_some(), "{bad}");
    }
    assert!(DatasetChange::default().problem().is_some());
    let long = NewDataset { name: "d".into(), description: Some("x".repeat(4001)) };
    assert_eq!(long.problem().unwrap(), "description: at most 4000 characters");
}

#[test]
fn an_edit_keeps_what_it_does_not_name() {
    let item = DatasetItem {
        id: "i".into(),
        dataset_id: "d".into(),
        input: DatasetInput::prompt("p"),
        expected: Some(json!("4")),
        metadata: Map::new(),
        tags: vec!["a".into()],
        source_run_id: Some("r".into()),
        recorded_results: Vec::new(),
        version_added: 1,
        created_at: Utc::now(),
    };
    let edit: DatasetItemEdit = serde_json::from_value(json!({"tags": ["b"]})).unwrap();
    let edited = edit.apply(item.clone());
    assert_eq!((edited.tags, edited.expected), (vec!["b".to_owned()], Some(json!("4"))));
    let edit: DatasetItemEdit = serde_json::from_value(json!({"expected": null})).unwrap();
    assert_eq!(edit.problem(), None);
    assert_eq!(edit.apply(item).expected, None);
    let none: DatasetItemEdit = serde_json::from_value(json!({})).unwrap();
    assert!(none.problem().unwrap().starts_with("give at least one"));
}
