//! The approvals inbox and start-up at scale (issue 17), measured on the
//! real release server binary, printed with the target beside each figure:
//! - start-up with N paused runs (1,000,000 by default), each with one
//!   `send_email` awaiting approval and an approval timeout: time from
//!   spawning the server to its first answered request (`/healthz`), and
//!   until its background recovery finished (the server logs it);
//! - the server's RSS right after start-up and after recovery, and what
//!   that makes per paused run;
//! - `GET /api/approvals?status=pending&limit=50`: the first page, and a
//!   later page through `next_cursor`; `GET /api/approvals/count`;
//! - the `/approvals` page and the `/runs` page (whose navigation badge
//!   shows the pending count) rendered by the server, beside
//!   `GET /api/runs?limit=50`;
//! - RSS while busy: one-turn scripted runs created through the API at a
//!   steady 1,000 a second for 30 s (on a fresh database), then idle.
//!
//! `cargo bench -p runlens-engine --bench inbox`. Needs the release server
//! binary (`scripts/build.sh --release`, or `cargo build --release --bin
//! runlens --features ssr`; `RUNLENS_BENCH_SERVER` names another). The
//! database of paused runs is built once into `target/bench-inbox/` and
//! reused (delete it to rebuild): a few real runs are paused through the
//! engine with the built-in scripted model, then cloned in SQL under new
//! ids (`INSERT … SELECT` from a recursive CTE) with their steps, calls,
//! messages and events; the inbox's tables follow through their triggers.
//!
//! Environment: `RUNLENS_BENCH_PAUSED` (paused runs, default 1000000),
//! `RUNLENS_BENCH_BUSY_RATE` (runs/s, default 1000), `RUNLENS_BENCH_BUSY_SECS`
//! (default 30; 0 skips the busy part), `RUNLENS_BENCH_ONLY` (`fixture`,
//! `startup` or `busy`: one part only), `RUNLENS_BENCH_IDLE_SECS` (how long
//! RSS is followed after the busy part, default 20), `RUNLENS_BENCH_BUSY_ROUNDS`
//! (busy parts one after the other on the same server, default 1).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runlens_engine::model::{ApprovalRequest, CreateRun, RunStatus};
use runlens_engine::store::SqliteStore;
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

/// The allocator of the `runlens` server binary (the bench's own work is not measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const KEY: &str = "rl_b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0";

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().map_or(default, |v| v.trim().parse().unwrap_or_else(|_| panic!("{key}: not a number")))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The workspace's `target/` directory.
fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).parent().expect("target/tmp has a parent").to_owned()
}

mod fixture;

use fixture::fixture;

// ---------------------------------------------------------------- the server

struct Server {
    child: Child,
    base: String,
    spawned: Instant,
    /// When the server logged `recovery finished`, and that line.
    recovered: Arc<Mutex<Option<(Instant, String)>>>,
}

impl Server {
    fn start(binary: &Path, db: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let spawned = Instant::now();
        let mut child = Command::new(binary)
            .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--database-url", &url(db)])
            .env("RUNLENS_BOOTSTRAP_API_KEY", KEY)
            .env("RUST_LOG", "info,sqlx=warn,tower_http=warn,rmcp=warn")
            .env("NO_COLOR", "1")
            .env_remove("RUNLENS_CONFIG")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", binary.display()));
        let recovered = Arc::new(Mutex::new(None));
        let stderr = child.stderr.take().unwrap();
        let seen = recovered.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("paused runs recovered") {
                    let fields = line.split_once("paused runs recovered").map_or("", |(_, f)| f).trim().to_owned();
                    eprintln!("  server: paused runs recovered: {fields}");
                }
                if line.contains("recovery finished") || line.contains("recovery stopped") {
                    *seen.lock().unwrap() = Some((Instant::now(), line.clone()));
                }
                if line.contains("ERROR") || line.contains("panicked") {
                    eprintln!("  server: {line}");
                }
            }
        });
        Server { child, base: format!("http://127.0.0.1:{port}"), spawned, recovered }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Polls `/healthz` until it answers 200; the time since the spawn.
    async fn first_answer(&mut self, http: &reqwest::Client) -> Duration {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the server exited with {status} while starting");
            }
            if let Ok(resp) = http.get(format!("{}/healthz", self.base)).send().await {
                if resp.status().is_success() {
                    return self.spawned.elapsed();
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits for the `recovery finished` line; the time since the spawn and the line.
    async fn recovery(&self, limit: Duration) -> Option<(Duration, String)> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some((at, line)) = self.recovered.lock().unwrap().clone() {
                return Some((at - self.spawned, line));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(timeout: Duration) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {KEY}").parse().unwrap());
    runlens_engine::net::http_builder().default_headers(headers).timeout(timeout).build().unwrap()
}

/// One GET, whole body read: its time, status and body.
async fn get(http: &reqwest::Client, url: &str) -> (Duration, u16, String) {
    let start = Instant::now();
    match http.get(url).send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            (start.elapsed(), status, body)
        }
        Err(e) => (start.elapsed(), 0, e.to_string()),
    }
}

