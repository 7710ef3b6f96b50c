//! The branch tree of the trace page: the run's ancestors and forks, each
//! indented under the run it was forked from, with the message each fork
//! diverged at and its status. Not shown for a run without family.

use std::collections::{HashMap, HashSet};

use leptos::prelude::*;
use runlens_engine::model::FamilyMember;

use crate::components::Badge;
use crate::format;

/// One row of the tree: a member and its depth (0 for the root).
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    pub member: FamilyMember,
    pub depth: usize,
}

/// The members in tree order (each run followed by its forks, oldest first),
/// with their depth. A member whose parent is not in the list counts as a root.
pub fn tree_order(members: Vec<FamilyMember>) -> Vec<Branch> {
    let ids: HashSet<String> = members.iter().map(|m| m.id.clone()).collect();
    let mut children: HashMap<Option<String>, Vec<FamilyMember>> = HashMap::new();
    for m in members {
        let parent = m.parent_run_id.clone().filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(m);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    }
    let mut out = Vec::new();
    // Depth-first, with an explicit stack; `seen` guards against cycles.
    let mut stack: Vec<(FamilyMember, usize)> =
        children.remove(&None).unwrap_or_default().into_iter().rev().map(|m| (m, 0)).collect();
    let mut seen = HashSet::new();
    while let Some((member, depth)) = stack.pop() {
        if !seen.insert(member.id.clone()) {
            continue;
        }
        if let Some(kids) = children.remove(&Some(member.id.clone())) {
            stack.extend(kids.into_iter().rev().map(|k| (k, depth + 1)));
        }
        out.push(Branch { member, depth });
    }
    out
}

#[component]
pub fn FamilyTree(members: Vec<FamilyMember>, current: String) -> impl IntoView {
    if members.len() < 2 {
        return None;
    }
    let count = members.len();
    let rows = tree_order(members)
        .into_iter()
        .map(|branch| view! { <BranchRow branch current=current.clone()/> })
        .collect::<Vec<_>>();
    Some(view! {
        <section class="section" data-testid="run-family">
            <h2>"Branches " <span class="count">{count}</span></h2>
            <ul class="family-tree">{rows}</ul>
        </section>
    })
}

#[component]
fn BranchRow(branch: Branch, current: String) -> impl IntoView {
    let Branch { member, depth } = branch;
    let is_current = member.id == current;
    let href = format!("/runs/{}", format::url_encode(&member.id));
    let name = if member.name.trim().is_empty() { member.id.clone() } else { member.name.clone() };
    let class = if is_current { "family-node current" } else { "family-node" };
    let diverged = member.parent_run_id.as_ref().map(|_| match member.forked_message {
        Some(text) => view! {
            <span class="fork-point">"edited to " <q data-testid="forked-message">{text}</q></span>
        }
        .into_any(),
        None => match (member.forked_from_step, member.replay) {
            (Some(step), _) => {
                view! { <span class="fork-point muted">{format!("forked from step {step}")}</span> }.into_any()
            }
            (None, Some(mode)) => {
                view! { <span class="fork-point muted">{format!("replay ({})", mode.as_str())}</span> }.into_any()
            }
            (None, None) => view! { <span class="fork-point muted">"forked"</span> }.into_any(),
        },
    });
    view! {
        <li class=class style=format!("--depth: {depth}") data-depth=depth.to_string()
            data-testid="family-node" data-run-id=member.id.clone()>
            <span class="branch-mark">{if depth == 0 { "●" } else { "└" }}</span>
            <a href=href data-testid="family-link" data-run-id=member.id.clone()
                aria-current=is_current.then_some("page")>{name}</a>
            <Badge status=member.status.as_str()/>
            {is_current.then(|| view! { <span class="muted">"(this run)"</span> })}
            {diverged}
            <span class="spacer"></span>
            <span class="muted nowrap" title=member.created_at.to_rfc3339()>{format::time(&member.created_at)}</span>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use runlens_engine::model::RunStatus;

    fn member(id: &str, parent: Option<&str>, minute: u32) -> FamilyMember {
        FamilyMember {
            id: id.into(),
            name: id.into(),
            status: RunStatus::Done,
            parent_run_id: parent.map(str::to_string),
            forked_from_message_id: parent.map(|p| format!("{p}-m0")),
            forked_message: parent.map(|_| "edited".to_string()),
            forked_from_step: None,
            replay: None,
            created_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, 0).unwrap(),
        }
    }

    #[test]
    fn forks_follow_their_parent_indented() {
        // BFS order as the engine returns it: root, children, grandchildren.
        let family = vec![
            member("root", None, 0),
            member("a", Some("root"), 1),
            member("b", Some("root"), 2),
            member("a1", Some("a"), 3),
        ];
        let order: Vec<(String, usize)> = tree_order(family).into_iter().map(|b| (b.member.id, b.depth)).collect();
        let expected = [("root", 0), ("a", 1), ("a1", 2), ("b", 1)];
        assert_eq!(order, expected.map(|(id, d)| (id.to_string(), d)).to_vec());
    }

    #[test]
    fn a_missing_parent_makes_a_root() {
        let order = tree_order(vec![member("x", Some("gone"), 0), member("y", Some("x"), 1)]);
        assert_eq!(order.len(), 2);
        assert_eq!((order[0].depth, order[1].depth), (0, 1));
    }
}
