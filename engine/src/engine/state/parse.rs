//! Reading a state document from its bytes straight into a [`RunState`].
//!
//! No value tree of the whole document is built: messages and steps are
//! read one at a time (each expanded from its compact form and converted
//! before the next is read), so an import holds the request body, the typed
//! state and at most one element's value tree at once.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::compact::{expand_message, expand_step};
use super::{BlobState, RunState, RUN_KEYS, STATE_SCHEMA_VERSION};
use crate::error::{EngineError, Result};
use crate::model::{Message, Step};

/// Only the version: read first, so a document of another version gets a
/// clear answer whatever its shape.
#[derive(Deserialize)]
struct Version {
    #[serde(rename = "$schemaVersion")]
    version: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(rename = "$schemaVersion")]
    _version: IgnoredAny,
    run: Map<String, Value>,
    #[serde(deserialize_with = "messages")]
    messages: Vec<Message>,
    #[serde(deserialize_with = "steps")]
    steps: Vec<Step>,
    blobs: Vec<BlobState>,
}

fn invalid(m: String) -> EngineError {
    EngineError::Invalid(m)
}

/// Checks the version and the shape of a document and reads it. Fields a
/// compact document leaves out are derived; nested run ids missing from it
/// are the run's.
pub(super) fn parse(bytes: &[u8]) -> Result<RunState> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(invalid("the document must be a JSON object".into()));
    }
    let head: Version = serde_json::from_slice(bytes).map_err(|e| invalid(format!("invalid JSON: {e}")))?;
    match head.version {
        Some(Value::String(v)) if v == STATE_SCHEMA_VERSION => {}
        Some(Value::String(other)) => {
            return Err(invalid(format!(
                "unsupported $schemaVersion `{other}`; this server reads `{STATE_SCHEMA_VERSION}`"
            )))
        }
        Some(_) => return Err(invalid(format!("$schemaVersion must be the string `{STATE_SCHEMA_VERSION}`"))),
        None => return Err(invalid("missing field `$schemaVersion`".into())),
    }
    let doc: Document = serde_json::from_slice(bytes).map_err(|e| invalid(format!("invalid run state: {e}")))?;
    if let Some(k) = RUN_KEYS.iter().find(|k| !doc.run.contains_key(**k)) {
        return Err(invalid(format!("missing field `run.{k}`")));
    }
    let run =
        serde_json::from_value(Value::Object(doc.run)).map_err(|e| invalid(format!("invalid run state: run: {e}")))?;
    let mut state = RunState {
        schema_version: STATE_SCHEMA_VERSION.into(),
        run,
        messages: doc.messages,
        steps: doc.steps,
        blobs: doc.blobs,
    };
    fill_run_ids(&mut state);
    Ok(state)
}

/// Gives the run's id to what a compact document left without one.
fn fill_run_ids(s: &mut RunState) {
    let id = &s.run.id;
    for m in &mut s.messages {
        if m.run_id.is_empty() {
            m.run_id.clone_from(id);
        }
        if m.id.is_empty() {
            m.id = format!("{id}-m{}", m.seq);
        }
    }
    for step in &mut s.steps {
        if step.run_id.is_empty() {
            step.run_id.clone_from(id);
        }
        for c in &mut step.tool_calls {
            if c.run_id.is_empty() {
                c.run_id.clone_from(id);
            }
        }
    }
}

/// An array read element by element: each is expanded and converted before
/// the next is read.
struct Elements<T> {
    what: &'static str,
    expand: fn(&mut Value, usize),
    _t: std::marker::PhantomData<T>,
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Elements<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an array of {}", self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(mut v) = seq.next_element::<Value>()? {
            let i = out.len();
            (self.expand)(&mut v, i);
            let item = serde_json::from_value(v).map_err(|e| de::Error::custom(format!("{}[{i}]: {e}", self.what)))?;
            out.push(item);
        }
        Ok(out)
    }
}

fn messages<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<Message>, D::Error> {
    d.deserialize_seq(Elements { what: "messages", expand: expand_message, _t: std::marker::PhantomData })
}

fn steps<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<Step>, D::Error> {
    d.deserialize_seq(Elements { what: "steps", expand: expand_step, _t: std::marker::PhantomData })
}
