//! The built-in model's judge mode (`model_settings.judge = true`): it reads
//! a judge's prompt (see [`crate::model::judge`]) and answers a score, a
//! label and its reasoning, deterministically, so judges can be tried and
//! tested without a provider:
//! - with an expected answer, the score is the share of its distinct words
//!   found in the answer;
//! - else, the share of the rubric's quoted terms (`"…"`, `“…”` or `` `…` ``)
//!   the answer contains;
//! - else 1 for any answer.
//!
//! No answer scores 0. The label is the best (first) one from a score of
//! 0.5, else the worst (last).

use std::collections::BTreeSet;

use serde_json::json;

use super::builtin_plan::Turn;
use super::ModelRequest;
use crate::model::judge::{JudgePrompt, DEFAULT_LABELS};
use crate::model::MessageBody;

/// Words quoted in a reason, at most.
const NAMED: usize = 8;

/// The judge's turn for `req`'s latest message.
pub(super) fn judge_turn(req: &ModelRequest) -> Turn {
    let last = req.messages.iter().rev().find_map(|m| match &m.body {
        MessageBody::Human { message } => Some(message.as_str()),
        _ => None,
    });
    let Some(prompt) = last.and_then(JudgePrompt::parse) else {
        return Turn {
            text: Some("There is nothing to judge: the latest message is not a judge's prompt.".into()),
            ..Turn::default()
        };
    };
    let (score, reasoning) = judge(&prompt);
    let labels: Vec<&str> = if prompt.labels.len() >= 2 {
        prompt.labels.iter().map(String::as_str).collect()
    } else {
        DEFAULT_LABELS.to_vec()
    };
    let label = if score >= 0.5 { labels[0] } else { labels[labels.len() - 1] };
    let answer = json!({"score": score, "label": label, "reasoning": reasoning});
    Turn { text: Some(answer.to_string()), ..Turn::default() }
}

/// The score (rounded to 4 places) and the reasoning for `p`.
fn judge(p: &JudgePrompt) -> (f64, String) {
    let Some(answer) = p.answer.as_deref().filter(|a| !a.trim().is_empty()) else {
        return (0.0, "There is no answer to judge.".into());
    };
    let said: BTreeSet<String> = words(answer).collect();
    if let Some(expected) = p.expected.as_deref().filter(|e| !words(e).collect::<Vec<_>>().is_empty()) {
        let want: BTreeSet<String> = words(expected).collect();
        let missing: Vec<&String> = want.iter().filter(|w| !said.contains(*w)).collect();
        let score = share(want.len() - missing.len(), want.len());
        let reason = format!(
            "The answer has {} of the {} words of the expected answer{}.",
            want.len() - missing.len(),
            want.len(),
            lacking(&missing)
        );
        return (score, reason);
    }
    let terms = quoted_terms(&p.rubric);
    if terms.is_empty() {
        return (
            1.0,
            "There is an answer, and neither an expected answer nor quoted terms in the rubric to check it against."
                .into(),
        );
    }
    let lower = answer.to_lowercase();
    let missing: Vec<&String> = terms.iter().filter(|t| !lower.contains(&t.to_lowercase())).collect();
    let reason = format!(
        "The answer has {} of the {} terms the rubric quotes{}.",
        terms.len() - missing.len(),
        terms.len(),
        lacking(&missing)
    );
    (share(terms.len() - missing.len(), terms.len()), reason)
}

fn share(found: usize, of: usize) -> f64 {
    ((found as f64 / of as f64) * 10_000.0).round() / 10_000.0
}

/// `; it lacks “a”, “b”` for what is missing, or nothing.
fn lacking(missing: &[&String]) -> String {
    if missing.is_empty() {
        return String::new();
    }
    let mut named: Vec<String> = missing.iter().take(NAMED).map(|w| format!("“{w}”")).collect();
    if missing.len() > NAMED {
        named.push(format!("and {} more", missing.len() - NAMED));
    }
    format!("; it lacks {}", named.join(", "))
}

/// The lower-cased words (runs of letters and digits) of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The distinct terms `text` quotes: in "…", then “…”, then `…`.
fn quoted_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for (open, close) in [('"', '"'), ('“', '”'), ('`', '`')] {
        let mut rest = text;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let term = after[..end].trim();
            if !term.is_empty() && !terms.iter().any(|t| t.eq_ignore_ascii_case(term)) {
                terms.push(term.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(answer: Option<&str>, expected: Option<&str>, rubric: &str) -> JudgePrompt {
        JudgePrompt {
            rubric: rubric.into(),
            input: "q".into(),
            answer: answer.map(str::to_owned),
            expected: expected.map(str::to_owned),
            labels: vec![],
        }
    }

    #[test]
    fn scores_the_expected_words_found() {
        let (score, why) = judge(&prompt(Some("The capital is Paris."), Some("Paris, France"), "r"));
        assert_eq!(score, 0.5);
        assert_eq!(why, "The answer has 1 of the 2 words of the expected answer; it lacks “france”.");
        assert_eq!(judge(&prompt(Some("paris FRANCE"), Some("Paris, France"), "r")).0, 1.0);
    }

    #[test]
    fn without_expected_it_checks_the_rubrics_quoted_terms() {
        let rubric = "Mentions \"refund\" and `order number`, and says “sorry”.";
        let (score, why) = judge(&prompt(Some("Your refund for order number 5."), None, rubric));
        assert_eq!(score, 0.6667);
        assert!(why.contains("2 of the 3 terms") && why.contains("“sorry”"), "{why}");
        assert_eq!(judge(&prompt(Some("anything"), None, "Be kind.")).0, 1.0);
        assert_eq!(judge(&prompt(None, Some("x"), "r")).0, 0.0);
        assert_eq!(judge(&prompt(Some("  "), None, "r")).0, 0.0);
    }

    #[test]
    fn quoted_terms_are_distinct() {
        assert_eq!(quoted_terms("\"a\" \"A\" `b` “c” \"unclosed"), vec!["a", "c", "b"]);
    }
}
