//! A client of one run's event stream, as a browser's `EventSource` would
//! be: it reads `GET /api/runs/{id}/events`, and whenever the stream ends
//! or the server dies it reconnects with `Last-Event-ID` set to the last id
//! it got. It records every event and notes each id that is not the
//! previous one plus one.
//!
//! A request is tied to the address it went to: once the server has moved
//! (killed and restarted elsewhere), whatever still holds the client at the
//! old address is not that server (the port may have been taken by anything
//! meanwhile, which may accept and never answer), so the client leaves it
//! and reconnects to the new address.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

/// One event as the client received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub seq: u64,
    pub kind: String,
    /// The event's `data` without `run_id`, `seq`, `at` and `type`: what
    /// the store keeps as the event's payload.
    pub payload: Value,
}

#[derive(Debug, Default)]
pub struct SseLog {
    pub events: Vec<Seen>,
    /// Whether a response body is being read right now.
    pub connected: bool,
    /// Connections that answered 200.
    pub streams: u32,
    /// Ids that did not follow the previous one, in words.
    pub problems: Vec<String>,
    /// The client stopped (asked to, after the run finished).
    pub stopped: bool,
    /// What the client is doing now, in words (for a client that does not stop).
    pub doing: String,
    /// Requests left because the server moved away from their address.
    pub left_behind: u32,
}

impl SseLog {
    pub fn last(&self) -> u64 {
        self.events.last().map_or(0, |e| e.seq)
    }
}

/// What the test tells every client: where the server is now, and when to stop.
#[derive(Clone)]
pub struct Control {
    pub base: watch::Receiver<String>,
    /// Set once every run is settled: a client then stops at its stream's end.
    pub stop: watch::Receiver<bool>,
}

/// Follows run `run_id` until told to stop; `wake` is bumped when a finished
/// run may go on (a follow-up was posted).
pub fn follow(
    http: reqwest::Client,
    run_id: String,
    mut control: Control,
    mut wake: watch::Receiver<u64>,
    log: Arc<Mutex<SseLog>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Reconnections allowed once told to stop: enough to pick up a
        // `run.finished` still to come, bounded so the client always ends.
        let mut after_stop = 0;
        loop {
            if *control.stop.borrow() {
                after_stop += 1;
                if after_stop > 4 {
                    break;
                }
            }
            let base = control.base.borrow_and_update().clone();
            let last = log.lock().unwrap().last();
            let mut req = http.get(format!("{base}/api/runs/{run_id}/events"));
            if last > 0 {
                req = req.header("last-event-id", last.to_string());
            }
            log.lock().unwrap().doing = format!("waiting for the answer of {base} after event #{last}");
            let answer = tokio::select! {
                answer = req.send() => answer,
                () = moved_from(control.base.clone(), &base) => {
                    log.lock().unwrap().left_behind += 1;
                    continue;
                }
            };
            let resp = match answer {
                Ok(r) => r,
                Err(_) => {
                    // The server is down (killed): try again shortly.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            match resp.status().as_u16() {
                200 => {}
                204 => {
                    // The run finished and this client has its `run.finished`.
                    if *control.stop.borrow() {
                        break;
                    }
                    log.lock().unwrap().doing = format!("waiting to be woken after the end, at {base}");
                    tokio::select! {
                        _ = wake.changed() => {}
                        _ = control.stop.changed() => {}
                        _ = control.base.changed() => {}
                    }
                    continue;
                }
                404 => {
                    // Created by a request whose answer was lost, or not yet.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                429 | 503 => {
                    // Turned away under load, as documented: come back later.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                other => {
                    let body = resp.text().await.unwrap_or_default();
                    log.lock().unwrap().problems.push(format!(
                        "reconnecting after event #{last} was answered {other}: {}",
                        body.chars().take(300).collect::<String>()
                    ));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
            {
                let mut l = log.lock().unwrap();
                l.connected = true;
                l.streams += 1;
                l.doing = format!("reading the stream of {base} after event #{last}");
            }
            tokio::select! {
                () = read_stream(resp, last, &log) => {}
                () = moved_from(control.base.clone(), &base) => log.lock().unwrap().left_behind += 1,
            }
            log.lock().unwrap().connected = false;
        }
        let mut l = log.lock().unwrap();
        l.stopped = true;
        l.doing = "stopped".into();
    })
}

/// Resolves once the server is no longer at `base` (see the module docs).
async fn moved_from(mut now: watch::Receiver<String>, base: &str) {
    if now.wait_for(|b| b != base).await.is_err() {
        // The test is over: nothing moves any more.
        std::future::pending::<()>().await;
    }
}

/// Reads one response to its end (or the connection's), recording events.
async fn read_stream(mut resp: reqwest::Response, resumed_after: u64, log: &Mutex<SseLog>) {
    let mut buf = String::new();
    let mut first = true;
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(event) = parse_block(&block) else { continue };
            let mut l = log.lock().unwrap();
            match event {
                Ok(seen) => {
                    let expected = l.last() + 1;
                    if seen.seq != expected {
                        let how = if first {
                            format!("reconnecting with Last-Event-ID {resumed_after}, the first event was")
                        } else {
                            "the stream went on with".into()
                        };
                        let problem = format!("expected event #{expected}, but {how} #{} ({})", seen.seq, seen.kind);
                        l.problems.push(problem);
                    }
                    // Kept only in order, so `last` stays the id to resume after.
                    if seen.seq > l.last() {
                        l.events.push(seen);
                    }
                }
                Err(problem) => l.problems.push(problem),
            }
            first = false;
        }
    }
}

