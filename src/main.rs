//! The `runlens` binary: parses the configuration, opens the store, and
//! serves the app until Ctrl-C or SIGTERM, resuming interrupted runs in the
//! background meanwhile; a shutdown ends open event streams, waits for
//! requests in flight and stores the events published so far, in at most 10 s.

use leptos::config::LeptosOptions;
use runlens::server::config::{Command, OtelExportCommand, UserCommand, USAGE};
use runlens::server::{self, AppState, Config};
use runlens_engine::config::{load_config, RunlensConfig};
use runlens_engine::llm::ModelRegistry;
use runlens_engine::store::SqliteStore;
use runlens_engine::tools::{mcp, ToolRegistry};
use runlens_engine::{Engine, EngineConfig};

/// See `mimalloc` in Cargo.toml for why (measured in `--bench scale`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    // Logs go to stderr: stdout carries command output (`gen-trace` prints the run id).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // rmcp logs every MCP notification at info (a progress
                // report a second, payloads included): warnings only.
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=warn,rmcp=warn".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match Config::parse(&args, |k| std::env::var(k).ok()) {
        Ok(Command::Serve(c)) => c,
        Ok(Command::GenTrace { steps, database_url }) => return gen_trace(steps, &database_url).await,
        Ok(Command::GenExperiment { items, database_url }) => return gen_experiment(items, &database_url).await,
        Ok(Command::User(command)) => return user_command(command).await,
        Ok(Command::OtelExport(command)) => return otel_export(command).await,
        Ok(Command::Eval(command)) => match runlens::server::eval_cli::run(command).await {
            Ok(summary) => return print!("{summary}"),
            Err(runlens::server::eval_cli::Stop(code, message)) => {
                println!("{message}");
                std::process::exit(code);
            }
        },
        Ok(Command::Help) => return print!("{USAGE}"),
        Ok(Command::Version) => return println!("runlens {}", env!("CARGO_PKG_VERSION")),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // A bad providers config is the operator's to fix, like a bad flag: exit 2.
    let env = |k: &str| std::env::var(k).ok();
    let loaded = load_config(config.config_file.as_deref())
        .and_then(|file| Ok((file.clone().with_env_fallback(env).registry(env)?, file)));
    // So is a bad `[mcp.NAME]` section or a variable it names that is unset.
    let loaded = loaded.and_then(|(models, file)| Ok((models, mcp::resolve(&file.mcp, env)?, file)));
    // And a bad `[otel]` section.
    let loaded = loaded.and_then(|(models, mcp, file)| {
        let otel = file.otel.as_ref().map(|o| o.resolve(env)).transpose()?;
        Ok((models, mcp, otel, file))
    });
    let (models, mcp_servers, otel, file) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("runlens: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = serve(config, file, models, mcp_servers, otel).await {
        eprintln!("runlens: {e}");
        std::process::exit(1);
    }
}

/// `url` without a password (`postgres://user:secret@host/db` → `postgres://user:…@host/db`),
/// for messages and logs.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.rsplit_once('@') else { return url.to_owned() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:…@{host}"),
        None => url.to_owned(),
    }
}

async fn serve(
    config: Config,
    file: RunlensConfig,
    models: ModelRegistry,
    mcp_servers: Vec<mcp::McpServer>,
    otel: Option<runlens_engine::otel::OtelTarget>,
) -> Result<(), Box<dyn std::error::Error>> {
    // Held until the process ends: SQLite serves one server (a second one on
    // the same file would resume and drive the first one's runs).
    let _single_server = if config.database_url.starts_with("sqlite:") {
        SqliteStore::lock_single_server(&config.database_url).map_err(|e| e.to_string())?
    } else {
        None
    };
    let engine = open_engine(&config, &file, models).await?;
    // MCP servers first: a run resumed below may call their tools again
    // (each server's first attempt is awaited, within a bound).
    let mcp = engine.start_mcp(mcp_servers);
    if !mcp.first_attempts(MCP_START_LIMIT).await {
        tracing::warn!(limit = ?MCP_START_LIMIT, "some MCP servers are still connecting; runs resume meanwhile");
    }
    // What must be in place before the first request (HTTP tools, the ends
    // of runs the previous process did not announce): quick at any backlog.
    engine.prepare_recovery().await?;
    // Status webhooks: sends what the outbox holds, also what an earlier process left.
    engine.start_webhooks();
    // Online evaluators: score a sample of the runs that end.
    engine.start_evaluators();
    engine.start_retention();
    // Approval requests and questions from other agents: rejected (expired) at their deadlines.
    engine.start_request_deadlines();
    // Runs this server ends go out as OpenTelemetry traces (checked before anything started).
    let exporter = otel.map(|target| engine.start_otel_export(target));
    // The runs a previous process left are recovered in the background while
    // requests are served (a request about a run not reached yet is answered
    // from the store as always; see `runlens_engine::engine::recovery`).
    let recovery = tokio::spawn(recover_in_background(engine.clone()));
    let leptos_options = site_options(&config);
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let local = listener.local_addr()?;
    tracing::info!("runlens listening on http://{local}");
    if let Some(token) = engine.identity().issue_setup_token().await? {
        let origin = config.public_origin.clone().unwrap_or_else(|| format!("http://{local}"));
        // The one secret printed on purpose: it is the only way in on a
        // first start, valid for an hour and once.
        eprintln!(
            "\n  No user yet. Create the first admin within one hour at:\n\n    {origin}/setup?token={token}\n\n  \
             (or run `runlens user add NAME --role admin`, which reads the password from stdin)\n"
        );
    }
    server::run(
        listener,
        AppState::new(engine.clone(), leptos_options, config.public_origin.clone()).with_limits(config.limits.clone()),
        server::shutdown_signal(),
    )
    .await?;
    flush_on_shutdown(&engine, mcp, exporter).await;
    // On a shared store, this server's runs go back to the queue at once
    // (rather than when their leases expire) and it leaves the server list.
    recovery.abort();
    engine.cluster().leave().await;
    tracing::info!("stopped");
    Ok(())
}

