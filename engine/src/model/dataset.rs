//! Datasets: named, versioned sets of inputs (a prompt or a conversation)
//! with what they should give, that an experiment runs an agent over.
//!
//! A dataset belongs to a project and has a version: 0 while it is empty,
//! and one more with every change of its items (items added, one edited,
//! one deleted), so each version names an exact set of items. An item keeps
//! its id across edits; what it held at each version stays readable.
//!
//! An item's input is a prompt (`{"prompt": "…"}`) or a conversation
//! (`{"input_items": [...]}`, transcript items as a run's `input_items`
//! takes them, the last one the human message to answer), optionally with
//! structured `input` as a run takes it ([`DatasetInput::run_request`] is
//! the run it stands for). `expected` is what a run given it should answer
//! (text, JSON, or the tool calls expected), and `recorded_results` the tool
//! results a source run recorded, so an experiment can replay them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::limits::{json_size, MAX_INPUT_BYTES, MAX_INPUT_ITEMS, MAX_INPUT_ITEMS_BYTES, MAX_PROMPT_BYTES};
use super::{Actor, CreateRun, MessageBody};

/// A dataset's name: at most this many characters.
pub const MAX_DATASET_NAME_CHARS: usize = 100;
/// A dataset's description: at most this many characters.
pub const MAX_DATASET_DESCRIPTION_CHARS: usize = 4000;
/// Datasets one project may have.
pub const MAX_DATASETS: u32 = 100;
/// Items a dataset may hold at one version.
pub const MAX_DATASET_ITEMS: u32 = 10_000;
/// Items one `POST /api/datasets/{id}/items` may add.
pub const MAX_ITEMS_PER_REQUEST: usize = 1000;
/// An item's `expected`: bytes of compact JSON.
pub const MAX_EXPECTED_BYTES: usize = 64 * 1024;
/// An item's `metadata`: bytes of compact JSON.
pub const MAX_ITEM_METADATA_BYTES: usize = 16 * 1024;
/// Tags on an item.
pub const MAX_ITEM_TAGS: usize = 32;
/// A tag: characters.
pub const MAX_ITEM_TAG_CHARS: usize = 64;
/// Recorded tool results on an item.
pub const MAX_RECORDED_RESULTS: usize = 200;
/// An item's recorded tool results together: bytes of compact JSON.
pub const MAX_RECORDED_RESULTS_BYTES: usize = 256 * 1024;
/// A recorded result's tool name: characters.
pub const MAX_RECORDED_TOOL_CHARS: usize = 128;
/// An upload (`POST /api/datasets/{id}/upload`): bytes of the file's text.
pub const MAX_UPLOAD_BYTES: usize = 8 * 1024 * 1024;
/// Bad rows an upload's refusal lists (the rest are counted).
pub const MAX_LISTED_BAD_ROWS: usize = 20;

/// A dataset as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dataset {
    pub id: String,
    /// Unique in the project.
    pub name: String,
    pub description: String,
    /// 0 while empty; one more with every change of the items.
    pub version: u32,
    /// Items at the current version.
    pub item_count: u32,
    pub created_at: DateTime<Utc>,
    /// When the dataset (its name, description or items) last changed.
    pub updated_at: DateTime<Utc>,
    pub created_by: Actor,
}

/// One page of a project's datasets, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DatasetPage {
    pub datasets: Vec<Dataset>,
    /// The `cursor` of the next page (a dataset name); null on the last one.
    pub next_cursor: Option<String>,
}

/// The body of `POST /api/datasets`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewDataset {
    /// 1-100 characters: ASCII letters, digits, `-`, `_`, `.`, `:` or spaces (not first or last); unique in the
    /// project.
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::name))]
    pub name: String,
    /// At most 4,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 4000))]
    pub description: Option<String>,
}

impl NewDataset {
    /// Why the dataset cannot be made as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        dataset_name_problem(&self.name).or_else(|| description_problem(self.description.as_deref()))
    }
}

/// The body of `PUT /api/datasets/{id}`: a new name, a new description, or
/// both (what is absent is kept). Its schema is written out (see `schema`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetChange {
    /// As on creation; unique in the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// At most 4,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl DatasetChange {
    /// Why the change cannot be made as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        if self.name.is_none() && self.description.is_none() {
            return Some("give a name, a description, or both".into());
        }
        self.name.as_deref().and_then(dataset_name_problem).or_else(|| description_problem(self.description.as_deref()))
    }
}

