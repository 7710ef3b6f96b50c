//! What an MCP call's result becomes: the JSON runlens stores as the call's
//! result and the trace shows, and the lighter view the model reads.
//!
//! Stored shape (a contract with the trace page):
//! ```json
//! {"content": [
//!    {"type": "text", "text": "…"},
//!    {"type": "image", "mime_type": "image/png", "data": "<base64>"},
//!    {"type": "audio", "mime_type": "audio/wav", "data": "<base64>"},
//!    {"type": "resource", "uri": "…", "mime_type": "…", "text": "…"},      (or "blob": "<base64>")
//!    {"type": "resource_link", "uri": "…", "name": "…", "description": "…", "mime_type": "…"}
//!  ],
//!  "structured_content": {…}}                                             (when the server sent one)
//! ```
//! A result keeps at most [`MAX_RESULT_BYTES`]: longer text is cut and
//! binary data that does not fit is left out, each with a note saying so.
//! Secrets of the server's config are blotted out of every text. An
//! `isError` result is a tool error whose text is the result's text.

use serde_json::{json, Map, Value};

use super::config::Secrets;
use crate::tools::ToolError;

/// The largest message accepted from a server (rmcp's own default).
pub(super) const MAX_WIRE_BYTES: usize = 16 * 1024 * 1024;
/// The most one stored result holds (text and base64 data together).
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;
/// The most content items kept of one result.
const MAX_ITEMS: usize = 1000;

/// Converts a `CallToolResult` as it came over the wire (camelCase JSON).
pub(super) fn convert(wire: &Value, secrets: &Secrets) -> Result<Value, ToolError> {
    let mut budget = MAX_RESULT_BYTES;
    let mut content = Vec::new();
    let items = wire.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for item in items.iter().take(MAX_ITEMS) {
        content.push(convert_item(item, secrets, &mut budget));
    }
    if items.len() > MAX_ITEMS {
        content.push(json!({"type": "text", "text": format!("[{} more items left out]", items.len() - MAX_ITEMS)}));
    }
    if wire.get("isError").and_then(Value::as_bool) == Some(true) {
        let texts: Vec<&str> = content
            .iter()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .filter(|t| !t.trim().is_empty())
            .collect();
        let message = if texts.is_empty() {
            match wire.get("structuredContent") {
                Some(sc) => format!("the tool reported an error: {}", secrets.redact(&super::short(&sc.to_string()))),
                None => "the tool reported an error without saying why".to_owned(),
            }
        } else {
            texts.join("\n")
        };
        return Err(ToolError::Failed(message));
    }
    let mut out = Map::new();
    out.insert("content".into(), Value::Array(content));
    if let Some(sc) = wire.get("structuredContent") {
        let size = sc.to_string().len();
        let sc = if size <= budget {
            redact_strings(sc, secrets)
        } else {
            json!({"left_out": format!("the structured content ({size} bytes) was over the result limit")})
        };
        out.insert("structured_content".into(), sc);
    }
    Ok(Value::Object(out))
}

fn convert_item(item: &Value, secrets: &Secrets, budget: &mut usize) -> Value {
    let text_of = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
    match text_of("type") {
        "text" => json!({"type": "text", "text": cut(&secrets.redact(text_of("text")), budget)}),
        kind @ ("image" | "audio") => {
            let mime = text_of("mimeType");
            match take_data(text_of("data"), budget) {
                Some(data) => json!({"type": kind, "mime_type": mime, "data": data}),
                None => json!({"type": "text", "text": left_out(kind, mime, text_of("data"))}),
            }
        }
        "resource" => {
            let resource = item.get("resource").cloned().unwrap_or_default();
            let field = |key: &str| resource.get(key).and_then(Value::as_str).map(str::to_owned);
            let mut out = json!({"type": "resource", "uri": field("uri").unwrap_or_default()});
            if let Some(mime) = field("mimeType") {
                out["mime_type"] = json!(mime);
            }
            if let Some(text) = field("text") {
                out["text"] = json!(cut(&secrets.redact(&text), budget));
            }
            if let Some(blob) = field("blob") {
                match take_data(&blob, budget) {
                    Some(data) => out["blob"] = json!(data),
                    None => {
                        out["note"] = json!(left_out("resource", field("mimeType").as_deref().unwrap_or(""), &blob))
                    }
                }
            }
            out
        }
        "resource_link" => {
            let mut out = json!({"type": "resource_link"});
            for (wire_key, key) in [
                ("uri", "uri"),
                ("name", "name"),
                ("title", "title"),
                ("description", "description"),
                ("mimeType", "mime_type"),
            ] {
                if let Some(v) = item.get(wire_key).and_then(Value::as_str) {
                    out[key] = json!(cut(&secrets.redact(v), budget));
                }
            }
            out
        }
        _ => {
            // A kind this version does not know: kept as sent, if it fits.
            let size = item.to_string().len();
            if size <= *budget {
                *budget -= size;
                redact_strings(item, secrets)
            } else {
                json!({"type": "text", "text": format!("[a `{}` item of {size} bytes left out: the result is limited to {MAX_RESULT_BYTES} bytes]", text_of("type"))})
            }
        }
    }
}

