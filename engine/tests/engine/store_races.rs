//! The store under concurrent writers, on whichever backend the suite runs
//! on (each test opens its database twice, as two servers would): the caps
//! on webhook subscriptions and HTTP tools, agent names and versions, and
//! webhook workers fanning out each status change once and sending each
//! delivery once, a run's deliveries to one target in change order.
//! PostgreSQL takes these writes side by side; SQLite, one writer at a time,
//! must keep the same contract.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use runlens_engine::model::{Actor, Agent, AgentSpec, DeliveryState, HttpTool, RunStatus, Webhook};
use runlens_engine::store::{AgentInsert, AttemptWrite, HttpToolWrite, NewDelivery, Settle, Store, StoredHttpTool};
use serde_json::json;

use crate::support::{db_url, open_store, sql, sql_rows, test_db, TestDb};

/// Now, to the millisecond the stores keep.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
}

/// A fresh database opened twice (two pools, as two servers), its URL and guard.
async fn two_stores() -> ([Arc<dyn Store>; 2], String, TestDb) {
    let db = test_db();
    let url = db_url(&db);
    let first = open_store(&url).await;
    let second = open_store(&url).await;
    ([first, second], url, db)
}

/// Counts the outcomes (by their `Debug` names) of spawned tasks.
async fn outcomes<T: std::fmt::Debug>(tasks: Vec<tokio::task::JoinHandle<T>>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for t in tasks {
        *counts.entry(format!("{:?}", t.await.unwrap())).or_insert(0) += 1;
    }
    counts
}

fn hook(id: &str, project: &str) -> Webhook {
    Webhook {
        id: id.into(),
        project: project.into(),
        url: "https://example.com/h".into(),
        statuses: None,
        description: Some("d".into()),
        created_at: now(),
        created_by: None,
        secret_rotated_at: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn webhook_cap_and_secrets_hold_under_concurrent_writes() {
    let (stores, _url, _db) = two_stores().await;
    let s = stores[0].webhooks();
    assert!(!s.put_run_secret("p", "s1", now(), now()).await.unwrap());
    assert!(s.put_run_secret("p", "s2", now(), now()).await.unwrap());
    let sec = s.run_secret("p").await.unwrap().unwrap();
    assert_eq!((sec.current.as_str(), sec.previous.as_deref()), ("s2", Some("s1")));

    // At most 3 subscriptions per project under concurrent inserts.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            store.webhooks().insert_webhook(&hook(&format!("wh_{i}"), "p"), "x", 3).await.unwrap()
        }));
    }
    assert_eq!(outcomes(tasks).await.get("true"), Some(&3));
    let mut w = hook("wh_s", "q");
    w.statuses = Some(vec![RunStatus::Done]);
    assert!(s.insert_webhook(&w, "x", 3).await.unwrap());
    assert_eq!(s.webhook("wh_s").await.unwrap().unwrap().statuses, Some(vec![RunStatus::Done]));
    assert_eq!(s.webhooks("p", 0, 10).await.unwrap().len(), 3);
    assert!(s.rotate_webhook_secret("wh_s", "y", now(), now()).await.unwrap());
    assert_eq!(s.webhook_secrets("wh_s").await.unwrap().unwrap().previous.as_deref(), Some("x"));
    assert!(s.delete_webhook("wh_s", "gone", now()).await.unwrap());
    assert!(!s.delete_webhook("wh_s", "gone", now()).await.unwrap());
}

