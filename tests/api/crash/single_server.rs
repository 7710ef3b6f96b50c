//! SQLite is a single-server store: a second `runlens serve` on the same
//! file (by another path to it) refuses to start and leaves the first one
//! serving; a first server killed with SIGKILL leaves the file free.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::server::Server;

/// Polls of the second process before it counts as hung (it serves instead
/// of refusing): a bound on a hang, not a speed limit.
const HANG_POLLS: usize = 2_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_sqlite_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let http = runlens_engine::net::http_builder().build().unwrap();
    let log = dir.path().join("server.log");
    let db = dir.path().join("single.db");
    let mut first = Server::start(&http, &format!("sqlite://{}", db.display()), dir.path(), &log).await;

    // The same file by another path: relative to the second process's
    // working directory, through a symbolic link.
    std::os::unix::fs::symlink(&db, dir.path().join("link.db")).unwrap();
    let mut second = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["serve", "--addr", "127.0.0.1:0", "--database-url", "sqlite://link.db"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env_remove("RUNLENS_CONFIG")
        .env_remove("RUNLENS_BOOTSTRAP_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the runlens binary starts");
    let mut status = None;
    for _ in 0..HANG_POLLS {
        status = second.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let Some(status) = status else {
        let _ = second.kill();
        panic!("a second server on the same SQLite file kept running instead of refusing");
    };
    let out = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("another runlens server is already serving the database file"), "{stderr}");
    assert!(stderr.contains("PostgreSQL"), "the message says what serves several servers: {stderr}");

    // The first one was not disturbed.
    let health = http.get(format!("{}/healthz", first.base)).send().await.unwrap();
    assert!(health.status().is_success());

    // Killed with SIGKILL, it leaves the file to the next server.
    first.kill();
    let next = Server::start(&http, &format!("sqlite://{}", db.display()), dir.path(), &log).await;
    let health = http.get(format!("{}/healthz", next.base)).send().await.unwrap();
    assert!(health.status().is_success(), "{}", next.log_tail());
}
