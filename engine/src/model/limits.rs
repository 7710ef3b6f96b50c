//! The bounds of every input the API accepts, in one place.
//!
//! The engine checks them (a 400 naming the field and its bound), and the
//! browser bundle compiles this module too, so a page can show them. The
//! request body itself is limited to 2 MiB by the server; the bounds below
//! keep any one field well inside that, and keep what a run stores and what
//! its pages show proportionate:
//!
//! - texts a person writes (prompts, follow-ups, edits) are at most 256 KiB:
//!   about 64,000 tokens, more than the context of most models and 32 times
//!   the built-in model's window, yet small enough that a run stays cheap to
//!   store, export and page through;
//! - structured values (input, context, result schema, edited arguments) are
//!   bounded by their compact JSON size;
//! - durations are bounded so date arithmetic can never overflow: an approval
//!   times out within 30 days, a built-in turn takes at most a minute.

use serde_json::Value;

/// `initial_prompt` and follow-up or edited messages: bytes of UTF-8.
pub const MAX_PROMPT_BYTES: usize = 256 * 1024;
/// `system_prompt`: bytes of UTF-8.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;
/// A run's `name`: characters.
pub const MAX_NAME_CHARS: usize = 200;
/// A client-supplied run `id` and an `agent_id`: characters.
pub const MAX_ID_CHARS: usize = 128;

/// Run ids that would name another endpoint (`/api/runs/import`,
/// `/api/runs/batch`) or a path step (`.`, `..`) where a run's id stands in a URL.
pub const RESERVED_RUN_IDS: [&str; 4] = ["import", "batch", ".", ".."];

/// Why `id` cannot be a client-chosen run id, or `None`: 1 to
/// [`MAX_ID_CHARS`] URL-safe characters, and not a reserved name.
pub fn run_id_problem(id: &str) -> Option<String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
    if id.is_empty() || id.len() > MAX_ID_CHARS || !id.chars().all(ok_char) {
        return Some(format!("must be 1-{MAX_ID_CHARS} characters of letters, digits, `-`, `_`, `.` or `:`"));
    }
    if RESERVED_RUN_IDS.contains(&id) {
        return Some(format!("`{id}` is reserved (one of {})", RESERVED_RUN_IDS.join(", ")));
    }
    None
}
/// The run id the server gives what a client names by its own id in
/// `project` (`kind`: `thread`, an AG-UI thread; `trace`, an ingested OTLP
/// trace): `<project>~<kind>~<external>`. No client-chosen run id, thread
/// id, trace id or project name has a `~`, so only the server makes such an
/// id, and only for that project: the same thread or trace id in another
/// project is another run, and no client can take the id first.
pub fn scoped_run_id(project: &str, kind: &str, external: &str) -> String {
    format!("{project}~{kind}~{external}")
}
/// Number of `tags` on a run.
pub const MAX_TAGS: usize = 32;
/// A tag key: characters (1 at least, no `:`).
pub const MAX_TAG_KEY_CHARS: usize = 64;
/// A tag value: characters.
pub const MAX_TAG_VALUE_CHARS: usize = 256;
/// `input` (merged into the prompt the model sees): bytes of compact JSON.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;
/// `context` (passed to tools): bytes of compact JSON.
pub const MAX_CONTEXT_BYTES: usize = 64 * 1024;
/// `result_schema`: bytes of compact JSON.
pub const MAX_RESULT_SCHEMA_BYTES: usize = 64 * 1024;
/// `model_settings` as a whole (a built-in script included): bytes of compact JSON.
pub const MAX_MODEL_SETTINGS_BYTES: usize = 1024 * 1024;
/// Names in a `tools` or `approval.tools` list, and tools one run attaches
/// once `all` and sources are expanded: room for a few large MCP servers
/// (200+ tools each), while a run's stored list stays small (1,000 names of
/// up to ~64 characters are under 70 KiB of JSON) and scoring them all for
/// tool selection takes well under a millisecond (see `engine/benches`).
pub const MAX_TOOL_NAMES: usize = 1000;
/// `max_turns` of a run, a follow-up or an import: 1 to this.
pub const MAX_TURNS: u32 = 1000;
/// `approval.timeout_s`: 1 second to 30 days.
pub const MAX_APPROVAL_TIMEOUT_S: u64 = 30 * 24 * 3600;
/// The approvals inbox's age filters (`older_than_s`, `newer_than_s`):
/// seconds, up to ten years.
pub const MAX_INBOX_AGE_S: u64 = 10 * 365 * 24 * 3600;
/// A decision's `comment` or `reason`: characters.
pub const MAX_DECISION_TEXT_CHARS: usize = 4000;
/// A decision's edited `arguments`: bytes of compact JSON.
pub const MAX_DECISION_ARGUMENTS_BYTES: usize = 64 * 1024;

