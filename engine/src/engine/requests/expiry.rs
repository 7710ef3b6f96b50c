//! Deadlines of requests from other agents: a request past its deadline is
//! rejected ("timed out", an approval) or expires (a question), by one task
//! per engine that looks every [`SWEEP`] and by any read that finds it due.

use std::time::Duration;

use super::not_found;
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::model::{Actor, AgentRequest, RequestKind, RequestOutcome, RequestStatus, TIMED_OUT};
use crate::runtime::now;

/// How often the deadline task looks for due requests (at most).
const SWEEP: Duration = Duration::from_secs(1);

impl Engine {
    /// Rejects (an approval) or expires (a question) a request past its deadline.
    pub(super) async fn expire(&self, project: &str, request: &AgentRequest) -> Result<AgentRequest> {
        let system = Actor::system();
        let outcome = RequestOutcome {
            outcome: match request.kind {
                RequestKind::Approval => RequestStatus::Rejected,
                RequestKind::Question => RequestStatus::Expired,
            },
            arguments: None,
            edited: false,
            answer: None,
            reason: Some(TIMED_OUT.into()),
            comment: None,
            always: false,
            decided_by: system.name.clone(),
            decided_by_id: system.id.clone(),
            decided_at: now(),
        };
        match self.settle_request(project, request, &outcome, None).await {
            Err(EngineError::Conflict(_)) => {
                // Decided meanwhile: that decision stands.
                self.rt
                    .store
                    .requests()
                    .request(Some(project), &request.id)
                    .await?
                    .ok_or_else(|| not_found(None, &request.id))
            }
            other => other,
        }
    }

    /// Starts the task that rejects (expires) requests past their deadline;
    /// the server calls it once at start. It ends with the engine.
    pub fn start_request_deadlines(&self) -> tokio::task::JoinHandle<()> {
        let weak = std::sync::Arc::downgrade(&self.rt);
        let drivers = self.drivers.clone();
        tokio::spawn(async move {
            loop {
                let Some(rt) = weak.upgrade() else { return };
                let engine = Engine { rt, drivers: drivers.clone() };
                if let Err(e) = engine.requests().expire_due().await {
                    tracing::warn!(error = %e, "request deadlines: could not expire due requests");
                }
                drop(engine);
                tokio::time::sleep(SWEEP).await;
            }
        })
    }
}

impl crate::engine::Requests<'_> {
    /// Expires every pending request past its deadline; how many it expired.
    pub async fn expire_due(self) -> Result<usize> {
        let mut n = 0;
        loop {
            let due = self.rt.store.requests().due_requests(now(), 100).await?;
            if due.is_empty() {
                return Ok(n);
            }
            for (project, id) in &due {
                if let Some(request) = self.rt.store.requests().request(Some(project), id).await? {
                    if request.status == RequestStatus::Pending {
                        self.expire(project, &request).await?;
                        n += 1;
                    }
                }
            }
            if due.len() < 100 {
                return Ok(n);
            }
        }
    }
}
