//! Two runs compared (issue 18): the pure part of `GET /api/compare`, with
//! no store — [`crate::Comparisons::compare`] reads the runs and calls
//! [`compare`].
//!
//! - [`diff`]: a Myers diff over slices, bounded by a work budget rather
//!   than a deadline: two 10,000-step runs with nothing in common cost at
//!   most the budget (a few tens of milliseconds per list), what is left
//!   then aligned by position, and every answer is the same for the same
//!   runs (no clock involved);
//! - [`align`]: rows from three passes — exact keys, then looser keys in
//!   each gap, then position — so one inserted step is one `inserted` row
//!   and the steps after it line up as `equal` again;
//! - `steps` and `messages`: the two lists of aligned rows, every pair
//!   classified (cheap equality checks), only the rows of the page built
//!   in full (calls aligned, word and JSON diffs);
//! - [`words`]: word-level text diff; [`json`]: JSON diff by pointer;
//! - `config`: the configuration fields, the sides and the totals.
//!
//! Long texts and values are cut at [`COMPARE_TEXT_CHARS`] characters for
//! the answer (a cut one ends with `…`); equality is always decided on the
//! whole values.

use std::hash::{Hash, Hasher};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cost::Pricing;
use crate::model::limits::MAX_ID_CHARS;
use crate::model::{
    Change, ChangeCounts, CompareQuery, Comparison, Divergence, ForkRelation, Message, Run, Step, COMPARE_TEXT_CHARS,
    DEFAULT_COMPARE_ROWS, MAX_COMPARE_ROWS,
};

pub mod align;
mod config;
pub mod diff;
pub mod json;
mod messages;
mod steps;
pub mod words;

/// One run and what was read of it: all its steps (with their tool calls)
/// and its whole transcript, in order.
pub struct RunData<'a> {
    pub run: &'a Run,
    pub steps: &'a [Step],
    pub messages: &'a [Message],
}

/// Which rows of each list to send (checked from a [`CompareQuery`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub steps_from: Option<u32>,
    pub steps_limit: u32,
    pub messages_from: Option<u32>,
    pub messages_limit: u32,
}

impl Window {
    /// The query's window; `Err` naming the field when a run id is empty
    /// or too long, or a limit is not from 1 to [`MAX_COMPARE_ROWS`].
    pub fn from_query(q: &CompareQuery) -> Result<Window, String> {
        for (field, id) in [("a", &q.a), ("b", &q.b)] {
            if id.is_empty() {
                return Err(format!("{field} must name a run"));
            }
            crate::model::limits::check_chars(field, id, MAX_ID_CHARS)?;
        }
        let limit = |field: &str, limit: Option<u32>| match limit {
            None => Ok(DEFAULT_COMPARE_ROWS),
            Some(n) if (1..=MAX_COMPARE_ROWS).contains(&n) => Ok(n),
            Some(n) => Err(format!("{field} must be a number from 1 to {MAX_COMPARE_ROWS}, not {n}")),
        };
        Ok(Window {
            steps_from: q.steps_from,
            steps_limit: limit("steps_limit", q.steps_limit)?,
            messages_from: q.messages_from,
            messages_limit: limit("messages_limit", q.messages_limit)?,
        })
    }
}

