//! The event stream: every state change of every run, numbered and persisted.
//!
//! `publish` hands the event to one background task (see [`writer`]) through
//! a bounded queue (see [`queue`]; a publisher waits when it is full). The
//! task gives each event its run's next sequence number (1, 2, 3… per run,
//! gap-free, in publish order), commits a whole batch in one transaction
//! (group commit; see [`persist`]), and only then broadcasts it. No
//! subscriber ever sees an event that is not in the database, so a `seq` a
//! client has seen is never handed out again, even after a crash; a reader
//! that subscribes first, then reads the database (see [`replay`]), misses
//! nothing.
//!
//! Broadcast channels are bounded: a subscriber that falls behind gets
//! `Lagged` (and the SSE layer drops it) instead of stalling the engine.

mod persist;
mod queue;
mod replay;
mod writer;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::model::{Message, RunStatus, Step, ToolCall, Usage};

pub use persist::{EventLog, StoreLog, LOUD_AFTER};
pub use replay::{RunEvents, StreamEnd};
pub use writer::{EventBus, QUEUE_LIMIT};

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
    ToolCallUpdated { tool_call: ToolCall },
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
    pub const NAMES: [&'static str; 8] = crate::model::RUN_EVENT_TYPES;

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

/// Receives every run's events live (no replay); see [`EventBus::subscribe`].
pub type AllEvents = broadcast::Receiver<Event>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_numbered_events_in_order() {
        let bus = EventBus::new(16, None);
        let mut rx = bus.subscribe();
        bus.publish("r1", EventKind::StepStarted { index: 0 });
        bus.publish("r2", EventKind::StepStarted { index: 0 });
        bus.publish("r1", EventKind::StepStarted { index: 1 });
        let got: Vec<(String, u64)> = [rx.recv().await, rx.recv().await, rx.recv().await]
            .into_iter()
            .map(|e| e.map(|e| (e.run_id, e.seq)).unwrap())
            .collect();
        assert_eq!(got, [("r1".into(), 1), ("r2".into(), 1), ("r1".into(), 2)]);
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_instead_of_blocking() {
        let bus = EventBus::new(16, None);
        let mut rx = bus.subscribe();
        for i in 0..100 {
            bus.publish("r1", EventKind::StepStarted { index: i });
        }
        bus.flush().await;
        assert!(matches!(rx.recv().await, Err(broadcast::error::RecvError::Lagged(_))));
    }

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
}