/// Opens the store and the engine on it; the bootstrap API key, when set,
/// is made an instance-admin key.
async fn open_engine(
    config: &Config,
    file: &RunlensConfig,
    models: ModelRegistry,
) -> Result<Engine, Box<dyn std::error::Error>> {
    let store = runlens_engine::store::open(&config.database_url)
        .await
        .map_err(|e| format!("cannot open the database {}: {e}", redact_url(&config.database_url)))?;
    let engine_config = EngineConfig {
        max_concurrent_runs: config.max_concurrent_runs,
        max_depth: config.max_agent_depth,
        max_children: config.max_child_runs,
        tree: file.tree_limits(config.max_agent_depth),
        allow_private_networks: file.http.allow_private_networks,
        tool_selection_max: file.tool_selection.max,
        webhooks: file.webhooks.clone(),
        server_address: Some(config.server_address.clone()),
        lease: config.lease,
        ..EngineConfig::default()
    };
    tracing::info!(models = ?models.names(), "models available");
    let engine = Engine::with_parts(store, ToolRegistry::with_builtins(), models, engine_config);
    if let Some(key) = std::env::var("RUNLENS_BOOTSTRAP_API_KEY").ok().filter(|k| !k.is_empty()) {
        let key = engine
            .identity()
            .ensure_bootstrap_key(&key)
            .await
            .map_err(|e| format!("RUNLENS_BOOTSTRAP_API_KEY: {e}"))?;
        tracing::info!(key = %key.prefix, "the bootstrap API key is an instance-admin key");
    }
    Ok(engine)
}

