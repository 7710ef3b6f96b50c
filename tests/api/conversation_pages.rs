//! The conversation-control UI on the server side: the trace page's editor,
//! follow-up box, branch tree, export link and result details; the edit and
//! follow-up server functions as plain form posts and as hydrated calls; the
//! runs page's multipart import; and the playground's new fields.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use leptos::server_fn::ServerFn;
use runlens::api::{ConversationError, EditMessage, SendFollowUp};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::{app, App, Reply};

const HTML: &str = "text/html,application/xhtml+xml";
const JSON: &str = "application/json";

/// Every request and wait of these tests fails after this long instead of
/// hanging the test binary.
const PATIENCE: Duration = Duration::from_secs(25);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn get(app: &App, uri: &str) -> Reply {
    within(&format!("GET {uri}"), app.get(uri)).await
}

async fn finished(app: &App, body: &str) -> Value {
    within(&format!("finished run {body}"), app.finished_run(body)).await
}

/// Sends a request with a body, `Accept` and `Referer` as a browser would.
async fn post(app: &App, path: &str, content_type: &str, body: Vec<u8>, accept: &str, referer: &str) -> Reply {
    let req = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::ACCEPT, accept)
        .header(header::REFERER, referer)
        .header(header::HOST, "localhost")
        .header(header::AUTHORIZATION, app.bearer())
        .body(Body::from(body))
        .unwrap();
    let res = within(&format!("POST {path}"), app.router.clone().oneshot(req)).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = within(&format!("body of POST {path}"), res.into_body().collect()).await.unwrap().to_bytes();
    Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

async fn post_form(app: &App, path: &str, form: &str, accept: &str, referer: &str) -> Reply {
    post(app, path, "application/x-www-form-urlencoded", form.as_bytes().to_vec(), accept, referer).await
}

/// The runs page's Import form with `file` as the uploaded file.
async fn import_file(app: &App, file: &[u8]) -> Reply {
    let mut body = b"--XbOuNdArY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"run.json\"\r\n\
        Content-Type: application/json\r\n\r\n"
        .to_vec();
    body.extend_from_slice(file);
    body.extend_from_slice(b"\r\n--XbOuNdArY--\r\n");
    post(app, "/runs/import", "multipart/form-data; boundary=XbOuNdArY", body, HTML, "http://localhost/runs").await
}

