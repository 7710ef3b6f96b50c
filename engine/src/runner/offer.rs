//! What the loop offers the model each turn: the run's registered tools,
//! a tool per sub-agent and handoff target, and with reasoning traces a
//! required `reasoning` on each.

use serde_json::Value;

use crate::model::{Run, ToolInfo};
use crate::runtime::{agent_tool_infos, Runtime};

/// The tools the run offers the model: its registered tools, then one per
/// sub-agent and handoff target; with reasoning traces, each asks for a
/// `reasoning` too.
pub(super) fn offered_tools(rt: &Runtime, run: &Run) -> Vec<ToolInfo> {
    let mut tools: Vec<ToolInfo> = run.tools.iter().filter_map(|n| rt.tools.info(n)).collect();
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
