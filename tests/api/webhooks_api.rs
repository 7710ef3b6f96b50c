//! Status webhooks against a real receiver (axum on 127.0.0.1; the engine
//! allows private networks and retries fast): signed deliveries in order
//! per run and hook, a receiver failing three times then answering, secret
//! rotation, and the API's bounds, roles and project isolation. A server
//! restarted between attempts is `crash/webhooks.rs`.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role, RunStatus};
use runlens_engine::EngineConfig;
use serde_json::{json, Value};

use crate::support::{app, app_with_config, App, Reply};

mod receiver;
pub(crate) use receiver::{delivered, Received, Receiver, STALL};

/// How long a test waits for a condition before calling it a hang (not a
/// speed limit: deliveries take milliseconds here).
const HANG: Duration = Duration::from_secs(90);

/// An engine that may reach 127.0.0.1 and retries within milliseconds.
fn fast() -> EngineConfig {
    let mut config = EngineConfig { allow_private_networks: true, ..EngineConfig::default() };
    config.webhooks.backoff_initial_ms = 50;
    config.webhooks.backoff_max_ms = 200;
    config.webhooks.poll_ms = 50;
    config
}

async fn fast_app() -> App {
    let app = app_with_config(fast()).await;
    app.engine.start_webhooks();
    app
}

/// A JSON reply that must have `status`.
fn must(reply: Reply, status: StatusCode) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text);
    reply.json()
}

