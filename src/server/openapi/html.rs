//! The API reference page (`GET /api/docs`), rendered on the server from the
//! generated document: operations grouped by resource (the document's
//! tags), each with its parameters, request body and answers, then every
//! schema with its fields and bounds.
//!
//! One self-contained HTML file with its own small style sheet: no script,
//! and nothing loaded from anywhere (no CDN, no web font), so it works
//! offline and behind any proxy. Every text from the document is escaped.

use std::fmt::Write;

use serde_json::{Map, Value};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

const STYLE: &str = "\
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}\
header,main{max-width:1100px;margin:0 auto;padding:0 24px}\
header{padding-top:24px}h1{margin:0 0 4px}h2{margin-top:40px;border-bottom:1px solid #d0d5dd;padding-bottom:4px}\
h3{margin:0;font-size:16px}code,pre{font-family:ui-monospace,monospace;font-size:13px}\
nav>ul{columns:2;padding-left:18px}nav>ul>li{break-inside:avoid;margin-bottom:6px}article{background:#fff;border:1px solid #e1e4e8;border-radius:6px;\
padding:12px 16px;margin:14px 0}table{border-collapse:collapse;width:100%;margin:6px 0}\
th,td{text-align:left;vertical-align:top;border-top:1px solid #eef0f2;padding:4px 8px}\
th{font-weight:600;color:#4a5160}.method{display:inline-block;min-width:58px;font-weight:700;\
text-transform:uppercase;font-size:13px}.get{color:#1a7f37}.post{color:#0969da}.put{color:#9a6700}\
.delete{color:#cf222e}.muted{color:#5f6878}.req{color:#cf222e}dl{margin:4px 0}dt{font-weight:600}\
dd{margin:0 0 6px 16px}";

/// The page for the document `doc`.
pub fn page(doc: &Value) -> String {
    let mut out = String::with_capacity(128 * 1024);
    let info = &doc["info"];
    let title = text(&info["title"]);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} reference</title><style>{STYLE}</style></head><body><header><h1>{}</h1>\
         <p class=\"muted\">OpenAPI {} · version {} · <a href=\"/api/openapi.json\">the document as JSON</a> · \
         <a href=\"/\">back to the app</a></p>{}</header><main>",
        escape(&title),
        escape(&title),
        escape(&text(&doc["openapi"])),
        escape(&text(&info["version"])),
        paragraphs(&text(&info["description"])),
    );
    let operations = operations(doc);
    out.push_str("<nav><h2>Operations</h2><ul>");
    for tag in tags(doc) {
        let _ = write!(out, "<li><a href=\"#tag-{}\">{}</a>", anchor(&tag.name), escape(&tag.name));
        out.push_str("<ul>");
        for op in operations.iter().filter(|op| op.tag == tag.name) {
            let _ = write!(
                out,
                "<li><a href=\"#{}\"><span class=\"method {m}\">{m}</span> <code>{}</code></a></li>",
                op.anchor(),
                escape(op.path),
                m = op.method,
            );
        }
        out.push_str("</ul></li>");
    }
    out.push_str("<li><a href=\"#schemas\">Schemas</a></li></ul></nav>");
    for tag in tags(doc) {
        let _ = write!(out, "<section id=\"tag-{}\"><h2>{}</h2>", anchor(&tag.name), escape(&tag.name));
        if !tag.description.is_empty() {
            let _ = write!(out, "<p>{}</p>", prose(&tag.description));
        }
        for op in operations.iter().filter(|op| op.tag == tag.name) {
            operation(&mut out, op, &doc["components"]["responses"]);
        }
        out.push_str("</section>");
    }
    out.push_str("<section id=\"schemas\"><h2>Schemas</h2>");
    if let Some(schemas) = doc["components"]["schemas"].as_object() {
        for (name, schema) in schemas {
            let _ = write!(out, "<article id=\"schema-{}\"><h3>{}</h3>", anchor(name), escape(name));
            schema_body(&mut out, schema);
            out.push_str("</article>");
        }
    }
    out.push_str("</section></main></body></html>\n");
    out
}

struct Tag {
    name: String,
    description: String,
}

/// The document's tags in its order, then any an operation names besides.
fn tags(doc: &Value) -> Vec<Tag> {
    let mut tags: Vec<Tag> = doc["tags"]
        .as_array()
        .map(|tags| tags.iter().map(|t| Tag { name: text(&t["name"]), description: text(&t["description"]) }).collect())
        .unwrap_or_default();
    for op in operations(doc) {
        if !tags.iter().any(|t| t.name == op.tag) {
            tags.push(Tag { name: op.tag, description: String::new() });
        }
    }
    tags
}

struct Operation<'a> {
    method: &'static str,
    path: &'a str,
    tag: String,
    op: &'a Value,
}

impl Operation<'_> {
    fn anchor(&self) -> String {
        format!("op-{}-{}", self.method, anchor(self.path))
    }
}

/// Every operation, by path then method.
fn operations(doc: &Value) -> Vec<Operation<'_>> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                let tag = op["tags"].get(0).map(text).unwrap_or_else(|| "other".into());
                ops.push(Operation { method, path, tag, op });
            }
        }
    }
    ops
}

