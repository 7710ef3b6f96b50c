//! Approval requests and questions from agents runlens does not run: a
//! create is idempotent by its key (and refuses the key with another body),
//! a waiting reader wakes with the decision, edited arguments and reasons
//! reach it, a timeout rejects it with "timed out", racing decisions store
//! exactly one, "always" decides later requests of the tool in the same
//! agent run, a request naming a trace is shown in that trace's run (a
//! placeholder until spans arrive, then the assembled run), the pending
//! count follows, and a decision's callback is sent signed by the webhook
//! worker to a real receiver.

use std::time::Duration;

use runlens_engine::model::{
    AgentRequest, Decision, NewApprovalRequest, NewQuestion, RequestDecision, RequestKind, RequestStatus,
    RequestVerdict, RunStatus, TIMED_OUT,
};
use runlens_engine::tools::config::WebhooksConfig;
use runlens_engine::{Engine, EngineConfig, EngineError};
use serde_json::{json, Value};

use crate::otlp::{openinference_trace, request as otlp_request};
use crate::receiver::Receiver;
use crate::support::*;

fn approval(key: &str, args: Value) -> NewApprovalRequest {
    serde_json::from_value(json!({
        "tool": "send_email", "arguments": args, "context": "a refund",
        "run": {"external_id": "conv-1", "name": "Support agent"}, "idempotency_key": key,
    }))
    .unwrap()
}

fn approve(args: Option<Value>) -> (RequestVerdict, RequestDecision) {
    (RequestVerdict::Decide(Decision::Approved), RequestDecision { arguments: args, ..Default::default() })
}

fn reject(reason: &str) -> (RequestVerdict, RequestDecision) {
    (RequestVerdict::Decide(Decision::Rejected), RequestDecision { reason: Some(reason.into()), ..Default::default() })
}

async fn decide(engine: &Engine, r: &AgentRequest, (v, d): (RequestVerdict, RequestDecision)) -> AgentRequest {
    engine.requests().decide_request(r.kind, &r.id, v, d, &approver(engine, "ada").await).await.unwrap()
}

