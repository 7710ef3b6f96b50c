//! `/datasets`: the project's datasets (name, items, version, last change)
//! and, for operators, a form to make one; `/datasets/:id`: one dataset's
//! items at a version (its current one, or `?version=N`), each with its
//! input, what it expects, its tags and the run it came from, in pages.
//! Items are added from a run's trace page ("Add to dataset"), pasted here
//! as JSONL or CSV, or through the API; operators edit (prompt, expected,
//! tags) or delete one here, each change a new version.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use runlens_engine::model::{Dataset, DatasetInput, DatasetItem, MessageBody, Role};
use serde_json::Value;

use crate::api::datasets::{
    get_dataset, get_datasets, CreateDataset, DatasetView, DatasetsView, DeleteDatasetItem, EditDatasetItem,
    UploadItems, ITEMS_SHOWN,
};
use crate::components::Loaded;
use crate::format;
use crate::pages::experiments::DatasetExperiments;

/// Characters of an input or expected value shown in a table cell.
const CELL_CHARS: usize = 240;

fn clipped(text: &str) -> String {
    if text.chars().count() <= CELL_CHARS {
        return text.to_owned();
    }
    text.chars().take(CELL_CHARS).collect::<String>() + "…"
}

#[component]
pub fn DatasetsPage() -> impl IntoView {
    let create = ServerAction::<CreateDataset>::new();
    let list = crate::resource::new(move || create.version().get(), |_| get_datasets());
    view! {
        <Title text="Datasets · runlens"/>
        <div class="page-head">
            <h1>"Datasets"</h1>
        </div>
        <p class="muted">
            "Cases an agent must get right: inputs with what they should give, versioned. Add a run from its trace \
             page, or give or upload items through the API ("
            <a href="/api/docs#tag/datasets">"datasets"</a> ")."
        </p>
        <Loaded load=move || async move { list.await } loading="Loading the datasets…" keep_previous=true let:view>
            <DatasetList view create/>
        </Loaded>
    }
}

#[component]
fn DatasetList(view: DatasetsView, create: ServerAction<CreateDataset>) -> impl IntoView {
    let DatasetsView { datasets, role } = view;
    let form = role.is_some_and(|r| r >= Role::Operator).then(|| view! { <NewDatasetForm create/> });
    let body = if datasets.is_empty() {
        view! { <p class="empty" data-testid="datasets-empty">"No datasets yet."</p> }.into_any()
    } else {
        let rows = datasets.into_iter().map(dataset_row).collect::<Vec<_>>();
        view! {
            <div class="table-scroll">
                <table class="table" data-testid="datasets-table">
                    <thead>
                        <tr>
                            <th scope="col">"Name"</th>
                            <th scope="col">"Description"</th>
                            <th scope="col" class="num">"Items"</th>
                            <th scope="col" class="num">"Version"</th>
                            <th scope="col">"Changed (UTC)"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        }
        .into_any()
    };
    view! { {body} {form} }
}

fn dataset_row(d: Dataset) -> impl IntoView {
    let href = format!("/datasets/{}", format::url_encode(&d.id));
    let name = d.name.clone();
    view! {
        <tr data-testid="dataset-row" data-name=name>
            <td><a href=href>{d.name}</a></td>
            <td class="muted">{clipped(&d.description)}</td>
            <td class="num">{d.item_count}</td>
            <td class="num">{d.version}</td>
            <td class="nowrap" title=d.updated_at.to_rfc3339()>{format::time(&d.updated_at)}</td>
        </tr>
    }
}