/// Median and best of `n` GETs of `url` (full bodies), the last body, and
/// whether every answer was a 200.
async fn time_get(http: &reqwest::Client, url: &str, n: usize) -> (Duration, Duration, String, bool) {
    let mut all = Vec::with_capacity(n);
    let mut body = String::new();
    let mut ok = true;
    for _ in 0..n {
        let (took, status, text) = get(http, url).await;
        ok &= status == 200;
        all.push(took);
        body = text;
        if status != 200 {
            break;
        }
    }
    all.sort();
    (all[all.len() / 2], all[0], body, ok)
}

fn verdict(value: f64, target: f64) -> &'static str {
    if value <= target {
        "meets"
    } else {
        "MISSES"
    }
}

// ---------------------------------------------------------------- figures

/// RSS of the server on an empty database once it answers: what any
/// server holds, whatever its backlog.
async fn baseline_rss(binary: &Path) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let http = client(Duration::from_secs(30));
    let mut server = Server::start(binary, &dir.path().join("empty.db"));
    server.first_answer(&http).await;
    server.recovery(Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.rss_kib()
}

async fn startup_and_inbox(binary: &Path, n: u64) {
    let db = fixture(n).await;
    let empty = baseline_rss(binary).await;
    // Warm the file cache the same way for every run of the bench (streamed:
    // a bench process holding gigabytes would make spawning the server slow).
    if let Ok(mut file) = std::fs::File::open(&db) {
        let _ = std::io::copy(&mut file, &mut std::io::sink());
    }
    let http = client(Duration::from_secs(300));
    let mut server = Server::start(binary, &db);
    let started = server.first_answer(&http).await;
    let rss_start = server.rss_kib();
    println!(
        "start-up, first answered request: {:>8.1} ms with {n} paused runs (target ≤ 1000 ms: {})",
        ms(started),
        verdict(ms(started), 1000.0)
    );
    let recovered = server.recovery(Duration::from_secs(3600)).await;
    match &recovered {
        Some((took, line)) => {
            let fields = line.split_once("recovery finished").map_or(line.as_str(), |(_, rest)| rest.trim());
            println!("recovery finished (background):   {:>8.1} s after the spawn ({fields})", took.as_secs_f64())
        }
        None => println!("recovery finished (background):   not within an hour"),
    }
    // Let what recovery freed settle, then read RSS.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_recovered = server.rss_kib();
    let per_run = (rss_recovered.saturating_sub(empty)) as f64 * 1024.0 / n as f64;
    let by_recovery = (rss_recovered.saturating_sub(rss_start)) as f64 * 1024.0 / n as f64;
    println!(
        "server RSS: {:.1} MiB on an empty database, {:.1} MiB after start-up, {:.1} MiB after recovery: \
         {per_run:.0} B per paused run above the empty server, {by_recovery:.0} B of it added by recovery \
         (target ≤ 1024 B: {})",
        mib(empty),
        mib(rss_start),
        mib(rss_recovered),
        verdict(per_run, 1024.0)
    );

    let base = &server.base;
    let first = format!("{base}/api/approvals?status=pending&limit=50");
    let (med, best, body, ok) = time_get(&http, &first, 21).await;
    let page: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let listed = page["approvals"].as_array().map_or(0, Vec::len);
    println!(
        "GET /api/approvals?status=pending&limit=50, first page: {:>8.2} ms median, {:.2} best ({listed} calls, {} KB{}; target ≤ 50 ms: {})",
        ms(med),
        ms(best),
        body.len() / 1000,
        if ok { "" } else { ", NOT 200" },
        verdict(ms(med), 50.0)
    );
    // Page 21 through the cursors.
    let mut cursor = page["next_cursor"].as_str().map(str::to_owned);
    for _ in 0..19 {
        let Some(c) = cursor.take() else { break };
        let (_, _, body) = get(&http, &format!("{first}&cursor={}", urlencode(&c))).await;
        cursor = serde_json::from_str::<Value>(&body).ok().and_then(|p| p["next_cursor"].as_str().map(str::to_owned));
    }
    match cursor {
        Some(c) => {
            let (med, best, body, ok) = time_get(&http, &format!("{first}&cursor={}", urlencode(&c)), 21).await;
            let listed =
                serde_json::from_str::<Value>(&body).ok().and_then(|p| p["approvals"].as_array().map(Vec::len));
            println!(
                "  page 21 through next_cursor:                          {:>8.2} ms median, {:.2} best ({} calls{}; target ≤ 200 ms: {})",
                ms(med),
                ms(best),
                listed.unwrap_or(0),
                if ok { "" } else { ", NOT 200" },
                verdict(ms(med), 200.0)
            );
        }
        None => println!("  page 21 through next_cursor: no next_cursor (this server's inbox is not paged)"),
    }
    let (med, best, body, ok) = time_get(&http, &format!("{base}/api/approvals/count"), 51).await;
    println!(
        "GET /api/approvals/count:                               {:>8.2} ms median, {:.2} best ({}; target ≤ 5 ms: {})",
        ms(med),
        ms(best),
        if ok { body.trim() } else { "NOT 200" },
        verdict(ms(med), 5.0)
    );
    let (med, best, body, ok) = time_get(&http, &format!("{base}/approvals"), 5).await;
    println!(
        "/approvals page, rendered:                              {:>8.2} ms median, {:.2} best ({} KB of HTML{})",
        ms(med),
        ms(best),
        body.len() / 1000,
        if ok { "" } else { ", NOT 200" }
    );
    let (med, best, body, ok) = time_get(&http, &format!("{base}/runs"), 5).await;
    println!(
        "/runs page (navigation badge included):                 {:>8.2} ms median, {:.2} best ({} KB of HTML{})",
        ms(med),
        ms(best),
        body.len() / 1000,
        if ok { "" } else { ", NOT 200" }
    );
    let (med, best, _, ok) = time_get(&http, &format!("{base}/api/runs?limit=50"), 21).await;
    println!(
        "  GET /api/runs?limit=50, for comparison:               {:>8.2} ms median, {:.2} best{}",
        ms(med),
        ms(best),
        if ok { "" } else { " (NOT 200)" }
    );
    println!("server RSS after these requests: {:.1} MiB", mib(server.rss_kib()));
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn busy(binary: &Path, rate: u64, secs: u64) {
    let dir = target_dir().join("bench-inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("busy.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let http = client(Duration::from_secs(30));
    let mut server = Server::start(binary, &db);
    server.first_answer(&http).await;
    eprintln!("  (busy server: pid {})", server.child.id());
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("busy: server RSS {:.1} MiB idle before", mib(server.rss_kib()));
    let rounds = env_u64("RUNLENS_BENCH_BUSY_ROUNDS", 1);
    let idle_secs = env_u64("RUNLENS_BENCH_IDLE_SECS", 20);
    for round in 1..=rounds {
        load(&server, &http, rate, secs, round).await;
        // How far the runs got, then idle.
        let mut idle = Vec::new();
        for _ in 0..idle_secs {
            tokio::time::sleep(Duration::from_secs(1)).await;
            idle.push(server.rss_kib());
        }
        let (_, _, body) = get(&http, &format!("{}/api/runs?limit=1&status=pending", server.base)).await;
        let left = serde_json::from_str::<Value>(&body).ok().map_or(0, |v| v["runs"].as_array().map_or(0, Vec::len));
        println!(
            "  then idle (MiB, each second for {idle_secs} s): {} ({})",
            idle.iter().map(|s| format!("{:.0}", mib(*s))).collect::<Vec<_>>().join(" "),
            if left == 0 { "no run left pending" } else { "runs still pending" }
        );
    }
}

/// One round of `rate` one-turn runs a second for `secs` through `POST /api/runs`, RSS sampled each second.
async fn load(server: &Server, http: &reqwest::Client, rate: u64, secs: u64, round: u64) {
    let body = json!({"initial_prompt": "bench", "model_settings": {"script": [{"text": "done"}]}}).to_string();
    let (created, failed, skipped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), AtomicU64::new(0));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT as usize));
    let url = format!("{}/api/runs", server.base);
    let mut samples = Vec::new();
    let start = Instant::now();
    let tick = Duration::from_millis(10);
    let per_tick = rate as f64 * tick.as_secs_f64();
    let mut owed = 0.0;
    let mut next_sample = start + Duration::from_secs(1);
    let mut interval = tokio::time::interval(tick);
    while start.elapsed() < Duration::from_secs(secs) {
        interval.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            owed -= 1.0;
            let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            let (created, failed) = (created.clone(), failed.clone());
            tokio::spawn(async move {
                let resp =
                    http.post(&url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body).send().await;
                match resp {
                    Ok(r) if r.status().is_success() => created.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                drop(permit);
            });
        }
        if Instant::now() >= next_sample {
            samples.push(server.rss_kib());
            next_sample += Duration::from_secs(1);
        }
    }
    let took = start.elapsed();
    let _ = in_flight.acquire_many(IN_FLIGHT).await;
    let mut sorted = samples.clone();
    sorted.sort();
    let max = sorted.last().copied().unwrap_or(0);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let created = created.load(Ordering::Relaxed);
    println!(
        "busy, round {round}: {created} one-turn runs created in {:.1} s ({:.0}/s, asked {rate}/s; {} failed, {} not sent \
         with {IN_FLIGHT} requests in flight)",
        took.as_secs_f64(),
        created as f64 / took.as_secs_f64(),
        failed.load(Ordering::Relaxed),
        skipped.load(Ordering::Relaxed)
    );
    println!(
        "  server RSS while busy: {:.1} MiB median, {:.1} MiB peak (target < 300 MiB: {})",
        mib(median),
        mib(max),
        verdict(mib(max), 300.0)
    );
    println!(
        "  RSS each second (MiB): {}",
        samples.iter().map(|s| format!("{:.0}", mib(*s))).collect::<Vec<_>>().join(" ")
    );
}