/// Runs `a` and `b` compared (see the module docs and [`Comparison`]).
/// `fork` says how much history they share; `now` ends the duration of a
/// run still going.
pub fn compare(
    a: &RunData<'_>,
    b: &RunData<'_>,
    fork: Option<ForkRelation>,
    pricing: &Pricing,
    window: &Window,
    now: DateTime<Utc>,
) -> Comparison {
    let (shared_steps, shared_messages) = fork.as_ref().map_or((0, 0), |f| (f.shared_steps, f.shared_messages));
    let steps = steps::StepList::new(a, b, shared_steps, pricing);
    let messages = messages::MessageList::new(a, b, shared_messages);
    let config = config::fields(a.run, b.run);
    let (side_a, side_b) = (config::side(a, pricing, now), config::side(b, pricing, now));
    let outcome_equal = a.run.status == b.run.status && a.run.result == b.run.result;
    let equal =
        config.iter().all(|f| f.equal) && steps.first_diff.is_none() && messages.first_diff.is_none() && outcome_equal;
    let divergence = (!equal).then(|| {
        let step = steps.first_diff.map(|row| steps.describe(row));
        let message = messages.first_diff.map(|row| messages.describe(row));
        let differing: Vec<&str> = config.iter().filter(|f| !f.equal).map(|f| f.field.as_str()).collect();
        // The transcript is in order: when its first difference is a human
        // message (an edit), that comes before anything the model did with it;
        // otherwise the first differing step says most (which call, which
        // arguments). The configuration and the outcome come last: the page
        // shows them side by side anyway.
        let summary = if let Some(m) = message.as_ref().filter(|m| m.human) {
            m.summary.clone()
        } else if let Some(step) = &step {
            step.summary.clone()
        } else if let Some(message) = &message {
            message.summary.clone()
        } else if !differing.is_empty() {
            format!("configuration: {}", differing.join(", "))
        } else if a.run.status != b.run.status {
            format!("status: {} in a, {} in b", a.run.status, b.run.status)
        } else {
            "result differs".to_owned()
        };
        Divergence {
            step_row: steps.first_diff.map(|r| r as u32),
            a_step: step.as_ref().and_then(|s| s.a),
            b_step: step.as_ref().and_then(|s| s.b),
            message_row: messages.first_diff.map(|r| r as u32),
            a_seq: message.as_ref().and_then(|m| m.a),
            b_seq: message.as_ref().and_then(|m| m.b),
            summary,
        }
    });
    Comparison {
        totals: config::totals(&side_a, &side_b),
        a: side_a,
        b: side_b,
        equal,
        fork,
        config,
        divergence,
        steps: steps.page(window.steps_from, window.steps_limit),
        messages: messages.page(window.messages_from, window.messages_limit),
    }
}

/// Where a difference first shows, for [`Divergence`].
struct FirstDiff<T> {
    a: Option<T>,
    b: Option<T>,
    summary: String,
    /// A human message (messages only).
    human: bool,
}

/// The page of rows `[from, end)` of a list of `total` rows and the
/// `from` of the next: from `from`, or without it from two rows before the
/// first difference; never inside the `folded` prefix.
fn page_bounds(
    total: usize,
    folded: usize,
    first_diff: Option<usize>,
    from: Option<u32>,
    limit: u32,
) -> (usize, usize) {
    let start = match from {
        Some(from) => from as usize,
        None => first_diff.map_or(folded, |row| row.saturating_sub(2)),
    };
    let start = start.max(folded).min(total);
    (start, start.saturating_add(limit as usize).min(total))
}

/// How many rows of each kind.
fn counts(changes: &[Change]) -> ChangeCounts {
    let mut c = ChangeCounts::default();
    for change in changes {
        match change {
            Change::Equal => c.equal += 1,
            Change::Changed => c.changed += 1,
            Change::Inserted => c.inserted += 1,
            Change::Deleted => c.deleted += 1,
        }
    }
    c
}