#[tokio::test]
async fn a_retry_with_the_same_key_returns_the_same_request_and_another_body_is_refused() {
    let (engine, _db) = engine().await;
    let agent = by("agent-key");
    let first = engine
        .requests()
        .create_approval_request("default", approval("k1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    assert!(first.created);
    assert_eq!(first.request.status, RequestStatus::Pending);
    assert!(first.request.id.starts_with("apr_"));
    assert_eq!(engine.requests().pending_request_count("default").await.unwrap(), 1);
    let again = engine
        .requests()
        .create_approval_request("default", approval("k1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.request, first.request);
    let other =
        engine.requests().create_approval_request("default", approval("k1", json!({"to": "b@x.io"})), &agent).await;
    assert!(matches!(other, Err(EngineError::Conflict(m)) if m.contains("different body")));
    // The same key in another project, or for a question, is another request.
    let elsewhere = engine
        .requests()
        .create_approval_request("other", approval("k1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    assert!(elsewhere.created && elsewhere.request.id != first.request.id);
    assert_eq!(engine.requests().pending_request_count("default").await.unwrap(), 1);
    assert_eq!(engine.requests().pending_request_count("other").await.unwrap(), 1);
    // A retry after the decision still answers with the (now decided) request.
    decide(&engine, &first.request, approve(None)).await;
    let late = engine
        .requests()
        .create_approval_request("default", approval("k1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    assert_eq!((late.created, late.request.status), (false, RequestStatus::Approved));
    assert_eq!(engine.requests().pending_request_count("default").await.unwrap(), 0);
}

#[tokio::test]
async fn a_waiting_reader_wakes_with_the_edited_arguments_or_the_reason() {
    let (engine, _db) = engine().await;
    let agent = by("agent-key");
    for (key, decision) in [("edit", approve(Some(json!({"to": "fixed@x.io"})))), ("no", reject("wrong customer"))] {
        let r = engine
            .requests()
            .create_approval_request("default", approval(key, json!({"to": "a@x.io"})), &agent)
            .await
            .unwrap();
        let id = r.request.id.clone();
        let waiter = {
            let engine = engine.clone();
            let id = id.clone();
            tokio::spawn(async move {
                engine.requests().wait_request(Some(RequestKind::Approval), &id, Duration::from_secs(30)).await
            })
        };
        // The waiter is pending until the decision (it cannot have seen one).
        tokio::task::yield_now().await;
        decide(&engine, &r.request, decision).await;
        let seen = waiter.await.unwrap().unwrap();
        let d = seen.decision.expect("the decision");
        assert_eq!(d.decided_by, "ada");
        match seen.status {
            RequestStatus::Approved => {
                assert_eq!(d.arguments, Some(json!({"to": "fixed@x.io"})));
                assert!(d.edited);
                assert_eq!(seen.arguments, Some(json!({"to": "a@x.io"})), "what was asked is kept");
            }
            RequestStatus::Rejected => {
                assert_eq!(d.reason.as_deref(), Some("wrong customer"));
                assert_eq!(d.arguments, None);
            }
            other => panic!("unexpected {other}"),
        }
    }
    // A short wait on an undecided request answers with it, pending.
    let r = engine.requests().create_approval_request("default", approval("wait", json!({})), &agent).await.unwrap();
    let seen = engine.requests().wait_request(None, &r.request.id, Duration::from_millis(50)).await.unwrap();
    assert_eq!(seen.status, RequestStatus::Pending);
}

#[tokio::test]
async fn a_timeout_rejects_with_timed_out_and_a_question_expires() {
    let (engine, _db) = engine().await;
    let agent = by("agent-key");
    let mut req = approval("t", json!({"to": "a@x.io"}));
    req.timeout_s = Some(1);
    let r = engine.requests().create_approval_request("default", req, &agent).await.unwrap().request;
    assert!(r.deadline.is_some());
    // The reader wakes at the deadline and finds it rejected.
    let seen = engine.requests().wait_request(None, &r.id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(seen.status, RequestStatus::Rejected);
    let d = seen.decision.unwrap();
    assert_eq!(
        (d.reason.as_deref(), d.decided_by.as_str(), d.decided_by_id.as_str()),
        (Some(TIMED_OUT), "runlens", "system")
    );
    let ada = approver(&engine, "ada").await;
    let late =
        engine.requests().decide_request(RequestKind::Approval, &r.id, approve(None).0, approve(None).1, &ada).await;
    assert!(matches!(late, Err(EngineError::Conflict(m)) if m.contains("already rejected by runlens")));

    let q: NewQuestion = serde_json::from_value(json!({"question": "Which plan?", "timeout_s": 1})).unwrap();
    let q = engine.requests().create_question("default", q, &agent).await.unwrap().request;
    assert_eq!(q.run.name, "agent-key", "a question without a run is shown by the key that asked");
    // The deadline task (not a reader) expires it.
    while engine.requests().expire_due().await.unwrap() == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let q = engine.requests().agent_request(Some(RequestKind::Question), &q.id).await.unwrap();
    assert_eq!(q.status, RequestStatus::Expired);
    assert_eq!(engine.requests().pending_request_count("default").await.unwrap(), 0);
}

#[tokio::test]
async fn racing_decisions_store_exactly_one() {
    let (engine, _db) = engine().await;
    let r = engine
        .requests()
        .create_approval_request("default", approval("race", json!({"to": "a@x.io"})), &by("k"))
        .await
        .unwrap();
    let mut people = Vec::new();
    for i in 0..12 {
        people.push(approver(&engine, &format!("person-{i}")).await);
    }
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (engine, person) = (engine.clone(), people[i].clone());
            let id = r.request.id.clone();
            tokio::spawn(async move {
                let (v, d) = if i % 2 == 0 {
                    approve(Some(json!({"to": format!("{i}@x.io")})))
                } else {
                    reject(&format!("no {i}"))
                };
                engine.requests().decide_request(RequestKind::Approval, &id, v, d, &person).await
            })
        })
        .collect();
    let mut won = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => won.push(r),
            Err(EngineError::Conflict(m)) => assert!(m.contains("was already"), "{m}"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one decision wins");
    let stored = engine.requests().agent_request(None, &r.request.id).await.unwrap();
    assert_eq!(stored.decision, won[0].decision);
    assert_eq!(engine.requests().pending_request_count("default").await.unwrap(), 0);
}

#[tokio::test]
async fn always_decides_the_tools_later_requests_in_the_same_agent_run() {
    let (engine, _db) = engine().await;
    let agent = by("k");
    let first = engine
        .requests()
        .create_approval_request("default", approval("a1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    let (v, mut d) = approve(None);
    d.always = true;
    engine
        .requests()
        .decide_request(RequestKind::Approval, &first.request.id, v, d, &approver(&engine, "ada").await)
        .await
        .unwrap();
    let second = engine
        .requests()
        .create_approval_request("default", approval("a2", json!({"to": "b@x.io"})), &agent)
        .await
        .unwrap();
    assert_eq!(second.request.status, RequestStatus::Approved);
    let d = second.request.decision.unwrap();
    assert!(d.always && d.decided_by == "ada");
    assert_eq!(d.arguments, Some(json!({"to": "b@x.io"})), "its own arguments, as asked");
    // Another agent run, or another tool, still asks.
    let mut other = approval("a3", json!({"to": "c@x.io"}));
    other.run.external_id = Some("conv-2".into());
    assert_eq!(
        engine.requests().create_approval_request("default", other, &agent).await.unwrap().request.status,
        RequestStatus::Pending
    );
    let mut tool = approval("a4", json!({}));
    tool.tool = "refund".into();
    assert_eq!(
        engine.requests().create_approval_request("default", tool, &agent).await.unwrap().request.status,
        RequestStatus::Pending
    );
    // The rule is the asking agent's: another key naming the same agent run
    // (and any arguments) still asks.
    let intruder = approval("a5", json!({"to": "evil@attacker.test"}));
    assert_eq!(
        engine.requests().create_approval_request("default", intruder, &by("other-key")).await.unwrap().request.status,
        RequestStatus::Pending
    );
}

#[tokio::test]
async fn an_always_rule_holds_while_its_approver_may_approve() {
    let (engine, _db) = engine().await;
    let agent = by("k");
    let first = engine
        .requests()
        .create_approval_request("default", approval("b1", json!({"to": "a@x.io"})), &agent)
        .await
        .unwrap();
    let (v, mut d) = approve(None);
    d.always = true;
    let ada = approver(&engine, "ada").await;
    engine.requests().decide_request(RequestKind::Approval, &first.request.id, v, d, &ada).await.unwrap();
    let key_id = ada.id.strip_prefix("key:").unwrap();
    engine.identity().revoke_key(key_id, &runlens_engine::model::Actor::system()).await.unwrap();
    let later = engine
        .requests()
        .create_approval_request("default", approval("b2", json!({"to": "b@x.io"})), &agent)
        .await
        .unwrap();
    assert_eq!(later.request.status, RequestStatus::Pending, "a revoked key's \"always\" decides nothing more");
    // Only an approver decides: an operator's decision is refused.
    let operator = {
        let (key, _) = engine
            .identity()
            .create_key("op", Some("default"), runlens_engine::model::Role::Operator, &by("admin"))
            .await
            .unwrap();
        runlens_engine::key_actor(&key)
    };
    let (v, d) = approve(None);
    let refused = engine.requests().decide_request(RequestKind::Approval, &later.request.id, v, d, &operator).await;
    assert!(matches!(refused, Err(EngineError::Forbidden(_))), "{refused:?}");
}

#[tokio::test]
async fn questions_take_an_answer_from_their_choices() {
    let (engine, _db) = engine().await;
    let q: NewQuestion =
        serde_json::from_value(json!({"question": "Which plan?", "choices": ["Team", "Enterprise"]})).unwrap();
    let q = engine.requests().create_question("default", q, &by("k")).await.unwrap().request;
    let ada = approver(&engine, "ada").await;
    let answer = |a: &str| RequestDecision { answer: Some(a.into()), ..Default::default() };
    let wrong = engine
        .requests()
        .decide_request(RequestKind::Question, &q.id, RequestVerdict::Answer, answer("Free"), &ada)
        .await;
    assert!(matches!(wrong, Err(EngineError::Invalid(m)) if m.contains("`Team`, `Enterprise`")));
    // An approval's verb on a question is "not found" (the id says which kind it is).
    let misdirected =
        engine.requests().decide_request(RequestKind::Approval, &q.id, approve(None).0, approve(None).1, &ada).await;
    assert!(matches!(misdirected, Err(EngineError::NotFound(_))));
    let done = engine
        .requests()
        .decide_request(RequestKind::Question, &q.id, RequestVerdict::Answer, answer("Team"), &ada)
        .await
        .unwrap();
    assert_eq!(done.status, RequestStatus::Answered);
    assert_eq!(done.decision.unwrap().answer.as_deref(), Some("Team"));
}

#[tokio::test]
async fn a_request_naming_a_trace_is_shown_in_that_traces_run() {
    let (engine, _db) = engine().await;
    let trace = [7u8; 16];
    let trace_hex: String = trace.iter().map(|b| format!("{b:02x}")).collect();
    let mut req = approval("tr", json!({"to": "a@x.io"}));
    req.run.trace_id = Some(trace_hex.clone());
    let r = engine.requests().create_approval_request("default", req, &by("k")).await.unwrap().request;
    let run_id = format!("default~trace~{trace_hex}");
    assert_eq!(r.run_id.as_deref(), Some(run_id.as_str()));
    // Before any span: a placeholder named after the agent's run.
    let placeholder = engine.runs().get_run(&run_id).await.unwrap();
    assert_eq!((placeholder.name.as_str(), placeholder.status), ("Support agent", RunStatus::Running));
    assert_eq!(placeholder.source.as_ref().map(|s| s.trace_id.as_str()), Some(trace_hex.as_str()));
    assert_eq!(engine.requests().run_requests(&run_id).await.unwrap().len(), 1);
    // The spans arrive: the run is assembled in place, and the request stays in it.
    let report =
        engine.otel().ingest_otlp("default", otlp_request("support", openinference_trace(trace))).await.unwrap();
    assert_eq!(report.runs, vec![run_id.clone()]);
    let run = engine.runs().get_run(&run_id).await.unwrap();
    assert!(run.step_count > 0);
    assert_eq!(engine.requests().run_requests(&run_id).await.unwrap()[0].id, r.id);
    // A second request of the trace joins the same run; in another project
    // the trace id is that project's own trace, another run.
    let mut again = approval("tr2", json!({}));
    again.run.trace_id = Some(trace_hex.clone());
    assert_eq!(
        engine.requests().create_approval_request("default", again.clone(), &by("k")).await.unwrap().request.run_id,
        Some(run_id.clone())
    );
    let theirs = engine.requests().create_approval_request("other", again, &by("k")).await.unwrap().request;
    assert_eq!(theirs.run_id, Some(format!("other~trace~{trace_hex}")));
    assert_eq!(engine.runs().get_run(&format!("other~trace~{trace_hex}")).await.unwrap().project, "other");
    assert_eq!(engine.requests().run_requests(&run_id).await.unwrap().len(), 2, "none joined this project's run");
}

#[tokio::test]
async fn a_decision_with_a_callback_is_posted_signed_by_the_webhook_worker() {
    let db = test_db();
    let config = EngineConfig {
        allow_private_networks: true,
        webhooks: WebhooksConfig { poll_ms: 50, ..WebhooksConfig::default() },
        ..EngineConfig::default()
    };
    let engine = Engine::with_parts(
        open_store(&db_url(&db)).await,
        test_tools(),
        runlens_engine::llm::ModelRegistry::with_builtin(),
        config,
    );
    let receiver = Receiver::start().await;
    let mut req = approval("cb", json!({"to": "a@x.io"}));
    req.callback_url = Some(receiver.url("/order"));
    // No run webhook secret yet: refused, with the way to make one.
    let refused = engine.requests().create_approval_request("default", req.clone(), &by("k")).await;
    assert!(matches!(refused, Err(EngineError::Invalid(m)) if m.contains("POST /api/webhooks/secret")));
    let (secret, _) = engine.webhooks().rotate_run_webhook_secret("default", None, &by("admin")).await.unwrap();
    receiver.trust(&secret.secret);
    let r = engine.requests().create_approval_request("default", req, &by("k")).await.unwrap().request;
    engine.start_webhooks();
    decide(&engine, &r, approve(Some(json!({"to": "b@x.io"})))).await;
    let seen = loop {
        if let Some(s) = receiver.seen().into_iter().find(|s| s.path == "/order") {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(seen.verified, Ok(()));
    assert_eq!(seen.body["type"], "approval_request.decided");
    assert_eq!(seen.body["request"]["id"], json!(r.id));
    assert_eq!(seen.body["request"]["decision"]["arguments"], json!({"to": "b@x.io"}));
    assert_eq!(seen.headers["runlens-idempotency-key"].to_str().unwrap(), seen.body["delivery_id"].as_str().unwrap());
}
