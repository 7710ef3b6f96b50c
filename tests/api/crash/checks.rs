//! The invariants, checked after every restart and once more at the end.
//! Each broken one becomes a sentence naming the run, the call or the
//! event, noted once in `World::violations` (see `World::note`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::plan::{follow_up_text, Kind};
use super::sse::{self, Seen};
use super::world::{FollowUp, Known, Shown, World};

/// What one check looked at.
#[derive(Default, Debug)]
pub struct Counts {
    pub runs: usize,
    pub calls: usize,
    pub decisions: usize,
    pub emails: usize,
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let resp = http.get(url).send().await.map_err(|e| format!("GET {url} failed: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("GET {url}: the body could not be read: {e}"))?;
    if !status.is_success() {
        return Err(format!("GET {url} answered {status}: {}", text.chars().take(300).collect::<String>()));
    }
    serde_json::from_str(&text).map_err(|e| format!("GET {url}: not JSON ({e})"))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

/// After a restart the test's requests whose answers were lost are settled
/// from what the server has: was the run created, was the follow-up posted?
pub async fn resolve_unknowns(http: &reqwest::Client, base: &str, world: &Mutex<World>) -> Result<(), String> {
    let listed = get_json(http, &format!("{base}/api/runs?limit=200")).await?;
    let present: BTreeSet<String> =
        listed["runs"].as_array().into_iter().flatten().map(|r| text(r, "id").to_owned()).collect();
    let (recreate, follow_ups): (Vec<(String, Value)>, Vec<String>) = {
        let w = world.lock().unwrap();
        let recreate = w
            .runs
            .iter()
            .filter(|(id, r)| r.created == Known::Unknown && !present.contains(*id))
            .map(|(id, r)| (id.clone(), r.body.clone()))
            .collect();
        let follow_ups = w.runs.iter().filter(|(_, r)| r.follow_up == FollowUp::Unknown).map(|(id, _)| id.clone());
        (recreate, follow_ups.collect())
    };
    {
        let mut w = world.lock().unwrap();
        for id in &present {
            if let Some(r) = w.runs.get_mut(id) {
                r.created = Known::Yes;
            }
        }
    }
    for (id, body) in recreate {
        // Same id: creating it again is idempotent.
        let resp = http.post(format!("{base}/api/runs")).json(&body).send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(format!("creating run {id} again was answered {status}: {body}"));
        }
        world.lock().unwrap().runs.get_mut(&id).expect("a tracked run").created = Known::Yes;
    }
    for id in follow_ups {
        let messages = get_json(http, &format!("{base}/api/runs/{id}/messages")).await?;
        let wanted = follow_up_text(&id);
        let posted = messages["messages"].as_array().into_iter().flatten().any(|m| text(m, "message") == wanted);
        world.lock().unwrap().runs.get_mut(&id).expect("a tracked run").follow_up =
            if posted { FollowUp::Posted } else { FollowUp::Todo };
    }
    Ok(())
}

/// Every run is running, paused, or ended with a reason; every decision the
/// server ever showed, and every decision it confirmed to the test, is still
/// there; no `send_email` ran without an approval; each email in the outbox
/// matches exactly one approved `send_email` call that ran once.
/// `last`: everything was let finish, so nothing may still be running.
pub async fn check_state(
    http: &reqwest::Client,
    base: &str,
    world: &Mutex<World>,
    when: &str,
    last: bool,
) -> Result<Counts, String> {
    let mut counts = Counts::default();
    let mut broke = Vec::new();
    // Read before the calls: an email listed here was written before the
    // call was read, so the call shows at least that it ran.
    let sent_before = emails(http, base).await?;
    let listed = get_json(http, &format!("{base}/api/runs?limit=200")).await?;
    let runs: Vec<Value> = listed["runs"].as_array().cloned().unwrap_or_default();
    let by_id: BTreeMap<String, &Value> = runs.iter().map(|r| (text(r, "id").to_owned(), r)).collect();
    {
        let w = world.lock().unwrap();
        for (id, rec) in &w.runs {
            if rec.created == Known::Yes && !by_id.contains_key(id) {
                broke.push(format!("run {id} ({:?}) was created (answered 201) but is missing {when}", rec.kind));
            }
        }
    }
    // (run, call) → the call, for the outbox check.
    let mut calls: BTreeMap<(String, String), Value> = BTreeMap::new();
    for run in &runs {
        let id = text(run, "id").to_owned();
        let (kind, cancel_asked) = {
            let w = world.lock().unwrap();
            match w.runs.get(&id) {
                Some(r) => (r.kind, r.cancel_asked),
                None => continue, // not the test's
            }
        };
        counts.runs += 1;
        let name = format!("run {id} ({kind:?})");
        let status = text(run, "status");
        let reason = |k: &str| run.get(k).and_then(Value::as_str).filter(|s| !s.trim().is_empty()).is_some();
        let steps = get_json(http, &format!("{base}/api/runs/{id}/steps")).await?;
        let steps = steps["steps"].as_array().cloned().unwrap_or_default();
        match status {
            "pending" | "running" if last => {
                broke.push(format!("{name} is still {status} after everything was let finish"))
            }
            "pending" | "running" => {}
            "paused" => {
                let last_step = steps.last().map(|s| s["tool_calls"].clone()).unwrap_or_default();
                let awaiting: Vec<&str> = last_step
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| text(c, "status") == "awaiting_approval")
                    .map(|c| text(c, "id"))
                    .collect();
                // Decided (or timed out) since the list was read? Then the
                // run is no longer what the list said.
                let unchanged = || async {
                    let now = get_json(http, &format!("{base}/api/runs/{id}")).await?;
                    Ok::<bool, String>(text(&now, "status") == "paused" && now["updated_at"] == run["updated_at"])
                };
                if awaiting.is_empty() && unchanged().await? {
                    broke.push(format!("{name} is paused {when} but no call of its last step awaits approval"));
                } else if last && !awaiting.is_empty() {
                    broke.push(format!(
                        "{name} is still paused after every call was decided and everything was let finish \
                         (awaiting: {awaiting:?})"
                    ));
                }
            }
            "done" if !reason("summary") => broke.push(format!("{name} is done {when} without a summary")),
            "done" => {}
            "failed" => {
                let why = text(run, "failure_reason");
                let hint = if why.contains("script ran out") {
                    " (the model was asked for another turn after the script's final answer)"
                } else {
                    ""
                };
                broke.push(format!("{name} failed {when}: {why:?}{hint}; its script cannot fail"))
            }
            "cancelled" if !cancel_asked => broke.push(format!("{name} is cancelled {when} but nobody cancelled it")),
            "cancelled" if !reason("summary") && !reason("failure_reason") => {
                broke.push(format!("{name} is cancelled {when} without a reason"))
            }
            "cancelled" => {}
            other => broke.push(format!("{name} has an unknown status `{other}` {when}")),
        }
        for step in &steps {
            for call in step["tool_calls"].as_array().into_iter().flatten() {
                counts.calls += 1;
                let call_id = text(call, "id").to_owned();
                check_call(world, &name, &id, call, when, last, &mut broke, &mut counts);
                if calls.insert((id.clone(), call_id.clone()), call.clone()).is_some() {
                    broke.push(format!("{name} has two tool calls with the id {call_id}"));
                }
            }
        }
    }
    // Read after the calls: a call that succeeded before has its email here.
    let sent_after = emails(http, base).await?;
    let outbox = Outbox { before: &sent_before, after: &sent_after };
    check_outbox(world, outbox, &calls, when, last, &mut broke, &mut counts);
    world.lock().unwrap().note(when, broke);
    Ok(counts)
}

#[allow(clippy::too_many_arguments)]
fn check_call(
    world: &Mutex<World>,
    name: &str,
    run_id: &str,
    call: &Value,
    when: &str,
    last: bool,
    broke: &mut Vec<String>,
    counts: &mut Counts,
) {
    let call_id = text(call, "id");
    let tool = text(call, "tool_name");
    let status = text(call, "status");
    let what = format!("{name}: call {call_id} ({tool}, {status})");
    let approval = call.get("approval").filter(|a| !a.is_null());
    let now = approval.map(|a| Shown {
        decision: text(a, "decision").to_owned(),
        decided_by: text(a, "decided_by").to_owned(),
        decided_at: text(a, "decided_at").to_owned(),
        seen: when.to_owned(),
    });
    let key = (run_id.to_owned(), call_id.to_owned());
    let mut w = world.lock().unwrap();
    if now.is_some() {
        counts.decisions += 1;
    }
    match (w.shown.get(&key).cloned(), &now) {
        (Some(before), None) => broke.push(format!(
            "{what}: its decision ({} by {} at {}, shown {}) is gone {when}",
            before.decision, before.decided_by, before.decided_at, before.seen
        )),
        (Some(before), Some(n)) if (&before.decision, &before.decided_by) != (&n.decision, &n.decided_by) => broke
            .push(format!(
                "{what}: its decision changed from {} by {} (shown {}) to {} by {} {when}",
                before.decision, before.decided_by, before.seen, n.decision, n.decided_by
            )),
        (None, Some(n)) => {
            w.shown.insert(key.clone(), n.clone());
        }
        _ => {}
    }
    if let Some(ours) = w.ours.get(&key) {
        match &now {
            None if ours.confirmed => broke.push(format!(
                "{what}: the server confirmed the decision `{}` but it is not stored {when}",
                ours.decision
            )),
            Some(n) if ours.confirmed && n.decision != ours.decision => broke.push(format!(
                "{what}: the server confirmed the decision `{}` but `{}` by {} is stored {when}",
                ours.decision, n.decision, n.decided_by
            )),
            Some(n) if !ours.confirmed && n.decided_by == super::server::KEY_NAME && n.decision != ours.decision => {
                broke.push(format!(
                    "{what}: the test only ever sent `{}`, yet `{}` is stored",
                    ours.decision, n.decision
                ))
            }
            _ => {}
        }
    }
    drop(w);
    let decision = now.as_ref().map(|n| n.decision.as_str());
    if status == "awaiting_approval" && decision.is_some() {
        broke.push(format!("{what} was decided ({decision:?}) but still awaits approval {when}"));
    }
    if status == "rejected" && decision == Some("approved") {
        broke.push(format!("{what} is rejected although its decision is `approved`"));
    }
    if tool == "send_email" {
        match status {
            "awaiting_approval" | "rejected" => {}
            _ if decision != Some("approved") => {
                broke.push(format!("{what} went past approval without being approved (decision: {decision:?})"))
            }
            _ => {}
        }
    }
    if last && !matches!(status, "succeeded" | "failed" | "rejected" | "cancelled") {
        broke.push(format!("{what} is not finished after everything was let finish"));
    }
}

/// The outbox read before and after the runs' calls.
struct Outbox<'a> {
    before: &'a [Value],
    after: &'a [Value],
}

