//! Tool selection for large tool sets: a run with 200+ attached tools is
//! offered the relevant ones each turn (BM25 over names, descriptions and
//! schemas against the latest messages), always with the tools it already
//! used, never more than `[tool_selection] max`; and attaching tools by
//! name, by source or `all`.

use std::sync::Arc;

use async_trait::async_trait;
use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{
    AgentInput, AgentSpec, CreateRun, FollowUp, McpServerStatus, McpState, RunStatus, Step, ToolSelection,
};
use runlens_engine::tools::{Tool, ToolContext, ToolError, ToolRegistry};
use runlens_engine::{Engine, EngineConfig, EngineError};
use serde_json::{json, Value};

use crate::support::*;

/// A tool with a name, description and schema of its own, from any source;
/// a call answers `{"ok": true, "tool": name}`.
struct Fake {
    name: String,
    description: String,
    schema: Value,
    source: String,
}

#[async_trait]
impl Tool for Fake {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn schema(&self) -> Value {
        self.schema.clone()
    }
    fn source(&self) -> String {
        self.source.clone()
    }
    async fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({"ok": true, "tool": self.name}))
    }
}

fn fake(name: &str, description: &str, schema: Value, source: &str) -> Arc<dyn Tool> {
    Arc::new(Fake { name: name.into(), description: description.into(), schema, source: source.into() })
}

/// Business records of a typical SaaS back office: each gets the five CRUD tools.
const RECORDS: [(&str, &str); 39] = [
    ("invoice", "invoice"),
    ("customer", "customer account"),
    ("order", "sales order"),
    ("product", "catalogue product"),
    ("shipment", "parcel shipment"),
    ("ticket", "support ticket"),
    ("employee", "employee profile"),
    ("payslip", "monthly payslip"),
    ("calendar_event", "calendar event"),
    ("meeting_room", "meeting room booking"),
    ("document", "shared document"),
    ("spreadsheet", "spreadsheet"),
    ("repository", "source code repository"),
    ("pull_request", "pull request"),
    ("deployment", "service deployment"),
    ("server", "virtual server"),
    ("db_backup", "database backup"),
    ("dns_record", "DNS record"),
    ("certificate", "TLS certificate"),
    ("campaign", "marketing campaign"),
    ("newsletter", "newsletter issue"),
    ("survey", "customer survey"),
    ("expense", "expense claim"),
    ("purchase_order", "purchase order"),
    ("vendor", "supplier"),
    ("stock_item", "warehouse stock item"),
    ("flight", "flight booking"),
    ("hotel", "hotel reservation"),
    ("lead", "sales lead"),
    ("contract", "signed contract"),
    ("asset", "company laptop or phone"),
    ("course", "training course"),
    ("candidate", "job candidate"),
    ("interview", "job interview"),
    ("webhook", "outgoing webhook"),
    ("api_key", "API key"),
    ("project", "project board"),
    ("task", "task on a project board"),
    ("comment", "comment on a task"),
];