fn http_tool(name: &str) -> StoredHttpTool {
    StoredHttpTool {
        tool: HttpTool {
            name: name.into(),
            project: "p".into(),
            description: "d".into(),
            schema: json!({"type": "object", "b": 1, "a": [1.5, "x"]}),
            url: "https://example.com".into(),
            header_names: vec!["x-a".into()],
            timeout_ms: 1000,
            idempotent: true,
            requires_approval: false,
            created_at: now(),
            updated_at: now(),
            updated_by: Some(Actor { id: "u".into(), name: "U".into() }),
            secret_created_at: now(),
        },
        headers: BTreeMap::from([("x-a".to_string(), "v".to_string())]),
        secret: "sec".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn http_tool_cap_holds_under_concurrent_inserts() {
    let (stores, _url, _db) = two_stores().await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = stores[i % 2].clone();
        let t = http_tool(&format!("t{i}"));
        tasks.push(tokio::spawn(async move { store.http_tools().insert_http_tool(&t, 3).await.unwrap() }));
    }
    let counts = outcomes(tasks).await;
    assert_eq!(counts.get("Saved"), Some(&3), "{counts:?}");
    let s = stores[1].http_tools();
    let listed = s.http_tools("p", None, 0, 10).await.unwrap();
    assert_eq!(listed.len(), 3);
    let back = s.http_tool("p", &listed[0].tool.name).await.unwrap().unwrap();
    let mut expected = http_tool(&listed[0].tool.name);
    expected.tool.created_at = back.tool.created_at;
    expected.tool.updated_at = back.tool.updated_at;
    expected.tool.secret_created_at = back.tool.secret_created_at;
    assert_eq!(back, expected);
    assert_eq!(s.insert_http_tool(&back, 10).await.unwrap(), HttpToolWrite::NameTaken);
    assert_eq!(s.update_http_tool(&back).await.unwrap(), HttpToolWrite::Saved);
    assert_eq!(s.update_http_tool(&http_tool("nope")).await.unwrap(), HttpToolWrite::NotFound);
    assert_eq!(s.every_http_tool().await.unwrap().len(), 3);
    assert!(s.delete_http_tool("p", &back.tool.name).await.unwrap());
}

fn agent(id: &str, name: &str, version: u32) -> Agent {
    Agent {
        id: id.into(),
        project: "p".into(),
        version,
        created_at: now(),
        updated_at: now(),
        updated_by: None,
        spec: AgentSpec { name: name.into(), ..AgentSpec::default() },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn agent_names_and_versions_hold_under_concurrent_writes() {
    let (stores, _url, _db) = two_stores().await;
    // One name, many concurrent inserts (6 ids, each twice): one is saved.
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = stores[i % 2].clone();
        let a = agent(&format!("ag_{}", i % 6), "same", 1);
        tasks.push(tokio::spawn(async move { store.agents().insert_agent(&a).await.unwrap() }));
    }
    let counts = outcomes(tasks).await;
    assert_eq!(counts.get("Saved"), Some(&1), "{counts:?}");
    let s = stores[0].agents();
    let saved = s.agents("p", None, 0, 10).await.unwrap();
    assert_eq!(saved.len(), 1);
    let first = saved[0].id.clone();
    assert_eq!(s.insert_agent(&agent(&first, "other", 1)).await.unwrap(), AgentInsert::IdTaken);
    assert_eq!(s.insert_agent(&agent("ag_x", "other", 1)).await.unwrap(), AgentInsert::Saved);

    // Concurrent updates from version 1: one wins.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = stores[i % 2].clone();
        let a = agent(&first, &format!("same{i}"), 2);
        tasks.push(tokio::spawn(async move { store.agents().update_agent(&a).await.unwrap() }));
    }
    let counts = outcomes(tasks).await;
    assert_eq!(counts.get("Saved"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("VersionMoved"), Some(&7), "{counts:?}");
    assert_eq!(s.update_agent(&agent(&first, "other", 3)).await.unwrap(), AgentInsert::NameTaken);
    assert_eq!(s.update_agent(&agent(&first, "other", 9)).await.unwrap(), AgentInsert::NameTaken);
    assert_eq!(s.update_agent(&agent(&first, "fresh", 9)).await.unwrap(), AgentInsert::VersionMoved);

    // Two agents renamed onto one new name at once (through either pool): one wins.
    let (a, b) = (stores[0].clone(), stores[1].clone());
    let f = first.clone();
    let ra = tokio::spawn(async move { a.agents().update_agent(&agent(&f, "race", 3)).await.unwrap() });
    let rb = tokio::spawn(async move { b.agents().update_agent(&agent("ag_x", "race", 2)).await.unwrap() });
    let mut got = [format!("{:?}", ra.await.unwrap()), format!("{:?}", rb.await.unwrap())];
    got.sort();
    assert_eq!(got, ["NameTaken", "Saved"]);

    let got = s.agent(&first).await.unwrap().unwrap();
    assert!(got.version >= 2);
    assert_eq!(s.agent_versions(&first, None, 10).await.unwrap().len() as u32, got.version);
    assert!(s.agent_version(&first, 1).await.unwrap().is_some());
    let names: Vec<String> = s.agents("p", None, 0, 10).await.unwrap().into_iter().map(|a| a.spec.name).collect();
    assert_eq!(names.len(), 2);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    let after: Vec<String> =
        s.agents("p", Some(&names[0]), 0, 10).await.unwrap().into_iter().map(|a| a.spec.name).collect();
    assert_eq!(after, names[1..]);
    assert!(s.agent_run_sums(&first).await.unwrap().is_empty());
    assert!(stores[1].http_tools().agent_named("p", "race").await.unwrap());
}

/// A delivery a worker sent: its run, target, change and id.
type Sent = (String, String, u64, String);

/// The change a delivery id made below belongs to (`d_{seq}_{target}_{worker}`).
fn seq_of(delivery_id: &str) -> u64 {
    delivery_id.split('_').nth(1).and_then(|s| s.parse().ok()).expect("a delivery id made below")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn workers_fan_out_once_and_send_each_delivery_once_in_order() {
    let (stores, url, _db) = two_stores().await;
    let runs = 6;
    let changes_per_run = 8;
    for r in 0..runs {
        sql(
            &url,
            &[&format!(
                r#"INSERT INTO runs (id, name, status, model, model_settings, initial_prompt, tools, tags, context,
                    max_turns, created_at, updated_at, project, on_status_change, result)
                 VALUES ('run_{r}', 'n', 'pending', 'm', '{{}}', 'p', '[]', '{{"k": "v"}}', '{{}}', 1, 0, 0, 'p',
                    '{{"url": "https://example.com"}}', '{{"b": 1, "a": 2}}')"#
            )],
        )
        .await;
    }
    // Runs change status concurrently with the workers below, each on a
    // connection of its own (driven by this task: the raw SQL helper's
    // future is not `Send`, so it cannot be spawned).
    let sent: Arc<Mutex<Vec<Sent>>> = Default::default();
    let changed = Arc::new(AtomicBool::new(false));
    let changing = async {
        let changers = (0..runs).map(|r| {
            let url = &url;
            async move {
                for i in 0..changes_per_run {
                    tokio::time::sleep(Duration::from_millis(4)).await;
                    let st = if i % 2 == 0 { "running" } else { "paused" };
                    sql(url, &[&format!("UPDATE runs SET status = '{st}' WHERE id = 'run_{r}'")]).await;
                }
            }
        });
        futures::future::join_all(changers).await;
        changed.store(true, Ordering::SeqCst);
    };
    let working = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let all = loop {
            let all = stores[0].webhooks().status_changes(1000).await.unwrap();
            if !all.is_empty() {
                break all;
            }
            assert!(tokio::time::Instant::now() < deadline, "no status change captured");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let tags: serde_json::Value = serde_json::from_str(&all[0].run_tags).unwrap();
        assert_eq!(tags, json!({"k": "v"}));
        let result: serde_json::Value = serde_json::from_str(all[0].result.as_deref().unwrap()).unwrap();
        assert_eq!(result, json!({"a": 2, "b": 1}));

        // Several workers, on both pools, fan out and deliver at once, two
        // targets per change; they stop once the changes are all made and
        // nothing is left for them.
        let mut workers = Vec::new();
        for w in 0..6 {
            let store = stores[w % 2].clone();
            let sent = sent.clone();
            let changed = changed.clone();
            workers.push(tokio::spawn(async move {
                let s = store.webhooks();
                let claim = format!("claim_{w}");
                let mut idle = 0;
                loop {
                    let mut worked = false;
                    for c in s.status_changes(7).await.unwrap() {
                        let ds: Vec<NewDelivery> = ["run", "sub"]
                            .iter()
                            .map(|t| NewDelivery {
                                id: format!("d_{}_{t}_{w}", c.seq),
                                run_id: c.run_id.clone(),
                                project: c.project.clone(),
                                subscription_id: (*t == "sub").then(|| "wh_1".to_string()),
                                change_seq: c.seq,
                                url: "https://example.com".into(),
                                old_status: c.old_status,
                                new_status: c.new_status,
                                changed_at: c.at,
                                payload: format!("{{\"seq\": {} , \"x\":\"\u{e9}\"}}", c.seq),
                                refused: None,
                            })
                            .collect();
                        worked |= s.fan_out(c.seq, &ds, now()).await.unwrap();
                    }
                    let until = now() + chrono::Duration::seconds(60);
                    let claimed = s.claim_deliveries(now(), until, &claim, 3).await.unwrap();
                    for d in &claimed {
                        let seq = seq_of(&d.id);
                        let target = d.subscription_id.clone().unwrap_or("run".into());
                        sent.lock().unwrap().push((d.run_id.clone(), target, seq, d.id.clone()));
                        assert!(d.payload.ends_with("\"x\":\"\u{e9}\"}"), "{}", d.payload);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        let a = AttemptWrite { at: now(), status_code: Some(200), latency_ms: 2, error: None };
                        // Every third first attempt is retried right away.
                        let settle = if seq.is_multiple_of(3) && d.attempts == 0 {
                            Settle::Retry(now())
                        } else {
                            Settle::Delivered
                        };
                        s.record_attempt(&d.id, &claim, &a, &settle).await.unwrap();
                    }
                    worked |= !claimed.is_empty();
                    if worked {
                        idle = 0;
                        continue;
                    }
                    idle += 1;
                    if idle >= 20 && changed.load(Ordering::SeqCst) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
    };
    tokio::join!(changing, working);

    let s = stores[1].webhooks();
    let sent = sent.lock().unwrap().clone();
    // Each change fanned out once (two deliveries), each delivered, after a
    // second attempt when its change's seq is a multiple of 3.
    let mut stored = Vec::new();
    for r in 0..runs {
        let ds = s.run_deliveries(&format!("run_{r}"), 0, 100, 1).await.unwrap();
        assert_eq!(ds.len(), changes_per_run * 2, "run_{r}: each change fanned out once");
        stored.extend(ds);
    }
    for d in &stored {
        let attempts = if seq_of(&d.id).is_multiple_of(3) { 2 } else { 1 };
        assert_eq!((d.state, d.attempt_count), (DeliveryState::Delivered, attempts), "{}", d.id);
        assert_eq!(d.attempts.iter().map(|a| a.number).collect::<Vec<_>>(), [attempts], "{}", d.id);
    }
    assert!(stored.iter().any(|d| d.attempt_count == 2), "some delivery was retried");
    let retried = sent.iter().filter(|(_, _, seq, _)| seq.is_multiple_of(3)).count() / 2;
    assert_eq!(sent.len(), runs * changes_per_run * 2 + retried, "each delivery sent once (plus its retry)");
    // Per run and target, sends follow change order.
    let mut last: HashMap<(String, String), u64> = HashMap::new();
    let mut seen = HashSet::new();
    for (run, target, seq, id) in &sent {
        let prev = last.insert((run.clone(), target.clone()), *seq).unwrap_or(0);
        assert!(
            *seq > prev || (*seq == prev && seq.is_multiple_of(3) && seen.contains(id)),
            "{run} {target}: {seq} after {prev}"
        );
        seen.insert(id.clone());
    }
    assert_eq!(s.next_delivery_due().await.unwrap(), None);
    assert_eq!(s.pending_deliveries("p").await.unwrap(), 0);
    // On PostgreSQL one pruner at a time takes a lock of the whole database
    // (another test's schema may hold it): a pruner finding it taken prunes
    // nothing, and tries again later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut pruned = 0;
    while pruned < runs * changes_per_run * 2 {
        assert!(tokio::time::Instant::now() < deadline, "pruned {pruned} deliveries");
        pruned += s.prune_deliveries(now() + chrono::Duration::seconds(1)).await.unwrap() as usize;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(pruned, runs * changes_per_run * 2);
    assert_eq!(sql_rows(&url, "SELECT CAST(count(*) AS TEXT) FROM webhook_attempts").await, [["0"]]);
}
