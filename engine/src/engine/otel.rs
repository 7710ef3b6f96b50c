//! Exporting the runs this server finishes as OpenTelemetry traces.

use super::Engine;
use crate::otel::export::OtelExporter;
use crate::otel::OtelTarget;

impl Engine {
    /// Starts sending every run this server ends to `target` (see
    /// `otel::export`); the server calls it once at start when `[otel]` is
    /// configured. Runs other servers sharing the store end are theirs to send.
    pub fn start_otel_export(&self, target: OtelTarget) -> OtelExporter {
        let exporter = OtelExporter::start(self.rt.store.clone(), target);
        let offer = exporter.clone();
        self.rt.bus.on_finished(Box::new(move |run_id| offer.offer(run_id)));
        exporter
    }
}

impl crate::engine::Otel<'_> {
    /// The ids of every run (of every project, child runs included) created
    /// at or after `since`, newest first: what `runlens otel-export --since` sends.
    pub async fn runs_started_since(self, since: chrono::DateTime<chrono::Utc>) -> crate::error::Result<Vec<String>> {
        let mut ids = Vec::new();
        let mut filter = crate::model::RunFilter {
            all: Some(true),
            limit: Some(crate::model::limits::MAX_LIST_LIMIT),
            ..Default::default()
        };
        loop {
            let page = self.rt.store.list_runs(&filter).await?;
            let older = page.runs.iter().any(|r| r.created_at < since);
            ids.extend(page.runs.into_iter().filter(|r| r.created_at >= since).map(|r| r.id));
            match page.next_cursor {
                Some(cursor) if !older => filter.cursor = Some(cursor),
                _ => return Ok(ids),
            }
        }
    }
}
