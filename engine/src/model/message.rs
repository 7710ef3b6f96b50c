//! Transcript messages, in the Inferable message model: `human`, `agent`
//! (with its tool invocations) and `invocation-result`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call the model asked for, as recorded on an `agent` message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Invocation {
    pub id: String,
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    pub input: Value,
}

/// Whether a tool call produced a value or an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ResultType {
    Resolution,
    Rejection,
}

/// The content of a transcript message, in the Inferable message model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MessageBody {
    Human {
        message: String,
    },
    Agent {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        invocations: Vec<Invocation>,
    },
    #[serde(rename_all = "camelCase")]
    InvocationResult {
        id: String,
        tool_name: String,
        result_type: ResultType,
        result: Value,
    },
}

impl MessageBody {
    /// The message type as stored (`human`, `agent`, `invocation-result`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Human { .. } => "human",
            Self::Agent { .. } => "agent",
            Self::InvocationResult { .. } => "invocation-result",
        }
    }
}

/// `input_items` as given: items whose every key is one an item keeps. An
/// unknown key (`usage`, a misspelt `toolName`) is refused rather than
/// silently dropped, as unknown fields of the request are.
pub(crate) fn kept_items<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<MessageBody>>, D::Error> {
    use serde::de::Error;
    let Some(raw) = Option::<Vec<Value>>::deserialize(d)? else { return Ok(None) };
    let mut items = Vec::with_capacity(raw.len());
    for (i, given) in raw.into_iter().enumerate() {
        let item: MessageBody =
            serde_json::from_value(given.clone()).map_err(|e| D::Error::custom(format!("input_items[{i}]: {e}")))?;
        let kept = serde_json::to_value(&item).map_err(D::Error::custom)?;
        if let Some(key) = lost_key(&given, &kept) {
            return Err(D::Error::custom(format!("input_items[{i}]: unknown field `{key}`")));
        }
        items.push(item);
    }
    Ok(Some(items))
}

/// The first key of `given` that `kept` (its parsed and written form) lost,
/// as a path (`data.invocations.0.usage`); an empty value (null, `""`, `[]`,
/// `{}`, `false`) may be left out when written.
fn lost_key(given: &Value, kept: &Value) -> Option<String> {
    let empty = |v: &Value| match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    match (given, kept) {
        (Value::Object(given), Value::Object(kept)) => given.iter().find_map(|(key, value)| match kept.get(key) {
            None if empty(value) => None,
            None => Some(key.clone()),
            Some(k) => lost_key(value, k).map(|inner| format!("{key}.{inner}")),
        }),
        (Value::Array(given), Value::Array(kept)) => given
            .iter()
            .zip(kept)
            .enumerate()
            .find_map(|(i, (g, k))| lost_key(g, k).map(|inner| format!("{i}.{inner}"))),
        _ => None,
    }
}

/// One transcript message: what the model sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    pub id: String,
    pub run_id: String,
    /// Position in the run's transcript, from 0.
    pub seq: u64,
    /// The step that produced it (none for human messages).
    pub step_index: Option<u32>,
    pub created_at: DateTime<Utc>,
    #[serde(flatten)]
    pub body: MessageBody,
}
