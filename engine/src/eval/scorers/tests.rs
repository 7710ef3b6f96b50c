//! Tests of the built-in scorers: each passing and failing, expected values
//! from the scorer or the item, bad configurations refused.

use serde_json::json;

use super::*;
use crate::model::SubjectCall;

fn scorer(v: Value) -> Scorer {
    serde_json::from_value(v).unwrap()
}

fn answer(text: &str) -> ScoreSubject {
    ScoreSubject { output: Some(text.into()), ..Default::default() }
}

fn calls(list: &[(&str, Value)]) -> ScoreSubject {
    let calls = list.iter().map(|(name, arguments)| SubjectCall { name: (*name).into(), arguments: arguments.clone() });
    ScoreSubject { calls: calls.collect(), ..Default::default() }
}

/// The verdict of a scorer given as JSON, with the item's expected value.
fn run(s: Value, subject: &ScoreSubject, item: Option<Value>) -> Verdict {
    score(&scorer(s), subject, item.as_ref()).unwrap()
}

fn passes(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
    let v = run(s, subject, item);
    assert_eq!(v.value, ScoreValue::Bool(true), "{}", v.reason);
    v.reason
}

fn fails(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
    let v = run(s, subject, item);
    assert_eq!(v.value, ScoreValue::Bool(false), "{}", v.reason);
    v.reason
}

fn fraction(s: Value, subject: &ScoreSubject, item: Option<Value>) -> (f64, String) {
    match run(s, subject, item) {
        Verdict { value: ScoreValue::Number(n), reason, .. } => (n, reason),
        other => panic!("not a number: {other:?}"),
    }
}

fn error(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
    score(&scorer(s), subject, item.as_ref()).unwrap_err()
}

