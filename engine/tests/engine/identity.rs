//! Identity and projects: users, keys, sessions, the setup token, the audit
//! log, and that a project's runs, approvals, emails and prices stay its own.

use chrono::{Duration, Utc};
use runlens_engine::model::{Actor, DecisionRequest, Role, RunFilter, RunStatus, DEFAULT_PROJECT};
use runlens_engine::{EngineError, ImportOptions};
use serde_json::json;

use crate::support::*;

fn admin() -> Actor {
    Actor { id: "system".into(), name: "test".into() }
}

#[tokio::test]
async fn users_sign_in_with_their_password_only() {
    let (engine, _dir) = engine().await;
    let ada = engine.identity().create_user("ada", "correct horse battery", false, &admin()).await.unwrap();
    assert!(!ada.instance_admin);
    assert!(matches!(
        engine.identity().create_user("ada", "another password", false, &admin()).await,
        Err(EngineError::Conflict(_))
    ));
    assert!(matches!(
        engine.identity().create_user("a b", "long enough!", false, &admin()).await,
        Err(EngineError::Invalid(_))
    ));
    assert!(matches!(
        engine.identity().create_user("bob", "short", false, &admin()).await,
        Err(EngineError::Invalid(_))
    ));

    assert_eq!(
        engine.identity().check_password("ada", "correct horse battery").await.unwrap().map(|u| u.id),
        Some(ada.id.clone())
    );
    assert!(engine.identity().check_password("ada", "wrong").await.unwrap().is_none());
    assert!(engine.identity().check_password("nobody", "correct horse battery").await.unwrap().is_none());

    // A reset changes the password and ends the user's sessions.
    let dir = engine.directory();
    let data = format!(r#"{{"id":"x","data":{{"user_id":"{}"}},"expiry_date":"2099-01-01T00:00:00Z"}}"#, ada.id);
    assert!(dir.create_session("s1", &data, Utc::now() + Duration::days(1)).await.unwrap());
    engine.identity().reset_password("ada", "a new password", &admin()).await.unwrap();
    assert!(dir.load_session("s1", Utc::now()).await.unwrap().is_none());
    assert!(engine.identity().check_password("ada", "correct horse battery").await.unwrap().is_none());
    assert!(engine.identity().check_password("ada", "a new password").await.unwrap().is_some());
}

#[tokio::test]
async fn sessions_expire_and_ids_are_unique() {
    let (engine, _dir) = engine().await;
    let dir = engine.directory();
    let now = Utc::now();
    assert!(dir.create_session("a", "{}", now + Duration::hours(1)).await.unwrap());
    assert!(!dir.create_session("a", "{}", now + Duration::hours(1)).await.unwrap(), "an id is never reused");
    assert_eq!(dir.load_session("a", now).await.unwrap().as_deref(), Some("{}"));
    assert!(dir.load_session("a", now + Duration::hours(2)).await.unwrap().is_none(), "expired");
    dir.save_session("b", "{\"k\":1}", now + Duration::hours(1)).await.unwrap();
    dir.delete_session("b").await.unwrap();
    assert!(dir.load_session("b", now).await.unwrap().is_none());
}

#[tokio::test]
async fn the_setup_token_makes_one_first_admin_once() {
    let (engine, _dir) = engine().await;
    let token = engine.identity().issue_setup_token().await.unwrap().expect("no user yet");
    assert!(engine.identity().setup_token_valid(&token).await.unwrap());
    assert!(!engine.identity().setup_token_valid("not-the-token").await.unwrap());
    // A bad password does not use the token up.
    assert!(matches!(engine.identity().complete_setup(&token, "root", "short").await, Err(EngineError::Invalid(_))));
    let first = engine.identity().complete_setup(&token, "root", "a good password").await.unwrap();
    assert!(first.instance_admin);
    assert!(matches!(
        engine.identity().complete_setup(&token, "root2", "a good password").await,
        Err(EngineError::Forbidden(_))
    ));
    assert_eq!(engine.identity().issue_setup_token().await.unwrap(), None, "there is a user now");
    let log = engine.directory().audit(None, None, 0, 10).await.unwrap();
    assert!(log.iter().any(|e| e.action == "user_created" && e.target.as_deref() == Some("root")));
}

#[tokio::test]
async fn keys_authenticate_until_revoked_and_are_stored_hashed() {
    let (engine, dir) = engine().await;
    engine.identity().create_project("team-a", &admin()).await.unwrap();
    let (key, secret) = engine.identity().create_key("ci", Some("team-a"), Role::Operator, &admin()).await.unwrap();
    assert!(secret.starts_with("rl_") && key.prefix.len() == 11 && secret.starts_with(&key.prefix));
    let found = engine.identity().authenticate_key(&secret).await.unwrap().expect("a live key");
    assert_eq!(
        (found.id.as_str(), found.role, found.project.as_deref()),
        (key.id.as_str(), Role::Operator, Some("team-a"))
    );
    assert!(found.last_used_at.is_some());
    assert!(engine.identity().authenticate_key("rl_nope").await.unwrap().is_none());
    assert!(matches!(
        engine.identity().create_key("x", Some("no-such-project"), Role::Viewer, &admin()).await,
        Err(EngineError::NotFound(_))
    ));

    // The secret itself is nowhere in the database.
    engine.traces().flush_events().await;
    if crate::support::on_postgres() {
        let rows =
            crate::support::sql_rows(&crate::support::db_url(&dir), "SELECT row_to_json(k)::text FROM api_keys k")
                .await;
        assert!(!rows.is_empty() && rows.iter().all(|r| !r[0].contains(&secret[3..])), "the key's secret is stored");
    } else {
        let bytes = std::fs::read(dir.path().join("runlens.db")).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&secret[3..]), "the key's secret is stored");
    }

    engine.identity().revoke_key(&key.id, &admin()).await.unwrap();
    assert!(engine.identity().authenticate_key(&secret).await.unwrap().is_none());
    assert!(matches!(engine.identity().revoke_key(&key.id, &admin()).await, Err(EngineError::Conflict(_))));

    // The bootstrap key is an instance-admin key, made once.
    let boot = format!("rl_{}", "ab".repeat(32));
    let made = engine.identity().ensure_bootstrap_key(&boot).await.unwrap();
    assert_eq!((made.project, made.role), (None, Role::Admin));
    assert_eq!(engine.identity().ensure_bootstrap_key(&boot).await.unwrap().id, made.id);
    assert!(engine.identity().ensure_bootstrap_key("rl_short").await.is_err());
}

