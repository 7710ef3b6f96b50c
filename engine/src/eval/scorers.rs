//! The built-in scorers: pure, deterministic judges of a finished run.
//!
//! [`score`] applies a [`Scorer`] to a [`ScoreSubject`] and says why in a
//! [`Verdict`]: pass/fail scorers give a yes/no, `tool_calls` the fraction
//! of expected calls made. A scorer without its own `expected` value uses
//! the dataset item's. An `Err` means the scorer cannot be applied at all
//! (its configuration, a pattern or schema that does not compile, no
//! expected value); a run without an answer simply fails. [`check`] refuses
//! a bad scorer before anything is run with it.

use std::borrow::Cow;

use regex::{Regex, RegexBuilder};
use serde_json::{Number, Value};

use crate::model::{
    expected_calls_problem, CallOrder, ExpectedCall, ScoreSubject, ScoreValue, Scorer, SubjectCall, Verdict,
};

/// Characters of quoted text (an answer, an expected value) kept in a reason.
const QUOTE_CHARS: usize = 120;
/// Bytes a compiled pattern, and each of its lazy DFAs, may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Calls named in one list of a reason before "and N more".
const LISTED_CALLS: usize = 3;
/// The reason a run without an answer fails a scorer of answers.
const NO_ANSWER: &str = "the run has no answer";
/// The error of a scorer with no expected value of its own or the item's.
const NO_EXPECTED: &str = "no expected value: give `expected` or score against a dataset item that has one";

/// Whether `scorer` can be applied: its bounds, and its pattern or schema
/// compiles. The error starts with the scorer's kind (`regex: pattern: …`).
pub fn check(scorer: &Scorer) -> Result<(), String> {
    let compiles = || match scorer {
        Scorer::Regex { pattern } => compile_regex(pattern).map(drop),
        Scorer::JsonSchema { schema } => compile_schema(schema).map(drop),
        _ => Ok(()),
    };
    scorer.problem().map_or_else(compiles, Err).map_err(|e| format!("{}: {e}", scorer.kind()))
}

/// Applies `scorer` to a finished run. `expected` is the dataset item's
/// expected value, used when the scorer gives none of its own (`null`
/// counts as none). The error (the scorer cannot be applied) starts with
/// the scorer's kind.
pub fn score(scorer: &Scorer, subject: &ScoreSubject, expected: Option<&Value>) -> Result<Verdict, String> {
    let item = expected.filter(|v| !v.is_null());
    apply(scorer, subject, item).map_err(|e| format!("{}: {e}", scorer.kind()))
}

fn apply(scorer: &Scorer, subject: &ScoreSubject, item: Option<&Value>) -> Result<Verdict, String> {
    if let Some(problem) = scorer.problem() {
        return Err(problem);
    }
    let output = subject.output.as_deref();
    let judge = |f: &dyn Fn(&str) -> Verdict| output.map_or_else(|| verdict(false, NO_ANSWER.into()), f);
    Ok(match scorer {
        Scorer::Exact { expected, ignore_case } => {
            let want = expected_text(expected.as_deref(), item)?;
            judge(&|out| exact(out, &want, *ignore_case))
        }
        Scorer::Contains { expected, ignore_case } => {
            let want = expected_text(expected.as_deref(), item)?;
            if want.is_empty() {
                return Err("the expected text is empty".into());
            }
            judge(&|out| contains(out, &want, *ignore_case))
        }
        Scorer::NotContains { expected, ignore_case } => judge(&|out| not_contains(out, expected, *ignore_case)),
        Scorer::Regex { pattern } => {
            let re = compile_regex(pattern)?;
            judge(&|out| regex_match(out, pattern, &re))
        }
        Scorer::JsonSchema { schema } => {
            let validator = compile_schema(schema)?;
            judge(&|out| json_schema(out, &validator))
        }
        Scorer::JsonEqual { expected, ignore_paths } => {
            let want = expected_json(expected.as_ref(), item)?;
            judge(&|out| json_equal(out, &want, ignore_paths))
        }
        Scorer::Numeric { expected, tolerance } => {
            let want = expected_number(*expected, item)?;
            judge(&|out| numeric(out, want, *tolerance))
        }
        Scorer::ToolCalls { expected, order } => {
            let want = expected_calls(expected.as_deref(), item)?;
            tool_calls(&want, &subject.calls, *order)
        }
        Scorer::Bounds { max_duration_ms, max_cost_usd, max_turns } => {
            bounds(subject, *max_duration_ms, *max_cost_usd, *max_turns)
        }
    })
}

fn verdict(ok: bool, reason: String) -> Verdict {
    Verdict { value: ScoreValue::Bool(ok), reason }
}

fn compile_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("pattern does not compile: {e}"))
}

fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| format!("schema is not a valid JSON Schema: {e}"))
}

// ---- expected values ------------------------------------------------------

/// The scorer's text, else the item's: a JSON string as is, any other JSON
/// as compact JSON text.
fn expected_text<'a>(own: Option<&'a str>, item: Option<&'a Value>) -> Result<Cow<'a, str>, String> {
    match (own, item) {
        (Some(text), _) => Ok(Cow::Borrowed(text)),
        (None, Some(Value::String(text))) => Ok(Cow::Borrowed(text)),
        (None, Some(other)) => Ok(Cow::Owned(other.to_string())),
        (None, None) => Err(NO_EXPECTED.into()),
    }
}

/// The scorer's JSON, else the item's (a string holding JSON read as that JSON).
fn expected_json<'a>(own: Option<&'a Value>, item: Option<&'a Value>) -> Result<Cow<'a, Value>, String> {
    match (own, item) {
        (Some(value), _) => Ok(Cow::Borrowed(value)),
        (None, Some(item @ Value::String(text))) => {
            Ok(serde_json::from_str(text).map_or(Cow::Borrowed(item), Cow::Owned))
        }
        (None, Some(other)) => Ok(Cow::Borrowed(other)),
        (None, None) => Err(NO_EXPECTED.into()),
    }
}

/// The scorer's number, else the item's: a JSON number or a numeric string.
fn expected_number(own: Option<f64>, item: Option<&Value>) -> Result<f64, String> {
    if let Some(number) = own {
        return Ok(number);
    }
    let item = item.ok_or(NO_EXPECTED)?;
    let number = match item {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    number
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("the dataset item's expected value is not a number: {}", json_text(item)))
}

