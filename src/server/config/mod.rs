//! Server configuration from the command line and the environment.
//!
//! `runlens [serve] [--addr HOST:PORT] [--database-url URL] [--site-root DIR] [--config FILE]
//! [--public-origin URL]`; each flag falls back to an environment variable (`RUNLENS_ADDR`,
//! `DATABASE_URL`, `LEPTOS_SITE_ROOT`, `RUNLENS_CONFIG`, `RUNLENS_PUBLIC_ORIGIN`), then to a safe
//! default: loopback only. The connection limits (`--max-connections`, the timeouts,
//! `--max-streams-per-client`, see `server::connections`) work the same way. The config file
//! (TOML) configures model providers.

mod commands;

pub use commands::{EvalCommand, OtelExportCommand, UserCommand, EVAL_USAGE};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_ADDR: &str = "127.0.0.1:3000";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://runlens.db";

pub const USAGE: &str = "\
runlens — run, watch and debug LLM agents

USAGE:
    runlens [serve] [OPTIONS]
    runlens gen-trace [--steps N] [--database-url URL]
                            make an N-step run (default 10000) with the scripted
                            built-in model and print its id (a fixture for huge traces)
    runlens gen-experiment [--items N] [--database-url URL]
                            run a finished experiment of N items (default 10000, at most
                            10000) with the built-in model and print its id (a fixture)
    runlens user add NAME [--role ROLE] [--project P] [--database-url URL]
                            create a user, reading the password from stdin; `--role admin`
                            without `--project` makes an instance admin (every project);
                            otherwise ROLE (viewer, operator, approver, admin) in P
                            (default `default`)
    runlens user reset-password NAME [--database-url URL]
                            set a user's password from stdin and end their sessions
    runlens otel-export (--run ID [--run ID …] | --since TIME) [--config FILE] [--database-url URL]
                            send finished runs (and their child runs) to the `[otel]` endpoint
                            of the config file: the runs named, or every run started at or after
                            TIME (RFC 3339, or a date like 2026-11-01, UTC)
    runlens eval --dataset NAME (--agent NAME[@VERSION] | --model NAME) [--scorer KIND …]
                 [--min SCORER=VALUE …] [--tools recorded|live] [--concurrency N]
                 [--url URL] [--key KEY] [--project P] [--timeout SECS]
                            run an experiment on the server at URL (RUNLENS_URL, default
                            http://127.0.0.1:3000) with KEY (RUNLENS_API_KEY), print each
                            scorer's summary, and exit 1 when a scorer's mean (yes = 1) is
                            under its --min (scorers: contains, exact, tool_calls; default
                            contains)

OPTIONS:
    --addr HOST:PORT        where to listen (env RUNLENS_ADDR; default 127.0.0.1:3000)
    --database-url URL      sqlite://FILE (one server), or postgres://USER@HOST:PORT/DB (several
                            servers share it; `?options[search_path]=NAME` for a schema of its
                            own) (env DATABASE_URL; default sqlite://runlens.db)
    --server-address URL    where other people reach this server, as the server list shows it
                            (env RUNLENS_SERVER_ADDRESS; default http://ADDR)
    --lease-secs N          PostgreSQL: how long a run's lease lasts without renewal; runs of a
                            server that stopped are taken over within N + 2 s (env
                            RUNLENS_LEASE_SECS; default 15, from 3 to 300)
    --site-root DIR         the built site with pkg/ (env LEPTOS_SITE_ROOT; default: found
                            next to the binary's target/ directory, else ./target/site)
    --max-concurrent-runs N runs driven at once (env RUNLENS_MAX_CONCURRENT_RUNS; default 64)
    --max-agent-depth N     how deep sub-agent calls may nest (env RUNLENS_MAX_AGENT_DEPTH;
                            default 4); a call past it fails, telling the model why
    --max-child-runs N      child runs one run may start (env RUNLENS_MAX_CHILD_RUNS; default 32)
    --config FILE           TOML file with [providers.NAME] sections for real models
                            (env RUNLENS_CONFIG; default none: `builtin`, plus `openai`
                            when OPENAI_API_KEY is set)
    --public-origin URL     the origin browsers reach runlens at, like https://runlens.example.com,
                            when a reverse proxy serves it under another name than its
                            Host (env RUNLENS_PUBLIC_ORIGIN; default none: unsafe requests
                            are allowed from the request's own Host only)
    --max-connections N     connections open at once (env RUNLENS_MAX_CONNECTIONS; default
                            10000, lowered to fit the open-file limit); at the cap a new one
                            closes an idle one
    --header-timeout-secs N a new connection must send a whole request head within N s
                            (env RUNLENS_HEADER_TIMEOUT_SECS; default 10)
    --keep-alive-secs N     an idle connection between requests is closed after N s
                            (env RUNLENS_KEEP_ALIVE_SECS; default 60)
    --body-timeout-secs N   a request body must arrive whole within N s
                            (env RUNLENS_BODY_TIMEOUT_SECS; default 60)
    --send-timeout-secs N   a response the client reads nothing of for N s is cut off
                            (env RUNLENS_SEND_TIMEOUT_SECS; default 60)
    --max-streams-per-client N
                            event streams and long-polls one user or API key may have open
                            at once (env RUNLENS_MAX_STREAMS_PER_CLIENT; default 32)
    -h, --help              this text
    -V, --version           the version
";

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub addr: SocketAddr,
    pub database_url: String,
    pub site_root: PathBuf,
    pub max_concurrent_runs: usize,
    /// How deep a tree of agent calls may grow.
    pub max_agent_depth: u32,
    /// Child runs one run may start.
    pub max_child_runs: u32,
    /// The TOML file configuring model providers, if any.
    pub config_file: Option<PathBuf>,
    /// `scheme://host[:port]` browsers use when it is not the request's
    /// `Host` (see `server::guard`).
    pub public_origin: Option<String>,
    /// Where this server is reached, as the server registry lists it.
    pub server_address: String,
    /// PostgreSQL: how long a run's lease lasts without renewal.
    pub lease: std::time::Duration,
    /// Connection limits and timeouts, and streams per client.
    pub limits: super::connections::Limits,
}

/// The flags (and their environment variables) of [`Limits`](super::connections::Limits).
const LIMIT_FLAGS: [(&str, &str); 6] = [
    ("--max-connections", "RUNLENS_MAX_CONNECTIONS"),
    ("--header-timeout-secs", "RUNLENS_HEADER_TIMEOUT_SECS"),
    ("--keep-alive-secs", "RUNLENS_KEEP_ALIVE_SECS"),
    ("--body-timeout-secs", "RUNLENS_BODY_TIMEOUT_SECS"),
    ("--send-timeout-secs", "RUNLENS_SEND_TIMEOUT_SECS"),
    ("--max-streams-per-client", "RUNLENS_MAX_STREAMS_PER_CLIENT"),
];

/// The limits from the flags given (`flags`), else the environment, else the defaults.
fn parse_limits(
    flags: &std::collections::HashMap<&str, String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<super::connections::Limits, String> {
    let defaults = super::connections::Limits::default();
    let value = |i: usize, default: u64, max: u64| -> Result<u64, String> {
        let (flag, var) = LIMIT_FLAGS[i];
        match flags.get(flag).cloned().or_else(|| env(var).filter(|v| !v.is_empty())) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(format!("{flag} `{v}` is not a number from 1 to {max}")),
        }
    };
    let secs =
        |i: usize, default: std::time::Duration| value(i, default.as_secs(), 3600).map(std::time::Duration::from_secs);
    Ok(super::connections::Limits {
        max_connections: value(0, defaults.max_connections as u64, 1_000_000)? as usize,
        header_timeout: secs(1, defaults.header_timeout)?,
        keep_alive: secs(2, defaults.keep_alive)?,
        body_timeout: secs(3, defaults.body_timeout)?,
        send_timeout: secs(4, defaults.send_timeout)?,
        max_streams_per_client: value(5, defaults.max_streams_per_client as u64, 100_000)? as usize,
    })
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Serve(Config),
    /// `gen-trace`: make a long run into `database_url`, print its id.
    GenTrace {
        steps: u32,
        database_url: String,
    },
    /// `gen-experiment`: make a finished experiment of `items` items into
    /// `database_url` (the experiment page's benchmark), print its id.
    GenExperiment {
        items: u32,
        database_url: String,
    },
    /// `user add` / `user reset-password`.
    User(UserCommand),
    /// `otel-export`: send finished runs to the config file's `[otel]` endpoint.
    OtelExport(OtelExportCommand),
    /// `eval`: an experiment on a running server, judged by thresholds (for CI).
    Eval(EvalCommand),
    Help,
    Version,
}

impl Config {
    /// Parses `args` (without the program name), with `env` for fallbacks.
    pub fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<Command, String> {
        if args.first().is_some_and(|a| a == "user") {
            return UserCommand::parse(&args[1..], env).map(Command::User);
        }
        if args.first().is_some_and(|a| a == "otel-export") {
            return OtelExportCommand::parse(&args[1..], env).map(Command::OtelExport);
        }
        if args.first().is_some_and(|a| a == "eval") {
            return EvalCommand::parse(&args[1..], env).map(Command::Eval);
        }
        let mut given = ServeArgs::from_env(&env);
        let mut it = args.iter();
        let gen_trace = args.first().is_some_and(|a| a == "gen-trace");
        let gen_experiment = args.first().is_some_and(|a| a == "gen-experiment");
        if gen_trace || gen_experiment {
            it.next();
        }
        while let Some(arg) = it.next() {
            let (flag, inline) = split_flag(arg);
            let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{flag} needs a value"));
            match flag {
                "serve" => {}
                "-h" | "--help" | "help" => return Ok(Command::Help),
                "-V" | "--version" => return Ok(Command::Version),
                "--steps" if gen_trace => given.gen_steps = Some(value()?),
                "--items" if gen_experiment => given.gen_steps = Some(value()?),
                f if given.slot(f).is_some() => {
                    let text = value()?;
                    *given.slot(f).expect("a known flag") = Some(text);
                }
                f if LIMIT_FLAGS.iter().any(|(l, _)| *l == f) => {
                    given.limit_flags.insert(f, value()?);
                }
                other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
            }
        }
        if gen_trace {
            return given.gen_trace();
        }
        if gen_experiment {
            return given.gen_experiment();
        }
        given.serve(&env).map(Command::Serve)
    }
}

/// The settings of `serve` (and `gen-trace`, `gen-experiment`) as given, flags over the
/// environment, not yet checked.
struct ServeArgs<'a> {
    addr: Option<String>,
    database_url: Option<String>,
    site_root: Option<String>,
    max_runs: Option<String>,
    max_depth: Option<String>,
    max_children: Option<String>,
    config_file: Option<String>,
    public_origin: Option<String>,
    server_address: Option<String>,
    lease: Option<String>,
    limit_flags: std::collections::HashMap<&'a str, String>,
    /// `gen-trace`'s steps, or `gen-experiment`'s items.
    gen_steps: Option<String>,
}

impl<'a> ServeArgs<'a> {
    fn from_env(env: &impl Fn(&str) -> Option<String>) -> Self {
        ServeArgs {
            addr: env("RUNLENS_ADDR"),
            database_url: env("DATABASE_URL"),
            site_root: env("LEPTOS_SITE_ROOT"),
            max_runs: env("RUNLENS_MAX_CONCURRENT_RUNS"),
            max_depth: env("RUNLENS_MAX_AGENT_DEPTH"),
            max_children: env("RUNLENS_MAX_CHILD_RUNS"),
            config_file: env("RUNLENS_CONFIG").filter(|f| !f.is_empty()),
            public_origin: env("RUNLENS_PUBLIC_ORIGIN").filter(|f| !f.is_empty()),
            server_address: env("RUNLENS_SERVER_ADDRESS").filter(|f| !f.is_empty()),
            lease: env("RUNLENS_LEASE_SECS"),
            limit_flags: Default::default(),
            gen_steps: None,
        }
    }

    /// The setting a value flag sets; `None` for a flag that is not one.
    fn slot(&mut self, flag: &str) -> Option<&mut Option<String>> {
        Some(match flag {
            "--addr" => &mut self.addr,
            "--database-url" => &mut self.database_url,
            "--site-root" => &mut self.site_root,
            "--max-concurrent-runs" => &mut self.max_runs,
            "--max-agent-depth" => &mut self.max_depth,
            "--max-child-runs" => &mut self.max_children,
            "--config" => &mut self.config_file,
            "--public-origin" => &mut self.public_origin,
            "--server-address" => &mut self.server_address,
            "--lease-secs" => &mut self.lease,
            _ => return None,
        })
    }

    fn gen_trace(self) -> Result<Command, String> {
        let steps = self.gen_steps.unwrap_or_else(|| "10000".into());
        let steps =
            steps.parse().ok().filter(|n| *n > 0).ok_or(format!("--steps `{steps}` is not a positive number"))?;
        let database_url = self.database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
        Ok(Command::GenTrace { steps, database_url })
    }

    fn gen_experiment(self) -> Result<Command, String> {
        let items = self.gen_steps.unwrap_or_else(|| "10000".into());
        let items =
            items.parse().ok().filter(|n| *n > 0).ok_or(format!("--items `{items}` is not a positive number"))?;
        let database_url = self.database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
        Ok(Command::GenExperiment { items, database_url })
    }

    /// The checked configuration of `serve`.
    fn serve(self, env: &impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let addr = self.addr.unwrap_or_else(|| DEFAULT_ADDR.into());
        let addr: SocketAddr = addr.parse().map_err(|_| format!("--addr `{addr}` is not HOST:PORT"))?;
        let max_concurrent_runs = match self.max_runs {
            None => 64,
            Some(n) => n
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("max concurrent runs `{n}` is not a positive number"))?,
        };
        let bounded = |text: Option<String>, what: &str, default: u32, max: u32| match text {
            None => Ok(default),
            Some(n) => n
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(format!("{what} `{n}` is not a number from 1 to {max}")),
        };
        let max_agent_depth =
            bounded(self.max_depth, "max agent depth", runlens_engine::model::limits::DEFAULT_MAX_DEPTH, 64)?;
        let max_child_runs =
            bounded(self.max_children, "max child runs", runlens_engine::model::limits::DEFAULT_MAX_CHILDREN, 10_000)?;
        let lease = std::time::Duration::from_secs(u64::from(bounded(self.lease, "lease seconds", 15, 300)?.max(3)));
        let server_address = self.server_address.unwrap_or_else(|| format!("http://{addr}"));
        if server_address.len() > 2048 || server_address.chars().any(char::is_control) {
            return Err("--server-address is longer than 2,048 characters or holds control characters".into());
        }
        let public_origin = match self.public_origin {
            None => None,
            Some(o) => Some(parse_origin(&o).ok_or(format!(
                "--public-origin `{o}` is not an origin like https://runlens.example.com (scheme and host, no path)"
            ))?),
        };
        let limits = parse_limits(&self.limit_flags, env)?;
        Ok(Config {
            addr,
            database_url: self.database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into()),
            site_root: self.site_root.map(PathBuf::from).unwrap_or_else(find_site_root),
            max_concurrent_runs,
            max_agent_depth,
            max_child_runs,
            config_file: self.config_file.map(PathBuf::from),
            public_origin,
            server_address,
            lease,
            limits,
        })
    }
}

