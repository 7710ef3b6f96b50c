//! `/outbox`: emails "sent" by the `send_email` tool, newest first.
//!
//! The tool never talks to a mail server; it writes here, so runs that email
//! someone can be checked by eye (and by the end-to-end tests).

use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::model::Email;

use crate::api::{list_outbox, Outbox, OUTBOX_LIMIT};
use crate::components::preview::ShowAll;
use crate::components::Loaded;
use crate::format;

#[component]
pub fn OutboxPage() -> impl IntoView {
    let emails = crate::resource::new(|| (), |_| list_outbox());

    view! {
        <Title text="Outbox · runlens"/>
        <div class="page-head">
            <h1>"Outbox"</h1>
            <span class="muted">"Latest " {OUTBOX_LIMIT} " emails written by " <code>"send_email"</code></span>
        </div>
        <Loaded load=move || async move { emails.await } loading="Loading outbox…" let:list>
            {if list.emails.is_empty() {
                view! {
                    <div class="empty" data-testid="outbox-empty">
                        <p>"No emails yet. Runs that call " <code>"send_email"</code> " put them here."</p>
                    </div>
                }
                .into_any()
            } else {
                view! { <EmailTable emails=list/> }.into_any()
            }}
        </Loaded>
    }
}

#[component]
fn EmailTable(emails: Outbox) -> impl IntoView {
    let Outbox { emails, cut } = emails;
    let rows = emails
        .into_iter()
        .map(|email| {
            let cut = cut.contains(&email.id);
            email_row(email, cut)
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table outbox">
            <thead>
                <tr>
                    <th>"Time (UTC)"</th>
                    <th>"Run"</th>
                    <th>"To"</th>
                    <th>"Subject"</th>
                    <th>"Body"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
}

/// `cut`: the subject or body is a preview; the whole email is in `/api/outbox`.
fn email_row(email: Email, cut: bool) -> impl IntoView {
    let href = format!("/runs/{}", format::url_encode(&email.run_id));
    let full = cut.then(|| view! { <ShowAll href="/api/outbox"/> });
    view! {
        <tr data-testid="email-row" data-email-id=email.id.clone() data-run-id=email.run_id.clone()>
            <td class="nowrap" title=email.created_at.to_rfc3339()>{format::time(&email.created_at)}</td>
            <td class="mono"><a href=href title=email.run_id.clone()>{format::short_id(&email.run_id)}</a></td>
            <td class="mono" data-testid="email-to">{email.to}</td>
            <td data-testid="email-subject">{email.subject}</td>
            <td><pre class="text body" data-testid="email-body">{email.body}</pre> {full}</td>
        </tr>
    }
}
