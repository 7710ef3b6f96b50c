//! The `runlens` binary: parses the configuration, opens the store, resumes
//! interrupted runs, and serves the app until Ctrl-C or SIGTERM; a shutdown
//! ends open event streams, waits for requests in flight and stores the
//! events published so far, in at most 10 s.

use std::sync::Arc;

use leptos::config::LeptosOptions;
use runlens::server::config::{Command, USAGE};
use runlens::server::{self, AppState, Config};
use runlens_engine::llm::{providers, ModelRegistry};
use runlens_engine::store::SqliteStore;
use runlens_engine::tools::ToolRegistry;
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
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=warn".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match Config::parse(&args, |k| std::env::var(k).ok()) {
        Ok(Command::Serve(c)) => c,
        Ok(Command::GenTrace { steps, database_url }) => return gen_trace(steps, &database_url).await,
        Ok(Command::Help) => return print!("{USAGE}"),
        Ok(Command::Version) => return println!("runlens {}", env!("CARGO_PKG_VERSION")),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // A bad providers config is the operator's to fix, like a bad flag: exit 2.
    let models = match providers::registry_from(config.config_file.as_deref(), |k| std::env::var(k).ok()) {
        Ok(models) => models,
        Err(e) => {
            eprintln!("runlens: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = serve(config, models).await {
        eprintln!("runlens: {e}");
        std::process::exit(1);
    }
}

async fn serve(config: Config, models: ModelRegistry) -> Result<(), Box<dyn std::error::Error>> {
    let store = SqliteStore::open(&config.database_url)
        .await
        .map_err(|e| format!("cannot open the database {}: {e}", config.database_url))?;
    let engine_config = EngineConfig { max_concurrent_runs: config.max_concurrent_runs, ..EngineConfig::default() };
    tracing::info!(models = ?models.names(), "models available");
    let engine = Engine::with_parts(Arc::new(store), ToolRegistry::with_builtins(), models, engine_config);
    let resumed = engine.recover().await?;
    if resumed > 0 {
        tracing::info!(resumed, "resumed runs left unfinished by the previous process");
    }
    let leptos_options = LeptosOptions::builder()
        .output_name("runlens")
        .site_root(config.site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .build();
    if !config.site_root.join("pkg").join("runlens.js").is_file() {
        tracing::warn!(site_root = %config.site_root.display(),
            "no built site found there (pkg/runlens.js); pages will not hydrate — run scripts/build.sh or set LEPTOS_SITE_ROOT");
    }
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    tracing::info!("runlens listening on http://{}", listener.local_addr()?);
    server::run(
        listener,
        AppState { engine: engine.clone(), leptos_options, public_origin: config.public_origin.clone() },
        server::shutdown_signal(),
    )
    .await?;
    // The final flush, bounded: with the server's grace period a shutdown
    // takes at most 10 s. Events not stored by then are lost with the
    // process; none of them was shown to anyone (see `runlens_engine::events`).
    if tokio::time::timeout(FLUSH_BOUND, engine.flush_events()).await.is_err() {
        let why = engine.events_health().err().unwrap_or_else(|| "the event log is slow".into());
        tracing::error!(bound = ?FLUSH_BOUND, %why, "events published before the shutdown could not all be stored");
    }
    tracing::info!("stopped");
    Ok(())
}

/// How long the final event flush may take after the server stopped.
const FLUSH_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// `runlens gen-trace`: the huge-trace fixture (see `Engine::generate_trace`).
async fn gen_trace(steps: u32, database_url: &str) {
    let made = async {
        let engine = Engine::open_sqlite(database_url, EngineConfig::default()).await?;
        engine.generate_trace(steps).await
    };
    match made.await {
        Ok(run) => println!("{}", run.id),
        Err(e) => {
            eprintln!("runlens gen-trace: {e}");
            std::process::exit(1);
        }
    }
}
