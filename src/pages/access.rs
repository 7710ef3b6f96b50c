//! `/settings/projects` and `/settings/keys`: who may do what.
//!
//! Projects: the projects the caller has a role in; an instance admin
//! creates one; the current project's admins see its members, set their
//! roles, remove them and add users by name. Keys: the current project's
//! API keys (admins only), created with a role — the secret is shown once,
//! right after — and revoked. Every form is an `ActionForm` (a plain form
//! post without JavaScript); the lists refetch after each action.

use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::model::{ApiKey, Member, Role};

use crate::api::{
    list_keys, project_settings, CreateKey, CreateProject, NewKey, ProjectsView, RemoveMember, RevokeKey, SetMember,
};
use crate::components::copy_secret::CopySecret;
use crate::components::{server_error_message, ErrorBox, Loaded};
use crate::format;

/// The tabs of the settings pages.
#[component]
pub fn SettingsTabs(current: &'static str) -> impl IntoView {
    let tabs = [("/settings", "Prices"), ("/settings/projects", "Projects"), ("/settings/keys", "API keys")].map(
        |(href, label)| {
            let class = if href == current { "tab current" } else { "tab" };
            view! { <a class=class href=href aria-current=(href == current).then_some("page")>{label}</a> }
        },
    );
    view! { <nav class="tabs" data-testid="settings-tabs">{tabs}</nav> }
}

/// The outcome of the last action: its note, or its error.
fn outcome<T: Clone + Send + Sync + 'static>(
    value: impl Get<Value = Option<Result<T, ServerFnError>>> + Send + Sync + 'static,
    note: impl Fn(T) -> String + Send + Sync + 'static,
    testid: &'static str,
) -> impl Fn() -> Option<AnyView> + Send + Sync + 'static {
    move || match value.get()? {
        Ok(v) => Some(view! { <p class="notice" data-testid=testid>{note(v)}</p> }.into_any()),
        Err(e) => Some(view! { <ErrorBox message=server_error_message(&e) testid="access-error"/> }.into_any()),
    }
}

/// `<option>`s of the four roles, `selected` chosen.
fn role_options(selected: Role) -> Vec<impl IntoView> {
    Role::ALL
        .into_iter()
        .map(|r| view! { <option value=r.as_str() selected=r == selected>{r.as_str()}</option> })
        .collect()
}

#[component]
pub fn ProjectsPage() -> impl IntoView {
    let create = ServerAction::<CreateProject>::new();
    let set = ServerAction::<SetMember>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let data = crate::resource::new(
        move || (create.version().get(), set.version().get(), remove.version().get()),
        |_| project_settings(),
    );
    let created = outcome(create.value(), |name| format!("Created the project {name}."), "project-created");
    let member_note = outcome(set.value(), |note| note, "member-saved");
    let removed_note = outcome(remove.value(), |note| note, "member-removed");
    view! {
        <Title text="Projects · runlens"/>
        <div class="page-head">
            <h1>"Projects"</h1>
        </div>
        <SettingsTabs current="/settings/projects"/>
        {created}
        {member_note}
        {removed_note}
        <Loaded load=move || async move { data.await } loading="Loading projects…" keep_previous=true let:view>
            <Projects view create set remove/>
        </Loaded>
    }
}