/// The scorer's calls, else the item's: a list of `{name, arguments?}`, or
/// an object with such a list in `tool_calls`.
fn expected_calls<'a>(
    own: Option<&'a [ExpectedCall]>,
    item: Option<&Value>,
) -> Result<Cow<'a, [ExpectedCall]>, String> {
    if let Some(calls) = own {
        return Ok(Cow::Borrowed(calls));
    }
    let list = match item {
        None => return Err(NO_EXPECTED.into()),
        Some(list @ Value::Array(_)) => list,
        Some(Value::Object(o)) if o.get("tool_calls").is_some_and(Value::is_array) => &o["tool_calls"],
        Some(_) => {
            return Err("the dataset item's expected value must be a list of {name, arguments} calls, \
                        or an object with such a list in `tool_calls`"
                .into())
        }
    };
    let calls: Vec<ExpectedCall> =
        serde_json::from_value(list.clone()).map_err(|e| format!("the dataset item's expected calls: {e}"))?;
    match expected_calls_problem("the dataset item's expected calls", &calls) {
        Some(problem) => Err(problem),
        None => Ok(Cow::Owned(calls)),
    }
}

// ---- text -------------------------------------------------------------------

fn exact(out: &str, want: &str, ignore_case: bool) -> Verdict {
    let (got, want) = (out.trim(), want.trim());
    let (got_cmp, want_cmp) = if ignore_case {
        (Cow::Owned(got.to_lowercase()), Cow::Owned(want.to_lowercase()))
    } else {
        (Cow::Borrowed(got), Cow::Borrowed(want))
    };
    if got_cmp == want_cmp {
        let note = if got != want { " (ignoring case)" } else { "" };
        return verdict(true, format!("output equals {}{note}", quote(want)));
    }
    let how = if !ignore_case && got.to_lowercase() == want.to_lowercase() {
        "differs only in case".to_owned()
    } else {
        let at = want_cmp.chars().zip(got_cmp.chars()).take_while(|(a, b)| a == b).count() + 1;
        format!("differs at character {at}")
    };
    verdict(false, format!("expected {}, got {} ({how})", quote(want), quote(got)))
}

/// Whether `haystack` contains `needle`, ignoring case if asked.
fn has(haystack: &str, needle: &str, ignore_case: bool) -> bool {
    if ignore_case {
        haystack.to_lowercase().contains(&needle.to_lowercase())
    } else {
        haystack.contains(needle)
    }
}

fn contains(out: &str, want: &str, ignore_case: bool) -> Verdict {
    if has(out, want, ignore_case) {
        verdict(true, format!("output contains {}", quote(want)))
    } else {
        verdict(false, format!("output does not contain {}: {}", quote(want), quote(out)))
    }
}

fn not_contains(out: &str, unwanted: &str, ignore_case: bool) -> Verdict {
    if has(out, unwanted, ignore_case) {
        verdict(false, format!("output contains {}: {}", quote(unwanted), quote(out)))
    } else {
        verdict(true, format!("output does not contain {}", quote(unwanted)))
    }
}

fn regex_match(out: &str, pattern: &str, re: &Regex) -> Verdict {
    match re.find(out) {
        Some(found) => verdict(true, format!("output matches /{}/ at {}", clip(pattern), quote(found.as_str()))),
        None => verdict(false, format!("output does not match /{}/: {}", clip(pattern), quote(out))),
    }
}

/// `text` cut to [`QUOTE_CHARS`] characters, with an ellipsis when cut.
fn clip(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((at, _)) => Cow::Owned(format!("{}…", &text[..at])),
        None => Cow::Borrowed(text),
    }
}

/// `text` clipped and quoted as a JSON string (quotes and line breaks escaped).
fn quote(text: &str) -> String {
    Value::String(clip(text).into_owned()).to_string()
}

// ---- JSON -------------------------------------------------------------------

/// The answer as JSON: the whole of it, or else its first fenced code block
/// marked `json` (or unmarked). The error is the parser's.
fn output_json(out: &str) -> Result<Value, String> {
    let text = out.trim();
    serde_json::from_str(text).or_else(|whole| match fenced_json(text) {
        Some(inner) => serde_json::from_str(inner).map_err(|e| format!("{e} (in the fenced block)")),
        None => Err(whole.to_string()),
    })
}

/// The body of the first fenced code block marked `json` (or unmarked).
fn fenced_json(text: &str) -> Option<&str> {
    let mut rest = text;
    loop {
        let after = &rest[rest.find("```")? + 3..];
        let line_end = after.find('\n')?;
        let info = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let close = body.find("```")?;
        if info.is_empty() || info.eq_ignore_ascii_case("json") {
            return Some(body[..close].trim());
        }
        rest = &body[close + 3..];
    }
}

fn json_schema(out: &str, validator: &jsonschema::Validator) -> Verdict {
    let value = match output_json(out) {
        Ok(value) => value,
        Err(e) => return verdict(false, format!("output is not JSON: {e}")),
    };
    let mut errors = validator.iter_errors(&value);
    let Some(first) = errors.next() else {
        return verdict(true, "output is valid against the schema".into());
    };
    let path = first.instance_path().to_string();
    let at = if path.is_empty() { String::new() } else { format!("{path}: ") };
    let more = more(errors.count(), "error");
    verdict(false, format!("{at}{}{more}", clip(&first.to_string())))
}

/// ` (and N more things)`, or nothing for none.
fn more(count: usize, thing: &str) -> String {
    match count {
        0 => String::new(),
        1 => format!(" (and 1 more {thing})"),
        n => format!(" (and {n} more {thing}s)"),
    }
}

fn json_equal(out: &str, want: &Value, ignore_paths: &[String]) -> Verdict {
    let mut got = match output_json(out) {
        Ok(value) => value,
        Err(e) => return verdict(false, format!("output is not JSON: {e}")),
    };
    let mut want = want.clone();
    for pointer in ignore_paths {
        blank(&mut want, pointer);
        blank(&mut got, pointer);
    }
    let mut diff = Diff::default();
    diff.walk(&mut String::new(), &want, &got);
    match diff.first {
        None if ignore_paths.is_empty() => verdict(true, "output equals the expected JSON".into()),
        None => {
            verdict(true, format!("output equals the expected JSON ({} ignored)", plural(ignore_paths.len(), "path")))
        }
        Some(first) => verdict(false, format!("{first}{}", more(diff.count - 1, "difference"))),
    }
}

