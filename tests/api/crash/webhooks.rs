//! Status webhooks survive `kill -9`: the real binary (with a config file
//! allowing 127.0.0.1 and retrying within a second) is killed once after a
//! delivery failed and was recorded, and while another delivery's request
//! was in flight; the restarted binary delivers both, each with exactly the
//! idempotency key and body of its first attempt.

use std::time::Duration;

use serde_json::{json, Value};

use super::server::{Server, KEY};
use crate::support::client_with_key;
use crate::webhooks_api::{delivered, Receiver, STALL};

/// How long a condition may take before the test calls it a hang (a
/// restart, a lease running out: seconds; never a speed limit).
const HANG: Duration = Duration::from_secs(120);

const CONFIG: &str = r#"
[http]
allow_private_networks = true

[webhooks]
backoff_initial_ms = 200
backoff_max_ms = 1000
poll_ms = 100
timeout_ms = 10000
"#;

async fn ok_json(reply: reqwest::Response) -> Value {
    let status = reply.status();
    let text = reply.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Waits until `done` holds for run `id`'s deliveries as the API shows them; the page.
async fn deliveries_until(http: &reqwest::Client, base: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let page = ok_json(http.get(format!("{base}/api/runs/{id}/deliveries")).send().await.unwrap()).await;
        if done(&page) {
            return page;
        }
        assert!(tokio::time::Instant::now() < deadline, "deliveries of {id}: {page:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_outlives_a_kill_9_with_the_same_idempotency_key() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("hooks.db").display());
    let log = dir.path().join("server.log");
    let config = dir.path().join("runlens.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let rx = Receiver::start().await;
    // Until the test says otherwise, `/fail` refuses and `/stall` holds every request open.
    rx.answer_next("/fail", &[500; 1000]);
    rx.answer_next("/stall", &[STALL; 1000]);

    let config_arg = config.display().to_string();
    let mut server = Server::start_with(&http, &db_url, dir.path(), &log, &["--config", config_arg.as_str()]).await;
    let base = server.base.clone();
    ok_json(http.post(format!("{base}/api/webhooks/secret")).send().await.unwrap()).await;
    let mut runs = Vec::new();
    for path in ["/fail", "/stall"] {
        let body = json!({"initial_prompt": "hi", "on_status_change": {"url": rx.url(path), "statuses": ["done"]}});
        let run = ok_json(http.post(format!("{base}/api/runs")).json(&body).send().await.unwrap()).await;
        runs.push(run["id"].as_str().unwrap().to_owned());
    }
    // A failure recorded (the delivery waits for its next attempt), and a request in flight.
    deliveries_until(&http, &base, &runs[0], |p| p["deliveries"][0]["attempt_count"].as_u64() >= Some(1)).await;
    rx.wait_for("/stall", "the request held open", |got| !got.is_empty()).await;
    server.kill();
    let before_fail = rx.received("/fail");
    let before_stall = rx.received("/stall");
    assert!(
        delivered(&before_fail).is_empty() && delivered(&before_stall).is_empty(),
        "nothing got through yet: {before_fail:#?} {before_stall:#?}"
    );

    rx.answer_ok("/fail");
    rx.answer_ok("/stall");
    let server = Server::start_with(&http, &db_url, dir.path(), &log, &["--config", config_arg.as_str()]).await;
    let base = server.base.clone();
    for (path, first) in [("/fail", &before_fail[0]), ("/stall", &before_stall[0])] {
        let got = rx.wait_for(path, "the delivery after the restart", |got| !delivered(got).is_empty()).await;
        assert!(
            got.iter().all(|r| r.key == first.key && r.body == first.body),
            "{path}: every attempt is the same delivery: {got:#?}\n{}",
            server.log_tail()
        );
        assert_eq!(delivered(&got).len(), 1, "{path}: delivered once: {got:#?}");
        assert_eq!(got.last().unwrap().answered, 200, "{path}: nothing after the 2xx");
        let payload = got.last().unwrap().payload();
        assert_eq!((payload.delivery_id.as_str(), payload.new_status.as_str()), (first.key.as_str(), "done"));
    }
    for id in &runs {
        let page = deliveries_until(&http, &base, id, |p| p["deliveries"][0]["state"] == "delivered").await;
        let d = &page["deliveries"][0];
        assert_eq!(page["deliveries"].as_array().unwrap().len(), 1, "{page:#}");
        let codes: Vec<Option<u64>> =
            d["attempts"].as_array().unwrap().iter().map(|a| a["status_code"].as_u64()).collect();
        assert_eq!(codes.first(), Some(&Some(200)), "{page:#}");
        if id == &runs[0] {
            assert!(codes[1..].iter().all(|c| *c == Some(500)) && codes.len() >= 2, "{page:#}");
        }
    }
}
