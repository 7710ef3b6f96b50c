//! Issue 18 figures, printed: comparing two 10,000-step runs
//! (`Engine::compare`, the server's work for `GET /api/compare`, first page
//! of each list), target < 1 s:
//! - with a few differences in the middle (changed arguments, one inserted
//!   step, one deleted step, one changed text);
//! - with nothing in common (every tool and text different: the diff's work
//!   budget is spent and the middle aligned by position);
//! - and the alignment alone, on runs already in memory.
//!
//! `cargo bench -p runlens-engine --bench compare`. The 10,000-step run is
//! made by the engine's own fixture (`Engine::generate_trace`, as the scale
//! bench makes its own); the others are copies of it edited in memory and
//! stored in one transaction. All are built once into
//! `CARGO_TARGET_TMPDIR/runlens-bench/compare-10k.db` and reused.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use runlens_engine::compare::{compare, RunData, Window};
use runlens_engine::model::{CompareQuery, Message, MessageBody, Run, RunFilter, RunStatus, Step};
use runlens_engine::{Engine, EngineConfig};
use serde_json::json;

/// The allocator of the `runlens` server binary, so figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STEPS: u32 = 10_000;
const TIMES: usize = 11;

/// One step of a run with its transcript messages.
type Unit = (Step, Vec<Message>);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The 10,000-step fixture run, made once.
async fn base(engine: &Engine) -> Run {
    let filter = RunFilter { tag: Some("fixture:trace".into()), ..RunFilter::default() };
    let existing = engine.runs().list_runs(&filter).await.unwrap().runs.into_iter().find(|r| r.step_count == STEPS);
    if let Some(run) = existing {
        return run;
    }
    let start = Instant::now();
    let run = engine.runs().generate_trace(STEPS).await.unwrap();
    println!("10k-step fixture:  generated in {:.1} s (reused on later runs)", start.elapsed().as_secs_f64());
    assert_eq!(run.status, RunStatus::Done);
    run
}

/// A copy of `base` under `id`, its steps edited by `edit`, made once.
async fn derived(engine: &Engine, base: &Run, id: &str, edit: impl Fn(&mut Vec<Unit>)) -> Run {
    if let Ok(run) = engine.runs().get_run(id).await {
        return run;
    }
    let (steps, messages) =
        (engine.runs().steps(&base.id).await.unwrap(), engine.runs().messages(&base.id).await.unwrap());
    let head: Vec<Message> = messages.iter().filter(|m| m.step_index.is_none()).cloned().collect();
    let mut units: Vec<Unit> = steps
        .into_iter()
        .map(|s| {
            let own = messages.iter().filter(|m| m.step_index == Some(s.index)).cloned().collect();
            (s, own)
        })
        .collect();
    edit(&mut units);
    // Numbered again: step indexes, message seqs and ids.
    let (mut all_steps, mut all_messages) = (Vec::new(), Vec::new());
    let mut seq = 0;
    let mut renumber = |m: &mut Message, step: Option<u32>| {
        (m.id, m.run_id, m.seq, m.step_index) = (format!("{id}-m{seq}"), id.to_owned(), seq, step);
        seq += 1;
    };
    for mut m in head {
        renumber(&mut m, None);
        all_messages.push(m);
    }
    for (i, (mut step, own)) in units.into_iter().enumerate() {
        let i = i as u32;
        (step.id, step.run_id, step.index) = (Step::id_for(id, i), id.to_owned(), i);
        for c in &mut step.tool_calls {
            (c.run_id, c.step_index) = (id.to_owned(), i);
        }
        for mut m in own {
            renumber(&mut m, Some(i));
            all_messages.push(m);
        }
        all_steps.push(step);
    }
    let run = Run {
        id: id.to_owned(),
        name: format!("{} · {id}", base.name),
        tags: BTreeMap::from([("fixture".to_owned(), "compare".to_owned())]),
        step_count: all_steps.len() as u32,
        ..base.clone()
    };
    let start = Instant::now();
    assert!(engine.store().insert_run_with_history(&run, &all_messages, &all_steps).await.unwrap());
    println!("{id}: stored in {:.1} s (reused on later runs)", start.elapsed().as_secs_f64());
    run
}

/// Sets the calculator expression of a step's call (and its result).
fn set_expression(unit: &mut Unit, expression: &str, value: i64) {
    let args = json!({ "expression": expression });
    let result = json!({ "expression": expression, "value": value });
    for c in &mut unit.0.tool_calls {
        (c.arguments, c.result) = (args.clone(), Some(result.clone()));
    }
    for m in &mut unit.1 {
        match &mut m.body {
            MessageBody::Agent { invocations, .. } => invocations.iter_mut().for_each(|i| i.input = args.clone()),
            MessageBody::InvocationResult { result: r, .. } => *r = result.clone(),
            MessageBody::Human { .. } => {}
        }
    }
}

/// Sets a step's text (and its agent message's).
fn set_text(unit: &mut Unit, text: &str) {
    if let Some(answer) = unit.0.response.answer_mut() {
        answer.text = Some(text.to_owned());
    }
    for m in &mut unit.1 {
        if let MessageBody::Agent { message, .. } = &mut m.body {
            *message = Some(text.to_owned());
        }
    }
}

