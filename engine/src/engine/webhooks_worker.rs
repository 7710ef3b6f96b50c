//! The webhook worker: fans captured status changes out into deliveries and
//! sends them, one task per engine.
//!
//! **Outbox.** The database captures every status change of a run that has
//! a hook (or whose project has a subscription) in the transaction that
//! makes it (a trigger, see `0013_webhooks.sql`), so no code path that
//! changes a status can skip it and a crash cannot lose one. The worker
//! wakes on the event bus's status events and on a timer (`poll_ms`, and
//! when the next retry is due), and each round:
//! 1. fans the oldest changes out: one delivery per hook that wants the new
//!    status, each with its payload built now (a [`StatusChangePayload`]
//!    whose `delivery_id` is the idempotency key), written together with
//!    the change's removal;
//! 2. claims deliveries that are due, under a lease (`claimed_until`): a
//!    worker that dies mid-send leaves the lease to expire, and the
//!    delivery is sent again, with the same id (at least once);
//! 3. sends them as signed POSTs (at most `timeout_ms` each), recording
//!    every attempt: a 2xx is delivered; anything else is retried after
//!    `backoff_initial_ms`, doubled each time up to `backoff_max_ms` (or a
//!    longer `Retry-After`), until `give_up_after_secs` (a day) have passed
//!    since the change, when it is marked failed.
//!
//! **Order.** A run's deliveries to one hook go out one at a time in the
//! order of the changes: a delivery is not claimed while an earlier one of
//! its run to the same hook is pending (or an earlier change of its run is
//! not fanned out yet). A hook that keeps failing holds back only its own
//! later deliveries of that run.
//!
//! **Bounds.** A project has at most `max_pending_per_project` deliveries
//! pending; a change beyond that is recorded as a failed delivery saying
//! so, never sent. Bodies are at most 64 KiB (the result or the calls'
//! arguments are left out and the payload says `truncated`). Finished
//! deliveries are deleted after `retention_days`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

use crate::error::Result;
use crate::events::EventKind;
use crate::model::{OnStatusChange, PendingCall, StatusChangePayload, Webhook, IDEMPOTENCY_HEADER, STATUS_CHANGED};
use crate::runtime::{now, Runtime};
use crate::store::{AttemptWrite, Claimed, NewDelivery, Settle, StatusChange, WebhookStore};
use crate::tools::config::WebhooksConfig;

/// Changes fanned out per round.
const FAN_OUT_BATCH: u32 = 100;
/// Deliveries in flight at once (each its own task, so a slow receiver
/// holds up only its own run's later deliveries to it).
const IN_FLIGHT: usize = 16;
/// The longest start of an answer kept with a failed attempt.
const ERROR_BODY_BYTES: usize = 256;
/// How long a claim outlives its request's timeout (recording the attempt
/// takes milliseconds; a worker that has not recorded by then is taken as dead).
const LEASE_MARGIN_MS: i64 = 5_000;
/// How often finished deliveries past their retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Spawns the worker of `rt`'s store.
pub(super) fn start(rt: Arc<Runtime>) -> tokio::task::JoinHandle<()> {
    let config = rt.config.webhooks.clone();
    let timeout = Duration::from_millis(config.timeout_ms);
    let client = crate::net::client(rt.config.allow_private_networks, timeout);
    let wake = Arc::new(Notify::new());
    // Status changes made here wake the worker at once; those of other
    // processes (and anything missed) wait for the timer.
    let mut events = rt.bus.subscribe();
    let waker = wake.clone();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match events.recv().await {
                Ok(e) if matches!(e.kind, EventKind::RunStatus { .. } | EventKind::RunFinished { .. }) => {
                    waker.notify_one()
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => waker.notify_one(),
                Err(RecvError::Closed) => break,
            }
        }
    });
    let worker = Worker {
        rt,
        client,
        config,
        claim: uuid::Uuid::now_v7().simple().to_string(),
        slots: Arc::new(Semaphore::new(IN_FLIGHT)),
        wake,
    };
    tokio::spawn(Arc::new(worker).run())
}

struct Worker {
    rt: Arc<Runtime>,
    client: reqwest::Client,
    config: WebhooksConfig,
    /// This worker's claim token (a fresh one per process).
    claim: String,
    /// Room for deliveries in flight.
    slots: Arc<Semaphore>,
    /// Wakes the loop: a status change here, a delivery done.
    wake: Arc<Notify>,
}

