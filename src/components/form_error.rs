//! A form's error line: the message of its action's last failure, under
//! the form, announced (`role="alert"`), with an id the form's fields name
//! in `aria-describedby` (and the same test id).

use leptos::prelude::*;

use crate::api::action_error::ActionError;

/// The line for `value` (a form action's last result), or nothing.
pub fn error_line<O, S>(value: S, id: &'static str) -> impl Fn() -> Option<AnyView> + Clone + Send + Sync + 'static
where
    O: 'static,
    S: With<Value = Option<Result<O, ActionError<String>>>> + Clone + Send + Sync + 'static,
{
    move || {
        value.with(|v| match v {
            Some(Err(e)) => Some(
                view! { <p class="inline-error" role="alert" id=id data-testid=id>{e.message.clone()}</p> }.into_any(),
            ),
            _ => None,
        })
    }
}
