//! `/settings`: the price table per model, editable.
//!
//! Prices are USD per million tokens: input, output, cache read, cache
//! write, reasoning. Cached and reasoning tokens are priced on their own
//! (they are parts of the input and output counts, not extra). Each row is
//! its own form posting to the `save_price` server function — a plain form
//! post without JavaScript — and a last row adds a model. Changing a price
//! re-prices past runs too: costs are computed when read.
//!
//! Admins of the project set its retention (how old and how many runs are
//! kept). Instance admins also see the Servers panel: the runlens servers sharing
//! the database (one on SQLite), with their heartbeats and load.

use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::cost::ModelPrice;

use crate::api::prices::{list_prices, DeletePrice, SavePrice};
use crate::api::retention::{get_retention, SaveRetention};
use crate::api::servers::{list_servers, ServersView};
use crate::components::{server_error_message, ErrorBox, Loaded};
use crate::format;

/// The editable price fields: (form name, column heading, tooltip).
const FIELDS: [(&str, &str, &str); 5] = [
    ("input", "Input", "USD per million input tokens (not served from the cache)"),
    ("output", "Output", "USD per million visible output tokens"),
    ("cache_read", "Cache read", "USD per million input tokens read from the prompt cache (blank: the input price)"),
    ("cache_write", "Cache write", "USD per million input tokens written to the prompt cache (blank: the input price)"),
    ("reasoning", "Reasoning", "USD per million reasoning tokens (blank: the output price)"),
];

#[component]
pub fn SettingsPage() -> impl IntoView {
    let save = ServerAction::<SavePrice>::new();
    let delete = ServerAction::<DeletePrice>::new();
    let prices = crate::resource::new(move || (save.version().get(), delete.version().get()), |_| list_prices());
    let servers = crate::resource::new(|| (), |_| list_servers());
    let save_retention = ServerAction::<SaveRetention>::new();
    let retention = crate::resource::new(move || save_retention.version().get(), |_| get_retention());
    let outcome = move || {
        let saved = save.value().get().map(|r| r.map(|p| format!("Saved the price of {}.", p.model)));
        let deleted = delete.value().get().map(|r| r.map(|_| "Price removed.".to_string()));
        match saved.or(deleted)? {
            Ok(note) => Some(view! { <p class="notice" data-testid="price-saved">{note}</p> }.into_any()),
            Err(e) => Some(view! { <ErrorBox message=server_error_message(&e) testid="price-error"/> }.into_any()),
        }
    };
    let headings = FIELDS.map(|(_, heading, tip)| view! { <th class="num" title=tip>{heading}</th> });

    view! {
        <Title text="Settings · runlens"/>
        <div class="page-head">
            <h1>"Settings"</h1>
        </div>
        <crate::pages::access::SettingsTabs current="/settings"/>
        <section class="section">
            <h2>"Model prices"</h2>
            <p class="muted">
                "USD per million tokens. Cache reads and writes are parts of the input tokens, "
                "reasoning is part of the output tokens: each part is priced at its own rate, never twice. "
                "Runs of a model without a price show no cost; changing a price re-prices past runs."
            </p>
            {outcome}
            <div class="table-scroll">
                <table class="table prices" data-testid="price-table">
                    <thead>
                        <tr><th>"Model"</th>{headings}<th>"Updated (UTC)"</th><th></th></tr>
                    </thead>
                    <tbody>
                        <Loaded load=move || async move { prices.await } loading="Loading prices…" keep_previous=true colspan=8 let:list>
                            {list.into_iter().map(|price| view! { <PriceRow price save delete/> }).collect::<Vec<_>>()}
                        </Loaded>
                        <NewPriceRow save/>
                    </tbody>
                </table>
            </div>
        </section>
        <Loaded load=move || async move { retention.await } loading="Loading retention…" let:policy>
            {policy.map(|policy| view! { <RetentionPanel policy save=save_retention/> })}
        </Loaded>
        <Loaded load=move || async move { servers.await } loading="Loading servers…" let:view>
            {view.map(|view| view! { <ServersPanel view/> })}
        </Loaded>
        <section class="section">
            <h2>"HTTP API"</h2>
            <p class="muted">
                "Everything here can be done over the JSON API too: see the "
                <a href="/api/docs" rel="external" data-testid="api-docs-link">"API reference"</a>
                " (or the OpenAPI document at "<code>"/api/openapi.json"</code>")."
            </p>
        </section>
    }
}

