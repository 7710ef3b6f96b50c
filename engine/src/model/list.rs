//! The runs list's query ([`RunFilter`], with its bounds) and its pages.

use serde::{Deserialize, Serialize};

use super::{limits, OutcomeFilter, Run, RunStatus};

/// Filter for listing runs (`GET /api/runs`). An unknown parameter is refused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub agent_id: Option<String>,
    /// `key:value`
    pub tag: Option<String>,
    /// Words to search for in the runs' text (see [`RunFilter::search_words`]):
    /// name, prompts and follow-ups, answers, tool calls' arguments and
    /// results, errors, summaries, metadata. Every word must appear, whole
    /// (any case).
    pub q: Option<String>,
    /// `key:value`: runs whose metadata has `key` equal to `value` (a string,
    /// or the JSON text of a number or boolean).
    pub metadata: Option<String>,
    /// Child runs are listed too (by default only root runs are).
    pub all: Option<bool>,
    /// Only runs of this outcome (see [`OutcomeFilter`]).
    pub outcome: Option<OutcomeFilter>,
    /// Only the runs of this session.
    pub session_id: Option<String>,
    /// Only the runs that served this end user.
    pub user: Option<String>,
    /// Only runs with a score (see [`ScoreTest`]): `NAME` (any value),
    /// `NAME=yes`, `NAME=no`, `NAME=LABEL` (a label value or a judge's
    /// label), or `NAME<N`, `NAME<=N`, `NAME>N`, `NAME>=N` (numbers; yes = 1).
    pub score: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    /// Runs to skip before the page (beside `cursor`, which it cannot be combined with).
    pub offset: Option<u32>,
    /// The project to list (set by the server from the caller, never from the query).
    #[serde(skip)]
    pub project: Option<String>,
}

impl RunFilter {
    /// `limit` is 1 to [`limits::MAX_LIST_LIMIT`]; the texts are bounded too.
    pub fn check_bounds(&self) -> Result<(), String> {
        if let Some(limit) = self.limit {
            if !(1..=limits::MAX_LIST_LIMIT).contains(&limit) {
                return Err(format!("limit must be a number from 1 to {}, not {limit}", limits::MAX_LIST_LIMIT));
            }
        }
        if let Some(offset) = self.offset {
            if offset > limits::MAX_LIST_OFFSET {
                return Err(format!("offset must be at most {}, not {offset}", limits::MAX_LIST_OFFSET));
            }
            if self.cursor.is_some() {
                return Err("offset and cursor cannot be combined".into());
            }
        }
        if let Some(meta) = &self.metadata {
            let key_ok = |k: &str| {
                (1..=64).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            };
            if !meta.split_once(':').is_some_and(|(k, _)| key_ok(k)) {
                return Err("metadata must be `key:value`, the key 1-64 letters, digits, `_`, `-` or `.`".into());
            }
        }
        for (field, text) in [
            ("agent_id", &self.agent_id),
            ("tag", &self.tag),
            ("q", &self.q),
            ("cursor", &self.cursor),
            ("metadata", &self.metadata),
        ] {
            if let Some(text) = text {
                limits::check_chars(field, text, limits::MAX_QUERY_TEXT_CHARS)?;
            }
        }
        self.search_words()?;
        if let Some(score) = &self.score {
            limits::check_chars("score", score, limits::MAX_QUERY_TEXT_CHARS)?;
            ScoreTest::parse(score)?;
        }
        for (field, id) in [("session_id", &self.session_id), ("user", &self.user)] {
            if let Some(id) = id {
                limits::check_chars(field, id, limits::MAX_SESSION_ID_CHARS)?;
            }
        }
        Ok(())
    }
}

/// One page of runs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    pub runs: Vec<Run>,
    pub next_cursor: Option<String>,
    /// With `q`: where each run of the page matched (its newest match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<SearchMatch>,
}

/// The most words a search takes.
pub const MAX_SEARCH_WORDS: usize = 16;

impl RunFilter {
    /// The words `q` searches for: its runs of letters and digits,
    /// lowercased, the first [`MAX_SEARCH_WORDS`]; `None` without `q`. A `q`
    /// with no word finds nothing (an empty list); see [`Self::search_problem`]
    /// for what a form says about it.
    pub fn search_words(&self) -> Result<Option<Vec<String>>, String> {
        let Some(q) = self.q.as_deref().filter(|q| !q.trim().is_empty()) else { return Ok(None) };
        Ok(Some(words_of(q).take(MAX_SEARCH_WORDS).collect()))
    }

    /// What is wrong with `q` as a search, for the search field: no word,
    /// or more than [`MAX_SEARCH_WORDS`] (the API searches for none, or the
    /// first ones).
    pub fn search_problem(&self) -> Option<String> {
        let q = self.q.as_deref().filter(|q| !q.trim().is_empty())?;
        match words_of(q).count() {
            0 => Some("q has no word to search for (letters or digits)".into()),
            n if n > MAX_SEARCH_WORDS => Some(format!("q has {n} words; a search takes at most {MAX_SEARCH_WORDS}")),
            _ => None,
        }
    }
}

