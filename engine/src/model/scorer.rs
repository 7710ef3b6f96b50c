//! Scorers: the built-in judges of an evaluation. A [`Scorer`] is a plain
//! configuration (`{"kind": "exact", "expected": "Paris"}`), a
//! [`ScoreSubject`] is what it judges (a finished run's answer, its tool
//! calls, duration, cost and turns), and a [`Verdict`] is what it
//! concluded. The scoring itself lives in the engine (`eval::scorers`);
//! these types and their bounds are shared with the browser bundle.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ScoreValue;

/// Scorers one request may run on a run.
pub const MAX_SCORERS_PER_REQUEST: usize = 16;
/// A text field of a scorer (`expected`): at most this many bytes.
pub const MAX_SCORER_TEXT_BYTES: usize = 64 * 1024;
/// A `regex` scorer's pattern: at most this many characters.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// A JSON field of a scorer (`schema`, `expected`): at most this many bytes serialized.
pub const MAX_SCORER_JSON_BYTES: usize = 64 * 1024;
/// A `json_equal` scorer's `ignore_paths`: at most this many.
pub const MAX_IGNORE_PATHS: usize = 32;
/// One JSON pointer of `ignore_paths`: at most this many characters.
pub const MAX_POINTER_CHARS: usize = 512;
/// A `tool_calls` scorer's expected calls: at most this many.
pub const MAX_EXPECTED_CALLS: usize = 100;
/// A `judge` scorer's rubric: at most this many characters.
pub const MAX_RUBRIC_CHARS: usize = 16_000;
/// A `judge` scorer's labels: none, or 2 to this many.
pub const MAX_JUDGE_LABELS: usize = 10;

/// What a scorer judges: a finished run's answer and what it did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScoreSubject {
    /// The run's final answer as text (`None` when it gave none).
    pub output: Option<String>,
    /// The tool calls the run made, in the order it made them.
    pub calls: Vec<SubjectCall>,
    /// The run's active duration.
    pub duration_ms: Option<i64>,
    /// What the run cost, when its model has a price.
    pub cost_usd: Option<f64>,
    /// The model turns the run took.
    pub turns: u32,
}

/// One tool call a judged run made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubjectCall {
    /// The tool.
    pub name: String,
    /// The arguments it was called with (a JSON object).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub arguments: Value,
}

/// A built-in scorer, `{"kind": "exact", ...}`. Where a scorer takes an
/// `expected` value and none is given, the dataset item's expected value is
/// used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Scorer {
    /// Passes when the trimmed answer equals the trimmed expected text.
    Exact {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<String>,
        #[serde(default)]
        ignore_case: bool,
    },
    /// Passes when the answer contains the expected text.
    Contains {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<String>,
        #[serde(default)]
        ignore_case: bool,
    },
    /// Passes when the answer does not contain the given text.
    NotContains {
        expected: String,
        #[serde(default)]
        ignore_case: bool,
    },
    /// Passes when the answer matches the regular expression (anywhere;
    /// anchor it with `^…$` to match the whole answer).
    Regex { pattern: String },
    /// Passes when the answer is JSON (a fenced ```json block is unwrapped)
    /// valid against the JSON Schema.
    JsonSchema {
        #[cfg_attr(feature = "openapi", schema(value_type = Object))]
        schema: Value,
    },
    /// Passes when the answer is JSON equal to the expected JSON; object
    /// key order does not matter, numbers compare by value.
    JsonEqual {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::scorer_expected))]
        expected: Option<Value>,
        /// JSON pointers (RFC 6901, `/a/0/b`) left out of both sides before
        /// comparing: an object's member is removed, an array's element
        /// blanked (the indexes of the others stay).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ignore_paths: Vec<String>,
    },
    /// Passes when the first number in the answer (`42`, `-3.5`, `1e3`,
    /// `1,234.5`) is within `tolerance` of the expected number.
    Numeric {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<f64>,
        /// The largest absolute difference that passes (default 0).
        #[serde(default)]
        tolerance: f64,
    },
    /// Scores the fraction (0 to 1) of expected tool calls the run made.
    ToolCalls {
        /// An empty list expects no tool calls at all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<Vec<ExpectedCall>>,
        #[serde(default)]
        order: CallOrder,
    },
    /// Passes when the run stayed within every bound given (at least one).
    Bounds {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_duration_ms: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
        /// At most 1,000,000.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(maximum = 1_000_000))]
        max_turns: Option<u32>,
    },
    /// An LLM as judge: a model reads the rubric, the item's input, the
    /// run's answer and the expected answer (when there is one) and answers
    /// a score from 0 to 1, a label and its reasoning. The judge is a run of
    /// its own (tagged `runlens.judge`), linked from the score. The built-in
    /// model judges deterministically (the share of the expected answer's
    /// words, or of the rubric's quoted terms, found in the answer).
    Judge {
        /// What a good answer is, in the words a reviewer would use (1-16,000 characters).
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 16000))]
        rubric: String,
        /// The judging model, `builtin` (the default) or a configured `provider/model`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The labels the judge chooses from, best first (none, or 2-10 of
        /// 1-64 characters); none: `pass` and `fail`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[cfg_attr(feature = "openapi", schema(max_items = 10))]
        labels: Vec<String>,
    },
}