/// Built-in model: `model_settings.latency_ms`, per turn.
pub const MAX_LATENCY_MS: u64 = 60_000;
/// Built-in model: turns in `model_settings.script`. Past [`MAX_TURNS`]:
/// a generated trace (`runlens gen-trace`) keeps its whole script in its
/// run, which is exported, imported and forked with it; about as many steps
/// as a state document may hold (see `MAX_DOCUMENT_VALUES`). Where a
/// request gives `model_settings`, [`MAX_MODEL_SETTINGS_BYTES`] bounds it too.
pub const MAX_SCRIPT_TURNS: usize = 50_000;
/// Turns a recorded replay plays (the steps of the run it replays before
/// its first final answer).
pub const MAX_REPLAY_TURNS: usize = 1000;
/// Any model: `model_settings.context_window`, in tokens.
pub const MIN_CONTEXT_WINDOW: u64 = 256;
/// Ten million tokens: above every model offered today.
pub const MAX_CONTEXT_WINDOW: u64 = 10_000_000;
/// Sampling settings: `temperature` from 0 to this.
pub const MAX_TEMPERATURE: f64 = 2.0;
/// Sampling settings: `top_p` from 0 to this.
pub const MAX_TOP_P: f64 = 1.0;

/// A price, in USD per million tokens: catches unit mistakes (per token vs per million).
pub const MAX_PRICE: f64 = 100_000.0;
/// A priced model's name: characters.
pub const MAX_PRICE_MODEL_CHARS: usize = 200;
/// `limit` of a page of runs.
pub const MAX_LIST_LIMIT: u32 = 200;
/// A text filter of the run list (`q`, `tag`, `agent_id`, `cursor`): characters.
pub const MAX_QUERY_TEXT_CHARS: usize = 1000;
/// `limit` of the outbox listing.
pub const MAX_OUTBOX_LIMIT: u32 = 1000;
/// `offset` of a page of a list: deep enough for any person paging, small
/// enough that skipping rows stays cheap (cursors page any further).
pub const MAX_LIST_OFFSET: u32 = 100_000;

/// An agent's `name` (a tool name): characters.
pub const MAX_AGENT_NAME_CHARS: usize = 64;
/// An agent's `description`: characters.
pub const MAX_AGENT_DESCRIPTION_CHARS: usize = 4000;
/// Agents in an agent's `agents` or `handoffs` list.
pub const MAX_AGENT_LINKS: usize = 16;
/// A run's `metadata`: bytes of compact JSON.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// `input_items` of a new run: items.
pub const MAX_INPUT_ITEMS: usize = 200;
/// `input_items` of a new run as a whole: bytes of compact JSON.
pub const MAX_INPUT_ITEMS_BYTES: usize = 1024 * 1024;
/// An HTTP tool's `name` (a tool name): characters.
pub const MAX_HTTP_TOOL_NAME_CHARS: usize = 64;
/// An HTTP tool's `description` (what the model reads): characters.
pub const MAX_HTTP_TOOL_DESCRIPTION_CHARS: usize = 4000;
/// An HTTP tool's `schema` (its arguments): bytes of compact JSON.
pub const MAX_HTTP_TOOL_SCHEMA_BYTES: usize = 64 * 1024;
/// An HTTP tool's `url`: characters.
pub const MAX_HTTP_TOOL_URL_CHARS: usize = 2048;
/// Headers an HTTP tool sends besides its own (`content-type`, the signature…).
pub const MAX_HTTP_TOOL_HEADERS: usize = 20;
/// A header's name: characters.
pub const MAX_HTTP_HEADER_NAME_CHARS: usize = 100;
/// A header's value: characters.
pub const MAX_HTTP_HEADER_VALUE_CHARS: usize = 4096;
/// An HTTP tool's `timeout_ms`: from this…
pub const MIN_HTTP_TOOL_TIMEOUT_MS: u64 = 100;
/// …to this (two minutes; an idempotent tool may take three attempts).
pub const MAX_HTTP_TOOL_TIMEOUT_MS: u64 = 120_000;
/// `timeout_ms` of an HTTP tool that does not set it.
pub const DEFAULT_HTTP_TOOL_TIMEOUT_MS: u64 = 10_000;
/// HTTP tools one project may have.
pub const MAX_HTTP_TOOLS: u32 = 500;
/// The most of an HTTP tool's answer that is read: bytes (a larger answer is a tool error).
pub const MAX_HTTP_TOOL_RESPONSE_BYTES: usize = 1024 * 1024;
/// A run tree's depth (a root run is at depth 0): the default of the
/// engine's `max_depth`.
pub const DEFAULT_MAX_DEPTH: u32 = 4;
/// Child runs one run may start in all: the default of the engine's `max_children`.
pub const DEFAULT_MAX_CHILDREN: u32 = 32;
/// Runs in one tree of agent calls, its root included: the server's default bound.
pub const DEFAULT_TREE_RUNS: u32 = 256;
/// Model turns of one tree's runs together: the server's default bound (its
/// runs at the default `max_turns` of 10 each).
pub const DEFAULT_TREE_TURNS: u32 = 2560;
/// The largest `runs` a tree budget may set.
pub const MAX_TREE_RUNS: u64 = 100_000;
/// The largest `depth` a tree budget may set.
pub const MAX_TREE_DEPTH: u64 = 64;
/// The largest `turns` a tree budget may set.
pub const MAX_TREE_TURNS: u64 = 10_000_000;
/// The largest `tokens` a tree budget may set.
pub const MAX_TREE_TOKENS: u64 = 1_000_000_000_000;
/// A webhook's URL (a run's `on_status_change` or a subscription): characters.
pub const MAX_WEBHOOK_URL_CHARS: usize = 2048;
/// A webhook subscription's description: characters.
pub const MAX_WEBHOOK_DESCRIPTION_CHARS: usize = 500;
/// Webhook subscriptions of one project.
pub const MAX_WEBHOOKS_PER_PROJECT: u32 = 20;
/// The body of one webhook request: bytes (larger parts are left out).
pub const MAX_WEBHOOK_PAYLOAD_BYTES: usize = 64 * 1024;
/// Attempts of one delivery a read shows (the newest).
pub const MAX_SHOWN_ATTEMPTS: u32 = 10;