impl Worker {
    fn store(&self) -> &dyn WebhookStore {
        self.rt.store.webhooks()
    }

    async fn run(self: Arc<Self>) {
        let poll = Duration::from_millis(self.config.poll_ms);
        let mut pruned: Option<Instant> = None;
        loop {
            if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                pruned = Some(Instant::now());
                let before = now() - chrono::Duration::days(self.config.retention_days as i64);
                if let Err(e) = self.store().prune_deliveries(before).await {
                    tracing::warn!(error = %e, "could not delete old webhook deliveries");
                }
            }
            let worked = match self.clone().round().await {
                Ok(worked) => worked,
                Err(e) => {
                    tracing::warn!(error = %e, "the webhook outbox could not be read; trying again");
                    false
                }
            };
            if worked {
                continue;
            }
            let next = self.store().next_delivery_due().await.ok().flatten();
            let wait = next.map_or(poll, |at| (at - now()).to_std().unwrap_or(Duration::ZERO).min(poll));
            // Never spin: a due delivery that could not be claimed (a lease
            // held elsewhere) is looked at again after a short pause.
            let wait = wait.max(Duration::from_millis(10));
            let _ = tokio::time::timeout(wait, self.wake.notified()).await;
        }
    }

    /// Fans out what was captured and starts sending what is due (as far
    /// as there is room in flight); `true` when it did anything.
    async fn round(self: Arc<Self>) -> Result<bool> {
        let fanned = self.fan_out().await?;
        let room = self.slots.available_permits();
        if room == 0 {
            return Ok(fanned);
        }
        let claimed = (self.store()).claim_deliveries(now(), now() + self.lease(), &self.claim, room as u32).await?;
        let sent = !claimed.is_empty();
        for d in claimed {
            // Only this loop takes slots, so the room counted above is there.
            let Ok(slot) = self.slots.clone().acquire_owned().await else { break };
            let worker = self.clone();
            tokio::spawn(async move {
                worker.deliver(d).await;
                drop(slot);
                // The run's next delivery to this hook may go now.
                worker.wake.notify_one();
            });
        }
        Ok(fanned || sent)
    }

    /// How long a claim holds: one request, and room to record it.
    fn lease(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(self.config.timeout_ms as i64 + LEASE_MARGIN_MS)
    }

    async fn fan_out(&self) -> Result<bool> {
        let changes = self.store().status_changes(FAN_OUT_BATCH).await?;
        let mut hooks: HashMap<String, Vec<Webhook>> = HashMap::new();
        let mut pending: HashMap<String, u64> = HashMap::new();
        for change in &changes {
            if !hooks.contains_key(&change.project) {
                hooks.insert(change.project.clone(), self.store().project_webhooks(&change.project).await?);
            }
            if !pending.contains_key(&change.project) {
                pending.insert(change.project.clone(), self.store().pending_deliveries(&change.project).await?);
            }
            let mut targets: Vec<(Option<String>, String)> = Vec::new();
            let own: Option<OnStatusChange> =
                change.on_status_change.as_deref().and_then(|h| serde_json::from_str(h).ok());
            if let Some(hook) = own.filter(|h| h.wants(change.new_status)) {
                targets.push((None, hook.url));
            }
            for w in hooks.get(&change.project).into_iter().flatten() {
                if crate::model::wants(w.statuses.as_deref(), change.new_status) {
                    targets.push((Some(w.id.clone()), w.url.clone()));
                }
            }
            let count = pending.entry(change.project.clone()).or_default();
            let deliveries: Vec<NewDelivery> = targets
                .into_iter()
                .map(|(subscription_id, url)| {
                    let refused = (*count >= self.config.max_pending_per_project).then(|| {
                        format!(
                            "not sent: project `{}` had {} deliveries waiting, the most allowed \
                             ([webhooks] max_pending_per_project); its receivers are failing or slow",
                            change.project, self.config.max_pending_per_project
                        )
                    });
                    if refused.is_none() {
                        *count += 1;
                    }
                    let id = format!("whd_{}", uuid::Uuid::now_v7().simple());
                    NewDelivery {
                        payload: payload(change, &id).into_body(),
                        id,
                        run_id: change.run_id.clone(),
                        project: change.project.clone(),
                        subscription_id,
                        change_seq: change.seq,
                        url,
                        old_status: change.old_status,
                        new_status: change.new_status,
                        changed_at: change.at,
                        refused,
                    }
                })
                .collect();
            self.store().fan_out(change.seq, &deliveries, now()).await?;
        }
        Ok(!changes.is_empty())
    }

    /// One attempt at `d`: signed, sent, recorded.
    async fn deliver(&self, d: Claimed) {
        let at = now();
        let (status_code, error, retry_after, latency) = match self.send(&d, at).await {
            Sent::Answer { status, error, retry_after, latency } => (Some(status), error, retry_after, latency),
            Sent::Failed { error, latency } => (None, Some(error), None, latency),
            Sent::Gone(why) => {
                let attempt = AttemptWrite { at, status_code: None, latency_ms: 0, error: Some(why.clone()) };
                return self.record(&d, attempt, Settle::Failed(why)).await;
            }
        };
        let attempt = AttemptWrite { at, status_code, latency_ms: latency, error: error.clone() };
        let settle = match &error {
            None => Settle::Delivered,
            Some(why) => self.after_failure(&d, at, why, retry_after),
        };
        self.record(&d, attempt, settle).await;
    }

    async fn record(&self, d: &Claimed, attempt: AttemptWrite, settle: Settle) {
        if let Err(e) = self.store().record_attempt(&d.id, &d.claim, &attempt, &settle).await {
            // The lease runs out and the delivery is sent again.
            tracing::warn!(delivery = %d.id, error = %e, "could not record a webhook attempt");
        }
    }

    /// Retry with backoff, or give up once the delivery is too old.
    fn after_failure(&self, d: &Claimed, at: DateTime<Utc>, why: &str, retry_after: Option<u64>) -> Settle {
        let made = d.attempts + 1;
        let deadline = d.created_at + chrono::Duration::seconds(self.config.give_up_after_secs as i64);
        if at >= deadline {
            return Settle::Failed(format!(
                "gave up after {made} attempts over {}; the last: {why}",
                human(self.config.give_up_after_secs)
            ));
        }
        let mut wait = backoff(&self.config, made);
        if let Some(s) = retry_after {
            wait = wait.max(s.saturating_mul(1000).min(self.config.backoff_max_ms));
        }
        let next = at + chrono::Duration::milliseconds(wait as i64);
        Settle::Retry(next.min(deadline))
    }

    async fn send(&self, d: &Claimed, at: DateTime<Utc>) -> Sent {
        let secrets = match &d.subscription_id {
            Some(id) => self.store().webhook_secrets(id).await,
            None => self.store().run_secret(&d.project).await,
        };
        let secrets = match (secrets, &d.subscription_id) {
            (Ok(Some(s)), _) => s,
            (Ok(None), Some(_)) => return Sent::Gone("not sent: the webhook was deleted".into()),
            (Ok(None), None) => {
                let error = format!("not sent: project `{}` has no run webhook secret", d.project);
                return Sent::Failed { error, latency: 0 };
            }
            (Err(e), _) => {
                return Sent::Failed { error: format!("not sent: the secret could not be read ({e})"), latency: 0 }
            }
        };
        if let Err(e) = crate::net::check_url(&d.url, self.rt.config.allow_private_networks) {
            return Sent::Failed { error: format!("not sent: {e}"), latency: 0 };
        }
        let signature = sign_all(&secrets.signing(at), at.timestamp(), d.payload.as_bytes());
        let started = Instant::now();
        let sent = (self.client.post(&d.url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(crate::net::SIGNATURE_HEADER, signature)
            .header(IDEMPOTENCY_HEADER, &d.id)
            .body(d.payload.clone())
            .send()
            .await;
        let latency = |started: Instant| started.elapsed().as_millis().min(u64::MAX.into()) as u64;
        match sent {
            Err(e) => Sent::Failed { error: describe(&e, self.config.timeout_ms), latency: latency(started) },
            Ok(answer) => {
                let status = answer.status();
                let latency = latency(started);
                if status.is_success() {
                    return Sent::Answer { status: status.as_u16(), error: None, retry_after: None, latency };
                }
                let retry_after = (answer.headers().get(reqwest::header::RETRY_AFTER))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let mut error = format!("answered {status}");
                if status.is_redirection() {
                    error.push_str(" (redirects are not followed)");
                }
                let start = body_start(answer).await;
                if !start.is_empty() {
                    error = format!("{error}: {start}");
                }
                Sent::Answer { status: status.as_u16(), error: Some(error), retry_after, latency }
            }
        }
    }
}

enum Sent {
    /// The receiver answered (`error` for a non-2xx).
    Answer { status: u16, error: Option<String>, retry_after: Option<u64>, latency: u64 },
    /// No answer.
    Failed { error: String, latency: u64 },
    /// Never to be sent (its subscription is gone).
    Gone(String),
}

/// The wait before attempt `made + 1`: the initial backoff doubled per
/// attempt made after the first, at most the cap.
pub(crate) fn backoff(config: &WebhooksConfig, made: u32) -> u64 {
    let doublings = made.saturating_sub(1).min(40);
    config.backoff_initial_ms.saturating_mul(1u64 << doublings).min(config.backoff_max_ms)
}

/// `t=…,v1=…` with one `v1` per secret (the current one first).
fn sign_all(secrets: &[&str], t: i64, body: &[u8]) -> String {
    let mut header = format!("t={t}");
    for secret in secrets {
        let one = crate::net::sign(secret, t, body);
        if let Some((_, v1)) = one.split_once(',') {
            header.push(',');
            header.push_str(v1);
        }
    }
    header
}

/// A request error as an attempt records it: what went wrong, with its causes.
fn describe(e: &reqwest::Error, timeout_ms: u64) -> String {
    if e.is_timeout() {
        return format!("no answer within {timeout_ms} ms");
    }
    let mut text = if e.is_connect() { "could not connect".to_owned() } else { "the request failed".to_owned() };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.chars().take(1000).collect()
}

/// The first bytes of an answer's body, as text on one line.
async fn body_start(mut answer: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_BYTES {
        match answer.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(ERROR_BODY_BYTES);
    let text = String::from_utf8_lossy(&bytes);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn human(secs: u64) -> String {
    match secs {
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// A call awaiting a decision as the trigger captured it.
#[derive(Deserialize)]
struct CapturedCall {
    call_id: String,
    tool_name: String,
    step_index: u32,
    #[serde(default)]
    arguments: Value,
    requested_at: Option<i64>,
}

/// The payload of delivery `id` of `change`.
fn payload(change: &StatusChange, id: &str) -> StatusChangePayload {
    let calls: Vec<CapturedCall> =
        change.interruptions.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let result = change.result.as_deref().and_then(|text| serde_json::from_str(text).ok());
    StatusChangePayload {
        kind: STATUS_CHANGED.into(),
        delivery_id: id.to_owned(),
        sequence: change.seq,
        run_id: change.run_id.clone(),
        run_name: change.run_name.clone(),
        project: change.project.clone(),
        tags: serde_json::from_str::<BTreeMap<String, String>>(&change.run_tags).unwrap_or_default(),
        old_status: change.old_status,
        new_status: change.new_status,
        at: change.at,
        result,
        summary: change.summary.clone(),
        failure_reason: change.failure_reason.clone(),
        interruptions: calls
            .into_iter()
            .map(|c| PendingCall {
                call_id: c.call_id,
                tool_name: c.tool_name,
                step_index: c.step_index,
                arguments: c.arguments,
                requested_at: c.requested_at.and_then(DateTime::from_timestamp_millis),
            })
            .collect(),
        truncated: change.result_omitted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let c = WebhooksConfig { backoff_initial_ms: 100, backoff_max_ms: 1000, ..WebhooksConfig::default() };
        let waits: Vec<u64> = (1..=6).map(|n| backoff(&c, n)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(&c, u32::MAX), 1000, "no overflow");
    }

    #[test]
    fn both_secrets_sign_during_a_rotation() {
        let header = sign_all(&["whsec_new", "whsec_old"], 1_700_000_000, b"{}");
        assert_eq!(header.matches("v1=").count(), 2, "{header}");
        for secret in ["whsec_new", "whsec_old"] {
            assert_eq!(crate::net::verify(secret, &header, b"{}", 1_700_000_000, 300), Ok(()));
        }
        assert!(crate::net::verify("whsec_other", &header, b"{}", 1_700_000_000, 300).is_err());
    }
}
