//! Reading a state document from its bytes straight into a [`RunState`].
//!
//! No value tree of the whole document is built: messages and steps are
//! read one at a time (each expanded from its compact form and converted
//! before the next is read), and a blob's data is copied as compact JSON
//! text, never built as a tree. Before that, one pass that allocates
//! nothing counts the document's values outside blob data and refuses more
//! than [`MAX_DOCUMENT_VALUES`], so what an import holds stays within a few
//! times its body whatever the document's shape.

use std::cell::Cell;
use std::fmt;
use std::io::Write as _;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::compact::{expand_message, expand_step};
use super::{RunState, RUN_KEYS, STATE_SCHEMA_VERSION};
use crate::error::{EngineError, Result};
use crate::model::{Message, Step};
use crate::store::Blob;

/// The most JSON values (objects, arrays, strings, numbers…) a document may
/// have outside its blobs' data: about 50 times what a 1000-step run needs.
pub(crate) const MAX_DOCUMENT_VALUES: usize = 2_000_000;

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
    blobs: Vec<BlobDoc>,
}

/// A blob as a document gives it; its content type is not taken.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlobDoc {
    id: String,
    call_id: Option<String>,
    #[serde(default, rename = "content_type")]
    _content_type: Option<IgnoredAny>,
    data: JsonText,
}

fn invalid(m: String) -> EngineError {
    EngineError::Invalid(m)
}

/// Checks the version, the size and the shape of a document and reads it.
/// Fields a compact document leaves out are derived; nested run ids missing
/// from it are the run's. The blobs come apart from the state (whose
/// `blobs` is empty), with their data as JSON text and no run id yet.
pub(super) fn parse(bytes: &[u8]) -> Result<(RunState, Vec<Blob>)> {
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
    count_values(bytes)?;
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
        blobs: Vec::new(),
    };
    fill_run_ids(&mut state);
    let blobs = doc
        .blobs
        .into_iter()
        .map(|b| Blob {
            id: b.id,
            run_id: String::new(),
            call_id: b.call_id,
            content_type: super::BLOB_CONTENT_TYPE.into(),
            data: b.data.0,
            created_at: state.run.created_at,
        })
        .collect();
    Ok((state, blobs))
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

/// Counts the document's values outside blob data (see [`MAX_DOCUMENT_VALUES`]).
fn count_values(bytes: &[u8]) -> Result<()> {
    let count = Cell::new(0);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let counted = Counted { count: &count, at: At::Document }.deserialize(&mut de);
    match counted.and_then(|()| de.end()) {
        Ok(()) => Ok(()),
        Err(_) if count.get() > MAX_DOCUMENT_VALUES => {
            Err(invalid(format!("the document has more than {MAX_DOCUMENT_VALUES} JSON values outside blob data")))
        }
        Err(e) => Err(invalid(format!("invalid JSON: {e}"))),
    }
}

/// Where a counted value is: blob data (a blob object's `data`, kept as
/// text) is not counted.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Document,
    Blobs,
    Blob,
    Other,
}

#[derive(Clone, Copy)]
struct Counted<'a> {
    count: &'a Cell<usize>,
    at: At,
}

impl Counted<'_> {
    fn below(self, at: At) -> Self {
        Counted { at, ..self }
    }

    fn one<E: de::Error>(self) -> std::result::Result<(), E> {
        self.count.set(self.count.get() + 1);
        if self.count.get() > MAX_DOCUMENT_VALUES {
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Counted<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counted<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<(), E> {
        self.one()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<(), E> {
        self.one()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<(), E> {
        self.one()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<(), E> {
        self.one()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<(), E> {
        self.one()
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        self.one()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.one()?;
        let element = self.below(if self.at == At::Blobs { At::Blob } else { At::Other });
        while seq.next_element_seed(element)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        self.one()?;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            self.one()?;
            match (self.at, &*key) {
                (At::Document, "blobs") => map.next_value_seed(self.below(At::Blobs))?,
                (At::Blob, "data") => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => map.next_value_seed(self.below(At::Other))?,
            }
        }
        Ok(())
    }
}

/// A JSON value kept as compact JSON text, as `serde_json::to_vec` of the
/// value would write it, without building the value.
struct JsonText(Vec<u8>);

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut out = Vec::new();
        Transcode(&mut out).deserialize(d)?;
        Ok(JsonText(out))
    }
}

/// Writes the value it reads as compact JSON text.
struct Transcode<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Transcode<'_> {
    fn json<T: serde::Serialize + ?Sized, E: de::Error>(self, v: &T) -> std::result::Result<(), E> {
        serde_json::to_writer(&mut *self.0, v).map_err(E::custom)
    }
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.json(&v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.json(&v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<(), E> {
        self.json(&v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<(), E> {
        self.json(&Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.json(v)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Transcode(&mut *self.0))?.is_none() {
                self.0.truncate(at);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        self.0.push(b'{');
        let mut first = true;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if !first {
                self.0.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut *self.0, &*key).map_err(de::Error::custom)?;
            let _ = self.0.write_all(b":");
            map.next_value_seed(Transcode(&mut *self.0))?;
        }
        self.0.push(b'}');
        Ok(())
    }
}
