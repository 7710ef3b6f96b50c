//! From the config file's `[mcp.NAME]` sections to servers ready to start:
//! every section checked and every `$VAR` read from the environment at
//! start-up, so a mistake stops runlens before it serves (exit 2, like a
//! bad provider) instead of surfacing as a dead server later.
//!
//! Header and env values are secrets. They are kept in [`Secrets`], which
//! blots them out of every text runlens records about the server (errors,
//! logs, its status, the server's own stderr and tool results).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};

use crate::tools::config::{McpServerConfig, ToolMatch};

/// The longest `NAME` of `[mcp.NAME]`: `NAME__tool` must fit in 64 characters.
pub const MAX_SERVER_NAME_CHARS: usize = 32;
/// A call's time limit when the section sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `timeout_secs` (an hour).
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// Variables of runlens's environment a stdio server gets (the MCP SDKs'
/// default: enough to find programs and a home; no secrets).
const INHERITED_ENV: [&str; 8] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"];
/// Headers the transport sets itself.
const RESERVED_HEADERS: [&str; 4] = ["accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"];
/// Secret values shorter than this are not blotted out (they would blot
/// out ordinary words and numbers, and hide nothing worth hiding).
const MIN_SECRET_CHARS: usize = 4;

/// One configured server, checked and with its secrets read.
#[derive(Clone)]
pub struct McpServer {
    /// `NAME`: its tools are `NAME__tool`, their source `mcp:NAME`.
    pub name: String,
    pub(super) transport: Transport,
    /// Which tools need approval; `None`: those not annotated read-only.
    pub(super) require_approval: Option<ToolMatch>,
    /// Which tools run again after a crash; `None`: as annotated.
    pub(super) idempotent: Option<ToolMatch>,
    /// How long one call may take.
    pub(super) timeout: Duration,
    pub(super) secrets: Secrets,
}

#[derive(Clone)]
pub(super) enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio { program: String, args: Vec<String>, env: Vec<(String, String)> },
    /// A streamable HTTP endpoint.
    Http { url: String, headers: Vec<(HeaderName, HeaderValue)> },
}

impl McpServer {
    /// `stdio` or `http`, as [`crate::model::McpServerStatus::transport`] says.
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// No secret in `Debug` either.
impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("name", &self.name).field("transport", &self.transport_name()).finish()
    }
}

/// The secret values of one server's config, to blot out of text.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// `text` with every secret replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "[redacted]");
            }
        }
        out
    }

    /// Whether `text` shows a secret.
    pub fn shows_in(&self, text: &str) -> bool {
        self.0.iter().any(|s| text.contains(s.as_str()))
    }

    fn add(&mut self, value: &str) {
        if value.chars().count() >= MIN_SECRET_CHARS && !self.0.iter().any(|s| s == value) {
            self.0.push(value.to_owned());
            // Longest first, so a secret containing another is blotted whole.
            self.0.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }
}

