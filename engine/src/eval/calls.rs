//! The `tool_calls` scorer: which of the expected calls a run made, by name
//! and a subset of the arguments, in one of three orders (see [`CallOrder`]),
//! as the fraction matched, with the missing, extra and out-of-order calls
//! named in the reason.

use serde_json::Value;

use super::scorers::{clip, json_eq, more, plural};
use crate::model::{CallOrder, ExpectedCall, ScoreValue, SubjectCall, Verdict};

/// Calls named in one list of a reason before "and N more".
const LISTED_CALLS: usize = 3;

pub(super) fn tool_calls(want: &[ExpectedCall], made: &[SubjectCall], order: CallOrder) -> Verdict {
    let number = |value: f64, reason: String| Verdict {
        value: ScoreValue::Number(value),
        reason,
        label: None,
        judge_run_id: None,
    };
    if want.is_empty() {
        return match made.len() {
            0 => number(1.0, "no tool calls expected, none made".into()),
            n => number(0.0, format!("no tool calls expected, made {}: {}", n, list(made.iter().map(made_text)))),
        };
    }
    let fits: Vec<Vec<bool>> = want.iter().map(|w| made.iter().map(|m| call_fits(w, m)).collect()).collect();
    let (n, m) = (want.len(), made.len());
    match order {
        CallOrder::Exact => {
            let differ: Vec<usize> = (0..n.min(m)).filter(|&i| !fits[i][i]).collect();
            let matched = n.min(m) - differ.len();
            let mut notes = vec![format!("matched {matched} of {n} expected calls in exact order")];
            if let Some(&i) = differ.first() {
                let others = more(differ.len() - 1, "difference");
                notes.push(format!(
                    "call {}: expected {}, got {}{others}",
                    i + 1,
                    expected_text_of(&want[i]),
                    made_text(&made[i])
                ));
            }
            if n > m {
                notes.push(format!("missing {}", list(want[m..].iter().map(expected_text_of))));
            }
            if m > n {
                notes.push(format!("{} extra: {}", plural(m - n, "call"), list(made[n..].iter().map(made_text))));
            }
            number(matched as f64 / n.max(m) as f64, notes.join("; "))
        }
        CallOrder::InOrder => {
            let matched = match_in_order(&fits, m);
            let unmatched = |out_of_order: bool| {
                let calls = (0..n).filter(|&i| matched[i].is_none() && fits[i].contains(&true) == out_of_order);
                list(calls.map(|i| expected_text_of(&want[i])))
            };
            let count = matched.iter().flatten().count();
            let mut notes = vec![format!("matched {count} of {n} expected calls in order")];
            let missing = unmatched(false);
            if !missing.is_empty() {
                notes.push(format!("missing {missing}"));
            }
            let late = unmatched(true);
            if !late.is_empty() {
                notes.push(format!("out of order: {late}"));
            }
            number(count as f64 / n as f64, notes.join("; "))
        }
        CallOrder::Any => {
            let matched = match_any(&fits, m);
            let count = matched.iter().flatten().count();
            let mut notes = vec![format!("matched {count} of {n} expected calls")];
            let missing = list((0..n).filter(|&i| matched[i].is_none()).map(|i| expected_text_of(&want[i])));
            if !missing.is_empty() {
                notes.push(format!("missing {missing}"));
            }
            number(count as f64 / n as f64, notes.join("; "))
        }
    }
}

/// Whether a made call is the expected one: the same tool, and the
/// expected arguments a subset of its arguments.
fn call_fits(want: &ExpectedCall, made: &SubjectCall) -> bool {
    if want.name != made.name {
        return false;
    }
    let Some(args) = &want.arguments else { return true };
    match &made.arguments {
        // Arguments recorded as the model's JSON text.
        Value::String(text) if !args.is_string() => {
            serde_json::from_str::<Value>(text).is_ok_and(|parsed| subset(args, &parsed))
        }
        made_args => subset(args, made_args),
    }
}

/// Every member of `want` is in `got` and equal (objects recursively,
/// anything else by [`json_eq`]).
fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, v)| g.get(k).is_some_and(|h| subset(v, h))),
        _ => json_eq(want, got),
    }
}

/// The most expected calls matched in their order by made calls
/// (`fits[i][j]`: made call `j` is expected call `i`): for each expected
/// call, the made call it matched.
fn match_in_order(fits: &[Vec<bool>], m: usize) -> Vec<Option<usize>> {
    let n = fits.len();
    let w = m + 1;
    // best[i * w + j]: the most of expected[i..] matched in order by made[j..].
    let mut best = vec![0u16; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            let skip = best[(i + 1) * w + j].max(best[i * w + j + 1]);
            best[i * w + j] = if fits[i][j] { skip.max(best[(i + 1) * w + j + 1] + 1) } else { skip };
        }
    }
    let mut matched = vec![None; n];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if fits[i][j] && best[i * w + j] == best[(i + 1) * w + j + 1] + 1 {
            matched[i] = Some(j);
            i += 1;
            j += 1;
        } else if best[i * w + j + 1] >= best[(i + 1) * w + j] {
            j += 1;
        } else {
            i += 1;
        }
    }
    matched
}

/// The most expected calls matched one to one by made calls, in any order
/// (a maximum bipartite matching: a generic expected call does not take the
/// only call a specific one fits): for each expected call, the made call.
fn match_any(fits: &[Vec<bool>], m: usize) -> Vec<Option<usize>> {
    let mut owner: Vec<Option<usize>> = vec![None; m];
    for (i, row) in fits.iter().enumerate() {
        if let Some(j) = (0..m).find(|&j| row[j] && owner[j].is_none()) {
            owner[j] = Some(i);
        }
    }
    for i in 0..fits.len() {
        if !owner.contains(&Some(i)) {
            augment(i, fits, &mut vec![false; m], &mut owner);
        }
    }
    let mut matched = vec![None; fits.len()];
    for (j, i) in owner.iter().enumerate() {
        if let Some(i) = i {
            matched[*i] = Some(j);
        }
    }
    matched
}

/// Finds a made call for expected call `i`, moving others' along an
/// augmenting path; whether one was found.
fn augment(i: usize, fits: &[Vec<bool>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
    for j in 0..owner.len() {
        if fits[i][j] && !seen[j] {
            seen[j] = true;
            let current = owner[j];
            if current.is_none_or(|k| augment(k, fits, seen, owner)) {
                owner[j] = Some(i);
                return true;
            }
        }
    }
    false
}

/// `get_weather{"city":"Oslo"}` (or `get_weather` for any arguments), clipped.
fn expected_text_of(call: &ExpectedCall) -> String {
    match &call.arguments {
        Some(args) => clip(&format!("{}{args}", call.name)).into_owned(),
        None => clip(&call.name).into_owned(),
    }
}

/// `get_weather{"city":"Oslo"}`, clipped.
fn made_text(call: &SubjectCall) -> String {
    clip(&format!("{}{}", call.name, call.arguments)).into_owned()
}

/// The first few items joined with commas, then `and N more`.
fn list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    let mut shown = items[..items.len().min(LISTED_CALLS)].join(", ");
    if items.len() > LISTED_CALLS {
        shown.push_str(&format!(" and {} more", items.len() - LISTED_CALLS));
    }
    shown
}
