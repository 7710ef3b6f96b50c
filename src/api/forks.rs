//! Server functions for time travel on the trace page: fork a run from one
//! of its steps (`fork_run`, the "Fork from here" panel) and replay a
//! finished run (`replay_run`, the header's Replay form).
//!
//! Both redirect to the new run's trace, with or without JavaScript. Their
//! errors travel as [`ForkError`] (JSON), which names the step whose panel
//! shows it; without JavaScript it comes back in the `__err` query parameter
//! of the redirect to the page, like the conversation errors.
//!
//! The panel posts one textarea per tool call of the step, with the text it
//! was prefilled with beside it (`call_originals`): only the results whose
//! parsed value changed are sent as replaced, so an untouched result stays
//! what the tool returned.

// `#[server]` makes the client stub from the argument list (the fork form's fields).
#![allow(clippy::too_many_arguments)]

use std::collections::BTreeMap;

use leptos::prelude::*;
use runlens_engine::model::{ForkFromStep, ModelOutput, OutputCall};
use serde_json::Value;

use super::action_error::ActionError;
#[cfg(any(feature = "ssr", test))]
use super::action_error::ErrorKind;

/// A fork or a replay that could not be made: about the step whose fork
/// panel shows it (`None` for a replay; a transport failure, about no step,
/// shows in every panel).
pub type ForkError = ActionError<u32>;

/// What the fork panel posts, as text (see [`ForkForm::to_request`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ForkForm {
    pub from_step: u32,
    /// `answer`: replace the model's answer; anything else: replace tool results.
    pub mode: Option<String>,
    /// One entry per tool call of the step: its id, the result text posted
    /// and the text the field was prefilled with.
    pub call_ids: Vec<String>,
    pub call_results: Vec<String>,
    pub call_originals: Vec<String>,
    /// A JSON object of call id → result, sent as it is.
    pub tool_results_json: Option<String>,
    pub model_text: Option<String>,
    /// A JSON array of `{name, arguments}`.
    pub model_calls_json: Option<String>,
    pub model: Option<String>,
    pub model_settings_json: Option<String>,
    pub system_prompt: Option<String>,
    /// Comma-separated tool names.
    pub tools: Option<String>,
}

/// `None` for missing or blank text.
fn filled(text: &Option<String>) -> Option<&str> {
    text.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

/// Parses `text`, naming `what` when it is not JSON.
fn parse_json(what: &str, text: &str) -> Result<Value, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("{what} is not valid JSON ({e}). Write text in double quotes, e.g. \"sunny\"."))
}

impl ForkForm {
    /// The request the form asks for, or a message saying what to fix.
    pub fn to_request(&self) -> Result<ForkFromStep, String> {
        let answer = match self.mode.as_deref().map(str::trim) {
            Some("answer") => true,
            Some(_) => false,
            // Without a mode (a caller other than the panel), whatever it filled in.
            None => filled(&self.model_text).is_some() || filled(&self.model_calls_json).is_some(),
        };
        let mut req = ForkFromStep { from_step: self.from_step, ..ForkFromStep::default() };
        if answer {
            let text = filled(&self.model_text).map(str::to_string);
            let tool_calls = match filled(&self.model_calls_json) {
                None => Vec::new(),
                Some(t) => serde_json::from_str::<Vec<OutputCall>>(t).map_err(|e| {
                    format!(
                        "The model's tool calls must be a JSON array of {{\"name\": …, \"arguments\": {{…}}}} ({e})."
                    )
                })?,
            };
            if text.is_none() && tool_calls.is_empty() {
                return Err("Write the model's answer: a text, tool calls, or both.".into());
            }
            req.model_output = Some(ModelOutput { text, tool_calls });
        } else {
            req.tool_results = self.changed_results()?;
        }
        if let Some(t) = filled(&self.model_settings_json) {
            let settings = parse_json("Model settings", t)?;
            if !settings.is_object() {
                return Err("Model settings must be a JSON object, e.g. {}.".into());
            }
            req.model_settings = Some(settings);
        }
        req.model = filled(&self.model).map(str::to_string);
        req.system_prompt = filled(&self.system_prompt).map(str::to_string);
        req.tools = filled(&self.tools)
            .map(|t| t.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect::<Vec<_>>());
        req.check_bounds()?;
        Ok(req)
    }

