//! The command line's other commands: `runlens user …` (add a user, reset a
//! password) and `runlens otel-export` (send finished runs to the `[otel]`
//! endpoint).

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
