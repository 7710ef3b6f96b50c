//! The playground form's agent fields, for the form handler
//! (`crate::server::routes::forms`): the saved agent (and version) the run
//! starts from, its `input`, `metadata` and `reasoning_traces`; and the
//! models ticked under "Compare models" ([`compare_choice`]).
//!
//! The form shows an agent's settings pre-filled, so it submits them all;
//! only those the person changed are overrides. [`drop_agent_defaults`]
//! leaves out of the request whatever equals the agent's own value, so the
//! run records just the real overrides and takes the rest from the agent.

use std::collections::HashSet;

use runlens_engine::model::{AgentSpec, ApprovalRequest, CreateRun, ToolInfo, MAX_BATCH_MODELS};
use runlens_engine::Engine;
use serde_json::Value;

/// The model an agent runs with when it names none.
const DEFAULT_MODEL: &str = "builtin";

/// Reads the agent fields of the submitted `pairs` into `req` and, for a
/// run of a saved agent of `project`, leaves out what equals the agent's
/// settings; `Err` is a message for the person. An unknown agent is left
/// for the engine to refuse.
pub async fn apply(
    engine: &Engine,
    project: &str,
    pairs: &[(String, String)],
    req: &mut CreateRun,
) -> Result<(), String> {
    let field = |name: &str| {
        pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty())
    };
    read_fields(field, req)?;
    let Some(id) = req.agent_id.clone() else { return Ok(()) };
    let spec = match req.agent_version {
        Some(v) => engine.agents().agent_version(project, &id, v).await.map(|v| v.spec),
        None => engine.agents().agent_in(project, &id).await.map(|a| a.spec),
    };
    if let Ok(spec) = spec {
        drop_agent_defaults(req, &spec, &engine.tools(project));
    }
    Ok(())
}

/// Reads the agent fields of the form into `req`; `Err` is a message for
/// the person. `field(name)` is the last non-blank value of a field.
pub fn read_fields(field: impl Fn(&str) -> Option<String>, req: &mut CreateRun) -> Result<(), String> {
    req.agent_id = field("agent_id");
    req.agent_version = match field("agent_version") {
        Some(v) if req.agent_id.is_some() => Some(
            v.parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("The agent version must be a whole number from 1, not {v:?}."))?,
        ),
        _ => None,
    };
    req.input = field("input")
        .map(|text| serde_json::from_str::<Value>(&text).map_err(|e| format!("Input is not valid JSON: {e}.")))
        .transpose()?;
    req.metadata = match field("metadata") {
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Some(v),
            Ok(_) => return Err("Metadata must be a JSON object, like {\"customer\": \"acme\"}.".into()),
            Err(e) => return Err(format!("Metadata is not valid JSON: {e}.")),
        },
        None => None,
    };
    // Like `interactive`: the box is on the form when `flags_present` is.
    if field("flags_present").is_some() {
        req.reasoning_traces = Some(field("reasoning_traces").is_some());
    }
    Ok(())
}

/// The models ticked to compare, when "Compare models" (`compare`) is
/// checked: 1 to [`MAX_BATCH_MODELS`] distinct names in the order ticked
/// (`compare_models`); `Ok(None)` when it is not (the run's model is the
/// one selected). `Err` is a message for the person.
pub fn compare_choice(pairs: &[(String, String)]) -> Result<Option<Vec<String>>, String> {
    if !pairs.iter().any(|(k, v)| k == "compare" && !v.trim().is_empty()) {
        return Ok(None);
    }
    let mut seen = HashSet::new();
    let mut models = Vec::new();
    for (_, model) in pairs.iter().filter(|(k, _)| k == "compare_models") {
        let model = model.trim();
        if !model.is_empty() && seen.insert(model) {
            models.push(model.to_string());
        }
    }
    match models.len() {
        0 => Err(format!(
            "Compare models is checked but no model is ticked: tick 2 to {MAX_BATCH_MODELS} models to compare \
             (or one to run on it alone), or uncheck Compare models."
        )),
        n if n > MAX_BATCH_MODELS => Err(format!("{n} models are ticked to compare; tick at most {MAX_BATCH_MODELS}.")),
        _ => Ok(Some(models)),
    }
}

