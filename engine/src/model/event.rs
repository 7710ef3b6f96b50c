//! Run events as they travel: the [`EventKind`] enum and the [`Event`]
//! envelope the event bus numbers, the store keeps and the SSE streams send.
//!
//! Here, in the serde-only model, so the browser deserializes the very type
//! the server serializes (`runlens_engine::events`, which publishes them,
//! re-exports both).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Message, RunStatus, Step, ToolCall, Usage};

/// The wire names of a run's events (SSE `event:` field, stored `type`), in
/// the order of [`EventKind`]'s variants: the names a browser subscribes to.
pub const RUN_EVENT_TYPES: [&str; 8] = [
    "run.status",
    "step.started",
    "message.delta",
    "item",
    "tool_call.updated",
    "step.completed",
    "usage",
    "run.finished",
];

/// What happened. Serialized with `type` = the dotted wire name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventKind {
    /// The run moved from one status to another.
    #[serde(rename = "run.status")]
    RunStatus { old: RunStatus, new: RunStatus },
    /// A model turn began.
    #[serde(rename = "step.started")]
    StepStarted { index: u32 },
    /// A chunk of streamed model text.
    #[serde(rename = "message.delta")]
    MessageDelta { step_index: u32, text: String },
    /// A message was appended to the transcript.
    #[serde(rename = "item")]
    Item { message: Message },
    /// A tool call changed (started, finished, failed, awaiting approval, decided).
    #[serde(rename = "tool_call.updated")]
    ToolCallUpdated { tool_call: Box<ToolCall> },
    /// A step was persisted with its final usage.
    #[serde(rename = "step.completed")]
    StepCompleted { step: Box<Step> },
    /// Token usage of the run so far.
    #[serde(rename = "usage")]
    Usage { usage: Usage },
    /// The run reached a terminal status.
    #[serde(rename = "run.finished")]
    RunFinished { status: RunStatus, result: Option<Value>, summary: Option<String>, usage: Usage },
}

impl EventKind {
    /// Every wire name, in the enum's order (SSE `event:` field, `type` column).
    pub const NAMES: [&'static str; 8] = RUN_EVENT_TYPES;

    /// The wire name of this event (`run.status`, `message.delta`, …).
    pub fn name(&self) -> &'static str {
        let i = match self {
            Self::RunStatus { .. } => 0,
            Self::StepStarted { .. } => 1,
            Self::MessageDelta { .. } => 2,
            Self::Item { .. } => 3,
            Self::ToolCallUpdated { .. } => 4,
            Self::StepCompleted { .. } => 5,
            Self::Usage { .. } => 6,
            Self::RunFinished { .. } => 7,
        };
        Self::NAMES[i]
    }

    /// The payload without the `type` tag, as stored in `run_events.data`.
    pub fn data_json(&self) -> String {
        // serde writes an internal tag first: cut it off the text rather
        // than going through a `Value` (this runs for every event).
        if let Ok(text) = serde_json::to_string(self) {
            let tag = format!("{{\"type\":\"{}\"", self.name());
            match text.strip_prefix(tag.as_str()) {
                Some(rest) if rest.starts_with(',') => return format!("{{{}", &rest[1..]),
                Some("}") => return "{}".into(),
                _ => {}
            }
        }
        match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => {
                map.remove("type");
                Value::Object(map).to_string()
            }
            _ => "{}".into(),
        }
    }

    /// Rebuilds an event from its stored type and payload.
    pub fn from_parts(kind: &str, data: &str) -> Option<Self> {
        let mut map = match serde_json::from_str(data).ok()? {
            Value::Object(map) => map,
            _ => return None,
        };
        map.insert("type".into(), Value::String(kind.to_owned()));
        serde_json::from_value(Value::Object(map)).ok()
    }
}

/// An event about one run. `seq` numbers a run's events from 1, with no gaps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    pub run_id: String,
    pub seq: u64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// The SSE `data:` JSON: the whole event (`run_id`, `seq`, `at`, `type`, payload).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_through_the_stored_form() {
        let kind = EventKind::RunStatus { old: RunStatus::Pending, new: RunStatus::Running };
        assert_eq!(kind.name(), "run.status");
        let json = serde_json::to_value(&kind).unwrap();
        assert_eq!(json["type"], "run.status");
        let data: Value = serde_json::from_str(&kind.data_json()).unwrap();
        assert_eq!(data, serde_json::json!({"old": "pending", "new": "running"}));
        assert_eq!(EventKind::from_parts(kind.name(), &kind.data_json()), Some(kind));
        assert_eq!(EventKind::StepStarted { index: 3 }.data_json(), r#"{"index":3}"#);
        let finished =
            EventKind::RunFinished { status: RunStatus::Done, result: None, summary: None, usage: Usage::default() };
        assert_eq!(finished.name(), "run.finished");
        assert_eq!(EventKind::from_parts("run.finished", &finished.data_json()), Some(finished));
    }

    #[test]
    fn every_event_sent_reads_back_as_the_same_event() {
        let at = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.123Z").unwrap().with_timezone(&Utc);
        let step: Step = serde_json::from_value(serde_json::json!({
            "run_id": "r", "index": 0, "kind": "model_turn", "status": "completed",
            "request": {"messages": 1}, "response": {"finish_reason": "stop", "result": null, "text": null, "tool_calls": 0},
            "usage": {}, "started_at": "2026-01-01T00:00:00Z", "tool_calls": [],
        }))
        .unwrap();
        let message: Message = serde_json::from_value(serde_json::json!({
            "id": "r-m0", "runId": "r", "seq": 0, "createdAt": "2026-01-01T00:00:00Z",
            "type": "human", "data": {"message": "hi"},
        }))
        .unwrap();
        let tool_call: ToolCall = serde_json::from_value(serde_json::json!({
            "id": "c1", "run_id": "r", "step_index": 0, "tool_name": "calculator",
            "arguments": {"expression": "1+1"}, "status": "awaiting_approval", "requested_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        let kinds = [
            EventKind::RunStatus { old: RunStatus::Pending, new: RunStatus::Running },
            EventKind::StepStarted { index: 0 },
            EventKind::MessageDelta { step_index: 0, text: "Hel".into() },
            EventKind::Item { message },
            EventKind::ToolCallUpdated { tool_call: Box::new(tool_call) },
            EventKind::StepCompleted { step: Box::new(step) },
            EventKind::Usage { usage: Usage { input_tokens: 3, ..Usage::default() } },
            EventKind::RunFinished {
                status: RunStatus::Done,
                result: Some(serde_json::json!({"total": 4})),
                summary: Some("ok".into()),
                usage: Usage::default(),
            },
        ];
        for kind in kinds {
            let event = Event { run_id: "r".into(), seq: 7, at, kind };
            let sent = event.to_json();
            assert_eq!(serde_json::from_str::<Event>(&sent).unwrap(), event, "{sent}");
            assert!(sent.contains(&format!("\"type\":\"{}\"", event.kind.name())), "{sent}");
        }
    }
}
