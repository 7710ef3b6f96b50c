//! Word-level text diff: texts split into words (letters, digits and `_`),
//! runs of white space, and single other characters, diffed as sequences
//! (see [`super::diff`]), and returned as runs of equal, deleted and
//! inserted text.
//!
//! White space the same in both but standing between two changes is shown
//! as changed (deleted and inserted), so a rewritten phrase reads as one
//! deletion and one insertion rather than word by word. Concatenating the
//! `equal` and `deleted` runs always gives `a`, `equal` and `inserted` `b`.

use super::diff::{diff, Op};
use crate::model::{Change, WordChange};

/// The word-level diff of `a` and `b` (empty when both are empty).
pub fn word_diff(a: &str, b: &str) -> Vec<WordChange> {
    let (ta, tb) = (tokens(a), tokens(b));
    // One entry per token: which change and which text.
    let mut parts: Vec<(Change, &str)> = Vec::with_capacity(ta.len().max(tb.len()));
    for e in diff(&ta, &tb) {
        match e.op {
            Op::Equal => parts.extend(ta[e.a..e.a + e.len].iter().map(|t| (Change::Equal, *t))),
            Op::Delete => parts.extend(ta[e.a..e.a + e.len].iter().map(|t| (Change::Deleted, *t))),
            Op::Insert => parts.extend(tb[e.b..e.b + e.len].iter().map(|t| (Change::Inserted, *t))),
        }
    }
    absorb_spaces(&mut parts);
    group(&parts)
}

/// The tokens of `text`: words, white-space runs, other characters.
fn tokens(text: &str) -> Vec<&str> {
    #[derive(PartialEq)]
    enum Class {
        Word,
        Space,
        Other,
    }
    let class = |c: char| match c {
        c if c.is_alphanumeric() || c == '_' => Class::Word,
        c if c.is_whitespace() => Class::Space,
        _ => Class::Other,
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut last: Option<Class> = None;
    for (i, c) in text.char_indices() {
        let now = class(c);
        let joins = matches!((&last, &now), (Some(Class::Word), Class::Word) | (Some(Class::Space), Class::Space));
        if i > start && !joins {
            out.push(&text[start..i]);
            start = i;
        }
        last = Some(now);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Equal white space between two non-equal parts becomes deleted and inserted.
fn absorb_spaces(parts: &mut Vec<(Change, &str)>) {
    let changed = |c: Change| c != Change::Equal;
    let mut i = 1;
    while i + 1 < parts.len() {
        let (before, (now, text), after) = (parts[i - 1].0, parts[i], parts[i + 1].0);
        if now == Change::Equal && text.trim().is_empty() && changed(before) && changed(after) {
            parts[i] = (Change::Deleted, text);
            parts.insert(i + 1, (Change::Inserted, text));
            i += 2;
        } else {
            i += 1;
        }
    }
}

/// Runs of parts: each stretch of changes as its deleted text, then its
/// inserted text.
fn group(parts: &[(Change, &str)]) -> Vec<WordChange> {
    let mut out: Vec<WordChange> = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        if parts[i].0 == Change::Equal {
            let text: String = parts[i..].iter().take_while(|p| p.0 == Change::Equal).map(|p| p.1).collect();
            i += parts[i..].iter().take_while(|p| p.0 == Change::Equal).count();
            out.push(WordChange { change: Change::Equal, text });
            continue;
        }
        let end = i + parts[i..].iter().take_while(|p| p.0 != Change::Equal).count();
        for change in [Change::Deleted, Change::Inserted] {
            let text: String = parts[i..end].iter().filter(|p| p.0 == change).map(|p| p.1).collect();
            if !text.is_empty() {
                out.push(WordChange { change, text });
            }
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `a` and `b` as the runs spell them.
    fn rebuild(changes: &[WordChange]) -> (String, String) {
        let side = |skip: Change| changes.iter().filter(|c| c.change != skip).map(|c| c.text.as_str()).collect();
        (side(Change::Inserted), side(Change::Deleted))
    }

    fn runs(changes: &[WordChange]) -> Vec<(Change, &str)> {
        changes.iter().map(|c| (c.change, c.text.as_str())).collect()
    }

    #[test]
    fn a_changed_word_is_one_deletion_and_one_insertion() {
        let changes = word_diff("What is 2 + 3?", "What is 4 + 3?");
        assert_eq!(
            runs(&changes),
            [(Change::Equal, "What is "), (Change::Deleted, "2"), (Change::Inserted, "4"), (Change::Equal, " + 3?")]
        );
        let changes = word_diff("the quick brown fox", "the slow red fox");
        assert_eq!(
            runs(&changes),
            [
                (Change::Equal, "the "),
                (Change::Deleted, "quick brown"),
                (Change::Inserted, "slow red"),
                (Change::Equal, " fox")
            ]
        );
        assert_eq!(word_diff("same", "same"), [WordChange { change: Change::Equal, text: "same".into() }]);
        assert!(word_diff("", "").is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_runs_rebuild_both_texts(a in "[ab c.\\n é]{0,40}", b in "[ab c.\\n é]{0,40}") {
            let changes = word_diff(&a, &b);
            let (ra, rb) = rebuild(&changes);
            prop_assert_eq!(ra, a.clone());
            prop_assert_eq!(rb, b.clone());
            prop_assert!(changes.iter().all(|c| !c.text.is_empty()));
            if a == b && !a.is_empty() {
                prop_assert_eq!(changes.len(), 1);
            }
        }
    }
}
