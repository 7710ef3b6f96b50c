//! The operator's config file, `runlens.toml` (`runlens --config FILE`):
//! model providers, MCP servers, where HTTP tools and webhooks may connect,
//! tool selection, webhook delivery and OpenTelemetry export. Each part is
//! described and checked by the module it configures (`llm::providers`,
//! `tools::config`, `otel::config`); this file only puts them together,
//! above all of them, so none of them depends on the others.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::llm::providers::{self, ProviderConfig};
use crate::llm::ModelRegistry;
use crate::model::{TreeBudget, TreeLimits};
use crate::otel::OtelConfig;
use crate::tools::config::{HttpConfig, McpServerConfig, SelectionConfig, WebhooksConfig};

/// The runlens config file. Unknown keys are errors, so a typo such as
/// `[provider.openai]` or `api_key_evn` is reported instead of ignored.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunlensConfig {
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// MCP servers whose tools every project can call (see `tools::config`).
    #[serde(default)]
    pub mcp: BTreeMap<String, McpServerConfig>,
    /// Where HTTP tools and webhooks may send requests.
    #[serde(default)]
    pub http: HttpConfig,
    /// How many tools one turn offers at most.
    #[serde(default)]
    pub tool_selection: SelectionConfig,
    /// How status webhooks are sent and retried.
    #[serde(default)]
    pub webhooks: WebhooksConfig,
    /// Where runs are exported as OpenTelemetry traces, if anywhere.
    #[serde(default)]
    pub otel: Option<OtelConfig>,
    /// Bounds on every tree of runs (`runs`, `depth`, `turns`, `tokens`);
    /// an agent's `tree_budget` may lower them for its trees (see
    /// `model::TreeLimits`).
    #[serde(default)]
    pub tree_budget: TreeBudget,
}

impl RunlensConfig {
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let config: Self = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())?;
        config.tree_budget.check_bounds("tree_budget")?;
        Ok(config)
    }

    /// The bounds of every tree of runs: the defaults, with `max_depth`
    /// (`--max-agent-depth`) as the depth, lowered by `[tree_budget]`.
    pub fn tree_limits(&self, max_depth: u32) -> TreeLimits {
        TreeLimits { depth: max_depth, ..TreeLimits::default() }.within(&self.tree_budget)
    }

    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| format!("the config file {} is not valid: {e}", path.display()))
    }

    /// Adds `openai` from the environment when the file does not configure
    /// it (see `llm::providers`).
    pub fn with_env_fallback(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        providers::with_env_fallback(&mut self.providers, env);
        self
    }

    /// Checks every provider and reads each `api_key_env` (see `llm::providers::resolve`).
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Vec<(String, ProviderConfig)>, String> {
        providers::resolve(&self.providers, env)
    }

    /// The built-in model plus every configured `provider/model`.
    pub fn registry(&self, env: impl Fn(&str) -> Option<String>) -> Result<ModelRegistry, String> {
        ModelRegistry::with_providers(&self.resolve(env)?)
    }
}

/// Start-up in one call: the file at `path` (if any) plus the environment
/// fallback, as a model registry. The error is meant for the operator.
pub fn registry_from(path: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<ModelRegistry, String> {
    load_config(path)?.with_env_fallback(&env).registry(&env)
}

/// The config file at `path`, or the defaults when there is none.
pub fn load_config(path: Option<&Path>) -> Result<RunlensConfig, String> {
    match path {
        Some(path) => RunlensConfig::load(path),
        None => Ok(RunlensConfig::default()),
    }
}
