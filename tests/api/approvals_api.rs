//! The approvals API: decisions, conflicts, the inbox, and a race of 100
//! concurrent decisions on one call.

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;

use crate::support::{app, App};

/// Starts a run that pauses on a send_email call; returns (run id, call id).
pub(crate) async fn paused_run(app: &App) -> (String, String) {
    let body = json!({"initial_prompt": "mail", "model_settings": {"script": [
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
        {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    let got = app.get(&format!("/api/runs/{id}")).await.json();
    let call = got["interruptions"][0]["call_id"].as_str().unwrap().to_owned();
    assert_eq!(got["interruptions"][0]["tool_name"], "send_email");
    (id, call)
}

#[tokio::test]
async fn approve_reject_and_the_inbox() {
    let app = app().await;
    let (id, call) = paused_run(&app).await;
    let (id2, call2) = paused_run(&app).await;
    let inbox = app.get("/api/approvals?status=pending").await.json();
    let listed: Vec<&str> =
        inbox["approvals"].as_array().unwrap().iter().map(|a| a["run_id"].as_str().unwrap()).collect();
    assert_eq!(listed, [id.as_str(), id2.as_str()], "oldest first");
    assert!(inbox["approvals"][0]["age_s"].is_number());

    let ok = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.json()["approval"]["decided_by"], "tests", "the key's name");
    assert!(ok.json()["approval"]["decided_by_id"].as_str().unwrap().starts_with("key:key_"), "{}", ok.text);
    let body = r#"{"reason": "not today"}"#;
    let no = app.post_json(&format!("/api/runs/{id2}/tool-calls/{call2}/reject"), body).await;
    assert_eq!(no.json()["approval"]["comment"], "not today");

    let again = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/reject"), "").await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.json()["decision"]["decision"], "approved");

    let bad = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "{oops").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.post_json(&format!("/api/runs/{id}/tool-calls/nope/approve"), "").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.post_json("/api/runs/nope/tool-calls/x/approve", "").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/approvals?status=done").await.status, StatusCode::BAD_REQUEST);

    // The decisions made, newest first, with who made them, in pages.
    let decided = app.get("/api/approvals?status=decided").await.json();
    let decisions = decided["decisions"].as_array().unwrap();
    let order: Vec<(&str, &str)> =
        decisions.iter().map(|d| (d["run_id"].as_str().unwrap(), d["decision"].as_str().unwrap())).collect();
    assert_eq!(order, [(id2.as_str(), "rejected"), (id.as_str(), "approved")], "newest first");
    assert_eq!(decisions[0]["call_id"], call2.as_str());
    assert_eq!(decisions[0]["decided_by"], "tests");
    assert!(decisions[0]["decided_by_id"].as_str().unwrap().starts_with("key:"));
    assert_eq!(decisions[0]["comment"], "not today");
    assert!(decided["next_cursor"].is_null());
    let first = app.get("/api/approvals?status=decided&limit=1").await.json();
    assert_eq!(first["decisions"][0]["run_id"], id2.as_str());
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let uri = format!("/api/approvals?status=decided&limit=1&cursor={}", crate::support::urlencode(cursor));
    let second = app.get(&uri).await.json();
    assert_eq!(second["decisions"][0]["run_id"], id.as_str());
    assert!(second["next_cursor"].is_null(), "{second}");
    for bad in ["limit=0", "limit=201", "cursor=nonsense"] {
        let reply = app.get(&format!("/api/approvals?status=decided&{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
    // The inbox is empty now.
    assert_eq!(app.get("/api/approvals").await.json()["approvals"], serde_json::json!([]));
}

#[tokio::test]
async fn deciding_a_call_of_a_run_that_is_not_paused_is_409() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 1 + 2?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let call = steps["steps"][0]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let reply = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_100_concurrent_decisions_exactly_one_wins() {
    let app = std::sync::Arc::new(app().await);
    let (id, call) = paused_run(&app).await;
    let requests = (0..100).map(|i| {
        let verb = if i % 2 == 0 { "approve" } else { "reject" };
        let uri = format!("/api/runs/{id}/tool-calls/{call}/{verb}");
        let app = app.clone();
        tokio::spawn(async move { app.post_json(&uri, "").await })
    });
    let replies: Vec<_> = join_all(requests).await.into_iter().map(Result::unwrap).collect();
    let ok = replies.iter().filter(|r| r.status == StatusCode::OK).count();
    let conflicts = replies.iter().filter(|r| r.status == StatusCode::CONFLICT).count();
    assert_eq!((ok, conflicts), (1, 99), "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    let winner = replies.iter().find(|r| r.status == StatusCode::OK).unwrap().json();
    for loser in replies.iter().filter(|r| r.status == StatusCode::CONFLICT) {
        assert_eq!(loser.json()["decision"]["decision"], winner["approval"]["decision"]);
    }
    let stored = crate::support::sql_rows(&app.db_url, "SELECT run_id FROM approval_decisions").await;
    assert_eq!(stored.len(), 1);
}

/// Starts a run that pauses on one calculator call (approval required for
/// it); returns (run id, call id).
async fn paused_calculator(app: &App) -> (String, String) {
    let body = json!({"initial_prompt": "add", "approval": {"tools": ["calculator"]}, "model_settings": {"script": [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}, {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.runs().wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    (id, run.interruptions[0].call_id.clone())
}

/// `(run_id, call_id)` of each approval of a pending page.
fn calls(page: &serde_json::Value) -> Vec<(String, String)> {
    let approvals = page["approvals"].as_array().unwrap_or_else(|| panic!("no approvals: {page}"));
    approvals
        .iter()
        .map(|a| (a["run_id"].as_str().unwrap().to_owned(), a["call_id"].as_str().unwrap().to_owned()))
        .collect()
}

/// Every page of `uri` (a pending list with its filters) from `start` (the
/// first page for `None`), following `next_cursor`.
async fn every_page(app: &App, uri: &str, start: Option<&str>) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let at = |cursor: &str| format!("{uri}&cursor={}", crate::support::urlencode(cursor));
    let mut next = start.map_or_else(|| uri.to_owned(), at);
    for _ in 0..50 {
        let reply = app.get(&next).await;
        assert_eq!(reply.status, StatusCode::OK, "{next}: {}", reply.text);
        let page = reply.json();
        seen.extend(calls(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => next = at(cursor),
            None => return seen,
        }
    }
    panic!("more than 50 pages of {uri}");
}

#[tokio::test]
async fn the_pending_inbox_pages_oldest_first_while_calls_are_decided() {
    let app = app().await;
    let mut runs = Vec::new();
    for i in 0..7 {
        runs.push(if i % 3 == 2 { paused_calculator(&app).await } else { paused_run(&app).await });
    }
    // Oldest first: by the stored request times, ties by run id.
    let all = calls(&app.get("/api/approvals?limit=200").await.json());
    assert_eq!(all.len(), 7);
    let mut keyed = Vec::new();
    for (run, call) in &runs {
        let stored = app.engine.traces().tool_call(run, call).await.unwrap();
        keyed.push((stored.requested_at.unwrap(), run.clone(), call.clone()));
    }
    keyed.sort();
    let sorted: Vec<(String, String)> = keyed.into_iter().map(|(_, run, call)| (run, call)).collect();
    assert_eq!(all, sorted, "oldest first");

    // The first page: a cursor, and the project's total whatever the page.
    let first = app.get("/api/approvals?status=pending&limit=3").await.json();
    assert_eq!(calls(&first), all[..3]);
    assert_eq!(first["total"], 7);
    assert!(first["approvals"][0]["age_s"].is_number() && first["approvals"][0]["requested_at"].is_string());
    let cursor = first["next_cursor"].as_str().expect("a next page").to_owned();

    // Decide one call already seen and one not seen yet; the rest of the
    // pages list every other call exactly once, in order.
    let (seen_run, seen_call) = &all[1];
    let (later_run, later_call) = &all[4];
    for (run, call) in [(seen_run, seen_call), (later_run, later_call)] {
        let ok = app.post_json(&format!("/api/runs/{run}/tool-calls/{call}/approve"), "").await;
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    }
    let rest = every_page(&app, "/api/approvals?limit=2", Some(&cursor)).await;
    let expected: Vec<_> = all[3..].iter().filter(|c| *c != &all[4]).cloned().collect();
    assert_eq!(rest, expected);
    let count = app.get("/api/approvals/count").await;
    assert_eq!(count.status, StatusCode::OK);
    assert_eq!(count.json(), json!({"pending": 5, "requests": 0}));
    assert_eq!(app.get("/api/approvals?limit=1").await.json()["total"], 5);

    // Every page size lists each pending call once.
    let pending: Vec<_> = all.iter().filter(|c| *c != &all[1] && *c != &all[4]).cloned().collect();
    for limit in [1, 2, 5, 50] {
        assert_eq!(every_page(&app, &format!("/api/approvals?limit={limit}"), None).await, pending, "limit {limit}");
    }
    let last = app.get("/api/approvals").await.json();
    assert!(last["next_cursor"].is_null(), "one page holds them all: {last}");
}

#[tokio::test]
async fn the_pending_inbox_filters_by_tool_run_and_age() {
    let app = app().await;
    let (mail_run, _) = paused_run(&app).await;
    let (calc_run, calc_call) = paused_calculator(&app).await;
    let (other_mail, _) = paused_run(&app).await;
    let ids = |uri: &str| {
        let uri = uri.to_owned();
        let app = &app;
        async move {
            let reply = app.get(&uri).await;
            assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
            let page = reply.json();
            assert_eq!(page["total"], 3, "the total ignores the filters: {page}");
            calls(&page).into_iter().map(|(run, _)| run).collect::<Vec<_>>()
        }
    };
    assert_eq!(ids("/api/approvals?tool=calculator").await, [calc_run.as_str()]);
    assert_eq!(ids("/api/approvals?tool=send_email").await, [mail_run.as_str(), other_mail.as_str()]);
    assert!(ids("/api/approvals?tool=send").await.is_empty(), "the exact name only");
    assert_eq!(ids(&format!("/api/approvals?run={calc_run}")).await, [calc_run.as_str()]);
    assert!(ids(&format!("/api/approvals?run={calc_run}&tool=send_email")).await.is_empty());
    assert!(ids("/api/approvals?run=no-such-run").await.is_empty());
    // Everything was requested within the last minute.
    assert_eq!(ids("/api/approvals?newer_than_s=3600").await.len(), 3);
    assert_eq!(ids("/api/approvals?older_than_s=0").await.len(), 3);
    assert!(ids("/api/approvals?older_than_s=3600").await.is_empty());
    // Make the calculator call two hours old.
    let two_hours_ago = chrono::Utc::now().timestamp_millis() - 2 * 3_600_000;
    crate::support::sql(
        &app.db_url,
        &[&format!(
            "UPDATE tool_calls SET requested_at = {two_hours_ago} WHERE run_id = '{calc_run}' AND id = '{calc_call}'"
        )],
    )
    .await;
    assert_eq!(ids("/api/approvals").await[0], calc_run, "now the oldest");
    assert_eq!(ids("/api/approvals?older_than_s=3600").await, [calc_run.as_str()]);
    assert_eq!(ids("/api/approvals?older_than_s=3600&tool=calculator").await, [calc_run.as_str()]);
    assert_eq!(ids("/api/approvals?newer_than_s=3600").await, [mail_run.as_str(), other_mail.as_str()]);
    assert_eq!(ids("/api/approvals?older_than_s=3600&newer_than_s=10800").await, [calc_run.as_str()]);
    assert!(ids("/api/approvals?older_than_s=10800").await.is_empty());
    let page = app.get("/api/approvals?older_than_s=3600").await.json();
    assert!(page["approvals"][0]["age_s"].as_i64().unwrap() >= 7_199, "{page}");
}

#[tokio::test]
async fn bad_inbox_parameters_are_400_and_change_nothing() {
    let app = app().await;
    let (run, _) = paused_run(&app).await;
    let before = app.get("/api/approvals").await.json();
    let decided_cursor = "1700000000000_run/call";
    let long = "x".repeat(1001);
    let cases = [
        "limit=0".to_owned(),
        "limit=201".to_owned(),
        "limit=ten".to_owned(),
        "cursor=nonsense".to_owned(),
        format!("cursor={}", crate::support::urlencode(decided_cursor)),
        "status=decided&cursor=1700000000000_0_0_run".to_owned(),
        "older_than_s=-1".to_owned(),
        "older_than_s=1.5".to_owned(),
        "newer_than_s=315360001".to_owned(),
        format!("tool={long}"),
        format!("run={long}"),
        "offset=1".to_owned(),
        "status=decided&tool=send_email".to_owned(),
        "status=decided&run=x".to_owned(),
        "status=decided&older_than_s=1".to_owned(),
        "status=decided&newer_than_s=1".to_owned(),
        "status=pending&tenant=x".to_owned(),
    ];
    for query in cases {
        let reply = app.get(&format!("/api/approvals?{query}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}: {}", reply.text);
        assert!(reply.json()["error"].as_str().is_some_and(|e| !e.is_empty()), "{query}: {}", reply.text);
    }
    let count = app.get("/api/approvals/count?x=1").await;
    assert_eq!(count.status, StatusCode::BAD_REQUEST, "{}", count.text);
    assert!(count.json()["error"].as_str().unwrap().contains("unknown query parameter"));
    // Empty values are absent ones.
    let empty = app.get("/api/approvals?status=&limit=&cursor=&tool=&run=&older_than_s=&newer_than_s=").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.text);
    let after = app.get("/api/approvals").await.json();
    assert_eq!(before_but_aged(&before, &after), after, "nothing changed");
    assert_eq!(calls(&empty.json()).len(), 1);
    assert_eq!(app.engine.runs().get_run(&run).await.unwrap().status.as_str(), "paused");
    assert_eq!(app.get("/api/approvals/count").await.json(), json!({"pending": 1, "requests": 0}));
}

/// `before` with the ages of `now` (an answer only ages between two reads).
fn before_but_aged(before: &serde_json::Value, now: &serde_json::Value) -> serde_json::Value {
    let mut before = before.clone();
    for (b, n) in before["approvals"].as_array_mut().unwrap().iter_mut().zip(now["approvals"].as_array().unwrap()) {
        b["age_s"] = n["age_s"].clone();
    }
    before
}

#[tokio::test]
async fn another_projects_key_sees_no_pending_call_and_counts_none() {
    use runlens_engine::model::{Actor, Role};

    let app = app().await;
    let (run, call) = paused_run(&app).await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let (_, secret) =
        app.engine.identity().create_key("other viewer", Some("other"), Role::Viewer, &Actor::system()).await.unwrap();
    let auth = format!("Bearer {secret}");
    let get = |uri: String| {
        let auth = auth.clone();
        let app = &app;
        async move { app.send_with(axum::http::Method::GET, &uri, None, "", &[("authorization", auth.as_str())]).await }
    };
    let inbox = get("/api/approvals".into()).await;
    assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.text);
    assert_eq!(inbox.json(), json!({"approvals": [], "next_cursor": null, "total": 0}));
    let by_run = get(format!("/api/approvals?run={run}")).await.json();
    assert_eq!(by_run["approvals"], json!([]), "naming another project's run finds nothing");
    assert_eq!(get("/api/approvals/count".into()).await.json(), json!({"pending": 0, "requests": 0}));
    // Its own project only: `default` is not its to read.
    let elsewhere = app
        .send_with(
            axum::http::Method::GET,
            "/api/approvals/count",
            None,
            "",
            &[("authorization", auth.as_str()), ("x-runlens-project", "default")],
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::NOT_FOUND, "{}", elsewhere.text);
    // And it cannot decide the call.
    let uri = format!("/api/runs/{run}/tool-calls/{call}/approve");
    let decide = app.send_with(axum::http::Method::POST, &uri, None, "", &[("authorization", auth.as_str())]).await;
    assert_eq!(decide.status, StatusCode::NOT_FOUND, "{}", decide.text);
    assert_eq!(app.get("/api/approvals/count").await.json(), json!({"pending": 1, "requests": 0}));
}

/// A measurement to run by hand (no timed assertion), SQLite only: the
/// inbox API's first page, a later page and the count through the router
/// (authentication, JSON and all) over a million pending calls, made by
/// cloning one real paused run's rows with INSERT … SELECT.
///
/// `cargo test --no-default-features --features ssr --test api measure_the_inbox_api -- --ignored --nocapture`
/// (`RUNLENS_INBOX_CALLS=N` for another backlog).
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_the_inbox_api_over_a_million_pending_calls() {
    use std::time::{Duration, Instant};

    let app = app().await;
    if !app.db_url.starts_with("sqlite:") {
        return;
    }
    let total: u64 = std::env::var("RUNLENS_INBOX_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
    let (run, _) = paused_run(&app).await;
    let pool = sqlx::SqlitePool::connect(&app.db_url).await.unwrap();
    let columns = |table: &str| format!("SELECT name FROM pragma_table_info('{table}')");
    let run_cols: Vec<String> = sqlx::query_scalar(&columns("runs")).fetch_all(&pool).await.unwrap();
    let call_cols: Vec<String> = sqlx::query_scalar(&columns("tool_calls")).fetch_all(&pool).await.unwrap();
    let pick = |cols: &[String], f: &dyn Fn(&str) -> Option<String>| {
        cols.iter().map(|c| f(c).unwrap_or_else(|| c.clone())).collect::<Vec<_>>().join(", ")
    };
    let run_select = pick(&run_cols, &|c| match c {
        "id" | "root_run_id" => Some("'clone_' || n.i".into()),
        _ => None,
    });
    let call_select = pick(&call_cols, &|c| match c {
        "run_id" => Some("'clone_' || n.i".into()),
        "requested_at" => Some("requested_at - (n.i * 7919) % 1000000000".into()),
        _ => None,
    });
    let started = Instant::now();
    let mut from = 0;
    while from < total {
        let to = (from + 100_000).min(total);
        let n = format!("WITH RECURSIVE n(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {to})");
        let mut tx = pool.begin().await.unwrap();
        let sql = format!(
            "{n} INSERT INTO runs ({}) SELECT {run_select} FROM runs, n WHERE runs.id = ?",
            run_cols.join(", ")
        );
        sqlx::query(&sql).bind(&run).execute(&mut *tx).await.unwrap();
        let sql = format!(
            "{n} INSERT INTO tool_calls ({}) SELECT {call_select} FROM tool_calls, n WHERE tool_calls.run_id = ?",
            call_cols.join(", ")
        );
        sqlx::query(&sql).bind(&run).execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        from = to;
    }
    pool.close().await;
    eprintln!("cloned {total} paused runs in {:.1} s", started.elapsed().as_secs_f64());

    let mut cursor = None;
    for (what, uri) in [
        ("GET /api/approvals (first page of 50)", "/api/approvals".to_owned()),
        ("GET /api/approvals/count", "/api/approvals/count".to_owned()),
        ("GET /api/approvals?limit=200", "/api/approvals?limit=200".to_owned()),
        (
            "GET /api/approvals?tool=send_email&older_than_s=86400",
            "/api/approvals?tool=send_email&older_than_s=86400".to_owned(),
        ),
        ("GET /api/approvals?cursor=<page 2>", String::new()),
        ("GET /approvals (the page, 50 cards)", "/approvals".to_owned()),
        ("GET /runs (a page with the badge)", "/runs".to_owned()),
    ] {
        let uri = if uri.is_empty() {
            format!("/api/approvals?cursor={}", crate::support::urlencode(cursor.as_deref().unwrap()))
        } else {
            uri
        };
        let mut took: Vec<Duration> = Vec::new();
        let mut bytes = 0;
        for _ in 0..30 {
            let t = Instant::now();
            let reply = app.get(&uri).await;
            took.push(t.elapsed());
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
            bytes = reply.text.len();
            if cursor.is_none() {
                cursor = reply.json()["next_cursor"].as_str().map(str::to_owned);
            }
        }
        took.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        eprintln!(
            "{what:<56} best {:>7.2} ms  median {:>7.2} ms  max {:>7.2} ms  ({bytes} bytes)",
            ms(took[0]),
            ms(took[15]),
            ms(took[29])
        );
    }
    assert_eq!(app.get("/api/approvals/count").await.json()["pending"], total + 1);
}