/// How old and how many of the project's runs are kept (its admins only):
/// a plain form posting to `save_retention`, blank fields no limit.
#[component]
fn RetentionPanel(policy: runlens_engine::model::Retention, save: ServerAction<SaveRetention>) -> impl IntoView {
    let outcome = move || match save.value().get()? {
        Ok(_) => Some(view! { <p class="notice" data-testid="retention-saved">"Retention saved."</p> }.into_any()),
        Err(e) => Some(view! { <ErrorBox message=server_error_message(&e) testid="retention-error"/> }.into_any()),
    };
    let days = policy.max_age_days.map(|d| d.to_string()).unwrap_or_default();
    let runs = policy.max_runs.map(|n| n.to_string()).unwrap_or_default();
    let summary = match (policy.max_age_days, policy.max_runs) {
        (None, None) => "Runs are kept however old and however many.".to_owned(),
        (Some(d), None) => format!("Finished runs older than {d} days are deleted."),
        (None, Some(n)) => {
            format!("Finished runs past the newest {} are deleted.", crate::components::token_chart::thousands(n))
        }
        (Some(d), Some(n)) => format!(
            "Finished runs older than {d} days, or past the newest {}, are deleted.",
            crate::components::token_chart::thousands(n)
        ),
    };
    view! {
        <section class="section" data-testid="retention">
            <h2>"Retention"</h2>
            <p class="muted">
                "A background job deletes finished runs (done, failed, cancelled) past these limits every few "
                "minutes, in small batches, with their child runs and everything recorded of them; paused and "
                "running runs are kept. Emails sent, webhook deliveries and the audit log stay. Blank: no limit."
            </p>
            <p data-testid="retention-summary">{summary}</p>
            {outcome}
            <ActionForm action=save attr:class="inline-form" attr:data-testid="retention-form">
                <label>
                    <span>"Days kept"</span>
                    <input type="text" inputmode="numeric" name="max_age_days" value=days placeholder="no limit"
                        data-testid="retention-days" aria-label="Days kept (1 to 36500, blank: no limit)"/>
                </label>
                <label>
                    <span>"Runs kept"</span>
                    <input type="text" inputmode="numeric" name="max_runs" value=runs placeholder="no limit"
                        data-testid="retention-runs" aria-label="Runs kept (1 to 100000000, blank: no limit)"/>
                </label>
                <button type="submit" class="button" data-testid="retention-save">"Save retention"</button>
            </ActionForm>
        </section>
    }
}

