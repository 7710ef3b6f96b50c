//! SSE over `router(state)`: a finished run's stream replays and ends,
//! `Last-Event-ID` / `?after=` resume with no gap or duplicate, a live run
//! streams text as it is made, a paused run's stream goes on when its
//! approval times out, the all-runs stream, 204 and 404, and a shutdown that
//! ends open streams.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::{app, App};

/// One SSE message.
#[derive(Debug)]
struct Msg {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// Reads SSE messages off a response body as they arrive.
struct Reader {
    body: Body,
    buf: String,
}

impl Reader {
    /// The next message; `None` when the stream ended. Fails after 20 s
    /// without one (keep-alive comments do not count).
    async fn next(&mut self) -> Option<Msg> {
        tokio::time::timeout(Duration::from_secs(20), self.next_message()).await.expect("no SSE message for 20 s")
    }

    async fn next_message(&mut self) -> Option<Msg> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    match line.split_once(':') {
                        Some(("id", v)) => id = Some(v.trim().parse().unwrap()),
                        Some(("event", v)) => event = v.trim().to_owned(),
                        Some(("data", v)) => data.push_str(v.trim_start()),
                        _ => {} // comments (keep-alive) and blank lines
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(Msg { id, event, data: serde_json::from_str(&data).unwrap() });
            }
            match self.body.frame().await {
                None => return None,
                Some(frame) => {
                    if let Ok(bytes) = frame.unwrap().into_data() {
                        self.buf.push_str(std::str::from_utf8(&bytes).unwrap());
                    }
                }
            }
        }
    }

    async fn all(mut self) -> Vec<Msg> {
        let mut got = Vec::new();
        while let Some(m) = self.next().await {
            got.push(m);
        }
        got
    }
}

async fn open(app: &App, uri: &str, last_event_id: Option<&str>) -> (StatusCode, Reader) {
    let mut req =
        Request::get(uri).header(header::ACCEPT, "text/event-stream").header(header::AUTHORIZATION, app.bearer());
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let res = app.router.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let status = res.status();
    if status == StatusCode::OK {
        assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    }
    (status, Reader { body: res.into_body(), buf: String::new() })
}

fn ids(msgs: &[Msg]) -> Vec<u64> {
    msgs.iter().map(|m| m.id.unwrap()).collect()
}

async fn create(app: &App, body: Value) -> String {
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    reply.json()["id"].as_str().unwrap().to_owned()
}

fn two_turns(latency_ms: u64) -> Value {
    json!({"initial_prompt": "sse", "model_settings": {"latency_ms": latency_ms, "script": [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 2"}}]},
        {"text": "one two three four five six seven eight nine ten eleven twelve"}]}})
}