    /// The tool results that differ from what their fields were prefilled
    /// with (compared as parsed JSON), then those of `tool_results_json`.
    fn changed_results(&self) -> Result<BTreeMap<String, Value>, String> {
        let mut out = BTreeMap::new();
        for (i, id) in self.call_ids.iter().enumerate() {
            let Some(text) = self.call_results.get(i).map(|t| t.trim()) else { continue };
            let what = format!("The result of call {id}");
            if text.is_empty() {
                return Err(format!("{what} is empty: write a JSON value, or {{\"error\": \"…\"}} for a failure."));
            }
            let value = parse_json(&what, text)?;
            let original = self.call_originals.get(i).and_then(|o| serde_json::from_str::<Value>(o).ok());
            if original.as_ref() != Some(&value) {
                out.insert(id.clone(), value);
            }
        }
        if let Some(t) = filled(&self.tool_results_json) {
            match parse_json("Tool results", t)? {
                Value::Object(map) => out.extend(map),
                _ => return Err("Tool results must be a JSON object of call id → result.".into()),
            }
        }
        Ok(out)
    }
}

/// Forks run `run_id` after its step `from_step`, changed as the fork panel
/// says (see [`ForkForm`]), then goes to the fork's trace (with or without
/// JavaScript). Returns the fork's id.
#[server]
pub async fn fork_run(
    run_id: String,
    from_step: u32,
    #[server(default)] mode: Option<String>,
    #[server(default)] call_ids: Vec<String>,
    #[server(default)] call_results: Vec<String>,
    #[server(default)] call_originals: Vec<String>,
    #[server(default)] tool_results_json: Option<String>,
    #[server(default)] model_text: Option<String>,
    #[server(default)] model_calls_json: Option<String>,
    #[server(default)] model: Option<String>,
    #[server(default)] model_settings_json: Option<String>,
    #[server(default)] system_prompt: Option<String>,
    #[server(default)] tools: Option<String>,
) -> Result<String, ForkError> {
    use crate::format::url_encode;

    let step = Some(from_step);
    let form = ForkForm {
        from_step,
        mode,
        call_ids,
        call_results,
        call_originals,
        tool_results_json,
        model_text,
        model_calls_json,
        model,
        model_settings_json,
        system_prompt,
        tools,
    };
    let (engine, caller) = ssr::operator(&run_id, step).await?;
    let req = form.to_request().map_err(|msg| {
        ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ForkError::new(step, ErrorKind::Invalid, msg)
    })?;
    let fork = engine
        .conversation()
        .fork_from_step(&run_id, req, Some(&caller.actor))
        .await
        .map_err(|e| ssr::to_error(step, e))?;
    leptos_axum::redirect(&format!("/runs/{}", url_encode(&fork.id)));
    Ok(fork.id)
}

/// The models configured on this server, for the fork panel's model field.
#[server]
pub async fn fork_models() -> Result<Vec<String>, ServerFnError> {
    Ok(super::ssr::engine()?.models())
}

/// Parses the replay form's mode: `recorded` (the default) or `live`.
pub fn parse_replay_mode(text: Option<&str>) -> Result<runlens_engine::model::ReplayMode, String> {
    use runlens_engine::model::ReplayMode;
    match text.map(str::trim).unwrap_or("") {
        "" | "recorded" => Ok(ReplayMode::Recorded),
        "live" => Ok(ReplayMode::Live),
        other => Err(format!("Replay mode must be recorded or live, not {other:?}.")),
    }
}

/// Replays finished run `run_id` (`mode`: `recorded` or `live`), then goes
/// to the replay's trace (with or without JavaScript). Returns its id.
#[server]
pub async fn replay_run(run_id: String, #[server(default)] mode: Option<String>) -> Result<String, ForkError> {
    use crate::format::url_encode;
    use runlens_engine::model::ReplayRequest;

    let (engine, caller) = ssr::operator(&run_id, None).await?;
    let mode = parse_replay_mode(mode.as_deref()).map_err(|msg| {
        ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ForkError::new(None, ErrorKind::Invalid, msg)
    })?;
    let replay = engine
        .runs()
        .replay_run(&run_id, ReplayRequest { mode }, Some(&caller.actor))
        .await
        .map_err(|e| ssr::to_error(None, e))?;
    leptos_axum::redirect(&format!("/runs/{}", url_encode(&replay.id)));
    Ok(replay.id)
}

#[cfg(feature = "ssr")]
mod ssr {
    use runlens_engine::{Engine, EngineError};

