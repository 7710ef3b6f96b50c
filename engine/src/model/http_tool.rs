//! A project's own HTTP tools: functions the project serves at its own
//! URLs, registered at run time and called by runs like any other tool.
//!
//! A call is a signed `POST` to the tool's URL (see `crate::tools::http`).
//! What a tool is registered with ([`NewHttpTool`], [`HttpToolSpec`]) and
//! what is shown of it ([`HttpTool`]) differ in the secrets: the values of
//! its headers and its signing secret are stored and used, never shown — a
//! read shows the header names only, and the secret is shown once, in the
//! answer that made it ([`HttpToolSecret`]).
//!
//! Approval: a tool whose registration does not say `requires_approval`
//! needs a person's approval for each call unless it is `idempotent` (the
//! one claim a registration makes about its effects), like `send_email`
//! among the built-ins. A read-only lookup is registered idempotent and
//! runs freely; a function with effects waits for a person until its
//! registration says `"requires_approval": false`.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{limits, Actor, HANDOFF_PREFIX};

/// Header names runlens sets itself (a registration may not set them):
/// the body's, the connection's, and every `runlens-*` header.
pub const RESERVED_HEADERS: [&str; 12] = [
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-authorization",
];

/// The body of `POST /api/tools/http`: a new HTTP tool.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewHttpTool {
    /// The tool name the model calls it by: unique in the project, and not
    /// a built-in, MCP or agent tool's.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::name))]
    pub name: String,
    /// What the tool does: the model reads it to decide when to call it.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::description))]
    pub description: String,
    /// JSON Schema of the arguments (an object schema); calls are checked against it.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::arguments))]
    pub schema: Value,
    /// Where calls are POSTed.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::url))]
    pub url: String,
    /// Headers sent with every call (an `Authorization`, say). Their values
    /// are secrets: stored and sent, never shown again.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::headers))]
    pub headers: Option<BTreeMap<String, String>>,
    /// How long one attempt may take, in milliseconds (default 10,000).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::timeout_ms))]
    pub timeout_ms: Option<u64>,
    /// A call may safely be made again with the same arguments: it is then
    /// retried on a 5xx answer or a connection error, and made again after
    /// a crash; a call of a tool that is not is made once at most.
    #[serde(default)]
    pub idempotent: bool,
    /// Every call waits for a person's approval (default: when the tool is
    /// not idempotent).
    #[serde(default)]
    pub requires_approval: Option<bool>,
}

impl NewHttpTool {
    /// The name and the rest.
    pub fn split(self) -> (String, HttpToolSpec) {
        let spec = HttpToolSpec {
            description: self.description,
            schema: self.schema,
            url: self.url,
            headers: self.headers,
            timeout_ms: self.timeout_ms,
            idempotent: self.idempotent,
            requires_approval: self.requires_approval,
        };
        (self.name, spec)
    }
}

/// The body of `PUT /api/tools/http/{name}`: everything but the name, which
/// the path gives. `headers` absent (or null) keeps the stored headers; an
/// object replaces them all (`{}` removes them).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpToolSpec {
    /// What the tool does: the model reads it to decide when to call it.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::description))]
    pub description: String,
    /// JSON Schema of the arguments (an object schema); calls are checked against it.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::arguments))]
    pub schema: Value,
    /// Where calls are POSTed.
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::url))]
    pub url: String,
    /// Headers sent with every call; absent or null keeps the stored ones.
    /// Their values are secrets: stored and sent, never shown again.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::headers))]
    pub headers: Option<BTreeMap<String, String>>,
    /// How long one attempt may take, in milliseconds (default 10,000).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::timeout_ms))]
    pub timeout_ms: Option<u64>,
    /// A call may safely be made again with the same arguments (see [`NewHttpTool::idempotent`]).
    #[serde(default)]
    pub idempotent: bool,
    /// Every call waits for a person's approval (default: when the tool is
    /// not idempotent).
    #[serde(default)]
    pub requires_approval: Option<bool>,
}