#[tokio::test]
async fn a_finished_run_replays_everything_then_ends() {
    let app = app().await;
    let run = app.finished_run(&two_turns(0).to_string()).await;
    let id = run["id"].as_str().unwrap();
    let (status, reader) = open(&app, &format!("/api/runs/{id}/events"), None).await;
    assert_eq!(status, StatusCode::OK);
    let all = reader.all().await;
    assert_eq!(ids(&all), (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all[0].event, "run.status");
    assert_eq!(all[0].data["old"], "pending");
    assert_eq!(all.last().unwrap().event, "run.finished");
    assert_eq!(all.last().unwrap().data["status"], "done");
    for m in &all {
        assert_eq!(m.data["type"], m.event.as_str());
        assert_eq!(m.data["seq"], m.id.unwrap());
        assert_eq!(m.data["run_id"], id);
    }

    // Resume: the header, or ?after= on a first connection.
    let (_, reader) = open(&app, &format!("/api/runs/{id}/events"), Some("4")).await;
    let rest = reader.all().await;
    assert_eq!(ids(&rest), ids(&all)[4..]);
    let (_, reader) = open(&app, &format!("/api/runs/{id}/events?after=2"), Some("6")).await;
    assert_eq!(ids(&reader.all().await), ids(&all)[6..], "Last-Event-ID wins over ?after=");
    let (_, reader) = open(&app, &format!("/api/runs/{id}/events?after=2"), None).await;
    assert_eq!(ids(&reader.all().await), ids(&all)[2..]);

    // Nothing after run.finished: 204 stops EventSource from reconnecting.
    let last = all.len().to_string();
    let (status, _) = open(&app, &format!("/api/runs/{id}/events"), Some(&last)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_live_run_streams_text_then_resumes_without_gap() {
    let app = app().await;
    let id = create(&app, two_turns(400)).await;
    let (status, mut reader) = open(&app, &format!("/api/runs/{id}/events"), None).await;
    assert_eq!(status, StatusCode::OK);
    let mut first = Vec::new();
    while first.len() < 6 {
        first.push(reader.next().await.expect("live events"));
    }
    drop(reader); // the client goes away mid-run...
    let resume = first.last().unwrap().id.unwrap().to_string();
    let (_, reader) = open(&app, &format!("/api/runs/{id}/events"), Some(&resume)).await;
    let rest = reader.all().await; // ...reconnects, and the stream ends with the run
    let mut all = first;
    all.extend(rest);
    assert_eq!(ids(&all), (1..=all.len() as u64).collect::<Vec<_>>());
    let text: String =
        all.iter().filter(|m| m.event == "message.delta").map(|m| m.data["text"].as_str().unwrap()).collect();
    assert_eq!(text, "one two three four five six seven eight nine ten eleven twelve");
    assert!(all.iter().filter(|m| m.event == "message.delta").count() > 1, "streamed in chunks");
    assert_eq!(all.last().unwrap().event, "run.finished");
}

#[tokio::test]
async fn the_all_runs_stream_carries_status_changes() {
    let app = app().await;
    let (status, mut reader) = open(&app, "/api/events", None).await;
    assert_eq!(status, StatusCode::OK);
    let id = create(&app, two_turns(0)).await;
    let mut seen = Vec::new();
    loop {
        let m = reader.next().await.expect("events");
        assert!(m.id.is_none(), "live only: no ids");
        assert!(["run.status", "run.finished", "tool_call.updated"].contains(&m.event.as_str()), "{}", m.event);
        if m.data["run_id"] == id.as_str() {
            seen.push(m.event.clone());
            if m.event == "run.finished" {
                break;
            }
        }
    }
    assert_eq!(seen, ["run.status", "run.status", "run.finished"]);
}

#[tokio::test]
async fn unknown_runs_and_bad_ids_are_refused() {
    let app = app().await;
    let (status, _) = open(&app, "/api/runs/nope/events", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let run = app.finished_run(&two_turns(0).to_string()).await;
    let id = run["id"].as_str().unwrap();
    let (status, _) = open(&app, &format!("/api/runs/{id}/events"), Some("abc")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// Sends a GET on a fresh connection and reads up to the first SSE message,
/// so the stream is open and live.
async fn open_raw(app: &App, addr: std::net::SocketAddr, uri: &str) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = app.bearer();
    let req =
        format!("GET {uri} HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nauthorization: {auth}\r\n\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let wanted = |got: &[u8], n: usize| String::from_utf8_lossy(got).matches("data:").count() >= n;
    // `/api/events` sends nothing until something happens: its headers are enough.
    let messages = usize::from(uri != "/api/events");
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") || !wanted(&got, messages) {
        let n = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&got).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    (conn, head)
}

/// Reads a connection to its end; what came after what was read already.
async fn read_to_end(mut conn: tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), conn.read_to_end(&mut rest))
        .await
        .expect("the stream stays open after the shutdown")
        .unwrap();
    String::from_utf8_lossy(&rest).into_owned()
}

#[tokio::test]
async fn a_shutdown_ends_open_streams_and_the_server_returns() {
    let app = app().await;
    // A run paused on an approval: its stream stays open, waiting.
    let body = json!({"initial_prompt": "send email please", "tools": ["send_email"],
        "model_settings": {"script": [{"tool_calls": [{"name": "send_email",
            "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}, {"text": "sent"}]}});
    let id = create(&app, body).await;
    let engine = app.engine.clone();
    tokio::time::timeout(Duration::from_secs(20), async {
        while engine.runs().get_run(&id).await.unwrap().status != runlens_engine::model::RunStatus::Paused {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the run never pauses");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let leptos_options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
    let state = runlens::server::AppState::new(engine.clone(), leptos_options, None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(runlens::server::run(listener, state, async move {
        let _ = stopped.await;
    }));
    let (all_runs, _) = open_raw(&app, addr, "/api/events").await;
    let (one_run, head) = open_raw(&app, addr, &format!("/api/runs/{id}/events")).await;
    assert!(head.contains("event: run.status"), "{head}");

    stop.send(()).unwrap();
    // A hang guard only: the bound on how long a shutdown may take is the server's.
    let served = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the server never returns");
    served.unwrap().unwrap();
    // Both streams ended as HTTP responses do (the last, empty chunk), not cut off.
    for (name, conn) in [("/api/events", all_runs), ("the run's events", one_run)] {
        let rest = read_to_end(conn).await;
        assert!(rest.ends_with("0\r\n\r\n"), "{name} did not end its stream: {rest:?}");
    }
}

#[tokio::test]
async fn a_paused_run_streams_on_when_its_approval_times_out() {
    let app = app().await;
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let body = json!({"initial_prompt": "send email please", "tools": ["send_email"],
        "approval": {"tools": ["send_email"], "timeout_s": 1},
        "model_settings": {"script": [{"tool_calls": [email]}, {"text": "went on after the timeout"}]}});
    let id = create(&app, body).await;
    let (status, mut reader) = open(&app, &format!("/api/runs/{id}/events"), None).await;
    assert_eq!(status, StatusCode::OK);
    let mut msgs = Vec::new();
    loop {
        let msg = reader.next().await.expect("the stream ended before the run paused");
        let paused = msg.event == "run.status" && msg.data["new"] == "paused";
        msgs.push(msg);
        if paused {
            break;
        }
    }
    // Nobody decides: the timeout rejects the call and the run goes on.
    while let Some(msg) = reader.next().await {
        msgs.push(msg);
    }
    assert_eq!(ids(&msgs), (1..=msgs.len() as u64).collect::<Vec<_>>());
    let last = msgs.last().unwrap();
    assert_eq!((last.event.as_str(), &last.data["status"]), ("run.finished", &json!("done")));
    assert!(msgs.iter().any(|m| m.event == "tool_call.updated" && m.data["tool_call"]["status"] == "rejected"));
}
