//! The built-in model's planner, used when a run has no script.
//!
//! For the latest human message it first calls tools: `calculator` for an
//! arithmetic expression in the message, and any attached tool whose name
//! (or the name with spaces for underscores) appears in the message, with
//! arguments from a JSON object in the message, else from the tool's schema
//! (`default`, then `examples`, then an empty value of the property's type).
//! Once the results are in, it answers with a text built from them.

use serde_json::{Map, Value};

use super::ModelRequest;
use crate::model::{MessageBody, ResultType, ToolInfo};
use crate::tools::calculator;

/// What the built-in model does in one turn.
#[derive(Debug, Default, PartialEq)]
pub struct Turn {
    pub text: Option<String>,
    pub tool_calls: Vec<(String, Value)>,
    /// A scripted call's own `reasoning`, by the call's place in `tool_calls`.
    pub call_reasoning: Vec<(usize, String)>,
    pub error: Option<String>,
}

impl Turn {
    /// Reads one scripted turn.
    pub fn from_script(turn: &Value) -> Result<Turn, String> {
        let obj = turn.as_object().ok_or("a turn must be a JSON object")?;
        if let Some(k) = obj.keys().find(|k| !["text", "tool_calls", "error"].contains(&k.as_str())) {
            return Err(format!("unknown key `{k}` (expected text, tool_calls or error)"));
        }
        let text = match obj.get("text") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`text` must be a string".into()),
        };
        let error = match obj.get("error") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`error` must be a string".into()),
        };
        let mut tool_calls = Vec::new();
        let mut call_reasoning = Vec::new();
        if let Some(calls) = obj.get("tool_calls") {
            for call in calls.as_array().ok_or("`tool_calls` must be a list")? {
                let name = call.get("name").and_then(Value::as_str).ok_or("each tool call needs a string `name`")?;
                let args = call.get("arguments").cloned().unwrap_or(Value::Object(Map::new()));
                match call.get("reasoning") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(why)) => call_reasoning.push((tool_calls.len(), why.clone())),
                    Some(_) => return Err("a tool call's `reasoning` must be a string".into()),
                }
                tool_calls.push((name.to_owned(), args));
            }
        }
        if text.is_none() && tool_calls.is_empty() && error.is_none() {
            return Err("a turn needs `text`, `tool_calls` or `error`".into());
        }
        Ok(Turn { text, tool_calls, call_reasoning, error })
    }
}

/// Plans the next turn for `req` (see the module docs).
pub fn plan(req: &ModelRequest) -> Turn {
    let last_human = req.messages.iter().rposition(|m| matches!(m.body, MessageBody::Human { .. }));
    let Some(h) = last_human else {
        return Turn { text: Some("There is no message to answer.".into()), ..Turn::default() };
    };
    let MessageBody::Human { message } = &req.messages[h].body else { unreachable!() };
    let since = &req.messages[h + 1..];
    let acted = since.iter().any(|m| matches!(m.body, MessageBody::Agent { .. }));
    if !acted {
        let calls = plan_calls(message, &req.tools);
        if !calls.is_empty() {
            return Turn { tool_calls: calls, ..Turn::default() };
        }
    }
    let mut lines = Vec::new();
    for m in since {
        if let MessageBody::InvocationResult { tool_name, result_type, result, .. } = &m.body {
            lines.push(match result_type {
                ResultType::Resolution => describe_result(tool_name, result),
                ResultType::Rejection => format!("- {tool_name} failed: {}", short(result)),
            });
        }
    }
    let text = if lines.is_empty() {
        format!("No attached tool matches this request, so I can only repeat it: \"{message}\"")
    } else {
        format!("Here is what I found:\n{}", lines.join("\n"))
    };
    let text = match &req.result_schema {
        Some(schema) => structured(schema, &text, since).to_string(),
        None => text,
    };
    Turn { text: Some(text), ..Turn::default() }
}

/// A value for a simple schema (objects of strings, numbers, booleans and
/// arrays) built from the answer text and the tool results.
fn structured(schema: &Value, text: &str, since: &[std::sync::Arc<crate::model::Message>]) -> Value {
    let numbers: Vec<Value> = since
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::InvocationResult { result_type: ResultType::Resolution, result, .. } => {
                result.get("value").filter(|v| v.is_number()).cloned()
            }
            _ => None,
        })
        .collect();
    fill(schema, text, &numbers)
}

fn fill(schema: &Value, text: &str, numbers: &[Value]) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") | None if schema.get("properties").is_some() => {
            let mut out = Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (name, prop) in props {
                    out.insert(name.clone(), fill(prop, text, numbers));
                }
            }
            Value::Object(out)
        }
        Some("number") => numbers.first().cloned().unwrap_or(Value::from(0)),
        Some("integer") => Value::from(numbers.first().and_then(Value::as_f64).unwrap_or(0.0).round() as i64),
        Some("boolean") => Value::Bool(true),
        Some("array") => Value::Array(numbers.to_vec()),
        Some("object") => Value::Object(Map::new()),
        _ => match schema.get("enum").and_then(|e| e.get(0)) {
            Some(first) => first.clone(),
            None => Value::String(text.to_owned()),
        },
    }
}

