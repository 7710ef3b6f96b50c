//! Rows of `http_tools` and their model types: the shown `spec` and the stored tool.

use crate::model::{Actor, HttpTool};
use crate::store::http_tools::StoredHttpTool;
use crate::store::json_text;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The shown part of a tool but its name and times: the `spec` column.
#[derive(Serialize, Deserialize)]
pub(crate) struct Spec {
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) url: String,
    pub(crate) timeout_ms: u64,
    pub(crate) idempotent: bool,
    pub(crate) requires_approval: bool,
}
use crate::store::from_ms;

#[derive(sqlx::FromRow)]
pub(crate) struct Row {
    pub(crate) project: String,
    pub(crate) name: String,
    pub(crate) spec: String,
    pub(crate) headers: String,
    pub(crate) secret: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) updated_by_id: Option<String>,
    pub(crate) updated_by: Option<String>,
    pub(crate) secret_created_at: i64,
}

impl From<Row> for StoredHttpTool {
    fn from(r: Row) -> StoredHttpTool {
        // A row this store wrote always decodes; a damaged one reads as a
        // tool that says so (its schema compiles, its calls fail to connect).
        let spec: Spec = serde_json::from_str(&r.spec).unwrap_or_else(|e| Spec {
            description: format!("this tool's stored record cannot be read ({e}); register it again"),
            schema: serde_json::json!({"type": "object"}),
            url: "http://invalid.invalid/".into(),
            timeout_ms: crate::model::limits::DEFAULT_HTTP_TOOL_TIMEOUT_MS,
            idempotent: false,
            requires_approval: true,
        });
        let headers: BTreeMap<String, String> = serde_json::from_str(&r.headers).unwrap_or_default();
        StoredHttpTool {
            tool: HttpTool {
                name: r.name,
                project: r.project,
                description: spec.description,
                schema: spec.schema,
                url: spec.url,
                header_names: headers.keys().cloned().collect(),
                timeout_ms: spec.timeout_ms,
                idempotent: spec.idempotent,
                requires_approval: spec.requires_approval,
                created_at: from_ms(r.created_at),
                updated_at: from_ms(r.updated_at),
                updated_by: r.updated_by_id.map(|id| Actor { id, name: r.updated_by.unwrap_or_default() }),
                secret_created_at: from_ms(r.secret_created_at),
            },
            headers,
            secret: r.secret,
        }
    }
}

pub(crate) fn spec_text(t: &HttpTool) -> String {
    json_text(&Spec {
        description: t.description.clone(),
        schema: t.schema.clone(),
        url: t.url.clone(),
        timeout_ms: t.timeout_ms,
        idempotent: t.idempotent,
        requires_approval: t.requires_approval,
    })
}