async fn emails(http: &reqwest::Client, base: &str) -> Result<Vec<Value>, String> {
    let outbox = get_json(http, &format!("{base}/api/outbox")).await?;
    let emails: Vec<Value> = outbox["emails"].as_array().cloned().unwrap_or_default();
    if emails.len() >= 100 {
        return Err("the outbox lists 100 emails, its page size: the test cannot see them all".into());
    }
    Ok(emails)
}

/// The email's call, from its id `{run_id}-{call_id}`.
fn email_call(email: &Value) -> Option<(String, String)> {
    let run_id = text(email, "run_id");
    let call_id = text(email, "id").strip_prefix(&format!("{run_id}-"))?;
    Some((run_id.to_owned(), call_id.to_owned()))
}

fn check_outbox(
    world: &Mutex<World>,
    outbox: Outbox<'_>,
    calls: &BTreeMap<(String, String), Value>,
    when: &str,
    last: bool,
    broke: &mut Vec<String>,
    counts: &mut Counts,
) {
    let w = world.lock().unwrap();
    for email in outbox.before {
        let (id, run_id) = (text(email, "id"), text(email, "run_id"));
        if !w.runs.contains_key(run_id) {
            continue;
        }
        counts.emails += 1;
        let Some(call_id) = id.strip_prefix(&format!("{run_id}-")) else {
            broke.push(format!("email {id} of run {run_id} does not name a call of its run"));
            continue;
        };
        let key = (run_id.to_owned(), call_id.to_owned());
        let what = format!("email {id} (run {run_id}, {})", w.kind(run_id));
        let Some(call) = calls.get(&key) else {
            broke.push(format!("{what} was sent, but its run has no call {call_id} {when}"));
            continue;
        };
        let status = text(call, "status");
        if text(call, "tool_name") != "send_email" {
            broke.push(format!("{what} was sent by call {call_id}, a {} call", text(call, "tool_name")));
        }
        let approval = call.get("approval").filter(|a| !a.is_null());
        match approval {
            Some(a) if text(a, "decision") == "approved" => {
                if let (Some(decided), Some(created)) = (time(&a["decided_at"]), time(&email["created_at"])) {
                    if created < decided {
                        broke.push(format!("{what} was sent at {created} before its approval at {decided}"));
                    }
                }
            }
            other => broke.push(format!(
                "{what} was sent without an approval: call {call_id} is {status} with decision {:?}",
                other.map(|a| text(a, "decision"))
            )),
        }
        if let Some(ours) = w.ours.get(&key).filter(|o| o.decision == "rejected" && o.confirmed) {
            broke.push(format!("{what} was sent although the server confirmed the test's `{}`", ours.decision));
        }
        let args = call.get("approval").and_then(|a| a.get("edited_arguments")).filter(|a| !a.is_null());
        let args = args.unwrap_or(&call["arguments"]);
        if text(args, "subject") != text(email, "subject") || text(args, "to") != text(email, "to") {
            broke.push(format!("{what} does not carry its call's arguments ({args})"));
        }
        let error = text(call, "error");
        match status {
            "succeeded" => {}
            "running" if !last => {}
            _ => {
                let hint = if error.contains("UNIQUE") || error.contains("outbox could not be written") {
                    " (it ran a second time and found its email already in the outbox)"
                } else {
                    ""
                };
                broke.push(format!("{what} was sent, yet call {call_id} is {status} ({error:?}){hint}"))
            }
        }
    }
    let mut sent: BTreeMap<(String, String), usize> = BTreeMap::new();
    for email in outbox.after {
        if let Some(key) = email_call(email) {
            *sent.entry(key).or_default() += 1;
        }
    }
    for (key, n) in &sent {
        if *n > 1 {
            broke.push(format!("run {} call {}: the outbox holds {n} emails for one call", key.0, key.1));
        }
    }
    for ((run_id, call_id), call) in calls {
        if text(call, "tool_name") == "send_email"
            && text(call, "status") == "succeeded"
            && !sent.contains_key(&(run_id.clone(), call_id.clone()))
        {
            broke.push(format!(
                "run {run_id} ({}): send_email call {call_id} succeeded but the outbox has no email for it {when}",
                w.kind(run_id)
            ));
        }
    }
}

