//! Scores: a judgement attached to a run (or one of its steps or tool
//! calls) by a person, a program through the API, or a scorer. A score has
//! a name (`correct`, `helpfulness`…), a value (a number, a yes/no, or a
//! label), an optional comment, and who gave it when.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Actor;

/// A score's name: at most this many characters.
pub const MAX_SCORE_NAME_CHARS: usize = 64;
/// A label value: at most this many characters.
pub const MAX_SCORE_LABEL_CHARS: usize = 200;
/// A comment: at most this many characters.
pub const MAX_SCORE_COMMENT_CHARS: usize = 4000;
/// Scores one run may hold (the oldest are never dropped: a score past it is refused).
pub const MAX_RUN_SCORES: u32 = 1000;
/// A numeric value's bound, either way.
pub const MAX_SCORE_NUMBER: f64 = 1e12;

/// What a score says: a number (`0.8`), a yes/no (`true`), or a label (`"relevant"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScoreValue {
    Bool(bool),
    Number(f64),
    Label(String),
}

impl ScoreValue {
    /// As a number where it is one: a number, or a yes/no as 1 or 0.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            ScoreValue::Number(n) => Some(*n),
            ScoreValue::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            ScoreValue::Label(_) => None,
        }
    }

    /// Shown in a table: `0.8`, `yes`, `no`, or the label.
    pub fn display(&self) -> String {
        match self {
            ScoreValue::Number(n) => {
                let s = format!("{n:.4}");
                s.trim_end_matches('0').trim_end_matches('.').to_owned()
            }
            ScoreValue::Bool(true) => "yes".into(),
            ScoreValue::Bool(false) => "no".into(),
            ScoreValue::Label(l) => l.clone(),
        }
    }

    /// Why the value cannot be kept, if it cannot.
    pub fn problem(&self) -> Option<String> {
        match self {
            ScoreValue::Number(n) if !n.is_finite() || n.abs() > MAX_SCORE_NUMBER => {
                Some(format!("value: a number must be finite and within ±{MAX_SCORE_NUMBER:e}"))
            }
            ScoreValue::Label(l) if l.trim().is_empty() => Some("value: a label must not be blank".into()),
            ScoreValue::Label(l) if l.chars().count() > MAX_SCORE_LABEL_CHARS => {
                Some(format!("value: a label is at most {MAX_SCORE_LABEL_CHARS} characters"))
            }
            _ => None,
        }
    }
}

/// Who gave a score: a person in the UI, a program with an API key, or a
/// scorer of runlens (`scorer:exact`…).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ScoreSource {
    /// A person, in the UI.
    Human,
    /// A program, through `POST /api/scores`.
    Api,
    /// One of runlens's scorers.
    Scorer,
}

impl ScoreSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreSource::Human => "human",
            ScoreSource::Api => "api",
            ScoreSource::Scorer => "scorer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "human" => Some(ScoreSource::Human),
            "api" => Some(ScoreSource::Api),
            "scorer" => Some(ScoreSource::Scorer),
            _ => None,
        }
    }
}

/// A score as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Score {
    pub id: String,
    pub run_id: String,
    /// The step it judges (its index), when it judges one step.
    pub step_index: Option<u32>,
    /// The tool call it judges, when it judges one call.
    pub call_id: Option<String>,
    pub name: String,
    pub value: ScoreValue,
    pub comment: Option<String>,
    pub source: ScoreSource,
    /// Who gave it (a user or an API key; for a scorer, who ran it).
    pub author: Actor,
    /// The scorer's kind (`exact`, `regex`…) when a scorer gave it.
    pub scorer: Option<String>,
    /// A judge's label beside its score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The run of the judge that gave it, where its prompt and reasoning are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_run_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A score to attach to a run (`POST /api/scores`, the trace page's form).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewScore {
    /// The run it judges (of the caller's project; ingested runs too).
    pub run_id: String,
    /// A step of the run, by its index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u32>,
    /// A tool call of the run, by its id (its step is then found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// 1-64 characters: ASCII letters, digits, `-`, `_`, `.`, `:` or spaces (not first or last).
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.:-]([A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?$", min_length = 1, max_length = 64)
    )]
    pub name: String,
    pub value: ScoreValue,
    /// At most 4,000 characters; a blank one is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 4000))]
    pub comment: Option<String>,
}

/// Why a score's name cannot be used, if it cannot.
pub fn score_name_problem(name: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | ' ');
    if name.trim().is_empty() || name.trim() != name {
        return Some("name: must not be blank or start or end with a space".into());
    }
    if name.chars().count() > MAX_SCORE_NAME_CHARS || !name.chars().all(ok) {
        return Some(format!(
            "name: 1-{MAX_SCORE_NAME_CHARS} characters of ASCII letters, digits, `-`, `_`, `.`, `:` or spaces"
        ));
    }
    None
}

impl NewScore {
    /// Why the score cannot be kept as given (the run and its step or call
    /// are checked by the engine).
    pub fn problem(&self) -> Option<String> {
        if let Some(p) = score_name_problem(&self.name) {
            return Some(p);
        }
        if let Some(p) = self.value.problem() {
            return Some(p);
        }
        if self.comment.as_ref().is_some_and(|c| c.chars().count() > MAX_SCORE_COMMENT_CHARS) {
            return Some(format!("comment: at most {MAX_SCORE_COMMENT_CHARS} characters"));
        }
        if self.step_index.is_some() && self.call_id.is_some() {
            return Some("give step_index or call_id, not both".into());
        }
        None
    }
}