/// Why a dataset's name cannot be used, if it cannot (the rule of a score's
/// name, up to [`MAX_DATASET_NAME_CHARS`]).
pub fn dataset_name_problem(name: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | ' ');
    if name.trim().is_empty() || name.trim() != name {
        return Some("name: must not be blank or start or end with a space".into());
    }
    if name.chars().count() > MAX_DATASET_NAME_CHARS || !name.chars().all(ok) {
        return Some(format!(
            "name: 1-{MAX_DATASET_NAME_CHARS} characters of ASCII letters, digits, `-`, `_`, `.`, `:` or spaces"
        ));
    }
    None
}

fn description_problem(description: Option<&str>) -> Option<String> {
    description
        .is_some_and(|d| d.chars().nth(MAX_DATASET_DESCRIPTION_CHARS).is_some())
        .then(|| format!("description: at most {MAX_DATASET_DESCRIPTION_CHARS} characters"))
}

/// `max` bytes as the bounds say it (`64 KiB`, `1 MiB`).
fn size(max: usize) -> String {
    if max >= 1024 * 1024 && max.is_multiple_of(1024 * 1024) {
        format!("{} MiB", max / (1024 * 1024))
    } else {
        format!("{} KiB", max / 1024)
    }
}

/// `field: at most … of JSON` when `v` is over `max` bytes of compact JSON.
fn json_over(field: &str, v: &Value, max: usize) -> Option<String> {
    (json_size(v) > max).then(|| format!("{field}: at most {} of JSON", size(max)))
}

/// What an item gives a run: a prompt, or a conversation whose last item is
/// the human message to answer; either with optional structured `input`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInput {
    /// The human message (a run's `initial_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A conversation: transcript items as a run's `input_items` takes them,
    /// the last one the human message to answer.
    #[serde(default, deserialize_with = "super::message::kept_items", skip_serializing_if = "Option::is_none")]
    pub input_items: Option<Vec<MessageBody>>,
    /// Structured input merged into the prompt (a run's `input`): a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

impl DatasetInput {
    /// A prompt.
    pub fn prompt(text: impl Into<String>) -> Self {
        DatasetInput { prompt: Some(text.into()), ..Default::default() }
    }

    /// A conversation ending with the human message to answer.
    pub fn conversation(items: Vec<MessageBody>) -> Self {
        DatasetInput { input_items: Some(items), ..Default::default() }
    }

    /// Why the input cannot be kept as given, naming the field (`input.…`).
    /// How a conversation's invocations and results pair up is the engine's
    /// check (the one a new run's `input_items` passes).
    pub fn problem(&self) -> Option<String> {
        if let Some(input) = &self.input {
            if !(input.is_object() || input.is_null()) {
                return Some("input.input: must be a JSON object".into());
            }
            if let Some(p) = json_over("input.input", input, MAX_INPUT_BYTES) {
                return Some(p);
            }
        }
        match (&self.prompt, &self.input_items) {
            (Some(_), Some(_)) => Some("input: give prompt or input_items, not both".into()),
            (None, None) => Some("input: give prompt or input_items".into()),
            (Some(prompt), None) => {
                if prompt.trim().is_empty() {
                    return Some("input.prompt: must not be blank".into());
                }
                (prompt.len() > MAX_PROMPT_BYTES)
                    .then(|| format!("input.prompt: at most {MAX_PROMPT_BYTES} bytes of UTF-8"))
            }
            (None, Some(items)) => {
                if items.is_empty() {
                    return Some("input.input_items: give at least one item (the human message to answer)".into());
                }
                if items.len() > MAX_INPUT_ITEMS {
                    return Some(format!("input.input_items: at most {MAX_INPUT_ITEMS} items"));
                }
                let bytes: usize = items.iter().map(|i| serde_json::to_value(i).map_or(0, |v| json_size(&v))).sum();
                if bytes > MAX_INPUT_ITEMS_BYTES {
                    return Some(format!("input.input_items: at most {} of JSON", size(MAX_INPUT_ITEMS_BYTES)));
                }
                match items.last() {
                    Some(MessageBody::Human { message }) if message.trim().is_empty() => {
                        Some(format!("input.input_items[{}]: a human message must not be empty", items.len() - 1))
                    }
                    Some(MessageBody::Human { message }) if message.len() > MAX_PROMPT_BYTES => Some(format!(
                        "input.input_items[{}]: the human message is over {MAX_PROMPT_BYTES} bytes",
                        items.len() - 1
                    )),
                    Some(MessageBody::Human { .. }) => None,
                    _ => {
                        Some("input.input_items: the last item must be a human message (the one a run answers)".into())
                    }
                }
            }
        }
    }