/// `text`, cut to what is left of the budget (with a note when cut).
fn cut(text: &str, budget: &mut usize) -> String {
    if text.len() <= *budget {
        *budget -= text.len();
        return text.to_owned();
    }
    let mut end = *budget;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    *budget = 0;
    format!("{}… [cut: {} more bytes; a result keeps at most {MAX_RESULT_BYTES} bytes]", &text[..end], text.len() - end)
}

fn take_data(data: &str, budget: &mut usize) -> Option<String> {
    (data.len() <= *budget).then(|| {
        *budget -= data.len();
        data.to_owned()
    })
}

fn left_out(kind: &str, mime: &str, data: &str) -> String {
    format!("[{kind} {mime}, {} bytes, left out: a result keeps at most {MAX_RESULT_BYTES} bytes]", decoded_len(data))
}

/// Every string of `value` with the secrets blotted out.
fn redact_strings(value: &Value, secrets: &Secrets) -> Value {
    match value {
        Value::String(s) => Value::String(secrets.redact(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_strings(v, secrets)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_strings(v, secrets))).collect()),
        other => other.clone(),
    }
}

/// The size of base64 `data` once decoded.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

/// What the model reads of a result in the stored shape: each image, audio
/// clip or binary resource becomes a short text saying what it was (its
/// base64 would fill the context and the model could not see it anyway);
/// the trace keeps the data. `None` when there is nothing to replace.
pub fn model_view(result: &Value) -> Option<Value> {
    let content = result.get("content")?.as_array()?;
    let binary = |c: &Value| {
        matches!(c["type"].as_str(), Some("image" | "audio")) && c["data"].is_string()
            || c["type"] == "resource" && c["blob"].is_string()
    };
    if !content.iter().any(binary) {
        return None;
    }
    let light: Vec<Value> = content
        .iter()
        .map(|c| {
            if !binary(c) {
                return c.clone();
            }
            let kind = c["type"].as_str().unwrap_or_default();
            let data = c["data"].as_str().or(c["blob"].as_str()).unwrap_or_default();
            let mime = c["mime_type"].as_str().unwrap_or("application/octet-stream");
            let what = match c["uri"].as_str() {
                Some(uri) => format!("[resource {uri} ({mime}), {} bytes]", decoded_len(data)),
                None => format!("[{kind} {mime}, {} bytes]", decoded_len(data)),
            };
            json!({"type": "text", "text": what})
        })
        .collect();
    let mut view = result.clone();
    view["content"] = Value::Array(light);
    Some(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        let servers =
            super::super::config::resolve(&toml::from_str("[s]\ncommand=['x']\nenv={T='hunter22'}").unwrap(), |_| {
                None::<String>
            })
            .unwrap();
        servers[0].secrets.clone()
    }

    #[test]
    fn every_kind_of_content_is_kept_in_the_stored_shape() {
        let wire = json!({
            "content": [
                {"type": "text", "text": "Here's the image you requested:"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hi hunter22"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
            ],
            "structuredContent": {"temperature": 22.5, "note": "token hunter22"}
        });
        let stored = convert(&wire, &secrets()).unwrap();
        assert_eq!(
            stored,
            json!({
                "content": [
                    {"type": "text", "text": "Here's the image you requested:"},
                    {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="},
                    {"type": "resource", "uri": "file:///a.txt", "mime_type": "text/plain", "text": "hi [redacted]"},
                    {"type": "resource_link", "uri": "file:///b", "name": "b"},
                    {"type": "audio", "mime_type": "audio/wav", "data": "AAAA"}
                ],
                "structured_content": {"temperature": 22.5, "note": "token [redacted]"}
            })
        );
        let view = model_view(&stored).unwrap();
        assert_eq!(view["content"][1], json!({"type": "text", "text": "[image image/png, 8 bytes]"}));
        assert_eq!(view["content"][4], json!({"type": "text", "text": "[audio audio/wav, 3 bytes]"}));
        assert_eq!(view["content"][0], stored["content"][0]);
        assert_eq!(view["structured_content"], stored["structured_content"]);
        assert_eq!(model_view(&json!({"content": [{"type": "text", "text": "x"}]})), None);
        assert_eq!(model_view(&json!({"value": 3})), None);
    }

    #[test]
    fn an_error_result_is_a_tool_error_with_its_text() {
        let wire = json!({"isError": true, "content": [{"type": "text", "text": "no such city"}]});
        assert_eq!(convert(&wire, &Secrets::default()), Err(ToolError::Failed("no such city".into())));
        let silent = convert(&json!({"isError": true, "content": []}), &Secrets::default()).unwrap_err();
        assert_eq!(silent.to_string(), "the tool reported an error without saying why");
    }

    #[test]
    fn results_are_bounded() {
        let big = "a".repeat(MAX_RESULT_BYTES + 10);
        let wire = json!({"content": [
            {"type": "text", "text": big},
            {"type": "image", "data": "AAAA", "mimeType": "image/gif"}
        ]});
        let stored = convert(&wire, &Secrets::default()).unwrap();
        let text = stored["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with("bytes]") && text.contains("[cut: 10 more bytes"), "{}", &text[text.len() - 80..]);
        assert_eq!(stored["content"][1]["type"], "text");
        assert!(stored["content"][1]["text"].as_str().unwrap().starts_with("[image image/gif, 3 bytes, left out"));
        assert!(stored.to_string().len() < MAX_RESULT_BYTES + 1000);
    }
}
