//! How differences read on the compare page: a word-level diff as one side's
//! text with what only that side has marked (`<del>` on the left, `<ins>` on
//! the right), JSON changes as a list of pointers with both values, and the
//! badge of an aligned pair's change.

use leptos::prelude::*;
use runlens_engine::model::{Change, JsonChange, JsonOp, WordChange};
use serde_json::Value;

/// Which run of the pair a column shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn letter(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}

/// The parts of a word diff that make up `side`'s text, each with whether
/// only that side has it.
pub fn side_parts(words: &[WordChange], side: Side) -> Vec<(String, bool)> {
    words
        .iter()
        .filter_map(|w| match (w.change, side) {
            (Change::Equal | Change::Changed, _) => Some((w.text.clone(), false)),
            (Change::Deleted, Side::A) | (Change::Inserted, Side::B) => Some((w.text.clone(), true)),
            _ => None,
        })
        .collect()
}

/// `side`'s text with its own words marked; the plain `text` when there is no diff.
#[component]
pub fn DiffText(words: Vec<WordChange>, side: Side, text: Option<String>) -> impl IntoView {
    if words.is_empty() {
        return text.map(|t| view! { <pre class="text">{t}</pre> }.into_any()).unwrap_or_else(|| ().into_any());
    }
    let parts = side_parts(&words, side)
        .into_iter()
        .map(|(text, own)| match (own, side) {
            (false, _) => text.into_any(),
            (true, Side::A) => view! { <del class="diff-del">{text}</del> }.into_any(),
            (true, Side::B) => view! { <ins class="diff-ins">{text}</ins> }.into_any(),
        })
        .collect::<Vec<_>>();
    view! { <pre class="text" data-testid="diff-text">{parts}</pre> }.into_any()
}

/// A JSON value in one line (long values are cut by the server already).
pub fn json_text(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// The differences between two JSON values, one line per pointer.
#[component]
pub fn JsonChanges(changes: Vec<JsonChange>) -> impl IntoView {
    let items = changes
        .into_iter()
        .map(|c| {
            let path = if c.path.is_empty() { "(whole value)".to_owned() } else { c.path.clone() };
            let (label, class) = match c.op {
                JsonOp::Added => ("added", "diff-ins"),
                JsonOp::Removed => ("removed", "diff-del"),
                JsonOp::Changed => ("changed", "diff-changed"),
            };
            let a = c.a.as_ref().map(|v| view! { <del class="diff-del mono">{json_text(v)}</del> });
            let b = c.b.as_ref().map(|v| view! { <ins class="diff-ins mono">{json_text(v)}</ins> });
            let arrow = (c.a.is_some() && c.b.is_some()).then_some(" → ");
            view! {
                <li data-testid="json-change" data-path=c.path.clone()>
                    <code>{path}</code> " " <span class=class>{label}</span> ": " {a} {arrow} {b}
                </li>
            }
        })
        .collect::<Vec<_>>();
    view! { <ul class="json-diff">{items}</ul> }
}

/// The label of a pair's change, as a word (never colour alone).
pub fn change_label(change: Change) -> &'static str {
    match change {
        Change::Equal => "same",
        Change::Changed => "changed",
        Change::Inserted => "only in B",
        Change::Deleted => "only in A",
    }
}

/// The CSS class and `data-change` value of a change.
pub fn change_key(change: Change) -> &'static str {
    match change {
        Change::Equal => "equal",
        Change::Changed => "changed",
        Change::Inserted => "inserted",
        Change::Deleted => "deleted",
    }
}

#[component]
pub fn ChangeBadge(change: Change) -> impl IntoView {
    let class = format!("change change-{}", change_key(change));
    view! { <span class=class>{change_label(change)}</span> }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(change: Change, text: &str) -> WordChange {
        WordChange { change, text: text.into() }
    }

    #[test]
    fn each_side_reads_its_own_text_with_its_own_words_marked() {
        let words =
            [w(Change::Equal, "the "), w(Change::Deleted, "cat"), w(Change::Inserted, "dog"), w(Change::Equal, " ran")];
        let a: String = side_parts(&words, Side::A).iter().map(|(t, _)| t.as_str()).collect();
        let b: String = side_parts(&words, Side::B).iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!((a.as_str(), b.as_str()), ("the cat ran", "the dog ran"));
        assert_eq!(side_parts(&words, Side::A)[1], ("cat".to_owned(), true));
        assert_eq!(side_parts(&words, Side::B)[1], ("dog".to_owned(), true));
    }
}
