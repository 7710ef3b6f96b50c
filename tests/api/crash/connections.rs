//! The real `runlens` binary under a flood of idle connections, signed in
//! or not: it keeps answering `/healthz` and signed-in pages while 20,000
//! sockets that send nothing (or a request head that never ends) are open
//! against it, and closes sockets that stay silent, send a head or a body
//! too slowly, or idle between requests too long.
//!
//! The flood runs twice: against a server at this machine's open-file limit,
//! and against one started with a limit well below the flood (8,192), so
//! that the sockets outnumber its file descriptors. The test raises its own
//! open-file limit as far as it may (beyond the hard limit where it is
//! allowed to) and opens 20,000 sockets, or as many as its limit allows
//! with 1,000 files to spare (it says how many). It prints how many sockets
//! were open, how many of them the server still held, and `/healthz`'s
//! latency meanwhile. Figures are printed, never asserted; what is asserted
//! is that every request was answered.

use std::io::Read;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::server::{Server, KEY};
use crate::support::client_with_key;

/// The sockets the flood opens, at most.
const FLOOD: usize = 20_000;
/// Open files the test process keeps for everything else it does (other
/// tests run beside this one).
const SPARE_FILES: u64 = 1_000;
/// `/healthz` requests measured during the flood.
const PROBES: usize = 20;

/// Raises the test process's open-file limit to at least `want` when it
/// may (root may raise the hard limit), else as far as the hard limit; the
/// limit now.
fn raise_own_limit(want: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
    let beyond = Rlimit { current: Some(want), maximum: Some(want.max(hard)) };
    if want <= hard || setrlimit(Resource::Nofile, beyond).is_err() {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(hard.min(want)), maximum: Some(hard) });
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Opens `n` sockets to `addr` that send nothing, every tenth a request
/// head that never ends; those that connected, and how many did not.
async fn flood(addr: std::net::SocketAddr, n: usize) -> (Vec<tokio::net::TcpStream>, usize) {
    let mut sockets = Vec::with_capacity(n);
    let mut failed = 0;
    let mut pending = futures::stream::FuturesUnordered::new();
    let connect = |i: usize| async move {
        let mut socket =
            tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
        if i.is_multiple_of(10) {
            socket.write_all(b"GET / HTTP/1.1\r\nhost: flood\r\nx-slow: ").await.ok()?;
        }
        Some(socket)
    };
    use futures::StreamExt;
    for i in 0..n {
        pending.push(connect(i));
        if pending.len() >= 256 {
            match pending.next().await.flatten() {
                Some(s) => sockets.push(s),
                None => failed += 1,
            }
        }
    }
    while let Some(done) = pending.next().await {
        match done {
            Some(s) => sockets.push(s),
            None => failed += 1,
        }
    }
    (sockets, failed)
}

