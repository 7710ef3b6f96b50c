//! Property tests: random and adversarial input to the calculator parser,
//! to result schemas (compiled at creation, checked against final answers)
//! and to create-run requests give a result or a refusal, never a panic, a
//! hang or a stack overflow. 256 cases each (they run in CI on 2 cores).

use std::sync::OnceLock;

use proptest::prelude::*;
use runlens_engine::model::limits::*;
use runlens_engine::model::{CreateRun, RunStatus};
use runlens_engine::tools::calculator::evaluate;
use runlens_engine::{Engine, EngineError};
use serde_json::{json, Map, Value};

use crate::support::*;

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

/// One engine (and its runtime) shared by every case of a property.
fn shared() -> &'static (tokio::runtime::Runtime, Engine, crate::support::TestDb) {
    static SHARED: OnceLock<(tokio::runtime::Runtime, Engine, crate::support::TestDb)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (engine, dir) = rt.block_on(engine());
        (rt, engine, dir)
    })
}

// ---- the calculator parser -------------------------------------------------

/// Pieces of expressions, valid and not, glued at random.
fn calc_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("-".to_owned()),
        Just("+".to_owned()),
        Just("*".to_owned()),
        Just("/".to_owned()),
        Just("%".to_owned()),
        Just("^".to_owned()),
        Just(",".to_owned()),
        Just(" ".to_owned()),
        Just(".".to_owned()),
        Just("pi".to_owned()),
        Just("e".to_owned()),
        prop::sample::select(vec!["sqrt(", "abs(", "min(", "max(", "ln(", "exp(", "tan(", "round(", "nope("])
            .prop_map(str::to_owned),
        "[0-9]{1,30}(\\.[0-9]{0,5})?",
        "\\PC{1,3}",
    ];
    prop::collection::vec(piece, 0..400).prop_map(|p| p.concat())
}

/// Inputs built to go deep or big: nesting, chains of unary signs and
/// powers, huge and tiny numbers, near and past the length limit.
fn calc_adversarial() -> impl Strategy<Value = String> {
    let n = 1usize..1100;
    prop_oneof![
        n.clone().prop_map(|n| format!("{}1{}", "(".repeat(n), ")".repeat(n))),
        n.clone().prop_map(|n| format!("{}1", "-".repeat(n))),
        n.clone().prop_map(|n| format!("{}1", "-+".repeat(n / 2))),
        n.clone().prop_map(|n| format!("{}2", "2^".repeat(n / 2))),
        n.clone().prop_map(|n| format!("{}1", "-(".repeat(n / 2))),
        n.clone().prop_map(|n| format!("{}1{}", "sqrt(".repeat(n / 5), ")".repeat(n / 5))),
        n.clone().prop_map(|n| format!("{}1{}", "-2^(".repeat(n / 4), ")".repeat(n / 4))),
        n.clone().prop_map(|n| "9".repeat(n)),
        n.clone().prop_map(|n| format!("0.{}1", "0".repeat(n))),
        n.clone().prop_map(|n| format!("1{}^99", "0".repeat(n.min(400)))),
        n.clone().prop_map(|n| vec!["1"; n / 2 + 1].join("+")),
        n.prop_map(|n| format!("max({})", vec!["1"; n / 2 + 1].join(","))),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn calculator_gives_a_finite_number_or_an_error(text in calc_text()) {
        check_calculator(&text);
    }

    #[test]
    fn calculator_survives_adversarial_input(text in calc_adversarial()) {
        check_calculator(&text);
    }
}

fn check_calculator(text: &str) {
    match evaluate(text) {
        Ok(v) => assert!(v.is_finite(), "{text:.80}: {v}"),
        Err(e) => assert!(!e.is_empty()),
    }
    // Deterministic: the same text gives the same answer.
    assert_eq!(evaluate(text), evaluate(text));
}

// ---- result schemas --------------------------------------------------------

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        prop::sample::select(vec![0.0, -1.0, 1e-300, 1e300, 0.5]).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ]
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Schema keywords with values that are right, wrong or hostile.
fn keyword() -> impl Strategy<Value = (String, Value)> {
    let type_name =
        prop::sample::select(vec!["object", "array", "string", "number", "integer", "boolean", "null", "nope"]);
    let pattern = prop::sample::select(vec!["^a+$", "(a+)+$", "(", "[", "\\p{L}+", "(?=a)a", "^(a|aa)*b$", "\\", ".*"]);
    let reference = prop::sample::select(vec![
        "#",
        "#/properties/a",
        "#/definitions/x",
        "#/$defs/x",
        "http://example.invalid/schema.json",
        "file:///etc/passwd",
        "nope",
        "#/items/0",
    ]);
    let format = prop::sample::select(vec!["email", "date-time", "uri", "regex", "ipv4", "unknown-format"]);
    let number = prop_oneof![
        prop::sample::select(vec![0.0, -1.0, 1e-300, 1e300, 0.5, 3.0]).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
    ];
    prop_oneof![
        type_name.clone().prop_map(|t| ("type".to_owned(), json!(t))),
        prop::collection::vec(type_name, 0..3).prop_map(|t| ("type".to_owned(), json!(t))),
        pattern.prop_map(|p| ("pattern".to_owned(), json!(p))),
        reference.prop_map(|r| ("$ref".to_owned(), json!(r))),
        format.prop_map(|f| ("format".to_owned(), json!(f))),
        number.clone().prop_map(|n| ("multipleOf".to_owned(), n)),
        number.clone().prop_map(|n| ("minimum".to_owned(), n)),
        number.clone().prop_map(|n| ("maxLength".to_owned(), n)),
        number.prop_map(|n| ("minItems".to_owned(), n)),
        prop::collection::vec(leaf(), 0..4).prop_map(|e| ("enum".to_owned(), Value::Array(e))),
        leaf().prop_map(|c| ("const".to_owned(), c)),
        any::<bool>().prop_map(|b| ("uniqueItems".to_owned(), json!(b))),
        prop::sample::select(vec!["http://json-schema.org/draft-07/schema#", "https://example.invalid/x", "nope"])
            .prop_map(|s| ("$schema".to_owned(), json!(s))),
        any_json().prop_map(|v| ("additionalProperties".to_owned(), v)),
        prop::collection::vec("[a-z]{1,3}", 0..3).prop_map(|r| ("required".to_owned(), json!(r))),
    ]
}