/// One tool call a `tool_calls` scorer expects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExpectedCall {
    /// The tool.
    pub name: String,
    /// A subset of the arguments: every member given must be present and
    /// equal (objects recursively, arrays exactly). Absent: any arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub arguments: Option<Value>,
}

/// How the expected calls of a `tool_calls` scorer must be ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CallOrder {
    /// The same calls in the same order, and no others.
    Exact,
    /// The expected calls in their order, other calls between them allowed.
    #[default]
    InOrder,
    /// Each expected call somewhere, in any order.
    Any,
}

/// What a scorer concluded about a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    /// Pass or fail (a yes/no), or for `tool_calls` the fraction matched.
    pub value: ScoreValue,
    /// Why, in a line a person reads in a table.
    pub reason: String,
    /// A judge's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A judge's own run, where its prompt and reasoning are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_run_id: Option<String>,
}

impl Scorer {
    /// The scorer's kind, as in its `kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Scorer::Exact { .. } => "exact",
            Scorer::Contains { .. } => "contains",
            Scorer::NotContains { .. } => "not_contains",
            Scorer::Regex { .. } => "regex",
            Scorer::JsonSchema { .. } => "json_schema",
            Scorer::JsonEqual { .. } => "json_equal",
            Scorer::Numeric { .. } => "numeric",
            Scorer::ToolCalls { .. } => "tool_calls",
            Scorer::Bounds { .. } => "bounds",
            Scorer::Judge { .. } => "judge",
        }
    }

    /// Why the scorer cannot be used as configured, if it cannot (its
    /// bounds; whether a pattern or schema compiles is checked by the engine).
    pub fn problem(&self) -> Option<String> {
        match self {
            Scorer::Exact { expected, .. } => expected.as_deref().and_then(|e| text_problem("expected", e)),
            Scorer::Contains { expected, .. } => expected.as_deref().and_then(|e| needle_problem("expected", e)),
            Scorer::NotContains { expected, .. } => needle_problem("expected", expected),
            Scorer::Regex { pattern } => (pattern.chars().count() > MAX_PATTERN_CHARS)
                .then(|| format!("pattern: at most {MAX_PATTERN_CHARS} characters")),
            Scorer::JsonSchema { schema } => {
                if !schema.is_object() {
                    Some("schema: must be a JSON Schema object".into())
                } else {
                    json_problem("schema", schema)
                }
            }
            Scorer::JsonEqual { expected, ignore_paths } => {
                if let Some(p) = expected.as_ref().and_then(|e| json_problem("expected", e)) {
                    return Some(p);
                }
                if ignore_paths.len() > MAX_IGNORE_PATHS {
                    return Some(format!("ignore_paths: at most {MAX_IGNORE_PATHS}"));
                }
                ignore_paths
                    .iter()
                    .enumerate()
                    .find_map(|(i, p)| pointer_problem(p).map(|e| format!("ignore_paths[{i}]: {e}")))
            }
            Scorer::Numeric { expected, tolerance } => {
                if expected.is_some_and(|e| !e.is_finite()) {
                    Some("expected: must be a finite number".into())
                } else if !tolerance.is_finite() || *tolerance < 0.0 {
                    Some("tolerance: must be a finite number ≥ 0".into())
                } else {
                    None
                }
            }
            Scorer::ToolCalls { expected, .. } => {
                expected.as_deref().and_then(|c| expected_calls_problem("expected", c))
            }
            Scorer::Bounds { max_duration_ms, max_cost_usd, max_turns } => {
                if max_duration_ms.is_none() && max_cost_usd.is_none() && max_turns.is_none() {
                    Some("give at least one of max_duration_ms, max_cost_usd, max_turns".into())
                } else if max_turns.is_some_and(|t| t > 1_000_000) {
                    Some("max_turns: at most 1000000".into())
                } else if max_duration_ms.is_some_and(|d| d < 0) {
                    Some("max_duration_ms: must not be negative".into())
                } else if max_cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
                    Some("max_cost_usd: must be a finite number ≥ 0".into())
                } else {
                    None
                }
            }
            Scorer::Judge { rubric, model, labels } => judge_problem(rubric, model.as_deref(), labels),
        }
    }
}

/// Why a `judge` scorer cannot be used as configured, if it cannot (whether
/// its model exists is the engine's check).
fn judge_problem(rubric: &str, model: Option<&str>, labels: &[String]) -> Option<String> {
    if rubric.trim().is_empty() {
        return Some("rubric: must not be blank".into());
    }
    if rubric.chars().count() > MAX_RUBRIC_CHARS {
        return Some(format!("rubric: at most {MAX_RUBRIC_CHARS} characters"));
    }
    if model.is_some_and(|m| m.trim().is_empty() || m.chars().count() > 200) {
        return Some("model: 1-200 characters".into());
    }
    if labels.len() == 1 || labels.len() > MAX_JUDGE_LABELS {
        return Some(format!("labels: none, or 2 to {MAX_JUDGE_LABELS}"));
    }
    for (i, label) in labels.iter().enumerate() {
        if label.trim().is_empty() || label.trim() != label || label.chars().count() > 64 {
            return Some(format!("labels[{i}]: 1-64 characters, no spaces at either end"));
        }
        if labels[..i].iter().any(|l| l.eq_ignore_ascii_case(label)) {
            return Some(format!("labels[{i}]: `{label}` is given twice"));
        }
    }
    None
}