    pub use super::super::ssr::set_status;
    use super::super::ssr::{Caller, Role};
    use super::{ErrorKind, ForkError};

    /// The engine and the caller, once the caller is an operator of run
    /// `run_id`'s project (another project's run is not found).
    pub async fn operator(run_id: &str, step: Option<u32>) -> Result<(Engine, Caller), ForkError> {
        let engine =
            super::super::ssr::engine().map_err(|e| ForkError::new(step, ErrorKind::Internal, e.to_string()))?;
        let caller =
            super::super::ssr::caller().map_err(|e| ForkError::new(step, ErrorKind::Forbidden, e.to_string()))?;
        caller.run(&engine, run_id, Role::Operator).await.map_err(|e| {
            let (status, message) = e.status_and_message();
            set_status(status);
            ForkError::new(step, ErrorKind::of_status(status), message)
        })?;
        Ok((engine, caller))
    }

    /// Engine errors as the panel shows them, answered with the REST API's
    /// status codes.
    pub fn to_error(step: Option<u32>, err: EngineError) -> ForkError {
        let error = super::super::ssr::classify(err, "a fork server function");
        set_status(error.status());
        ForkError::new(step, error.kind, error.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> ForkForm {
        ForkForm {
            from_step: 0,
            mode: Some("results".into()),
            call_ids: vec!["c1".into(), "c2".into()],
            call_results: vec!["4".into(), "{\n  \"ok\": true\n}".into()],
            call_originals: vec!["4".into(), "{\"ok\": true}".into()],
            ..ForkForm::default()
        }
    }

    #[test]
    fn only_changed_results_are_replaced() {
        assert!(form().to_request().unwrap().tool_results.is_empty());
        let mut f = form();
        f.call_results[0] = " 41 ".into();
        let req = f.to_request().unwrap();
        assert_eq!(req.tool_results, BTreeMap::from([("c1".to_string(), json!(41))]));
        assert!(req.model_output.is_none());
    }

    #[test]
    fn bad_json_is_explained() {
        let mut f = form();
        f.call_results[1] = "{oops".into();
        assert!(f.to_request().unwrap_err().contains("call c2 is not valid JSON"));
        let mut f = form();
        f.model_settings_json = Some("[1]".into());
        assert!(f.to_request().unwrap_err().contains("JSON object"));
        let mut f = form();
        f.mode = Some("answer".into());
        f.model_calls_json = Some("{\"name\": \"x\"}".into());
        assert!(f.to_request().unwrap_err().contains("JSON array"));
    }

    #[test]
    fn an_answer_replaces_the_models_output_and_ignores_results() {
        let mut f = form();
        f.mode = Some("answer".into());
        f.call_results[0] = "41".into();
        f.model_text = Some("Done.".into());
        f.model_calls_json = Some(r#"[{"name": "calculator", "arguments": {"expression": "1+1"}}]"#.into());
        f.model_settings_json = Some("{}".into());
        f.tools = Some("calculator, current_time,".into());
        let req = f.to_request().unwrap();
        assert!(req.tool_results.is_empty());
        let out = req.model_output.unwrap();
        assert_eq!(out.text.as_deref(), Some("Done."));
        assert_eq!(out.tool_calls[0].name, "calculator");
        assert_eq!(req.model_settings, Some(json!({})));
        assert_eq!(req.tools, Some(vec!["calculator".to_string(), "current_time".to_string()]));
        f.model_text = None;
        f.model_calls_json = Some(" ".into());
        assert!(f.to_request().unwrap_err().contains("Write the model's answer"));
    }

    #[test]
    fn replay_modes_parse_or_explain() {
        use runlens_engine::model::ReplayMode;
        assert_eq!(parse_replay_mode(None), Ok(ReplayMode::Recorded));
        assert_eq!(parse_replay_mode(Some(" live ")), Ok(ReplayMode::Live));
        assert!(parse_replay_mode(Some("later")).unwrap_err().contains("recorded or live"));
    }

    #[test]
    fn errors_find_their_panel_and_round_trip() {
        use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};

        let err = ForkError::new(Some(2), ErrorKind::Invalid, "bad");
        assert!(err.is_for(&2) && !err.is_for(&3));
        assert_eq!(ForkError::de(err.ser()), err);
        assert!(ForkError::from_server_fn_error(ServerFnErrorErr::Request("down".into())).is_for(&7));
    }
}