/// Where the built site (the wasm bundle, styles) is served from; warns
/// when it is not there.
fn site_options(config: &Config) -> LeptosOptions {
    let leptos_options = LeptosOptions::builder()
        .output_name("runlens")
        .site_root(config.site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .build();
    if !runlens::server::assets::Bundle::is_built(&config.site_root) {
        tracing::warn!(site_root = %config.site_root.display(),
            "no built site found there (pkg/manifest.json and the script it names); pages will not hydrate — run scripts/build.sh or set LEPTOS_SITE_ROOT");
    }
    leptos_options
}

/// The final flush, bounded: with the server's grace period a shutdown
/// takes at most 10 s. Events not stored by then are lost with the
/// process; none of them was shown to anyone (see `runlens_engine::events`).
/// MCP servers are stopped meanwhile (within the same bound).
/// Runs that ended meanwhile go out as traces within the same bound.
async fn flush_on_shutdown(
    engine: &Engine,
    mcp: mcp::McpHub,
    exporter: Option<runlens_engine::otel::export::OtelExporter>,
) {
    let started = std::time::Instant::now();
    let (flushed, ()) = tokio::join!(tokio::time::timeout(FLUSH_BOUND, engine.traces().flush_events()), mcp.shutdown());
    if flushed.is_err() {
        let why = engine.traces().events_health().err().unwrap_or_else(|| "the event log is slow".into());
        tracing::error!(bound = ?FLUSH_BOUND, %why, "events published before the shutdown could not all be stored");
    }
    if let Some(exporter) = exporter {
        if let Err(waiting) = exporter.flush(FLUSH_BOUND.saturating_sub(started.elapsed())).await {
            tracing::warn!("{waiting} finished runs were not sent as traces before the shutdown; `runlens otel-export --since` sends them");
        }
    }
}

/// Recovers the runs a previous process left (see `Engine::recover_runs`)
/// and logs how long it took; a failure is logged, and the server serves on.
async fn recover_in_background(engine: Engine) {
    hold_recovery_for_tests().await;
    let started = std::time::Instant::now();
    tracing::info!("recovering the runs the previous process left, in the background");
    match engine.recover_runs().await {
        Ok(done) => tracing::info!(
            driven = done.driven,
            resumed = done.resumed,
            deadlines = done.deadlines,
            failed = done.failed,
            took_ms = started.elapsed().as_millis() as u64,
            "recovery finished"
        ),
        Err(e) => tracing::error!(error = %e, "recovery stopped; runs it did not reach wait for the next start"),
    }
}

/// Debug builds only, for the tests of the real binary: with
/// `RUNLENS_TEST_HOLD_RECOVERY=FILE` recovery waits until FILE exists, so a
/// test can show that requests are served (and correct) before it ran.
async fn hold_recovery_for_tests() {
    #[cfg(debug_assertions)]
    if let Some(file) = std::env::var_os("RUNLENS_TEST_HOLD_RECOVERY") {
        tracing::info!("recovery held until {} exists", std::path::Path::new(&file).display());
        while !std::path::Path::new(&file).exists() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// `runlens user …`: creates a user or resets a password, reading the
/// password from stdin (one line; a terminal shows what is typed).
async fn user_command(command: UserCommand) {
    use runlens_engine::model::{Actor, Role};
    use std::io::BufRead;

    let done: Result<String, String> = async {
        let database_url = match &command {
            UserCommand::Add { database_url, .. } | UserCommand::ResetPassword { database_url, .. } => database_url,
        };
        let engine = Engine::open(database_url, EngineConfig::default()).await.map_err(|e| e.to_string())?;
        eprintln!("password (one line on stdin):");
        let mut password = String::new();
        std::io::stdin().lock().read_line(&mut password).map_err(|e| format!("cannot read stdin: {e}"))?;
        let password = password.trim_end_matches(['\r', '\n']);
        let shell = Actor { id: "system".into(), name: "runlens user (shell)".into() };
        match command {
            UserCommand::Add { name, role, project, .. } => {
                let role =
                    Role::parse(&role).ok_or(format!("--role `{role}` is not viewer, operator, approver or admin"))?;
                let instance_admin = role == Role::Admin && project.is_none();
                let project = project.unwrap_or_else(|| runlens_engine::model::DEFAULT_PROJECT.to_owned());
                // The project first: a user is never left without the role asked for.
                if !instance_admin {
                    engine.identity().project(&project).await.map_err(|e| e.to_string())?;
                }
                let user = engine
                    .identity()
                    .create_user(&name, password, instance_admin, &shell)
                    .await
                    .map_err(|e| e.to_string())?;
                if instance_admin {
                    return Ok(format!("created user `{}`, an instance admin", user.name));
                }
                engine.identity().set_member(&project, &user.name, role, &shell).await.map_err(|e| e.to_string())?;
                Ok(format!("created user `{}`, {role} in `{project}`", user.name))
            }
            UserCommand::ResetPassword { name, .. } => {
                let user =
                    engine.identity().reset_password(&name, password, &shell).await.map_err(|e| e.to_string())?;
                Ok(format!("set the password of `{}`; their sessions are ended", user.name))
            }
        }
    }
    .await;
    match done {
        Ok(message) => println!("{message}"),
        Err(e) => {
            eprintln!("runlens user: {e}");
            std::process::exit(1);
        }
    }
}

/// `runlens otel-export`: sends finished runs to the config file's `[otel]`
/// endpoint and says how many went; exit 1 when something could not be sent.
async fn otel_export(command: OtelExportCommand) {
    let sent: Result<String, String> = async {
        let env = |k: &str| std::env::var(k).ok();
        let file = load_config(command.config_file.as_deref())?;
        let target = file
            .otel
            .as_ref()
            .ok_or("the config file has no [otel] section (give it with --config or RUNLENS_CONFIG)")?
            .resolve(env)?;
        let engine = Engine::open(&command.database_url, EngineConfig::default())
            .await
            .map_err(|e| format!("cannot open the database {}: {e}", redact_url(&command.database_url)))?;
        let ids = match command.since {
            Some(since) => engine.otel().runs_started_since(since).await.map_err(|e| e.to_string())?,
            None => command.runs,
        };
        let sent = runlens_engine::otel::export::export_runs(engine.store().as_ref(), &target, &ids).await?;
        Ok(format!(
            "sent {} runs ({} spans) to {}; {} skipped (not finished, or recorded from received spans)",
            sent.runs, sent.spans, target.url, sent.skipped
        ))
    }
    .await;
    match sent {
        Ok(message) => println!("{message}"),
        Err(e) => {
            eprintln!("runlens otel-export: {e}");
            std::process::exit(1);
        }
    }
}

/// How long the start waits for MCP servers' first connection.
const MCP_START_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// How long the final event flush may take after the server stopped.
const FLUSH_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// `runlens gen-trace`: the huge-trace fixture (see `Engine::generate_trace`).
/// `gen-experiment`: a finished experiment of `items` items, its id printed.
async fn gen_experiment(items: u32, database_url: &str) {
    let made = async {
        let engine = Engine::open(database_url, EngineConfig::default()).await?;
        engine.experiments().generate(items).await
    };
    match made.await {
        Ok(exp) => println!("{}", exp.id),
        Err(e) => {
            eprintln!("runlens gen-experiment: {e}");
            std::process::exit(1);
        }
    }
}

async fn gen_trace(steps: u32, database_url: &str) {
    let made = async {
        let engine = Engine::open(database_url, EngineConfig::default()).await?;
        engine.runs().generate_trace(steps).await
    };
    match made.await {
        Ok(run) => println!("{}", run.id),
        Err(e) => {
            eprintln!("runlens gen-trace: {e}");
            std::process::exit(1);
        }
    }
}