/// How many of `sockets` the server has not closed.
fn still_open(sockets: Vec<tokio::net::TcpStream>) -> usize {
    sockets
        .into_iter()
        .filter_map(|s| s.into_std().ok())
        .filter(|s| {
            let _ = s.set_nonblocking(true);
            let mut byte = [0u8; 1];
            matches!((&*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count()
}

/// A client that opens a new connection for every request.
fn fresh_client(timeout: Duration) -> reqwest::Client {
    runlens_engine::net::http_builder()
        .timeout(timeout)
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Creates a viewer and signs them in; the session cookie.
async fn signed_in(base: &str) -> String {
    let admin = client_with_key(runlens_engine::net::http_builder(), KEY);
    let password = "correct horse battery staple";
    let user = serde_json::json!({"name": "ada", "password": password, "instance_admin": false});
    let made = admin.post(format!("{base}/api/users")).json(&user).send().await.unwrap();
    assert_eq!(made.status(), 201, "{}", made.text().await.unwrap());
    let role = serde_json::json!({"role": "viewer"});
    let set = admin.put(format!("{base}/api/projects/default/members/ada")).json(&role).send().await.unwrap();
    assert!(set.status().is_success());
    let form = [("username", "ada"), ("password", password)];
    let login = fresh_client(Duration::from_secs(10))
        .post(format!("{base}/login"))
        .header("origin", base)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.starts_with("runlens_session=").then(|| v.split(';').next().unwrap_or(v).to_owned()));
    cookie.expect("signing in sets the session cookie")
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The servers the flood runs against: at this machine's open-file limit,
/// and at one well below the flood (as when an attacker has more sockets
/// than the server has file descriptors).
const SERVER_LIMITS: [Option<u64>; 2] = [None, Some(8_192)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_idle_sockets_leave_healthz_and_signed_in_pages_answering() {
    for server_limit in SERVER_LIMITS {
        flood_one_server(server_limit).await;
    }
}

/// Starts a server (with `open_files` as its open-file limit when given),
/// floods it, and checks that `/healthz`, a signed-in page and the API
/// answer meanwhile.
async fn flood_one_server(open_files: Option<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let http = runlens_engine::net::http_builder().build().unwrap();
    let db = format!("sqlite://{}", dir.path().join("flood.db").display());
    // The header timeout out of the way (the variable, so a server without
    // it starts all the same): only the cap and its choice of what to close
    // keep the server answering here.
    let env = [("RUNLENS_HEADER_TIMEOUT_SECS", "600"), ("RUNLENS_KEEP_ALIVE_SECS", "600")];
    let server = Server::start_limited(&http, &db, dir.path(), &log, (&[], &env), open_files).await;
    let base = server.base.clone();
    let cookie = signed_in(&base).await;

    let limit = raise_own_limit(FLOOD as u64 + SPARE_FILES);
    let n = FLOOD.min(usize::try_from(limit.saturating_sub(SPARE_FILES)).unwrap_or(FLOOD));
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().unwrap();
    let started = Instant::now();
    let (sockets, failed) = flood(addr, n).await;
    let opened = sockets.len();
    let took = started.elapsed();

    // While they are all open (from this side): health, a page, the API.
    let client = fresh_client(Duration::from_secs(10));
    let mut latencies = Vec::new();
    for _ in 0..PROBES {
        let at = Instant::now();
        let health = client.get(format!("{base}/healthz")).send().await;
        let health = health.unwrap_or_else(|e| {
            panic!("/healthz failed during a flood of {opened} sockets: {e}\n{}", server.log_tail())
        });
        assert_eq!(health.status(), 200);
        latencies.push(at.elapsed());
    }
    let at = Instant::now();
    let page = client.get(format!("{base}/runs")).header("cookie", &cookie).send().await.unwrap();
    let page_took = at.elapsed();
    assert_eq!(page.status(), 200, "the signed-in page answers");
    assert!(page.text().await.unwrap().contains("<html"), "a page");
    let api = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(10)), KEY);
    assert_eq!(api.get(format!("{base}/api/runs")).send().await.unwrap().status(), 200);
    let held = still_open(sockets);

    latencies.sort();
    let server_limit = open_files.map_or("this machine's".to_owned(), |n| n.to_string());
    eprintln!(
        "flood (server open-file limit {server_limit}): {opened} idle sockets open against it ({} sending a \
         never-ending request head; {failed} failed to connect; opened in {:.1} s; the test's own open-file limit \
         {limit}); the server held {held} of them and had closed the rest; /healthz meanwhile ({PROBES} requests, \
         a new connection each): median {:.1} ms, max {:.1} ms; a signed-in page {:.1} ms",
        opened.div_ceil(10),
        took.as_secs_f64(),
        millis(latencies[PROBES / 2]),
        millis(latencies[PROBES - 1]),
        millis(page_took)
    );
    assert!(opened >= n * 9 / 10, "the flood opened {opened} of {n} sockets\n{}", server.log_tail());
    // And after the flood.
    assert_eq!(client.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
}

/// Reads `socket` until the server closes it; how long after `started`
/// that was, and what it sent; `None` when it stayed open for `limit`.
async fn closed_within(
    socket: &mut tokio::net::TcpStream,
    started: Instant,
    limit: Duration,
) -> Option<(Duration, String)> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    Some((started.elapsed(), String::from_utf8_lossy(&got).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_slow_and_idle_connections_are_closed_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let http = runlens_engine::net::http_builder().build().unwrap();
    let db = format!("sqlite://{}", dir.path().join("timeouts.db").display());
    let env =
        [("RUNLENS_HEADER_TIMEOUT_SECS", "1"), ("RUNLENS_KEEP_ALIVE_SECS", "2"), ("RUNLENS_BODY_TIMEOUT_SECS", "1")];
    let server = Server::start_with_env(&http, &db, dir.path(), &log, &[], &env).await;
    let addr: std::net::SocketAddr = server.base.trim_start_matches("http://").parse().unwrap();
    let connect = || tokio::net::TcpStream::connect(addr);
    // A hang guard: each of these closes after 1 or 2 s.
    let limit = Duration::from_secs(10);

    let started = Instant::now();
    let mut silent = connect().await.unwrap();
    let mut slow_head = connect().await.unwrap();
    slow_head.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let mut slow_body = connect().await.unwrap();
    let head = format!(
        "POST /api/runs HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\n\
         content-length: 100\r\n\r\n{{\"initial"
    );
    slow_body.write_all(head.as_bytes()).await.unwrap();
    let mut kept = connect().await.unwrap();
    kept.write_all(format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let asked = Instant::now();

    let (took, _) = closed_within(&mut silent, started, limit).await.expect("a silent connection is closed");
    eprintln!("a connection that sent nothing was closed after {:.1} s (header timeout 1 s)", took.as_secs_f64());
    let (took, _) = closed_within(&mut slow_head, started, limit).await.expect("a never-ending head is cut off");
    eprintln!("a request head that never ended was cut off after {:.1} s", took.as_secs_f64());
    let (took, answer) =
        closed_within(&mut slow_body, started, limit).await.expect("a body that never ends is cut off");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("did not arrive within 1 s"), "{answer}");
    eprintln!("a body that never ended was refused after {:.1} s: 400", took.as_secs_f64());
    let (took, answer) = closed_within(&mut kept, asked, limit).await.expect("an idle keep-alive connection is closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    eprintln!("a keep-alive connection was closed {:.1} s after its request (keep-alive 2 s)", took.as_secs_f64());
    assert_eq!(http.get(format!("{}/healthz", server.base)).send().await.unwrap().status(), 200);
}
