//! Server-rendered pages and the playground form post.

use axum::http::{header, Method, StatusCode};

use crate::support::app;

#[tokio::test]
async fn runs_and_trace_pages_render_the_run() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 6 * 7?", "name": "answer <b>check</b>"}"#).await;
    let id = run["id"].as_str().unwrap();

    let list = app.get("/runs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.text.contains(&format!("data-run-id=\"{id}\"")), "{}", list.text);
    assert!(list.text.contains("answer &lt;b&gt;check&lt;/b&gt;"), "names are escaped");
    assert!(!list.text.contains("<b>check</b>"));
    let cost = list.text.split(r#"data-testid="run-row-cost""#).nth(1).and_then(|t| t.split("</td>").next());
    assert!(cost.is_some_and(|c| c.ends_with(">$0.00")), "the built-in model is priced at 0: {cost:?}");

    let trace = app.get(&format!("/runs/{id}")).await;
    assert_eq!(trace.status, StatusCode::OK);
    // The detail pane shows the newest step (the answer); `?from=0` the call.
    assert!(trace.text.contains("42"));
    let first = app.get(&format!("/runs/{id}?from=0")).await;
    assert!(first.text.contains("data-tool=\"calculator\""));
}

#[tokio::test]
async fn the_playground_form_starts_a_run_or_explains_the_error() {
    let app = app().await;
    let form =
        "prompt=What+is+2%2B3%3F&model=builtin&tools_present=1&tools=calculator&max_turns=5&tags=team%3Dqa&context=";
    let reply = app.send(Method::POST, "/playground", Some(form), "application/x-www-form-urlencoded").await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let location = reply.headers[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("/runs/"), "{location}");

    let bad = "prompt=keep+me&model=builtin&context=%7Bnot+json";
    let reply = app.send(Method::POST, "/playground", Some(bad), "application/x-www-form-urlencoded").await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let location = reply.headers[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("/playground?") && location.contains("error="), "{location}");
    assert!(location.contains("prompt=keep"), "the prompt is kept: {location}");

    let page = app.get("/playground").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("value=\"calculator\""));
}

