//! Event streams and long-polls while their caller loses access: every one
//! of them (`/api/events`, a run's events, an approval request's and a
//! question's events and long-polls) ends within seconds once its API key is
//! revoked, its session ends (signing out, a password reset) or its user
//! loses the role in the project, while other callers' streams go on; and
//! one caller has at most the configured number open at once.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use runlens_engine::model::{Actor, Role, RunStatus};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{app, App, HOST, ORIGIN};

/// How long a stream may take to end after its caller lost access: the
/// server checks every 2 s, so this is a hang guard with room to spare.
const END_WITHIN: Duration = Duration::from_secs(10);

async fn get(router: &Router, uri: &str, auth: (&str, &str)) -> axum::response::Response {
    let req = Request::get(uri).header(header::ACCEPT, "text/event-stream").header(auth.0, auth.1);
    router.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
}

/// Opens the stream `uri` as `auth`; its body.
async fn open(router: &Router, uri: &str, auth: (&str, &str)) -> Body {
    let res = get(router, uri, auth).await;
    assert_eq!(res.status(), StatusCode::OK, "{uri}");
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream", "{uri}");
    res.into_body()
}

/// Reads `body` to its end; how long that took, or `None` when it did not
/// end within `limit`.
async fn ends_within(mut body: Body, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let read = async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok().map(|()| started.elapsed())
}