    /// The run this input stands for: the prompt (or the conversation's last
    /// human message) as `initial_prompt`, the conversation's earlier items
    /// as `input_items`, and `input`. Everything else is the experiment's.
    pub fn run_request(&self) -> CreateRun {
        let input = self.input.clone().filter(|v| !v.is_null());
        match (&self.prompt, &self.input_items) {
            (Some(prompt), _) => CreateRun { initial_prompt: prompt.clone(), input, ..Default::default() },
            (None, Some(items)) => {
                let (prompt, before) = match items.split_last() {
                    Some((MessageBody::Human { message }, before)) => (message.clone(), before.to_vec()),
                    _ => (String::new(), items.clone()),
                };
                CreateRun {
                    initial_prompt: prompt,
                    input_items: (!before.is_empty()).then_some(before),
                    input,
                    ..Default::default()
                }
            }
            (None, None) => CreateRun { input, ..Default::default() },
        }
    }
}

/// A tool result a source run recorded: the call's tool and arguments, and
/// what it answered, so an experiment can replay it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RecordedResult {
    /// The tool called (1-128 characters, not blank).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 128,
            pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
        )
    )]
    pub tool: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Value,
    /// What the tool answered.
    #[serde(default)]
    pub result: Value,
}

/// One item of a dataset, as it is at a version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DatasetItem {
    /// Kept across edits.
    pub id: String,
    pub dataset_id: String,
    pub input: DatasetInput,
    /// What a run given this input should answer: text, JSON, or the tool
    /// calls expected (`[{"name", "arguments"?}]`).
    pub expected: Option<Value>,
    /// Free metadata: a JSON object.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: Map<String, Value>,
    pub tags: Vec<String>,
    /// The run the item was made from, if it was.
    pub source_run_id: Option<String>,
    /// The tool results the source run recorded (or that were given), for replay.
    pub recorded_results: Vec<RecordedResult>,
    /// The version this content of the item came in with (it was added or
    /// last edited then).
    pub version_added: u32,
    /// When this content of the item was written (at `version_added`).
    pub created_at: DateTime<Utc>,
}

/// An item to add: the body of each entry of `POST /api/datasets/{id}/items`
/// and each line of a JSONL upload.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewDatasetItem {
    pub input: DatasetInput,
    /// What a run given this input should answer: text, JSON, or the tool calls expected
    /// (`[{"name", "arguments"?}]`); at most 64 KiB of JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::expected))]
    pub expected: Option<Value>,
    /// Free metadata: a JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::metadata))]
    pub metadata: Option<Map<String, Value>>,
    /// At most 32 tags of 1-64 characters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::tags))]
    pub tags: Vec<String>,
    /// Tool results to replay: at most 200, 256 KiB of JSON together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::recorded_results))]
    pub recorded_results: Vec<RecordedResult>,
}

impl NewDatasetItem {
    /// Why the item cannot be kept as given, naming the field
    /// (`expected: at most 64 KiB of JSON`).
    pub fn problem(&self) -> Option<String> {
        self.input
            .problem()
            .or_else(|| expected_problem(self.expected.as_ref()))
            .or_else(|| metadata_problem(self.metadata.as_ref()))
            .or_else(|| tags_problem(&self.tags))
            .or_else(|| recorded_problem(&self.recorded_results))
    }
}

fn expected_problem(expected: Option<&Value>) -> Option<String> {
    expected.and_then(|v| json_over("expected", v, MAX_EXPECTED_BYTES))
}

fn metadata_problem(metadata: Option<&Map<String, Value>>) -> Option<String> {
    let bytes = metadata.map_or(0, |m| json_size(&Value::Object(m.clone())));
    (bytes > MAX_ITEM_METADATA_BYTES).then(|| format!("metadata: at most {} of JSON", size(MAX_ITEM_METADATA_BYTES)))
}

fn tags_problem(tags: &[String]) -> Option<String> {
    if tags.len() > MAX_ITEM_TAGS {
        return Some(format!("tags: at most {MAX_ITEM_TAGS} tags"));
    }
    tags.iter().enumerate().find_map(|(i, t)| {
        (t.trim().is_empty() || t.chars().nth(MAX_ITEM_TAG_CHARS).is_some())
            .then(|| format!("tags[{i}]: 1-{MAX_ITEM_TAG_CHARS} characters, not blank"))
    })
}

fn recorded_problem(recorded: &[RecordedResult]) -> Option<String> {
    if recorded.len() > MAX_RECORDED_RESULTS {
        return Some(format!("recorded_results: at most {MAX_RECORDED_RESULTS} results"));
    }
    if let Some(i) =
        recorded.iter().position(|r| r.tool.trim().is_empty() || r.tool.chars().nth(MAX_RECORDED_TOOL_CHARS).is_some())
    {
        return Some(format!("recorded_results[{i}].tool: 1-{MAX_RECORDED_TOOL_CHARS} characters, not blank"));
    }
    let bytes = serde_json::to_value(recorded).map_or(0, |v| json_size(&v));
    (bytes > MAX_RECORDED_RESULTS_BYTES)
        .then(|| format!("recorded_results: at most {} of JSON", size(MAX_RECORDED_RESULTS_BYTES)))
}

