//! `runlens eval`: an experiment on a running server, for CI. It finds the
//! dataset (and the agent) by name, starts the experiment through
//! `POST /api/experiments`, waits for it to end, prints a table of each
//! scorer's results beside its threshold, and says whether every threshold
//! held: the exit code is 0 when they did, 1 when one did not (or the
//! experiment did not finish), 2 when the request could not be made.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::config::EvalCommand;

/// How often the experiment is read while it runs.
const POLL: Duration = Duration::from_secs(1);
/// One request's bound.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the command stopped: the exit code and what to say.
pub struct Stop(pub i32, pub String);

struct Client {
    /// Built as the engine builds its clients (the same TLS stack).
    http: reqwest::Client,
    base: String,
    key: String,
    project: Option<String>,
}

impl Client {
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Stop> {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "POST" => self.http.post(&url),
            _ => self.http.get(&url),
        }
        .bearer_auth(&self.key)
        .timeout(REQUEST_TIMEOUT);
        if let Some(project) = &self.project {
            req = req.header("x-runlens-project", project);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.map_err(|e| Stop(2, format!("{method} {url}: {e}")))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| Stop(2, format!("{method} {url}: {e}")))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let why = value["error"].as_str().map(str::to_owned).unwrap_or(text);
            return Err(Stop(2, format!("{method} {path}: {status}: {why}")));
        }
        Ok(value)
    }

    /// The id of the item of list `path` (`key`: its array) named `name`, else `name` itself (an id).
    async fn find(&self, path: &str, key: &str, name: &str) -> Result<String, Stop> {
        let mut cursor = String::new();
        for _ in 0..100 {
            let page = self.send("GET", &format!("{path}?limit=200&cursor={cursor}"), None).await?;
            if let Some(found) = page[key].as_array().into_iter().flatten().find(|d| d["name"] == name) {
                return Ok(found["id"].as_str().unwrap_or_default().to_owned());
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = next.to_owned(),
                None => break,
            }
        }
        Ok(name.to_owned())
    }
}

/// Runs `cmd` (see the module docs); the summary printed on success.
pub async fn run(cmd: EvalCommand) -> Result<String, Stop> {
    let http = runlens_engine::net::http_builder().build().map_err(|e| Stop(2, e.to_string()))?;
    let client = Client { http, base: cmd.url.trim_end_matches('/').to_owned(), key: cmd.key, project: cmd.project };
    let dataset = client.find("/api/datasets", "datasets", &cmd.dataset).await?;
    let mut body = json!({"dataset_id": dataset, "tool_mode": cmd.tools,
        "scorers": cmd.scorers.iter().map(|k| json!({"name": k, "scorer": {"kind": k}})).collect::<Vec<_>>()});
    if let Some((agent, version)) = &cmd.agent {
        body["agent_id"] = json!(client.find("/api/agents", "agents", agent).await?);
        if let Some(v) = version {
            body["agent_version"] = json!(v);
        }
    }
    if let Some(model) = &cmd.model {
        body["model"] = json!(model);
    }
    if let Some(c) = cmd.concurrency {
        body["concurrency"] = json!(c);
    }
    let started = client.send("POST", "/api/experiments", Some(body)).await?;
    let id = started["id"].as_str().unwrap_or_default().to_owned();
    eprintln!("experiment {} started: {} items", started["name"].as_str().unwrap_or(&id), started["item_count"]);
    let since = Instant::now();
    let report = loop {
        let report = client.send("GET", &format!("/api/experiments/{id}"), None).await?;
        if report["experiment"]["status"] != "running" {
            break report;
        }
        if since.elapsed() > Duration::from_secs(cmd.timeout_s) {
            return Err(Stop(1, format!("experiment {id} did not end within {} s", cmd.timeout_s)));
        }
        tokio::time::sleep(POLL).await;
    };
    let (table, failed) = summary(&report, &cmd.min);
    let status = report["experiment"]["status"].as_str().unwrap_or_default().to_owned();
    if status != "done" {
        return Err(Stop(1, format!("{table}\nexperiment {id} ended {status}")));
    }
    if failed > 0 {
        return Err(Stop(1, format!("{table}\n{failed} threshold(s) not met")));
    }
    Ok(table)
}

/// The summary table of `report`, with each scorer's threshold, and how many thresholds failed.
pub fn summary(report: &Value, min: &[(String, f64)]) -> (String, usize) {
    let p = &report["progress"];
    let mut out = format!(
        "{}: {} items · {} done · {} failed · {} cancelled · {} tokens · cost {}\n",
        report["experiment"]["name"].as_str().unwrap_or_default(),
        p["items"],
        p["done"],
        p["failed"],
        p["cancelled"],
        report["usage"]["total_tokens"],
        report["cost_usd"].as_f64().map_or("unknown".into(), |c| format!("${c:.4}")),
    );
    out += &format!("{:<24} {:>6} {:>8} {:>10} {:>10}  {}\n", "scorer", "runs", "mean", "yes/no", "min", "result");
    let mut failed = 0;
    let scorers = report["scorers"].as_array().cloned().unwrap_or_default();
    for s in &scorers {
        let s = &s["summary"];
        let name = s["name"].as_str().unwrap_or_default();
        let mean = s["mean"].as_f64();
        let threshold = min.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        let verdict = match (threshold, mean) {
            (None, _) => "",
            (Some(t), Some(m)) if m >= t => "pass",
            _ => {
                failed += 1;
                "FAIL"
            }
        };
        out += &format!(
            "{:<24} {:>6} {:>8} {:>10} {:>10}  {verdict}\n",
            name,
            s["count"],
            mean.map_or("—".into(), |m| format!("{m:.3}")),
            format!("{}/{}", s["yes"], s["no"]),
            threshold.map_or("—".into(), |t| format!("{t}")),
        );
    }
    for (name, t) in min {
        if !scorers.iter().any(|s| s["summary"]["name"] == name.as_str()) {
            failed += 1;
            out += &format!("{name:<24} {:>6} {:>8} {:>10} {t:>10}  FAIL (no scores)\n", 0, "—", "—");
        }
    }
    (out, failed)
}