/// Leaves out of `req` the settings equal to the agent's (see the module
/// docs). `tools`: the registered tools (approval compares per tool).
pub fn drop_agent_defaults(req: &mut CreateRun, spec: &AgentSpec, tools: &[ToolInfo]) {
    let trimmed = |s: &Option<String>| s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    if trimmed(&req.system_prompt) == trimmed(&spec.system_prompt) {
        req.system_prompt = None;
    }
    let agent_model = trimmed(&spec.model).unwrap_or_else(|| DEFAULT_MODEL.into());
    if trimmed(&req.model).is_none_or(|m| m == agent_model) {
        req.model = None;
    }
    if req.tools.as_ref().is_some_and(|list| same_set(list, &spec.tools)) {
        req.tools = None;
    }
    if same_approval(req.approval.as_ref(), spec.approval.as_ref(), tools) {
        req.approval = None;
    }
    if req.result_schema.is_some() && req.result_schema == spec.result_schema {
        req.result_schema = None;
    }
    if req.max_turns.is_some() && req.max_turns == spec.max_turns {
        req.max_turns = None;
    }
    if req.reasoning_traces == Some(spec.reasoning_traces) {
        req.reasoning_traces = None;
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}

/// Whether two approval settings ask approval for the same registered
/// tools with the same timeout (`"all"` equals every tool listed).
fn same_approval(a: Option<&ApprovalRequest>, b: Option<&ApprovalRequest>, tools: &[ToolInfo]) -> bool {
    let policy = |r: Option<&ApprovalRequest>| r.map(ApprovalRequest::policy).unwrap_or_default();
    let (a, b) = (policy(a), policy(b));
    // A tool whose definition requires approval needs it either way.
    a.timeout_s == b.timeout_s
        && tools.iter().filter(|t| !t.requires_approval).all(|t| a.covers(&t.name, false) == b.covers(&t.name, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolInfo> {
        ["calculator", "wait", "send_email"]
            .into_iter()
            .map(|name| ToolInfo {
                name: name.into(),
                description: String::new(),
                schema: json!({}),
                requires_approval: name == "send_email",
                source: "builtin".into(),
                idempotent: name != "send_email",
            })
            .collect()
    }

    fn fields(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().rev().find(|(k, v)| *k == name && !v.is_empty()).map(|(_, v)| v.to_string())
    }

    #[test]
    fn agent_fields_are_read_and_checked() {
        let mut req = CreateRun::default();
        let form = fields(&[
            ("agent_id", "agent-1"),
            ("agent_version", "2"),
            ("metadata", r#"{"customer": "acme"}"#),
            ("input", r#"{"n": 3}"#),
            ("flags_present", "1"),
            ("reasoning_traces", "true"),
        ]);
        read_fields(form, &mut req).unwrap();
        assert_eq!(req.agent_id.as_deref(), Some("agent-1"));
        assert_eq!(req.agent_version, Some(2));
        assert_eq!(req.metadata, Some(json!({"customer": "acme"})));
        assert_eq!(req.input, Some(json!({"n": 3})));
        assert_eq!(req.reasoning_traces, Some(true));

        let mut plain = CreateRun::default();
        read_fields(fields(&[("flags_present", "1"), ("agent_version", "3")]), &mut plain).unwrap();
        assert_eq!((plain.agent_id, plain.agent_version, plain.reasoning_traces), (None, None, Some(false)));

        for (bad, says) in [
            (&[("metadata", "[1]")][..], "must be a JSON object"),
            (&[("metadata", "{x")][..], "Metadata is not valid JSON"),
            (&[("input", "{x")][..], "Input is not valid JSON"),
            (&[("agent_id", "a"), ("agent_version", "0")][..], "agent version"),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(bad.to_vec().into_boxed_slice());
            let err = read_fields(fields(pairs), &mut CreateRun::default()).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn compared_models_are_read_and_bounded() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let ticked = pairs(&[("compare_models", "builtin"), ("compare_models", "openai/gpt")]);
        assert_eq!(compare_choice(&ticked), Ok(None), "ticks without the box are not a comparison");
        let mut on = pairs(&[("compare", "1"), ("compare_models", "b"), ("compare_models", "a")]);
        on.extend(pairs(&[("compare_models", "b"), ("compare_models", " ")]));
        assert_eq!(compare_choice(&on), Ok(Some(vec!["b".to_string(), "a".to_string()])));

        let none = compare_choice(&pairs(&[("compare", "1")])).unwrap_err();
        assert!(none.contains("no model is ticked"), "{none}");
        let mut nine = pairs(&[("compare", "1")]);
        nine.extend((0..9).map(|i| ("compare_models".to_string(), format!("m{i}"))));
        let many = compare_choice(&nine).unwrap_err();
        assert!(many.contains("9 models are ticked") && many.contains("at most 8"), "{many}");
    }

    #[test]
    fn only_changed_settings_stay_overrides() {
        let spec = AgentSpec {
            name: "math_helper".into(),
            system_prompt: Some("Be exact.".into()),
            tools: vec!["calculator".into(), "wait".into()],
            approval: Some(runlens_engine::model::ApprovalRequest::all()),
            max_turns: Some(4),
            ..AgentSpec::default()
        };
        // What the pre-filled form submits unchanged.
        let mut same = CreateRun {
            system_prompt: Some("Be exact.".into()),
            model: Some("builtin".into()),
            tools: Some(vec!["wait".into(), "calculator".into()]),
            approval: Some(runlens_engine::model::ApprovalRequest::tools(["calculator", "wait"])),
            max_turns: Some(4),
            reasoning_traces: Some(false),
            ..CreateRun::default()
        };
        drop_agent_defaults(&mut same, &spec, &tools());
        assert_eq!(same, CreateRun::default());

        let mut changed = CreateRun {
            system_prompt: Some("Be terse.".into()),
            model: Some("builtin".into()),
            tools: Some(vec!["calculator".into()]),
            approval: Some(runlens_engine::model::ApprovalRequest::tools(["calculator"])),
            max_turns: Some(9),
            reasoning_traces: Some(true),
            ..CreateRun::default()
        };
        drop_agent_defaults(&mut changed, &spec, &tools());
        assert_eq!(changed.system_prompt.as_deref(), Some("Be terse."));
        assert_eq!(changed.model, None, "the agent's model (builtin by default) is no override");
        assert_eq!(changed.tools, Some(vec!["calculator".to_string()]));
        assert_eq!(changed.approval, Some(ApprovalRequest::tools(["calculator"])));
        assert_eq!((changed.max_turns, changed.reasoning_traces), (Some(9), Some(true)));

        let mut timeout = CreateRun {
            approval: Some(runlens_engine::model::ApprovalRequest::all().with_timeout_s(5)),
            ..CreateRun::default()
        };
        drop_agent_defaults(&mut timeout, &spec, &tools());
        assert!(timeout.approval.is_some(), "a timeout the agent has not is an override");
    }
}