/// Five hand-written tools whose purposes a prompt can name in other words
/// (as an MCP server `misc` would list them).
fn distinct() -> Vec<Arc<dyn Tool>> {
    let tool =
        |name: &str, description: &str, schema: Value| fake(&format!("misc__{name}"), description, schema, "mcp:misc");
    vec![
        tool(
            "fx_convert",
            "Converts an amount of money from one currency to another at today's exchange rate.",
            json!({"type": "object", "properties": {
                "amount": {"type": "number", "description": "How much money"},
                "from": {"type": "string", "description": "ISO code of the currency to convert from"},
                "to": {"type": "string", "description": "ISO code of the currency to convert to"}
            }, "required": ["amount", "from", "to"]}),
        ),
        tool(
            "geo_lookup",
            "Finds the latitude and longitude of a street address or a place name.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        ),
        tool(
            "pdf_render",
            "Turns an HTML page into a printable PDF file.",
            json!({"type": "object", "properties": {"html": {"type": "string"}}}),
        ),
        tool(
            "sms_send",
            "Sends a short text message to a mobile phone number.",
            json!({"type": "object", "properties": {"phone": {"type": "string"}, "text": {"type": "string"}}}),
        ),
        tool(
            "weather_forecast",
            "Tells the weather expected in a city over the next days: temperature, rain and wind.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        ),
    ]
}

const OPS: [&str; 5] = ["create", "get", "list", "update", "delete"];

/// The CRUD tools of `records`, as an MCP server `office` lists them.
fn office_names(records: &[(&str, &str)]) -> Vec<String> {
    records.iter().flat_map(|(r, _)| OPS.iter().map(move |op| format!("office__{r}_{op}"))).collect()
}

/// The built-ins; 195 CRUD tools of [`RECORDS`] from an MCP server
/// `office` and the five [`distinct`] ones from `misc` (200 in all);
/// `demo__echo` and `demo__sum` of an MCP server `demo`; a configured MCP
/// server `down` listing none; and the `default` project's HTTP tool
/// `crm_sync`: 207 tools in `default`.
fn many_tools() -> ToolRegistry {
    let reg = ToolRegistry::with_builtins();
    let mut office = Vec::new();
    for (record, words) in RECORDS {
        let id = json!({"type": "string", "description": format!("The {words} id")});
        let fields = json!({"type": "object", "description": "Field values"});
        let schemas = [
            json!({"type": "object", "properties": {"fields": fields}}),
            json!({"type": "object", "properties": {"id": id}}),
            json!({"type": "object", "properties": {"limit": {"type": "integer"}}}),
            json!({"type": "object", "properties": {"id": id, "fields": fields}}),
            json!({"type": "object", "properties": {"id": id}}),
        ];
        let descriptions = [
            format!("Creates a new {words}."),
            format!("Fetches one {words} by id."),
            format!("Lists {words} records, newest first."),
            format!("Changes fields of an existing {words}."),
            format!("Deletes a {words} for good."),
        ];
        for ((op, description), schema) in OPS.iter().zip(descriptions).zip(schemas) {
            office.push(fake(&format!("office__{record}_{op}"), &description, schema, "mcp:office"));
        }
    }
    assert!(reg.replace_source("mcp:office", office).is_empty());
    assert!(reg.replace_source("mcp:misc", distinct()).is_empty());
    let demo = vec![
        fake("demo__echo", "Echoes back the input.", json!({"type": "object"}), "mcp:demo"),
        fake("demo__sum", "Adds two numbers.", json!({"type": "object"}), "mcp:demo"),
    ];
    assert!(reg.replace_source("mcp:demo", demo).is_empty());
    reg.set_mcp_status(McpServerStatus {
        name: "down".into(),
        transport: "stdio".into(),
        state: McpState::Down,
        tools: 0,
        restarts: 1,
        last_error: Some("exited".into()),
        connected_at: None,
        retry_at: None,
    });
    reg.put_project_tool("default", fake("crm_sync", "Syncs the CRM.", json!({"type": "object"}), "http")).unwrap();
    reg
}

const MAX: u32 = 20;

async fn selecting_engine() -> (Engine, crate::support::TestDb) {
    let dir = crate::support::test_db();
    let store = crate::support::open_store(&db_url(&dir)).await;
    let config = EngineConfig { tool_selection_max: MAX, ..EngineConfig::default() };
    (Engine::with_parts(store, many_tools(), ModelRegistry::with_builtin(), config), dir)
}

fn attach(prompt: &str, tools: &[&str]) -> CreateRun {
    CreateRun {
        initial_prompt: prompt.into(),
        tools: Some(tools.iter().map(|t| t.to_string()).collect()),
        ..CreateRun::default()
    }
}

fn selection(step: &Step) -> &ToolSelection {
    step.request.selection.as_ref().unwrap_or_else(|| panic!("step {} records no selection", step.index))
}

fn offered(step: &Step) -> Vec<(&str, &str)> {
    selection(step).offered.iter().map(|o| (o.name.as_str(), o.reason.as_str())).collect()
}

/// Every step's selection within `max`; the request's tool list, recorded
/// whenever it changed, is exactly the offered tools (no agent tools here).
fn check_steps(steps: &[Step]) {
    let mut last: Option<Vec<String>> = None;
    for step in steps.iter().filter(|s| s.kind == "model_turn") {
        let sel = selection(step);
        assert!(sel.offered.len() <= MAX as usize && sel.max == MAX, "step {}: {sel:?}", step.index);
        let mut names: Vec<String> = sel.offered.iter().map(|o| o.name.clone()).collect();
        names.sort();
        let mut sent = step.request.tools.clone().or_else(|| last.clone()).expect("the first step records its tools");
        last = Some(sent.clone());
        sent.sort();
        assert_eq!(sent, names, "step {} sent the offered tools", step.index);
    }
}

#[tokio::test]
async fn a_prompt_naming_a_purpose_is_offered_the_tool_among_200() {
    let (engine, _dir) = selecting_engine().await;
    let prompt = "How many euros would I get for 250 US dollars at today's exchange rate?";
    let run = run_to_end(&engine, attach(prompt, &["all"])).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.tools.len(), 207, "built-ins, 200 tools, two MCP tools and the project's HTTP tool");
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let sel = selection(&steps[0]);
    assert_eq!(sel.attached, 207);
    assert_eq!(sel.query, prompt);
    assert_eq!(offered(&steps[0])[0], ("misc__fx_convert", "relevant"), "best first: {:?}", offered(&steps[0]));
    assert!(sel.offered.windows(2).all(|w| w[0].score >= w[1].score), "{sel:?}");
    check_steps(&steps);

    for (prompt, tool) in [
        ("Will it rain in Lisbon on Saturday?", "misc__weather_forecast"),
        ("Text my colleague's mobile that I am late", "misc__sms_send"),
        ("Where exactly on the map is 10 Downing Street?", "misc__geo_lookup"),
        ("Which supplier records were added recently?", "office__vendor_list"),
    ] {
        let run = run_to_end(&engine, attach(prompt, &["all"])).await;
        let steps = engine.runs().steps(&run.id).await.unwrap();
        assert_eq!(offered(&steps[0])[0], (tool, "relevant"), "{prompt}: {:?}", selection(&steps[0]));
        check_steps(&steps);
    }
}

#[tokio::test]
async fn a_used_tool_stays_offered_when_later_messages_do_not_match_it() {
    let (engine, _dir) = selecting_engine().await;
    let script = json!([
        {"tool_calls": [{"name": "misc__sms_send", "arguments": {"phone": "+351900000000", "text": "Out!"}}]},
        {"text": "Sent."},
        {"text": "Booked."}
    ]);
    let req = CreateRun {
        model_settings: Some(json!({"script": script})),
        ..attach("Tell the team the release is out", &["all"])
    };
    let run = run_to_end(&engine, req).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    // The model called a tool it was not offered (it is attached): kept
    // from the next turn on, within the same driver.
    assert!(!offered(&steps[0]).iter().any(|(n, _)| *n == "misc__sms_send"), "{:?}", offered(&steps[0]));
    assert_eq!(steps[0].tool_calls[0].tool_name, "misc__sms_send");
    assert_eq!(offered(&steps[1])[0], ("misc__sms_send", "used"));

    // A new driver (the follow-up) reads what the run used from the store.
    let follow = FollowUp { message: "Now book a hotel reservation in Porto.".into(), ..FollowUp::default() };
    engine.conversation().follow_up(&run.id, follow).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let later = selection(&steps[2]);
    assert_eq!(
        later.query, "Now book a hotel reservation in Porto.\nSent.",
        "the person's message and the model's text"
    );
    let first = &later.offered[0];
    assert_eq!((first.name.as_str(), first.reason.as_str(), first.score), ("misc__sms_send", "used", 0.0));
    assert!(offered(&steps[2]).iter().any(|(n, r)| n.starts_with("office__hotel_") && *r == "relevant"), "{later:?}");
    check_steps(&steps);
}

#[tokio::test]
async fn runs_with_few_tools_record_no_selection() {
    let (engine, _dir) = selecting_engine().await;
    let run = run_to_end(&engine, attach("What is 6 * 7?", &["builtin", "misc__fx_convert"])).await;
    assert_eq!(run.status, RunStatus::Done);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    assert!(steps.len() >= 2 && steps.iter().all(|s| s.request.selection.is_none()));
    assert_eq!(steps[0].tool_calls[0].tool_name, "calculator");
    let tools = steps[0].request.tools.as_ref().unwrap();
    assert_eq!(tools, &["calculator", "current_time", "send_email", "wait", "misc__fx_convert"]);

    // Exactly `max` attached: all offered, no selection.
    let twenty = office_names(&RECORDS[..4]);
    let names: Vec<&str> = twenty.iter().map(String::as_str).collect();
    let run = run_to_end(&engine, attach("list the invoices", &names)).await;
    assert_eq!(run.tools.len(), MAX as usize);
    assert!(engine.runs().steps(&run.id).await.unwrap().iter().all(|s| s.request.selection.is_none()));
}

#[tokio::test]
async fn tools_attach_by_name_source_or_all_and_unknown_ones_are_refused() {
    let (engine, _dir) = selecting_engine().await;
    let create = |tools: &[&str]| engine.runs().create_run(attach("hello", tools));
    let (run, _) = create(&["builtin", "calculator", "mcp:demo", "http"]).await.unwrap();
    let expected = ["calculator", "current_time", "send_email", "wait", "demo__echo", "demo__sum", "crm_sync"];
    assert_eq!(run.tools, expected, "sources' tools by name, in order, each once");
    let (run, _) = create(&["mcp:demo", "mcp:down", "wait"]).await.unwrap();
    assert_eq!(run.tools, ["demo__echo", "demo__sum", "wait"], "a configured server that lists none adds none");
    let (run, _) = create(&["mcp:office"]).await.unwrap();
    assert_eq!(run.tools.len(), 195);
    let (all, _) = create(&["all"]).await.unwrap();
    let (default, _) =
        engine.runs().create_run(CreateRun { initial_prompt: "hi".into(), ..CreateRun::default() }).await.unwrap();
    assert_eq!(all.tools, default.tools, "no list attaches all");
    assert_eq!(all.tools.len(), 207);
    // Another project does not see `default`'s HTTP tool.
    let (other, _) = engine.runs().create_run_in(attach("hello", &["all"]), "other", None).await.unwrap();
    assert!(!other.tools.contains(&"crm_sync".to_string()) && other.tools.len() == 206);

    let stored = engine.runs().list_runs(&Default::default()).await.unwrap().runs.len();
    for (tools, says) in [
        (
            &["mcp:nope"][..],
            "unknown tool source `mcp:nope`; sources: builtin, http, mcp:demo, mcp:down, mcp:misc, mcp:office",
        ),
        (&["teleport", "calculator", "warp"][..], "unknown tools `teleport`, `warp`; attach tools by name"),
        (&["mcp:nope", "warp"][..], "unknown tool `warp`"),
    ] {
        match create(tools).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains(says), "{msg}"),
            other => panic!("{tools:?}: {other:?}"),
        }
    }
    assert_eq!(
        engine.runs().list_runs(&Default::default()).await.unwrap().runs.len(),
        stored,
        "refused runs are not stored"
    );

    // An agent keeps its list as written; each run expands it.
    let spec = AgentSpec {
        name: "courier".into(),
        tools: vec!["mcp:demo".into(), "misc__sms_send".into()],
        ..AgentSpec::default()
    };
    let agent = engine
        .agents()
        .create_agent("default", AgentInput { id: Some("courier".into()), spec }, &by("ada"))
        .await
        .unwrap();
    assert_eq!(agent.spec.tools, ["mcp:demo", "misc__sms_send"]);
    let from_agent =
        CreateRun { agent_id: Some("courier".into()), initial_prompt: "go".into(), ..CreateRun::default() };
    let (run, _) = engine.runs().create_run(from_agent).await.unwrap();
    assert_eq!(run.tools, ["demo__echo", "demo__sum", "misc__sms_send"]);
    let bad = AgentSpec { name: "lost".into(), tools: vec!["mcp:gone".into()], ..AgentSpec::default() };
    let err =
        engine.agents().create_agent("default", AgentInput { id: None, spec: bad }, &by("ada")).await.unwrap_err();
    assert!(err.to_string().contains("tools: unknown tool source `mcp:gone`"), "{err}");

    // Follow-ups take the same forms.
    let done = run_to_end(&engine, attach("hello", &["wait"])).await;
    let follow = FollowUp { message: "again".into(), tools: Some(vec!["mcp:demo".into()]), ..FollowUp::default() };
    let reopened = engine.conversation().follow_up(&done.id, follow).await.unwrap();
    assert_eq!(reopened.tools, ["demo__echo", "demo__sum"]);
    engine.runs().wait_until_settled(&done.id, SETTLE).await.unwrap();
    let follow = FollowUp { message: "again".into(), tools: Some(vec!["mcp:nope".into()]), ..FollowUp::default() };
    assert!(
        matches!(engine.conversation().follow_up(&done.id, follow).await, Err(EngineError::Invalid(m)) if m.contains("mcp:nope"))
    );
}