/// The runs of letters and digits of `q`, lowercased.
fn words_of(q: &str) -> impl Iterator<Item = String> + '_ {
    q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Where in a run a search matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MatchedIn {
    /// The run itself: its name, prompt, summary, failure, result or metadata.
    Run,
    /// A step's answer text, or the error that failed it.
    Answer,
    /// A tool call: its tool, arguments, result or error.
    ToolCall,
    /// A follow-up message from a person.
    Message,
}

/// Where a run matched a search, and the text around the words found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchMatch {
    pub run_id: String,
    pub matched_in: MatchedIn,
    /// The step of an answer or tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u32>,
    /// The text around the words, cut to a few words either side: the
    /// parts with `hit` are the words found.
    pub snippet: Vec<SnippetPart>,
}

/// A part of a [`SearchMatch`]'s snippet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnippetPart {
    pub text: String,
    /// A word searched for.
    #[serde(default)]
    pub hit: bool,
}

impl SnippetPart {
    /// Parts of `marked`, where the words found are between `\u{2}` and
    /// `\u{3}` (how the store asks the database to mark them).
    pub fn parse(marked: &str) -> Vec<SnippetPart> {
        let mut parts: Vec<SnippetPart> = Vec::new();
        let mut hit = false;
        let mut text = String::new();
        let mut flush = |text: &mut String, hit: bool| {
            if !text.is_empty() {
                parts.push(SnippetPart { text: std::mem::take(text), hit });
            }
        };
        for c in marked.chars() {
            match c {
                '\u{2}' | '\u{3}' => {
                    flush(&mut text, hit);
                    hit = c == '\u{2}';
                }
                c if c.is_control() && c != '\n' && c != '\t' => text.push(' '),
                c => text.push(c),
            }
        }
        flush(&mut text, hit);
        parts
    }
}

/// What the runs list's `score` filter asks of a run's scores: a score of
/// `name` that passes `test`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreTest {
    pub name: String,
    pub test: ScoreCheck,
}

/// How a score's value is tested (see [`RunFilter::score`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ScoreCheck {
    Any,
    Bool(bool),
    /// A label value, or a judge's label.
    Label(String),
    /// `<`, `<=`, `>`, `>=` and a finite number.
    Compare(&'static str, f64),
}

impl ScoreTest {
    /// Reads `NAME`, `NAME=VALUE` or `NAME<N` (and `<=`, `>`, `>=`); the
    /// error says what a filter looks like.
    pub fn parse(text: &str) -> Result<ScoreTest, String> {
        const SHAPE: &str = "score must be NAME, NAME=VALUE (yes, no or a label), or NAME<N, NAME<=N, NAME>N, NAME>=N";
        let at = text.find(['=', '<', '>']).unwrap_or(text.len());
        let (name, rest) = text.split_at(at);
        let name = name.trim();
        if super::score_name_problem(name).is_some() {
            return Err(format!("{SHAPE}; NAME is a score's name (letters, digits, `_.:-`, inner spaces)"));
        }
        let number = |n: &str| n.trim().parse::<f64>().ok().filter(|n| n.is_finite()).ok_or(SHAPE.to_owned());
        let test = if rest.is_empty() {
            ScoreCheck::Any
        } else if let Some(n) = rest.strip_prefix("<=") {
            ScoreCheck::Compare("<=", number(n)?)
        } else if let Some(n) = rest.strip_prefix(">=") {
            ScoreCheck::Compare(">=", number(n)?)
        } else if let Some(n) = rest.strip_prefix('<') {
            ScoreCheck::Compare("<", number(n)?)
        } else if let Some(n) = rest.strip_prefix('>') {
            ScoreCheck::Compare(">", number(n)?)
        } else {
            match rest[1..].trim() {
                "" => return Err(SHAPE.into()),
                "yes" | "true" => ScoreCheck::Bool(true),
                "no" | "false" => ScoreCheck::Bool(false),
                value => match value.parse::<f64>() {
                    Ok(n) if n.is_finite() => ScoreCheck::Compare("=", n),
                    _ => ScoreCheck::Label(value.to_owned()),
                },
            }
        };
        Ok(ScoreTest { name: name.to_owned(), test })
    }
}

#[cfg(test)]
mod score_filter_tests {
    use super::*;

    #[test]
    fn score_filters_read_as_written() {
        let t = |s: &str| ScoreTest::parse(s).map(|t| (t.name, t.test));
        assert_eq!(t("correct"), Ok(("correct".into(), ScoreCheck::Any)));
        assert_eq!(t("correct=yes"), Ok(("correct".into(), ScoreCheck::Bool(true))));
        assert_eq!(t("tone = kind"), Ok(("tone".into(), ScoreCheck::Label("kind".into()))));
        assert_eq!(t("helpful<0.5"), Ok(("helpful".into(), ScoreCheck::Compare("<", 0.5))));
        assert_eq!(t("helpful>=1"), Ok(("helpful".into(), ScoreCheck::Compare(">=", 1.0))));
        assert_eq!(t("n=3"), Ok(("n".into(), ScoreCheck::Compare("=", 3.0))));
        for bad in ["", "=yes", "a<", "a<x", "a=", "a/b", "a>NaN", "a<inf"] {
            assert!(t(bad).is_err(), "{bad}");
        }
    }
}
