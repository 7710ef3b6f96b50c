//! Unit tests of the form handlers: the playground's fields to `CreateRun`
//! and the error redirect that echoes the form; the import's upload checks
//! and its error redirect.

use axum::http::{header, StatusCode};

use super::*;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn builds_a_full_request() {
    let req = create_run_from_form(&pairs(&[
        ("prompt", "What is 2+2?"),
        ("system_prompt", ""),
        ("model", "builtin"),
        ("tools_present", "1"),
        ("tools", "calculator"),
        ("tags", "env=dev, team = search"),
        ("context", r#"{"timezone": "Europe/Paris"}"#),
        ("max_turns", "7"),
    ]))
    .expect("valid form");
    assert_eq!(req.initial_prompt, "What is 2+2?");
    assert_eq!(req.system_prompt, None);
    assert_eq!(req.tools, Some(vec!["calculator".to_string()]));
    assert_eq!(req.tags.get("team").map(String::as_str), Some("search"));
    assert_eq!(req.context, Some(serde_json::json!({"timezone": "Europe/Paris"})));
    assert_eq!(req.max_turns, Some(7));
}

#[test]
fn no_checked_tool_means_no_tools_and_no_field_means_all() {
    let none = create_run_from_form(&pairs(&[("prompt", "hi"), ("tools_present", "1")])).expect("ok");
    assert_eq!(none.tools, Some(vec![]));
    let all = create_run_from_form(&pairs(&[("prompt", "hi")])).expect("ok");
    assert_eq!(all.tools, None);
}

#[test]
fn reports_bad_input() {
    assert!(create_run_from_form(&pairs(&[("prompt", "  ")])).is_err());
    assert!(create_run_from_form(&pairs(&[("prompt", "x"), ("context", "{nope")])).is_err());
    assert!(create_run_from_form(&pairs(&[("prompt", "x"), ("context", "[1]")])).is_err());
    assert!(create_run_from_form(&pairs(&[("prompt", "x"), ("tags", "justakey")])).is_err());
    assert!(create_run_from_form(&pairs(&[("prompt", "x"), ("max_turns", "ten")])).is_err());
}

#[test]
fn approval_checkboxes_and_timeout_become_the_run_policy() {
    let req = create_run_from_form(&pairs(&[
        ("prompt", "hi"),
        ("approval_tools", "calculator"),
        ("approval_tools", "wait"),
        ("approval_tools", "calculator"),
        ("approval_timeout_s", " 90 "),
    ]))
    .expect("ok");
    assert_eq!(req.approval, Some(ApprovalRequest::tools(["calculator", "wait"]).with_timeout_s(90)));
    let only_tools =
        create_run_from_form(&pairs(&[("prompt", "hi"), ("approval_tools", "wait"), ("approval_timeout_s", "")]))
            .expect("ok");
    assert_eq!(only_tools.approval, Some(ApprovalRequest::tools(["wait"])));
    let only_timeout = create_run_from_form(&pairs(&[("prompt", "hi"), ("approval_timeout_s", "30")])).expect("ok");
    assert_eq!(only_timeout.approval, Some(ApprovalRequest::timeout_s(30)));
    let neither = create_run_from_form(&pairs(&[("prompt", "hi"), ("approval_tools", " ")])).expect("ok");
    assert_eq!(neither.approval, None);
}

#[test]
fn a_bad_approval_timeout_is_explained() {
    for bad in ["0", "-5", "soon", "1.5"] {
        let err = create_run_from_form(&pairs(&[("prompt", "x"), ("approval_timeout_s", bad)])).expect_err(bad);
        assert!(err.contains("approval timeout"), "{err}");
    }
}

#[test]
fn error_redirect_echoes_every_field() {
    let resp = back_to_form(&pairs(&[("prompt", "a b"), ("tools", "x"), ("tools", "y")]), "bad & wrong");
    let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(location, "/playground?error=bad%20%26%20wrong&prompt=a%20b&tools=x&tools=y");
    assert_eq!(resp.status(), axum::http::StatusCode::SEE_OTHER);
}

#[test]
fn result_schema_and_conversation_flags() {
    let req = create_run_from_form(&pairs(&[
        ("prompt", "hi"),
        ("result_schema", r#"{"type": "object", "properties": {"n": {"type": "number"}}}"#),
        ("flags_present", "1"),
        ("call_summarization", "true"),
    ]))
    .expect("ok");
    assert_eq!(req.result_schema, Some(serde_json::json!({"type": "object", "properties": {"n": {"type": "number"}}})));
    assert_eq!(req.interactive, Some(false), "the unchecked box is off");
    assert_eq!(req.call_summarization, Some(true));

    let on =
        create_run_from_form(&pairs(&[("prompt", "hi"), ("flags_present", "1"), ("interactive", "true")])).expect("ok");
    assert_eq!((on.interactive, on.call_summarization), (Some(true), Some(false)));

    // Not on the form at all (older links, API-like posts): the run defaults.
    let plain = create_run_from_form(&pairs(&[("prompt", "hi"), ("result_schema", "  ")])).expect("ok");
    assert_eq!((plain.interactive, plain.call_summarization, plain.result_schema), (None, None, None));
}

#[test]
fn a_result_schema_that_is_not_json_is_explained() {
    let err =
        create_run_from_form(&pairs(&[("prompt", "x"), ("result_schema", "{type: object")])).expect_err("not JSON");
    assert!(err.starts_with("Result schema is not valid JSON"), "{err}");
}

#[test]
fn the_file_must_be_there_and_be_json() {
    assert!(no_file().contains("Choose a run state file"));
    assert!(check_document(b" \n").unwrap_err().contains("Choose"));
    let err = check_document(b"{broken").unwrap_err();
    assert!(err.starts_with("The file is not valid JSON"), "{err}");
    assert_eq!(check_document(br#"{"a": 1}"#), Ok(()));
}

#[test]
fn errors_go_back_to_the_runs_page() {
    let resp = back_to_runs("bad & wrong");
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[header::LOCATION], "/runs?import_error=bad%20%26%20wrong");
}
