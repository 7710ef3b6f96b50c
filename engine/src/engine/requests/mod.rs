//! Approvals and questions for agents runlens does not run (see
//! `model::request`): created by an agent's API key, decided by a person in
//! the inbox or through the API, waited for by the agent.
//!
//! **Idempotency.** A create with an `idempotency_key` used before in the
//! project (for the same kind) returns the request it made; with a
//! different body it is refused (409), so a retry can never be mistaken
//! for a new request or the other way round.
//!
//! **Decisions** are a compare-and-set in the store: of two racing
//! decisions one wins, the other gets the winner in its 409. A decision
//! with a `callback_url` writes the signed callback into the webhook outbox
//! in the same transaction (sent by the webhook worker, retried, at least
//! once, `runlens-idempotency-key` = the delivery id). An "always" decision
//! leaves a rule: later requests of the tool from the same agent run
//! (`run.external_id`) are created decided the same way.
//!
//! **Waiting.** A long-poll re-reads the request whenever a decision is
//! made on this server and at least every [`POLL`] (a decision made on
//! another server sharing the database), until it is decided or the wait
//! is over. **Timeouts** are applied by one task per engine
//! ([`Engine::start_request_deadlines`]) and by any read that finds a
//! pending request past its deadline, so an agent never waits past it.
//!
//! **Traces.** A request whose run names a `trace_id` is shown in the run
//! OTLP ingest builds from that trace; until a span of it arrives, in a
//! placeholder run named after the agent's run (ingest then fills it in).

use std::time::Duration;

use chrono::Utc;
use sha2::{Digest, Sha256};

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::limits::MAX_ID_CHARS;
use crate::model::{
    Actor, AgentRequest, Decision, ExternalRun, NewApprovalRequest, NewQuestion, RequestDecision, RequestKind,
    RequestOutcome, RequestPage, RequestStatus, RequestVerdict,
};
use crate::otel::ingest;
use crate::runtime::now;
use crate::store::{CallbackWrite, Inserted, RequestDecisionWrite, RequestFilter, RequestInsert, RuleKey};

mod expiry;

/// How often a waiting reader looks at the store in any case.
pub const POLL: Duration = Duration::from_millis(500);
/// Requests a run's page shows.
pub const MAX_RUN_REQUESTS: u32 = 200;
/// The `type` of a callback's payload.
pub const APPROVAL_DECIDED: &str = "approval_request.decided";
pub const QUESTION_ANSWERED: &str = "question.answered";

/// What a create did: a new request, or the one an earlier create with the
/// same idempotency key made.
#[derive(Debug)]
pub struct CreatedRequest {
    pub request: AgentRequest,
    pub created: bool,
}

/// The body of a callback (signed like status webhooks).
#[derive(serde::Serialize)]
struct CallbackPayload<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    delivery_id: &'a str,
    request: &'a AgentRequest,
}

fn not_found(kind: Option<RequestKind>, id: &str) -> EngineError {
    let noun = kind.map_or("request", RequestKind::noun);
    EngineError::NotFound(format!("{noun} `{}`", id.chars().take(MAX_ID_CHARS).collect::<String>()))
}

fn fingerprint<T: serde::Serialize>(body: &T) -> String {
    let text = serde_json::to_vec(body).unwrap_or_default();
    Sha256::digest(&text).iter().map(|b| format!("{b:02x}")).collect()
}

impl Engine {
    /// The parts both kinds share, with the callback and the trace checked
    /// (and the trace's placeholder run made when there is none yet).
    async fn new_request(
        &self,
        project: &str,
        kind: RequestKind,
        run: &ExternalRun,
        timeout_s: Option<u64>,
        callback_url: Option<String>,
        by: &Actor,
    ) -> Result<AgentRequest> {
        if let Some(url) = &callback_url {
            crate::net::check_url(url, self.rt.config.allow_private_networks)
                .map_err(|e| EngineError::Invalid(format!("callback_url: {e}")))?;
            if self.rt.store.webhooks().run_secret(project).await?.is_none() {
                return Err(EngineError::Invalid(format!(
                    "callback_url: project `{project}` has no run webhook secret to sign callbacks with; an admin \
                     creates it with POST /api/webhooks/secret"
                )));
            }
        }
        let at = now();
        let run_id = match &run.trace_id {
            Some(trace_id) => Some(self.trace_run(project, trace_id, &run.name, at).await?),
            None => None,
        };
        Ok(AgentRequest {
            id: format!("{}{}", kind.prefix(), uuid::Uuid::now_v7().simple()),
            project: project.to_owned(),
            kind,
            status: RequestStatus::Pending,
            tool: None,
            arguments: None,
            question: None,
            choices: None,
            context: None,
            run: run.clone(),
            run_id,
            requested_by: by.name.clone(),
            requested_by_id: by.id.clone(),
            created_at: at,
            deadline: timeout_s.map(|s| at + chrono::Duration::seconds(s as i64)),
            callback_url,
            decision: None,
        })
    }