/// `text` cut at [`COMPARE_TEXT_CHARS`] characters, ending with `…` when cut.
pub fn cut_text(text: &str) -> String {
    match text.char_indices().nth(COMPARE_TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `value` as is, or cut: a string at [`COMPARE_TEXT_CHARS`] characters,
/// an array or object whose JSON text is longer as that text cut (a
/// string ending with `…`). Only the start of a long value's text is
/// written out to measure it.
pub fn cut_value(value: &Value) -> Value {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        Value::String(s) => Value::String(cut_text(s)),
        _ => {
            // At most 4 bytes a character: a text within this many bytes
            // may fit, a longer one cannot.
            let mut head = Head { bytes: Vec::new(), room: 4 * COMPARE_TEXT_CHARS + 4 };
            let whole = serde_json::to_writer(&mut head, value).is_ok();
            let text = String::from_utf8_lossy(&head.bytes);
            if whole && text.chars().nth(COMPARE_TEXT_CHARS).is_none() {
                value.clone()
            } else {
                Value::String(cut_text(&text))
            }
        }
    }
}

/// A writer keeping the first `room` bytes, then refusing more.
struct Head {
    bytes: Vec<u8>,
    room: usize,
}

impl std::io::Write for Head {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let take = buf.len().min(self.room - self.bytes.len());
        self.bytes.extend_from_slice(&buf[..take]);
        if take < buf.len() {
            return Err(std::io::Error::other("long enough"));
        }
        Ok(take)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A key hasher with fixed keys: the same input hashes the same in every process.
fn hasher() -> std::collections::hash_map::DefaultHasher {
    std::collections::hash_map::DefaultHasher::new()
}

/// Hashes a JSON value so that equal values (`==`) hash equal: object keys
/// in sorted order, numbers by their exact kind.
fn hash_value(value: &Value, h: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => {
            2u8.hash(h);
            if let Some(u) = n.as_u64() {
                (0u8, u).hash(h);
            } else if let Some(i) = n.as_i64() {
                (1u8, i).hash(h);
            } else {
                (2u8, n.as_f64().map(f64::to_bits)).hash(h);
            }
        }
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            items.iter().for_each(|v| hash_value(v, h));
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(h);
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                hash_value(&map[k], h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_values_are_cut_and_say_so() {
        let long = "é".repeat(COMPARE_TEXT_CHARS + 5);
        let cut = cut_text(&long);
        assert_eq!(cut.chars().count(), COMPARE_TEXT_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(cut_text("short"), "short");
        let big = json!({"data": "x".repeat(COMPARE_TEXT_CHARS)});
        let Value::String(text) = cut_value(&big) else { panic!("a cut value is its text") };
        assert!(text.starts_with("{\"data\":\"xxx") && text.ends_with('…'));
        assert_eq!(cut_value(&json!({"a": [1, 2]})), json!({"a": [1, 2]}));
    }

    #[test]
    fn windows_are_checked_and_pages_avoid_the_fold() {
        let q = |limit| CompareQuery { a: "x".into(), b: "y".into(), steps_limit: limit, ..CompareQuery::default() };
        assert_eq!(Window::from_query(&q(None)).unwrap().steps_limit, DEFAULT_COMPARE_ROWS);
        assert!(Window::from_query(&q(Some(0))).unwrap_err().starts_with("steps_limit must be"));
        assert!(Window::from_query(&q(Some(MAX_COMPARE_ROWS + 1))).is_err());
        let no_b = CompareQuery { a: "x".into(), ..CompareQuery::default() };
        assert_eq!(Window::from_query(&no_b).unwrap_err(), "b must name a run");
        // From two rows before the first difference, never inside the fold.
        assert_eq!(page_bounds(100, 0, Some(40), None, 10), (38, 48));
        assert_eq!(page_bounds(100, 39, Some(40), None, 10), (39, 49));
        assert_eq!(page_bounds(100, 5, None, None, 10), (5, 15));
        assert_eq!(page_bounds(100, 5, None, Some(2), 10), (5, 15));
        assert_eq!(page_bounds(100, 0, None, Some(95), 10), (95, 100));
        assert_eq!(page_bounds(100, 0, None, Some(500), 10), (100, 100));
    }

    #[test]
    fn equal_values_hash_equal() {
        let key = |v: &Value| {
            let mut h = hasher();
            hash_value(v, &mut h);
            h.finish()
        };
        assert_eq!(key(&json!({"a": 1, "b": [true]})), key(&json!({"b": [true], "a": 1})));
        assert_ne!(key(&json!({"a": 1})), key(&json!({"a": 1.0})));
        assert_ne!(key(&json!(["a", "b"])), key(&json!(["ab"])));
    }
}
