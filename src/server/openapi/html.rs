//! The API reference page (`GET /api/docs`), rendered from the document.

pub fn page(doc: &serde_json::Value) -> String {
    doc.to_string()
}
