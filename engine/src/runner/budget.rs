//! Tree budgets: bounds on the whole tree of runs under a root run — the
//! runs its agent calls start, and theirs, down the tree.
//!
//! A tree has bounds on its runs (the root included), its depth, and the
//! model turns and tokens of all its runs together: the server's
//! (`EngineConfig::tree`, `[tree_budget]` in `runlens.toml`), lowered by
//! the `tree_budget` of the agent version the root run started from. They
//! are fixed when the tree is first counted, and counted in the database
//! (`store::TreeStore`): taking a run or a turn is one conditional update,
//! so concurrent children, on one server or several, cannot pass a bound.
//!
//! - A sub-agent call that would pass a bound does not start a run: the call
//!   fails with the reason, which the model sees, and its run goes on.
//! - A child run whose tree has no turns or tokens left stops before its
//!   next model turn: it fails with the reason, which its parent's model
//!   sees as the call's error. A root run's turns are counted but never
//!   stopped by its tree: its own `max_turns` bounds them, and it can still
//!   answer with what its children gave.
//!
//! Only runs that are in a tree pay for it: a child, or a root that can
//! call agents. Counting errs toward the bound: a child counted whose run
//! then fails to start (or is started again after a crash) stays counted.

use crate::error::Result;
use crate::model::{AgentLink, Run, TreeLimits, Usage};
use crate::runtime::Runtime;
use crate::store::TreeCount;
use crate::tools::ToolError;

/// The root of `run`'s tree.
fn root(run: &Run) -> &str {
    if run.root_run_id.is_empty() {
        &run.id
    } else {
        &run.root_run_id
    }
}

/// Whether `run`'s turns count in a tree: a child, or a root that can call agents.
fn counted(run: &Run) -> bool {
    run.depth > 0 || !run.sub_agents.is_empty()
}

/// The bounds of the tree under `root`: the server's, lowered by the
/// `tree_budget` of the agent version the root started from.
async fn limits_of(rt: &Runtime, root: Option<&Run>) -> Result<TreeLimits> {
    let mut limits = rt.config.tree;
    limits.depth = limits.depth.min(rt.config.max_depth);
    let Some((id, version)) = root.and_then(|r| Some((r.agent_id.as_deref()?, r.agent_version?))) else {
        return Ok(limits);
    };
    if let Some(budget) = rt.store.agents().agent_version(id, version).await?.and_then(|v| v.spec.tree_budget) {
        limits = limits.within(&budget);
    }
    Ok(limits)
}

/// Makes the row of `run`'s tree, when it has none (the first time a run of
/// it is counted).
async fn open(rt: &Runtime, run: &Run) -> Result<()> {
    let root_id = root(run);
    let limits = if run.id == root_id {
        limits_of(rt, Some(run)).await?
    } else {
        limits_of(rt, rt.store.get_run(root_id).await?.as_ref()).await?
    };
    rt.store.trees().open_tree(root_id, &limits).await
}

/// Counts the child run that `run`'s call of `link` is about to start; the
/// error, when a bound of the tree forbids it, is the reason the model sees.
pub(super) async fn admit_child(rt: &Runtime, run: &Run, link: &AgentLink) -> std::result::Result<(), ToolError> {
    let fail = |e: crate::error::EngineError| ToolError::Failed(format!("the sub-agent run could not start: {e}"));
    let (root, depth) = (root(run), run.depth + 1);
    if rt.store.trees().take_tree_run(root, depth).await.map_err(fail)? {
        return Ok(());
    }
    let tree = match rt.store.trees().tree(root).await.map_err(fail)? {
        Some(tree) => tree,
        None => {
            // The tree's first child: its row is made now.
            open(rt, run).await.map_err(fail)?;
            if rt.store.trees().take_tree_run(root, depth).await.map_err(fail)? {
                return Ok(());
            }
            let missing =
                || ToolError::Failed("the sub-agent run could not start: its run tree is not recorded".into());
            rt.store.trees().tree(root).await.map_err(fail)?.ok_or_else(missing)?
        }
    };
    Err(ToolError::Failed(format!("`{}` was not called: {}", link.tool, refusal(&tree, depth))))
}

/// Why the tree refuses a run at `depth`.
fn refusal(tree: &TreeCount, depth: u32) -> String {
    let limits = &tree.limits;
    if depth > limits.depth {
        format!("its run would be {depth} levels below the root, and the run tree's budget allows {}", limits.depth)
    } else if tree.runs >= u64::from(limits.runs) {
        format!("the run tree has started {} runs, all its budget allows", tree.runs)
    } else {
        used_up(tree).unwrap_or_else(|| "the run tree's budget is used up".into())
    }
}

/// Which of the tree's turns or tokens are used up, if any.
fn used_up(tree: &TreeCount) -> Option<String> {
    let limits = &tree.limits;
    if let Some(max) = limits.turns.filter(|max| tree.turns >= u64::from(*max)) {
        return Some(format!(
            "the run tree's runs have taken {} model turns, all its budget allows ({max})",
            tree.turns
        ));
    }
    let max = limits.tokens.filter(|max| tree.tokens >= *max)?;
    Some(format!("the run tree's runs have used {} tokens, all its budget allows ({max})", tree.tokens))
}

/// Takes `run`'s next model turn from its tree's budget: `Some(reason)`
/// when the run is a child and must stop instead (see the module docs).
pub(super) async fn take_turn(rt: &Runtime, run: &Run) -> Result<Option<String>> {
    if !counted(run) {
        return Ok(None);
    }
    let (root, child) = (root(run), run.depth > 0);
    if rt.store.trees().take_tree_turn(root, child).await? {
        return Ok(None);
    }
    match rt.store.trees().tree(root).await? {
        Some(tree) if child => Ok(Some(format!(
            "stopped: {}",
            used_up(&tree).unwrap_or_else(|| "the run tree's budget is used up".into())
        ))),
        Some(_) => Ok(None),
        None if child => Ok(None), // a tree counted before budgets: not bounded
        None => {
            // A root's first counted turn makes its tree's row.
            open(rt, run).await?;
            rt.store.trees().take_tree_turn(root, false).await?;
            Ok(None)
        }
    }
}

/// Adds the tokens of `run`'s turn (`usage`) to its tree.
pub(super) async fn add_tokens(rt: &Runtime, run: &Run, usage: &Usage) -> Result<()> {
    let tokens = usage.total_tokens.max(usage.input_tokens + usage.output_tokens);
    if counted(run) && tokens > 0 {
        rt.store.trees().add_tree_tokens(root(run), tokens).await?;
    }
    Ok(())
}
