//! The aligned transcripts of two runs (see the parent module).
//!
//! Each message is compared as what the model saw, rendered as text: a
//! human message's text; an agent message's text (or its result) with one
//! `→ tool(arguments)` line per invocation; a tool result as its JSON text
//! (`rejected: ` before an error). Its exact key is its kind and that text,
//! its loose key its kind (and, for a tool result, the tool's name); an
//! aligned pair is `changed` when its kind or text differ.

use std::hash::{Hash, Hasher};

use super::align::{align, Keys, Row};
use super::{counts, cut_text, hasher, page_bounds, FirstDiff, RunData};
use crate::model::{Change, Message, MessageBody, MessagePair, MessageRows, MessageSide, ResultType};

/// Both transcripts aligned and classified.
pub(super) struct MessageList<'a> {
    a: &'a [Message],
    b: &'a [Message],
    /// Each message's rendered text, per side.
    ta: Vec<String>,
    tb: Vec<String>,
    rows: Vec<Row>,
    changes: Vec<Change>,
    folded: usize,
    pub first_diff: Option<usize>,
}

impl<'a> MessageList<'a> {
    /// Aligns the transcripts; messages with `seq < shared` are the fork's
    /// shared history (folded).
    pub fn new(a: &RunData<'a>, b: &RunData<'a>, shared: u64) -> Self {
        let below = |messages: &[Message]| messages.iter().take_while(|m| m.seq < shared).count();
        let folded = below(a.messages).min(below(b.messages));
        let ta: Vec<String> = a.messages.iter().map(|m| text(&m.body)).collect();
        let tb: Vec<String> = b.messages.iter().map(|m| text(&m.body)).collect();
        let (ka, kb) = (keys(a.messages, &ta), keys(b.messages, &tb));
        let rows = align(Keys { exact: &ka.0, loose: &ka.1 }, Keys { exact: &kb.0, loose: &kb.1 }, folded);
        let changes: Vec<Change> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| match (r.a, r.b) {
                _ if i < folded => Change::Equal,
                (Some(x), Some(y)) if a.messages[x].body.kind() == b.messages[y].body.kind() && ta[x] == tb[y] => {
                    Change::Equal
                }
                (Some(_), Some(_)) => Change::Changed,
                (Some(_), None) => Change::Deleted,
                _ => Change::Inserted,
            })
            .collect();
        let first_diff = changes.iter().position(|c| *c != Change::Equal);
        MessageList { a: a.messages, b: b.messages, ta, tb, rows, changes, folded, first_diff }
    }

    /// One page of rows (see [`MessageRows`]).
    pub fn page(&self, from: Option<u32>, limit: u32) -> MessageRows {
        let total = self.rows.len();
        let (start, end) = page_bounds(total, self.folded, self.first_diff, from, limit);
        MessageRows {
            total: total as u32,
            folded: self.folded as u32,
            counts: counts(&self.changes),
            from: start as u32,
            rows: (start..end).map(|i| self.pair(i)).collect(),
            next_from: (end < total).then_some(end as u32),
        }
    }

    fn pair(&self, i: usize) -> MessagePair {
        let row = self.rows[i];
        let a = row.a.map(|j| side(&self.a[j], &self.ta[j]));
        let b = row.b.map(|j| side(&self.b[j], &self.tb[j]));
        let words = match (&a, &b) {
            (Some(x), Some(y)) if x.text != y.text => super::words::word_diff(&x.text, &y.text),
            _ => Vec::new(),
        };
        MessagePair { row: i as u32, change: self.changes[i], a, b, words }
    }

    /// What differs first at row `i`, in words.
    pub fn describe(&self, i: usize) -> FirstDiff<u64> {
        let row = self.rows[i];
        let (x, y) = (row.a.map(|j| &self.a[j]), row.b.map(|j| &self.b[j]));
        let (a, b) = (x.map(|m| m.seq), y.map(|m| m.seq));
        let label = match (a, b) {
            (Some(p), Some(q)) if p != q => format!("message {p} (message {q} in b)"),
            (Some(p), _) | (None, Some(p)) => format!("message {p}"),
            (None, None) => String::new(),
        };
        let kind = |m: Option<&Message>| m.map_or("", |m| m.body.kind());
        let summary = match self.changes[i] {
            Change::Inserted => format!("{label}: only in b ({})", kind(y)),
            Change::Deleted => format!("{label}: only in a ({})", kind(x)),
            _ if kind(x) != kind(y) => format!("{label}: {} in a, {} in b", kind(x), kind(y)),
            _ => format!("{label}: {} text differs", kind(x)),
        };
        let human = [x, y].into_iter().flatten().any(|m| matches!(m.body, MessageBody::Human { .. }));
        FirstDiff { a, b, summary, human }
    }
}

fn side(m: &Message, text: &str) -> MessageSide {
    MessageSide {
        id: m.id.clone(),
        seq: m.seq,
        kind: m.body.kind().to_owned(),
        step_index: m.step_index,
        text: cut_text(text),
    }
}

/// What the model saw of a message, as text (see the module docs).
fn text(body: &MessageBody) -> String {
    match body {
        MessageBody::Human { message } => message.clone(),
        MessageBody::Agent { message, result, invocations } => {
            let mut out = match (message, result) {
                (Some(m), _) => m.clone(),
                (None, Some(r)) if !r.is_null() => r.to_string(),
                _ => String::new(),
            };
            for call in invocations {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("→ {}({})", call.tool_name, call.input));
            }
            out
        }
        MessageBody::InvocationResult { result_type, result, .. } => match result_type {
            ResultType::Resolution => result.to_string(),
            ResultType::Rejection => format!("rejected: {result}"),
        },
    }
}

fn keys(messages: &[Message], texts: &[String]) -> (Vec<u64>, Vec<u64>) {
    messages
        .iter()
        .zip(texts)
        .map(|(m, text)| {
            let (mut exact, mut loose) = (hasher(), hasher());
            (m.body.kind(), text).hash(&mut exact);
            m.body.kind().hash(&mut loose);
            if let MessageBody::InvocationResult { tool_name, .. } = &m.body {
                tool_name.hash(&mut loose);
            }
            (exact.finish(), loose.finish())
        })
        .unzip()
}