fn location(reply: &Reply) -> String {
    reply.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

fn enc(s: &str) -> String {
    runlens::format::url_encode(s)
}

async fn settled(app: &App, id: &str) -> Value {
    within(&format!("settle {id}"), app.engine.runs().wait_until_settled(id, Duration::from_secs(20))).await.unwrap();
    get(app, &format!("/api/runs/{id}")).await.json()
}

/// The `<input …>` tag that contains `needle`.
fn input_tag<'a>(html: &'a str, needle: &str) -> &'a str {
    let at = html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    let start = html[..at].rfind("<input").unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..end]
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[tokio::test]
async fn a_finished_run_offers_edit_follow_up_and_export_and_no_branch_tree() {
    let app = app().await;
    let run = finished(&app, r#"{"initial_prompt": "What is 2 + 3? </textarea><b>x</b>"}"#).await;
    let id = run["id"].as_str().unwrap();
    // The transcript is folded and drawn by scripts; `?transcript` sends it
    // unfolded (the way in without them).
    let folded = get(&app, &format!("/runs/{id}")).await.text;
    assert_eq!(count(&folded, "data-testid=\"edit-message\""), 0, "folded: not drawn");
    assert!(folded.contains(&format!("href=\"/runs/{id}?transcript=1#transcript\"")), "the way to it");
    let page = get(&app, &format!("/runs/{id}?transcript=1")).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.text;
    for testid in [
        "edit-message",
        "edit-message-text",
        "edit-message-save",
        "edit-message-cancel",
        "follow-up-text",
        "follow-up-send",
    ] {
        assert_eq!(count(html, &format!("data-testid=\"{testid}\"")), 1, "{testid}");
    }
    assert!(html.contains("data-testid=\"follow-up\""));
    assert!(html.contains(&format!("href=\"/api/runs/{id}/state?download=1\"")), "export link");
    assert!(html.contains("data-testid=\"export-run\""));
    assert!(!html.contains("data-testid=\"run-family\""), "no family, no tree");
    assert!(!html.contains("</textarea><b>"), "the editor cannot be closed by a payload");
    assert!(html.contains("&lt;/textarea&gt;&lt;b&gt;x&lt;/b&gt;"));

    let closed = finished(&app, r#"{"initial_prompt": "What is 1 + 1?", "interactive": false}"#).await;
    let html = get(&app, &format!("/runs/{}", closed["id"].as_str().unwrap())).await.text;
    assert!(html.contains("data-testid=\"follow-up-unavailable\"") && html.contains("interactive: false"));
    assert!(!html.contains("data-testid=\"follow-up\""));
}

#[tokio::test]
async fn a_follow_up_form_post_reopens_the_run_and_errors_are_explained() {
    let app = app().await;
    let run = finished(&app, r#"{"initial_prompt": "What is 2 + 3?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let referer = format!("http://localhost/runs/{id}?transcript=1");

    let form = format!("run_id={id}&message={}&max_turns=", enc("And 4 * 4?"));
    let reply = post_form(&app, SendFollowUp::PATH, &form, HTML, &referer).await;
    assert!(reply.status.is_redirection(), "{}", reply.status);
    assert_eq!(location(&reply).trim_end_matches('?'), referer, "back to the page");
    let done = settled(&app, id).await;
    assert!(done["result"].as_str().unwrap().contains("16"), "{}", done["result"]);
    assert_eq!(done["step_count"], 4, "the steps continue");

    // Hydrated calls get the REST API's status codes and a ConversationError.
    for (form, status, needle) in [
        (format!("run_id={id}&message=%20"), StatusCode::BAD_REQUEST, "empty"),
        (format!("run_id={id}&message=x&max_turns=ten"), StatusCode::BAD_REQUEST, "whole number"),
        ("run_id=nope&message=x".to_string(), StatusCode::NOT_FOUND, "not found"),
    ] {
        let reply = post_form(&app, SendFollowUp::PATH, &form, JSON, "").await;
        assert_eq!(reply.status, status, "{form}: {}", reply.text);
        let err: ConversationError = serde_json::from_str(&reply.text).expect("a ConversationError");
        assert!(err.message.contains(needle), "{}", err.message);
    }
    let closed = finished(&app, r#"{"initial_prompt": "hi", "interactive": false}"#).await;
    let form = format!("run_id={}&message=more", closed["id"].as_str().unwrap());
    assert_eq!(post_form(&app, SendFollowUp::PATH, &form, JSON, "").await.status, StatusCode::CONFLICT);

    // Without JavaScript the error comes back in the URL and the page shows it.
    let reply = post_form(&app, SendFollowUp::PATH, &format!("run_id={id}&message=%20"), HTML, &referer).await;
    let back = location(&reply);
    assert!(back.starts_with(&referer) && back.contains("__err="), "{back}");
    let page = get(&app, back.trim_start_matches("http://localhost")).await;
    assert!(page.text.contains("data-testid=\"follow-up-error\""), "the box shows the error");
}

#[tokio::test]
async fn editing_a_message_forks_redirects_and_shows_the_branch_tree() {
    let app = app().await;
    let parent = finished(&app, r#"{"initial_prompt": "What is 2 + 3?", "name": "sums"}"#).await;
    let id = parent["id"].as_str().unwrap();
    let messages = get(&app, &format!("/api/runs/{id}/messages")).await.json();
    let first = messages["messages"][0]["id"].as_str().unwrap();
    let referer = format!("http://localhost/runs/{id}?transcript=1");

    let form = format!("run_id={id}&message_id={first}&text={}", enc("What is 9 * 9? <i>"));
    let reply = post_form(&app, EditMessage::PATH, &form, HTML, &referer).await;
    assert!(reply.status.is_redirection(), "{}", reply.status);
    let to = location(&reply);
    let fork_id = to.strip_prefix("/runs/").unwrap_or_else(|| panic!("to the fork: {to}"));
    assert_ne!(fork_id, id);
    let fork = settled(&app, fork_id).await;
    assert!(fork["result"].as_str().unwrap().contains("81"), "{}", fork["result"]);
    assert_eq!(fork["parent_run_id"], id);

    let html = get(&app, &to).await.text;
    assert!(html.contains("data-testid=\"run-family\""));
    assert!(html.contains(&format!("data-testid=\"family-link\" data-run-id=\"{id}\"")), "a link back to the parent");
    assert!(html.contains("What is 9 * 9? &lt;i&gt;"), "the diverging message, escaped");
    assert!(!html.contains("9 * 9? <i>"));
    assert!(html.contains("aria-current=\"page\""), "the current run is marked");
    let parent_html = get(&app, &format!("/runs/{id}")).await.text;
    assert!(parent_html.contains(&format!("data-run-id=\"{fork_id}\"")), "the parent lists its fork");

    // A hydrated call gets the fork's id and a client-side redirect.
    let reply = post_form(&app, EditMessage::PATH, &form, JSON, "").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let second: String = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(location(&reply), format!("/runs/{second}"));

    // Only human messages can be edited; the error names the message.
    let agent = messages["messages"][1]["id"].as_str().unwrap();
    let bad = format!("run_id={id}&message_id={agent}&text=x");
    let reply = post_form(&app, EditMessage::PATH, &bad, JSON, "").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let err: ConversationError = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(err.about.as_deref(), Some(agent));
    let empty = format!("run_id={id}&message_id={first}&text=%20");
    let reply = post_form(&app, EditMessage::PATH, &empty, HTML, &referer).await;
    let back = location(&reply);
    assert!(back.starts_with(&referer) && back.contains("__err="), "{back}");
    let page = get(&app, back.trim_start_matches("http://localhost")).await;
    assert!(page.text.contains("data-testid=\"edit-message-error\""), "the editor shows the error");
}

#[tokio::test]
async fn import_form_creates_a_run_or_explains_why_not() {
    let app = app().await;
    let run = finished(&app, r#"{"initial_prompt": "What is 7 * 6?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let doc = get(&app, &format!("/api/runs/{id}/state?download=1")).await.text;

    let reply = import_file(&app, doc.as_bytes()).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let to = location(&reply);
    let new_id = to.strip_prefix("/runs/").expect("to the new run");
    assert_ne!(new_id, id);
    assert_eq!(get(&app, &format!("/api/runs/{new_id}")).await.json()["result"], run["result"]);

    let before = app.engine.runs().list_runs(&Default::default()).await.unwrap().runs.len();
    let mut old = serde_json::from_str::<Value>(&doc).unwrap();
    old["$schemaVersion"] = json!("runlens.run-state.v0");
    for (file, needle) in [
        (b"{broken".to_vec(), "not valid JSON"),
        (Vec::new(), "Choose a run state file"),
        (old.to_string().into_bytes(), "$schemaVersion"),
        (b"{\"$schemaVersion\": \"runlens.run-state.v1\", \"run\": {\"<b>\": 1}}".to_vec(), "missing field"),
    ] {
        let reply = import_file(&app, &file).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER);
        let back = location(&reply);
        assert!(back.starts_with("/runs?import_error="), "{back}");
        let page = get(&app, &back).await;
        assert!(page.text.contains("data-testid=\"import-error\""), "{back}");
        assert!(page.text.contains(needle), "{needle}: {back}");
    }
    assert_eq!(app.engine.runs().list_runs(&Default::default()).await.unwrap().runs.len(), before, "nothing stored");
    let list = get(&app, "/runs").await.text;
    assert!(list.contains("data-testid=\"import-run\"") && list.contains("enctype=\"multipart/form-data\""));
    assert!(!list.contains("data-testid=\"import-error\""));
}

#[tokio::test]
async fn steps_show_schema_errors_dropped_messages_and_blob_links() {
    let app = app().await;
    let hopeless = json!({"initial_prompt": "x", "result_schema": {"type": "object", "required": ["total"],
        "properties": {"total": {"type": "number"}}},
        "model_settings": {"script": [{"text": "nope"}, {"text": "{\"total\": \"many\"}"}]}});
    let run = finished(&app, &hopeless.to_string()).await;
    // The detail pane shows one step: the newest, or the one `?from=` names.
    let id = run["id"].as_str().unwrap();
    let html = get(&app, &format!("/runs/{id}?transcript=1")).await.text;
    let first = get(&app, &format!("/runs/{id}?from=0")).await.text;
    assert_eq!(
        count(&html, "data-testid=\"schema-error\"") + count(&first, "data-testid=\"schema-error\""),
        2,
        "both answers failed the schema"
    );
    assert!(html.contains("data-testid=\"system-note\""), "the repair request is a note");
    assert_eq!(count(&html, "data-testid=\"edit-message\""), 1, "notes are not editable");

    let long = format!("{} What is 1 + 1?", "filler words ".repeat(300));
    let narrow = json!({"initial_prompt": long, "model_settings": {"context_window": 256, "script": [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}, {"text": "2"}]}});
    let run = finished(&app, &narrow.to_string()).await;
    // The second step, the newest: its request left out the oldest messages.
    let html = get(&app, &format!("/runs/{}", run["id"].as_str().unwrap())).await.text;
    assert!(html.contains("data-testid=\"dropped-messages\""), "a step sent less than the history");
    assert!(html.contains("not sent: context window"));

    // A blob result, brought in through an imported state document.
    let calc = finished(&app, r#"{"initial_prompt": "What is 6 * 7?"}"#).await;
    let id = calc["id"].as_str().unwrap();
    let mut doc = get(&app, &format!("/api/runs/{id}/state")).await.json();
    let call_id = doc["steps"][0]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let blob_id = format!("{id}-{call_id}");
    doc["steps"][0]["tool_calls"][0]["result"] = json!({"too_large": true, "size_bytes": 600_123,
        "preview": "[\"<b>row\"", "blob_id": blob_id, "note": "too large"});
    doc["blobs"] = json!([{"id": blob_id, "call_id": call_id, "content_type": "application/json", "data": ["<b>row"]}]);
    let reply = import_file(&app, doc.to_string().as_bytes()).await;
    let to = location(&reply);
    let new_id = to.strip_prefix("/runs/").unwrap_or_else(|| panic!("imported: {to}"));
    let html = get(&app, &format!("{to}?from=0")).await.text;
    let href = format!("/api/blobs/{}", enc(&format!("{new_id}-{call_id}")));
    assert!(html.contains(&format!("href=\"{href}\"")), "a download link to the blob");
    assert!(html.contains("data-testid=\"blob-link\"") && html.contains("600.1 kB"));
    assert!(html.contains("&quot;&lt;b&gt;row") || html.contains("\"&lt;b&gt;row"), "the preview, escaped");
    let blob = get(&app, &href).await;
    assert_eq!(blob.status, StatusCode::OK);
    assert_eq!(blob.json(), json!(["<b>row"]));
}

#[tokio::test]
async fn the_playground_posts_result_schema_and_conversation_flags() {
    let app = app().await;
    let form = |extra: &str| {
        format!("prompt=What+is+6+*+7%3F&model=builtin&tools_present=1&tools=calculator&flags_present=1{extra}")
    };
    let schema = enc(r#"{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}"#);
    let reply =
        post_form(&app, "/playground", &form(&format!("&result_schema={schema}&call_summarization=true")), HTML, "")
            .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let id = location(&reply).trim_start_matches("/runs/").to_owned();
    let run = settled(&app, &id).await;
    assert_eq!(run["result"], json!({"total": 42}));
    assert_eq!((run["interactive"].clone(), run["call_summarization"].clone()), (json!(false), json!(true)));

    for (bad, needle) in [("%7Bnope", "not valid JSON"), ("%7B%22type%22%3A12%7D", "not a valid JSON Schema")] {
        let reply =
            post_form(&app, "/playground", &form(&format!("&interactive=true&result_schema={bad}")), HTML, "").await;
        let back = location(&reply);
        assert!(back.starts_with("/playground?error="), "{back}");
        let page = get(&app, &back).await.text;
        assert!(page.contains(needle), "{needle}");
        assert!(input_tag(&page, "data-testid=\"interactive\"").contains("checked"), "the echoed box stays checked");
        assert!(!input_tag(&page, "data-testid=\"call-summarization\"").contains("checked"));
    }
}