/// Why a list of expected tool calls (a scorer's, or a dataset item's,
/// named `field`) cannot be used, if it cannot.
pub fn expected_calls_problem(field: &str, calls: &[ExpectedCall]) -> Option<String> {
    if calls.len() > MAX_EXPECTED_CALLS {
        return Some(format!("{field}: at most {MAX_EXPECTED_CALLS} calls"));
    }
    for (i, call) in calls.iter().enumerate() {
        if call.name.trim().is_empty() {
            return Some(format!("{field}[{i}].name: must not be blank"));
        }
        if let Some(p) = text_problem(&format!("{field}[{i}].name"), &call.name) {
            return Some(p);
        }
        if call.arguments.as_ref().is_some_and(|a| !a.is_object()) {
            return Some(format!("{field}[{i}].arguments: must be a JSON object"));
        }
    }
    let mut size = ByteCount(0);
    (serde_json::to_writer(&mut size, calls).is_err() || size.0 > MAX_SCORER_JSON_BYTES)
        .then(|| format!("{field}: at most {} KiB of JSON", MAX_SCORER_JSON_BYTES / 1024))
}

fn text_problem(field: &str, text: &str) -> Option<String> {
    (text.len() > MAX_SCORER_TEXT_BYTES).then(|| format!("{field}: at most {} KiB", MAX_SCORER_TEXT_BYTES / 1024))
}

/// A text searched for: not empty, and bounded.
fn needle_problem(field: &str, text: &str) -> Option<String> {
    if text.is_empty() {
        return Some(format!("{field}: must not be empty"));
    }
    text_problem(field, text)
}

fn json_problem(field: &str, value: &Value) -> Option<String> {
    let mut size = ByteCount(0);
    (serde_json::to_writer(&mut size, value).is_err() || size.0 > MAX_SCORER_JSON_BYTES)
        .then(|| format!("{field}: at most {} KiB of JSON", MAX_SCORER_JSON_BYTES / 1024))
}

/// Why `pointer` is not an RFC 6901 JSON pointer within bounds, if it is not.
fn pointer_problem(pointer: &str) -> Option<String> {
    if pointer.chars().count() > MAX_POINTER_CHARS {
        return Some(format!("at most {MAX_POINTER_CHARS} characters"));
    }
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Some("a JSON pointer is empty or starts with `/`".into());
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Some("in a JSON pointer `~` is followed by 0 or 1".into());
        }
    }
    None
}

/// Counts the bytes of serialized JSON without keeping them, refusing once
/// past [`MAX_SCORER_JSON_BYTES`] (so a huge value stops early).
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        if self.0 > MAX_SCORER_JSON_BYTES {
            return Err(std::io::Error::other("too large"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One scorer of `POST /api/runs/{id}/evaluate`: the score it gives and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamedScorer {
    /// The score's name (as `POST /api/scores` takes it); absent: the scorer's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.:-]([A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?$", min_length = 1, max_length = 64)
    )]
    pub name: Option<String>,
    pub scorer: Scorer,
}

impl NamedScorer {
    /// The score's name: given, or the scorer's kind.
    pub fn score_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.scorer.kind().to_owned())
    }
}

/// The body of `POST /api/runs/{id}/evaluate`: scorers to run on a finished
/// run, each kept as a score, and the expected value of those scorers that
/// do not give their own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvaluateRun {
    /// 1 to 16 scorers.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 16))]
    pub scorers: Vec<NamedScorer>,
    /// What the run should have answered (text, JSON, or the tool calls
    /// expected), for scorers without an `expected` of their own; at most 64 KiB of JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::scorer_expected))]
    pub expected: Option<Value>,
}

impl EvaluateRun {
    /// Why the request cannot be run as given, naming the scorer (`scorers[1]: …`).
    pub fn problem(&self) -> Option<String> {
        if self.scorers.is_empty() || self.scorers.len() > MAX_SCORERS_PER_REQUEST {
            return Some(format!("scorers: give 1 to {MAX_SCORERS_PER_REQUEST} scorers"));
        }
        if self
            .expected
            .as_ref()
            .is_some_and(|v| serde_json::to_string(v).map_or(0, |s| s.len()) > MAX_SCORER_JSON_BYTES)
        {
            return Some(format!("expected: at most {} KiB of JSON", MAX_SCORER_JSON_BYTES / 1024));
        }
        self.scorers.iter().enumerate().find_map(|(i, s)| {
            let name = s.name.as_deref().and_then(super::score_name_problem);
            name.or_else(|| s.scorer.problem()).map(|p| format!("scorers[{i}]: {p}"))
        })
    }
}

pub mod judge;
#[cfg(test)]
mod tests;
