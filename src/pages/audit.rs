//! `/audit`: the current project's audit log, newest first, a page at a
//! time (`?before=SEQ` for older entries): who did what to what, and when.
//! Instance admins also read the instance-wide log (`?scope=instance`:
//! sign-ins, users, projects). Project admins only.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::AuditEntry;

use crate::api::{audit_log, AuditPage as AuditData};
use crate::components::Loaded;
use crate::format;

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let before = Memo::new(move |_| query.read().get("before").and_then(|b| b.trim().parse::<i64>().ok()));
    let instance = Memo::new(move |_| query.read().get("scope").as_deref() == Some("instance"));
    let log = crate::resource::new(
        move || (before.get(), instance.get()),
        |(before, instance)| audit_log(before, Some(instance)),
    );
    view! {
        <Title text="Audit log · runlens"/>
        <div class="page-head">
            <h1>"Audit log"</h1>
            <span class="muted">"Sign-ins, keys, members, decisions, cancels and imports, newest first"</span>
        </div>
        <Loaded load=move || async move { log.await } loading="Loading the audit log…" let:page>
            <AuditTable page first=before.get_untracked().is_none()/>
        </Loaded>
    }
}

#[component]
fn AuditTable(page: AuditData, first: bool) -> impl IntoView {
    let AuditData { project, entries, next_before, instance_admin } = page;
    let scope = if project.is_none() { "&scope=instance" } else { "" };
    let tabs = instance_admin.then(|| {
        let (p, i) = if project.is_some() { ("tab current", "tab") } else { ("tab", "tab current") };
        view! {
            <nav class="tabs">
                <a class=p href="/audit">"This project"</a>
                <a class=i href="/audit?scope=instance" data-testid="audit-instance">"Instance (sign-ins, users, projects)"</a>
            </nav>
        }
    });
    let heading = match &project {
        Some(p) => format!("Project {p}"),
        None => "Instance-wide".to_string(),
    };
    let empty =
        entries.is_empty().then(|| view! { <tr><td colspan="5" class="muted">"Nothing recorded yet."</td></tr> });
    let rows = entries.into_iter().map(|e| view! { <AuditRow entry=e/> }).collect::<Vec<_>>();
    let newer = (!first).then(|| {
        let href = if scope.is_empty() { "/audit".to_string() } else { "/audit?scope=instance".to_string() };
        view! { <a class="button" href=href>"← Newest"</a> }
    });
    let older = next_before.map(|b| {
        view! { <a class="button" href=format!("/audit?before={b}{scope}") data-testid="audit-older">"Older →"</a> }
    });
    view! {
        {tabs}
        <h2>{heading}</h2>
        <div class="table-scroll">
            <table class="table" data-testid="audit-table">
                <thead>
                    <tr><th>"When (UTC)"</th><th>"Who"</th><th>"Action"</th><th>"Target"</th><th>"Detail"</th></tr>
                </thead>
                <tbody>{empty}{rows}</tbody>
            </table>
        </div>
        <div class="pager">{newer} {older}</div>
    }
}

#[component]
fn AuditRow(entry: AuditEntry) -> impl IntoView {
    let kind = entry.actor.kind().to_string();
    let action = entry.action.replace('_', " ");
    view! {
        <tr data-testid="audit-row" data-action=entry.action.clone()>
            <td class="nowrap">{format::time(&entry.at)}</td>
            <td>
                <strong data-testid="audit-who">{entry.actor.name.clone()}</strong>
                " " <span class="muted">{kind}</span>
            </td>
            <td>{action}</td>
            <td class="mono">{entry.target.unwrap_or_default()}</td>
            <td>{entry.detail.unwrap_or_default()}</td>
        </tr>
    }
}
