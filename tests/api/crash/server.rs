//! The real `runlens` binary as a child process: started on a free port
//! against the test's database file, waited for on `/healthz`, killed with
//! SIGKILL.

use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The instance-admin key the server is started with
/// (`RUNLENS_BOOTSTRAP_API_KEY`); the test's clients send it with every request.
pub const KEY: &str = "rl_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The name the server gives that key, which decisions made with it record.
pub const KEY_NAME: &str = "bootstrap";

/// How long a start may take before the test gives up on it (a hang, not a
/// speed limit: a debug build starts in well under a second).
const START_LIMIT: Duration = Duration::from_secs(60);

pub struct Server {
    child: Child,
    pub base: String,
    log: PathBuf,
}

impl Server {
    /// Starts the binary on `database_url`, appending its output to `log`,
    /// and returns once `/healthz` answers 200. Panics with the end of the
    /// log when the process exits or never becomes healthy.
    pub async fn start(http: &reqwest::Client, database_url: &str, dir: &Path, log: &Path) -> Server {
        Self::start_with(http, database_url, dir, log, &[]).await
    }

    /// [`Server::start`] with more arguments for `serve` (`--config FILE`).
    pub async fn start_with(
        http: &reqwest::Client,
        database_url: &str,
        dir: &Path,
        log: &Path,
        extra: &[&str],
    ) -> Server {
        Self::start_with_env(http, database_url, dir, log, extra, &[]).await
    }

    /// [`Server::start_with`] with more environment variables.
    pub async fn start_with_env(
        http: &reqwest::Client,
        database_url: &str,
        dir: &Path,
        log: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        Self::start_limited(http, database_url, dir, log, (extra, env), None).await
    }

    /// [`Server::start_with_env`] in a process whose open-file limit, soft
    /// and hard, is `open_files` when given (set by `sh` before it runs the
    /// binary in its place).
    pub async fn start_limited(
        http: &reqwest::Client,
        database_url: &str,
        dir: &Path,
        log: &Path,
        (extra, env): (&[&str], &[(&str, &str)]),
        open_files: Option<u64>,
    ) -> Server {
        let binary = env!("CARGO_BIN_EXE_runlens");
        for _attempt in 0..5 {
            let port = free_port();
            let out = File::options().create(true).append(true).open(log).expect("the server log opens");
            let err = out.try_clone().expect("the server log handle clones");
            let mut command = match open_files {
                None => Command::new(binary),
                Some(n) => {
                    let mut sh = Command::new("sh");
                    sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), binary]);
                    sh
                }
            };
            let child = command
                .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--database-url", database_url])
                .args(extra)
                .current_dir(dir)
                .env("RUST_LOG", "info,sqlx=warn,tower_http=warn,rmcp=warn")
                .env("NO_COLOR", "1")
                .env_remove("RUNLENS_CONFIG")
                .env("RUNLENS_BOOTSTRAP_API_KEY", KEY)
                .env_remove("OPENAI_API_KEY")
                .envs(env.iter().copied())
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("the runlens binary starts");
            let mut server = Server { child, base: format!("http://127.0.0.1:{port}"), log: log.to_owned() };
            let started = Instant::now();
            loop {
                if let Some(status) = server.child.try_wait().expect("the child can be polled") {
                    let tail = log_tail(&server.log);
                    if tail.contains("cannot listen") {
                        break; // the port was taken meanwhile: try another
                    }
                    panic!("the server exited with {status} while starting; the end of its log:\n{tail}");
                }
                let health = http.get(format!("{}/healthz", server.base)).send().await;
                if health.is_ok_and(|r| r.status().is_success()) {
                    return server;
                }
                if started.elapsed() > START_LIMIT {
                    server.kill();
                    panic!(
                        "the server did not answer /healthz within {START_LIMIT:?}; the end of its log:\n{}",
                        log_tail(&server.log)
                    );
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        panic!("no free port could be bound in 5 attempts; the end of the server log:\n{}", log_tail(log));
    }

    /// SIGKILL (what `Child::kill` sends on unix), then reaps the process.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The end of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("the port is known").port()
}

/// The last 40 lines of the log.
pub fn log_tail(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(log) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `method url` with JSON `body`: the status and the JSON answer (null when none).
pub async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = http.request(method, &url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}
