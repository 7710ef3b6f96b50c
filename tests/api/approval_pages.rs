//! The approval UI on the server side: cards on the trace page and in the
//! inbox, the nav badge, and the decision server functions used as plain
//! form posts (no JavaScript) and as the hydrated page calls them.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use leptos::server_fn::ServerFn;
use runlens::api::{ApprovalError, ApproveCall, ErrorKind, RejectCall};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{app, App, Reply};

/// A run paused on one `send_email` call; returns (run id, call id).
async fn paused_run(app: &App, name: &str) -> (String, String) {
    let body = json!({"initial_prompt": "mail", "name": name, "model_settings": {"script": [
        {"text": "I will email <ops>.", "tool_calls": [{"name": "send_email",
            "arguments": {"to": "ops@example.com", "subject": "Weekly <report>", "body": "All green.</textarea><i>x</i>"}}]},
        {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    (id.clone(), run.interruptions[0].call_id.clone())
}

/// POSTs a urlencoded form to a server function, as a browser would: with
/// the session cookie `cookie` of a signed-in user, or else the app's key.
async fn post_form(app: &App, path: &str, form: &str, accept: &str, referer: &str, cookie: Option<&str>) -> Reply {
    let credential = match cookie {
        Some(cookie) => (header::COOKIE, cookie.to_owned()),
        None => (header::AUTHORIZATION, app.bearer()),
    };
    let req = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, accept)
        .header(header::REFERER, referer)
        .header(header::HOST, "localhost")
        .header(credential.0, credential.1)
        .body(Body::from(form.to_owned()))
        .unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

fn location(reply: &Reply) -> String {
    reply.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn paused_runs_show_cards_on_the_trace_the_inbox_and_the_badge() {
    let app = app().await;
    let (id, call) = paused_run(&app, "mail <ops>").await;

    let trace = app.get(&format!("/runs/{id}")).await;
    assert_eq!(trace.status, StatusCode::OK);
    let html = &trace.text;
    assert!(html.contains("data-testid=\"approval-card\""), "{html}");
    assert!(html.contains(&format!("data-call-id=\"{call}\"")));
    for testid in
        ["approve-button", "reject-button", "always-approve", "always-reject", "edit-arguments", "reject-reason"]
    {
        assert!(html.contains(&format!("data-testid=\"{testid}\"")), "missing {testid}");
    }
    assert!(html.contains("data-status=\"awaiting_approval\""), "the call is marked in the tree");
    assert!(html.contains("I will email &lt;ops&gt;."), "the reasoning is shown, escaped");
    if let Some(at) = html.find("Weekly <report>") {
        panic!("unescaped: {}", &html[at.saturating_sub(300)..at + 50]);
    }
    assert!(html.contains("Weekly &lt;report&gt;"), "arguments are escaped");
    assert!(!html.contains("</textarea><i>"), "the argument editor cannot be closed by a payload");
    if let Some(at) = html.find("mail <ops>") {
        panic!("unescaped name: {}", &html[at.saturating_sub(20)..(at + 400).min(html.len())]);
    }
    assert!(html.contains("data-testid=\"approvals-badge\" data-count=\"1\""), "nav badge");
    assert!(!html.contains("http-equiv=\"refresh\""), "no reload while a person fills in the form");

    let inbox = app.get("/approvals").await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(inbox.text.contains(&format!("href=\"/runs/{id}\"")), "links to the run");
    assert!(inbox.text.contains("mail &lt;ops&gt;"), "run name, escaped");
    assert!(!inbox.text.contains("data-testid=\"approvals-empty\""));

    app.engine
        .approvals()
        .reject(&id, &call, Default::default(), &runlens_engine::model::Actor::system())
        .await
        .unwrap();
    let inbox = app.get("/approvals").await;
    assert!(inbox.text.contains("data-testid=\"approvals-empty\""));
    assert!(inbox.text.contains("data-testid=\"approvals-badge\" data-count=\"0\""));
}

#[tokio::test]
async fn decisions_work_as_plain_form_posts_without_javascript() {
    let app = app().await;
    let (id, call) = paused_run(&app, "no js").await;
    app.user("grace", Some(("default", runlens_engine::model::Role::Approver)), false).await;
    let grace = app.session("grace").await;
    let grace = Some(grace.as_str());
    let referer = format!("http://localhost/runs/{id}");
    let html = "text/html,application/xhtml+xml";

    // Bad JSON: back to the page with the error encoded for the card.
    let form = format!("run_id={id}&call_id={call}&arguments=%7Bnope&comment=");
    let reply = post_form(&app, ApproveCall::PATH, &form, html, &referer, grace).await;
    assert!(reply.status.is_redirection(), "{}", reply.status);
    let back = location(&reply);
    assert!(back.starts_with(&referer) && back.contains("__err="), "{back}");
    let page = app.get(back.trim_start_matches("http://localhost")).await;
    assert!(page.text.contains("data-testid=\"approval-error\""), "the card shows the error");
    assert!(page.text.contains("not valid JSON"));

    // Edited arguments failing the schema are refused too; nothing decided yet.
    let form = format!("run_id={id}&call_id={call}&arguments=%7B%22to%22%3A%22x%22%7D");
    let reply = post_form(&app, ApproveCall::PATH, &form, html, &referer, grace).await;
    assert!(location(&reply).contains("__err="));
    assert_eq!(app.engine.runs().get_run(&id).await.unwrap().status.as_str(), "paused");

    // A rejection with a reason and "always", recorded as decided by the signed-in user.
    let form = format!("run_id={id}&call_id={call}&always=true&reason=wrong+audience");
    let reply = post_form(&app, RejectCall::PATH, &form, html, &referer, grace).await;
    assert!(reply.status.is_redirection());
    assert_eq!(location(&reply).trim_end_matches('?'), referer);
    let steps = app.engine.runs().steps(&id).await.unwrap();
    let decided = steps.iter().flat_map(|s| &s.tool_calls).find(|c| c.id == call).unwrap();
    let decision = decided.approval.as_ref().expect("decided");
    assert_eq!(decision.decided_by, "grace");
    let grace_id = app.engine.directory().user_by_name("grace").await.unwrap().unwrap().0.id;
    assert_eq!(decision.decided_by_id.as_deref(), Some(format!("user:{grace_id}").as_str()));
    assert!(decision.always);
    assert_eq!(decision.comment.as_deref(), Some("wrong audience"));
}

#[tokio::test]
async fn the_second_decision_learns_who_decided_first() {
    let app = app().await;
    let (id, call) = paused_run(&app, "race").await;
    let json_accept = "application/json";
    let edited = r#"{"to": "team@example.com", "subject": "Weekly", "body": "Edited."}"#;
    let form = format!("run_id={id}&call_id={call}&arguments={}&comment=looks+good", urlencode(edited));
    let bad = format!("run_id={id}&call_id={call}&arguments=%5B");
    assert_eq!(post_form(&app, ApproveCall::PATH, &bad, json_accept, "", None).await.status, StatusCode::BAD_REQUEST);
    let unknown = format!("run_id={id}&call_id=nope");
    assert_eq!(post_form(&app, ApproveCall::PATH, &unknown, json_accept, "", None).await.status, StatusCode::NOT_FOUND);
    let ok = post_form(&app, ApproveCall::PATH, &form, json_accept, "", None).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let call_json = ok.json();
    assert_eq!(call_json["approval"]["decided_by"], "tests", "the key's name");
    assert_eq!(call_json["approval"]["edited_arguments"]["to"], "team@example.com");
    assert_eq!(call_json["approval"]["original_arguments"]["to"], "ops@example.com");

    let again = post_form(&app, RejectCall::PATH, &format!("run_id={id}&call_id={call}"), json_accept, "", None).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "like the REST API");
    let err: ApprovalError = serde_json::from_str(&again.text).expect("an ApprovalError");
    assert_eq!(err.kind, ErrorKind::AlreadyDecided);
    assert_eq!(err.about.as_deref(), Some(call.as_str()));
    assert!(err.message.contains("approved by tests"), "{}", err.message);
    assert_eq!(err.won.map(|d| d.decided_by).as_deref(), Some("tests"));
}

/// Percent-encodes a form value.
fn urlencode(s: &str) -> String {
    runlens::format::url_encode(s)
}

#[tokio::test]
async fn the_playground_echo_cannot_close_its_textareas() {
    let app = app().await;
    let page = app.get("/playground?prompt=%3C%2Ftextarea%3E%3Cb%3Ehi%3C%2Fb%3E&error=x").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.text.contains("</textarea><b>hi"), "reflected markup must stay text");
    assert!(page.text.contains("&lt;/textarea&gt;&lt;b&gt;hi"));
}

/// The inbox page holds 50 calls, oldest first, with plain links to the next
/// page and back to the first (carried by the cursor in the URL) and a
/// plain GET form for the tool and age filters: all of it works without
/// JavaScript. The count above the cards and the badge are the project's.
#[tokio::test]
async fn the_inbox_page_shows_fifty_calls_at_a_time_with_plain_links_and_filters() {
    let app = app().await;
    let body = json!({"initial_prompt": "add", "name": "the calculator run", "approval": {"tools": ["calculator"]},
        "model_settings": {"script": [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]},
        {"text": "done"}]}});
    let calc = app.post_json("/api/runs", &body.to_string()).await.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&calc, std::time::Duration::from_secs(20)).await.unwrap();
    let mut ids = vec![calc.clone()];
    for i in 0..52 {
        ids.push(paused_run(&app, &format!("mail {i}")).await.0);
    }
    let cards = |html: &str| html.matches("data-testid=\"approval-card\"").count();
    let link = |html: &str, testid: &str| {
        let at = html.find(&format!("data-testid=\"{testid}\""))?;
        let tag = &html[html[..at].rfind('<').unwrap()..at];
        let href = tag.split("href=\"").nth(1)?.split('"').next()?;
        Some(href.replace("&amp;", "&"))
    };

    let first = app.get("/approvals").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(cards(&first.text), 50, "one page of 50");
    assert!(first.text.contains(&format!("href=\"/runs/{calc}\"")), "the oldest call comes first");
    assert!(!first.text.contains(&format!("href=\"/runs/{}\"", ids[52])), "the newest is on the next page");
    assert!(first.text.contains("data-testid=\"approvals-count\">53<"), "every call waiting in the project");
    assert!(first.text.contains("data-testid=\"approvals-badge\" data-count=\"53\""), "the badge");
    assert!(link(&first.text, "approvals-first-page").is_none());
    let next = link(&first.text, "approvals-next-page").expect("a next page link");
    assert!(next.starts_with("/approvals?cursor="), "{next}");
    for testid in ["approvals-filter", "approvals-filter-tool", "approvals-filter-older", "approvals-filter-newer"] {
        assert!(first.text.contains(&format!("data-testid=\"{testid}\"")), "missing {testid}");
    }
    assert!(first.text.contains("<form method=\"get\" action=\"/approvals\""), "a plain GET form");

    let second = app.get(&next).await;
    assert_eq!(cards(&second.text), 3, "the rest");
    assert!(second.text.contains(&format!("href=\"/runs/{}\"", ids[52])));
    assert!(!second.text.contains(&format!("href=\"/runs/{calc}\"")), "nothing from the first page");
    assert_eq!(link(&second.text, "approvals-first-page").as_deref(), Some("/approvals"));
    assert!(link(&second.text, "approvals-next-page").is_none(), "the last page");

    // Filters: by tool (kept in the form and in the pager's links), by age.
    let tool = app.get("/approvals?tool=calculator").await;
    assert_eq!(cards(&tool.text), 1);
    assert!(tool.text.contains(&format!("href=\"/runs/{calc}\"")));
    assert!(tool.text.contains("value=\"calculator\""), "the form keeps the filter");
    assert!(tool.text.contains("data-testid=\"approvals-count\">53<"), "the count is unfiltered");
    let mails = app.get("/approvals?tool=send_email").await;
    assert_eq!(cards(&mails.text), 50);
    let next = link(&mails.text, "approvals-next-page").unwrap();
    assert!(next.starts_with("/approvals?tool=send_email&cursor="), "{next}");
    assert_eq!(cards(&app.get(&next).await.text), 2);
    let old = app.get("/approvals?older_than_s=3600").await;
    assert_eq!(cards(&old.text), 0);
    assert!(old.text.contains("data-testid=\"approvals-empty\""));
    assert!(old.text.contains("matches these filters"));
    assert_eq!(cards(&app.get("/approvals?newer_than_s=3600&older_than_s=").await.text), 50);

    // A cursor this page did not make: an error, not a crash.
    let bad = app.get("/approvals?cursor=nonsense").await;
    assert!(bad.text.contains("start over"), "{}", bad.text);
}

#[tokio::test]
async fn the_decided_tab_keeps_each_decision_with_its_run_and_only_the_projects_own() {
    use runlens_engine::model::{Actor, CreateRun, DecisionRequest, Role};

    let app = app().await;
    let empty = app.get("/approvals/decided").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.text.contains("data-testid=\"decided-empty\""), "{}", empty.text);

    let (id, call) = paused_run(&app, "mail <ops>").await;
    let grace = app.user("grace", Some(("default", Role::Approver)), false).await;
    let request = DecisionRequest { comment: Some("ok <b>then</b>".into()), ..Default::default() };
    app.engine.approvals().approve(&id, &call, request, &runlens_engine::user_actor(&grace)).await.unwrap();
    // Another project's decision is not shown here.
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let body = json!({"script": [{"tool_calls": [{"name": "send_email",
        "arguments": {"to": "x@example.com", "subject": "secret", "body": "b"}}]}, {"text": "done"}]});
    let theirs = CreateRun {
        initial_prompt: "their mail".into(),
        name: Some("their run".into()),
        tools: Some(vec!["send_email".into()]),
        model_settings: Some(body),
        ..CreateRun::default()
    };
    let (theirs, _) = app.engine.runs().create_run_in(theirs, "other", None).await.unwrap();
    let theirs = app.engine.runs().wait_until_settled(&theirs.id, std::time::Duration::from_secs(20)).await.unwrap();
    app.engine
        .approvals()
        .reject(&theirs.id, &theirs.interruptions[0].call_id, Default::default(), &Actor::system())
        .await
        .unwrap();

    let page = app.get("/approvals/decided").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.text;
    assert_eq!(html.matches("data-testid=\"decided-card\"").count(), 1, "{html}");
    assert!(html.contains(&format!("data-call-id=\"{call}\"")), "{html}");
    assert!(html.contains(&format!("href=\"/runs/{id}#step-0\"")), "links to the step");
    assert!(html.contains("mail &lt;ops&gt;") && !html.contains("mail <ops>"), "the run's name, escaped");
    assert!(html.contains("data-decision=\"approved\"") && html.contains(">grace<"), "who decided");
    assert!(html.contains("ok &lt;b&gt;then&lt;/b&gt;"), "the comment, escaped");
    assert!(!html.contains("their run") && !html.contains(&theirs.id), "another project's decision");
    let tab = html.find("href=\"/approvals/decided\"").map(|at| &html[at..at + 60]).unwrap_or_default();
    assert!(tab.contains("aria-current=\"page\""), "the tab is current: {tab}");
    // A cursor that is not one is said, not a crash.
    let bad = app.get("/approvals/decided?cursor=nonsense").await;
    assert_eq!(bad.status, StatusCode::OK);
    assert!(bad.text.contains("not valid; start over"), "{}", bad.text);
}