    /// The run trace `trace_id` is (or will be) assembled into in `project`:
    /// made as a placeholder when it does not exist yet.
    async fn trace_run(&self, project: &str, trace_id: &str, name: &str, at: chrono::DateTime<Utc>) -> Result<String> {
        let run_id = ingest::run_id_for(project, trace_id);
        let taken = || EngineError::Conflict(format!("run.trace_id: the run id `{run_id}` is taken"));
        match self.rt.store.run_head(&run_id).await? {
            Some(head) if head.project == project && head.source.is_some() => Ok(run_id),
            Some(_) => Err(taken()),
            None => {
                let placeholder = ingest::placeholder(project, trace_id, name, at);
                if self.rt.store.insert_run_with_history(&placeholder, &[], &[]).await? {
                    self.rt.publish_transition(&run_id, crate::model::RunStatus::Pending, placeholder.status);
                    return Ok(run_id);
                }
                // Made meanwhile, by ingest or another request: the same checks.
                match self.rt.store.run_head(&run_id).await? {
                    Some(head) if head.project == project && head.source.is_some() => Ok(run_id),
                    _ => Err(taken()),
                }
            }
        }
    }

    async fn insert_request(
        &self,
        project: &str,
        request: AgentRequest,
        key: Option<&str>,
        print: &str,
        by: &Actor,
    ) -> Result<CreatedRequest> {
        let insert = RequestInsert { request: &request, project, idempotency_key: key, fingerprint: print };
        match self.rt.store.requests().insert_request(insert).await? {
            Inserted::Created(request) => {
                let action = format!("asked: {}", request.kind.noun());
                self.identity().audit(Some(project), by, &action, Some(&request.id), None).await;
                self.signal_requests();
                Ok(CreatedRequest { request, created: true })
            }
            Inserted::Existing { request, same: true } => Ok(CreatedRequest { request, created: false }),
            Inserted::Existing { request, same: false } => Err(EngineError::Conflict(format!(
                "idempotency_key `{}` was used for {} `{}` with a different body; use a new key for a new {}",
                key.unwrap_or_default(),
                request.kind.noun(),
                request.id,
                request.kind.noun()
            ))),
        }
    }

    /// The decision an "always" rule gives a new request, while whoever
    /// decided it is still an approver of the project.
    async fn standing_rule(&self, project: &str, key: RuleKey<'_>) -> Result<Option<RequestOutcome>> {
        let Some(rule) = self.rt.store.requests().request_rule(project, key).await? else { return Ok(None) };
        let role = crate::store::role_in(self.rt.store.directory(), &rule.decided_by_id, project).await?;
        Ok(role.is_some_and(|r| r >= crate::model::Role::Approver).then_some(rule))
    }

    /// Stores a decision (with its callback and rule) if the request is
    /// still pending, and wakes whoever waits.
    async fn settle_request(
        &self,
        project: &str,
        request: &AgentRequest,
        outcome: &RequestOutcome,
        rule: Option<RuleKey<'_>>,
    ) -> Result<AgentRequest> {
        let delivery_id = format!("whd_{}", uuid::Uuid::now_v7().simple());
        let payload = request.callback_url.as_ref().map(|_| {
            let mut decided = request.clone();
            decided.status = outcome.outcome;
            decided.decision = Some(outcome.clone());
            let kind = match request.kind {
                RequestKind::Approval => APPROVAL_DECIDED,
                RequestKind::Question => QUESTION_ANSWERED,
            };
            serde_json::to_string(&CallbackPayload { kind, delivery_id: &delivery_id, request: &decided })
                .unwrap_or_default()
        });
        let callback = match (&request.callback_url, &payload) {
            (Some(url), Some(payload)) => Some(CallbackWrite { delivery_id: &delivery_id, url, payload }),
            _ => None,
        };
        let write = RequestDecisionWrite { project, id: &request.id, outcome, callback, rule };
        match self.rt.store.requests().decide_request(write).await? {
            Some(decided) => {
                self.signal_requests();
                Ok(decided)
            }
            None => {
                let current = self.rt.store.requests().request(Some(project), &request.id).await?;
                Err(match current {
                    Some(r) => already_decided(&r),
                    None => not_found(Some(request.kind), &request.id),
                })
            }
        }
    }