#[component]
fn Projects(
    view: ProjectsView,
    create: ServerAction<CreateProject>,
    set: ServerAction<SetMember>,
    remove: ServerAction<RemoveMember>,
) -> impl IntoView {
    let ProjectsView { projects, instance_admin, current, members } = view;
    let rows = projects
        .into_iter()
        .map(|p| {
            let is_current = p.name == current;
            let role = p.role.map(|r| r.to_string()).unwrap_or_else(|| format::NONE.into());
            view! {
                <tr data-testid="project-row" data-project=p.name.clone()>
                    <td class="mono">{p.name.clone()} {is_current.then(|| view! { <span class="muted">" (current)"</span> })}</td>
                    <td>{role}</td>
                    <td class="nowrap">{format::time(&p.created_at)}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let new_project = instance_admin.then(|| {
        view! {
            <ActionForm action=create attr:class="inline-form add-form">
                <input type="text" name="name" required maxlength="40" placeholder="new-project"
                    pattern="[a-z0-9][a-z0-9-]*" aria-label="Project name" data-testid="new-project-name"/>
                <button type="submit" class="button primary" data-testid="new-project-submit">"Create project"</button>
            </ActionForm>
            <p class="hint muted">"Lower-case letters, digits and `-`; up to 40 characters."</p>
        }
    });
    let members = match members {
        Some(members) => view! { <Members project=current.clone() members set remove/> }.into_any(),
        None => view! {
            <p class="muted" data-testid="members-hidden">
                "Only admins of " <code>{current.clone()}</code> " see and manage its members."
            </p>
        }
        .into_any(),
    };
    view! {
        <section class="section">
            <h2>"Your projects"</h2>
            <p class="muted">"Switch between them with the project menu at the top."</p>
            <div class="table-scroll"><table class="table" data-testid="project-table">
                <thead><tr><th>"Project"</th><th>"Your role"</th><th>"Created (UTC)"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table></div>
            {new_project}
        </section>
        <section class="section">
            <h2>"Members of " <code>{current}</code></h2>
            {members}
        </section>
    }
}

#[component]
fn Members(
    project: String,
    members: Vec<Member>,
    set: ServerAction<SetMember>,
    remove: ServerAction<RemoveMember>,
) -> impl IntoView {
    let empty = members.is_empty().then(|| {
        view! { <tr><td colspan="3" class="muted">"No members yet (instance admins may do everything anyway)."</td></tr> }
    });
    let rows = members
        .into_iter()
        .map(|m| {
            let form_id = format!("member-{}", format::url_encode(&m.user_name));
            let (set_user, remove_user) = (m.user_name.clone(), m.user_name.clone());
            view! {
                <tr data-testid="member-row" data-user=m.user_name.clone()>
                    <td>{m.user_name.clone()}</td>
                    <td>
                        <select name="role" form=form_id.clone() aria-label=format!("Role of {}", m.user_name)
                            data-testid="member-role">{role_options(m.role)}</select>
                    </td>
                    <td class="nowrap">
                        <ActionForm action=set attr:id=form_id attr:class="inline-form">
                            <input type="hidden" name="user" value=set_user/>
                            <button type="submit" class="button small" data-testid="member-save">"Set role"</button>
                        </ActionForm>
                        " "
                        <ActionForm action=remove attr:class="inline-form">
                            <input type="hidden" name="user" value=remove_user/>
                            <button type="submit" class="button small danger" data-testid="member-remove">"Remove"</button>
                        </ActionForm>
                    </td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table" data-testid="member-table">
            <thead><tr><th>"User"</th><th>"Role"</th><th></th></tr></thead>
            <tbody>{empty}{rows}</tbody>
        </table></div>
        <h3>"Add a user to " <code>{project}</code></h3>
        <ActionForm action=set attr:class="inline-form add-form">
            <input type="text" name="user" required maxlength="64" placeholder="user name"
                aria-label="User name" data-testid="add-member-name"/>
            <select name="role" aria-label="Role" data-testid="add-member-role">{role_options(Role::Viewer)}</select>
            <button type="submit" class="button primary" data-testid="add-member-submit">"Add"</button>
        </ActionForm>
        <p class="hint muted">
            "The user must exist: an instance admin adds users with " <code>"runlens user add NAME"</code>
            " or " <code>"POST /api/users"</code> "."
        </p>
    }
}

#[component]
pub fn KeysPage() -> impl IntoView {
    let create = ServerAction::<CreateKey>::new();
    let revoke = ServerAction::<RevokeKey>::new();
    let keys = crate::resource::new(move || (create.version().get(), revoke.version().get()), |_| list_keys());
    let revoked = outcome(revoke.value(), |note| note, "key-revoked");
    let created = move || match create.value().get()? {
        Ok(new) => Some(view! { <NewKeySecret new/> }.into_any()),
        Err(e) => Some(view! { <ErrorBox message=server_error_message(&e) testid="access-error"/> }.into_any()),
    };
    view! {
        <Title text="API keys · runlens"/>
        <div class="page-head">
            <h1>"API keys"</h1>
        </div>
        <SettingsTabs current="/settings/keys"/>
        <p class="muted">
            "Programs send a key as " <code>"Authorization: Bearer rl_…"</code>
            ". A key acts in the current project with its role; it is stored as a hash and shown only once."
        </p>
        {created}
        {revoked}
        <Loaded load=move || async move { keys.await } loading="Loading keys…" keep_previous=true let:list>
            <KeyTable keys=list revoke/>
            <h2>"New key"</h2>
            <ActionForm action=create attr:class="inline-form add-form">
                <input type="text" name="name" required maxlength="100" placeholder="what uses it, e.g. ci"
                    aria-label="Key name" data-testid="new-key-name"/>
                <select name="role" aria-label="Role" data-testid="new-key-role">{role_options(Role::Viewer)}</select>
                <button type="submit" class="button primary" data-testid="new-key-submit">"Create key"</button>
            </ActionForm>
        </Loaded>
    }
}

/// The secret of a key just created, with the note that it is shown once.
#[component]
fn NewKeySecret(new: NewKey) -> impl IntoView {
    view! {
        <div class="new-key" role="status" data-testid="new-key">
            <p>
                <strong>"Copy the key now: it is not shown again."</strong>
                " Key " <code>{new.key.name}</code> " (" {new.key.role.as_str()} "):"
            </p>
            <CopySecret secret=new.secret label="API key" testid="new-key-secret"/>
        </div>
    }
}

#[component]
fn KeyTable(keys: Vec<ApiKey>, revoke: ServerAction<RevokeKey>) -> impl IntoView {
    let empty = keys.is_empty().then(|| view! { <tr><td colspan="7" class="muted">"No keys yet."</td></tr> });
    let rows = keys
        .into_iter()
        .map(|k| {
            let id = k.id.clone();
            let state = match k.revoked_at {
                Some(at) => view! { <span class="muted">"revoked " {format::time(&at)}</span> }.into_any(),
                None => view! {
                    <ActionForm action=revoke attr:class="inline-form">
                        <input type="hidden" name="id" value=id/>
                        <button type="submit" class="button small danger" data-testid="key-revoke">"Revoke"</button>
                    </ActionForm>
                }
                .into_any(),
            };
            view! {
                <tr data-testid="key-row" data-key=k.id.clone() data-revoked=k.revoked_at.is_some().to_string()>
                    <td>{k.name}</td>
                    <td class="mono">{k.prefix} "…"</td>
                    <td>{k.role.as_str()}</td>
                    <td class="nowrap">{format::time(&k.created_at)}</td>
                    <td>{k.created_by.unwrap_or_else(|| format::NONE.into())}</td>
                    <td class="nowrap">{format::opt_time(k.last_used_at.as_ref())}</td>
                    <td class="nowrap">{state}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll">
            <table class="table" data-testid="key-table">
                <thead>
                    <tr>
                        <th>"Name"</th><th>"Prefix"</th><th>"Role"</th><th>"Created (UTC)"</th><th>"By"</th>
                        <th>"Last used (UTC)"</th><th></th>
                    </tr>
                </thead>
                <tbody>{empty}{rows}</tbody>
            </table>
        </div>
    }
}
