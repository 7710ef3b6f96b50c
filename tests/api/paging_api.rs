//! `?offset=` beside cursors on every paged list: decided approvals,
//! projects, members, users, keys and the audit log page by offset as they
//! do by cursor (a client paging by offset used to get page one back), and
//! giving both is a 400.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::Value;

use crate::support::{urlencode, App, Reply};

fn refusal(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

/// `field` of each item of the list `key`.
fn column(list: &Value, key: &str, field: &str) -> Vec<String> {
    let items = list[key].as_array().unwrap_or_else(|| panic!("no `{key}` list: {list}"));
    items.iter().map(|item| item[field].as_str().map_or_else(|| item[field].to_string(), str::to_owned)).collect()
}

/// `GET uri` answered 200, as JSON.
async fn ok(app: &App, uri: &str) -> Value {
    let reply = app.get(uri).await;
    assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
    reply.json()
}

/// Checks that the list at `base` (no query, or one ending in `&`) pages by
/// offset: `limit=2&offset=1` is the second and third of the whole list, an
/// offset past the end is empty, and offset with the list's keyset parameter
/// `keyset` is a 400.
async fn pages_by_offset(app: &App, base: &str, key: &str, field: &str, keyset: &str, keyset_value: &str) {
    let all = column(&ok(app, base).await, key, field);
    assert!(all.len() >= 3, "{base}: {all:?}");
    let page = ok(app, &format!("{base}limit=2&offset=1")).await;
    assert_eq!(column(&page, key, field), all[1..3], "{base}");
    let one = ok(app, &format!("{base}limit=1&offset={}", all.len() - 1)).await;
    assert_eq!(column(&one, key, field), all[all.len() - 1..], "{base}: the last one");
    let past = ok(app, &format!("{base}offset={}", all.len())).await;
    assert!(column(&past, key, field).is_empty(), "{base}: past the end");
    let both = app.get(&format!("{base}offset=1&{keyset}={}", urlencode(keyset_value))).await;
    assert_eq!(refusal(&both), format!("offset and {keyset} cannot be combined"), "{base}");
}

#[tokio::test]
async fn every_list_pages_by_offset_and_refuses_offset_with_a_cursor() {
    let app = crate::support::app().await;
    let system = Actor::system();

    // Users, by name.
    for name in ["cy", "ada", "bob"] {
        app.user(name, Some(("default", Role::Viewer)), false).await;
    }
    let second = ok(&app, "/api/users?limit=1&offset=1").await;
    assert_eq!(column(&second, "users", "name"), ["bob"]);
    assert_eq!(second["next_cursor"], "bob", "a cursor page can follow an offset page");
    assert_eq!(column(&ok(&app, "/api/users?cursor=bob").await, "users", "name"), ["cy"]);
    pages_by_offset(&app, "/api/users?", "users", "name", "cursor", "ada").await;
    let far = refusal(&app.get("/api/users?offset=100001").await);
    assert!(far.starts_with("offset must be a number from 0 to 100000"), "{far}");

    // Members of a project, by user name.
    let members = ok(&app, "/api/projects/default/members?limit=1&offset=2").await;
    assert_eq!(column(&members, "members", "user_name"), ["cy"]);
    pages_by_offset(&app, "/api/projects/default/members?", "members", "user_name", "cursor", "ada").await;

    // Projects, by name: every one for an instance admin, a member's own otherwise.
    for name in ["p-c", "p-a", "p-b"] {
        app.engine.identity().create_project(name, &system).await.unwrap();
    }
    let projects = ok(&app, "/api/projects?limit=2&offset=1").await;
    assert_eq!(column(&projects, "projects", "name"), ["p-a", "p-b"], "after `default`");
    pages_by_offset(&app, "/api/projects?", "projects", "name", "cursor", "default").await;
    let ada = app.engine.directory().user_by_name("ada").await.unwrap().unwrap().0;
    for project in ["p-a", "p-c"] {
        app.engine.directory().set_member(project, &ada.id, Role::Viewer).await.unwrap();
    }
    let cookie = app.session("ada").await;
    let hers = app.send_with(Method::GET, "/api/projects?offset=1&limit=1", None, "", &[("cookie", &cookie)]).await;
    assert_eq!(hers.status, StatusCode::OK, "{}", hers.text);
    assert_eq!(column(&hers.json(), "projects", "name"), ["p-a"], "default, p-a, p-c: the second");

    // Keys, newest first.
    for name in ["k1", "k2", "k3"] {
        app.engine.identity().create_key(name, Some("default"), Role::Viewer, &system).await.unwrap();
    }
    let keys = column(&ok(&app, "/api/keys").await, "keys", "name");
    assert_eq!(keys, ["k3", "k2", "k1"], "newest first");
    assert_eq!(column(&ok(&app, "/api/keys?limit=1&offset=1").await, "keys", "name"), ["k2"]);
    let instance = column(&ok(&app, "/api/keys?scope=instance").await, "keys", "name");
    let skipped = column(&ok(&app, "/api/keys?scope=instance&offset=3").await, "keys", "name");
    assert_eq!(skipped, instance[3..], "with scope=instance too");
    let last = ok(&app, "/api/keys?limit=1").await["next_cursor"].as_str().unwrap().to_owned();
    pages_by_offset(&app, "/api/keys?", "keys", "id", "cursor", &last).await;

    // Decided approvals, newest first.
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(crate::approvals_api::paused_run(&app).await);
    }
    for (id, call) in &runs {
        let reply = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let decided = column(&ok(&app, "/api/approvals?status=decided").await, "decisions", "run_id");
    let newest_first: Vec<String> = runs.iter().rev().map(|(id, _)| id.clone()).collect();
    assert_eq!(decided, newest_first);
    let second = ok(&app, "/api/approvals?status=decided&limit=1&offset=1").await;
    assert_eq!(column(&second, "decisions", "run_id"), [runs[1].0.as_str()]);
    let cursor = second["next_cursor"].as_str().expect("a next page").to_owned();
    let third = ok(&app, &format!("/api/approvals?status=decided&cursor={}", urlencode(&cursor))).await;
    assert_eq!(column(&third, "decisions", "run_id"), [runs[0].0.as_str()]);
    pages_by_offset(&app, "/api/approvals?status=decided&", "decisions", "run_id", "cursor", &cursor).await;

    // The audit log, newest first: by `before` or by offset.
    let log = ok(&app, "/api/audit").await;
    let seqs = column(&log, "entries", "seq");
    assert!(seqs.len() >= 6, "{log}");
    let page = ok(&app, "/api/audit?limit=2&offset=2").await;
    assert_eq!(column(&page, "entries", "seq"), seqs[2..4]);
    assert_eq!(page["next_before"].to_string(), seqs[3], "the next page goes on by `before`");
    pages_by_offset(&app, "/api/audit?", "entries", "seq", "before", &seqs[0]).await;
    pages_by_offset(&app, "/api/audit?scope=instance&", "entries", "seq", "before", &seqs[0]).await;
}