impl HttpToolSpec {
    /// `timeout_ms`, or the default.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(limits::DEFAULT_HTTP_TOOL_TIMEOUT_MS)
    }

    /// `requires_approval`, or the default: approval unless idempotent.
    pub fn requires_approval(&self) -> bool {
        self.requires_approval.unwrap_or(!self.idempotent)
    }

    /// The bounds of every field but the URL's address and the schema's
    /// meaning (the engine checks those): a 400 naming the field.
    pub fn check_bounds(&self) -> Result<(), String> {
        use limits::*;
        if self.description.trim().is_empty() {
            return Err("description must not be empty: the model reads it to decide when to call the tool".into());
        }
        check_chars("description", &self.description, MAX_HTTP_TOOL_DESCRIPTION_CHARS)?;
        check_json("schema", &self.schema, MAX_HTTP_TOOL_SCHEMA_BYTES)?;
        if self.schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err("schema must be a JSON Schema of an object (`\"type\": \"object\"`): the arguments".into());
        }
        check_chars("url", &self.url, MAX_HTTP_TOOL_URL_CHARS).map_err(|e| format!("url: {e}"))?;
        let timeout = self.timeout_ms();
        if !(MIN_HTTP_TOOL_TIMEOUT_MS..=MAX_HTTP_TOOL_TIMEOUT_MS).contains(&timeout) {
            return Err(format!(
                "timeout_ms must be between {MIN_HTTP_TOOL_TIMEOUT_MS} and {MAX_HTTP_TOOL_TIMEOUT_MS}, not {timeout}"
            ));
        }
        if let Some(headers) = &self.headers {
            check_headers(headers)?;
        }
        Ok(())
    }
}

/// Why `name` cannot name an HTTP tool, or `None`: 1 to
/// [`limits::MAX_HTTP_TOOL_NAME_CHARS`] of `A-Z a-z 0-9 _ -` (what every
/// provider accepts as a function name), without `__` (MCP tools are named
/// `server__tool`) and not starting with `transfer_to_` (handoffs).
pub fn http_tool_name_problem(name: &str) -> Option<String> {
    let max = limits::MAX_HTTP_TOOL_NAME_CHARS;
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > max || !name.chars().all(ok_char) {
        return Some(format!("name must be 1-{max} characters of `A-Z`, `a-z`, `0-9`, `_` and `-`"));
    }
    if name.contains("__") {
        return Some(format!("name `{name}` must not contain `__` (MCP tools are named `server__tool`)"));
    }
    if name.starts_with(HANDOFF_PREFIX) {
        return Some(format!("name `{name}` is taken by a tool: `{HANDOFF_PREFIX}…` names an agent handoff"));
    }
    None
}

/// Header names and values a registration may set (see [`RESERVED_HEADERS`]).
fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), String> {
    use limits::*;
    if headers.len() > MAX_HTTP_TOOL_HEADERS {
        return Err(format!("headers has {} entries; the limit is {MAX_HTTP_TOOL_HEADERS}", headers.len()));
    }
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in headers {
        if name.is_empty() || name.len() > MAX_HTTP_HEADER_NAME_CHARS || !name.chars().all(token) {
            return Err(format!(
                "headers: `{}` is not a header name (1-{MAX_HTTP_HEADER_NAME_CHARS} letters, digits and \
                 !#$%&'*+-.^_`|~)",
                name.chars().take(MAX_HTTP_HEADER_NAME_CHARS).collect::<String>()
            ));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("runlens-") || lower.starts_with("proxy-") {
            return Err(format!("headers: `{name}` is set by runlens itself"));
        }
        if !seen.insert(lower) {
            return Err(format!("headers: `{name}` is given twice (header names are case-insensitive)"));
        }
        // The value is a secret: the message names the header, never the value.
        if value.chars().nth(MAX_HTTP_HEADER_VALUE_CHARS).is_some() {
            return Err(format!(
                "headers: the value of `{name}` is longer than {MAX_HTTP_HEADER_VALUE_CHARS} characters"
            ));
        }
        if !value.chars().all(|c| c == '\t' || (' '..='~').contains(&c)) {
            return Err(format!("headers: the value of `{name}` must be printable ASCII (no line breaks)"));
        }
    }
    Ok(())
}

/// An HTTP tool as it is shown: everything but the secrets (header values
/// and the signing secret).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpTool {
    pub name: String,
    pub project: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub schema: Value,
    pub url: String,
    /// The names of the headers sent with each call (their values are never shown).
    pub header_names: Vec<String>,
    pub timeout_ms: u64,
    pub idempotent: bool,
    pub requires_approval: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Who saved it last.
    #[serde(default)]
    pub updated_by: Option<Actor>,
    /// When the signing secret in use was made (at registration, or rotated).
    pub secret_created_at: DateTime<Utc>,
}

