//! The playground's "Compare models" control on the server side: it renders
//! one box per model; the plain form post (no JavaScript) with several
//! models ticked starts them as one comparison group and lands on
//! `/compare?group=…`, with one model ticked it is a run on that model, and
//! none or too many ticked send the person back with the error and the
//! boxes as they were.

use axum::http::{header, Method, StatusCode};

use crate::groups_api::{three_model_app, MODELS};
use crate::support::{urlencode, App, Reply};

async fn post_form(app: &App, fields: &[(&str, &str)]) -> Reply {
    let form: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect();
    app.send(Method::POST, "/playground", Some(&form.join("&")), "application/x-www-form-urlencoded").await
}

/// The `<input …>` tag that has `marker`.
fn input_with<'a>(html: &'a str, marker: &str) -> &'a str {
    let at = html.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let start = html[..at].rfind("<input").unwrap();
    &html[start..at + html[at..].find('>').unwrap()]
}

fn location(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    reply.headers[header::LOCATION].to_str().unwrap().to_owned()
}

const FORM: [(&str, &str); 4] =
    [("prompt", "What is 6 * 7?"), ("model", "builtin"), ("tools_present", "1"), ("tools", "calculator")];

#[tokio::test]
async fn the_playground_offers_each_model_to_compare() {
    let app = three_model_app().await;
    let page = app.get("/playground").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.text;
    assert!(html.contains("data-testid=\"compare-models\"") && html.contains("<legend>Compare models</legend>"));
    assert!(html.contains("name=\"compare\"") && html.contains("data-testid=\"compare-toggle\""));
    for model in MODELS {
        assert!(html.contains(&format!("data-model=\"{model}\"")), "a box for {model}");
    }
    assert_eq!(html.matches("name=\"compare_models\"").count(), MODELS.len());
    assert!(!input_with(html, "data-testid=\"compare-toggle\"").contains("checked"), "unchecked at first");
    assert!(!input_with(html, "data-model=\"builtin\"").contains("checked"));
}

#[tokio::test]
async fn the_form_post_starts_a_comparison_of_the_ticked_models() {
    let app = three_model_app().await;
    let mut fields = FORM.to_vec();
    fields.extend([("compare", "1"), ("compare_models", MODELS[2]), ("compare_models", MODELS[0])]);
    let to = location(&post_form(&app, &fields).await);
    let group = to.strip_prefix("/compare?group=").unwrap_or_else(|| panic!("lands on the group: {to}"));
    let read = app.engine.comparisons().compare_group(group).await.unwrap();
    let models: Vec<&str> = read.members.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(models, [MODELS[2], MODELS[0]], "in the order ticked");
    assert!(read.members.iter().all(|m| m.name == format!("What is 6 * 7? · {}", m.model)));

    // One model ticked: an ordinary run on that model.
    let mut one = FORM.to_vec();
    one.extend([("compare", "1"), ("compare_models", MODELS[1])]);
    let to = location(&post_form(&app, &one).await);
    let id = to.strip_prefix("/runs/").unwrap_or_else(|| panic!("lands on the run: {to}"));
    let run = app.engine.runs().get_run(id).await.unwrap();
    assert_eq!((run.model.as_str(), run.group_id), (MODELS[1], None));

    // Ticks without "Compare models" checked: the selected model.
    let mut unchecked = FORM.to_vec();
    unchecked.extend([("compare_models", MODELS[1]), ("compare_models", MODELS[2])]);
    let to = location(&post_form(&app, &unchecked).await);
    let run = app.engine.runs().get_run(to.strip_prefix("/runs/").unwrap()).await.unwrap();
    assert_eq!((run.model.as_str(), run.group_id), ("builtin", None));
}

#[tokio::test]
async fn no_model_or_too_many_ticked_is_explained_on_the_form() {
    let app = three_model_app().await;
    let mut none = FORM.to_vec();
    none.push(("compare", "1"));
    let back = location(&post_form(&app, &none).await);
    assert!(back.starts_with("/playground?error=") && back.contains("compare=1"), "{back}");
    let page = app.get(&back).await.text;
    assert!(page.contains("data-testid=\"form-error\"") && page.contains("no model is ticked"), "{page}");
    assert!(page.contains("data-testid=\"compare-toggle\""), "the form is shown again");

    let nine: Vec<String> = (0..9).map(|i| format!("m{i}")).collect();
    let mut many = FORM.to_vec();
    many.push(("compare", "1"));
    many.extend(nine.iter().map(|m| ("compare_models", m.as_str())));
    many.push(("compare_models", MODELS[1]));
    let back = location(&post_form(&app, &many).await);
    let page = app.get(&back).await.text;
    assert!(page.contains("10 models are ticked to compare; tick at most 8."), "{page}");
    let ticked = input_with(&page, "data-model=\"local/small\"");
    assert!(ticked.contains("checked"), "the ticked box stays ticked: {ticked}");
    assert!(input_with(&page, "data-testid=\"compare-toggle\"").contains("checked"));
    assert!(!input_with(&page, "data-model=\"local/large\"").contains("checked"));
    assert_eq!(app.get("/api/runs?all=true").await.json()["runs"], serde_json::json!([]), "nothing was started");
}
