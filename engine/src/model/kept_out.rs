//! A tool result kept out of the transcript: what the model and the trace
//! get instead of a result over the blob limit, or of one the model
//! summarized. The original is a blob (`GET /api/blobs/{blob_id}`).
//!
//! The runner writes it as the call's `result`; the trace page reads it back
//! with [`KeptOut::of`] to show a download link, the size and the preview
//! or summary.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// See the module docs. Stored as the call's `result` object:
/// `{"summary", "size_bytes", "blob_id"}` or `{"too_large": true, "note",
/// "size_bytes", "preview", "blob_id"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeptOut {
    /// Summarized by the model (the run's `call_summarization`).
    Summarized {
        summary: String,
        #[serde(default)]
        size_bytes: u64,
        blob_id: String,
    },
    /// Too large to include: the model saw this beginning of it.
    TooLarge {
        /// Always `true` (what tells this shape apart from a tool's own result).
        too_large: bool,
        #[serde(default)]
        note: String,
        #[serde(default)]
        size_bytes: u64,
        #[serde(default)]
        preview: String,
        blob_id: String,
    },
}

impl KeptOut {
    /// A result too large to include, with the beginning the model sees.
    pub fn too_large(blob_id: String, size_bytes: u64, preview: String) -> Self {
        let note = format!("The result was too large to include ({size_bytes} bytes); this is its beginning.");
        Self::TooLarge { too_large: true, note, size_bytes, preview, blob_id }
    }

    /// Reads a stored result: `None` for a result shown as it is.
    pub fn of(result: &Value) -> Option<Self> {
        if !result.get("blob_id").is_some_and(Value::is_string) {
            return None;
        }
        match Self::deserialize(result).ok()? {
            Self::TooLarge { too_large: false, .. } => None,
            kept => Some(kept),
        }
    }

    /// The blob holding the original result.
    pub fn blob_id(&self) -> &str {
        match self {
            Self::Summarized { blob_id, .. } | Self::TooLarge { blob_id, .. } => blob_id,
        }
    }

    /// The original result's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        match self {
            Self::Summarized { size_bytes, .. } | Self::TooLarge { size_bytes, .. } => *size_bytes,
        }
    }

    /// As stored in the call's `result`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_shapes_read_back_as_written_and_a_tool_result_is_not_taken_for_one() {
        let large = KeptOut::too_large("r-c1".into(), 600_123, "[1,2".into());
        let stored = large.to_value();
        assert_eq!(stored["too_large"], true);
        assert_eq!(stored["note"], "The result was too large to include (600123 bytes); this is its beginning.");
        assert_eq!(KeptOut::of(&stored), Some(large));
        let summary = json!({"summary": "short", "size_bytes": 12_000, "blob_id": "r-c2"});
        let read = KeptOut::of(&summary).unwrap();
        assert_eq!((read.blob_id(), read.size_bytes()), ("r-c2", 12_000));
        assert_eq!(read.to_value(), summary);
        for plain in [json!({"blob_id": 3}), json!({"blob_id": "b", "too_large": false}), json!({"value": 1}), json!(7)]
        {
            assert_eq!(KeptOut::of(&plain), None, "{plain}");
        }
    }
}