#[tokio::test]
async fn a_projects_runs_approvals_emails_and_prices_are_its_own() {
    let (engine, _dir) = engine().await;
    engine.identity().create_project("team-b", &admin()).await.unwrap();
    assert!(matches!(engine.identity().create_project("team-b", &admin()).await, Err(EngineError::Conflict(_))));
    assert!(matches!(engine.identity().create_project("Team B", &admin()).await, Err(EngineError::Invalid(_))));
    let ada = crate::support::approver_in(&engine, "team-b", "ada").await;
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let req = scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]));

    let (theirs, _) = engine.runs().create_run_in(req.clone(), "team-b", Some(&ada)).await.unwrap();
    let (ours, _) = engine.runs().create_run_in(req, DEFAULT_PROJECT, None).await.unwrap();
    for id in [&theirs.id, &ours.id] {
        assert_eq!(engine.runs().wait_until_settled(id, SETTLE).await.unwrap().status, RunStatus::Paused);
    }
    let stored = engine.runs().get_run(&theirs.id).await.unwrap();
    assert_eq!((stored.project.as_str(), stored.created_by.as_ref()), ("team-b", Some(&ada)));
    assert_eq!(engine.runs().run_head(&theirs.id).await.unwrap().project, "team-b");

    let list = |p: &str| RunFilter { project: Some(p.into()), ..RunFilter::default() };
    let b_runs = engine.runs().list_runs(&list("team-b")).await.unwrap().runs;
    assert_eq!(b_runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [theirs.id.as_str()]);
    assert_eq!(engine.runs().list_runs(&list(DEFAULT_PROJECT)).await.unwrap().runs.len(), 1);
    assert_eq!(engine.approvals().pending_approvals(Some("team-b")).await.unwrap().len(), 1);
    assert_eq!(engine.approvals().pending_approvals(None).await.unwrap().len(), 2);

    // A client id taken in another project is a conflict, never the other run.
    let mut same_id = scripted(json!([{"text": "hi"}]));
    same_id.id = Some(theirs.id.clone());
    assert!(matches!(engine.runs().create_run_in(same_id, DEFAULT_PROJECT, None).await, Err(EngineError::Conflict(_))));

    let call = &stored.interruptions[0].call_id;
    let decided = engine.approvals().approve(&theirs.id, call, DecisionRequest::default(), &ada).await.unwrap();
    let record = decided.approval.unwrap();
    assert_eq!((record.decided_by.as_str(), record.decided_by_id.as_deref()), ("ada", Some(ada.id.as_str())));
    engine.runs().wait_until_settled(&theirs.id, SETTLE).await.unwrap();
    assert_eq!(engine.project_outbox("team-b", 10).await.unwrap().len(), 1);
    assert!(engine.project_outbox(DEFAULT_PROJECT, 10).await.unwrap().is_empty());

    // Prices: a new project starts with the built-in model's zero price only.
    let input = serde_json::from_value(json!({"input": 1.0, "output": 2.0})).unwrap();
    engine.traces().set_price("team-b", "gpt-x", input).await.unwrap();
    let names = |p: &'static str| {
        let engine = engine.clone();
        async move { engine.traces().pricing(p).await.unwrap().prices.into_iter().map(|p| p.model).collect::<Vec<_>>() }
    };
    assert_eq!(names("team-b").await, ["builtin", "gpt-x"]);
    assert_eq!(names(DEFAULT_PROJECT).await, ["builtin"]);

    // An import goes where it is told and records who imported it.
    let doc = engine.snapshots().export_state(&ours.id).await.unwrap();
    let opts = ImportOptions { project: Some("team-b".into()), by: Some(ada.clone()), ..ImportOptions::default() };
    let copy = engine.snapshots().import_state(&serde_json::to_value(doc).unwrap(), opts).await.unwrap();
    assert_eq!((copy.project.as_str(), copy.created_by.as_ref()), ("team-b", Some(&ada)));

    // The decision and the import are in the project's audit log, by ada.
    let log = engine.directory().audit(Some("team-b"), None, 0, 50).await.unwrap();
    let by_ada = |action: &str, target: &str| {
        log.iter().any(|e| e.action == action && e.actor == ada && e.target.as_deref() == Some(target))
    };
    assert!(by_ada("approved", &format!("{}/{call}", theirs.id)), "{log:?}");
    assert!(by_ada("imported", &copy.id), "{log:?}");
}