#[tokio::test]
async fn a_tool_the_turn_did_not_offer_is_not_run_and_the_model_is_told_what_was() {
    let (engine, _dir) = selecting_engine().await;
    let prompt = "Will it rain in Lisbon on Saturday?";
    let script = json!([
        {"tool_calls": [
            {"name": "office__vendor_list", "arguments": {}},
            {"name": "misc__weather_forecast", "arguments": {}},
        ]},
        {"text": "Sunny."},
    ]);
    let run =
        run_to_end(&engine, CreateRun { model_settings: Some(json!({"script": script})), ..attach(prompt, &["all"]) })
            .await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let offered_names: Vec<&str> = offered(&steps[0]).into_iter().map(|(name, _)| name).collect();
    assert!(!offered_names.contains(&"office__vendor_list"), "{offered_names:?}");
    assert!(offered_names.contains(&"misc__weather_forecast"), "{offered_names:?}");
    let [vendors, weather] = &steps[0].tool_calls[..] else { panic!("two calls: {:?}", steps[0].tool_calls) };
    // The tool the turn did not offer never ran; the model hears why and what was offered.
    assert_eq!(vendors.status, runlens_engine::model::ToolCallStatus::Failed, "{vendors:?}");
    assert!(vendors.result.is_none() && vendors.started_at.is_none(), "{vendors:?}");
    let error = vendors.error.as_deref().unwrap_or_default();
    assert!(error.contains("`office__vendor_list` was not offered in this turn"), "{error}");
    assert!(error.contains("misc__weather_forecast"), "the offered tools are named: {error}");
    assert_eq!(
        weather.result.as_ref().map(|r| r["tool"].clone()),
        Some(json!("misc__weather_forecast")),
        "{weather:?}"
    );
}