/// The size of `v` as compact JSON, counted without building the text.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` cannot fail: its keys are strings, its numbers finite.
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}

/// `field` must be at most `max` bytes of UTF-8.
pub fn check_bytes(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!("{field} is {} bytes; the limit is {max} bytes ({})", text.len(), kib(max)));
    }
    Ok(())
}

/// `field` must be at most `max` characters.
/// A session id or an end user's id: characters.
pub const MAX_SESSION_ID_CHARS: usize = 128;

/// `field` (a session id or an end user's id) must be 1 to
/// [`MAX_SESSION_ID_CHARS`] characters, none of them a control character.
pub fn check_session_id(field: &str, id: &str) -> Result<(), String> {
    if id.trim().is_empty() || id.chars().nth(MAX_SESSION_ID_CHARS).is_some() || id.chars().any(char::is_control) {
        return Err(format!("{field} must be 1-{MAX_SESSION_ID_CHARS} characters, without control characters"));
    }
    Ok(())
}

pub fn check_chars(field: &str, text: &str, max: usize) -> Result<(), String> {
    // Counting stops past the bound, so a huge text costs no more than a small one.
    if text.chars().nth(max).is_some() {
        return Err(format!("{field} is longer than {max} characters"));
    }
    Ok(())
}

/// `field` must be at most `max` bytes as compact JSON.
pub fn check_json(field: &str, v: &Value, max: usize) -> Result<(), String> {
    let size = json_size(v);
    if size > max {
        return Err(format!("{field} is {size} bytes of JSON; the limit is {max} bytes ({})", kib(max)));
    }
    Ok(())
}

/// A human message (follow-up or edit): not blank, at most [`MAX_PROMPT_BYTES`].
pub fn check_message(field: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    check_bytes(field, text, MAX_PROMPT_BYTES)
}

/// `max_turns`, when given: 1 to [`MAX_TURNS`].
pub fn check_max_turns(max_turns: Option<u32>) -> Result<(), String> {
    match max_turns {
        Some(n) if !(1..=MAX_TURNS).contains(&n) => {
            Err(format!("max_turns must be between 1 and {MAX_TURNS}, not {n}"))
        }
        _ => Ok(()),
    }
}

/// A list of tool names: at most [`MAX_TOOL_NAMES`].
pub fn check_tool_list(field: &str, tools: &[String]) -> Result<(), String> {
    if tools.len() > MAX_TOOL_NAMES {
        return Err(format!("{field} lists {} tools; the limit is {MAX_TOOL_NAMES}", tools.len()));
    }
    Ok(())
}

fn kib(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_size_is_the_compact_text_length() {
        for v in [json!(null), json!({"a": [1, 2.5, "é"], "b": {"c": true}}), json!("x".repeat(1000))] {
            assert_eq!(json_size(&v), serde_json::to_string(&v).unwrap().len());
        }
    }

    #[test]
    fn checks_name_the_field_and_the_bound() {
        assert!(check_bytes("initial_prompt", &"a".repeat(10), 10).is_ok());
        let err = check_bytes("initial_prompt", &"a".repeat(11), 10).unwrap_err();
        assert!(err.starts_with("initial_prompt is 11 bytes; the limit is 10 bytes"), "{err}");
        assert!(check_chars("name", "ééé", 3).is_ok());
        assert_eq!(check_chars("name", "éééé", 3).unwrap_err(), "name is longer than 3 characters");
        assert!(check_json("context", &json!({"a": 1}), 7).is_ok());
        assert!(check_json("context", &json!({"a": 10}), 7).unwrap_err().contains("context is 8 bytes of JSON"));
        assert!(check_message("message", " \n").unwrap_err().contains("must not be empty"));
        let err = check_message("message", &"a".repeat(MAX_PROMPT_BYTES + 1)).unwrap_err();
        assert!(err.contains("(256 KiB)"), "{err}");
        assert!(check_max_turns(Some(MAX_TURNS)).is_ok() && check_max_turns(None).is_ok());
        assert!(check_max_turns(Some(0)).unwrap_err().contains("between 1 and 1000"));
        assert!(check_tool_list("tools", &vec!["wait".into(); MAX_TOOL_NAMES + 1]).is_err());
    }
}
