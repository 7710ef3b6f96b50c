//! Tests of the scorers' configurations: what serde takes and what the
//! bounds refuse.

use serde_json::json;

use super::*;

fn parse(v: Value) -> Result<Scorer, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

#[test]
fn scorers_read_and_write_with_their_kind() {
    let all = [
        json!({"kind": "exact", "expected": "Paris", "ignore_case": true}),
        json!({"kind": "contains", "expected": "Paris", "ignore_case": false}),
        json!({"kind": "not_contains", "expected": "sorry", "ignore_case": false}),
        json!({"kind": "regex", "pattern": "^\\d+$"}),
        json!({"kind": "json_schema", "schema": {"type": "object"}}),
        json!({"kind": "json_equal", "expected": {"a": 1}, "ignore_paths": ["/id"]}),
        json!({"kind": "numeric", "expected": 42.0, "tolerance": 0.5}),
        json!({"kind": "tool_calls", "expected": [{"name": "search", "arguments": {"q": "x"}}], "order": "any"}),
        json!({"kind": "bounds", "max_duration_ms": 1000, "max_cost_usd": 0.01, "max_turns": 3}),
    ];
    let kinds =
        ["exact", "contains", "not_contains", "regex", "json_schema", "json_equal", "numeric", "tool_calls", "bounds"];
    for (v, kind) in all.iter().zip(kinds) {
        let s = parse(v.clone()).unwrap();
        assert_eq!(s.kind(), kind);
        assert_eq!(s.problem(), None, "{kind}");
        assert_eq!(&serde_json::to_value(&s).unwrap(), v, "{kind} round trip");
    }
}

#[test]
fn defaults_fill_optional_fields() {
    assert_eq!(parse(json!({"kind": "exact"})).unwrap(), Scorer::Exact { expected: None, ignore_case: false });
    assert_eq!(
        parse(json!({"kind": "not_contains", "expected": "x"})).unwrap(),
        Scorer::NotContains { expected: "x".into(), ignore_case: false }
    );
    assert_eq!(
        parse(json!({"kind": "tool_calls"})).unwrap(),
        Scorer::ToolCalls { expected: None, order: CallOrder::InOrder }
    );
    assert_eq!(parse(json!({"kind": "numeric"})).unwrap(), Scorer::Numeric { expected: None, tolerance: 0.0 });
    // Absent options are left out when written.
    assert_eq!(
        serde_json::to_value(parse(json!({"kind": "exact"})).unwrap()).unwrap(),
        json!({"kind": "exact", "ignore_case": false})
    );
}

#[test]
fn unknown_kinds_and_fields_are_refused() {
    let e = parse(json!({"kind": "fuzzy", "expected": "x"})).unwrap_err();
    assert!(e.contains("unknown variant `fuzzy`"), "{e}");
    let e = parse(json!({"kind": "exact", "expectd": "x"})).unwrap_err();
    assert!(e.contains("unknown field `expectd`"), "{e}");
    let e = parse(json!({"kind": "regex", "pattern": "x", "flags": "i"})).unwrap_err();
    assert!(e.contains("unknown field `flags`"), "{e}");
    let e = parse(json!({"kind": "tool_calls", "expected": [{"name": "a", "args": {}}]})).unwrap_err();
    assert!(e.contains("unknown field `args`"), "{e}");
    assert!(parse(json!({"kind": "tool_calls", "order": "sorted"})).is_err());
    assert!(parse(json!({"expected": "x"})).unwrap_err().contains("missing field `kind`"));
    assert!(parse(json!({"kind": "not_contains"})).unwrap_err().contains("missing field `expected`"));
}