/// One operation; `shared` are the document's response components.
fn operation(out: &mut String, op: &Operation, shared: &Value) {
    let _ = write!(
        out,
        "<article id=\"{}\"><h3><span class=\"method {m}\">{m}</span> <code>{}</code></h3>",
        op.anchor(),
        escape(op.path),
        m = op.method
    );
    let summary = text(&op.op["summary"]);
    if !summary.is_empty() {
        let _ = write!(out, "<p>{}</p>", escape(&summary));
    }
    out.push_str(&paragraphs(&text(&op.op["description"])));
    if let Some(params) = op.op["parameters"].as_array().filter(|p| !p.is_empty()) {
        out.push_str("<table><tr><th>parameter</th><th>in</th><th>schema</th><th>description</th></tr>");
        for p in params {
            let required =
                if p["required"].as_bool() == Some(true) { " <span class=\"req\">required</span>" } else { "" };
            let _ = write!(
                out,
                "<tr><td><code>{}</code>{required}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&text(&p["name"])),
                escape(&text(&p["in"])),
                type_of(&p["schema"]),
                prose(&text(&p["description"])),
            );
        }
        out.push_str("</table>");
    }
    if let Some(body) = op.op.get("requestBody") {
        let required = if body["required"].as_bool() == Some(true) { "required" } else { "optional" };
        let _ = write!(out, "<p><b>Request body</b> ({required})");
        let description = text(&body["description"]);
        if !description.is_empty() {
            let _ = write!(out, ": {}", prose(&description));
        }
        out.push_str("</p>");
        content(out, &body["content"]);
    }
    out.push_str("<table><tr><th>answer</th><th>description</th><th>body</th></tr>");
    for (status, response) in op.op["responses"].as_object().into_iter().flatten() {
        let response = match response.get("$ref").and_then(Value::as_str) {
            Some(reference) => &shared[reference.rsplit('/').next().unwrap_or(reference)],
            None => response,
        };
        let mut body = String::new();
        content(&mut body, &response["content"]);
        for (name, header) in response["headers"].as_object().into_iter().flatten() {
            let _ = write!(body, "<div>header <code>{}</code>: {}</div>", escape(name), type_of(&header["schema"]));
        }
        let description = text(&response["description"]);
        let _ = write!(out, "<tr><td>{}</td><td>{}</td><td>{body}</td></tr>", escape(status), prose(&description));
    }
    out.push_str("</table></article>");
}

/// Each media type of a `content` object with its schema.
fn content(out: &mut String, content: &Value) {
    for (media, body) in content.as_object().into_iter().flatten() {
        let _ = write!(out, "<div><code>{}</code>: {}</div>", escape(media), type_of(&body["schema"]));
    }
}

/// A schema's description, composition and fields.
fn schema_body(out: &mut String, schema: &Value) {
    out.push_str(&paragraphs(&text(&schema["description"])));
    let summary = constraints(schema);
    if !summary.is_empty() {
        let _ = write!(out, "<p>{summary}</p>");
    }
    for keyword in ["allOf", "oneOf", "anyOf"] {
        if let Some(parts) = schema[keyword].as_array() {
            let label = match keyword {
                "allOf" => "all of",
                "oneOf" => "one of",
                _ => "any of",
            };
            let _ = write!(out, "<p><b>{label}</b></p><dl>");
            for part in parts {
                let _ = write!(out, "<dt>{}</dt><dd>", type_of(part));
                out.push_str(&paragraphs(&text(&part["description"])));
                if part.get("$ref").is_none() {
                    fields(out, part);
                }
                out.push_str("</dd>");
            }
            out.push_str("</dl>");
        }
    }
    fields(out, schema);
}

/// The table of an object schema's properties.
fn fields(out: &mut String, schema: &Value) {
    let Some(properties) = schema["properties"].as_object().filter(|p| !p.is_empty()) else { return };
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    out.push_str("<table><tr><th>field</th><th>schema</th><th>description</th></tr>");
    for (name, field) in properties {
        let mark = if required.contains(&name.as_str()) { " <span class=\"req\">required</span>" } else { "" };
        let _ = write!(
            out,
            "<tr><td><code>{}</code>{mark}</td><td>{}</td><td>{}</td></tr>",
            escape(name),
            type_of(field),
            prose(&text(&field["description"])),
        );
    }
    out.push_str("</table>");
}

/// A one-line HTML summary of a schema: its type (with links to named
/// schemas) and its bounds.
fn type_of(schema: &Value) -> String {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        return format!("<a href=\"#schema-{}\">{}</a>", anchor(name), escape(name));
    }
    let Some(map) = schema.as_object() else { return "any".into() };
    let types: Vec<String> = match map.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(types)) => types.iter().map(text).collect(),
        _ => Vec::new(),
    };
    let mut html = escape(&types.join(" or "));
    if types.iter().any(|t| t == "array") {
        let items = type_of(map.get("items").unwrap_or(&Value::Null));
        let or_null = if types.iter().any(|t| t == "null") { " or null" } else { "" };
        html = format!("array of {items}{or_null}");
    }
    for keyword in ["oneOf", "anyOf", "allOf"] {
        if let Some(parts) = map.get(keyword).and_then(Value::as_array) {
            let joined: Vec<String> = parts.iter().map(type_of).collect();
            let word = if keyword == "allOf" { " and " } else { " or " };
            html = if html.is_empty() { joined.join(word) } else { format!("{html} ({})", joined.join(word)) };
        }
    }
    if html.is_empty() {
        html = "any".into();
    }
    let bounds = constraints(schema);
    if bounds.is_empty() {
        html
    } else {
        format!("{html} <span class=\"muted\">{bounds}</span>")
    }
}