/// One page of a project's HTTP tools, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpToolPage {
    pub tools: Vec<HttpTool>,
    /// The `cursor` of the next page (a tool name); null on the last one.
    pub next_cursor: Option<String>,
}

/// An HTTP tool with its signing secret: the answer of a registration and
/// of a rotation, the only ones that show the secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpToolSecret {
    pub tool: HttpTool,
    /// The key of the `runlens-signature` HMAC (`whsec_…`): shown this once.
    pub secret: String,
}

/// Never prints the secret (a `{:?}` in a log line must not leak it).
impl fmt::Debug for HttpToolSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpToolSecret").field("tool", &self.tool).field("secret", &"<redacted>").finish()
    }
}

/// Header names with their values hidden, for `Debug`.
struct HeaderNames<'a>(&'a Option<BTreeMap<String, String>>);

impl fmt::Debug for HeaderNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("None"),
            Some(h) => f.debug_map().entries(h.keys().map(|k| (k, "<redacted>"))).finish(),
        }
    }
}

impl fmt::Debug for NewHttpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewHttpTool")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("headers", &HeaderNames(&self.headers))
            .field("timeout_ms", &self.timeout_ms)
            .field("idempotent", &self.idempotent)
            .field("requires_approval", &self.requires_approval)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for HttpToolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpToolSpec")
            .field("url", &self.url)
            .field("headers", &HeaderNames(&self.headers))
            .field("timeout_ms", &self.timeout_ms)
            .field("idempotent", &self.idempotent)
            .field("requires_approval", &self.requires_approval)
            .finish_non_exhaustive()
    }
}

/// The OpenAPI schemas of the fields whose Rust type says less than the API accepts.
#[cfg(feature = "openapi")]
pub mod schemas {
    use serde_json::json;
    use utoipa::openapi::schema::Schema;

    use crate::model::limits::*;
    use crate::model::openapi::raw;

    /// The pattern of a name: `A-Z a-z 0-9 _ -` without `__`.
    pub const NAME_PATTERN: &str = "^_?([A-Za-z0-9-]+_)*[A-Za-z0-9-]*$";