/// While the server is down: every event an SSE client received must be in
/// the database, the same event under the same number; one that is not
/// committed will be numbered again after the restart.
pub async fn check_events_committed(db_url: &str, world: &Mutex<World>, when: &str) -> usize {
    let pool = sqlx::SqlitePool::connect(db_url).await.expect("the database opens while the server is down");
    let seen: Vec<(String, Kind, Vec<Seen>, Vec<String>)> = {
        let w = world.lock().unwrap();
        w.runs
            .iter()
            .map(|(id, r)| {
                let mut log = r.sse.lock().unwrap();
                let problems = std::mem::take(&mut log.problems);
                (id.clone(), r.kind, log.events.clone(), problems)
            })
            .collect()
    };
    let mut broke = Vec::new();
    let mut checked = 0;
    let mut bad = Vec::new();
    for (run_id, kind, events, problems) in seen {
        for p in problems {
            broke.push(format!("run {run_id} ({kind:?}): its SSE client: {p}"));
        }
        let Some(last) = events.last().map(|e| e.seq) else { continue };
        if world.lock().unwrap().bad_streams.contains(&run_id) {
            continue;
        }
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT seq, type, data FROM run_events WHERE run_id = ? AND seq <= ? ORDER BY seq")
                .bind(&run_id)
                .bind(last as i64)
                .fetch_all(&pool)
                .await
                .expect("the events table reads");
        let stored: BTreeMap<u64, (String, Value)> = rows
            .into_iter()
            .map(|(seq, kind, data)| (seq as u64, (kind, serde_json::from_str(&data).unwrap_or(Value::Null))))
            .collect();
        let committed = stored.keys().next_back().copied().unwrap_or(0);
        for e in &events {
            checked += 1;
            match stored.get(&e.seq) {
                None => {
                    broke.push(format!(
                        "run {run_id} ({kind:?}): the SSE client received event #{} ({}) but it was not committed \
                         when the server was killed {when} (events up to #{committed} were): its number will be \
                         given to another event",
                        e.seq, e.kind
                    ));
                    bad.push(run_id.clone());
                    break; // the rest of the run's events say the same
                }
                Some((k, data)) if *k != e.kind || *data != e.payload => {
                    broke.push(format!(
                        "run {run_id} ({kind:?}): the SSE client received event #{} as {} {}, but the database \
                         holds #{} as {k} {} {when}",
                        e.seq,
                        e.kind,
                        short(&e.payload),
                        e.seq,
                        short(data)
                    ));
                    bad.push(run_id.clone());
                    break;
                }
                Some(_) => {}
            }
        }
    }
    pool.close().await;
    let mut w = world.lock().unwrap();
    w.note(when, broke);
    w.bad_streams.extend(bad);
    checked
}