fn describe_result(tool: &str, result: &Value) -> String {
    match (result.get("expression"), result.get("value")) {
        (Some(Value::String(e)), Some(v)) if tool == "calculator" => format!("- {e} = {v}"),
        _ => format!("- {tool} returned {}", short(result)),
    }
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

fn plan_calls(message: &str, tools: &[ToolInfo]) -> Vec<(String, Value)> {
    let lower = message.to_lowercase();
    let json_args = first_json_object(message);
    let mut calls = Vec::new();
    for tool in tools {
        let mentioned =
            lower.contains(&tool.name.to_lowercase()) || lower.contains(&tool.name.to_lowercase().replace('_', " "));
        if tool.name == "calculator" {
            if let Some(expr) = find_expression(message) {
                let reason = format!("The message asks for `{expr}`, which the calculator evaluates.");
                let args = with_reason(&tool.schema, serde_json::json!({ "expression": expr }), reason);
                calls.push((tool.name.clone(), args));
                continue;
            }
        }
        if mentioned {
            let args = json_args.clone().unwrap_or_else(|| args_from_schema(&tool.schema, message));
            let reason = format!("The message names `{}`, so I call it.", tool.name);
            calls.push((tool.name.clone(), with_reason(&tool.schema, args, reason)));
        }
    }
    calls
}

/// When the tool asks for a `reasoning` (a run with reasoning traces), the
/// arguments get a generated one.
fn with_reason(schema: &Value, mut args: Value, reason: String) -> Value {
    let asks = schema.get("properties").and_then(|p| p.get("reasoning")).is_some();
    if let (true, Some(obj)) = (asks, args.as_object_mut()) {
        obj.entry("reasoning").or_insert(Value::String(reason));
    }
    args
}

/// The longest run of arithmetic characters that the calculator accepts and
/// that contains an operator (a lone number is not a calculation).
pub fn find_expression(message: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_digit() || " .+-*/%^()".contains(c);
    let mut best: Option<String> = None;
    for run in message.split(|c: char| !allowed(c)) {
        let expr = run.trim().trim_start_matches([')', '+', '*', '/', '%', '^', '.']);
        let expr = expr.trim_end_matches(['(', '+', '-', '*', '/', '%', '^', '.']).trim();
        let has_op = expr.char_indices().any(|(i, c)| i > 0 && "+-*/%^".contains(c));
        if has_op
            && expr.chars().any(|c| c.is_ascii_digit())
            && calculator::evaluate(expr).is_ok()
            && best.as_ref().is_none_or(|b| expr.len() > b.len())
        {
            best = Some(expr.to_owned());
        }
    }
    best
}

fn first_json_object(message: &str) -> Option<Value> {
    message.match_indices('{').find_map(|(start, _)| {
        let mut stream = serde_json::Deserializer::from_str(&message[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v @ Value::Object(_))) => Some(v),
            _ => None,
        }
    })
}

/// Arguments from the schema: each property's `default`, else its first
/// example, else (when required) an empty value of its type; a required
/// text `input` (an agent's tool) gets the message itself.
fn args_from_schema(schema: &Value, message: &str) -> Value {
    let mut args = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let value = prop.get("default").cloned().or_else(|| prop.get("examples").and_then(|e| e.get(0)).cloned());
            let value = match value {
                Some(v) => v,
                None if name == "input"
                    && required.contains(&"input")
                    && prop.get("type") == Some(&"string".into()) =>
                {
                    Value::String(message.to_owned())
                }
                None if required.contains(&name.as_str()) => empty_of(prop),
                None => continue,
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

fn empty_of(prop: &Value) -> Value {
    match prop.get("type").and_then(Value::as_str) {
        Some("number") | Some("integer") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        Some("array") => Value::Array(vec![]),
        Some("object") => Value::Object(Map::new()),
        _ => Value::String(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_the_arithmetic_in_a_sentence() {
        assert_eq!(find_expression("What is (12 + 30) * 2?").as_deref(), Some("(12 + 30) * 2"));
        assert_eq!(find_expression("compute 2^10 - 1 please").as_deref(), Some("2^10 - 1"));
        assert_eq!(find_expression("wait {\"seconds\": 30}"), None);
        assert_eq!(find_expression("no numbers here"), None);
    }

    #[test]
    fn takes_arguments_from_json_then_schema() {
        assert_eq!(first_json_object("send {\"to\": \"a@b.c\"} now"), Some(json!({"to": "a@b.c"})));
        let schema = json!({"type": "object", "required": ["to", "n"],
            "properties": {"to": {"type": "string"}, "n": {"type": "integer"},
                           "tz": {"type": "string", "default": "UTC"}, "opt": {"type": "string"}}});
        assert_eq!(args_from_schema(&schema, "hi"), json!({"to": "", "n": 0, "tz": "UTC"}));
        let agent = json!({"type": "object", "required": ["input"], "properties": {"input": {"type": "string"}}});
        assert_eq!(args_from_schema(&agent, "ask it"), json!({"input": "ask it"}));
    }

    #[test]
    fn fills_a_simple_schema() {
        let schema = json!({"type": "object", "properties": {
            "answer": {"type": "string"}, "value": {"type": "number"}, "ok": {"type": "boolean"},
            "n": {"type": "integer"}, "all": {"type": "array"}}});
        let v = fill(&schema, "text", &[json!(84)]);
        assert_eq!(v, json!({"answer": "text", "value": 84, "ok": true, "n": 84, "all": [84]}));
    }

    #[test]
    fn script_turns_are_validated() {
        assert!(Turn::from_script(&json!({"text": "hi"})).is_ok());
        assert!(Turn::from_script(&json!({})).is_err());
        assert!(Turn::from_script(&json!({"tool_calls": [{"arguments": {}}]})).is_err());
    }
}