/// A schema: keywords, with nested schemas under the applicator keywords.
fn schema() -> impl Strategy<Value = Value> {
    let flat = prop::collection::vec(keyword(), 0..5).prop_map(|kws| Value::Object(kws.into_iter().collect()));
    let base = prop_oneof![flat, any::<bool>().prop_map(Value::Bool), any_json()];
    base.prop_recursive(4, 24, 4, |inner| {
        let applicator = prop::sample::select(vec![
            "properties",
            "items",
            "allOf",
            "anyOf",
            "oneOf",
            "not",
            "definitions",
            "$defs",
            "contains",
            "if",
            "then",
            "patternProperties",
            "additionalProperties",
        ]);
        (prop::collection::vec(keyword(), 0..3), applicator, prop::collection::vec(inner, 1..3)).prop_map(
            |(kws, key, subs)| {
                let mut obj: Map<String, Value> = kws.into_iter().collect();
                let nested = match key {
                    "properties" | "definitions" | "$defs" | "patternProperties" => Value::Object(
                        subs.into_iter().enumerate().map(|(i, s)| (["a", "x", "^b"][i % 3].to_owned(), s)).collect(),
                    ),
                    "allOf" | "anyOf" | "oneOf" => Value::Array(subs),
                    _ => subs.into_iter().next().unwrap(),
                };
                obj.insert(key.to_owned(), nested);
                Value::Object(obj)
            },
        )
    })
}

proptest! {
    #![proptest_config(config())]

    /// Creating a run with a random schema is refused (400) or accepted; an
    /// accepted run whose final answer is a random value ends with a result
    /// that matches, or says it did not match after one repair; never stuck.
    #[test]
    fn result_schemas_are_refused_or_enforced(schema in schema(), answer in any_json()) {
        let (rt, engine, _) = shared();
        let text = answer.to_string();
        let req = CreateRun {
            result_schema: Some(schema.clone()),
            ..scripted(json!([{"text": text}, {"text": text}]))
        };
        rt.block_on(async {
            match engine.runs().create_run(req).await {
                Err(EngineError::Invalid(msg)) => assert!(msg.contains("result_schema"), "{msg}"),
                Err(other) => panic!("{schema}: {other}"),
                Ok((run, _)) => {
                    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
                    assert!(matches!(run.status, RunStatus::Done | RunStatus::Failed), "{schema}: {:?}", run.status);
                    if run.status == RunStatus::Done {
                        // Either the result matches, or the run says it did not after one repair.
                        let validator = jsonschema::validator_for(&schema).unwrap();
                        let matched = validator.is_valid(run.result.as_ref().unwrap_or(&Value::Null));
                        let refused = run.summary.as_deref().is_some_and(|s| s.contains("did not match result_schema"));
                        assert!(matched || refused, "{schema}: {:?}", run.summary);
                    }
                }
            }
        });
    }
}

