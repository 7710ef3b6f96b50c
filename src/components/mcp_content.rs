//! A tool result in the MCP content shape, as the trace shows it:
//! `{"content": [part…], "structured_content": {…}?}`, each part
//! `{"type": "text", "text"}`, `{"type": "image", "mime_type", "data"}` or
//! `{"type": "resource", "resource": {"uri", "mime_type"?, "text"?}}`.
//!
//! Texts show as text, structured content and any other part as JSON, all
//! through escaped text nodes. An image is shown (`<img>` with a `data:`
//! URL) only when its type is PNG, JPEG, GIF or WebP and its data is valid
//! base64; any other type (SVG above all: it can carry script) or bad data
//! shows a note instead, never the data.

use leptos::prelude::*;
use serde_json::{Map, Value};

use crate::format;

/// Image types shown inline; anything else is described, not shown.
pub const SHOWN_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Keys an MCP-shaped result may have (snake_case as runlens stores it,
/// camelCase as MCP servers write it).
const KEYS: [&str; 5] = ["content", "structured_content", "structuredContent", "is_error", "isError"];

/// One part of an MCP result's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    /// An image of a shown type with valid base64 data.
    Image {
        mime: String,
        data: String,
    },
    /// An image not shown: its type, and why when not for its type.
    HiddenImage {
        mime: String,
        why: Option<&'static str>,
    },
    /// An embedded resource: its URI and type, and its text when it has one.
    Resource {
        uri: String,
        mime: Option<String>,
        text: Option<String>,
    },
    /// Any other part (audio, resource links…), shown as JSON.
    Other(Value),
}

/// An MCP-shaped result: its parts and its structured content.
#[derive(Clone, Debug, PartialEq)]
pub struct McpContent {
    pub parts: Vec<Part>,
    pub structured: Option<Value>,
}

fn text_of<'a>(obj: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| obj.get(*k).and_then(Value::as_str))
}