    /// An HTTP tool's name.
    pub fn name_value() -> serde_json::Value {
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_HTTP_TOOL_NAME_CHARS,
            "pattern": NAME_PATTERN,
            "description": "A-Z, a-z, 0-9, `_` and `-`, without `__`; unique in the project and not a built-in, MCP \
                or agent tool's name (nor `transfer_to_…`)",
        })
    }

    pub fn name() -> Schema {
        raw(name_value())
    }

    pub fn description() -> Schema {
        raw(json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_HTTP_TOOL_DESCRIPTION_CHARS,
            "pattern": "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]",
            "description": "What the tool does (the model reads it to decide when to call it); not blank",
        }))
    }

    pub fn arguments() -> Schema {
        raw(json!({
            "type": "object",
            "required": ["type"],
            "properties": { "type": { "const": "object" } },
            "description": format!(
                "A JSON Schema of an object (the arguments), at most {} KiB of JSON; it must compile",
                MAX_HTTP_TOOL_SCHEMA_BYTES / 1024
            ),
        }))
    }

    pub fn url() -> Schema {
        raw(json!({
            "type": "string",
            "minLength": 8,
            "maxLength": MAX_HTTP_TOOL_URL_CHARS,
            "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@]+",
            "description": "http(s), with a host, no user name or password. Loopback, private and link-local \
                addresses are refused (400 for a literal one; a tool error when a name resolves to one) unless \
                the operator sets `allow_private_networks` under `[http]`. Redirects are not followed.",
        }))
    }

    pub fn headers() -> Schema {
        raw(json!({
            "type": ["object", "null"],
            "maxProperties": MAX_HTTP_TOOL_HEADERS,
            "propertyNames": {
                "minLength": 1,
                "maxLength": MAX_HTTP_HEADER_NAME_CHARS,
                "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
            },
            "additionalProperties": {
                "type": "string",
                "maxLength": MAX_HTTP_HEADER_VALUE_CHARS,
                "pattern": "^[\\t -~]*$",
            },
            "description": "Header name → value, sent with every call; the values are secrets, never shown again. \
                Names are case-insensitive and unique; `content-type`, `host`, the connection's headers and \
                `runlens-*` are set by runlens.",
        }))
    }

    pub fn timeout_ms() -> Schema {
        raw(json!({
            "type": ["integer", "null"],
            "minimum": MIN_HTTP_TOOL_TIMEOUT_MS,
            "maximum": MAX_HTTP_TOOL_TIMEOUT_MS,
            "description": format!("Per attempt; default {DEFAULT_HTTP_TOOL_TIMEOUT_MS}"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> HttpToolSpec {
        HttpToolSpec {
            description: "Looks an order up".into(),
            schema: json!({"type": "object", "properties": {"id": {"type": "string"}}}),
            url: "https://example.com/tools/order".into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_tool_names_without_mcp_or_handoff_shapes() {
        for ok in ["lookup", "Get-Order_2", "_x", "a_b_c", "x".repeat(64).as_str()] {
            assert_eq!(http_tool_name_problem(ok), None, "{ok}");
        }
        for bad in ["", "a b", "a.b", "é", "srv__tool", "__", "transfer_to_billing", &"x".repeat(65)] {
            assert!(http_tool_name_problem(bad).is_some(), "{bad}");
        }
        assert!(http_tool_name_problem("transfer_to_x")
            .unwrap()
            .starts_with("name `transfer_to_x` is taken by a tool"));
    }

    #[test]
    fn bounds_name_the_field_and_never_a_header_value() {
        assert_eq!(spec().check_bounds(), Ok(()));
        assert!(spec().requires_approval(), "not idempotent: approval by default");
        let mut s = spec();
        s.idempotent = true;
        assert!(!s.requires_approval() && s.timeout_ms() == 10_000);
        s.requires_approval = Some(true);
        assert!(s.requires_approval());
        let bad = |f: &dyn Fn(&mut HttpToolSpec)| {
            let mut s = spec();
            f(&mut s);
            s.check_bounds().unwrap_err()
        };
        assert!(bad(&|s| s.description = " ".into()).starts_with("description"));
        assert!(bad(&|s| s.schema = json!({"type": "string"})).starts_with("schema must be"));
        assert!(bad(&|s| s.schema = json!(true)).starts_with("schema must be"));
        assert!(bad(&|s| s.timeout_ms = Some(50)).starts_with("timeout_ms must be between 100 and 120000"));
        assert!(bad(&|s| s.url = "x".repeat(3000)).starts_with("url: "));
        let secret = "Bearer s3cr3t\nX";
        let err = bad(&|s| s.headers = Some([("Authorization".to_owned(), secret.to_owned())].into()));
        assert!(err.contains("Authorization") && !err.contains("s3cr3t"), "{err}");
        for reserved in ["Content-Type", "HOST", "runlens-signature", "Proxy-Authorization"] {
            let err = bad(&|s| s.headers = Some([(reserved.to_owned(), "v".to_owned())].into()));
            assert!(err.contains("is set by runlens"), "{err}");
        }
        let err = bad(&|s| s.headers = Some([("X-A".into(), "1".into()), ("x-a".into(), "2".into())].into()));
        assert!(err.contains("given twice"), "{err}");
        assert!(bad(&|s| s.headers = Some([("a b".into(), "1".into())].into())).contains("not a header name"));
    }

    #[test]
    fn debug_output_hides_secrets() {
        let mut new = NewHttpTool { name: "t".into(), ..Default::default() };
        new.headers = Some([("Authorization".to_owned(), "Bearer s3cr3t".to_owned())].into());
        let text = format!("{new:?} {:?}", new.clone().split().1);
        assert!(text.contains("Authorization") && !text.contains("s3cr3t"), "{text}");
    }
}
