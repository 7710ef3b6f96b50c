//! What the loop offers the model each turn: the run's attached tools (or,
//! past `[tool_selection] max`, the most relevant of them), a tool per
//! sub-agent and handoff target, and with reasoning traces a required
//! `reasoning` on each.
//!
//! Selection (see [`crate::tools::select`]) scores the attached tools
//! against the latest message a person wrote and the model's latest text,
//! and keeps the tools the run already called. Sub-agent and handoff tools
//! are always offered and do not count against `max`: they are how the run's
//! agent is wired (at most 16 of each), not tools the selection could judge.
//! A step where selection applied records it (`StepRequest::selection`);
//! the offered tools are listed in the order they were attached, so a turn
//! offering the same set as the last sends (and records) the same list.

use std::borrow::Borrow;
use std::collections::HashSet;

use serde_json::Value;

use crate::error::Result;
use crate::model::{Message, MessageBody, Run, Step, ToolInfo, ToolSelection};
use crate::runtime::{agent_tool_infos, Runtime};
use crate::tools::select::ToolIndex;

use super::context::is_person;

/// Characters of the latest person message scored for selection.
pub(super) const QUERY_HUMAN_CHARS: usize = 1000;
/// Characters of the model's latest text scored for selection.
pub(super) const QUERY_AGENT_CHARS: usize = 500;

/// One turn's tools, and how they were chosen when there were too many.
pub(super) struct Offered {
    pub tools: Vec<ToolInfo>,
    pub selection: Option<ToolSelection>,
}

/// The selection state of one driver: the index of the attached tools
/// (built once, again only when the attached tools change, e.g. at a
/// handoff) and the tools the run has called, most recent first (read from
/// the store the first time selection applies, then kept up to date).
#[derive(Default)]
pub(super) struct Offer {
    index: Option<(Vec<String>, ToolIndex)>,
    used: Option<Vec<String>>,
}

impl Offer {
    /// The tools to offer for the next turn of `run`, whose transcript ends
    /// with `messages`.
    pub(super) async fn tools<M: Borrow<Message>>(
        &mut self,
        rt: &Runtime,
        run: &Run,
        messages: &[M],
    ) -> Result<Offered> {
        let known = rt.tools.view(&run.project);
        let attached: Vec<String> = run.tools.iter().filter(|n| known.contains(n)).cloned().collect();
        let max = rt.config.tool_selection_max.max(1) as usize;
        if attached.len() <= max {
            let tools = attached.iter().filter_map(|n| known.info(n)).collect();
            return Ok(Offered { tools: finish(run, tools), selection: None });
        }
        if self.index.as_ref().is_none_or(|(names, _)| *names != attached) {
            let infos: Vec<ToolInfo> = attached.iter().filter_map(|n| known.info(n)).collect();
            self.index = Some((attached.clone(), ToolIndex::new(&infos)));
        }
        if self.used.is_none() {
            self.used = Some(used_tools(&rt.store.step_outline(&run.id).await?));
        }
        let (Some((_, index)), Some(used)) = (&self.index, &self.used) else { unreachable!("both set above") };
        let query = query(messages);
        let offered = index.select(&query, used, max);
        let chosen: HashSet<&str> = offered.iter().map(|o| o.name.as_str()).collect();
        let tools = attached.iter().filter(|n| chosen.contains(n.as_str())).filter_map(|n| known.info(n)).collect();
        let selection = ToolSelection { attached: attached.len() as u32, max: max as u32, query, offered };
        Ok(Offered { tools: finish(run, tools), selection: Some(selection) })
    }

    /// Notes the tools `step`'s calls used (once the used tools were read).
    pub(super) fn note_step(&mut self, step: &Step) {
        let Some(used) = &mut self.used else { return };
        for call in step.tool_calls.iter().rev() {
            used.retain(|n| *n != call.tool_name);
            used.insert(0, call.tool_name.clone());
        }
    }
}

/// The tools a run called, most recent first, from its outline.
fn used_tools(outline: &[crate::model::StepOutline]) -> Vec<String> {
    let mut seen = HashSet::new();
    let calls = outline.iter().rev().flat_map(|s| s.tool_calls.iter().rev());
    calls.filter(|c| seen.insert(c.tool_name.as_str())).map(|c| c.tool_name.clone()).collect()
}