/// `--flag=value` as the flag and its value; anything else as itself.
pub(super) fn split_flag(arg: &str) -> (&str, Option<String>) {
    match arg.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
        _ => (arg, None),
    }
}

/// An origin (`http(s)://host[:port]`, a trailing `/` allowed), normalized.
fn parse_origin(text: &str) -> Option<String> {
    let text = text.trim();
    let text = text.strip_suffix('/').unwrap_or(text);
    let (_, authority) = text.split_once("://")?;
    if authority.contains(['/', '?', '#', '@']) {
        return None;
    }
    super::guard::normalize_origin(text)
}

/// The built site: `target/site` beside the binary's own `target/<profile>/`
/// (so it works from any working directory), else `./target/site`.
fn find_site_root() -> PathBuf {
    let beside_binary =
        std::env::current_exe().ok().and_then(|exe| exe.parent()?.parent().map(|target| target.join("site")));
    beside_binary.filter(|p| has_bundle(p)).unwrap_or_else(|| PathBuf::from("target/site"))
}

fn has_bundle(site: &Path) -> bool {
    super::assets::Bundle::is_built(site)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Command, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Config::parse(&args, |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults_bind_loopback_and_sqlite() {
        let Ok(Command::Serve(c)) = parse(&[], &[]) else { panic!() };
        assert_eq!(c.addr.to_string(), "127.0.0.1:3000");
        assert_eq!(c.database_url, "sqlite://runlens.db");
    }

    #[test]
    fn flags_override_env() {
        let Ok(Command::Serve(c)) = parse(&["serve", "--addr=0.0.0.0:8080"], &[("RUNLENS_ADDR", "127.0.0.1:1")]) else {
            panic!()
        };
        assert_eq!(c.addr.to_string(), "0.0.0.0:8080");
        let Ok(Command::Serve(c)) = parse(&[], &[("DATABASE_URL", "sqlite://x.db")]) else { panic!() };
        assert_eq!(c.database_url, "sqlite://x.db");
        assert_eq!(c.config_file, None);
        let Ok(Command::Serve(c)) = parse(&["--config", "a.toml"], &[("RUNLENS_CONFIG", "b.toml")]) else { panic!() };
        assert_eq!(c.config_file, Some(PathBuf::from("a.toml")));
        let Ok(Command::Serve(c)) = parse(&[], &[("RUNLENS_CONFIG", "b.toml")]) else { panic!() };
        assert_eq!(c.config_file, Some(PathBuf::from("b.toml")));
    }

    #[test]
    fn bad_arguments_are_explained() {
        assert!(parse(&["--addr", "nope"], &[]).unwrap_err().contains("HOST:PORT"));
        assert!(parse(&["--bogus"], &[]).unwrap_err().contains("unknown argument"));
        assert!(parse(&["--addr"], &[]).unwrap_err().contains("needs a value"));
        assert_eq!(parse(&["--help"], &[]), Ok(Command::Help));
    }

    #[test]
    fn the_public_origin_is_an_origin() {
        let Ok(Command::Serve(c)) = parse(&["--public-origin", "https://Runlens.Example.com:443/"], &[]) else {
            panic!()
        };
        assert_eq!(c.public_origin.as_deref(), Some("https://runlens.example.com"));
        let Ok(Command::Serve(c)) = parse(&[], &[("RUNLENS_PUBLIC_ORIGIN", "http://10.0.0.2:8080")]) else { panic!() };
        assert_eq!(c.public_origin.as_deref(), Some("http://10.0.0.2:8080"));
        let Ok(Command::Serve(c)) = parse(&[], &[]) else { panic!() };
        assert_eq!(c.public_origin, None);
        for bad in ["runlens.example.com", "ftp://x", "https://x/app"] {
            assert!(parse(&["--public-origin", bad], &[]).unwrap_err().contains("is not an origin"), "{bad}");
        }
    }

    #[test]
    fn connection_limits_come_from_flags_then_the_environment() {
        let Ok(Command::Serve(c)) = parse(&[], &[]) else { panic!() };
        assert_eq!(c.limits, crate::server::connections::Limits::default());
        let Ok(Command::Serve(c)) = parse(
            &["--max-connections", "500", "--header-timeout-secs=3", "--max-streams-per-client", "4"],
            &[("RUNLENS_MAX_CONNECTIONS", "9"), ("RUNLENS_KEEP_ALIVE_SECS", "20"), ("RUNLENS_BODY_TIMEOUT_SECS", "")],
        ) else {
            panic!()
        };
        assert_eq!(c.limits.max_connections, 500, "a flag wins over the environment");
        assert_eq!(c.limits.header_timeout, std::time::Duration::from_secs(3));
        assert_eq!(c.limits.keep_alive, std::time::Duration::from_secs(20));
        assert_eq!(c.limits.body_timeout, crate::server::connections::Limits::default().body_timeout);
        assert_eq!(c.limits.max_streams_per_client, 4);
        for bad in [["--max-connections", "0"], ["--keep-alive-secs", "x"], ["--send-timeout-secs", "3601"]] {
            assert!(parse(&bad, &[]).unwrap_err().contains("is not a number from 1 to"), "{bad:?}");
        }
    }

    #[test]
    fn gen_trace_takes_steps_and_a_database() {
        let got = parse(&["gen-trace", "--steps", "50", "--database-url", "sqlite://t.db"], &[]);
        assert_eq!(got, Ok(Command::GenTrace { steps: 50, database_url: "sqlite://t.db".into() }));
        let got = parse(&["gen-trace"], &[("DATABASE_URL", "sqlite://e.db")]);
        assert_eq!(got, Ok(Command::GenTrace { steps: 10_000, database_url: "sqlite://e.db".into() }));
        let got = parse(&["gen-experiment", "--items", "500"], &[("DATABASE_URL", "sqlite://x.db")]);
        assert_eq!(got, Ok(Command::GenExperiment { items: 500, database_url: "sqlite://x.db".into() }));
        assert!(parse(&["gen-experiment", "--items", "none"], &[]).is_err());
        assert!(parse(&["gen-experiment", "--steps", "5"], &[]).is_err());
        assert!(parse(&["gen-trace", "--steps", "0"], &[]).is_err());
        assert!(parse(&["--steps", "5"], &[]).unwrap_err().contains("unknown argument"));
    }

    #[test]
    fn otel_export_takes_runs_or_a_time() {
        let Ok(Command::OtelExport(c)) = parse(
            &["otel-export", "--run", "a", "--run=b", "--config", "c.toml"],
            &[("DATABASE_URL", "sqlite://e.db")],
        ) else {
            panic!()
        };
        assert_eq!((c.runs, c.since, c.database_url.as_str()), (vec!["a".into(), "b".into()], None, "sqlite://e.db"));
        assert_eq!(c.config_file, Some(PathBuf::from("c.toml")));
        let Ok(Command::OtelExport(c)) = parse(&["otel-export", "--since", "2026-11-01"], &[]) else { panic!() };
        assert_eq!(c.since.unwrap().to_rfc3339(), "2026-11-01T00:00:00+00:00");
        let Ok(Command::OtelExport(c)) = parse(&["otel-export", "--since", "2026-11-01T08:00:00+01:00"], &[]) else {
            panic!()
        };
        assert_eq!(c.since.unwrap().to_rfc3339(), "2026-11-01T07:00:00+00:00");
        assert!(parse(&["otel-export"], &[]).unwrap_err().contains("--run"));
        assert!(parse(&["otel-export", "--run", "a", "--since", "2026-11-01"], &[]).unwrap_err().contains("not both"));
        assert!(parse(&["otel-export", "--since", "yesterday"], &[]).unwrap_err().contains("not a time"));
    }
}