#[component]
fn NewDatasetForm(create: ServerAction<CreateDataset>) -> impl IntoView {
    let error = crate::components::form_error::error_line(create.value(), "dataset-error");
    view! {
        <ActionForm action=create attr:class="score-form" attr:data-testid="new-dataset">
            <label class="field">
                <span>"Name"</span>
                <input name="name" required maxlength="100" autocomplete="off" placeholder="arithmetic"
                    data-testid="dataset-name" aria-describedby="dataset-error"/>
            </label>
            <label class="field grow">
                <span>"Description " <em>"(optional)"</em></span>
                <input name="description" maxlength="4000" autocomplete="off" data-testid="dataset-description"/>
            </label>
            <button type="submit" class="button" data-testid="dataset-create">"Make a dataset"</button>
            {error}
        </ActionForm>
    }
}

#[component]
pub fn DatasetPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let version = Memo::new(move |_| query.read().get("version").and_then(|v| v.parse::<u32>().ok()));
    let cursor = Memo::new(move |_| query.read().get("cursor"));
    let upload = ServerAction::<UploadItems>::new();
    let edit = ServerAction::<EditDatasetItem>::new();
    let remove = ServerAction::<DeleteDatasetItem>::new();
    // After a change, the current version (with the change).
    let changes = move || upload.version().get() + edit.version().get() + remove.version().get();
    let data = crate::resource::new(
        move || (id.get(), version.get(), cursor.get(), changes()),
        |(id, v, c, changes)| get_dataset(id, if changes > 0 { None } else { v }, c),
    );
    view! {
        <Loaded load=move || async move { data.await } loading="Loading the dataset…" keep_previous=true let:view>
            {match view {
                Some(view) => view! { <DatasetDetail view upload edit remove/> }.into_any(),
                None => view! {
                    <Title text="Dataset not found · runlens"/>
                    <p class="empty" data-testid="dataset-not-found">
                        "No such dataset in this project. " <a href="/datasets">"All datasets"</a>
                    </p>
                }
                .into_any(),
            }}
        </Loaded>
    }
}

#[component]
fn DatasetDetail(
    view: DatasetView,
    upload: ServerAction<UploadItems>,
    edit: ServerAction<EditDatasetItem>,
    remove: ServerAction<DeleteDatasetItem>,
) -> impl IntoView {
    let DatasetView { dataset, items, role } = view;
    // Items are edited at the current version, by operators.
    let editable = role.is_some_and(|r| r >= Role::Operator) && items.version == dataset.version;
    let upload_form =
        role.is_some_and(|r| r >= Role::Operator).then(|| view! { <UploadForm dataset_id=dataset.id.clone() upload/> });
    let title = format::rcdata_text(&format!("{} · datasets · runlens", dataset.name));
    let href = format!("/datasets/{}", format::url_encode(&dataset.id));
    let shown = items.version;
    let old = (shown != dataset.version).then(|| {
        view! {
            <p class="muted" data-testid="dataset-old-version">
                "Version " {shown} " of " {dataset.version} ". " <a href=href.clone()>"Show the current version"</a>
            </p>
        }
    });
    let next = items.next_cursor.clone().map(|c| {
        let v = shown.to_string();
        let link = format!("{href}?{}", format::query_string([("version", v.as_str()), ("cursor", c.as_str())]));
        view! { <a class="button subtle" href=link data-testid="dataset-next">"Next " {ITEMS_SHOWN} " items →"</a> }
    });
    let empty = items.items.is_empty();
    let dataset_id = dataset.id.clone();
    let rows = (items.items.into_iter())
        .map(|item| item_row(item, editable.then(|| (dataset_id.clone(), edit, remove))))
        .collect::<Vec<_>>();
    let item_error = move || {
        let message = edit.value().with(|v| v.as_ref().and_then(|r| r.as_ref().err().map(|e| e.message.clone())));
        let message = message
            .or_else(|| remove.value().with(|v| v.as_ref().and_then(|r| r.as_ref().err().map(|e| e.message.clone()))));
        message.map(|m| view! { <p class="inline-error" role="alert" data-testid="item-error">{m}</p> })
    };
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/datasets">"Datasets"</a> " /"</div>
                <h1 data-testid="dataset-title">{dataset.name.clone()}</h1>
            </div>
            <form method="get" action=href.clone() class="inline-form">
                <label class="field inline">
                    <span>"Version"</span>
                    <input type="number" name="version" min="0" max=dataset.version value=shown
                        data-testid="dataset-version"/>
                </label>
                <button type="submit" class="button subtle">"Show"</button>
            </form>
        </div>
        <p class="muted">{dataset.description.clone()}</p>
        <p data-testid="dataset-facts">
            {format::count(u64::from(dataset.item_count), "item", "items")} " at version " {dataset.version} " · made by " {dataset.created_by.name.clone()}
            " · changed " {format::time(&dataset.updated_at)}
        </p>
        {old}
        {item_error}
        {if empty {
            view! {
                <p class="empty" data-testid="dataset-items-empty">
                    "No items at this version. Add a run from its trace page (\"Add to dataset\"), or items through "
                    <code>"POST /api/datasets/…/items"</code> " or an upload."
                </p>
            }
            .into_any()
        } else {
            view! {
                <div class="table-scroll">
                    <table class="table dataset-items" data-testid="dataset-items">
                        <thead>
                            <tr>
                                <th scope="col">"Input"</th>
                                <th scope="col">"Expected"</th>
                                <th scope="col">"Tags"</th>
                                <th scope="col">"From"</th>
                                <th scope="col" class="num">"Since version"</th>
                                {editable.then(|| view! { <th scope="col"><span class="visually-hidden">"Edit"</span></th> })}
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            }
            .into_any()
        }}
        {next}
        {upload_form}
        <DatasetExperiments dataset_id=dataset.id.clone() item_count=dataset.item_count/>
    }
}

