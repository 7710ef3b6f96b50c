//! `POST /api/agui`: AG-UI's RunAgentInput in, AG-UI events out — a
//! tool-calling run's whole sequence, an approval interrupt and its resume
//! (approve, reject, edited arguments), a follow-up on a done thread, and
//! the 4xx answers that change nothing (bad input, no key, another
//! project's thread, a thread in the wrong state).

use axum::http::{header, Method, StatusCode};
use runlens_engine::model::Role;
use serde_json::{json, Value};

use crate::support::{app, App, Reply};

/// Sends `body` to `POST /api/agui` with the admin key.
async fn post(app: &App, body: &Value) -> Reply {
    app.post_json("/api/agui", &body.to_string()).await
}

/// The AG-UI events of a whole stream (it ends by itself).
fn read(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(reply.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    reply.text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": text})
}

fn input(thread: &str, run: &str, messages: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": messages, "tools": [], "context": [], "state": {},
           "forwardedProps": {}})
}

/// Checks what AG-UI requires of a run's events: RUN_STARTED first, one
/// terminal event last, and every message, call and step opened is closed.
fn assert_balanced(events: &[Value]) {
    assert_eq!(events[0]["type"], "RUN_STARTED", "{events:#?}");
    let mut open: Vec<String> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let ty = e["type"].as_str().unwrap();
        let key = |field: &str| format!("{}:{}", field, e[field].as_str().unwrap());
        match ty {
            "TEXT_MESSAGE_START" => open.push(key("messageId")),
            "TOOL_CALL_START" => open.push(key("toolCallId")),
            "STEP_STARTED" => open.push(key("stepName")),
            "TEXT_MESSAGE_CONTENT" | "TOOL_CALL_ARGS" => {
                let k = if ty == "TOOL_CALL_ARGS" { key("toolCallId") } else { key("messageId") };
                assert!(open.contains(&k), "{ty} of nothing open at {i}: {events:#?}");
            }
            "TEXT_MESSAGE_END" | "TOOL_CALL_END" | "STEP_FINISHED" => {
                let k = match ty {
                    "TEXT_MESSAGE_END" => key("messageId"),
                    "TOOL_CALL_END" => key("toolCallId"),
                    _ => key("stepName"),
                };
                let at =
                    open.iter().position(|o| *o == k).unwrap_or_else(|| panic!("{ty} of {k} not open: {events:#?}"));
                open.remove(at);
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                assert_eq!(i, events.len() - 1, "{events:#?}");
                assert!(open.is_empty(), "{open:?} still open at the end: {events:#?}");
            }
            _ => {}
        }
    }
    assert!(matches!(types(events).last(), Some(&"RUN_FINISHED" | &"RUN_ERROR")), "{events:#?}");
}

/// What the built-in model answers to `What is (12 + 30) * 2?`.
const ANSWER: &str = "Here is what I found:\n- (12 + 30) * 2 = 84";

const EMAIL: &str = r#"Please send email {"to": "ops@example.com", "subject": "hi", "body": "hello"}"#;

#[tokio::test]
async fn a_tool_calling_run_streams_the_whole_sequence() {
    let app = app().await;
    let reply = post(&app, &input("agui-calc", "r1", json!([user("u1", "What is (12 + 30) * 2?")]))).await;
    let events = read(&reply);
    assert_balanced(&events);
    let got = types(&events);
    assert_eq!(
        got,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "STEP_FINISHED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
        ]
        .iter()
        .chain(std::iter::repeat_n(&"TEXT_MESSAGE_CONTENT", got.len() - 12))
        .chain(&["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"])
        .copied()
        .collect::<Vec<_>>(),
        "{events:#?}"
    );
    assert_eq!(events[0], json!({"type": "RUN_STARTED", "threadId": "agui-calc", "runId": "r1"}));
    assert_eq!(events[1]["stepName"], "turn 0");
    assert_eq!(events[2]["toolCallName"], "calculator");
    assert_eq!(events[2]["parentMessageId"], "agui-calc:s0");
    let args: Value = serde_json::from_str(events[3]["delta"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"expression": "(12 + 30) * 2"}));
    assert_eq!(events[5]["toolCallId"], events[2]["toolCallId"]);
    let result: Value = serde_json::from_str(events[5]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["value"], 84);
    assert_eq!(events[5]["role"], "tool");
    let text: String =
        events.iter().filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT").map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(text, ANSWER);
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"], json!({"type": "success"}));
    assert_eq!(finished["result"], ANSWER);
    assert_eq!((finished["threadId"].as_str(), finished["runId"].as_str()), (Some("agui-calc"), Some("r1")));

    // The thread is a run of the caller's project, marked as AG-UI's.
    let run = app.get("/api/runs/default~thread~agui-calc").await.json();
    assert_eq!(run["status"], "done");
    assert_eq!(run["project"], "default");
    assert_eq!(run["metadata"], json!({"protocol": "ag-ui"}));
}