/// Whether `data` is standard base64 (no white space, padded).
pub fn is_base64(data: &str) -> bool {
    let bytes = data.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = data.trim_end_matches('=');
    bytes.len() - body.len() <= 2 && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

impl Part {
    fn of(value: &Value) -> Part {
        let Some(obj) = value.as_object() else { return Part::Other(value.clone()) };
        match obj.get("type").and_then(Value::as_str) {
            Some("text") => match obj.get("text").and_then(Value::as_str) {
                Some(text) => Part::Text(text.to_owned()),
                None => Part::Other(value.clone()),
            },
            Some("image") => {
                let mime = text_of(obj, &["mime_type", "mimeType"]).unwrap_or("unknown").to_owned();
                let data = obj.get("data").and_then(Value::as_str).unwrap_or("");
                if !SHOWN_IMAGE_TYPES.contains(&mime.as_str()) {
                    Part::HiddenImage { mime, why: None }
                } else if !is_base64(data) {
                    Part::HiddenImage { mime, why: Some("its data is not valid base64") }
                } else {
                    Part::Image { mime, data: data.to_owned() }
                }
            }
            Some("resource") => match obj.get("resource").and_then(Value::as_object) {
                Some(res) => Part::Resource {
                    uri: text_of(res, &["uri"]).unwrap_or("").to_owned(),
                    mime: text_of(res, &["mime_type", "mimeType"]).map(str::to_owned),
                    text: text_of(res, &["text"]).map(str::to_owned),
                },
                None => Part::Other(value.clone()),
            },
            _ => Part::Other(value.clone()),
        }
    }
}

impl McpContent {
    /// `value` read as an MCP result: an object with a `content` list of
    /// typed parts and nothing but the MCP keys; `None` for any other value.
    pub fn of(value: &Value) -> Option<McpContent> {
        let obj = value.as_object()?;
        let content = obj.get("content")?.as_array()?;
        if !obj.keys().all(|k| KEYS.contains(&k.as_str()))
            || !content.iter().all(|p| p.get("type").is_some_and(Value::is_string))
        {
            return None;
        }
        let structured = ["structured_content", "structuredContent"]
            .iter()
            .find_map(|k| obj.get(*k))
            .filter(|v| !v.is_null())
            .cloned();
        Some(McpContent { parts: content.iter().map(Part::of).collect(), structured })
    }
}

/// An MCP result's parts, then its structured content.
#[component]
pub fn McpResult(content: McpContent, testid: Option<&'static str>) -> impl IntoView {
    let parts = content.parts.into_iter().map(|part| view! { <PartView part/> }).collect::<Vec<_>>();
    let structured = content.structured.map(|v| {
        view! {
            <div class="label">"Structured content"</div>
            <pre class="json" data-testid="mcp-structured">{format::pretty_json(&v)}</pre>
        }
    });
    view! {
        <div class="mcp-result" data-testid=testid>
            {parts}
            {structured}
        </div>
    }
}

#[component]
fn PartView(part: Part) -> impl IntoView {
    match part {
        Part::Text(text) => view! { <pre class="text" data-testid="mcp-text">{text}</pre> }.into_any(),
        Part::Image { mime, data } => {
            let src = format!("data:{mime};base64,{data}");
            view! { <img class="mcp-image" src=src alt=format!("image ({mime})") data-testid="mcp-image"/> }.into_any()
        }
        Part::HiddenImage { mime, why } => view! {
            <p class="muted" data-testid="mcp-image-hidden">
                {match why {
                    None => format!("image of type {mime} not shown"),
                    Some(why) => format!("image of type {mime} not shown: {why}"),
                }}
            </p>
        }
        .into_any(),
        Part::Resource { uri, mime, text } => view! {
            <div class="mcp-resource" data-testid="mcp-resource">
                <span class="mono">{uri}</span>
                {mime.map(|m| view! { <span class="muted">" (" {m} ")"</span> })}
                {match text {
                    Some(t) => view! { <pre class="text">{t}</pre> }.into_any(),
                    None => view! { <p class="muted">"binary resource, not shown"</p> }.into_any(),
                }}
            </div>
        }
        .into_any(),
        Part::Other(value) => {
            view! { <pre class="json" data-testid="mcp-other">{format::pretty_json(&value)}</pre> }.into_any()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    #[test]
    fn mcp_results_are_read_part_by_part() {
        let value = json!({"content": [
            {"type": "text", "text": "<b>hi</b>"},
            {"type": "image", "mime_type": "image/png", "data": PNG},
            {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz48L3N2Zz4="},
            {"type": "image", "mime_type": "image/png", "data": "not base64!"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mime_type": "text/plain", "text": "A"}},
            {"type": "audio", "mime_type": "audio/wav", "data": "AAAA"}
        ], "structured_content": {"sum": 3}});
        let content = McpContent::of(&value).unwrap();
        assert_eq!(content.parts[0], Part::Text("<b>hi</b>".into()));
        assert_eq!(content.parts[1], Part::Image { mime: "image/png".into(), data: PNG.into() });
        assert_eq!(content.parts[2], Part::HiddenImage { mime: "image/svg+xml".into(), why: None });
        assert!(matches!(&content.parts[3], Part::HiddenImage { why: Some(why), .. } if why.contains("base64")));
        assert!(matches!(&content.parts[4], Part::Resource { text: Some(t), .. } if t == "A"));
        assert!(matches!(&content.parts[5], Part::Other(_)));
        assert_eq!(content.structured, Some(json!({"sum": 3})));
        let camel = json!({"content": [], "structuredContent": {"a": 1}, "isError": false});
        assert_eq!(McpContent::of(&camel).unwrap().structured, Some(json!({"a": 1})));
    }

    #[test]
    fn other_values_are_not_mcp_results() {
        for value in [
            json!({"value": 84}),
            json!({"content": "text"}),
            json!({"content": [{"text": "no type"}]}),
            json!({"content": [], "extra": 1}),
            json!([1, 2]),
        ] {
            assert_eq!(McpContent::of(&value), None, "{value}");
        }
    }

    #[test]
    fn base64_is_checked() {
        assert!(is_base64(PNG) && is_base64("QUJD") && is_base64("QUI=") && is_base64("QQ=="));
        for bad in ["", "QUJ", "Q===", "QU JD", "QUJD\n", "QU\"D", "=QUJ", "QU=D"] {
            assert!(!is_base64(bad), "{bad:?}");
        }
    }
}
