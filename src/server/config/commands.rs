//! The command line's other commands: `runlens user …` (add a user, reset a
//! password), `runlens otel-export` (send finished runs to the `[otel]`
//! endpoint) and `runlens eval` (an experiment on a server, for CI).

use std::path::PathBuf;

use super::{split_flag, DEFAULT_DATABASE_URL};

/// The `user` subcommands.
#[derive(Debug, PartialEq)]
pub enum UserCommand {
    Add { name: String, role: String, project: Option<String>, database_url: String },
    ResetPassword { name: String, database_url: String },
}

/// `runlens otel-export`: which runs, from where, to where.
#[derive(Debug, PartialEq)]
pub struct OtelExportCommand {
    /// The runs named with `--run`.
    pub runs: Vec<String>,
    /// Or every run started at or after this time.
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    pub database_url: String,
    pub config_file: Option<PathBuf>,
}

impl OtelExportCommand {
    pub(super) fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<OtelExportCommand, String> {
        let usage =
            "usage: runlens otel-export (--run ID [--run ID …] | --since TIME) [--config FILE] [--database-url URL]";
        let mut runs = Vec::new();
        let mut since = None;
        let mut database_url = env("DATABASE_URL");
        let mut config_file = env("RUNLENS_CONFIG").filter(|f| !f.is_empty());
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = split_flag(arg);
            let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{flag} needs a value"));
            match flag {
                "--run" => runs.push(value()?),
                "--since" => since = Some(parse_time(&value()?)?),
                "--database-url" => database_url = Some(value()?),
                "--config" => config_file = Some(value()?),
                other => return Err(format!("unknown argument `{other}`\n{usage}")),
            }
        }
        if runs.is_empty() == since.is_none() {
            return Err(format!("give the runs to send with --run, or --since (not both)\n{usage}"));
        }
        Ok(OtelExportCommand {
            runs,
            since,
            database_url: database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into()),
            config_file: config_file.map(PathBuf::from),
        })
    }
}

/// RFC 3339 (`2026-11-01T08:00:00Z`) or a date (`2026-11-01`, midnight UTC).
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&chrono::Utc));
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or(format!("--since `{text}` is not a time like 2026-11-01 or 2026-11-01T08:00:00Z"))
}

impl UserCommand {
    pub(super) fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<UserCommand, String> {
        let usage = "usage: runlens user add NAME [--role ROLE] [--project P] | runlens user reset-password NAME";
        let (verb, rest) = args.split_first().ok_or(usage)?;
        let mut name = None;
        let mut role = None;
        let mut project = None;
        let mut database_url = env("DATABASE_URL");
        let mut it = rest.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = split_flag(arg);
            let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{flag} needs a value"));
            match flag {
                "--role" if verb == "add" => role = Some(value()?),
                "--project" if verb == "add" => project = Some(value()?),
                "--database-url" => database_url = Some(value()?),
                other if !other.starts_with('-') && name.is_none() => name = Some(other.to_owned()),
                other => return Err(format!("unknown argument `{other}`\n{usage}")),
            }
        }
        let name = name.ok_or(usage)?;
        let database_url = database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
        match verb.as_str() {
            "add" => {
                Ok(UserCommand::Add { name, role: role.unwrap_or_else(|| "viewer".into()), project, database_url })
            }
            "reset-password" => Ok(UserCommand::ResetPassword { name, database_url }),
            _ => Err(usage.into()),
        }
    }
}