/// A schema's enum, format and bounds, as escaped text.
fn constraints(schema: &Value) -> String {
    let Some(map) = schema.as_object() else { return String::new() };
    let mut parts = Vec::new();
    if let Some(values) = map.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().map(|v| format!("<code>{}</code>", escape(&v.to_string()))).collect();
        parts.push(format!("one of {}", shown.join(", ")));
    }
    let keyword = |name: &str, label: &str, parts: &mut Vec<String>, map: &Map<String, Value>| {
        if let Some(v) = map.get(name) {
            parts.push(format!("{label} {}", escape(&compact(v))));
        }
    };
    keyword("format", "format", &mut parts, map);
    keyword("minimum", "≥", &mut parts, map);
    keyword("maximum", "≤", &mut parts, map);
    keyword("minLength", "min length", &mut parts, map);
    keyword("maxLength", "max length", &mut parts, map);
    keyword("minItems", "min items", &mut parts, map);
    keyword("maxItems", "max items", &mut parts, map);
    keyword("maxProperties", "max properties", &mut parts, map);
    keyword("pattern", "pattern", &mut parts, map);
    keyword("contentMediaType", "content", &mut parts, map);
    if let Some(inner) = map.get("contentSchema") {
        parts.push(format!("holding {}", type_of(inner)));
    }
    if let Some(not) = map.get("not") {
        parts.push(format!("not {}", constraints(not)));
    }
    if map.get("additionalProperties") == Some(&Value::Bool(false)) {
        parts.push("no other fields".into());
    } else if let Some(values @ Value::Object(_)) = map.get("additionalProperties") {
        parts.push(format!("values: {}", type_of(values)));
    }
    if let Some(names) = map.get("propertyNames") {
        parts.push(format!("keys: {}", constraints(names)));
    }
    parts.join("; ")
}

/// A JSON value as text: strings bare, others as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Paragraphs (blank-line separated) of escaped text.
fn paragraphs(text: &str) -> String {
    text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).map(|p| format!("<p>{}</p>", prose(p))).collect()
}

/// A description as HTML: escaped, with Markdown's `code` spans (the
/// descriptions are the engine's doc comments) as `<code>`. The tags are
/// added after escaping, so nothing in the text can open one; a lone
/// backtick stays as it is.
fn prose(text: &str) -> String {
    let escaped = escape(text);
    let parts: Vec<&str> = escaped.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return escaped; // an odd number of backticks: not code spans
    }
    let mut out = String::with_capacity(escaped.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// `text` with HTML's special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An id for an anchor: letters and digits kept, anything else `-`.
fn anchor(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_from_the_document_is_escaped() {
        let doc = json!({
            "openapi": "3.1.0",
            "info": {"title": "<t>", "version": "1", "description": "a <script>alert(1)</script> b"},
            "tags": [{"name": "x", "description": "d&d"}],
            "paths": {"/a/{id}": {"get": {"tags": ["x"], "summary": "\"quoted\"", "responses": {"200": {"description": "<ok>"}}}}},
            "components": {"schemas": {"S": {"type": "object", "properties": {"f": {"type": "string", "pattern": "<x>"}}}}},
        });
        let html = page(&doc);
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("&lt;t&gt;") && html.contains("d&amp;d") && html.contains("&quot;quoted&quot;"));
        assert!(html.contains("pattern &lt;x&gt;"), "{html}");
        assert!(html.contains("id=\"op-get--a--id-\""), "{html}");
    }

    #[test]
    fn types_link_their_schemas_and_show_bounds() {
        assert_eq!(type_of(&json!({"$ref": "#/components/schemas/Run"})), "<a href=\"#schema-Run\">Run</a>");
        let limit = type_of(&json!({"type": ["integer", "null"], "minimum": 1, "maximum": 200}));
        assert_eq!(limit, "integer or null <span class=\"muted\">≥ 1; ≤ 200</span>");
        let list =
            type_of(&json!({"type": "array", "items": {"$ref": "#/components/schemas/ToolName"}, "maxItems": 100}));
        assert!(list.starts_with("array of <a href=\"#schema-ToolName\">") && list.contains("max items 100"), "{list}");
    }

    #[test]
    fn code_spans_become_code_and_cannot_smuggle_markup() {
        assert_eq!(prose("set `max_turns` to <5>"), "set <code>max_turns</code> to &lt;5&gt;");
        assert_eq!(prose("`<script>`"), "<code>&lt;script&gt;</code>");
        assert_eq!(prose("a lone ` stays"), "a lone ` stays");
    }
}