/// Requests of the busy part under way at once, at most (more are not sent).
const IN_FLIGHT: u32 = 512;

fn main() {
    let n = env_u64("RUNLENS_BENCH_PAUSED", 1_000_000);
    let rate = env_u64("RUNLENS_BENCH_BUSY_RATE", 1_000);
    let secs = env_u64("RUNLENS_BENCH_BUSY_SECS", 30);
    let only = std::env::var("RUNLENS_BENCH_ONLY").unwrap_or_default();
    let binary = std::env::var_os("RUNLENS_BENCH_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release").join("runlens"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if only == "fixture" {
        rt.block_on(fixture(n));
        return;
    }
    let Ok(meta) = std::fs::metadata(&binary) else {
        eprintln!(
            "no server binary at {}: build it with `scripts/build.sh --release` (or set RUNLENS_BENCH_SERVER)",
            binary.display()
        );
        std::process::exit(1);
    };
    let built = meta.modified().ok().map(chrono::DateTime::<chrono::Utc>::from);
    println!(
        "server: {} (built {})",
        binary.display(),
        built.map_or("?".into(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    );
    rt.block_on(async {
        if only.is_empty() || only == "startup" {
            startup_and_inbox(&binary, n).await;
        }
        if secs > 0 && (only.is_empty() || only == "busy") {
            busy(&binary, rate, secs).await;
        }
    });
}