#[tokio::test]
async fn a_done_thread_takes_a_follow_up_and_earlier_messages_seed_a_new_one() {
    let app = app().await;
    let first = input("agui-chat", "r1", json!([user("u1", "What is 7 * 6?")]));
    assert_balanced(&read(&post(&app, &first).await));
    // The client sends the whole thread again, with the new message last.
    let second = input(
        "agui-chat",
        "r2",
        json!([user("u1", "What is 7 * 6?"), {"id": "a1", "role": "assistant", "content": "7 * 6 = 42"},
               user("u2", "And 2 ^ 10?")]),
    );
    let events = read(&post(&app, &second).await);
    assert_balanced(&events);
    assert_eq!(events[0]["runId"], "r2");
    let finished = events.last().unwrap();
    assert!(finished["result"].as_str().unwrap().ends_with("2 ^ 10 = 1024"), "{events:#?}");
    // The follow-up continued the run: its second human message, new steps after the first ones.
    let messages = app.get("/api/runs/default~thread~agui-chat/messages").await.json();
    let humans: Vec<&str> = (messages["messages"].as_array().unwrap().iter())
        .filter(|m| m["type"] == "human")
        .map(|m| m["data"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(humans, ["What is 7 * 6?", "And 2 ^ 10?"]);
    assert!(events.iter().any(|e| e["type"] == "STEP_STARTED" && e["stepName"] != "turn 0"), "{events:#?}");

    // A new thread's earlier messages, system prompt and context seed its run.
    let seeded = json!({"threadId": "agui-seeded", "runId": "r1", "messages": [
        {"id": "s", "role": "system", "content": "Answer briefly."},
        user("u1", "What is 1 + 1?"), {"id": "a1", "role": "assistant", "content": "2"},
        user("u2", "What is 3 * 3?"),
    ], "context": [{"description": "units", "value": "metric"}], "state": {"step": 1}});
    let events = read(&post(&app, &seeded).await);
    assert!(events.last().unwrap()["result"].as_str().unwrap().ends_with("3 * 3 = 9"));
    let run = app.get("/api/runs/default~thread~agui-seeded").await.json();
    assert_eq!(run["system_prompt"], "Answer briefly.\n\nContext:\n- units: metric");
    assert_eq!(
        run["context"],
        json!({"ag_ui": {"context": [{"description": "units", "value": "metric"}], "state": {"step": 1}}})
    );
    let messages = app.get("/api/runs/default~thread~agui-seeded/messages").await.json();
    let kinds: Vec<&str> =
        messages["messages"].as_array().unwrap().iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(&kinds[..3], ["human", "agent", "human"]);
}

/// Runs `EMAIL` on `thread` up to its interrupt; returns the interrupt.
async fn interrupted(app: &App, thread: &str) -> Value {
    let events = read(&post(app, &input(thread, "r1", json!([user("u1", EMAIL)]))).await);
    assert_balanced(&events);
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ],
        "{events:#?}"
    );
    let outcome = &events.last().unwrap()["outcome"];
    assert_eq!(outcome["type"], "interrupt", "{events:#?}");
    let interrupts = outcome["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1);
    let interrupt = interrupts[0].clone();
    assert_eq!(interrupt["id"], events[2]["toolCallId"]);
    assert_eq!(interrupt["toolCallId"], events[2]["toolCallId"]);
    assert_eq!(interrupt["reason"], "tool_approval");
    assert_eq!(interrupt["metadata"]["toolName"], "send_email");
    assert_eq!(interrupt["metadata"]["arguments"]["to"], "ops@example.com");
    assert_eq!(app.get(&format!("/api/runs/default~thread~{thread}")).await.json()["status"], "paused");
    interrupt
}

fn resume(thread: &str, run: &str, entries: Value) -> Value {
    let mut body = input(thread, run, json!([user("u1", EMAIL)]));
    body["resume"] = entries;
    body
}

#[tokio::test]
async fn an_approval_interrupts_and_a_decision_resumes() {
    let app = app().await;
    // Approve, with edited arguments.
    let interrupt = interrupted(&app, "agui-approve").await;
    let id = interrupt["id"].as_str().unwrap();
    // Without a decision the paused thread is a 409.
    let reply = post(&app, &input("agui-approve", "r2", json!([user("u1", EMAIL)]))).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    let entries = json!([{"interruptId": id, "status": "resolved",
        "payload": {"approved": true, "arguments": {"to": "boss@example.com", "subject": "hi", "body": "hello"}}}]);
    let events = read(&post(&app, &resume("agui-approve", "r2", entries)).await);
    assert_balanced(&events);
    assert_eq!(events[0]["runId"], "r2");
    assert_eq!(events[1]["type"], "TOOL_CALL_RESULT", "{events:#?}");
    assert_eq!(events[1]["toolCallId"], id);
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success", "{events:#?}");
    let call = app.get(&format!("/api/runs/default~thread~agui-approve/tool-calls/{id}")).await.json();
    assert_eq!(
        (call["status"].as_str(), call["arguments"]["to"].as_str()),
        (Some("succeeded"), Some("boss@example.com"))
    );
    let outbox = app.get("/api/outbox").await.json();
    assert_eq!(outbox["emails"][0]["to"], "boss@example.com");
    assert_eq!(app.get("/api/runs/default~thread~agui-approve").await.json()["status"], "done");

    // Reject, with a reason the model is told.
    let interrupt = interrupted(&app, "agui-reject").await;
    let id = interrupt["id"].as_str().unwrap();
    let entries =
        json!([{"interruptId": id, "status": "resolved", "payload": {"approved": false, "reason": "not now"}}]);
    let events = read(&post(&app, &resume("agui-reject", "r2", entries)).await);
    assert_balanced(&events);
    let result = events.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").unwrap();
    assert!(result["content"].as_str().unwrap().contains("not now"), "{result}");
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success");
    let call = app.get(&format!("/api/runs/default~thread~agui-reject/tool-calls/{id}")).await.json();
    assert_eq!(call["status"], "rejected");
    assert_eq!(app.get("/api/outbox").await.json()["emails"].as_array().unwrap().len(), 1);

    // A cancelled entry rejects; an entry naming no pending call is ignored,
    // and a call left undecided is asked about again.
    let interrupt = interrupted(&app, "agui-cancel").await;
    let id = interrupt["id"].as_str().unwrap();
    let events =
        read(&post(&app, &resume("agui-cancel", "r2", json!([{"interruptId": "nope", "status": "cancelled"}]))).await);
    assert_eq!(types(&events), ["RUN_STARTED", "RUN_FINISHED"]);
    assert_eq!(events[1]["outcome"]["interrupts"][0]["id"], id);
    let events =
        read(&post(&app, &resume("agui-cancel", "r3", json!([{"interruptId": id, "status": "cancelled"}]))).await);
    assert_balanced(&events);
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success");
    assert_eq!(
        app.get(&format!("/api/runs/default~thread~agui-cancel/tool-calls/{id}")).await.json()["status"],
        "rejected"
    );
}

#[tokio::test]
async fn bad_input_is_a_4xx_and_changes_nothing() {
    let app = app().await;
    let ok = input("agui-bad", "r1", json!([user("u1", "What is 1 + 1?")]));
    let mut cases: Vec<(Value, &str)> = vec![
        (json!({"runId": "r", "messages": []}), "threadId"),
        (json!({"threadId": "t", "messages": []}), "runId"),
        (json!({"threadId": "a b", "runId": "r", "messages": []}), "threadId"),
        (json!({"threadId": "import", "runId": "r", "messages": []}), "threadId"),
        (json!({"threadId": "t", "runId": "", "messages": []}), "runId"),
        (json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot", "content": "x"}]}), "robot"),
        (json!({"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": "x"}]}), "id"),
        (input("agui-bad", "r1", json!([])), "messages"),
        (input("agui-bad", "r1", json!([{"id": "a", "role": "assistant", "content": "hi"}])), "messages[0]"),
        (input("agui-bad", "r1", json!([user("u1", "   ")])), "messages[0].content"),
        (input("agui-bad", "r1", json!([user("u1", &"x".repeat(256 * 1024 + 1))])), "messages[0].content"),
    ];
    let mut bad_resume = ok.clone();
    bad_resume["resume"] = json!([{"interruptId": "c", "status": "resolved"}]);
    cases.push((bad_resume, "resume[0].payload"));
    let mut twice = ok.clone();
    twice["resume"] = json!([{"interruptId": "c", "status": "cancelled"}, {"interruptId": "c", "status": "cancelled"}]);
    cases.push((twice, "resume[1].interruptId"));
    let mut big_state = ok.clone();
    big_state["state"] = json!({"x": "y".repeat(70 * 1024)});
    cases.push((big_state, "context and state"));
    for (body, names) in cases {
        let reply = post(&app, &body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(names), "{names}: {}", reply.text);
    }
    let reply = app.send(Method::POST, "/api/agui", Some(&ok.to_string()), "text/plain").await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(app.get("/api/runs?all=true").await.json()["runs"], json!([]));

    // No key: 401, nothing created.
    let reply = app.send_with(Method::POST, "/api/agui", Some(&ok.to_string()), "application/json", &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    assert_eq!(app.get("/api/runs?all=true").await.json()["runs"], json!([]));
}

#[tokio::test]
async fn threads_belong_to_their_project_and_roles_apply() {
    let app = app().await;
    assert_balanced(&read(&post(&app, &input("agui-mine", "r1", json!([user("u1", "What is 2 + 2?")]))).await));
    // A user of another project cannot see the thread: the same thread id
    // is her own thread there.
    app.engine.identity().create_project("other", &runlens_engine::model::Actor::system()).await.unwrap();
    app.user("olga", Some(("other", Role::Admin)), false).await;
    let cookie = app.session("olga").await;
    let send = |body: Value, cookie: String| {
        let app = &app;
        async move {
            let headers =
                [("cookie", cookie.as_str()), ("origin", crate::support::ORIGIN), ("host", crate::support::HOST)];
            app.send_with(Method::POST, "/api/agui", Some(&body.to_string()), "application/json", &headers).await
        }
    };
    let mine = app.get("/api/runs/default~thread~agui-mine/messages").await.json();
    let follow_up = input("agui-mine", "r2", json!([user("u1", "What is 2 + 2?"), user("u2", "And 3 + 3?")]));
    let reply = send(follow_up.clone(), cookie.clone()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_balanced(&read(&reply));
    assert_eq!(app.get("/api/runs/other~thread~agui-mine").await.json()["project"], "other");
    assert_eq!(app.get("/api/runs/default~thread~agui-mine/messages").await.json(), mine, "hers changed nothing here");
    // A session's request from another origin is refused.
    let headers = [("cookie", cookie.as_str()), ("origin", "https://evil.example"), ("host", crate::support::HOST)];
    let body = input("agui-evil", "r1", json!([user("u1", "hi")])).to_string();
    let reply = app.send_with(Method::POST, "/api/agui", Some(&body), "application/json", &headers).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    // Olga's own thread lands in her project.
    let reply = send(input("agui-olga", "r1", json!([user("u1", "What is 5 + 5?")])), cookie.clone()).await;
    assert_balanced(&read(&reply));
    assert_eq!(app.get("/api/runs/other~thread~agui-olga").await.json()["project"], "other");

    // A viewer may not start a thread, nor an operator decide an interrupt.
    app.user("vic", Some(("default", Role::Viewer)), false).await;
    let reply = send(input("agui-vic", "r1", json!([user("u1", "hi")])), app.session("vic").await).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    let interrupt = interrupted(&app, "agui-ops").await;
    app.user("otto", Some(("default", Role::Operator)), false).await;
    let entries = json!([{"interruptId": interrupt["id"], "status": "resolved", "payload": true}]);
    let reply = send(resume("agui-ops", "r2", entries), app.session("otto").await).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    assert_eq!(app.get("/api/runs/default~thread~agui-ops").await.json()["status"], "paused");
    let _ = follow_up;
}

#[tokio::test]
async fn a_thread_id_another_project_used_first_is_still_free_in_this_one() {
    let app = app().await;
    app.engine.identity().create_project("other", &runlens_engine::model::Actor::system()).await.unwrap();
    app.user("olga", Some(("other", Role::Admin)), false).await;
    let cookie = app.session("olga").await;
    let headers = [("cookie", cookie.as_str()), ("origin", crate::support::ORIGIN), ("host", crate::support::HOST)];
    // Another project starts the thread first, under the id this one's client uses.
    let body = input("agui-shared", "r1", json!([user("u1", "What is 5 + 5?")])).to_string();
    let reply = app.send_with(Method::POST, "/api/agui", Some(&body), "application/json", &headers).await;
    assert_balanced(&read(&reply));
    // This project's thread of that id is its own, not refused, not theirs.
    let reply = post(&app, &input("agui-shared", "r1", json!([user("u1", "What is 2 + 2?")]))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let events = read(&reply);
    assert_balanced(&events);
    assert_eq!(events[0], json!({"type": "RUN_STARTED", "threadId": "agui-shared", "runId": "r1"}));
    let ours = app.get("/api/runs/default~thread~agui-shared").await.json();
    let theirs = app.get("/api/runs/other~thread~agui-shared").await.json();
    assert_eq!((ours["project"].as_str(), theirs["project"].as_str()), (Some("default"), Some("other")));
    assert_eq!(ours["initial_prompt"], "What is 2 + 2?");
    assert_eq!(theirs["initial_prompt"], "What is 5 + 5?");
}