/// What selection scores: the latest message a person wrote and the
/// model's latest text, each cut short (see the limits above).
pub(super) fn query<M: Borrow<Message>>(messages: &[M]) -> String {
    let person = messages.iter().rev().map(Borrow::borrow).find(|m| is_person(m)).and_then(|m| match &m.body {
        MessageBody::Human { message } => Some(head(message, QUERY_HUMAN_CHARS)),
        _ => None,
    });
    let agent = messages.iter().rev().map(Borrow::borrow).find_map(|m| match &m.body {
        MessageBody::Agent { message: Some(text), .. } if !text.trim().is_empty() => {
            Some(head(text, QUERY_AGENT_CHARS))
        }
        _ => None,
    });
    [person, agent].into_iter().flatten().map(str::trim).collect::<Vec<_>>().join("\n")
}

/// The first `chars` characters of `text`.
fn head(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(at, _)| &text[..at])
}

/// The tools a run may be offered at the least, for sizing how much
/// history a resumed driver reads (a budget too large only reads more): all
/// its attached tools when they fit one turn, else only its agent tools.
pub(super) fn fewest_tools(rt: &Runtime, run: &Run) -> Vec<ToolInfo> {
    let known = rt.tools.view(&run.project);
    let max = rt.config.tool_selection_max.max(1) as usize;
    let attached: Vec<ToolInfo> = run.tools.iter().filter_map(|n| known.info(n)).collect();
    finish(run, if attached.len() <= max { attached } else { Vec::new() })
}

/// The definitions, as they are today, of the tools named `names` that a
/// step of `run` offered (attached tools, then the run's agent tools, each
/// with the `reasoning` that reasoning traces ask for), and the names no
/// longer defined. For a trace's model-call detail: a tool's definition is
/// not recorded per step.
pub(crate) fn definitions(rt: &Runtime, run: &Run, names: &[String]) -> (Vec<ToolInfo>, Vec<String>) {
    let known = rt.tools.view(&run.project);
    let agent_tools = agent_tool_infos(&run.sub_agents, &run.handoffs);
    let (mut found, mut missing) = (Vec::with_capacity(names.len()), Vec::new());
    for name in names {
        match known.info(name).or_else(|| agent_tools.iter().find(|t| t.name == *name).cloned()) {
            Some(mut tool) => {
                if run.reasoning_traces {
                    ask_reason(&mut tool.schema);
                }
                found.push(tool);
            }
            None => missing.push(name.clone()),
        }
    }
    (found, missing)
}

/// `tools`, then the agent tools; each asking for a `reasoning` with
/// reasoning traces.
fn finish(run: &Run, mut tools: Vec<ToolInfo>) -> Vec<ToolInfo> {
    tools.extend(agent_tool_infos(&run.sub_agents, &run.handoffs));
    if run.reasoning_traces {
        for tool in &mut tools {
            ask_reason(&mut tool.schema);
        }
    }
    tools
}

/// Adds a required `reasoning` text to an object schema's properties.
fn ask_reason(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else { return };
    let properties = obj.entry("properties").or_insert_with(|| Value::Object(Default::default()));
    let Some(properties) = properties.as_object_mut() else { return };
    properties.insert(
        "reasoning".into(),
        serde_json::json!({"type": "string", "description": "Why you make this call, in one sentence."}),
    );
    match obj.entry("required").or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(required) if !required.iter().any(|r| r == "reasoning") => required.push("reasoning".into()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64, body: MessageBody) -> Message {
        Message {
            id: format!("r-m{seq}"),
            run_id: "r".into(),
            seq,
            step_index: None,
            created_at: chrono::Utc::now(),
            body,
        }
    }

    fn agent(text: Option<&str>) -> MessageBody {
        MessageBody::Agent { message: text.map(str::to_owned), result: None, invocations: Vec::new() }
    }

    #[test]
    fn the_query_is_the_latest_person_message_and_agent_text_cut_short() {
        let long = "word ".repeat(1000);
        let messages = [
            message(0, MessageBody::Human { message: "old question".into() }),
            message(1, agent(Some("old answer"))),
            message(2, MessageBody::Human { message: long.clone() }),
            message(3, agent(Some("Let me look up the exchange rate."))),
            message(4, agent(None)),
            message(5, MessageBody::Human { message: format!("{}fix it", super::super::context::REPAIR_PREFIX) }),
        ];
        let q = query(&messages);
        let (person, agent_text) = q.split_once('\n').unwrap();
        assert_eq!(person.chars().count(), QUERY_HUMAN_CHARS - 1, "cut, then trimmed of its last space");
        assert_eq!(agent_text, "Let me look up the exchange rate.");
        assert_eq!(query(&messages[..1]), "old question");
        assert_eq!(query::<Message>(&[]), "");
    }
}