/// At the end: each client's events are exactly the run's stored events
/// from #1, and end with the `run.finished` of the run's final status.
pub async fn check_streams(http: &reqwest::Client, base: &str, world: &Mutex<World>) -> Result<usize, String> {
    // Per run: id, kind, events received, problems noted, whether it
    // stopped, and what it was doing.
    type Client = (String, Kind, Vec<Seen>, Vec<String>, bool, String);
    let runs: Vec<Client> = {
        let w = world.lock().unwrap();
        w.runs
            .iter()
            .map(|(id, r)| {
                let mut log = r.sse.lock().unwrap();
                let problems = std::mem::take(&mut log.problems);
                (id.clone(), r.kind, log.events.clone(), problems, log.stopped, log.doing.clone())
            })
            .collect()
    };
    let mut broke = Vec::new();
    let mut checked = 0;
    for (run_id, kind, events, problems, stopped, doing) in runs {
        let name = format!("run {run_id} ({kind:?})");
        for p in problems {
            broke.push(format!("{name}: its SSE client: {p}"));
        }
        if !stopped {
            broke.push(format!("{name}: its SSE client was still reading after the run settled ({doing})"));
        }
        let run = get_json(http, &format!("{base}/api/runs/{run_id}")).await?;
        let status = text(&run, "status");
        match events.last() {
            None => broke.push(format!("{name} ({status}): its SSE client received no event")),
            Some(e) if e.kind != "run.finished" => broke.push(format!(
                "{name} ({status}): its SSE client's stream ended with #{} {} instead of run.finished",
                e.seq, e.kind
            )),
            Some(e) if text(&e.payload, "status") != status => broke.push(format!(
                "{name}: its SSE client's last run.finished (#{}) says {}, the run is {status}",
                e.seq, e.payload["status"]
            )),
            Some(_) => {}
        }
        if events.first().is_some_and(|e| e.seq != 1) {
            broke.push(format!("{name}: its SSE client's first event is #{}, not #1", events[0].seq));
        }
        let stored = match sse::replay(http, base, &run_id).await {
            Ok(s) => s,
            Err(e) => {
                broke.push(format!("{name}: {e}"));
                continue;
            }
        };
        checked += events.len();
        if stored.last().is_none_or(|e| e.kind != "run.finished") {
            broke.push(format!(
                "{name} ({status}): its stored event stream ends with {:?} instead of run.finished, so a client \
                 that replays it never sees the run finish",
                stored.last().map(|e| format!("#{} {}", e.seq, e.kind))
            ));
        }
        if stored.len() != events.len() {
            broke.push(format!(
                "{name}: its SSE client received {} events (last #{}), the server replays {} (last #{})",
                events.len(),
                events.last().map_or(0, |e| e.seq),
                stored.len(),
                stored.last().map_or(0, |e| e.seq)
            ));
        }
        if let Some((live, kept)) =
            events.iter().zip(&stored).find(|(a, b)| a.seq != b.seq || a.kind != b.kind || a.payload != b.payload)
        {
            broke.push(format!(
                "{name}: the SSE client received #{} as {} {}, but the replay's #{} is {} {}",
                live.seq,
                live.kind,
                short(&live.payload),
                kept.seq,
                kept.kind,
                short(&kept.payload)
            ));
        }
    }
    world.lock().unwrap().note("", broke);
    Ok(checked)
}

/// A payload cut to a readable length for a failure message.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