#[tokio::test]
async fn the_audit_log_pages_newest_first_per_project() {
    let (engine, _dir) = engine().await;
    engine.identity().create_project("p1", &admin()).await.unwrap();
    for i in 0..5 {
        engine.identity().audit(Some("p1"), &admin(), "cancelled", Some(&format!("run-{i}")), None).await;
    }
    engine.identity().audit(Some(DEFAULT_PROJECT), &admin(), "cancelled", Some("elsewhere"), None).await;
    // Instance-wide entries show in a project's log only when made by one of its members.
    let ada = engine.identity().create_user("ada", "a long password", false, &admin()).await.unwrap();
    let eve = engine.identity().create_user("eve", "a long password", false, &admin()).await.unwrap();
    engine.directory().set_member("p1", &ada.id, Role::Viewer).await.unwrap();
    engine.identity().audit(None, &runlens_engine::user_actor(&eve), "sign_in", Some("eve"), None).await;
    engine.identity().audit(None, &runlens_engine::user_actor(&ada), "sign_in", Some("ada"), None).await;
    let first = engine.directory().audit(Some("p1"), None, 0, 3).await.unwrap();
    let targets: Vec<_> = first.iter().map(|e| e.target.clone().unwrap()).collect();
    assert_eq!(targets, ["ada", "run-4", "run-3"], "the project's and its members', newest first");
    let all = engine.directory().audit(None, None, 0, 100).await.unwrap();
    assert!(all.iter().any(|e| e.target.as_deref() == Some("eve")), "the instance log has everything");
    let next = engine.directory().audit(Some("p1"), Some(first[2].seq), 0, 10).await.unwrap();
    let rest: Vec<_> = next.iter().map(|e| e.target.clone().unwrap()).collect();
    assert_eq!(rest, ["run-2", "run-1", "run-0", "p1"]);
    let skipped = engine.directory().audit(Some("p1"), None, 2, 2).await.unwrap();
    let skipped: Vec<_> = skipped.iter().map(|e| e.target.clone().unwrap()).collect();
    assert_eq!(skipped, ["run-3", "run-2"], "an offset skips the newest");
}