/// `Some(value)` for a field that is present, `null` included: with
/// `#[serde(default)]`, an absent field is `None` and a null one `Some(None)`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The body of `PUT /api/datasets/{id}/items/{item_id}`: what changes (what
/// is absent is kept; `expected: null` removes it). The item keeps its id and
/// comes in with the new version. Its schema is written out (see `schema`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetItemEdit {
    /// The new input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<DatasetInput>,
    /// The new expected value; null removes it. At most 64 KiB of JSON.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub expected: Option<Option<Value>>,
    /// The new metadata (replaces the old): a JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The new tags (replace the old).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// The new recorded results (replace the old).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_results: Option<Vec<RecordedResult>>,
}

impl DatasetItemEdit {
    /// Why the edit cannot be made as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        if self.input.is_none()
            && self.expected.is_none()
            && self.metadata.is_none()
            && self.tags.is_none()
            && self.recorded_results.is_none()
        {
            return Some("give at least one of input, expected, metadata, tags, recorded_results".into());
        }
        self.input
            .as_ref()
            .and_then(DatasetInput::problem)
            .or_else(|| expected_problem(self.expected.as_ref().and_then(Option::as_ref)))
            .or_else(|| metadata_problem(self.metadata.as_ref()))
            .or_else(|| self.tags.as_deref().and_then(tags_problem))
            .or_else(|| self.recorded_results.as_deref().and_then(recorded_problem))
    }

    /// `item` with this edit applied (its id, source and dates kept).
    pub fn apply(self, mut item: DatasetItem) -> DatasetItem {
        if let Some(input) = self.input {
            item.input = input;
        }
        if let Some(expected) = self.expected {
            item.expected = expected.filter(|v| !v.is_null());
        }
        if let Some(metadata) = self.metadata {
            item.metadata = metadata;
        }
        if let Some(tags) = self.tags {
            item.tags = tags;
        }
        if let Some(recorded) = self.recorded_results {
            item.recorded_results = recorded;
        }
        item
    }
}

/// The body of `POST /api/datasets/{id}/items`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewDatasetItems {
    /// 1 to 1,000 items, added together as one new version.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 1000))]
    pub items: Vec<NewDatasetItem>,
}

/// What adding items (or an upload) made: the dataset at its new version,
/// and the new items' ids in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DatasetItemsAdded {
    pub dataset: Dataset,
    pub item_ids: Vec<String>,
}

/// One page of a dataset's items at a version, oldest item first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DatasetItemPage {
    pub dataset_id: String,
    /// The version these items are of.
    pub version: u32,
    pub items: Vec<DatasetItem>,
    /// The `cursor` of the next page (an item id); null on the last one.
    pub next_cursor: Option<String>,
}

/// The body of `POST /api/runs/{id}/dataset-items`: the dataset to add the
/// run to, and how.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunToDataset {
    /// A dataset of the run's project.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub dataset_id: String,
    /// What the item should expect; absent: the answer the run gave that turn (its text, or its structured
    /// result). At most 64 KiB of JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schema::expected))]
    pub expected: Option<Value>,
    /// The step whose turn the item holds: the conversation up to the human message that started it, and the
    /// tool results of the steps up to it. Absent: the run's last step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_step: Option<u32>,
}

impl RunToDataset {
    /// Why the request cannot be made as given, naming the field.
    pub fn problem(&self) -> Option<String> {
        expected_problem(self.expected.as_ref())
    }
}

/// The file format of an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UploadFormat {
    /// One JSON object per line, each a new item (`{"input": …, "expected"?, "metadata"?, "tags"?}`).
    Jsonl,
    /// A header row naming the columns: `prompt` (required), `expected` (JSON when it parses, else text),
    /// `tags` (`;`-separated); any other column goes into metadata.
    Csv,
}

impl std::str::FromStr for UploadFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "jsonl" => Ok(UploadFormat::Jsonl),
            "csv" => Ok(UploadFormat::Csv),
            other => Err(format!("must be `jsonl` or `csv`, not `{other}`")),
        }
    }
}

/// The body of `POST /api/datasets/{id}/upload`: the file's text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DatasetUpload {
    /// The file's text (JSONL or CSV, as `format` says): at most 8 MiB.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 8388608))]
    pub content: String,
}

#[cfg(feature = "openapi")]
mod schema;

#[cfg(test)]
mod tests;