/// The runlens servers sharing the database (instance admins only): this
/// one marked, each one's heartbeat and the runs it drives.
#[component]
fn ServersPanel(view: ServersView) -> impl IntoView {
    let ServersView { servers, now } = view;
    let empty = servers.is_empty().then(|| {
        view! { <tr><td colspan="6" class="muted">"No server has registered yet."</td></tr> }
    });
    let rows = servers
        .into_iter()
        .map(|s| {
            let age = format::duration_ms((now - s.heartbeat_at).num_milliseconds());
            let (class, state) =
                if s.alive { ("badge badge-done", "alive") } else { ("badge badge-failed", "not alive") };
            let this = s.this.then(|| view! { <span class="muted" data-testid="server-this">" (this server)"</span> });
            view! {
                <tr data-testid="server-row" data-server=s.id.clone() data-alive=s.alive.to_string()
                    data-this=s.this.to_string()>
                    <td class="mono">{s.address.clone()} {this}</td>
                    <td class="mono">{s.version.clone()}</td>
                    <td class="nowrap">{format::time(&s.started_at)}</td>
                    <td class="nowrap">
                        {format::time(&s.heartbeat_at)} <span class="muted">" (" {age} " ago)"</span>
                    </td>
                    <td class="num">{format!("{} / {}", s.runs_held, s.max_runs)}</td>
                    <td><span class=class data-testid="server-state">{state}</span></td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <section class="section" data-testid="servers-panel">
            <h2>"Servers"</h2>
            <p class="muted">
                "The runlens servers sharing this database (several can share a PostgreSQL database; "
                "on SQLite there is this one). A server that stops renewing its heartbeat is no longer alive, "
                "and the others take its runs over. Only instance admins see this."
            </p>
            <div class="table-scroll">
                <table class="table" data-testid="server-table">
                    <thead>
                        <tr>
                            <th>"Address"</th>
                            <th>"Version"</th>
                            <th>"Started (UTC)"</th>
                            <th>"Last heartbeat (UTC)"</th>
                            <th class="num" title="Runs the server drives now, and at most at once">"Runs held / max"</th>
                            <th title="Alive: renewed within the lease time">"State"</th>
                        </tr>
                    </thead>
                    <tbody>{empty}{rows}</tbody>
                </table>
            </div>
        </section>
    }
}

fn number(v: f64) -> String {
    // Shortest text that reads back as the same number.
    format!("{v}")
}

/// One model's prices as an inline form.
#[component]
fn PriceRow(price: ModelPrice, save: ServerAction<SavePrice>, delete: ServerAction<DeletePrice>) -> impl IntoView {
    let form_id = format!("price-{}", format::url_encode(&price.model));
    let values = [price.input, price.output, price.cache_read, price.cache_write, price.reasoning];
    let cells = FIELDS
        .iter()
        .zip(values)
        .map(|((name, heading, _), v)| {
            let label = format!("{heading} price of {}", price.model);
            view! {
                <td class="num">
                    <input type="number" step="any" min="0" name=*name value=number(v) form=form_id.clone()
                        aria-label=label data-testid=format!("price-{name}")/>
                </td>
            }
        })
        .collect::<Vec<_>>();
    let model = price.model.clone();
    let (save_model, delete_model) = (model.clone(), model.clone());
    let updated =
        price.updated_at.filter(|t| t.timestamp() > 0).map(|t| format::time(&t)).unwrap_or_else(|| format::NONE.into());
    view! {
        <tr data-testid="price-row" data-model=model.clone()>
            <td class="mono">{model.clone()}</td>
            {cells}
            <td class="nowrap">{updated}</td>
            <td class="nowrap">
                <ActionForm action=save attr:id=form_id.clone() attr:class="inline-form">
                    <input type="hidden" name="model" value=save_model/>
                    <button type="submit" class="button" data-testid="price-save">"Save"</button>
                </ActionForm>
                <ActionForm action=delete attr:class="inline-form">
                    <input type="hidden" name="model" value=delete_model/>
                    <button type="submit" class="button subtle" data-testid="price-delete">"Remove"</button>
                </ActionForm>
            </td>
        </tr>
    }
}

/// An empty row that adds a model's price.
#[component]
fn NewPriceRow(save: ServerAction<SavePrice>) -> impl IntoView {
    let cells = FIELDS
        .iter()
        .map(|(name, heading, _)| {
            let required = matches!(*name, "input" | "output");
            view! {
                <td class="num">
                    <input type="number" step="any" min="0" name=*name form="price-new" required=required
                        placeholder=if required { "required" } else { "default" }
                        aria-label=format!("{heading} price of the new model") data-testid=format!("new-price-{name}")/>
                </td>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <tr class="new-price" data-testid="new-price-row">
            <td>
                <input type="text" name="model" form="price-new" required placeholder="model name, e.g. gpt-4.1"
                    aria-label="Model name" data-testid="new-price-model"/>
            </td>
            {cells}
            <td></td>
            <td>
                <ActionForm action=save attr:id="price-new" attr:class="inline-form">
                    <button type="submit" class="button primary" data-testid="new-price-save">"Add price"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