// ---- create-run requests ---------------------------------------------------

/// A string near one of the size bounds, or short.
fn sized_text(bound: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        "\\PC{0,20}".prop_map(Value::String),
        (bound - 2..bound + 2).prop_map(|n| Value::String("é".repeat(n / 2))),
        (bound - 2..bound + 2).prop_map(|n| Value::String("a".repeat(n))),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        (0u64..70_000).prop_map(Value::from),
        prop::sample::select(vec![0u64, 1, 255, 256, 1000, 1001, MAX_APPROVAL_TIMEOUT_S, MAX_APPROVAL_TIMEOUT_S + 1])
            .prop_map(Value::from),
    ]
}

/// One field of a create-run body, with a value of the right or a wrong type.
fn field() -> impl Strategy<Value = (String, Value)> {
    let name = prop::sample::select(vec![
        "id",
        "name",
        "initial_prompt",
        "system_prompt",
        "input",
        "tools",
        "tags",
        "context",
        "max_turns",
        "model",
        "model_settings",
        "agent_id",
        "approval",
        "interactive",
        "result_schema",
        "call_summarization",
        "unknown",
    ]);
    let tool = prop::sample::select(vec!["calculator", "wait", "current_time", "send_email", "nope"]);
    let setting = prop::sample::select(vec![
        "script",
        "latency_ms",
        "context_window",
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "bogus",
    ]);
    let value = prop_oneof![
        any_json(),
        number(),
        sized_text(MAX_NAME_CHARS),
        sized_text(MAX_SYSTEM_PROMPT_BYTES),
        prop::collection::vec(tool.clone(), 0..4).prop_map(|t| json!(t)),
        (prop::collection::vec(tool, 0..3), prop::option::of(number()))
            .prop_map(|(t, timeout)| json!({"tools": t, "timeout_s": timeout})),
        Just(json!("all")),
        prop::collection::btree_map(setting, number(), 0..4).prop_map(|m| json!(m)),
        prop::collection::btree_map("\\PC{0,70}", "\\PC{0,10}", 0..4).prop_map(|m| json!(m)),
        Just(json!({"script": [{"text": "t"}], "latency_ms": 0})),
    ];
    (name.prop_map(str::to_owned), value)
}

proptest! {
    #![proptest_config(config())]

    /// Random bodies: the parse or the engine refuses them (`Invalid`, a 400),
    /// or a run is created that honours every bound.
    #[test]
    fn create_run_refuses_or_creates_within_bounds(fields in prop::collection::vec(field(), 0..8)) {
        let (rt, engine, _) = shared();
        let mut body: Map<String, Value> = fields.into_iter().collect();
        body.entry("initial_prompt").or_insert(json!("hi"));
        let Ok(req) = serde_json::from_value::<CreateRun>(Value::Object(body)) else {
            return Ok(()); // a 400 from the body parser
        };
        rt.block_on(async {
            match engine.runs().create_run(req.clone()).await {
                Err(EngineError::Invalid(msg)) => assert!(!msg.is_empty()),
                Err(other) => panic!("{req:?}: {other}"),
                Ok((run, _)) => {
                    let _ = engine.runs().cancel(&run.id).await;
                    assert!(run.initial_prompt.len() <= MAX_PROMPT_BYTES);
                    assert!(run.name.chars().count() <= MAX_NAME_CHARS + 1);
                    assert!((1..=MAX_TURNS).contains(&run.max_turns));
                    assert!(run.tags.len() <= MAX_TAGS);
                    assert!(run.approval.timeout_s.is_none_or(|t| (1..=MAX_APPROVAL_TIMEOUT_S).contains(&t)));
                    let latency = run.model_settings.get("latency_ms").and_then(Value::as_u64).unwrap_or(0);
                    assert!(latency <= MAX_LATENCY_MS);
                }
            }
        });
    }
}