/// Leaves out what a JSON pointer (already checked) points to: an object's
/// member is removed, an array's element set to null (so the indexes of the
/// others stay), the whole document set to null.
fn blank(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        *value = Value::Null;
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(members)) => {
            members.remove(&key);
        }
        Some(Value::Array(items)) => {
            let index = key.parse::<usize>().ok().filter(|i| i.to_string() == key);
            if let Some(item) = index.and_then(|i| items.get_mut(i)) {
                *item = Value::Null;
            }
        }
        _ => {}
    }
}

/// The differences between an expected JSON value and the answer's: how
/// many, and the first one in words.
#[derive(Default)]
struct Diff {
    first: Option<String>,
    count: usize,
}

impl Diff {
    fn note(&mut self, path: &str, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(if path.is_empty() { what() } else { format!("{path}: {}", what()) });
        }
    }

    fn walk(&mut self, path: &mut String, want: &Value, got: &Value) {
        match (want, got) {
            (Value::Object(w), Value::Object(g)) => {
                for (key, w_value) in w {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    match g.get(key) {
                        Some(g_value) => self.walk(path, w_value, g_value),
                        None => self.note(path, || format!("missing, expected {}", json_text(w_value))),
                    }
                    path.truncate(len);
                }
                for (key, g_value) in g.iter().filter(|(key, _)| !w.contains_key(*key)) {
                    let at = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                    self.note(&at, || format!("unexpected {}", json_text(g_value)));
                }
            }
            (Value::Array(w), Value::Array(g)) => {
                for i in 0..w.len().max(g.len()) {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    match (w.get(i), g.get(i)) {
                        (Some(w_item), Some(g_item)) => self.walk(path, w_item, g_item),
                        (Some(w_item), None) => self.note(path, || format!("missing, expected {}", json_text(w_item))),
                        (None, Some(g_item)) => self.note(path, || format!("unexpected {}", json_text(g_item))),
                        (None, None) => {}
                    }
                    path.truncate(len);
                }
            }
            _ if json_eq(want, got) => {}
            _ => self.note(path, || format!("expected {}, got {}", json_text(want), json_text(got))),
        }
    }
}