    fn signal_requests(&self) {
        self.rt.requests.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A field of `d` that does not go with `verdict` (a reason on an approval, …).
fn misplaced_field(verdict: RequestVerdict, d: &RequestDecision) -> Option<&'static str> {
    let fields: &[(&'static str, bool)] = match verdict {
        RequestVerdict::Decide(Decision::Approved) => &[("reason", d.reason.is_some()), ("answer", d.answer.is_some())],
        RequestVerdict::Decide(Decision::Rejected) => {
            &[("arguments", d.arguments.is_some()), ("comment", d.comment.is_some()), ("answer", d.answer.is_some())]
        }
        RequestVerdict::Answer => &[
            ("arguments", d.arguments.is_some()),
            ("comment", d.comment.is_some()),
            ("reason", d.reason.is_some()),
            ("always", d.always),
        ],
    };
    fields.iter().find(|f| f.1).map(|f| f.0)
}

/// A text given, trimmed, unless empty.
fn given(t: Option<String>) -> Option<String> {
    t.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// What approving or rejecting `request` as `d` says records.
fn decided(request: &AgentRequest, decision: Decision, d: RequestDecision, by: &Actor) -> RequestOutcome {
    let asked = request.arguments.clone().unwrap_or_default();
    let edited = d.arguments.filter(|a| *a != asked);
    let approved = decision == Decision::Approved;
    RequestOutcome {
        outcome: if approved { RequestStatus::Approved } else { RequestStatus::Rejected },
        edited: edited.is_some(),
        arguments: approved.then(|| edited.unwrap_or(asked)),
        answer: None,
        reason: (!approved).then(|| given(d.reason).unwrap_or_else(|| "no reason given".into())),
        comment: given(d.comment),
        always: d.always,
        decided_by: by.name.clone(),
        decided_by_id: by.id.clone(),
        decided_at: now(),
    }
}

/// The answer `d` gives `request` (a question), checked against its choices.
fn answered(request: &AgentRequest, d: RequestDecision, by: &Actor) -> Result<RequestOutcome> {
    let answer = given(d.answer).ok_or_else(|| EngineError::Invalid("answer must not be empty".into()))?;
    if let Some(choices) = request.choices.as_ref().filter(|c| !c.contains(&answer)) {
        return Err(EngineError::Invalid(format!(
            "answer must be one of the choices: {}",
            choices.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(RequestOutcome {
        outcome: RequestStatus::Answered,
        arguments: None,
        edited: false,
        answer: Some(answer),
        reason: None,
        comment: None,
        always: false,
        decided_by: by.name.clone(),
        decided_by_id: by.id.clone(),
        decided_at: now(),
    })
}

fn already_decided(r: &AgentRequest) -> EngineError {
    let message = match &r.decision {
        Some(d) => format!(
            "{} `{}` was already {} by {} at {}",
            r.kind.noun(),
            r.id,
            d.outcome,
            d.decided_by,
            d.decided_at.to_rfc3339()
        ),
        None => format!("{} `{}` is {}", r.kind.noun(), r.id, r.status),
    };
    EngineError::Conflict(message)
}

impl Requests<'_> {
    /// Creates an approval request (or returns the one its idempotency key
    /// made), decided at once when an "always" rule covers it.
    pub async fn create_approval_request(
        self,
        project: &str,
        req: NewApprovalRequest,
        by: &Actor,
    ) -> Result<CreatedRequest> {
        req.check_bounds().map_err(EngineError::Invalid)?;
        let print = fingerprint(&req);
        let rule = match &req.run.external_id {
            Some(ext) => {
                self.standing_rule(project, RuleKey { requested_by_id: &by.id, external_id: ext, tool: &req.tool })
                    .await?
            }
            None => None,
        };
        let base =
            self.new_request(project, RequestKind::Approval, &req.run, req.timeout_s, req.callback_url, by).await?;
        let mut request =
            AgentRequest { tool: Some(req.tool), arguments: Some(req.arguments.clone()), context: req.context, ..base };
        if let Some(mut outcome) = rule {
            // Decided by the standing rule, with the arguments as asked.
            outcome.decided_at = request.created_at;
            outcome.edited = false;
            outcome.arguments = (outcome.outcome == RequestStatus::Approved).then(|| req.arguments.clone());
            request.status = outcome.outcome;
            request.deadline = None;
            request.decision = Some(outcome);
        }
        self.insert_request(project, request, Some(&req.idempotency_key), &print, by).await
    }

    /// Creates a question (or returns the one its idempotency key made).
    pub async fn create_question(self, project: &str, q: NewQuestion, by: &Actor) -> Result<CreatedRequest> {
        q.check_bounds().map_err(EngineError::Invalid)?;
        let print = fingerprint(&q);
        let run = q.run.clone().unwrap_or_else(|| ExternalRun { name: by.name.clone(), ..ExternalRun::default() });
        let base = self.new_request(project, RequestKind::Question, &run, q.timeout_s, q.callback_url, by).await?;
        let request = AgentRequest { question: Some(q.question), choices: q.choices, context: q.context, ..base };
        self.insert_request(project, request, q.idempotency_key.as_deref(), &print, by).await
    }

    /// Request `id` (of `kind`, when given), of whichever project (the
    /// caller checks its role there), expired first when its deadline has
    /// passed.
    pub async fn agent_request(self, kind: Option<RequestKind>, id: &str) -> Result<AgentRequest> {
        if id.chars().count() > MAX_ID_CHARS || (kind.is_some() && RequestKind::of_id(id) != kind) {
            return Err(not_found(kind, id));
        }
        let request = self.rt.store.requests().request(None, id).await?.ok_or_else(|| not_found(kind, id))?;
        match request.deadline {
            Some(d) if request.status == RequestStatus::Pending && d <= now() => {
                self.expire(&request.project.clone(), &request).await
            }
            _ => Ok(request),
        }
    }

    /// Request `id` once it is decided, or as it is after `wait`.
    pub async fn wait_request(self, kind: Option<RequestKind>, id: &str, wait: Duration) -> Result<AgentRequest> {
        let until = tokio::time::Instant::now() + wait;
        let mut signal = self.rt.requests.subscribe();
        loop {
            let request = self.requests().agent_request(kind, id).await?;
            let now_i = tokio::time::Instant::now();
            if request.status != RequestStatus::Pending || now_i >= until {
                return Ok(request);
            }
            // Wake at the deadline too, to answer with the timeout then.
            let mut next = until.min(now_i + POLL);
            if let Some(d) = request.deadline {
                let left = (d - now()).to_std().unwrap_or_default();
                next = next.min(now_i + left);
            }
            tokio::select! {
                _ = signal.changed() => {}
                _ = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// Approves, rejects or answers a pending request (the caller checked
    /// the decider's role in the request's project).
    pub async fn decide_request(
        self,
        kind: RequestKind,
        id: &str,
        verdict: RequestVerdict,
        d: RequestDecision,
        by: &Actor,
    ) -> Result<AgentRequest> {
        d.check_bounds().map_err(EngineError::Invalid)?;
        let request = self.requests().agent_request(Some(kind), id).await?;
        let project = request.project.as_str();
        if let Some(field) = misplaced_field(verdict, &d) {
            return Err(EngineError::Invalid(format!("`{field}` does not go with this decision")));
        }
        if request.status != RequestStatus::Pending {
            return Err(already_decided(&request));
        }
        if let RequestVerdict::Decide(_) = verdict {
            self.require_approver(project, by).await?;
        }
        if d.always && request.run.external_id.is_none() {
            return Err(EngineError::Invalid(
                "`always` needs the request's run to have an external_id (the agent run it applies to)".into(),
            ));
        }
        let always = d.always;
        let outcome = match verdict {
            RequestVerdict::Decide(decision) => decided(&request, decision, d, by),
            RequestVerdict::Answer => answered(&request, d, by)?,
        };
        let rule = match (&request.run.external_id, &request.tool) {
            (Some(ext), Some(tool)) if always => {
                Some(RuleKey { requested_by_id: &request.requested_by_id, external_id: ext, tool })
            }
            _ => None,
        };
        let decided = self.settle_request(project, &request, &outcome, rule).await?;
        self.identity().audit(Some(project), by, outcome.outcome.as_str(), Some(id), None).await;
        Ok(decided)
    }

    /// One page of a project's requests (pending oldest first, decided newest first).
    pub async fn agent_requests(self, filter: RequestFilter) -> Result<RequestPage> {
        let limit = filter.limit;
        let mut requests = self.rt.store.requests().requests(&RequestFilter { limit: limit + 1, ..filter }).await?;
        let more = requests.len() > limit as usize;
        requests.truncate(limit as usize);
        let next_cursor = if more { requests.last().map(AgentRequest::cursor) } else { None };
        Ok(RequestPage { requests, next_cursor })
    }

    /// The requests shown in run `run_id` (those naming its trace), oldest first.
    pub async fn run_requests(self, run_id: &str) -> Result<Vec<AgentRequest>> {
        self.rt.store.requests().run_requests(run_id, MAX_RUN_REQUESTS).await
    }

    /// How many requests await a person in `project` (one stored row).
    pub async fn pending_request_count(self, project: &str) -> Result<u64> {
        self.rt.store.requests().pending_requests(project).await
    }
}

crate::engine::facade_group!(Requests, requests, "Approval requests and questions from agents runlens does not run.");