/// The operator's form to add items: pasted JSONL (one item per line) or
/// CSV (a header row: `prompt`, `expected`, `tags`, other columns into
/// metadata), kept whole as a new version or not at all.
#[component]
fn UploadForm(dataset_id: String, upload: ServerAction<UploadItems>) -> impl IntoView {
    let outcome = move || {
        upload.value().with(|v| match v {
            Some(Ok((n, version))) => Some(
                view! {
                    <p class="muted" role="status" data-testid="upload-added">
                        {format!("Added {n} items: the dataset is at version {version}.")}
                    </p>
                }
                .into_any(),
            ),
            Some(Err(e)) => Some(
                view! {
                    <p class="inline-error" role="alert" id="upload-error" data-testid="upload-error">
                        {e.message.clone()}
                    </p>
                }
                .into_any(),
            ),
            None => None,
        })
    };
    view! {
        // Open again after an upload (the page is read again), with its outcome.
        <details class="section" data-testid="upload" open=move || upload.value().with(Option::is_some)>
            <summary>"Add items (paste JSONL or CSV)"</summary>
            <ActionForm action=upload attr:class="upload-form" attr:data-testid="upload-form">
                <input type="hidden" name="dataset_id" value=dataset_id/>
                <label class="field">
                    <span>"Format"</span>
                    <select name="format" data-testid="upload-format">
                        <option value="csv" selected>"CSV: a header row (prompt, expected, tags; other columns are metadata)"</option>
                        <option value="jsonl">"JSONL: one item per line ({\"input\": {\"prompt\": …}, \"expected\": …})"</option>
                    </select>
                </label>
                <label class="field">
                    <span>"Rows"</span>
                    <textarea name="content" rows="6" required data-testid="upload-content" aria-describedby="upload-error"
                        placeholder="prompt,expected,tags\nWhat is 2 + 2?,4,easy"></textarea>
                </label>
                <button type="submit" class="button" data-testid="upload-submit">"Add the items"</button>
                {outcome}
            </ActionForm>
        </details>
    }
}