/// What the scores of one name on a set of runs add up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScoreSummary {
    pub name: String,
    pub count: u32,
    /// The mean of the numeric and yes/no values (yes = 1); null when none is.
    pub mean: Option<f64>,
    /// How many times each label was given, most given first.
    pub labels: Vec<(String, u32)>,
    /// Of the yes/no values: how many were yes.
    #[serde(default)]
    pub yes: u32,
    /// Of the yes/no values: how many were no.
    #[serde(default)]
    pub no: u32,
}

impl ScoreSummary {
    /// One summary per score name, by name.
    pub fn of(scores: &[Score]) -> Vec<ScoreSummary> {
        /// Per name: scores, the sum and count of numeric ones, each label's count.
        type Tally<'a> = (u32, f64, u32, std::collections::BTreeMap<&'a str, u32>, (u32, u32));
        let mut by: std::collections::BTreeMap<&str, Tally> = Default::default();
        for s in scores {
            let e = by.entry(s.name.as_str()).or_default();
            e.0 += 1;
            match &s.value {
                ScoreValue::Label(l) => *e.3.entry(l.as_str()).or_default() += 1,
                ScoreValue::Bool(b) => {
                    e.1 += f64::from(u8::from(*b));
                    e.2 += 1;
                    if *b {
                        e.4 .0 += 1;
                    } else {
                        e.4 .1 += 1;
                    }
                }
                v => {
                    e.1 += v.as_number().unwrap_or(0.0);
                    e.2 += 1;
                }
            }
        }
        by.into_iter()
            .map(|(name, (count, sum, numeric, labels, (yes, no)))| {
                let mut labels: Vec<(String, u32)> = labels.into_iter().map(|(l, n)| (l.to_owned(), n)).collect();
                labels.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                ScoreSummary {
                    name: name.to_owned(),
                    count,
                    mean: (numeric > 0).then(|| sum / f64::from(numeric)),
                    labels,
                    yes,
                    no,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_json_numbers_booleans_and_strings() {
        let v: ScoreValue = serde_json::from_str("0.5").unwrap();
        assert_eq!(v, ScoreValue::Number(0.5));
        let v: ScoreValue = serde_json::from_str("true").unwrap();
        assert_eq!(v, ScoreValue::Bool(true));
        let v: ScoreValue = serde_json::from_str("\"good\"").unwrap();
        assert_eq!(v, ScoreValue::Label("good".into()));
        assert!(serde_json::from_str::<ScoreValue>("null").is_err());
        assert!(serde_json::from_str::<ScoreValue>("[1]").is_err());
    }

    #[test]
    fn names_and_values_are_bounded() {
        assert!(score_name_problem("correct").is_none());
        assert!(score_name_problem("tool use: order").is_none());
        assert!(score_name_problem("").is_some());
        assert!(score_name_problem(" x").is_some());
        assert!(score_name_problem("a/b").is_some());
        assert!(score_name_problem(&"x".repeat(65)).is_some());
        assert!(ScoreValue::Number(f64::NAN).problem().is_some());
        assert!(ScoreValue::Number(2e12).problem().is_some());
        assert!(ScoreValue::Label(" ".into()).problem().is_some());
        assert_eq!(ScoreValue::Number(0.5).display(), "0.5");
        assert_eq!(ScoreValue::Number(3.0).display(), "3");
    }

    #[test]
    fn summaries_average_numbers_and_count_labels() {
        let at = Utc::now();
        let score = |name: &str, value: ScoreValue| Score {
            id: "s".into(),
            run_id: "r".into(),
            step_index: None,
            call_id: None,
            name: name.into(),
            value,
            comment: None,
            source: ScoreSource::Api,
            author: Actor::system(),
            scorer: None,
            label: None,
            judge_run_id: None,
            created_at: at,
        };
        let all = [
            score("ok", ScoreValue::Bool(true)),
            score("ok", ScoreValue::Bool(false)),
            score("ok", ScoreValue::Number(1.0)),
            score("tone", ScoreValue::Label("kind".into())),
            score("tone", ScoreValue::Label("curt".into())),
            score("tone", ScoreValue::Label("kind".into())),
        ];
        let s = ScoreSummary::of(&all);
        assert_eq!(s[0].name, "ok");
        assert_eq!(s[0].count, 3);
        assert!((s[0].mean.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!((s[0].yes, s[0].no), (1, 1));
        assert_eq!(s[1].labels, vec![("kind".to_owned(), 2), ("curt".to_owned(), 1)]);
        assert_eq!(s[1].mean, None);
    }
}

#[cfg(feature = "openapi")]
mod schema {
    use serde_json::json;
    use utoipa::openapi::{RefOr, Schema};
    use utoipa::{PartialSchema, ToSchema};

    use super::{ScoreValue, MAX_SCORE_LABEL_CHARS, MAX_SCORE_NUMBER};

    impl PartialSchema for ScoreValue {
        fn schema() -> RefOr<Schema> {
            RefOr::T(crate::model::openapi::raw(json!({
                "description": "A yes/no, a number, or a label",
                "oneOf": [
                    { "type": "boolean" },
                    { "type": "number", "minimum": -MAX_SCORE_NUMBER, "maximum": MAX_SCORE_NUMBER },
                    { "type": "string", "minLength": 1, "maxLength": MAX_SCORE_LABEL_CHARS, "pattern": "\\S" },
                ],
            })))
        }
    }

    impl ToSchema for ScoreValue {}
}