/// `runlens eval`: an experiment on a running server, judged by thresholds.
#[derive(Debug, PartialEq)]
pub struct EvalCommand {
    /// The server: `--url`, `RUNLENS_URL`, else `http://127.0.0.1:3000`.
    pub url: String,
    /// `--key` or `RUNLENS_API_KEY`.
    pub key: String,
    /// `--project` (the key's own when absent).
    pub project: Option<String>,
    /// A dataset's name or id.
    pub dataset: String,
    /// A saved agent's name or id, and a version (`NAME@3`).
    pub agent: Option<(String, Option<u32>)>,
    pub model: Option<String>,
    /// Scorer kinds that compare with each item's `expected` (default `contains`).
    pub scorers: Vec<String>,
    /// `SCORER=VALUE`: the scorer's mean (yes = 1) must be at least VALUE.
    pub min: Vec<(String, f64)>,
    /// `recorded` (default) or `live`.
    pub tools: String,
    pub concurrency: Option<u32>,
    /// How long to wait for the experiment, in seconds (default 3600).
    pub timeout_s: u64,
}

pub const EVAL_USAGE: &str = "usage: runlens eval --dataset NAME (--agent NAME[@VERSION] | --model NAME) \
[--scorer KIND …] [--min SCORER=VALUE …] [--tools recorded|live] [--concurrency N] [--url URL] [--key KEY] \
[--project P] [--timeout SECS]";

impl EvalCommand {
    pub(super) fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<EvalCommand, String> {
        let mut cmd = EvalCommand {
            url: env("RUNLENS_URL").filter(|u| !u.is_empty()).unwrap_or_else(|| "http://127.0.0.1:3000".into()),
            key: env("RUNLENS_API_KEY").unwrap_or_default(),
            project: None,
            dataset: String::new(),
            agent: None,
            model: None,
            scorers: Vec::new(),
            min: Vec::new(),
            tools: "recorded".into(),
            concurrency: None,
            timeout_s: 3600,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = split_flag(arg);
            let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{flag} needs a value"));
            match flag {
                "--url" => cmd.url = value()?,
                "--key" => cmd.key = value()?,
                "--project" => cmd.project = Some(value()?),
                "--dataset" => cmd.dataset = value()?,
                "--agent" => {
                    let text = value()?;
                    cmd.agent = Some(match text.rsplit_once('@') {
                        Some((name, v)) => {
                            let v =
                                v.parse().ok().filter(|v| *v > 0).ok_or(format!(
                                    "--agent `{text}`: the version after @ must be a positive number"
                                ))?;
                            (name.to_owned(), Some(v))
                        }
                        None => (text, None),
                    });
                }
                "--model" => cmd.model = Some(value()?),
                "--scorer" => cmd.scorers.push(value()?),
                "--min" => {
                    let text = value()?;
                    let (name, v) = text.split_once('=').ok_or(format!("--min `{text}`: write SCORER=VALUE"))?;
                    let v: f64 = v
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite())
                        .ok_or(format!("--min `{text}`: VALUE must be a number"))?;
                    cmd.min.push((name.to_owned(), v));
                }
                "--tools" => {
                    cmd.tools = value()?;
                    if cmd.tools != "recorded" && cmd.tools != "live" {
                        return Err(format!("--tools must be `recorded` or `live`\n{EVAL_USAGE}"));
                    }
                }
                "--concurrency" => {
                    let text = value()?;
                    cmd.concurrency =
                        Some(text.parse().map_err(|_| format!("--concurrency `{text}` is not a number"))?);
                }
                "--timeout" => {
                    let text = value()?;
                    cmd.timeout_s =
                        text.parse().map_err(|_| format!("--timeout `{text}` is not a number of seconds"))?;
                }
                other => return Err(format!("unknown argument `{other}`\n{EVAL_USAGE}")),
            }
        }
        if cmd.dataset.is_empty() {
            return Err(format!("give the dataset with --dataset\n{EVAL_USAGE}"));
        }
        if cmd.agent.is_some() == cmd.model.is_some() {
            return Err(format!("give --agent or --model (one of them)\n{EVAL_USAGE}"));
        }
        if cmd.key.is_empty() {
            return Err(format!("give an API key with --key or RUNLENS_API_KEY\n{EVAL_USAGE}"));
        }
        if cmd.scorers.is_empty() {
            cmd.scorers.push("contains".into());
        }
        Ok(cmd)
    }
}