/// A JSON value as compact text, clipped.
fn json_text(value: &Value) -> String {
    clip(&value.to_string()).into_owned()
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_eq(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn number_eq(x: &Number, y: &Number) -> bool {
    if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
        return x == y;
    }
    x.as_f64() == y.as_f64()
}

// ---- numbers ----------------------------------------------------------------

fn numeric(out: &str, want: f64, tolerance: f64) -> Verdict {
    let Some(got) = first_number(out) else {
        return verdict(false, format!("no number in the output: {}", quote(out)));
    };
    let off = (got - want).abs();
    // Decimal values are not exact in binary: 1.1 is within 0.1 of 1.0.
    let slack = 4.0 * f64::EPSILON * want.abs().max(got.abs()).max(1.0);
    let bound = if tolerance > 0.0 { format!("{want} ± {tolerance}") } else { want.to_string() };
    if off <= tolerance + slack {
        verdict(true, format!("got {got}, expected {bound}"))
    } else {
        verdict(false, format!("expected {bound}, got {got} (off by {})", tidy(off)))
    }
}

/// `x` rounded to 10 significant digits (a difference shown without float noise).
fn tidy(x: f64) -> f64 {
    format!("{x:.9e}").parse().unwrap_or(x)
}

/// The first number in `text`: `42`, `-3.5`, `.5`, `1e3`, `1,234.5`
/// (commas between groups of three digits), with a sign when one comes
/// right before it (`-`, `+` or `−`) and not after a letter or digit
/// (`GPT-4` holds 4). `answer: 42.` holds 42.
fn first_number(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let start = (0..b.len()).find(|&i| digit(i) || (b[i] == b'.' && digit(i + 1)))?;
    let mut number = String::from("0");
    let mut j = start;
    while digit(j) {
        j += 1;
    }
    number.push_str(&text[start..j]);
    if (1..=3).contains(&(j - start)) {
        while b.get(j) == Some(&b',') && digit(j + 1) && digit(j + 2) && digit(j + 3) && !digit(j + 4) {
            number.push_str(&text[j + 1..j + 4]);
            j += 4;
        }
    }
    if b.get(j) == Some(&b'.') && digit(j + 1) {
        let from = j;
        j += 1;
        while digit(j) {
            j += 1;
        }
        number.push_str(&text[from..j]);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if digit(k) {
            while digit(k) {
                k += 1;
            }
            number.push_str(&text[j..k]);
        }
    }
    let value: f64 = number.parse().ok()?;
    let before = &text[..start];
    let sign = before.chars().next_back().filter(|c| matches!(c, '-' | '+' | '−'));
    let after_word = sign
        .is_some_and(|s| before[..before.len() - s.len_utf8()].chars().next_back().is_some_and(char::is_alphanumeric));
    Some(match sign {
        Some('-' | '−') if !after_word => -value,
        _ => value,
    })
}

// ---- tool calls -------------------------------------------------------------

fn tool_calls(want: &[ExpectedCall], made: &[SubjectCall], order: CallOrder) -> Verdict {
    let number = |value: f64, reason: String| Verdict { value: ScoreValue::Number(value), reason };
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

/// `1 call`, `2 calls`.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

// ---- bounds -----------------------------------------------------------------

fn bounds(subject: &ScoreSubject, max_ms: Option<i64>, max_usd: Option<f64>, max_turns: Option<u32>) -> Verdict {
    let (mut over, mut within) = (Vec::new(), Vec::new());
    if let Some(max) = max_ms {
        match subject.duration_ms {
            None => over.push(format!("duration unknown (bound {})", duration(max))),
            Some(d) if d > max => over.push(format!("duration {} over its bound of {}", duration(d), duration(max))),
            Some(d) => within.push(format!("duration {} ≤ {}", duration(d), duration(max))),
        }
    }
    if let Some(max) = max_usd {
        match subject.cost_usd {
            None => over.push(format!("cost unknown (bound {})", usd(max))),
            // Sums of prices are not exact in binary; a trillionth of a dollar is noise.
            Some(c) if c > max + 1e-12 => over.push(format!("cost {} over its bound of {}", usd(c), usd(max))),
            Some(c) => within.push(format!("cost {} ≤ {}", usd(c), usd(max))),
        }
    }
    if let Some(max) = max_turns {
        let turns = plural(subject.turns as usize, "turn");
        if subject.turns > max {
            over.push(format!("{turns} over its bound of {max}"));
        } else {
            within.push(format!("{turns} ≤ {max}"));
        }
    }
    if over.is_empty() {
        verdict(true, format!("within bounds: {}", within.join(", ")))
    } else {
        verdict(false, over.join("; "))
    }
}

/// `850 ms`, `1.5 s`, `61.234 s`.
fn duration(ms: i64) -> String {
    if ms.abs() < 1000 {
        return format!("{ms} ms");
    }
    let s = format!("{:.3}", ms as f64 / 1000.0);
    format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
}

/// `$0.01`, `$0.0123`, `$1.50`: up to 8 decimals, at least 2.
fn usd(amount: f64) -> String {
    let mut s = format!("{amount:.8}");
    while s.ends_with('0') && s.len() - s.find('.').unwrap_or(s.len()) > 3 {
        s.pop();
    }
    format!("${s}")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;

    fn scorer(v: Value) -> Scorer {
        serde_json::from_value(v).unwrap()
    }

    fn answer(text: &str) -> ScoreSubject {
        ScoreSubject { output: Some(text.into()), ..Default::default() }
    }

    fn calls(list: &[(&str, Value)]) -> ScoreSubject {
        let calls =
            list.iter().map(|(name, arguments)| SubjectCall { name: (*name).into(), arguments: arguments.clone() });
        ScoreSubject { calls: calls.collect(), ..Default::default() }
    }

    /// The verdict of a scorer given as JSON, with the item's expected value.
    fn run(s: Value, subject: &ScoreSubject, item: Option<Value>) -> Verdict {
        score(&scorer(s), subject, item.as_ref()).unwrap()
    }

    fn passes(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
        let v = run(s, subject, item);
        assert_eq!(v.value, ScoreValue::Bool(true), "{}", v.reason);
        v.reason
    }

    fn fails(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
        let v = run(s, subject, item);
        assert_eq!(v.value, ScoreValue::Bool(false), "{}", v.reason);
        v.reason
    }

    fn fraction(s: Value, subject: &ScoreSubject, item: Option<Value>) -> (f64, String) {
        match run(s, subject, item) {
            Verdict { value: ScoreValue::Number(n), reason } => (n, reason),
            other => panic!("not a number: {other:?}"),
        }
    }

    fn error(s: Value, subject: &ScoreSubject, item: Option<Value>) -> String {
        score(&scorer(s), subject, item.as_ref()).unwrap_err()
    }

    #[test]
    fn exact_compares_trimmed_text() {
        let r = passes(json!({"kind": "exact", "expected": "Paris"}), &answer("  Paris\n"), None);
        assert_eq!(r, r#"output equals "Paris""#);
        let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("paris."), None);
        assert_eq!(r, r#"expected "Paris", got "paris." (differs at character 1)"#);
        let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("PARIS"), None);
        assert_eq!(r, r#"expected "Paris", got "PARIS" (differs only in case)"#);
        let r = fails(json!({"kind": "exact", "expected": "Paris"}), &answer("Paris, France"), None);
        assert!(r.ends_with("(differs at character 6)"), "{r}");
        let r = passes(json!({"kind": "exact", "expected": "Paris", "ignore_case": true}), &answer("PARIS"), None);
        assert_eq!(r, r#"output equals "Paris" (ignoring case)"#);
        fails(json!({"kind": "exact", "expected": "Paris", "ignore_case": true}), &answer("Pariss"), None);
        // Line breaks are escaped in the reason.
        let r = fails(json!({"kind": "exact", "expected": "a"}), &answer("a\nb"), None);
        assert_eq!(r, r#"expected "a", got "a\nb" (differs at character 2)"#);
    }

    #[test]
    fn expected_values_come_from_the_scorer_then_the_item() {
        let s = json!({"kind": "exact"});
        passes(s.clone(), &answer("Oslo"), Some(json!("Oslo")));
        fails(s.clone(), &answer("Oslo"), Some(json!("Bergen")));
        // Other JSON is compared as compact JSON text.
        passes(s.clone(), &answer(r#"{"a":[1,2]}"#), Some(json!({"a": [1, 2]})));
        passes(s.clone(), &answer("42"), Some(json!(42)));
        // The scorer's own value wins over the item's.
        passes(json!({"kind": "exact", "expected": "Oslo"}), &answer("Oslo"), Some(json!("Bergen")));
        // Neither: the scorer cannot be applied (a null item is none).
        let e = error(s.clone(), &answer("Oslo"), None);
        assert_eq!(e, "exact: no expected value: give `expected` or score against a dataset item that has one");
        assert_eq!(error(s, &answer("Oslo"), Some(Value::Null)), e);
        let e = error(json!({"kind": "numeric"}), &answer("4"), None);
        assert!(e.starts_with("numeric: no expected value"), "{e}");
        let e = error(json!({"kind": "json_equal"}), &answer("4"), None);
        assert!(e.starts_with("json_equal: no expected value"), "{e}");
        let e = error(json!({"kind": "tool_calls"}), &ScoreSubject::default(), None);
        assert!(e.starts_with("tool_calls: no expected value"), "{e}");
        let e = error(json!({"kind": "contains"}), &answer("x"), None);
        assert!(e.starts_with("contains: no expected value"), "{e}");
    }

    #[test]
    fn a_run_without_an_answer_fails() {
        let none = ScoreSubject::default();
        for s in [
            json!({"kind": "exact", "expected": "x"}),
            json!({"kind": "contains", "expected": "x"}),
            json!({"kind": "not_contains", "expected": "x"}),
            json!({"kind": "regex", "pattern": "x"}),
            json!({"kind": "json_schema", "schema": {}}),
            json!({"kind": "json_equal", "expected": 1}),
            json!({"kind": "numeric", "expected": 1}),
        ] {
            assert_eq!(fails(s, &none, None), "the run has no answer");
        }
        // Still an error when the scorer cannot be applied at all.
        assert!(score(&scorer(json!({"kind": "exact"})), &none, None).is_err());
        assert!(score(&scorer(json!({"kind": "regex", "pattern": "("})), &none, None).is_err());
    }

    #[test]
    fn contains_and_not_contains() {
        let r = passes(json!({"kind": "contains", "expected": "Paris"}), &answer("It is Paris."), None);
        assert_eq!(r, r#"output contains "Paris""#);
        let r = fails(json!({"kind": "contains", "expected": "Paris"}), &answer("It is paris."), None);
        assert_eq!(r, r#"output does not contain "Paris": "It is paris.""#);
        passes(json!({"kind": "contains", "expected": "Paris", "ignore_case": true}), &answer("PARIS!"), None);
        passes(json!({"kind": "contains"}), &answer("the answer is 42"), Some(json!(42)));
        let e = error(json!({"kind": "contains"}), &answer("x"), Some(json!("")));
        assert_eq!(e, "contains: the expected text is empty");

        let r = passes(json!({"kind": "not_contains", "expected": "sorry"}), &answer("Here you go"), None);
        assert_eq!(r, r#"output does not contain "sorry""#);
        let r = fails(json!({"kind": "not_contains", "expected": "sorry"}), &answer("I'm sorry"), None);
        assert_eq!(r, r#"output contains "sorry": "I'm sorry""#);
        passes(json!({"kind": "not_contains", "expected": "sorry"}), &answer("SORRY"), None);
        fails(json!({"kind": "not_contains", "expected": "sorry", "ignore_case": true}), &answer("SORRY"), None);
        // not_contains takes no item value.
        passes(json!({"kind": "not_contains", "expected": "x"}), &answer("abc"), Some(json!("abc")));
    }

    #[test]
    fn regex_matches_anywhere() {
        let r = passes(json!({"kind": "regex", "pattern": "\\d+"}), &answer("answer: 42"), None);
        assert_eq!(r, r#"output matches /\d+/ at "42""#);
        let r = fails(json!({"kind": "regex", "pattern": "^\\d+$"}), &answer("answer: 42"), None);
        assert_eq!(r, r#"output does not match /^\d+$/: "answer: 42""#);
        passes(json!({"kind": "regex", "pattern": "(?i)^yes\\b"}), &answer("Yes, it is."), None);
        let e = error(json!({"kind": "regex", "pattern": "(unclosed"}), &answer("x"), None);
        assert!(e.starts_with("regex: pattern does not compile: "), "{e}");
    }

    #[test]
    fn a_regex_too_big_to_compile_is_refused_quickly() {
        let started = Instant::now();
        let huge = scorer(json!({"kind": "regex", "pattern": "(a{1000}){1000}"}));
        let e = check(&huge).unwrap_err();
        assert!(e.starts_with("regex: pattern does not compile: "), "{e}");
        assert!(e.contains("size limit"), "{e}");
        let e = score(&huge, &answer(&"a".repeat(10_000)), None).unwrap_err();
        assert!(e.contains("size limit"), "{e}");
        let e = check(&scorer(json!({"kind": "regex", "pattern": "\\w{500}\\w{500}\\w{500}"}))).unwrap_err();
        assert!(e.contains("size limit"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn json_schema_validates_the_answer() {
        let schema = json!({"kind": "json_schema", "schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
        }});
        let r = passes(schema.clone(), &answer(r#"{"name": "Ada", "age": 36}"#), None);
        assert_eq!(r, "output is valid against the schema");
        let r = fails(schema.clone(), &answer(r#"{"name": "Ada", "age": "old"}"#), None);
        assert_eq!(r, r#"/age: "old" is not of type "integer""#);
        let r = fails(schema.clone(), &answer(r#"{"age": "old"}"#), None);
        assert!(r.contains("\"name\" is a required property") || r.contains("/age"), "{r}");
        assert!(r.ends_with("(and 1 more error)"), "{r}");
        let r = fails(schema.clone(), &answer("Ada is 36"), None);
        assert!(r.starts_with("output is not JSON: expected value at line 1 column 1"), "{r}");
        // A fenced block is unwrapped, an unmarked one too.
        let fenced = "Here it is:\n```json\n{\"name\": \"Ada\"}\n```\nAnything else?";
        passes(schema.clone(), &answer(fenced), None);
        passes(schema.clone(), &answer("```\n{\"name\": \"Ada\"}\n```"), None);
        let other_first = "```python\nprint(1)\n```\nand\n```JSON\n{\"name\": \"Ada\"}\n```";
        passes(schema.clone(), &answer(other_first), None);
        let r = fails(schema, &answer("```json\n{\"name\": }\n```"), None);
        assert!(r.starts_with("output is not JSON: ") && r.ends_with("(in the fenced block)"), "{r}");
        // A schema that does not compile is an error, checked up front too.
        let bad = json!({"kind": "json_schema", "schema": {"type": 12}});
        let e = error(bad.clone(), &answer("{}"), None);
        assert!(e.starts_with("json_schema: schema is not a valid JSON Schema: "), "{e}");
        assert!(check(&scorer(bad)).unwrap_err().starts_with("json_schema: schema is not a valid JSON Schema"));
        // Nothing is fetched: a remote reference does not resolve.
        let remote = scorer(json!({"kind": "json_schema", "schema": {"$ref": "https://example.com/s.json"}}));
        assert!(check(&remote).unwrap_err().starts_with("json_schema: schema is not a valid JSON Schema"));
    }

    #[test]
    fn json_equal_ignores_key_order_and_number_forms() {
        let s = json!({"kind": "json_equal", "expected": {"answer": 4, "unit": "m", "tags": ["a", "b"]}});
        let r = passes(s.clone(), &answer(r#"{"tags": ["a", "b"], "unit": "m", "answer": 4.0}"#), None);
        assert_eq!(r, "output equals the expected JSON");
        let r = fails(s.clone(), &answer(r#"{"answer": 5, "unit": "m", "tags": ["a", "b"]}"#), None);
        assert_eq!(r, "/answer: expected 4, got 5");
        let r = fails(s.clone(), &answer(r#"{"answer": 4, "tags": ["b", "a"], "extra": true}"#), None);
        assert_eq!(r, r#"/tags/0: expected "a", got "b" (and 3 more differences)"#);
        let r = fails(s.clone(), &answer(r#"{"answer": 4, "tags": ["a", "b"]}"#), None);
        assert_eq!(r, r#"/unit: missing, expected "m""#);
        let r = fails(s.clone(), &answer(r#"{"answer": 4, "unit": "m", "tags": ["a", "b", "c"]}"#), None);
        assert_eq!(r, r#"/tags/2: unexpected "c""#);
        let r = fails(s.clone(), &answer("about 4 meters"), None);
        assert_eq!(r, "output is not JSON: expected value at line 1 column 1");
        let r = fails(s, &answer("4 meters"), None);
        assert_eq!(r, "output is not JSON: trailing characters at line 1 column 3");
        let r = fails(json!({"kind": "json_equal", "expected": [1]}), &answer("{\"a\": 1}"), None);
        assert_eq!(r, r#"expected [1], got {"a":1}"#);
        // Fenced answers.
        passes(json!({"kind": "json_equal", "expected": {"a": 1}}), &answer("```json\n{\"a\": 1}\n```"), None);
    }

    #[test]
    fn json_equal_takes_the_items_value_and_reads_json_strings() {
        let s = json!({"kind": "json_equal"});
        passes(s.clone(), &answer("[1, 2]"), Some(json!([1, 2])));
        passes(s.clone(), &answer("[1, 2]"), Some(json!("[1, 2]")));
        passes(s.clone(), &answer("\"plain\""), Some(json!("plain")));
        fails(s, &answer("[2, 1]"), Some(json!("[1, 2]")));
    }

    #[test]
    fn json_equal_ignores_paths() {
        let expected = json!({"id": "x1", "at": {"time": 1, "zone": "UTC"}, "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], "a/b": 1, "t~": 2});
        let got = r#"{"id": "zz", "at": {"time": 99, "zone": "UTC"}, "items": [{"id": 7, "v": "a"}, {"id": 8, "v": "b"}], "a/b": 5, "t~": 6}"#;
        let r = fails(json!({"kind": "json_equal", "expected": expected}), &answer(got), None);
        assert!(r.ends_with("(and 5 more differences)"), "{r}");
        let paths = ["/id", "/at/time", "/items/0/id", "/items/1/id", "/a~1b", "/t~0"];
        let s = json!({"kind": "json_equal", "expected": expected, "ignore_paths": paths});
        let r = passes(s, &answer(got), None);
        assert_eq!(r, "output equals the expected JSON (6 paths ignored)");
        // An ignored path present on one side only is still ignored.
        let s = json!({"kind": "json_equal", "expected": {"a": 1}, "ignore_paths": ["/trace_id"]});
        passes(s.clone(), &answer(r#"{"a": 1, "trace_id": "t-9"}"#), None);
        assert_eq!(fails(s, &answer(r#"{"a": 2, "trace_id": "t-9"}"#), None), "/a: expected 1, got 2");
        // An array element is blanked: the others keep their indexes.
        let s = json!({"kind": "json_equal", "expected": [1, 2, 3], "ignore_paths": ["/0"]});
        passes(s.clone(), &answer("[9, 2, 3]"), None);
        assert_eq!(fails(s, &answer("[9, 3, 2]"), None), "/1: expected 2, got 3 (and 1 more difference)");
        // The whole document.
        passes(json!({"kind": "json_equal", "expected": [1], "ignore_paths": [""]}), &answer("{}"), None);
    }

    #[test]
    fn numbers_are_found_in_text() {
        let cases = [
            ("42", 42.0),
            ("-3.5", -3.5),
            ("1e3", 1000.0),
            ("answer: 42.", 42.0),
            ("The total is $1,234.50 today", 1234.5),
            ("x = −7", -7.0),
            ("(+8)", 8.0),
            ("about .5 of it", 0.5),
            ("GPT-4 says 3", 4.0),
            ("1,2,3", 1.0),
            ("12,3456", 12.0),
            ("3 eggs", 3.0),
            ("2.5E-2", 0.025),
            ("é 7", 7.0),
        ];
        for (text, want) in cases {
            assert_eq!(first_number(text), Some(want), "{text}");
        }
        assert_eq!(first_number("no numbers here."), None);
        assert_eq!(first_number(""), None);
    }

    #[test]
    fn numeric_compares_within_tolerance() {
        let r = passes(json!({"kind": "numeric", "expected": 42}), &answer("The answer is 42."), None);
        assert_eq!(r, "got 42, expected 42");
        let r = fails(json!({"kind": "numeric", "expected": 42}), &answer("The answer is 43.1"), None);
        assert_eq!(r, "expected 42, got 43.1 (off by 1.1)");
        let r = passes(json!({"kind": "numeric", "expected": 1.0, "tolerance": 0.1}), &answer("1.1"), None);
        assert_eq!(r, "got 1.1, expected 1 ± 0.1");
        let r = fails(json!({"kind": "numeric", "expected": 1.0, "tolerance": 0.1}), &answer("1.11"), None);
        assert_eq!(r, "expected 1 ± 0.1, got 1.11 (off by 0.11)");
        let r = fails(json!({"kind": "numeric", "expected": 1}), &answer("no idea"), None);
        assert_eq!(r, r#"no number in the output: "no idea""#);
        // From the item: a number, or a numeric string.
        passes(json!({"kind": "numeric"}), &answer("-2.5"), Some(json!(-2.5)));
        passes(json!({"kind": "numeric", "tolerance": 1}), &answer("1000"), Some(json!(" 1e3 ")));
        fails(json!({"kind": "numeric"}), &answer("7"), Some(json!("8")));
        let e = error(json!({"kind": "numeric"}), &answer("7"), Some(json!("seven")));
        assert_eq!(e, r#"numeric: the dataset item's expected value is not a number: "seven""#);
        assert!(error(json!({"kind": "numeric"}), &answer("7"), Some(json!("NaN"))).contains("not a number"));
        assert!(error(json!({"kind": "numeric", "tolerance": -1}), &answer("7"), Some(json!(7)))
            .starts_with("numeric: tolerance"));
    }

    #[test]
    fn tool_calls_in_order_allow_extras() {
        let made = calls(&[
            ("search", json!({"q": "weather", "limit": 5})),
            ("get_weather", json!({"city": "Oslo", "units": "metric"})),
            ("send_email", json!({"to": "a@b.c"})),
        ]);
        let s = json!({"kind": "tool_calls", "expected": [
            {"name": "search"},
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
        ]});
        let (n, r) = fraction(s, &made, None);
        assert_eq!(n, 1.0);
        assert_eq!(r, "matched 2 of 2 expected calls in order");

        let s = json!({"kind": "tool_calls", "expected": [
            {"name": "search"},
            {"name": "send_email"},
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
            {"name": "get_weather", "arguments": {"city": "Bergen"}},
        ]});
        let (n, r) = fraction(s, &made, None);
        assert_eq!(n, 0.5);
        assert_eq!(
            r,
            r#"matched 2 of 4 expected calls in order; missing get_weather{"city":"Bergen"}; out of order: get_weather{"city":"Oslo"}"#
        );

        // The most calls in order, not the first found: b, c beat a alone.
        let made = calls(&[("b", json!({})), ("c", json!({})), ("a", json!({}))]);
        let s = json!({"kind": "tool_calls", "order": "in_order", "expected": [{"name": "a"}, {"name": "b"}, {"name": "c"}]});
        let (n, r) = fraction(s, &made, None);
        assert!((n - 2.0 / 3.0).abs() < 1e-12, "{n}");
        assert_eq!(r, "matched 2 of 3 expected calls in order; out of order: a");
    }

    #[test]
    fn tool_calls_missing_ones_are_named() {
        let made = calls(&[("search", json!({"q": "x"})), ("get_time", json!({}))]);
        let s = json!({"kind": "tool_calls", "expected": [
            {"name": "search"}, {"name": "get_time"}, {"name": "get_weather", "arguments": {"city": "Oslo"}},
        ]});
        let (n, r) = fraction(s, &made, None);
        assert!((n - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r, r#"matched 2 of 3 expected calls in order; missing get_weather{"city":"Oslo"}"#);
        let many: Vec<Value> = (0..5).map(|i| json!({"name": format!("t{i}")})).collect();
        let (n, r) = fraction(json!({"kind": "tool_calls", "order": "any", "expected": many}), &made, None);
        assert_eq!(n, 0.0);
        assert_eq!(r, "matched 0 of 5 expected calls; missing t0, t1, t2 and 2 more");
    }

    #[test]
    fn tool_calls_exact_order_wants_the_same_sequence() {
        let s = |expected: Value| json!({"kind": "tool_calls", "order": "exact", "expected": expected});
        let made = calls(&[("a", json!({"x": 1})), ("b", json!({})), ("c", json!({}))]);
        let (n, r) =
            fraction(s(json!([{"name": "a", "arguments": {"x": 1}}, {"name": "b"}, {"name": "c"}])), &made, None);
        assert_eq!((n, r.as_str()), (1.0, "matched 3 of 3 expected calls in exact order"));
        // An extra call keeps it under 1.
        let (n, r) = fraction(s(json!([{"name": "a"}, {"name": "b"}])), &made, None);
        assert!((n - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r, "matched 2 of 2 expected calls in exact order; 1 call extra: c{}");
        // A wrong call at a position.
        let (n, r) =
            fraction(s(json!([{"name": "a", "arguments": {"x": 2}}, {"name": "b"}, {"name": "c"}])), &made, None);
        assert!((n - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r, r#"matched 2 of 3 expected calls in exact order; call 1: expected a{"x":2}, got a{"x":1}"#);
        // The right calls in another order.
        let (n, r) = fraction(s(json!([{"name": "c"}, {"name": "b"}, {"name": "a"}])), &made, None);
        assert!((n - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            r,
            "matched 1 of 3 expected calls in exact order; call 1: expected c, got a{\"x\":1} (and 1 more difference)"
        );
        // Too few.
        let (n, r) = fraction(s(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}])), &made, None);
        assert_eq!(n, 0.75);
        assert_eq!(r, "matched 3 of 4 expected calls in exact order; missing d");
    }

    #[test]
    fn tool_calls_in_any_order_match_one_to_one() {
        let s = |expected: Value| json!({"kind": "tool_calls", "order": "any", "expected": expected});
        let made = calls(&[("get_weather", json!({"city": "Oslo"})), ("get_weather", json!({"city": "Paris"}))]);
        // Reversed order is fine.
        let (n, _) = fraction(
            s(
                json!([{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}]),
            ),
            &made,
            None,
        );
        assert_eq!(n, 1.0);
        // A generic expected call does not take the only call a specific one fits.
        let (n, r) = fraction(
            s(json!([{"name": "get_weather"}, {"name": "get_weather", "arguments": {"city": "Oslo"}}])),
            &made,
            None,
        );
        assert_eq!((n, r.as_str()), (1.0, "matched 2 of 2 expected calls"));
        // One call cannot stand for two expected.
        let one = calls(&[("get_weather", json!({"city": "Oslo"}))]);
        let (n, r) = fraction(s(json!([{"name": "get_weather"}, {"name": "get_weather"}])), &one, None);
        assert_eq!(n, 0.5);
        assert_eq!(r, "matched 1 of 2 expected calls; missing get_weather");
    }

    #[test]
    fn tool_call_arguments_match_as_a_subset() {
        let made = calls(&[(
            "book",
            json!({"trip": {"from": "OSL", "to": "CDG", "date": "2025-05-01", "seats": 2.0}, "tags": ["a", "b"], "note": null}),
        )]);
        let fit = |args: Value| {
            let s = json!({"kind": "tool_calls", "expected": [{"name": "book", "arguments": args}]});
            fraction(s, &made, None).0 == 1.0
        };
        assert!(fit(json!({})));
        assert!(fit(json!({"trip": {"to": "CDG"}})));
        assert!(fit(json!({"trip": {"to": "CDG", "seats": 2}})));
        assert!(fit(json!({"tags": ["a", "b"], "note": null})));
        assert!(!fit(json!({"trip": {"to": "ARN"}})));
        assert!(!fit(json!({"trip": {"to": "CDG", "class": "economy"}})));
        assert!(!fit(json!({"tags": ["a"]})));
        assert!(!fit(json!({"tags": ["b", "a"]})));
        assert!(!fit(json!({"trip": "CDG"})));
        // Arguments recorded as JSON text.
        let text = calls(&[("book", json!("{\"trip\": {\"to\": \"CDG\"}}"))]);
        let s = json!({"kind": "tool_calls", "expected": [{"name": "book", "arguments": {"trip": {"to": "CDG"}}}]});
        assert_eq!(fraction(s, &text, None).0, 1.0);
    }

    #[test]
    fn tool_calls_from_the_item() {
        let made = calls(&[("search", json!({"q": "x"})), ("answer", json!({}))]);
        let s = json!({"kind": "tool_calls"});
        let list = json!([{"name": "search", "arguments": {"q": "x"}}, {"name": "answer"}]);
        assert_eq!(fraction(s.clone(), &made, Some(list.clone())).0, 1.0);
        assert_eq!(fraction(s.clone(), &made, Some(json!({"tool_calls": list, "answer": "x"}))).0, 1.0);
        assert_eq!(fraction(s.clone(), &made, Some(json!([{"name": "other"}]))).0, 0.0);
        let e = error(s.clone(), &made, Some(json!("search")));
        assert!(e.starts_with("tool_calls: the dataset item's expected value must be a list"), "{e}");
        let e = error(s.clone(), &made, Some(json!([{"tool": "search"}])));
        assert!(e.starts_with("tool_calls: the dataset item's expected calls: "), "{e}");
        let many: Vec<Value> = (0..101).map(|_| json!({"name": "a"})).collect();
        let e = error(s, &made, Some(json!(many)));
        assert_eq!(e, "tool_calls: the dataset item's expected calls: at most 100 calls");
    }

    #[test]
    fn no_expected_calls_means_none_made() {
        for order in ["exact", "in_order", "any"] {
            let s = json!({"kind": "tool_calls", "expected": [], "order": order});
            let (n, r) = fraction(s.clone(), &ScoreSubject::default(), None);
            assert_eq!((n, r.as_str()), (1.0, "no tool calls expected, none made"));
            let (n, r) = fraction(s, &calls(&[("search", json!({"q": "x"}))]), None);
            assert_eq!((n, r.as_str()), (0.0, r#"no tool calls expected, made 1: search{"q":"x"}"#));
        }
    }

    #[test]
    fn bounds_of_each_kind() {
        let run_of = |duration_ms, cost_usd, turns| ScoreSubject { duration_ms, cost_usd, turns, ..Default::default() };
        let done = run_of(Some(1500), Some(0.0123), 3);
        let r = passes(json!({"kind": "bounds", "max_duration_ms": 2000}), &done, None);
        assert_eq!(r, "within bounds: duration 1.5 s ≤ 2 s");
        let r = fails(json!({"kind": "bounds", "max_duration_ms": 1000}), &done, None);
        assert_eq!(r, "duration 1.5 s over its bound of 1 s");
        let r = fails(json!({"kind": "bounds", "max_cost_usd": 0.01}), &done, None);
        assert_eq!(r, "cost $0.0123 over its bound of $0.01");
        passes(json!({"kind": "bounds", "max_cost_usd": 0.0123}), &done, None);
        let r = fails(json!({"kind": "bounds", "max_turns": 2}), &done, None);
        assert_eq!(r, "3 turns over its bound of 2");
        let r =
            passes(json!({"kind": "bounds", "max_duration_ms": 1500, "max_cost_usd": 1, "max_turns": 3}), &done, None);
        assert_eq!(r, "within bounds: duration 1.5 s ≤ 1.5 s, cost $0.0123 ≤ $1.00, 3 turns ≤ 3");
        let r = fails(json!({"kind": "bounds", "max_duration_ms": 900, "max_turns": 1}), &done, None);
        assert_eq!(r, "duration 1.5 s over its bound of 900 ms; 3 turns over its bound of 1");
        // What is not known cannot be shown within a bound.
        let unknown = run_of(None, None, 1);
        let r = fails(json!({"kind": "bounds", "max_duration_ms": 1000, "max_cost_usd": 0.5}), &unknown, None);
        assert_eq!(r, "duration unknown (bound 1 s); cost unknown (bound $0.50)");
        passes(json!({"kind": "bounds", "max_turns": 1}), &unknown, None);
        // Summed prices are not exact in binary.
        passes(json!({"kind": "bounds", "max_cost_usd": 0.3}), &run_of(None, Some(0.1 + 0.2), 0), None);
        let e = error(json!({"kind": "bounds"}), &done, None);
        assert_eq!(e, "bounds: give at least one of max_duration_ms, max_cost_usd, max_turns");
    }

    #[test]
    fn check_refuses_what_cannot_be_applied() {
        for ok in [
            json!({"kind": "exact"}),
            json!({"kind": "regex", "pattern": "^a+$"}),
            json!({"kind": "json_schema", "schema": {"type": "object"}}),
            json!({"kind": "bounds", "max_turns": 3}),
        ] {
            assert_eq!(check(&scorer(ok)), Ok(()));
        }
        let e = check(&scorer(json!({"kind": "regex", "pattern": "a".repeat(1001)}))).unwrap_err();
        assert_eq!(e, "regex: pattern: at most 1000 characters");
        assert!(check(&scorer(json!({"kind": "regex", "pattern": "a)"})))
            .unwrap_err()
            .starts_with("regex: pattern does not compile"));
        let e = check(&scorer(json!({"kind": "json_schema", "schema": 3}))).unwrap_err();
        assert!(e.starts_with("json_schema: schema: must be a JSON Schema"), "{e}");
        let e = check(&scorer(json!({"kind": "json_equal", "ignore_paths": ["id"]}))).unwrap_err();
        assert!(e.starts_with("json_equal: ignore_paths[0]: "), "{e}");
    }

    #[test]
    fn quoted_text_is_cut_on_a_character_boundary() {
        let long: String = "é".repeat(100) + &"日本".repeat(50) + "🦀";
        let r = fails(json!({"kind": "exact", "expected": "x"}), &answer(&long), None);
        let want: String = "é".repeat(100) + &"日本".repeat(10) + "…";
        assert_eq!(r, format!("expected \"x\", got \"{want}\" (differs at character 1)"));
        let r = fails(json!({"kind": "contains", "expected": "🦀".repeat(200)}), &answer("crab"), None);
        assert!(r.starts_with(&format!("output does not contain \"{}…\"", "🦀".repeat(120))), "{r}");
        assert_eq!(clip(&"a".repeat(120)), "a".repeat(120));
        assert_eq!(clip(&"a".repeat(121)), format!("{}…", "a".repeat(120)));
        assert_eq!(clip("日本"), "日本");
    }

    #[test]
    fn amounts_and_durations_read_well() {
        assert_eq!(usd(0.01), "$0.01");
        assert_eq!(usd(0.0123), "$0.0123");
        assert_eq!(usd(1.5), "$1.50");
        assert_eq!(usd(0.00000123), "$0.00000123");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(61_234), "61.234 s");
        assert_eq!(duration(60_000), "60 s");
    }
}