/// A few differences in the middle: arguments at 5,000, a step inserted
/// after 6,000, step 7,000 deleted, the text at 8,000.
fn few_differences(units: &mut Vec<Unit>) {
    set_expression(&mut units[5_000], "5000 + 2", 5_002);
    set_text(&mut units[8_000], "Step 8000: adding two to 8000.");
    units.remove(7_000);
    let mut extra = units[6_000].clone();
    for c in &mut extra.0.tool_calls {
        c.id.push_str("-extra");
    }
    for m in &mut extra.1 {
        match &mut m.body {
            MessageBody::Agent { invocations, .. } => invocations.iter_mut().for_each(|i| i.id.push_str("-extra")),
            MessageBody::InvocationResult { id, .. } => id.push_str("-extra"),
            MessageBody::Human { .. } => {}
        }
    }
    set_expression(&mut extra, "6000 * 2", 12_000);
    units.insert(6_001, extra);
}

/// Nothing in common: every tool renamed, every text different.
fn nothing_in_common(units: &mut [Unit]) {
    for (i, unit) in units.iter_mut().enumerate() {
        set_text(unit, &format!("Turn {i}, counted another way."));
        for c in &mut unit.0.tool_calls {
            c.tool_name = "abacus".into();
        }
        for m in &mut unit.1 {
            match &mut m.body {
                MessageBody::Agent { invocations, .. } => {
                    invocations.iter_mut().for_each(|i| i.tool_name = "abacus".into())
                }
                MessageBody::InvocationResult { tool_name, .. } => *tool_name = "abacus".into(),
                MessageBody::Human { .. } => {}
            }
        }
    }
}

/// Median, best and worst of [`TIMES`] timed calls (after one warm-up).
async fn time<T, F: std::future::Future<Output = T>>(mut f: impl FnMut() -> F) -> [Duration; 3] {
    std::hint::black_box(f().await);
    let mut all = Vec::with_capacity(TIMES);
    for _ in 0..TIMES {
        let start = Instant::now();
        std::hint::black_box(f().await);
        all.push(start.elapsed());
    }
    all.sort();
    [all[TIMES / 2], all[0], all[TIMES - 1]]
}

fn figures([med, best, worst]: [Duration; 3]) -> String {
    format!("{:>7.1} ms median, {:.1} min, {:.1} max ({TIMES} runs)", ms(med), ms(best), ms(worst))
}

async fn run(engine: &Engine) {
    let base = base(engine).await;
    let few = derived(engine, &base, "bench-compare-few", few_differences).await;
    let none = derived(engine, &base, "bench-compare-none", |u| nothing_in_common(u)).await;
    for (what, other) in [("a few differences in the middle", &few), ("nothing in common", &none)] {
        let q = CompareQuery { a: base.id.clone(), b: other.id.clone(), ..CompareQuery::default() };
        let size = serde_json::to_string(&engine.comparisons().compare(&q).await.unwrap()).unwrap().len();
        let took = time(|| engine.comparisons().compare(&q)).await;
        println!(
            "compare 10k × 10k steps, {what}: {} (engine call, first page of 50 rows per list, {size} bytes as JSON; target < 1 s)",
            figures(took)
        );
    }
    let (a, b) = (base.id.as_str(), few.id.as_str());
    let took = time(|| async {
        tokio::try_join!(
            engine.runs().get_run(a),
            engine.runs().get_run(b),
            engine.runs().steps(a),
            engine.runs().steps(b),
            engine.runs().messages(a),
            engine.runs().messages(b)
        )
        .unwrap()
    })
    .await;
    println!("  of which reading both runs, steps and transcripts: {}", figures(took));
    let q = CompareQuery { a: base.id.clone(), b: few.id.clone(), ..Default::default() };
    let c = engine.comparisons().compare(&q).await.unwrap();
    println!(
        "  the few differences: {:?}, first at step row {:?} ({})",
        c.steps.counts,
        c.divergence.as_ref().and_then(|d| d.step_row),
        c.divergence.as_ref().map_or("", |d| d.summary.as_str())
    );
    // The alignment alone, on runs in memory (what the engine call adds to reading them).
    let read = |id: String| async move {
        (engine.runs().steps(&id).await.unwrap(), engine.runs().messages(&id).await.unwrap())
    };
    let pricing = engine.traces().pricing("default").await.unwrap();
    let window = Window::from_query(&CompareQuery { a: "a".into(), b: "b".into(), ..Default::default() }).unwrap();
    let (sa, ma) = read(base.id.clone()).await;
    for (what, other) in [("a few differences", &few), ("nothing in common", &none)] {
        let (sb, mb) = read(other.id.clone()).await;
        let took = time(|| async {
            let a = RunData { run: &base, steps: &sa, messages: &ma };
            let b = RunData { run: other, steps: &sb, messages: &mb };
            compare(&a, &b, None, &pricing, &window, chrono::Utc::now())
        })
        .await;
        println!("  alignment alone (runs in memory), {what}: {}", figures(took));
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("runlens-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("compare-10k.db").display());
    rt.block_on(async {
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        run(&engine).await;
    });
}
