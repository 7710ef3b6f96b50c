//! The dataset page's experiments: those run on it, and for operators the
//! form that starts one — an agent or a model, how tools answer, a scorer —
//! or a set of one per model when more models are ticked.

use leptos::prelude::*;
use runlens_engine::model::Role;

use super::ExperimentList;
use crate::api::experiments::{get_experiment_form, ExperimentFormOptions, ExperimentsView, StartExperiment};
use crate::components::Loaded;

/// The dataset page's experiments and, for operators, the form.
#[component]
pub fn DatasetExperiments(dataset_id: String, item_count: u32) -> impl IntoView {
    let start = ServerAction::<StartExperiment>::new();
    let id = dataset_id.clone();
    let options = crate::resource::new(move || start.version().get(), move |_| get_experiment_form(id.clone()));
    view! {
        <section class="section" aria-labelledby="experiments">
            <h2 id="experiments">"Experiments"</h2>
            <Loaded load=move || async move { options.await } loading="Loading the experiments…" keep_previous=true let:opts>
                <DatasetExperimentsBody opts start dataset_id=dataset_id.clone() item_count/>
            </Loaded>
        </section>
    }
}

#[component]
fn DatasetExperimentsBody(
    opts: ExperimentFormOptions,
    start: ServerAction<StartExperiment>,
    dataset_id: String,
    item_count: u32,
) -> impl IntoView {
    let ExperimentFormOptions { agents, models, experiments, role } = opts;
    let list = view! { <ExperimentList view=ExperimentsView { experiments }/> };
    let form = (role.is_some_and(|r| r >= Role::Operator) && item_count > 0).then(|| {
        let agent_options = agents
            .into_iter()
            .map(|a| view! { <option value=format!("agent:{}", a.id)>{format!("agent {} (v{})", a.name, a.version)}</option> })
            .collect::<Vec<_>>();
        let judge_options = (models.iter())
            .map(|m| view! { <option value=format!("judge:{m}")>{format!("LLM as judge: {m} (rubric below)")}</option> })
            .collect::<Vec<_>>();
        let model_options = models
            .iter()
            .map(|m| view! { <option value=format!("model:{m}")>{format!("model {m}")}</option> })
            .collect::<Vec<_>>();
        // Several models: one experiment each, read side by side.
        let set_boxes = (models.len() > 1).then(|| {
            let boxes = models
                .into_iter()
                .map(|m| {
                    view! {
                        <label class="check">
                            <input type="checkbox" name="models[]" value=m.clone() data-testid="experiment-also-model"/>
                            " " {m}
                        </label>
                    }
                })
                .collect::<Vec<_>>();
            view! {
                <fieldset class="field grow check-row" data-testid="experiment-models">
                    <legend>"Also run with " <em>"(one experiment per model, side by side)"</em></legend>
                    {boxes}
                </fieldset>
            }
        });
        let error = crate::components::form_error::error_line(start.value(), "experiment-error");
        view! {
            <ActionForm action=start attr:class="experiment-form" attr:data-testid="new-experiment">
                <input type="hidden" name="dataset_id" value=dataset_id.clone()/>
                <label class="field">
                    <span>"Run with"</span>
                    <select name="run_with" data-testid="experiment-run-with" aria-describedby="experiment-error">
                        {agent_options} {model_options}
                    </select>
                </label>
                <label class="field">
                    <span>"Tools"</span>
                    <select name="tool_mode" data-testid="experiment-tool-mode">
                        <option value="recorded" selected>"recorded results (nothing runs)"</option>
                        <option value="live">"live (approvals apply)"</option>
                    </select>
                </label>
                <label class="field">
                    <span>"Scorer"</span>
                    <select name="scorer" data-testid="experiment-scorer">
                        <option value="contains" selected>"answer contains expected"</option>
                        <option value="exact">"answer is exactly expected"</option>
                        <option value="tool_calls">"expected tool calls"</option>
                        {judge_options}
                        <option value="">"none"</option>
                    </select>
                </label>
                <label class="field grow">
                    <span>"Rubric " <em>"(for the judge)"</em></span>
                    <input type="text" name="rubric" maxlength="16000" autocomplete="off"
                        placeholder="Gives the expected answer and stays polite." data-testid="experiment-rubric"
                        aria-describedby="experiment-error"/>
                </label>
                <label class="field">
                    <span>"At once"</span>
                    <input type="number" name="concurrency" min="1" max="32" value="4" data-testid="experiment-concurrency"/>
                </label>
                {set_boxes}
                <label class="field grow">
                    <span>"Name " <em>"(optional)"</em></span>
                    <input type="text" name="name" maxlength="200" autocomplete="off" data-testid="experiment-name"/>
                </label>
                <button type="submit" class="button" data-testid="experiment-start">"Run an experiment"</button>
                {error}
            </ActionForm>
        }
    });
    view! { {list} {form} }
}
