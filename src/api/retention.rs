//! Server functions of the settings page's retention panel (admins of the
//! project): the policy as stored, and saving it from the form, whose
//! numbers come as text so a mistyped one comes back naming its field.

use leptos::prelude::*;
use runlens_engine::model::Retention;

/// One field of the form: blank is no limit, else a whole number.
pub fn parse_limit(label: &str, text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u64>().map(Some).map_err(|_| format!("{label}: `{text}` is not a whole number"))
}

/// The policy from the form's two fields, checked as the API checks it.
pub fn policy_of(max_age_days: &str, max_runs: &str) -> Result<Retention, String> {
    let days = parse_limit("Days kept", max_age_days)?;
    let policy = Retention {
        max_age_days: days.map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
        max_runs: parse_limit("Runs kept", max_runs)?,
    };
    policy.check_bounds().map_err(|e| e.replace("max_age_days", "Days kept").replace("max_runs", "Runs kept"))?;
    Ok(policy)
}

/// The project's policy; `None` for a caller who is not its admin.
#[server]
pub async fn get_retention() -> Result<Option<Retention>, ServerFnError> {
    let Ok((engine, caller)) = super::ssr::for_project(super::ssr::Role::Admin) else { return Ok(None) };
    Ok(Some(engine.retention(&caller.project).await.map_err(super::ssr::to_server_error)?))
}

/// Saves the project's policy (admins; audited).
#[server]
pub async fn save_retention(max_age_days: String, max_runs: String) -> Result<Retention, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
    let policy = policy_of(&max_age_days, &max_runs).map_err(|e| {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ServerFnError::new(e)
    })?;
    engine.set_retention(&caller.project, policy, &caller.actor).await.map_err(super::ssr::to_server_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_reads_blank_as_no_limit_and_names_a_bad_field() {
        assert_eq!(policy_of(" ", ""), Ok(Retention::default()));
        assert_eq!(policy_of("30", "1000"), Ok(Retention { max_age_days: Some(30), max_runs: Some(1000) }));
        assert!(policy_of("thirty", "").unwrap_err().starts_with("Days kept: `thirty`"));
        assert!(policy_of("0", "").unwrap_err().starts_with("Days kept must be 1 to 36500"));
        assert!(policy_of("", "-5").unwrap_err().starts_with("Runs kept: `-5`"));
        assert!(policy_of("99999999999", "").unwrap_err().starts_with("Days kept must be"));
    }
}
