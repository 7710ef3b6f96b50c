//! OTLP ingest: spans other agents send become read-only runs (see
//! `otel::ingest` for how a trace becomes a run, and `store::SpanStore` for
//! how it is stored).

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::{Run, RunStatus, SpanNode};
use crate::otel::ingest::{self, limits::MAX_TRACE_SPANS};
use crate::store::{StoredSpan, TraceFold as _, TraceIngest};

/// What an OTLP export did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpReport {
    /// Spans stored.
    pub accepted: u64,
    /// Spans refused (OTLP's `partialSuccess.rejectedSpans`).
    pub rejected: u64,
    /// Why spans were refused (the first reasons), for `partialSuccess.errorMessage`.
    pub message: Option<String>,
    /// The runs the request created or changed.
    pub runs: Vec<String>,
}

impl Engine {
    /// Tells the runs list and the run's page that an assembled run changed.
    fn announce_otlp(&self, old: Option<RunStatus>, run: &Run) {
        let old_status = old.unwrap_or(RunStatus::Pending);
        if old != Some(run.status) {
            self.rt.publish_transition(&run.id, old_status, run.status);
            if run.status.is_terminal() && !old_status.is_terminal() {
                self.rt.bus.publish(
                    &run.id,
                    EventKind::RunFinished {
                        status: run.status,
                        result: run.result.clone(),
                        summary: run.summary.clone(),
                        usage: run.usage,
                    },
                );
            }
        }
    }

    /// `Conflict` when run `run` was not run by runlens (see [`Run::read_only`]).
    pub(crate) fn refuse_read_only(run: &Run, what: &str) -> Result<()> {
        match run.read_only(what) {
            Some(why) => Err(EngineError::Conflict(why)),
            None => Ok(()),
        }
    }
}

impl Otel<'_> {
    /// Stores the spans of an OTLP trace export in `project` and assembles
    /// each trace they belong to into its run (see `otel::ingest`). Spans
    /// that cannot be kept are counted in the report, never an error; an
    /// error is the store's.
    pub async fn ingest_otlp(self, project: &str, request: ExportTraceServiceRequest) -> Result<OtlpReport> {
        let flat = ingest::flatten(request, crate::runtime::now());
        let mut report = OtlpReport { rejected: flat.rejected, ..OtlpReport::default() };
        let mut problems = flat.problems;
        let mut traces: BTreeMap<String, BTreeMap<String, StoredSpan>> = BTreeMap::new();
        for s in flat.spans {
            // A span sent twice in one request: the last one counts.
            traces.entry(s.trace_id.clone()).or_default().insert(s.span_id.clone(), s);
        }
        for (trace_id, spans) in traces {
            let spans: Vec<StoredSpan> = spans.into_values().collect();
            let n = spans.len() as u64;
            let assembly = self.rt.assemblies.get(project, &trace_id);
            let mut fold = assembly.lock().await;
            let done =
                self.rt.store.spans().ingest_trace(project, &trace_id, &spans, MAX_TRACE_SPANS, &mut *fold).await;
            if !matches!(done, Ok(TraceIngest::Stored(_) | TraceIngest::Full { .. })) {
                fold.forget();
            }
            self.rt.assemblies.done(project, &trace_id, fold.bytes());
            drop(fold);
            match done? {
                TraceIngest::Stored(run) => {
                    report.accepted += n;
                    if let Some(written) = run {
                        self.announce_otlp(written.before, &written.run);
                        report.runs.push(written.run.id.clone());
                    }
                }
                TraceIngest::Full { stored } => {
                    report.rejected += n;
                    problems.push(format!(
                        "trace {trace_id} would hold {stored} spans; the limit is {MAX_TRACE_SPANS} a trace"
                    ));
                }
                TraceIngest::RunTaken(id) => {
                    report.rejected += n;
                    problems.push(format!("trace {trace_id}: the run id `{id}` is taken"));
                }
            }
        }
        if report.rejected > 0 {
            problems.truncate(5);
            report.message = Some(problems.join("; "));
        }
        Ok(report)
    }

    /// The generic spans of a run recorded from OTLP spans (see
    /// [`crate::model::RunTrace::spans`]); empty for a run runlens ran.
    pub async fn run_spans(self, run: &Run) -> Result<Vec<SpanNode>> {
        let Some(source) = &run.source else { return Ok(Vec::new()) };
        let spans = self.rt.store.spans().trace_spans(&run.project, &source.trace_id, MAX_TRACE_SPANS as u32).await?;
        Ok(ingest::other_spans(&spans))
    }
}

crate::engine::facade_group!(Otel, otel, "OpenTelemetry: traces received over OTLP, and the spans of a run to send.");