/// The browser bundle goes out under content-hashed names that pages link
/// through the build's manifest: brotli to browsers that accept it, else
/// gzip, else plain, and cached as immutable; what carries no hash is
/// revalidated, and an unknown file is a 404 nobody caches.
#[tokio::test]
async fn the_bundle_is_hashed_precompressed_and_immutable() {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let app = app().await;
    let pkg = app.site_root().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    // Before a manifest exists pages link the names wasm-bindgen writes.
    let page = app.get("/login").await;
    assert!(page.text.contains(r#"href="/pkg/runlens.css""#), "{}", page.text);
    assert!(page.text.contains(r#"import("/pkg/runlens.js")"#));

    let js = "runlens.0123456789abcdef.js";
    std::fs::write(pkg.join(js), "plain script").unwrap();
    std::fs::write(pkg.join(format!("{js}.gz")), b"\x1f\x8bgzipped bytes").unwrap();
    std::fs::write(pkg.join(format!("{js}.br")), b"brotli bytes").unwrap();
    std::fs::write(pkg.join("runlens.fedcba9876543210.css"), "body {}").unwrap();
    std::fs::write(pkg.join("runlens.css"), "body {}").unwrap();
    std::fs::write(
        pkg.join("manifest.json"),
        format!(r#"{{"js":"{js}","wasm":"runlens_bg.00112233aabbccdd.wasm","css":"runlens.fedcba9876543210.css"}}"#),
    )
    .unwrap();
    // A later modification time than the first read saw, whatever the
    // file system's clock resolution.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options().write(true).open(pkg.join("manifest.json")).unwrap().set_modified(later).unwrap();

    let page = app.get("/login").await;
    assert!(page.text.contains(r#"href="/pkg/runlens.fedcba9876543210.css""#), "{}", page.text);
    assert!(page.text.contains(&format!(r#"rel="modulepreload" href="/pkg/{js}""#)));
    assert!(page.text.contains(r#"href="/pkg/runlens_bg.00112233aabbccdd.wasm""#));
    assert!(page.text.contains(&format!(r#"import("/pkg/{js}")"#)));
    assert!(page.text.contains(r#"module_or_path: "/pkg/runlens_bg.00112233aabbccdd.wasm""#));
    assert!(page.text.contains(r#"<p role="status" class="hydration-state">"#), "the loading notice: {}", page.text);

    let get = |uri: &str, accept: Option<&str>| {
        let mut req = Request::builder().uri(uri);
        if let Some(accept) = accept {
            req = req.header(header::ACCEPT_ENCODING, accept);
        }
        app.router.clone().oneshot(req.body(Body::empty()).unwrap())
    };
    let body = |res: axum::response::Response| async move { res.into_body().collect().await.unwrap().to_bytes() };
    let uri = format!("/pkg/{js}");
    let immutable = "public, max-age=31536000, immutable";

    let res = get(&uri, Some("gzip, deflate, br")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_ENCODING], "br");
    assert_eq!(res.headers()[header::CACHE_CONTROL], immutable);
    assert!(res.headers()[header::CONTENT_TYPE].to_str().unwrap().contains("javascript"));
    assert!(res.headers()[header::VARY].to_str().unwrap().to_ascii_lowercase().contains("accept-encoding"));
    assert_eq!(&body(res).await[..], b"brotli bytes");

    let res = get(&uri, Some("gzip")).await.unwrap();
    assert_eq!(res.headers()[header::CONTENT_ENCODING], "gzip");
    assert_eq!(res.headers()[header::CACHE_CONTROL], immutable);
    assert_eq!(&body(res).await[..], b"\x1f\x8bgzipped bytes");

    let res = get(&uri, None).await.unwrap();
    assert!(res.headers().get(header::CONTENT_ENCODING).is_none());
    assert_eq!(res.headers()[header::CACHE_CONTROL], immutable);
    assert_eq!(&body(res).await[..], b"plain script");

    let res = get("/pkg/runlens.fedcba9876543210.css", Some("gzip, br")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get(header::CONTENT_ENCODING).is_none(), "no compressed copy: the plain file");
    assert_eq!(res.headers()[header::CACHE_CONTROL], immutable);

    for unhashed in ["/pkg/runlens.css", "/pkg/manifest.json"] {
        let res = get(unhashed, None).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{unhashed}");
        assert_eq!(res.headers()[header::CACHE_CONTROL], "no-cache", "{unhashed}");
    }
    let res = get("/pkg/runlens.0000000000000000.wasm", Some("br")).await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(res.headers()[header::CACHE_CONTROL], "no-cache", "a missing hashed name is not cached");
}

/// A text of about `bytes` bytes with what HTML, JSON and URLs all escape.
fn hostile_text(bytes: usize) -> String {
    let piece = "Say \"hi\" & <b>bye</b> to O'Brien\n";
    piece.repeat(bytes / piece.len())
}

/// A 1.9 MB prompt (the issue's figure: its trace page was 36.9 MB) gives
/// pages that are a small fraction of it, with a link to the prompt in full.
#[tokio::test]
async fn pages_stay_small_with_a_huge_prompt() {
    let app = app().await;
    let prompt = hostile_text(1_900_000);
    // Prompts are bounded at creation (256 KiB), so a run this large comes
    // from a state document: a finished run's, turned back into a pending
    // run whose first message is the huge prompt.
    let reply = app.post_json("/api/runs", r#"{"initial_prompt": "small"}"#).await;
    let small = reply.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&small, std::time::Duration::from_secs(30)).await.unwrap();
    let mut doc = app.get(&format!("/api/runs/{small}/state")).await.json();
    doc["run"]["initial_prompt"] = serde_json::json!(prompt.trim());
    doc["run"]["status"] = serde_json::json!("pending");
    for k in ["result", "summary", "finished_at", "started_at"] {
        doc["run"][k] = serde_json::Value::Null;
    }
    doc["steps"] = serde_json::json!([]);
    let mut first = doc["messages"][0].clone();
    first["data"]["message"] = serde_json::json!(prompt.trim());
    doc["messages"] = serde_json::json!([first]);
    let reply = app.post_json("/api/runs/import", &doc.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", &reply.text[..reply.text.len().min(300)]);
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(30)).await.unwrap();

    let trace = app.get(&format!("/runs/{id}?transcript=1")).await;
    assert_eq!(trace.status, StatusCode::OK);
    assert!(trace.text.len() < 200_000, "the trace page is {} bytes", trace.text.len());
    assert!(trace.text.contains(&format!(r#"href="/api/runs/{id}""#)), "a link to the prompt in full");
    assert!(trace.text.contains(r#"data-testid="show-all""#));
    assert!(trace.text.contains(r#"data-testid="rerun-too-long""#), "no re-run link carrying a cut prompt");
    assert!(trace.text.contains("&lt;b&gt;bye&lt;/b&gt;"), "the preview is there, escaped");
    // The transcript's prompt and the model's echo of it link to their JSON;
    // the cut prompt is not offered for editing.
    assert!(trace.text.contains(&format!("/api/runs/{id}/messages?from=0&amp;limit=1")));
    assert!(trace.text.contains(&format!("/api/runs/{id}/steps?from=0&amp;limit=1")));
    assert!(trace.text.contains(r#"data-testid="message-too-long""#));
    assert!(!trace.text.contains(r#"data-testid="edit-message-text""#));
    let message = app.get(&format!("/api/runs/{id}/messages?from=0&limit=1")).await.json();
    assert_eq!(message["messages"][0]["data"]["message"], prompt.trim());
    let full = app.get(&format!("/api/runs/{id}")).await.json();
    assert_eq!(full["initial_prompt"].as_str().unwrap(), prompt.trim(), "the API keeps it whole");

    let list = app.get("/runs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.text.len() < 100_000, "the runs list is {} bytes", list.text.len());
}

/// Long tool arguments (`send_email` takes a body of up to 100,000
/// characters): the approvals inbox, the trace and the outbox stay small;
/// the card links to the call in full and offers no editor for the preview.
#[tokio::test]
async fn approvals_and_outbox_stay_small_with_huge_arguments() {
    let app = app().await;
    let mail = hostile_text(99_000);
    let body = serde_json::json!({"initial_prompt": "mail", "model_settings": {"script": [
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "ops@example.com", "subject": "big", "body": mail}}]},
        {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    let call = run.interruptions[0].call_id.clone();

    for uri in ["/approvals".to_owned(), format!("/runs/{id}")] {
        let page = app.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.text.len() < 100_000, "{uri} is {} bytes", page.text.len());
        assert!(page.text.contains(&format!("/api/runs/{id}/tool-calls/{call}")), "{uri} links to the call");
        assert!(!page.text.contains(r#"data-testid="edit-arguments""#), "{uri}: no editor for a preview");
        assert!(page.text.contains(r#"class="json">{"body":"Say \"hi\" &amp;"#), "{uri}: the preview reads as JSON");
    }

    let reply = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "{}").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    let outbox = app.get("/outbox").await;
    assert_eq!(outbox.status, StatusCode::OK);
    assert!(outbox.text.contains(r#"data-testid="email-row""#));
    assert!(outbox.text.len() < 100_000, "the outbox is {} bytes", outbox.text.len());
    assert!(outbox.text.contains(r#"href="/api/outbox""#));
}

/// The theme (issue 19): the `runlens_theme` cookie decides `<html
/// data-theme>` (the system's setting without one), `POST /theme` sets it
/// and goes back, without a session too (the sign-in page has the switch),
/// and a cross-site post is refused like every other.
#[tokio::test]
async fn the_theme_cookie_picks_the_pages_theme_and_the_switch_sets_it() {
    let app = app().await;
    let auth = app.bearer();
    let plain = app.send_with(Method::GET, "/runs", None, "", &[("authorization", auth.as_str())]).await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(
        plain.text.contains(r#"<html lang="en" data-theme="system""#),
        "{}",
        &plain.text[..300.min(plain.text.len())]
    );
    assert!(plain.text.contains(r#"data-testid="theme-toggle""#));
    let dark = app
        .send_with(
            Method::GET,
            "/runs",
            None,
            "",
            &[("authorization", auth.as_str()), ("cookie", "a=b; runlens_theme=dark")],
        )
        .await;
    assert!(dark.text.contains(r#"data-theme="dark""#));
    let login = app.send_with(Method::GET, "/login", None, "", &[("cookie", "runlens_theme=light")]).await;
    assert!(login.text.contains(r#"data-theme="light""#) && login.text.contains(r#"data-testid="theme-toggle""#));

    let form = "theme=dark&next=%2Foutbox%3Fx%3D1";
    let origin = [("origin", "http://localhost"), ("host", "localhost")];
    let set = app.send_with(Method::POST, "/theme", Some(form), "application/x-www-form-urlencoded", &origin).await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.text);
    assert_eq!(set.headers[header::LOCATION], "/outbox?x=1");
    let cookie = set.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.starts_with("runlens_theme=dark;") && cookie.contains("Path=/"), "{cookie}");
    // Only paths of this server.
    let away = "theme=light&next=https%3A%2F%2Fevil.example%2F";
    let set = app.send_with(Method::POST, "/theme", Some(away), "application/x-www-form-urlencoded", &origin).await;
    assert_eq!(set.headers[header::LOCATION], "/");
    let bad =
        app.send_with(Method::POST, "/theme", Some("theme=pink"), "application/x-www-form-urlencoded", &origin).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let cross = app
        .send_with(
            Method::POST,
            "/theme",
            Some(form),
            "application/x-www-form-urlencoded",
            &[("origin", "https://evil.example"), ("host", "localhost")],
        )
        .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    assert!(cross.headers.get(header::SET_COOKIE).is_none());
}
