//! What the crash test asks of the server: a seeded PRNG and the kinds of
//! runs it starts, each a script of the built-in model.

use serde_json::{json, Value};

/// xorshift64*: small, seeded, the same sequence on every platform.
pub struct Rng(u64);

/// The seed of crash test `what` (`RUNLENS_CRASH_SEED`, else from the
/// clock and the process), printed with how to replay it.
pub fn seed(what: &str, kills: u32) -> u64 {
    let seed = std::env::var("RUNLENS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!("{what} crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it), {kills} kills");
    seed
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A number in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    /// `true` with probability `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[(self.next() % items.len() as u64) as usize])
    }
}

/// The kinds of runs: between them they stream answers, call tools with and
/// without side effects, wait, pause for approvals (one with a timeout),
/// and take a follow-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// calculator, then a streamed answer.
    Calc,
    /// `wait`, then an answer; the test may cancel it.
    Wait,
    /// one `send_email` that a person approves or rejects.
    Email,
    /// calculator, wait and send_email in one turn, then another send_email.
    Mixed,
    /// an answer, then a follow-up that computes and sends an email.
    FollowUp,
    /// a `send_email` nobody decides: the 2 s approval timeout rejects it.
    Timeout,
    /// every call needs approval (`"approval": "all"`).
    AllApproved,
}

pub const KINDS: [Kind; 7] =
    [Kind::Calc, Kind::Wait, Kind::Email, Kind::Mixed, Kind::FollowUp, Kind::Timeout, Kind::AllApproved];

/// The follow-up message posted to a `FollowUp` run once it is done.
pub fn follow_up_text(run_id: &str) -> String {
    format!("Follow-up for {run_id}: compute 17*3 and email the team.")
}

fn answer(rng: &mut Rng, words: u64) -> Value {
    let n = rng.range(words / 2, words);
    let text: Vec<String> = (0..n).map(|i| format!("word{i}")).collect();
    json!({ "text": format!("The answer, streamed: {}.", text.join(" ")) })
}

fn calc(expr: &str) -> Value {
    json!({ "name": "calculator", "arguments": { "expression": expr } })
}

fn wait(seconds: f64) -> Value {
    json!({ "name": "wait", "arguments": { "seconds": seconds } })
}

fn email(run_id: &str, n: u32) -> Value {
    json!({ "name": "send_email", "arguments": {
        "to": "team@example.com",
        "subject": format!("{run_id} email {n}"),
        "body": format!("Sent by run {run_id}, email {n}."),
    }})
}

/// The `POST /api/runs` body of a run of `kind`.
pub fn create_body(kind: Kind, id: &str, rng: &mut Rng) -> Value {
    let latency = rng.range(150, 1500);
    let secs = rng.range(2, 20) as f64 / 10.0;
    let (tools, script, approval): (&[&str], Vec<Value>, Value) = match kind {
        Kind::Calc => (
            &["calculator"],
            vec![json!({"text": "Let me compute that.", "tool_calls": [calc("6*7")]}), answer(rng, 60)],
            Value::Null,
        ),
        Kind::Wait => (&["wait"], vec![json!({"tool_calls": [wait(secs)]}), answer(rng, 30)], Value::Null),
        Kind::Email => (
            &["send_email"],
            vec![json!({"text": "I will write to the team.", "tool_calls": [email(id, 0)]}), answer(rng, 40)],
            Value::Null,
        ),
        Kind::Mixed => (
            &["calculator", "wait", "send_email"],
            vec![
                json!({"tool_calls": [calc("2^10"), wait(secs / 2.0), email(id, 0)]}),
                json!({"text": "One more.", "tool_calls": [email(id, 1)]}),
                answer(rng, 40),
            ],
            Value::Null,
        ),
        Kind::FollowUp => (
            &["calculator", "send_email"],
            vec![
                answer(rng, 40),
                json!({"tool_calls": [calc("17*3")]}),
                json!({"text": "Now the email.", "tool_calls": [email(id, 0)]}),
                answer(rng, 40),
            ],
            Value::Null,
        ),
        Kind::Timeout => (
            &["send_email"],
            vec![json!({"tool_calls": [email(id, 0)]}), answer(rng, 20)],
            json!({"tools": ["send_email"], "timeout_s": 2}),
        ),
        Kind::AllApproved => (
            &["calculator", "wait"],
            vec![json!({"tool_calls": [calc("sqrt(2)"), wait(secs / 2.0)]}), answer(rng, 40)],
            json!("all"),
        ),
    };
    let mut body = json!({
        "id": id,
        "name": format!("crash {kind:?}"),
        "initial_prompt": format!("A {kind:?} run of the crash test."),
        "tools": tools,
        "model_settings": { "latency_ms": latency, "script": script },
    });
    if !approval.is_null() {
        body["approval"] = approval;
    }
    body
}