#[test]
fn problems_name_the_field() {
    let problem = |v: Value| parse(v).unwrap().problem();
    let long = "x".repeat(MAX_SCORER_TEXT_BYTES + 1);
    assert_eq!(problem(json!({"kind": "exact", "expected": long})).unwrap(), "expected: at most 64 KiB");
    assert!(problem(json!({"kind": "exact", "expected": ""})).is_none());
    assert_eq!(problem(json!({"kind": "contains", "expected": ""})).unwrap(), "expected: must not be empty");
    assert_eq!(problem(json!({"kind": "not_contains", "expected": ""})).unwrap(), "expected: must not be empty");
    assert_eq!(
        problem(json!({"kind": "regex", "pattern": "é".repeat(1001)})).unwrap(),
        "pattern: at most 1000 characters"
    );
    assert!(problem(json!({"kind": "regex", "pattern": "é".repeat(1000)})).is_none());
    assert!(problem(json!({"kind": "json_schema", "schema": "string"})).unwrap().starts_with("schema: "));
    // The document says an object: a boolean schema is refused rather than taken silently.
    assert!(problem(json!({"kind": "json_schema", "schema": true})).unwrap().starts_with("schema: "));
    assert!(problem(json!({"kind": "json_schema", "schema": {}})).is_none());
    let calls = json!({"kind": "tool_calls", "expected": [{"name": "add", "arguments": [1]}]});
    assert_eq!(problem(calls).unwrap(), "expected[0].arguments: must be a JSON object");
    let big = json!({"kind": "json_schema", "schema": {"description": "d".repeat(MAX_SCORER_JSON_BYTES)}});
    assert_eq!(problem(big).unwrap(), "schema: at most 64 KiB of JSON");
    let big = json!({"kind": "json_equal", "expected": ["e".repeat(MAX_SCORER_JSON_BYTES)]});
    assert_eq!(problem(big).unwrap(), "expected: at most 64 KiB of JSON");
    let paths: Vec<String> = (0..33).map(|i| format!("/{i}")).collect();
    assert_eq!(problem(json!({"kind": "json_equal", "ignore_paths": paths})).unwrap(), "ignore_paths: at most 32");
    assert!(problem(json!({"kind": "json_equal", "ignore_paths": ["", "/a~1b/~0c/0"]})).is_none());
    assert!(problem(json!({"kind": "json_equal", "ignore_paths": ["/ok", "id"]}))
        .unwrap()
        .starts_with("ignore_paths[1]: "));
    assert!(problem(json!({"kind": "json_equal", "ignore_paths": ["/a~2"]})).unwrap().starts_with("ignore_paths[0]: "));
    let long_path = format!("/{}", "p".repeat(512));
    assert!(problem(json!({"kind": "json_equal", "ignore_paths": [long_path]})).unwrap().contains("512"));
    assert!(problem(json!({"kind": "numeric", "tolerance": -1})).unwrap().starts_with("tolerance: "));
    let nan = Scorer::Numeric { expected: Some(f64::NAN), tolerance: 0.0 };
    assert!(nan.problem().unwrap().starts_with("expected: "));
    let inf = Scorer::Numeric { expected: Some(1.0), tolerance: f64::INFINITY };
    assert!(inf.problem().unwrap().starts_with("tolerance: "));
    let calls: Vec<Value> = (0..101).map(|_| json!({"name": "a"})).collect();
    assert_eq!(problem(json!({"kind": "tool_calls", "expected": calls})).unwrap(), "expected: at most 100 calls");
    assert_eq!(
        problem(json!({"kind": "tool_calls", "expected": [{"name": "a"}, {"name": " "}]})).unwrap(),
        "expected[1].name: must not be blank"
    );
    assert!(problem(json!({"kind": "tool_calls", "expected": []})).is_none());
    assert!(problem(json!({"kind": "bounds"})).unwrap().starts_with("give at least one of max_duration_ms"));
    assert!(problem(json!({"kind": "bounds", "max_duration_ms": -1})).unwrap().starts_with("max_duration_ms: "));
    assert!(problem(json!({"kind": "bounds", "max_cost_usd": -0.5})).unwrap().starts_with("max_cost_usd: "));
    assert!(problem(json!({"kind": "bounds", "max_turns": 0})).is_none());
    assert!(problem(json!({"kind": "bounds", "max_turns": 2_147_483_648u64})).is_some());
}

#[test]
fn subjects_and_verdicts_round_trip() {
    let subject: ScoreSubject = serde_json::from_value(json!({"output": "hi", "turns": 2})).unwrap();
    assert_eq!(subject.output.as_deref(), Some("hi"));
    assert!(subject.calls.is_empty());
    assert_eq!(subject.turns, 2);
    let verdict = Verdict { value: ScoreValue::Bool(true), reason: "ok".into(), label: None, judge_run_id: None };
    let text = serde_json::to_string(&verdict).unwrap();
    assert_eq!(text, r#"{"value":true,"reason":"ok"}"#);
    assert_eq!(serde_json::from_str::<Verdict>(&text).unwrap(), verdict);
}