/// An item's input as a line: its prompt, or its conversation's last message
/// and how many items came before.
fn input_text(input: &DatasetInput) -> String {
    if let Some(prompt) = &input.prompt {
        return clipped(prompt);
    }
    let items = input.input_items.as_deref().unwrap_or_default();
    let last = items.iter().rev().find_map(|m| match m {
        MessageBody::Human { message } => Some(message.as_str()),
        _ => None,
    });
    format!("({} earlier items) {}", items.len().saturating_sub(1), clipped(last.unwrap_or("")))
}

fn expected_text(expected: &Option<Value>) -> String {
    match expected {
        None => String::new(),
        Some(Value::String(s)) => clipped(s),
        Some(v) => clipped(&v.to_string()),
    }
}

/// An item's row; with `editor` (the dataset, and the actions), its Edit
/// and Delete for operators.
fn item_row(
    item: DatasetItem,
    editor: Option<(String, ServerAction<EditDatasetItem>, ServerAction<DeleteDatasetItem>)>,
) -> impl IntoView {
    let source = item.source_run_id.clone().map(|run| {
        let href = format!("/runs/{}", format::url_encode(&run));
        view! { <a href=href class="mono" title=run.clone()>"run " {format::short_id(&run)}</a> }
    });
    let recorded = (!item.recorded_results.is_empty()).then(|| {
        let n = item.recorded_results.len();
        view! { <div class="muted">{n} {if n == 1 { " recorded result" } else { " recorded results" }}</div> }
    });
    let editor = editor.map(|(dataset_id, edit, remove)| item_editor(&item, dataset_id, edit, remove));
    let tags = item.tags.into_iter().map(|t| view! { <span class="tag">{t}</span> " " }).collect::<Vec<_>>();
    view! {
        <tr data-testid="dataset-item" data-item-id=item.id.clone()>
            <td class="score-comment">{input_text(&item.input)}</td>
            <td class="score-comment mono">{expected_text(&item.expected)}</td>
            <td>{tags}</td>
            <td class="nowrap">{source} {recorded}</td>
            <td class="num">{item.version_added}</td>
            {editor.map(|e| view! { <td class="item-edit">{e}</td> })}
        </tr>
    }
}

/// Edit (the prompt when the item has one, the expected value, the tags)
/// and Delete, each making a new version.
fn item_editor(
    item: &DatasetItem,
    dataset_id: String,
    edit: ServerAction<EditDatasetItem>,
    remove: ServerAction<DeleteDatasetItem>,
) -> impl IntoView {
    let expected = match &item.expected {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
    };
    let prompt = item.input.prompt.clone().map(|p| {
        view! {
            <label class="field">
                <span>"Prompt"</span>
                <textarea name="prompt" rows="2" maxlength="100000" data-testid="item-prompt">{p}</textarea>
            </label>
        }
    });
    let tags = item.tags.join(", ");
    let (id, again, ds) = (item.id.clone(), item.id.clone(), dataset_id.clone());
    view! {
        <details class="item-editor">
            <summary data-testid="item-edit">"Edit"</summary>
            <ActionForm action=edit attr:class="stack" attr:data-testid="item-edit-form">
                <input type="hidden" name="dataset_id" value=dataset_id/>
                <input type="hidden" name="item_id" value=id/>
                {prompt}
                <label class="field">
                    <span>"Expected " <em>"(text or JSON; blank: none)"</em></span>
                    <textarea name="expected" rows="3" data-testid="item-expected">{expected}</textarea>
                </label>
                <label class="field">
                    <span>"Tags " <em>"(comma-separated)"</em></span>
                    <input type="text" name="tags" value=tags autocomplete="off" data-testid="item-tags"/>
                </label>
                <button type="submit" class="button" data-testid="item-save">"Save as a new version"</button>
            </ActionForm>
            <ActionForm action=remove attr:class="inline-form">
                <input type="hidden" name="dataset_id" value=ds/>
                <input type="hidden" name="item_id" value=again/>
                <button type="submit" class="button danger" data-testid="item-delete">"Delete the item"</button>
            </ActionForm>
        </details>
    }
}
