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

use super::calls::tool_calls;
use crate::model::{expected_calls_problem, ExpectedCall, ScoreSubject, ScoreValue, Scorer, Verdict};

/// Characters of quoted text (an answer, an expected value) kept in a reason.
const QUOTE_CHARS: usize = 120;
/// Bytes a compiled pattern, and each of its lazy DFAs, may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
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
        Scorer::Judge { .. } => return Err("a judge runs a model: the engine applies it".into()),
    })
}

pub(super) fn verdict(ok: bool, reason: String) -> Verdict {
    Verdict { value: ScoreValue::Bool(ok), reason, label: None, judge_run_id: None }
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
pub(super) fn clip(text: &str) -> Cow<'_, str> {
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
pub(super) fn more(count: usize, thing: &str) -> String {
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
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
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

// ---- shared -----------------------------------------------------------------

/// `1 call`, `2 calls`.
pub(super) fn plural(n: usize, thing: &str) -> String {
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
mod tests;
