//! A tool call's result as the trace shows it: plain JSON, an MCP result's
//! texts, images and structured content (see `super::mcp_content`), or —
//! for results the engine kept out of the transcript — a download link to
//! the stored blob with its size and a preview, or the model's summary with
//! a link to the original.
//!
//! The engine writes those as a [`KeptOut`] (over 500 kB, or summarized with
//! `call_summarization`); the full result is at `GET /api/blobs/{blob_id}`.

use leptos::either::EitherOf4;
use leptos::prelude::*;
use runlens_engine::model::KeptOut;
use serde_json::Value;

use super::mcp_content::{McpContent, McpResult};
use crate::format;

/// What a result value is, for display.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultShape {
    /// Stored as a blob; the model saw a preview.
    Blob { blob_id: String, size_bytes: u64, preview: String },
    /// Summarized by the model; the original is a blob.
    Summary { blob_id: String, size_bytes: u64, summary: String },
    /// Shown as it is.
    Plain,
}

impl ResultShape {
    pub fn of(value: &Value) -> Self {
        match KeptOut::of(value) {
            Some(KeptOut::TooLarge { blob_id, size_bytes, preview, .. }) => {
                ResultShape::Blob { blob_id, size_bytes, preview }
            }
            Some(KeptOut::Summarized { blob_id, size_bytes, summary }) => {
                ResultShape::Summary { blob_id, size_bytes, summary }
            }
            None => ResultShape::Plain,
        }
    }
}

/// `/api/blobs/{id}`.
pub fn blob_href(blob_id: &str) -> String {
    format!("/api/blobs/{}", format::url_encode(blob_id))
}

/// `999 B`, `12.3 kB`, `1.5 MB` (decimal units, as the 500 kB limit is).
pub fn size_text(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// A tool result (see the module docs). `testid` goes on the outer element.
#[component]
pub fn ToolResult(value: Value, #[prop(optional)] testid: Option<&'static str>) -> impl IntoView {
    if let Some(content) = McpContent::of(&value) {
        return EitherOf4::D(view! { <McpResult content testid/> });
    }
    match ResultShape::of(&value) {
        ResultShape::Plain => EitherOf4::A(view! {
            <pre class="json" data-testid=testid>{format::pretty_json(&value)}</pre>
        }),
        ResultShape::Blob { blob_id, size_bytes, preview } => EitherOf4::B({
            let href = blob_href(&blob_id);
            view! {
            <div class="large-result" data-testid=testid data-blob-id=blob_id>
                <p class="large-note">
                    "Too large for the transcript ("
                    <span data-testid="result-size">{size_text(size_bytes)}</span>
                    "): the model saw only its beginning. "
                    <BlobLink href=href label="Download the full result"/>
                </p>
                <div class="label">"Preview"</div>
                <pre class="json" data-testid="result-preview">{preview}</pre>
            </div>
            }
        }),
        ResultShape::Summary { blob_id, size_bytes, summary } => EitherOf4::C({
            let href = blob_href(&blob_id);
            view! {
            <div class="large-result" data-testid=testid data-blob-id=blob_id>
                <p class="large-note">
                    "Summarized by the model (the original is "
                    <span data-testid="result-size">{size_text(size_bytes)}</span>
                    "). "
                    <BlobLink href=href label="Original result"/>
                </p>
                <pre class="text" data-testid="result-summary">{summary}</pre>
            </div>
            }
        }),
    }
}

/// A download link to a stored result. `download` keeps the client-side
/// router from treating it as a page.
#[component]
fn BlobLink(href: String, label: &'static str) -> impl IntoView {
    view! {
        <a class="blob-link" href=href download="" data-testid="blob-link">
            {label} " ↓"
        </a>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_blob_and_summary_results() {
        let blob = json!({"too_large": true, "size_bytes": 600_123, "preview": "[1,2", "blob_id": "r-c1", "note": "n"});
        assert_eq!(
            ResultShape::of(&blob),
            ResultShape::Blob { blob_id: "r-c1".into(), size_bytes: 600_123, preview: "[1,2".into() }
        );
        let summary = json!({"summary": "short", "size_bytes": 12_000, "blob_id": "r-c2"});
        assert!(matches!(ResultShape::of(&summary), ResultShape::Summary { .. }));
        assert_eq!(ResultShape::of(&json!({"value": 84})), ResultShape::Plain);
        assert_eq!(ResultShape::of(&json!({"blob_id": 3})), ResultShape::Plain);
        assert_eq!(ResultShape::of(&json!("text")), ResultShape::Plain);
    }

    #[test]
    fn sizes_and_links_read_well() {
        assert_eq!(size_text(999), "999 B");
        assert_eq!(size_text(600_123), "600.1 kB");
        assert_eq!(size_text(1_500_000), "1.5 MB");
        assert_eq!(blob_href("r 1-c/2"), "/api/blobs/r%201-c%2F2");
    }
}