#[test]
fn exact_compares_trimmed_text() {
    let r = passes(json!({"kind": "exact", "expected": "Paris"}), &answer("  Paris\n"), None);
    assert_eq!(r, r#"output equals "Paris""#);
    let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("paris."), None);
    assert_eq!(r, r#"expected "Paris", got "paris." (differs at character 1)"#);
    let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("PARIS"), None);
    assert_eq!(r, r#"expected "Paris", got "PARIS" (differs only in case)"#);
    let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("Paris, France"), None);
    assert!(r.ends_with("(differs at character 6)"), "{r}");
    let r = passes(json!({"kind": "exact", "expected": "Paris", "ignore_case": true}), &answer("PARIS"), None);
    assert_eq!(r, r#"output equals "Paris" (ignoring case)"#);
    fails(json!({"kind": "exact", "expected": "Paris", "ignore_case": true}), &answer("Pariss"), None);
    // Line breaks are escaped in the reason.
    let r = fails(json!({"kind": "exact", "expected": "a"}), &answer("a\nb"), None);
    assert_eq!(r, r#"expected "a", got "a\nb" (differs at character 2)"#);
}

#[test]
fn expected_values_come_from_the_scorer_then_the_item() {
    let s = json!({"kind": "exact"});
    passes(s.clone(), &answer("Oslo"), Some(json!("Oslo")));
    fails(s.clone(), &answer("Oslo"), Some(json!("Bergen")));
    // Other JSON is compared as compact JSON text.
    passes(s.clone(), &answer(r#"{"a":[1,2]}"#), Some(json!({"a": [1, 2]})));
    passes(s.clone(), &answer("42"), Some(json!(42)));
    // The scorer's own value wins over the item's.
    passes(json!({"kind": "exact", "expected": "Oslo"}), &answer("Oslo"), Some(json!("Bergen")));
    // Neither: the scorer cannot be applied (a null item is none).
    let e = error(s.clone(), &answer("Oslo"), None);
    assert_eq!(e, "exact: no expected value: give `expected` or score against a dataset item that has one");
    assert_eq!(error(s, &answer("Oslo"), Some(Value::Null)), e);
    let e = error(json!({"kind": "numeric"}), &answer("4"), None);
    assert!(e.starts_with("numeric: no expected value"), "{e}");
    let e = error(json!({"kind": "json_equal"}), &answer("4"), None);
    assert!(e.starts_with("json_equal: no expected value"), "{e}");
    let e = error(json!({"kind": "tool_calls"}), &ScoreSubject::default(), None);
    assert!(e.starts_with("tool_calls: no expected value"), "{e}");
    let e = error(json!({"kind": "contains"}), &answer("x"), None);
    assert!(e.starts_with("contains: no expected value"), "{e}");
}

#[test]
fn a_run_without_an_answer_fails() {
    let none = ScoreSubject::default();
    for s in [
        json!({"kind": "exact", "expected": "x"}),
        json!({"kind": "contains", "expected": "x"}),
        json!({"kind": "not_contains", "expected": "x"}),
        json!({"kind": "regex", "pattern": "x"}),
        json!({"kind": "json_schema", "schema": {}}),
        json!({"kind": "json_equal", "expected": 1}),
        json!({"kind": "numeric", "expected": 1}),
    ] {
        assert_eq!(fails(s, &none, None), "the run has no answer");
    }
    // Still an error when the scorer cannot be applied at all.
    assert!(score(&scorer(json!({"kind": "exact"})), &none, None).is_err());
    assert!(score(&scorer(json!({"kind": "regex", "pattern": "("})), &none, None).is_err());
}

#[test]
fn contains_and_not_contains() {
    let r = passes(json!({"kind": "contains", "expected": "Paris"}), &answer("It is Paris."), None);
    assert_eq!(r, r#"output contains "Paris""#);
    let r = fails(json!({"kind": "contains", "expected": "Paris"}), &answer("It is paris."), None);
    assert_eq!(r, r#"output does not contain "Paris": "It is paris.""#);
    passes(json!({"kind": "contains", "expected": "Paris", "ignore_case": true}), &answer("PARIS!"), None);
    passes(json!({"kind": "contains"}), &answer("the answer is 42"), Some(json!(42)));
    let e = error(json!({"kind": "contains"}), &answer("x"), Some(json!("")));
    assert_eq!(e, "contains: the expected text is empty");

    let r = passes(json!({"kind": "not_contains", "expected": "sorry"}), &answer("Here you go"), None);
    assert_eq!(r, r#"output does not contain "sorry""#);
    let r = fails(json!({"kind": "not_contains", "expected": "sorry"}), &answer("I'm sorry"), None);
    assert_eq!(r, r#"output contains "sorry": "I'm sorry""#);
    passes(json!({"kind": "not_contains", "expected": "sorry"}), &answer("SORRY"), None);
    fails(json!({"kind": "not_contains", "expected": "sorry", "ignore_case": true}), &answer("SORRY"), None);
    // not_contains takes no item value.
    passes(json!({"kind": "not_contains", "expected": "x"}), &answer("abc"), Some(json!("abc")));
}

#[test]
fn regex_matches_anywhere() {
    let r = passes(json!({"kind": "regex", "pattern": "\\d+"}), &answer("answer: 42"), None);
    assert_eq!(r, r#"output matches /\d+/ at "42""#);
    let r = fails(json!({"kind": "regex", "pattern": "^\\d+$"}), &answer("answer: 42"), None);
    assert_eq!(r, r#"output does not match /^\d+$/: "answer: 42""#);
    passes(json!({"kind": "regex", "pattern": "(?i)^yes\\b"}), &answer("Yes, it is."), None);
    let e = error(json!({"kind": "regex", "pattern": "(unclosed"}), &answer("x"), None);
    assert!(e.starts_with("regex: pattern does not compile: "), "{e}");
}

#[test]
fn a_regex_too_big_to_compile_is_refused() {
    let huge = scorer(json!({"kind": "regex", "pattern": "(a{1000}){1000}"}));
    let e = check(&huge).unwrap_err();
    assert!(e.starts_with("regex: pattern does not compile: "), "{e}");
    assert!(e.contains("size limit"), "{e}");
    let e = score(&huge, &answer(&"a".repeat(10_000)), None).unwrap_err();
    assert!(e.contains("size limit"), "{e}");
    let e = check(&scorer(json!({"kind": "regex", "pattern": "\\w{500}\\w{500}\\w{500}"}))).unwrap_err();
    assert!(e.contains("size limit"), "{e}");
}

#[test]
fn json_schema_validates_the_answer() {
    let schema = json!({"kind": "json_schema", "schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
    }});
    let r = passes(schema.clone(), &answer(r#"{"name": "Ada", "age": 36}"#), None);
    assert_eq!(r, "output is valid against the schema");
    let r = fails(schema.clone(), &answer(r#"{"name": "Ada", "age": "old"}"#), None);
    assert_eq!(r, r#"/age: "old" is not of type "integer""#);
    let r = fails(schema.clone(), &answer(r#"{"age": "old"}"#), None);
    assert!(r.contains("\"name\" is a required property") || r.contains("/age"), "{r}");
    assert!(r.ends_with("(and 1 more error)"), "{r}");
    let r = fails(schema.clone(), &answer("Ada is 36"), None);
    assert!(r.starts_with("output is not JSON: expected value at line 1 column 1"), "{r}");
    // A fenced block is unwrapped, an unmarked one too.
    let fenced = "Here it is:\n```json\n{\"name\": \"Ada\"}\n```\nAnything else?";
    passes(schema.clone(), &answer(fenced), None);
    passes(schema.clone(), &answer("```\n{\"name\": \"Ada\"}\n```"), None);
    let other_first = "```python\nprint(1)\n```\nand\n```JSON\n{\"name\": \"Ada\"}\n```";
    passes(schema.clone(), &answer(other_first), None);
    let r = fails(schema, &answer("```json\n{\"name\": }\n```"), None);
    assert!(r.starts_with("output is not JSON: ") && r.ends_with("(in the fenced block)"), "{r}");
    // A schema that does not compile is an error, checked up front too.
    let bad = json!({"kind": "json_schema", "schema": {"type": 12}});
    let e = error(bad.clone(), &answer("{}"), None);
    assert!(e.starts_with("json_schema: schema is not a valid JSON Schema: "), "{e}");
    assert!(check(&scorer(bad)).unwrap_err().starts_with("json_schema: schema is not a valid JSON Schema"));
    // Nothing is fetched: a remote reference does not resolve.
    let remote = scorer(json!({"kind": "json_schema", "schema": {"$ref": "https://example.com/s.json"}}));
    assert!(check(&remote).unwrap_err().starts_with("json_schema: schema is not a valid JSON Schema"));
}

#[test]
fn json_equal_ignores_key_order_and_number_forms() {
    let s = json!({"kind": "json_equal", "expected": {"answer": 4, "unit": "m", "tags": ["a", "b"]}});
    let r = passes(s.clone(), &answer(r#"{"tags": ["a", "b"], "unit": "m", "answer": 4.0}"#), None);
    assert_eq!(r, "output equals the expected JSON");
    let r = fails(s.clone(), &answer(r#"{"answer": 5, "unit": "m", "tags": ["a", "b"]}"#), None);
    assert_eq!(r, "/answer: expected 4, got 5");
    let r = fails(s.clone(), &answer(r#"{"answer": 4, "tags": ["b", "a"], "extra": true}"#), None);
    assert_eq!(r, r#"/tags/0: expected "a", got "b" (and 3 more differences)"#);
    let r = fails(s.clone(), &answer(r#"{"answer": 4, "tags": ["a", "b"]}"#), None);
    assert_eq!(r, r#"/unit: missing, expected "m""#);
    let r = fails(s.clone(), &answer(r#"{"answer": 4, "unit": "m", "tags": ["a", "b", "c"]}"#), None);
    assert_eq!(r, r#"/tags/2: unexpected "c""#);
    let r = fails(s.clone(), &answer("about 4 meters"), None);
    assert_eq!(r, "output is not JSON: expected value at line 1 column 1");
    let r = fails(s, &answer("4 meters"), None);
    assert_eq!(r, "output is not JSON: trailing characters at line 1 column 3");
    let r = fails(json!({"kind": "json_equal", "expected": [1]}), &answer("{\"a\": 1}"), None);
    assert_eq!(r, r#"expected [1], got {"a":1}"#);
    // Fenced answers.
    passes(json!({"kind": "json_equal", "expected": {"a": 1}}), &answer("```json\n{\"a\": 1}\n```"), None);
}

#[test]
fn json_equal_takes_the_items_value_and_reads_json_strings() {
    let s = json!({"kind": "json_equal"});
    passes(s.clone(), &answer("[1, 2]"), Some(json!([1, 2])));
    passes(s.clone(), &answer("[1, 2]"), Some(json!("[1, 2]")));
    passes(s.clone(), &answer("\"plain\""), Some(json!("plain")));
    fails(s, &answer("[2, 1]"), Some(json!("[1, 2]")));
}

#[test]
fn json_equal_ignores_paths() {
    let expected = json!({"id": "x1", "at": {"time": 1, "zone": "UTC"}, "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], "a/b": 1, "t~": 2});
    let got = r#"{"id": "zz", "at": {"time": 99, "zone": "UTC"}, "items": [{"id": 7, "v": "a"}, {"id": 8, "v": "b"}], "a/b": 5, "t~": 6}"#;
    let r = fails(json!({"kind": "json_equal", "expected": expected}), &answer(got), None);
    assert!(r.ends_with("(and 5 more differences)"), "{r}");
    let paths = ["/id", "/at/time", "/items/0/id", "/items/1/id", "/a~1b", "/t~0"];
    let s = json!({"kind": "json_equal", "expected": expected, "ignore_paths": paths});
    let r = passes(s, &answer(got), None);
    assert_eq!(r, "output equals the expected JSON (6 paths ignored)");
    // An ignored path present on one side only is still ignored.
    let s = json!({"kind": "json_equal", "expected": {"a": 1}, "ignore_paths": ["/trace_id"]});
    passes(s.clone(), &answer(r#"{"a": 1, "trace_id": "t-9"}"#), None);
    assert_eq!(fails(s, &answer(r#"{"a": 2, "trace_id": "t-9"}"#), None), "/a: expected 1, got 2");
    // An array element is blanked: the others keep their indexes.
    let s = json!({"kind": "json_equal", "expected": [1, 2, 3], "ignore_paths": ["/0"]});
    passes(s.clone(), &answer("[9, 2, 3]"), None);
    assert_eq!(fails(s, &answer("[9, 3, 2]"), None), "/1: expected 2, got 3 (and 1 more difference)");
    // The whole document.
    passes(json!({"kind": "json_equal", "expected": [1], "ignore_paths": [""]}), &answer("{}"), None);
}

#[test]
fn numbers_are_found_in_text() {
    let cases = [
        ("42", 42.0),
        ("-3.5", -3.5),
        ("1e3", 1000.0),
        ("answer: 42.", 42.0),
        ("The total is $1,234.50 today", 1234.5),
        ("x = −7", -7.0),
        ("(+8)", 8.0),
        ("about .5 of it", 0.5),
        ("GPT-4 says 3", 4.0),
        ("1,2,3", 1.0),
        ("12,3456", 12.0),
        ("3 eggs", 3.0),
        ("2.5E-2", 0.025),
        ("é 7", 7.0),
    ];
    for (text, want) in cases {
        assert_eq!(first_number(text), Some(want), "{text}");
    }
    assert_eq!(first_number("no numbers here."), None);
    assert_eq!(first_number(""), None);
}

#[test]
fn numeric_compares_within_tolerance() {
    let r = passes(json!({"kind": "numeric", "expected": 42}), &answer("The answer is 42."), None);
    assert_eq!(r, "got 42, expected 42");
    let r = fails(json!({"kind": "numeric", "expected": 42}), &answer("The answer is 43.1"), None);
    assert_eq!(r, "expected 42, got 43.1 (off by 1.1)");
    let r = passes(json!({"kind": "numeric", "expected": 1.0, "tolerance": 0.1}), &answer("1.1"), None);
    assert_eq!(r, "got 1.1, expected 1 ± 0.1");
    let r = fails(json!({"kind": "numeric", "expected": 1.0, "tolerance": 0.1}), &answer("1.11"), None);
    assert_eq!(r, "expected 1 ± 0.1, got 1.11 (off by 0.11)");
    let r = fails(json!({"kind": "numeric", "expected": 1}), &answer("no idea"), None);
    assert_eq!(r, r#"no number in the output: "no idea""#);
    // From the item: a number, or a numeric string.
    passes(json!({"kind": "numeric"}), &answer("-2.5"), Some(json!(-2.5)));
    passes(json!({"kind": "numeric", "tolerance": 1}), &answer("1000"), Some(json!(" 1e3 ")));
    fails(json!({"kind": "numeric"}), &answer("7"), Some(json!("8")));
    let e = error(json!({"kind": "numeric"}), &answer("7"), Some(json!("seven")));
    assert_eq!(e, r#"numeric: the dataset item's expected value is not a number: "seven""#);
    assert!(error(json!({"kind": "numeric"}), &answer("7"), Some(json!("NaN"))).contains("not a number"));
    assert!(error(json!({"kind": "numeric", "tolerance": -1}), &answer("7"), Some(json!(7)))
        .starts_with("numeric: tolerance"));
}

#[test]
fn tool_calls_in_order_allow_extras() {
    let made = calls(&[
        ("search", json!({"q": "weather", "limit": 5})),
        ("get_weather", json!({"city": "Oslo", "units": "metric"})),
        ("send_email", json!({"to": "a@b.c"})),
    ]);
    let s = json!({"kind": "tool_calls", "expected": [
        {"name": "search"},
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
    ]});
    let (n, r) = fraction(s, &made, None);
    assert_eq!(n, 1.0);
    assert_eq!(r, "matched 2 of 2 expected calls in order");

    let s = json!({"kind": "tool_calls", "expected": [
        {"name": "search"},
        {"name": "send_email"},
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Bergen"}},
    ]});
    let (n, r) = fraction(s, &made, None);
    assert_eq!(n, 0.5);
    assert_eq!(
        r,
        r#"matched 2 of 4 expected calls in order; missing get_weather{"city":"Bergen"}; out of order: get_weather{"city":"Oslo"}"#
    );

    // The most calls in order, not the first found: b, c beat a alone.
    let made = calls(&[("b", json!({})), ("c", json!({})), ("a", json!({}))]);
    let s =
        json!({"kind": "tool_calls", "order": "in_order", "expected": [{"name": "a"}, {"name": "b"}, {"name": "c"}]});
    let (n, r) = fraction(s, &made, None);
    assert!((n - 2.0 / 3.0).abs() < 1e-12, "{n}");
    assert_eq!(r, "matched 2 of 3 expected calls in order; out of order: a");
}

#[test]
fn tool_calls_missing_ones_are_named() {
    let made = calls(&[("search", json!({"q": "x"})), ("get_time", json!({}))]);
    let s = json!({"kind": "tool_calls", "expected": [
        {"name": "search"}, {"name": "get_time"}, {"name": "get_weather", "arguments": {"city": "Oslo"}},
    ]});
    let (n, r) = fraction(s, &made, None);
    assert!((n - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(r, r#"matched 2 of 3 expected calls in order; missing get_weather{"city":"Oslo"}"#);
    let many: Vec<Value> = (0..5).map(|i| json!({"name": format!("t{i}")})).collect();
    let (n, r) = fraction(json!({"kind": "tool_calls", "order": "any", "expected": many}), &made, None);
    assert_eq!(n, 0.0);
    assert_eq!(r, "matched 0 of 5 expected calls; missing t0, t1, t2 and 2 more");
}

#[test]
fn tool_calls_exact_order_wants_the_same_sequence() {
    let s = |expected: Value| json!({"kind": "tool_calls", "order": "exact", "expected": expected});
    let made = calls(&[("a", json!({"x": 1})), ("b", json!({})), ("c", json!({}))]);
    let (n, r) = fraction(s(json!([{"name": "a", "arguments": {"x": 1}}, {"name": "b"}, {"name": "c"}])), &made, None);
    assert_eq!((n, r.as_str()), (1.0, "matched 3 of 3 expected calls in exact order"));
    // An extra call keeps it under 1.
    let (n, r) = fraction(s(json!([{"name": "a"}, {"name": "b"}])), &made, None);
    assert!((n - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(r, "matched 2 of 2 expected calls in exact order; 1 call extra: c{}");
    // A wrong call at a position.
    let (n, r) = fraction(s(json!([{"name": "a", "arguments": {"x": 2}}, {"name": "b"}, {"name": "c"}])), &made, None);
    assert!((n - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(r, r#"matched 2 of 3 expected calls in exact order; call 1: expected a{"x":2}, got a{"x":1}"#);
    // The right calls in another order.
    let (n, r) = fraction(s(json!([{"name": "c"}, {"name": "b"}, {"name": "a"}])), &made, None);
    assert!((n - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(
        r,
        "matched 1 of 3 expected calls in exact order; call 1: expected c, got a{\"x\":1} (and 1 more difference)"
    );
    // Too few.
    let (n, r) = fraction(s(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}])), &made, None);
    assert_eq!(n, 0.75);
    assert_eq!(r, "matched 3 of 4 expected calls in exact order; missing d");
}

#[test]
fn tool_calls_in_any_order_match_one_to_one() {
    let s = |expected: Value| json!({"kind": "tool_calls", "order": "any", "expected": expected});
    let made = calls(&[("get_weather", json!({"city": "Oslo"})), ("get_weather", json!({"city": "Paris"}))]);
    // Reversed order is fine.
    let (n, _) = fraction(
        s(
            json!([{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}]),
        ),
        &made,
        None,
    );
    assert_eq!(n, 1.0);
    // A generic expected call does not take the only call a specific one fits.
    let (n, r) = fraction(
        s(json!([{"name": "get_weather"}, {"name": "get_weather", "arguments": {"city": "Oslo"}}])),
        &made,
        None,
    );
    assert_eq!((n, r.as_str()), (1.0, "matched 2 of 2 expected calls"));
    // One call cannot stand for two expected.
    let one = calls(&[("get_weather", json!({"city": "Oslo"}))]);
    let (n, r) = fraction(s(json!([{"name": "get_weather"}, {"name": "get_weather"}])), &one, None);
    assert_eq!(n, 0.5);
    assert_eq!(r, "matched 1 of 2 expected calls; missing get_weather");
}

#[test]
fn tool_call_arguments_match_as_a_subset() {
    let made = calls(&[(
        "book",
        json!({"trip": {"from": "OSL", "to": "CDG", "date": "2025-05-01", "seats": 2.0}, "tags": ["a", "b"], "note": null}),
    )]);
    let fit = |args: Value| {
        let s = json!({"kind": "tool_calls", "expected": [{"name": "book", "arguments": args}]});
        fraction(s, &made, None).0 == 1.0
    };
    assert!(fit(json!({})));
    assert!(fit(json!({"trip": {"to": "CDG"}})));
    assert!(fit(json!({"trip": {"to": "CDG", "seats": 2}})));
    assert!(fit(json!({"tags": ["a", "b"], "note": null})));
    assert!(!fit(json!({"trip": {"to": "ARN"}})));
    assert!(!fit(json!({"trip": {"to": "CDG", "class": "economy"}})));
    assert!(!fit(json!({"tags": ["a"]})));
    assert!(!fit(json!({"tags": ["b", "a"]})));
    assert!(!fit(json!({"trip": "CDG"})));
    // Arguments recorded as JSON text.
    let text = calls(&[("book", json!("{\"trip\": {\"to\": \"CDG\"}}"))]);
    let s = json!({"kind": "tool_calls", "expected": [{"name": "book", "arguments": {"trip": {"to": "CDG"}}}]});
    assert_eq!(fraction(s, &text, None).0, 1.0);
}

#[test]
fn tool_calls_from_the_item() {
    let made = calls(&[("search", json!({"q": "x"})), ("answer", json!({}))]);
    let s = json!({"kind": "tool_calls"});
    let list = json!([{"name": "search", "arguments": {"q": "x"}}, {"name": "answer"}]);
    assert_eq!(fraction(s.clone(), &made, Some(list.clone())).0, 1.0);
    assert_eq!(fraction(s.clone(), &made, Some(json!({"tool_calls": list, "answer": "x"}))).0, 1.0);
    assert_eq!(fraction(s.clone(), &made, Some(json!([{"name": "other"}]))).0, 0.0);
    let e = error(s.clone(), &made, Some(json!("search")));
    assert!(e.starts_with("tool_calls: the dataset item's expected value must be a list"), "{e}");
    let e = error(s.clone(), &made, Some(json!([{"tool": "search"}])));
    assert!(e.starts_with("tool_calls: the dataset item's expected calls: "), "{e}");
    let many: Vec<Value> = (0..101).map(|_| json!({"name": "a"})).collect();
    let e = error(s, &made, Some(json!(many)));
    assert_eq!(e, "tool_calls: the dataset item's expected calls: at most 100 calls");
}

#[test]
fn no_expected_calls_means_none_made() {
    for order in ["exact", "in_order", "any"] {
        let s = json!({"kind": "tool_calls", "expected": [], "order": order});
        let (n, r) = fraction(s.clone(), &ScoreSubject::default(), None);
        assert_eq!((n, r.as_str()), (1.0, "no tool calls expected, none made"));
        let (n, r) = fraction(s, &calls(&[("search", json!({"q": "x"}))]), None);
        assert_eq!((n, r.as_str()), (0.0, r#"no tool calls expected, made 1: search{"q":"x"}"#));
    }
}

#[test]
fn bounds_of_each_kind() {
    let run_of = |duration_ms, cost_usd, turns| ScoreSubject { duration_ms, cost_usd, turns, ..Default::default() };
    let done = run_of(Some(1500), Some(0.0123), 3);
    let r = passes(json!({"kind": "bounds", "max_duration_ms": 2000}), &done, None);
    assert_eq!(r, "within bounds: duration 1.5 s ≤ 2 s");
    let r = fails(json!({"kind": "bounds", "max_duration_ms": 1000}), &done, None);
    assert_eq!(r, "duration 1.5 s over its bound of 1 s");
    let r = fails(json!({"kind": "bounds", "max_cost_usd": 0.01}), &done, None);
    assert_eq!(r, "cost $0.0123 over its bound of $0.01");
    passes(json!({"kind": "bounds", "max_cost_usd": 0.0123}), &done, None);
    let r = fails(json!({"kind": "bounds", "max_turns": 2}), &done, None);
    assert_eq!(r, "3 turns over its bound of 2");
    let r = passes(json!({"kind": "bounds", "max_duration_ms": 1500, "max_cost_usd": 1, "max_turns": 3}), &done, None);
    assert_eq!(r, "within bounds: duration 1.5 s ≤ 1.5 s, cost $0.0123 ≤ $1.00, 3 turns ≤ 3");
    let r = fails(json!({"kind": "bounds", "max_duration_ms": 900, "max_turns": 1}), &done, None);
    assert_eq!(r, "duration 1.5 s over its bound of 900 ms; 3 turns over its bound of 1");
    // What is not known cannot be shown within a bound.
    let unknown = run_of(None, None, 1);
    let r = fails(json!({"kind": "bounds", "max_duration_ms": 1000, "max_cost_usd": 0.5}), &unknown, None);
    assert_eq!(r, "duration unknown (bound 1 s); cost unknown (bound $0.50)");
    passes(json!({"kind": "bounds", "max_turns": 1}), &unknown, None);
    // Summed prices are not exact in binary.
    passes(json!({"kind": "bounds", "max_cost_usd": 0.3}), &run_of(None, Some(0.1 + 0.2), 0), None);
    let e = error(json!({"kind": "bounds"}), &done, None);
    assert_eq!(e, "bounds: give at least one of max_duration_ms, max_cost_usd, max_turns");
}

#[test]
fn check_refuses_what_cannot_be_applied() {
    for ok in [
        json!({"kind": "exact"}),
        json!({"kind": "regex", "pattern": "^a+$"}),
        json!({"kind": "json_schema", "schema": {"type": "object"}}),
        json!({"kind": "bounds", "max_turns": 3}),
    ] {
        assert_eq!(check(&scorer(ok)), Ok(()));
    }
    let e = check(&scorer(json!({"kind": "regex", "pattern": "a".repeat(1001)}))).unwrap_err();
    assert_eq!(e, "regex: pattern: at most 1000 characters");
    assert!(check(&scorer(json!({"kind": "regex", "pattern": "a)"})))
        .unwrap_err()
        .starts_with("regex: pattern does not compile"));
    let e = check(&scorer(json!({"kind": "json_schema", "schema": 3}))).unwrap_err();
    assert!(e.starts_with("json_schema: schema: must be a JSON Schema"), "{e}");
    let e = check(&scorer(json!({"kind": "json_equal", "ignore_paths": ["id"]}))).unwrap_err();
    assert!(e.starts_with("json_equal: ignore_paths[0]: "), "{e}");
}

#[test]
fn quoted_text_is_cut_on_a_character_boundary() {
    let long: String = "é".repeat(100) + &"日本".repeat(50) + "🦀";
    let r = fails(json!({"kind": "exact", "expected": "x"}), &answer(&long), None);
    let want: String = "é".repeat(100) + &"日本".repeat(10) + "…";
    assert_eq!(r, format!("expected \"x\", got \"{want}\" (differs at character 1)"));
    let r = fails(json!({"kind": "contains", "expected": "🦀".repeat(200)}), &answer("crab"), None);
    assert!(r.starts_with(&format!("output does not contain \"{}…\"", "🦀".repeat(120))), "{r}");
    assert_eq!(clip(&"a".repeat(120)), "a".repeat(120));
    assert_eq!(clip(&"a".repeat(121)), format!("{}…", "a".repeat(120)));
    assert_eq!(clip("日本"), "日本");
}

#[test]
fn amounts_and_durations_read_well() {
    assert_eq!(usd(0.01), "$0.01");
    assert_eq!(usd(0.0123), "$0.0123");
    assert_eq!(usd(1.5), "$1.50");
    assert_eq!(usd(0.00000123), "$0.00000123");
    assert_eq!(duration(850), "850 ms");
    assert_eq!(duration(61_234), "61.234 s");
    assert_eq!(duration(60_000), "60 s");
}