/// One SSE message: `None` for a comment (keep-alive), `Err` when malformed.
fn parse_block(block: &str) -> Option<Result<Seen, String>> {
    let (mut id, mut kind, mut data) = (None, None, String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("event:") {
            kind = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if id.is_none() && kind.is_none() && data.is_empty() {
        return None;
    }
    let seq = match id.as_deref().map(str::parse::<u64>) {
        Some(Ok(n)) => n,
        _ => return Some(Err(format!("an event without a numeric id: {block:?}"))),
    };
    let kind = kind.unwrap_or_default();
    let Ok(Value::Object(mut payload)) = serde_json::from_str::<Value>(&data) else {
        return Some(Err(format!("event #{seq} ({kind}) has data that is not a JSON object: {data:?}")));
    };
    if payload.get("type").and_then(Value::as_str) != Some(kind.as_str()) {
        return Some(Err(format!("event #{seq}: `event: {kind}` but its data says type {:?}", payload.get("type"))));
    }
    for k in ["run_id", "seq", "at", "type"] {
        payload.remove(k);
    }
    Some(Ok(Seen { seq, kind, payload: Value::Object(payload) }))
}

/// Reads a finished run's whole stream from the start (`after=0`): the
/// stored events, in order; `Err` says why they could not be read.
pub async fn replay(http: &reqwest::Client, base: &str, run_id: &str) -> Result<Vec<Seen>, String> {
    let resp = http
        .get(format!("{base}/api/runs/{run_id}/events?after=0"))
        .send()
        .await
        .map_err(|e| format!("the replay request failed: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("the replay was answered {}", resp.status()));
    }
    let log = Mutex::new(SseLog::default());
    tokio::time::timeout(Duration::from_secs(20), read_stream(resp, 0, &log))
        .await
        .map_err(|_| "the replay of a finished run did not end within 20 s".to_owned())?;
    let log = log.into_inner().unwrap();
    if let Some(p) = log.problems.first() {
        return Err(format!("the replay itself is not in order: {p}"));
    }
    Ok(log.events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that was waiting for an answer at the killed server's
    /// address when the server moved (something else took the port: it
    /// accepts and never answers) follows the server to its new address
    /// and reads the run to its end there.
    #[tokio::test]
    async fn a_client_follows_its_server_away_from_an_address_that_never_answers() {
        follows_its_server_away(false).await;
    }

    /// The same for a client reading a stream there that never sends anything.
    #[tokio::test]
    async fn a_client_follows_its_server_away_from_a_stream_that_never_sends() {
        follows_its_server_away(true).await;
    }

    /// `streams`: what holds the old address answers with the headers of an
    /// event stream (then sends nothing) instead of not answering at all.
    async fn follows_its_server_away(streams: bool) {
        let app = crate::support::app().await;
        let run =
            app.finished_run(r#"{"initial_prompt": "hi", "model_settings": {"script": [{"text": "done"}]}}"#).await;
        let run_id = run["id"].as_str().unwrap().to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let leptos_options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
        let state = runlens::server::AppState::new(app.engine.clone(), leptos_options, None);
        let server = tokio::spawn(runlens::server::run(listener, state, std::future::pending()));

        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (base_tx, base_rx) = watch::channel(format!("http://{}", silent.local_addr().unwrap()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (_wake_tx, wake_rx) = watch::channel(0);
        let log = Arc::new(Mutex::new(SseLog::default()));
        let builder = runlens_engine::net::http_builder().connect_timeout(Duration::from_secs(2));
        let http = crate::support::client_with_key(builder, &app.admin_key);
        let client = follow(http, run_id.clone(), Control { base: base_rx, stop: stop_rx }, wake_rx, log.clone());
        // The client's request reached the old address, which holds it.
        let (mut held, _) = silent.accept().await.unwrap();
        if streams {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                held.read_exact(&mut byte).await.unwrap();
                request.push(byte[0]);
            }
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            held.write_all(head.as_bytes()).await.unwrap();
            tokio::time::timeout(Duration::from_secs(20), async {
                while !log.lock().unwrap().connected {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("the client never read the answer");
        }
        base_tx.send_replace(base);

        // Hang guards only: a client that stays at the old address never ends.
        let finished = tokio::time::timeout(Duration::from_secs(20), async {
            while log.lock().unwrap().events.last().is_none_or(|e| e.kind != "run.finished") {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        stop_tx.send_replace(true);
        let stopped = tokio::time::timeout(Duration::from_secs(20), client).await;
        server.abort();
        let log = log.lock().unwrap();
        assert!(finished.is_ok(), "the client never read the run's end at the new address: {log:?}");
        assert!(stopped.is_ok(), "the client did not stop: {log:?}");
        assert!(log.stopped && log.problems.is_empty(), "{log:?}");
        let seqs: Vec<u64> = log.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
}