/// A run paused on an approval (its stream stays open) and an approval
/// request and a question of `default` (theirs too); their ids.
async fn open_things(app: &App) -> (String, String, String) {
    let body = json!({"initial_prompt": "send email please", "tools": ["send_email"],
        "model_settings": {"script": [{"tool_calls": [{"name": "send_email",
            "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}, {"text": "sent"}]}});
    let run = app.post_json("/api/runs", &body.to_string()).await.json()["id"].as_str().unwrap().to_owned();
    tokio::time::timeout(Duration::from_secs(20), async {
        while app.engine.runs().get_run(&run).await.unwrap().status != RunStatus::Paused {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the run pauses");
    let created = |reply: crate::support::Reply| {
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.json()["id"].as_str().unwrap().to_owned()
    };
    let ask = json!({"tool": "send_email", "arguments": {"to": "ada@example.com"}, "run": {"name": "agent"},
        "idempotency_key": "ask-1"});
    let request = created(app.post_json("/api/approval-requests", &ask.to_string()).await);
    let question = json!({"question": "Which plan?", "run": {"name": "agent"}, "idempotency_key": "ask-2"});
    let question = created(app.post_json("/api/questions", &question.to_string()).await);
    (run, request, question)
}

/// The long-polls waiting, each by its URI: the status it answered with and after how long.
type Polls = Vec<(String, tokio::task::JoinHandle<(StatusCode, Duration)>)>;

/// Every stream and long-poll of `auth` on `things`, opened: the streams'
/// bodies by name, and the long-polls as tasks.
async fn open_all(
    app: &App,
    (run, request, question): &(String, String, String),
    auth: (&'static str, String),
) -> (Vec<(String, Body)>, Polls) {
    let uris = [
        "/api/events".to_owned(),
        format!("/api/runs/{run}/events"),
        format!("/api/approval-requests/{request}/events"),
        format!("/api/questions/{question}/events"),
    ];
    let mut streams = Vec::new();
    for uri in uris {
        streams.push((uri.clone(), open(&app.router, &uri, (auth.0, &auth.1)).await));
    }
    let mut polls = Vec::new();
    for uri in [format!("/api/approval-requests/{request}?wait=30"), format!("/api/questions/{question}?wait=30")] {
        let (router, auth, u) = (app.router.clone(), auth.clone(), uri.clone());
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let status = get(&router, &u, (auth.0, &auth.1)).await.status();
            (status, started.elapsed())
        });
        polls.push((uri, task));
    }
    // The long-polls are waiting (a pending request answers at once otherwise).
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (uri, task) in &polls {
        assert!(!task.is_finished(), "{uri} answered before its caller lost access");
    }
    (streams, polls)
}

/// Asserts that every stream ends and every long-poll answers `status`
/// within [`END_WITHIN`]; the slowest, for the report.
async fn all_end(what: &str, (streams, polls): (Vec<(String, Body)>, Polls), status: StatusCode) -> Duration {
    let mut slowest = Duration::ZERO;
    for (uri, body) in streams {
        let took = ends_within(body, END_WITHIN).await;
        let took = took.unwrap_or_else(|| panic!("{uri} was still streaming {END_WITHIN:?} after {what}"));
        slowest = slowest.max(took);
    }
    for (uri, task) in polls {
        let (got, _) = tokio::time::timeout(END_WITHIN, task)
            .await
            .unwrap_or_else(|_| panic!("{uri} was still waiting {END_WITHIN:?} after {what}"))
            .unwrap();
        assert_eq!(got, status, "{uri} after {what}");
    }
    eprintln!("after {what}, every event stream and long-poll of the caller ended within {slowest:?}");
    slowest
}

/// Asserts the streams are still streaming (nothing ends them within a few
/// seconds, two rounds of the server's checks).
async fn still_open(streams: Vec<(String, Body)>) {
    let checks = streams.into_iter().map(|(uri, body)| async move {
        assert_eq!(ends_within(body, Duration::from_secs(5)).await, None, "{uri} ended but its caller kept access");
    });
    futures::future::join_all(checks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_long_polls_end_when_their_key_is_revoked() {
    let app = app().await;
    let things = open_things(&app).await;
    let (key, secret) =
        app.engine.identity().create_key("agent", Some("default"), Role::Viewer, &Actor::system()).await.unwrap();
    let open = open_all(&app, &things, ("authorization", format!("Bearer {secret}"))).await;
    let admins = open_all(&app, &things, ("authorization", app.bearer())).await;

    let revoked = app.send(Method::DELETE, &format!("/api/keys/{}", key.id), None, "").await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    all_end("its key was revoked", open, StatusCode::UNAUTHORIZED).await;
    // Another caller's streams go on.
    still_open(admins.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_long_polls_end_when_the_session_ends_or_the_role_is_lost() {
    let app = app().await;
    let things = open_things(&app).await;
    for name in ["ada", "ben", "cy", "di"] {
        app.user(name, Some(("default", Role::Viewer)), false).await;
    }
    let session = |cookie: String| ("cookie", cookie);
    let ada = app.session("ada").await;
    let ada_streams = open_all(&app, &things, session(ada.clone())).await;
    let ben_streams = open_all(&app, &things, session(app.session("ben").await)).await;
    let cy_streams = open_all(&app, &things, session(app.session("cy").await)).await;
    let di_streams = open_all(&app, &things, session(app.session("di").await)).await;

    // Ada signs out.
    let headers = [("cookie", ada.as_str()), ("origin", ORIGIN), ("host", HOST)];
    let out = app.send_with(Method::POST, "/logout", None, "", &headers).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.text);
    all_end("signing out", ada_streams, StatusCode::UNAUTHORIZED).await;
    // Ben's password is reset (which ends his sessions).
    app.engine.identity().reset_password("ben", "a brand new passphrase", &Actor::system()).await.unwrap();
    all_end("a password reset", ben_streams, StatusCode::UNAUTHORIZED).await;
    // Cy is removed from the project: what is in it is no longer hers to see.
    let removed = app.send(Method::DELETE, "/api/projects/default/members/cy", None, "").await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    all_end("losing the role", cy_streams, StatusCode::NOT_FOUND).await;
    // Di kept hers.
    still_open(di_streams.0).await;
}

#[tokio::test]
async fn one_caller_has_at_most_the_limit_of_streams_and_waits_open() {
    let app = app().await;
    let limits = runlens::server::connections::Limits { max_streams_per_client: 2, ..Default::default() };
    let options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
    let state = runlens::server::AppState::new(app.engine.clone(), options, None).with_limits(limits);
    let router = runlens::server::router(state);
    let (run, request, _) = open_things(&app).await;
    let (_, secret) =
        app.engine.identity().create_key("agent", Some("default"), Role::Viewer, &Actor::system()).await.unwrap();
    let auth = format!("Bearer {secret}");
    let auth = ("authorization", auth.as_str());

    let first = open(&router, "/api/events", auth).await;
    let _second = open(&router, &format!("/api/runs/{run}/events"), auth).await;
    // A third stream, or a long-poll, is one too many.
    for uri in ["/api/events".to_owned(), format!("/api/approval-requests/{request}?wait=30")] {
        let res = get(&router, &uri, auth).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{uri}");
        assert!(res.headers().contains_key(header::RETRY_AFTER), "{uri}");
        let text = String::from_utf8_lossy(&res.into_body().collect().await.unwrap().to_bytes()).into_owned();
        assert!(text.contains("open already"), "{text}");
    }
    // A read that does not wait is not a stream.
    let read = get(&router, &format!("/api/approval-requests/{request}"), auth).await;
    assert_eq!(read.status(), StatusCode::OK);
    // Another caller has its own allowance.
    let admin = app.bearer();
    let _admins = open(&router, "/api/events", ("authorization", &admin)).await;
    // Closing a stream makes room.
    drop(first);
    let _third = open(&router, "/api/events", auth).await;
}