/// Checks every section and reads the environment variables they name
/// (`env` looks one up). The error names the section and what is wrong,
/// never a secret's value.
pub fn resolve(
    sections: &BTreeMap<String, McpServerConfig>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<McpServer>, String> {
    sections.iter().map(|(name, section)| resolve_one(name, section, &env)).collect()
}

fn resolve_one(
    name: &str,
    section: &McpServerConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<McpServer, String> {
    check_name(name)?;
    let at = format!("[mcp.{name}]");
    let mut secrets = Secrets::default();
    let transport = match (&section.command, &section.url) {
        (Some(_), Some(_)) => return Err(format!("{at} has both `command` and `url`: give one")),
        (None, None) => return Err(format!("{at} needs `command` (a stdio server) or `url` (streamable HTTP)")),
        (Some(command), None) => {
            if !section.headers.is_empty() {
                return Err(format!("{at}: `headers` are for `url` servers; a `command` server takes `env`"));
            }
            let (program, args) = match command.split_first() {
                Some((program, args)) if !program.trim().is_empty() => (program.clone(), args.to_vec()),
                _ => return Err(format!("{at}: `command` must start with the program to run")),
            };
            let mut vars = inherited(env);
            for (key, value) in &section.env {
                if key.is_empty() || key.contains(['=', '\0']) {
                    return Err(format!("{at}: `{key}` is not a valid environment variable name"));
                }
                let value = expand(value, env, &mut secrets).map_err(|var| unset(&at, "env", key, &var))?;
                if value.contains('\0') {
                    return Err(format!("{at}: env.{key} contains a NUL character"));
                }
                secrets.add(&value);
                vars.retain(|(k, _)| k != key);
                vars.push((key.clone(), value));
            }
            Transport::Stdio { program, args, env: vars }
        }
        (None, Some(url)) => {
            if !section.env.is_empty() {
                return Err(format!("{at}: `env` is for `command` servers; a `url` server takes `headers`"));
            }
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => return Err(format!("{at}: `url` must be an http:// or https:// address")),
            }
            let mut headers = Vec::new();
            for (key, value) in &section.headers {
                let header = HeaderName::from_bytes(key.as_bytes())
                    .map_err(|_| format!("{at}: `{key}` is not a valid header name"))?;
                if RESERVED_HEADERS.contains(&header.as_str()) {
                    return Err(format!("{at}: the `{key}` header is set by the MCP transport itself"));
                }
                let value = expand(value, env, &mut secrets).map_err(|var| unset(&at, "headers", key, &var))?;
                let mut header_value = HeaderValue::from_str(&value)
                    .map_err(|_| format!("{at}: the value of headers.{key} is not a valid header value"))?;
                header_value.set_sensitive(true);
                secrets.add(&value);
                headers.push((header, header_value));
            }
            Transport::Http { url: url.clone(), headers }
        }
    };
    for (key, list) in [("require_approval", &section.require_approval), ("idempotent", &section.idempotent)] {
        if let Some(ToolMatch::Tools(tools)) = list {
            if let Some(bad) = tools.iter().find(|t| t.trim().is_empty() || t.len() > 200) {
                return Err(format!("{at}: `{key}` lists a tool name that is empty or too long: `{bad}`"));
            }
        }
    }
    let timeout = match section.timeout_secs {
        None => DEFAULT_TIMEOUT,
        Some(s) if (1..=MAX_TIMEOUT_SECS).contains(&s) => Duration::from_secs(s),
        Some(s) => return Err(format!("{at}: `timeout_secs` must be 1 to {MAX_TIMEOUT_SECS}, not {s}")),
    };
    Ok(McpServer {
        name: name.to_owned(),
        transport,
        require_approval: section.require_approval.clone(),
        idempotent: section.idempotent.clone(),
        timeout,
        secrets,
    })
}

/// `NAME`: 1 to 32 of `A-Z a-z 0-9 _ -`, without `__` and not ending in
/// `_` (so `NAME__tool` splits at its first `__`).
fn check_name(name: &str) -> Result<(), String> {
    let valid_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if name.is_empty() || name.chars().count() > MAX_SERVER_NAME_CHARS || !valid_chars {
        return Err(format!(
            "[mcp.{name}]: a server name is 1 to {MAX_SERVER_NAME_CHARS} of the characters A-Z a-z 0-9 _ -"
        ));
    }
    if name.contains("__") || name.ends_with('_') {
        return Err(format!(
            "[mcp.{name}]: a server name must not contain `__` or end in `_` (its tools are named `{name}__tool`)"
        ));
    }
    Ok(())
}

fn unset(at: &str, table: &str, key: &str, var: &str) -> String {
    format!("{at}: {table}.{key} names the environment variable `{var}`, which is not set")
}

/// The safe part of runlens's environment a stdio server starts with.
fn inherited(env: &impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    INHERITED_ENV.iter().filter_map(|k| env(k).map(|v| (k.to_string(), v))).collect()
}

/// A value with its variables read: the whole value `$VAR`, or `${VAR}`
/// anywhere in it (each value read is a secret too). Anything else is
/// literal. `Err` names an unset variable.
pub(crate) fn expand(
    value: &str,
    env: &impl Fn(&str) -> Option<String>,
    secrets: &mut Secrets,
) -> Result<String, String> {
    let mut read = |var: &str| {
        let value = env(var).ok_or_else(|| var.to_owned())?;
        secrets.add(&value);
        Ok::<_, String>(value)
    };
    if let Some(var) = value.strip_prefix('$').filter(|v| is_var_name(v)) {
        return read(var);
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else { break };
        let var = &rest[start + 2..start + 2 + len];
        if !is_var_name(var) {
            out.push_str(&rest[..start + 2]);
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(&read(var)?);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml_text: &str) -> BTreeMap<String, McpServerConfig> {
        toml::from_str(toml_text).expect("the test's TOML parses")
    }

    fn env(k: &str) -> Option<String> {
        match k {
            "TOKEN" => Some("s3cret-token".into()),
            "PATH" => Some("/usr/bin".into()),
            "OPENAI_API_KEY" => Some("sk-not-for-servers".into()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_read_and_secrets_kept_out_of_text() {
        let servers = resolve(
            &section(
                r#"
                [remote]
                url = "https://mcp.example.com/mcp"
                headers = { Authorization = "Bearer ${TOKEN}", X-Plain = "literal" }
                [local]
                command = ["node", "server.js"]
                env = { API_TOKEN = "$TOKEN", MODE = "${MISSING-not-a-var}" }
                "#,
            ),
            env,
        )
        .unwrap();
        let (local, remote) = (&servers[0], &servers[1]);
        let Transport::Http { headers, .. } = &remote.transport else { panic!("http") };
        assert_eq!(headers[0].1.to_str().unwrap(), "Bearer s3cret-token");
        assert!(headers[0].1.is_sensitive());
        let Transport::Stdio { program, args, env: vars } = &local.transport else { panic!("stdio") };
        assert_eq!((program.as_str(), args.as_slice()), ("node", &["server.js".to_owned()][..]));
        let vars: BTreeMap<_, _> = vars.iter().cloned().collect();
        assert_eq!(vars["API_TOKEN"], "s3cret-token");
        assert_eq!(vars["MODE"], "${MISSING-not-a-var}", "not a variable name: literal");
        assert_eq!(vars["PATH"], "/usr/bin");
        assert!(!vars.contains_key("OPENAI_API_KEY"), "runlens's own secrets stay with runlens");
        assert_eq!(remote.secrets.redact("got Bearer s3cret-token back"), "got [redacted] back");
        assert_eq!(remote.secrets.redact("token s3cret-token, literal"), "token [redacted], [redacted]");
        assert_eq!(local.secrets.redact("token=s3cret-token"), "token=[redacted]");
        assert!(!format!("{remote:?} {:?}", section("[x]\nurl='http://a'\nheaders={A='$TOKEN'}")).contains("s3cret"));
    }

    #[test]
    fn mistakes_stop_the_start_with_the_section_named() {
        let err = |text: &str| resolve(&section(text), env).unwrap_err();
        assert!(err("[a]\ncommand=['x']\nurl='http://h/mcp'").contains("[mcp.a] has both `command` and `url`"));
        assert!(err("[a]\ntimeout_secs=5").contains("needs `command`"));
        assert!(err("[a__b]\ncommand=['x']").contains("must not contain `__`"));
        assert!(err("[a_]\ncommand=['x']").contains("end in `_`"));
        assert!(err("['a.b']\ncommand=['x']").contains("A-Z a-z 0-9 _ -"));
        assert!(err(&format!("[{}]\ncommand=['x']", "n".repeat(33))).contains("1 to 32"));
        assert!(err("[a]\ncommand=[]").contains("must start with the program"));
        assert!(err("[a]\nurl='ftp://h/x'").contains("http:// or https://"));
        assert!(err("[a]\ncommand=['x']\ntimeout_secs=0").contains("1 to 3600, not 0"));
        assert!(err("[a]\nurl='http://h/mcp'\nheaders={Accept='x'}").contains("set by the MCP transport"));
        assert!(err("[a]\ncommand=['x']\nheaders={A='b'}").contains("`headers` are for `url` servers"));
        let unset = err("[a]\nurl='http://h/mcp'\nheaders={Authorization='Bearer ${NOPE}'}");
        assert_eq!(unset, "[mcp.a]: headers.Authorization names the environment variable `NOPE`, which is not set");
        let bad_value = err("[a]\nurl='http://h/mcp'\nheaders={A=\"x\\ny-$TOKEN\"}");
        assert!(bad_value.contains("not a valid header value") && !bad_value.contains("s3cret"), "{bad_value}");
        assert!(err("[a]\ncommand=['x']\nrequire_approval=['']").contains("`require_approval` lists"));
    }
}