fn refusal(reply: &Reply, status: StatusCode) -> String {
    assert_eq!(reply.status, status, "{}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

/// Creates (or rotates) the project's run webhook secret; the secret.
async fn run_secret(app: &App, body: &str) -> String {
    let reply = app.post_json("/api/webhooks/secret", body).await;
    assert!(reply.status.is_success(), "{}", reply.text);
    reply.json()["secret"].as_str().unwrap().to_owned()
}

/// A run that calls send_email (which needs approval) and then says "sent".
fn mailing_run(hook: Value) -> Value {
    let email = json!({"to": "a@example.com", "subject": "s", "body": "b"});
    json!({"initial_prompt": "mail", "tools": ["send_email"], "on_status_change": hook,
        "model_settings": {"script": [{"tool_calls": [{"name": "send_email", "arguments": email}]}, {"text": "sent"}]}})
}

/// Waits until every delivery of run `id` the API shows is settled (and
/// there are `n`); the page.
async fn settled_deliveries(app: &App, id: &str, n: usize) -> Value {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let page = must(app.get(&format!("/api/runs/{id}/deliveries")).await, StatusCode::OK);
        let list = page["deliveries"].as_array().unwrap();
        if list.len() == n && list.iter().all(|d| d["state"] != "pending") {
            return page;
        }
        assert!(tokio::time::Instant::now() < deadline, "deliveries of {id} did not settle: {page:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn deliveries_arrive_signed_and_in_order_per_run_and_hook() {
    let app = fast_app().await;
    let rx = Receiver::start().await;
    let secret = run_secret(&app, "").await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    let sub = must(
        app.post_json(
            "/api/webhooks",
            &json!({"url": rx.url("/sub"), "statuses": ["paused", "done"], "description": "ops"}).to_string(),
        )
        .await,
        StatusCode::CREATED,
    );
    let sub_secret = sub["secret"]["secret"].as_str().unwrap().to_owned();
    assert_ne!(sub_secret, secret, "each hook has its own secret");
    // The run's first request fails: its later changes must wait for it.
    rx.answer_next("/run", &[500]);
    let hook = json!({"url": rx.url("/run"), "statuses": ["running", "paused", "done"]});
    let run = must(app.post_json("/api/runs", &mailing_run(hook.clone()).to_string()).await, StatusCode::CREATED);
    assert_eq!(run["on_status_change"], hook);
    let id = run["id"].as_str().unwrap().to_owned();
    let paused = app.engine.runs().wait_until_settled(&id, HANG).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused);
    let call = paused.interruptions[0].call_id.clone();
    must(app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await, StatusCode::OK);
    assert_eq!(app.engine.runs().wait_until_settled(&id, HANG).await.unwrap().status, RunStatus::Done);

    use RunStatus::*;
    let run_hook = rx.wait_for("/run", "four deliveries", |got| delivered(got).len() == 4).await;
    // Every request in arrival order: the failed first change again, then the rest; none overtook it.
    let order: Vec<((RunStatus, RunStatus), u16)> = run_hook.iter().map(|r| (r.change(), r.answered)).collect();
    assert_eq!(
        order,
        [
            ((Pending, Running), 500),
            ((Pending, Running), 200),
            ((Running, Paused), 200),
            ((Paused, Running), 200),
            ((Running, Done), 200)
        ]
    );
    assert_eq!(run_hook[0].key, run_hook[1].key, "a retry has the same idempotency key");
    let mut keys: Vec<&str> = run_hook[1..].iter().map(|r| r.key.as_str()).collect();
    keys.dedup();
    assert_eq!(keys.len(), 4, "one key per delivery: {keys:?}");
    for r in &run_hook {
        assert_eq!(r.key, r.payload().delivery_id, "the header is the payload's delivery_id");
        assert!(r.key.starts_with("whd_"), "{}", r.key);
        assert_eq!(r.content_type, "application/json");
        assert!(r.signed_with(&secret), "signed with the run webhook secret: {}", r.signature);
        assert!(!r.signed_with(&sub_secret), "and with no other");
        assert_eq!((r.payload().run_id.as_str(), r.payload().project.as_str()), (id.as_str(), "default"));
    }
    let sequences: Vec<u64> = run_hook[1..].iter().map(|r| r.payload().sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    let paused = run_hook[2].payload();
    assert_eq!(paused.interruptions.len(), 1, "{paused:?}");
    assert_eq!(
        (paused.interruptions[0].call_id.as_str(), paused.interruptions[0].tool_name.as_str()),
        (call.as_str(), "send_email")
    );
    assert_eq!(paused.interruptions[0].arguments["to"], "a@example.com");
    let done = run_hook[4].payload();
    assert_eq!(done.summary.as_deref(), Some("sent"), "{done:?}");
    assert!(done.interruptions.is_empty() && !done.truncated);

    // The project's subscription heard only the statuses it asked for, signed with its own secret.
    let sub_hook = rx.wait_for("/sub", "two deliveries", |got| delivered(got).len() == 2).await;
    let changes: Vec<_> = sub_hook.iter().map(Received::change).collect();
    assert_eq!(changes, [(Running, Paused), (Running, Done)]);
    assert!(sub_hook.iter().all(|r| r.signed_with(&sub_secret) && !r.signed_with(&secret)));

    // The API shows the six deliveries, newest change first, with their attempts.
    let page = settled_deliveries(&app, &id, 6).await;
    let list = page["deliveries"].as_array().unwrap();
    assert!(list.iter().all(|d| d["state"] == "delivered" && d["next_attempt_at"].is_null()), "{page:#}");
    let first = list.iter().find(|d| d["id"] == run_hook[0].key.as_str()).unwrap();
    assert_eq!((first["old_status"].as_str(), first["new_status"].as_str()), (Some("pending"), Some("running")));
    assert!(first["webhook_id"].is_null(), "the run's own hook");
    assert_eq!(first["attempt_count"], 2);
    let codes: Vec<u64> =
        first["attempts"].as_array().unwrap().iter().map(|a| a["status_code"].as_u64().unwrap()).collect();
    assert_eq!(codes, [200, 500], "newest first");
    let subs = list.iter().filter(|d| d["webhook_id"] == sub["webhook"]["id"]).count();
    assert_eq!(subs, 2);
    assert!(!page.to_string().contains("whsec_"), "no secret in the deliveries");
}

#[tokio::test]
async fn a_receiver_failing_three_times_gets_the_delivery_on_the_fourth_attempt() {
    let app = fast_app().await;
    let rx = Receiver::start().await;
    let secret = run_secret(&app, "").await;
    rx.answer_next("/flaky", &[500, 500, 500]);
    let body = json!({"initial_prompt": "hi", "on_status_change": {"url": rx.url("/flaky"), "statuses": ["done"]}});
    let run = app.finished_run(&body.to_string()).await;
    let id = run["id"].as_str().unwrap();
    let got = rx.wait_for("/flaky", "a delivery", |got| !delivered(got).is_empty()).await;
    let answers: Vec<u16> = got.iter().map(|r| r.answered).collect();
    assert_eq!(answers, [500, 500, 500, 200]);
    assert!(got.iter().all(|r| r.key == got[0].key && r.body == got[0].body), "the same delivery each time");
    assert!(got.iter().all(|r| r.signed_with(&secret)));

    let page = settled_deliveries(&app, id, 1).await;
    let d = &page["deliveries"][0];
    assert_eq!((d["state"].as_str(), d["attempt_count"].as_u64()), (Some("delivered"), Some(4)), "{page:#}");
    assert_eq!(d["id"], got[0].key.as_str());
    assert!(d["finished_at"].is_string() && d["failure"].is_null());
    let attempts = d["attempts"].as_array().unwrap();
    let seen: Vec<(u64, u64)> =
        attempts.iter().map(|a| (a["number"].as_u64().unwrap(), a["status_code"].as_u64().unwrap())).collect();
    assert_eq!(seen, [(4, 200), (3, 500), (2, 500), (1, 500)], "newest first");
    for a in attempts {
        assert!(a["latency_ms"].is_u64() && a["at"].is_string(), "{a}");
        match a["status_code"].as_u64() {
            Some(200) => assert!(a["error"].is_null(), "{a}"),
            _ => assert!(a["error"].as_str().unwrap().starts_with("answered 500"), "{a}"),
        }
    }

    // The trace page shows the delivery and its attempts.
    let trace = app.get(&format!("/runs/{id}")).await.text;
    assert!(trace.contains(r#"data-testid="deliveries""#), "{trace}");
    assert!(trace.contains(&format!(r#"data-delivery-id="{}" data-state="delivered""#, got[0].key)), "{trace}");
    assert_eq!(trace.matches(r#"data-testid="attempt-row" data-status="500""#).count(), 3);
    assert_eq!(trace.matches(r#"data-testid="attempt-row" data-status="200""#).count(), 1);
    assert!(trace.contains("answered 500 Internal Server Error: receiver says so"), "{trace}");
    assert!(!trace.contains(&secret) && !trace.contains("whsec_"));

    // A rotation: the old secret keeps signing beside the new one for its
    // grace period; with none, only the new one signs.
    let rotated = must(app.post_json("/api/webhooks/secret", "").await, StatusCode::OK);
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert!(rotated["previous_valid_until"].is_string(), "{rotated}");
    app.finished_run(&body.to_string()).await;
    let got = rx.wait_for("/flaky", "a second delivery", |got| delivered(got).len() == 2).await;
    let second = delivered(&got)[1].clone();
    assert!(second.signed_with(&new) && second.signed_with(&secret), "{}", second.signature);
    let revoked = must(app.post_json("/api/webhooks/secret", r#"{"keep_previous_s": 0}"#).await, StatusCode::OK);
    assert!(revoked["previous_valid_until"].is_null(), "{revoked}");
    let newest = revoked["secret"].as_str().unwrap().to_owned();
    app.finished_run(&body.to_string()).await;
    let got = rx.wait_for("/flaky", "a third delivery", |got| delivered(got).len() == 3).await;
    let third = delivered(&got)[2].clone();
    assert!(third.signed_with(&newest) && !third.signed_with(&new) && !third.signed_with(&secret));
}

#[tokio::test]
async fn a_receiver_that_never_answers_holds_up_no_one_else() {
    // Longer than the test may wait: the held request never ends by itself.
    let mut config = fast();
    config.webhooks.timeout_ms = 10 * HANG.as_millis() as u64;
    let app = app_with_config(config).await;
    app.engine.start_webhooks();
    let rx = Receiver::start().await;
    run_secret(&app, "").await;
    rx.answer_next("/slow", &[STALL]);
    let hook = |path: &str| json!({"initial_prompt": "hi", "on_status_change": {"url": rx.url(path)}}).to_string();
    let slow = app.finished_run(&hook("/slow")).await;
    rx.wait_for("/slow", "the held request", |got| !got.is_empty()).await;
    let quick = app.finished_run(&hook("/quick")).await;
    rx.wait_for("/quick", "both changes", |got| delivered(got).len() == 2).await;
    // Meanwhile the slow run's first delivery is still in flight (no attempt
    // recorded) and its second waits behind it.
    let page = must(app.get(&format!("/api/runs/{}/deliveries", slow["id"].as_str().unwrap())).await, StatusCode::OK);
    let states: Vec<(&str, u64)> = page["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["state"].as_str().unwrap(), d["attempt_count"].as_u64().unwrap()))
        .collect();
    assert_eq!(states, [("pending", 0), ("pending", 0)], "{page:#}");
    assert_eq!(rx.received("/slow").len(), 1, "the later change waits for the first");
    settled_deliveries(&app, quick["id"].as_str().unwrap(), 2).await;
}

#[tokio::test]
async fn past_the_projects_pending_cap_changes_are_recorded_failed_not_sent() {
    let mut config = fast();
    config.webhooks.max_pending_per_project = 2;
    let app = app_with_config(config).await;
    app.engine.start_webhooks();
    let rx = Receiver::start().await;
    run_secret(&app, "").await;
    rx.answer_next("/down", &[503; 10_000]);
    let hook = json!({"initial_prompt": "hi", "on_status_change": {"url": rx.url("/down")}}).to_string();
    let first = app.finished_run(&hook).await;
    let first = first["id"].as_str().unwrap();
    rx.wait_for("/down", "the first run's delivery retried", |got| got.len() >= 2).await;
    let second = app.finished_run(&hook).await;
    let second = second["id"].as_str().unwrap();
    let page = settled_deliveries(&app, second, 2).await;
    for d in page["deliveries"].as_array().unwrap() {
        assert_eq!((d["state"].as_str(), d["attempt_count"].as_u64()), (Some("failed"), Some(0)), "{page:#}");
        assert!(d["failure"].as_str().unwrap().contains("max_pending_per_project"), "{page:#}");
    }
    let pending = must(app.get(&format!("/api/runs/{first}/deliveries")).await, StatusCode::OK);
    assert!(pending["deliveries"].as_array().unwrap().iter().all(|d| d["state"] == "pending"), "{pending:#}");
    let sent_second = rx.received("/down").iter().filter(|r| r.payload().run_id == second).count();
    assert_eq!(sent_second, 0, "nothing of the second run was sent");
}

#[tokio::test]
async fn a_delivery_failing_past_the_give_up_time_is_marked_failed() {
    let mut config = fast();
    config.webhooks.give_up_after_secs = 1;
    let app = app_with_config(config).await;
    app.engine.start_webhooks();
    let rx = Receiver::start().await;
    run_secret(&app, "").await;
    rx.answer_next("/gone", &[500; 10_000]);
    let hook = json!({"initial_prompt": "hi", "on_status_change": {"url": rx.url("/gone"), "statuses": ["done"]}});
    let run = app.finished_run(&hook.to_string()).await;
    let page = settled_deliveries(&app, run["id"].as_str().unwrap(), 1).await;
    let d = &page["deliveries"][0];
    assert_eq!(d["state"], "failed", "{page:#}");
    let why = d["failure"].as_str().unwrap();
    assert!(why.starts_with("gave up after") && why.contains("over 1 s") && why.contains("answered 500"), "{why}");
    let got = rx.received("/gone");
    assert_eq!(d["attempt_count"].as_u64(), Some(got.len() as u64), "every attempt recorded: {page:#}");
    assert!(got.len() >= 2 && got.iter().all(|r| r.key == got[0].key), "{got:#?}");
}

impl App {
    async fn hook_call(&self, key: &str, method: Method, uri: &str, body: Option<&str>) -> Reply {
        self.send_with(method, uri, body, "application/json", &[("authorization", key)]).await
    }

    /// An API key of `project` with `role`, as an `Authorization` value.
    async fn hook_key(&self, project: &str, role: Role) -> String {
        let name = format!("{project} {role}");
        let (_, secret) =
            self.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
        format!("Bearer {secret}")
    }
}

#[tokio::test]
async fn hooks_are_checked_kept_to_their_project_and_never_show_secrets() {
    // Private networks are not allowed here, and no worker sends anything.
    let app = app().await;
    let hook = |url: &str| json!({"initial_prompt": "hi", "on_status_change": {"url": url}}).to_string();
    let why = refusal(&app.post_json("/api/runs", &hook("https://example.com/h")).await, StatusCode::BAD_REQUEST);
    assert!(why.contains("no run webhook secret") && why.contains("POST /api/webhooks/secret"), "{why}");
    let secret = run_secret(&app, "").await;
    for (body, says) in [
        (hook("http://127.0.0.1:9/h"), "allow_private_networks"),
        (hook("http://[::1]/h"), "allow_private_networks"),
        (hook("http://169.254.169.254/latest"), "allow_private_networks"),
        (hook("ftp://example.com/h"), "http:// or https://"),
        (hook("not a url"), "not a valid URL"),
        (json!({"initial_prompt": "hi", "on_status_change": {"url": "https://example.com", "statuses": ["finished"]}})
            .to_string(), "unknown variant `finished`"),
        (json!({"initial_prompt": "hi", "on_status_change": {"url": "https://example.com", "statuses": ["pending"]}})
            .to_string(), "never changed to `pending`"),
        (json!({"initial_prompt": "hi", "on_status_change": {"url": "https://example.com", "statuses": []}})
            .to_string(), "at least one"),
        (json!({"initial_prompt": "hi", "on_status_change": {"url": "https://example.com", "secret": "x"}})
            .to_string(), "unknown field `secret`"),
    ] {
        let why = refusal(&app.post_json("/api/runs", &body).await, StatusCode::BAD_REQUEST);
        assert!(why.contains(says), "{body}: {why}");
    }
    let run = must(app.post_json("/api/runs", &hook("https://example.com/h")).await, StatusCode::CREATED);
    let id = run["id"].as_str().unwrap().to_owned();

    // Subscriptions: the same checks, and at most 20 a project.
    for (body, says) in [
        (json!({"url": "http://10.0.0.1/h"}), "allow_private_networks"),
        (json!({"url": "http://localhost:3000/h"}), "allow_private_networks"),
        (json!({"url": "https://example.com", "statuses": ["done", "done"]}), "listed twice"),
        (json!({"url": "https://example.com", "statuses": ["dun"]}), "unknown variant `dun`"),
        (json!({"url": "https://example.com", "description": "d".repeat(501)}), "description"),
        (json!({"url": "https://example.com", "colour": "red"}), "unknown field `colour`"),
    ] {
        let why = refusal(&app.post_json("/api/webhooks", &body.to_string()).await, StatusCode::BAD_REQUEST);
        assert!(why.contains(says), "{body}: {why}");
    }
    let created = must(
        app.post_json("/api/webhooks", r#"{"url": "https://example.com/a", "statuses": ["failed"]}"#).await,
        StatusCode::CREATED,
    );
    let wh = created["webhook"]["id"].as_str().unwrap().to_owned();
    assert!(created["secret"]["secret"].as_str().unwrap().starts_with("whsec_"));
    for i in 1..20 {
        let body = json!({"url": format!("https://example.com/{i}")}).to_string();
        must(app.post_json("/api/webhooks", &body).await, StatusCode::CREATED);
    }
    let why =
        refusal(&app.post_json("/api/webhooks", r#"{"url": "https://example.com/21"}"#).await, StatusCode::CONFLICT);
    assert!(why.contains("20 webhooks"), "{why}");
    let first = must(app.get("/api/webhooks?limit=15").await, StatusCode::OK);
    assert_eq!((first["webhooks"].as_array().unwrap().len(), first["next_offset"].as_u64()), (15, Some(15)));
    let rest = must(app.get("/api/webhooks?limit=15&offset=15").await, StatusCode::OK);
    assert_eq!((rest["webhooks"].as_array().unwrap().len(), rest["next_offset"].as_u64()), (5, None));
    assert_eq!(rest["webhooks"][4]["id"], wh.as_str(), "newest first");
    let one = must(app.get(&format!("/api/webhooks/{wh}")).await, StatusCode::OK);
    assert_eq!((one["url"].as_str(), one["statuses"].clone()), (Some("https://example.com/a"), json!(["failed"])));
    let rotated =
        must(app.post_json(&format!("/api/webhooks/{wh}/rotate"), r#"{"keep_previous_s": 0}"#).await, StatusCode::OK);
    assert_ne!(rotated["secret"], created["secret"]["secret"]);
    let why = refusal(
        &app.post_json(&format!("/api/webhooks/{wh}/rotate"), r#"{"keep_previous_s": 700000}"#).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(why.contains("at most 604800"), "{why}");

    // Secrets are in the answers that created them, and nowhere else.
    let exported = app.get(&format!("/api/runs/{id}/state")).await;
    assert_eq!(exported.json()["run"]["on_status_change"]["url"], "https://example.com/h", "exports carry the hook");
    for uri in ["/api/webhooks?limit=200", &format!("/api/webhooks/{wh}"), &format!("/api/runs/{id}"), "/api/audit"] {
        let text = app.get(uri).await.text;
        assert!(!text.contains(&secret) && !text.contains("whsec_"), "{uri}: {text}");
    }

    // Another project sees none of it, and has no run secret of its own.
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let other = app.hook_key("other", Role::Admin).await;
    for (method, uri) in [
        (Method::GET, format!("/api/webhooks/{wh}")),
        (Method::DELETE, format!("/api/webhooks/{wh}")),
        (Method::POST, format!("/api/webhooks/{wh}/rotate")),
        (Method::GET, format!("/api/runs/{id}/deliveries")),
    ] {
        let reply = app.hook_call(&other, method.clone(), &uri, None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {uri}: {}", reply.text);
    }
    let theirs = must(app.hook_call(&other, Method::GET, "/api/webhooks", None).await, StatusCode::OK);
    assert_eq!(theirs["webhooks"], json!([]));
    let doc = exported.text;
    let reply = app.hook_call(&other, Method::POST, "/api/runs/import", Some(&doc)).await;
    assert!(refusal(&reply, StatusCode::BAD_REQUEST).contains("no run webhook secret"), "{}", reply.text);
    let why = refusal(
        &app.hook_call(&other, Method::POST, "/api/runs", Some(&hook("https://example.com/h"))).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(why.contains("project `other` has no run webhook secret"), "{why}");

    // Viewers see deliveries, not subscriptions or secrets.
    let viewer = app.hook_key("default", Role::Viewer).await;
    let page =
        must(app.hook_call(&viewer, Method::GET, &format!("/api/runs/{id}/deliveries"), None).await, StatusCode::OK);
    assert!(page["deliveries"].is_array());
    for (method, uri, body) in [
        (Method::GET, "/api/webhooks".to_owned(), None),
        (Method::POST, "/api/webhooks".to_owned(), Some(r#"{"url": "https://example.com/v"}"#)),
        (Method::POST, "/api/webhooks/secret".to_owned(), None),
        (Method::GET, format!("/api/webhooks/{wh}"), None),
    ] {
        let reply = app.hook_call(&viewer, method.clone(), &uri, body).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method} {uri}: {}", reply.text);
    }
    for bad in ["limit=0", "offset=-1", "page=2"] {
        let reply = app.get(&format!("/api/runs/{id}/deliveries?{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
    assert_eq!(app.get("/api/runs/nope/deliveries").await.status, StatusCode::NOT_FOUND);

    // Deleted: gone for good.
    let deleted = must(app.send(Method::DELETE, &format!("/api/webhooks/{wh}"), None, "").await, StatusCode::OK);
    assert_eq!(deleted["id"], wh.as_str());
    assert_eq!(app.get(&format!("/api/webhooks/{wh}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.send(Method::DELETE, &format!("/api/webhooks/{wh}"), None, "").await.status, StatusCode::NOT_FOUND);
}
