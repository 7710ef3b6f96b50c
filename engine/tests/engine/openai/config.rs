//! The providers config: TOML parsing, the environment fallback, start-up
//! errors, `provider/model` naming, and keys kept out of `Debug`.

use runlens_engine::config::registry_from;
use runlens_engine::RunlensConfig;

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
}

const SEVERAL: &str = r#"
[providers.openai]
base_url = "https://api.openai.com/v1/"
api_key_env = "OPENAI_API_KEY"
models = ["gpt-4.1-mini", "gpt-4.1"]
context_window = 128000

[providers.ollama]
base_url = "http://127.0.0.1:11434/v1"
models = ["llama3.2"]

[providers.vllm]
base_url = "http://127.0.0.1:8000/v1"
models = ["Qwen/Qwen2.5-7B-Instruct"]
stream = false
request_timeout_secs = 30
max_retries = 1
"#;

#[test]
fn several_providers_are_registered_as_provider_slash_model() {
    let config = RunlensConfig::from_toml(SEVERAL).unwrap();
    let registry = config.registry(env(&[("OPENAI_API_KEY", "sk-from-env-123")])).unwrap();
    assert_eq!(
        registry.names(),
        ["builtin", "ollama/llama3.2", "openai/gpt-4.1", "openai/gpt-4.1-mini", "vllm/Qwen/Qwen2.5-7B-Instruct"]
    );
    let vllm = &config.providers["vllm"];
    assert!(!vllm.stream && vllm.request_timeout_secs == 30 && vllm.max_retries == 1);
    assert_eq!(vllm.connect_timeout_secs, 10, "defaults fill what is not set");

    let resolved = config.resolve(env(&[("OPENAI_API_KEY", "sk-from-env-123")])).unwrap();
    let (_, openai) = resolved.iter().find(|(n, _)| n == "openai").unwrap();
    assert_eq!(openai.base_url, "https://api.openai.com/v1", "trailing slash trimmed");
    assert_eq!(openai.api_key.as_ref().unwrap().expose(), "sk-from-env-123");
    let shown = format!("{resolved:?}");
    assert!(!shown.contains("sk-from-env") && shown.contains("redacted"), "{shown}");

    // context_window bounds max_tokens.
    let model = registry.get("openai/gpt-4.1").unwrap();
    assert!(model.validate_settings(&serde_json::json!({"max_tokens": 200000})).is_err());
    assert!(model.validate_settings(&serde_json::json!({"max_tokens": 2000, "temperature": 0})).is_ok());
}

#[test]
fn a_missing_key_variable_is_a_start_up_error() {
    let config = RunlensConfig::from_toml(SEVERAL).unwrap();
    let err = config.registry(env(&[])).err().unwrap();
    assert_eq!(err, "provider `openai`: api_key_env names `OPENAI_API_KEY`, which is not set");
    let err = config.registry(env(&[("OPENAI_API_KEY", "  ")])).err().unwrap();
    assert!(err.contains("not set"), "{err}");
}

#[test]
fn typos_and_bad_values_are_explained() {
    let err = RunlensConfig::from_toml("[provider.openai]\nbase_url = \"x\"\nmodels = []").unwrap_err();
    assert!(err.contains("unknown field `provider`"), "{err}");
    let err =
        RunlensConfig::from_toml("[providers.a]\nbase_url = \"http://h/v1\"\nmodels = [\"m\"]\napi_key_evn = \"K\"")
            .unwrap_err();
    assert!(err.contains("unknown field `api_key_evn`"), "{err}");
    let err = RunlensConfig::from_toml("[providers.a]\nmodels = [\"m\"]").unwrap_err();
    assert!(err.contains("missing field `base_url`"), "{err}");

    let bad = |toml: &str| RunlensConfig::from_toml(toml).unwrap().registry(env(&[])).err().unwrap();
    assert!(bad("[providers.a]\nbase_url = \"localhost:1/v1\"\nmodels = [\"m\"]").contains("must start with http"));
    assert!(bad("[providers.a]\nbase_url = \"http://h/v1\"\nmodels = []").contains("lists no model"));
    assert!(bad("[providers.a]\nbase_url = \"http://h/v1\"\nmodels = [\"m\", \"m\"]").contains("listed twice"));
    assert!(bad("[providers.builtin]\nbase_url = \"http://h/v1\"\nmodels = [\"m\"]").contains("not `builtin`"));
    assert!(bad("[providers.\"a b\"]\nbase_url = \"http://h/v1\"\nmodels = [\"m\"]").contains("the name must be"));
    let both = "[providers.a]\nbase_url = \"http://h/v1\"\nmodels = [\"m\"]\napi_key = \"k\"\napi_key_env = \"K\"";
    assert!(bad(both).contains("not both"));
}

#[test]
fn the_environment_adds_openai_when_the_file_does_not() {
    let none = RunlensConfig::default().with_env_fallback(env(&[]));
    assert!(none.providers.is_empty(), "nothing configured, nothing added");

    let vars = [("OPENAI_API_KEY", "sk-env-456"), ("RUNLENS_OPENAI_MODELS", "gpt-a, gpt-b,")];
    let config = RunlensConfig::default().with_env_fallback(env(&vars));
    let openai = &config.providers["openai"];
    assert_eq!(openai.base_url, "https://api.openai.com/v1");
    assert_eq!(openai.models, ["gpt-a", "gpt-b"]);
    assert!(!format!("{config:?}").contains("sk-env"));
    assert_eq!(config.registry(env(&[])).unwrap().names(), ["builtin", "openai/gpt-a", "openai/gpt-b"]);

    let only_key = RunlensConfig::default().with_env_fallback(env(&[("OPENAI_API_KEY", "k")]));
    assert_eq!(only_key.providers["openai"].models, ["gpt-4.1-mini"]);

    // A keyless local server through the same variables.
    let local = [("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"), ("RUNLENS_OPENAI_MODELS", "llama3.2")];
    let config = RunlensConfig::default().with_env_fallback(env(&local));
    assert_eq!(config.providers["openai"].base_url, "http://127.0.0.1:11434/v1");
    assert!(config.providers["openai"].api_key.is_none());

    // The file wins over the environment.
    let file = RunlensConfig::from_toml(SEVERAL).unwrap().with_env_fallback(env(&vars));
    assert_eq!(file.providers["openai"].models, ["gpt-4.1-mini", "gpt-4.1"]);
}

#[test]
fn registry_from_reads_the_file_named_at_start_up() {
    let dir = crate::support::test_db();
    let path = dir.path().join("runlens.toml");
    std::fs::write(&path, "[providers.local]\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodels = [\"tiny\"]\n").unwrap();
    let registry = registry_from(Some(&path), env(&[])).unwrap();
    assert_eq!(registry.names(), ["builtin", "local/tiny"]);
    assert_eq!(registry_from(None, env(&[])).unwrap().names(), ["builtin"]);

    let missing = dir.path().join("nope.toml");
    let err = registry_from(Some(&missing), env(&[])).err().unwrap();
    assert!(err.starts_with("cannot read the config file") && err.contains("nope.toml"), "{err}");
    std::fs::write(&path, "[providers.local\n").unwrap();
    let err = registry_from(Some(&path), env(&[])).err().unwrap();
    assert!(err.contains("is not valid"), "{err}");
}
