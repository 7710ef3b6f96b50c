//! `/login` and `/setup`: the pages shown before anyone has signed in.
//!
//! Both are plain HTML forms posting to the server (`POST /login`,
//! `POST /setup`; see `crate::server::auth::login`), which answers with a
//! redirect: to the page asked for, or back here with `?error=…`. They work
//! without JavaScript, and ask the server nothing that needs a caller.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::setup_link_valid;
use crate::components::{ErrorBox, Loaded};

/// What a `?error=` of the sign-in page means, in words. Only the known
/// codes are shown: the page never repeats text from its URL here.
pub fn login_error_text(code: &str) -> &'static str {
    match code {
        "invalid" => "That user name and password do not match. Try again.",
        "throttled" => "Too many failed sign-ins. Wait a few minutes, then try again.",
        _ => "Signing in failed. Try again.",
    }
}

/// The sign-in form.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let (next, error) = query.with_untracked(|q| (q.get("next").unwrap_or_default(), q.get("error")));
    let error = error.filter(|e| !e.is_empty()).map(|code| {
        view! { <ErrorBox message=login_error_text(&code) testid="login-error"/> }
    });
    view! {
        <Title text="Sign in · runlens"/>
        <div class="auth-card">
            <h1>"Sign in"</h1>
            {error}
            <form method="post" action="/login" class="auth-form" data-testid="login-form">
                <label>
                    <span>"User name"</span>
                    <input type="text" name="username" autocomplete="username" required autofocus
                        maxlength="64" data-testid="login-username"/>
                </label>
                <label>
                    <span>"Password"</span>
                    <input type="password" name="password" autocomplete="current-password" required
                        data-testid="login-password"/>
                </label>
                <input type="hidden" name="next" value=next/>
                <button type="submit" class="button primary" data-testid="login-submit">"Sign in"</button>
            </form>
            <p class="muted hint">
                "No account? An admin adds you in " <code>"Settings → Projects"</code>
                ", or on the server with " <code>"runlens user add NAME"</code> "."
            </p>
        </div>
    }
}

/// The first-start page: the one-time link's token and the first admin's
/// name and password.
#[component]
pub fn SetupPage() -> impl IntoView {
    let query = use_query_map();
    let (token, error) = query.with_untracked(|q| (q.get("token").unwrap_or_default(), q.get("error")));
    let check = {
        let token = token.clone();
        crate::resource::new(move || token.clone(), setup_link_valid)
    };
    // The server's message about the name or password (shown escaped).
    let error = error.filter(|e| !e.is_empty()).map(|e| view! { <ErrorBox message=e testid="setup-error"/> });
    view! {
        <Title text="Set up runlens"/>
        <div class="auth-card">
            <h1>"Set up runlens"</h1>
            {error}
            <Loaded load=move || async move { check.await } loading="Checking the link…" let:valid>
                {match valid {
                    true => view! { <SetupForm token=token.clone()/> }.into_any(),
                    false => view! {
                        <div class="error" role="alert" data-testid="setup-invalid">
                            "This setup link is invalid, used or expired. "
                            "Restart the server while it has no user to get a new one, or add a user with "
                            <code>"runlens user add NAME --role admin"</code> "."
                        </div>
                        <p><a href="/login" rel="external">"Sign in →"</a></p>
                    }.into_any(),
                }}
            </Loaded>
        </div>
    }
}

#[component]
fn SetupForm(token: String) -> impl IntoView {
    view! {
        <p class="muted">"Choose the name and password of the first admin. You are signed in right after."</p>
        <form method="post" action="/setup" class="auth-form" data-testid="setup-form">
            <input type="hidden" name="token" value=token/>
            <label>
                <span>"User name"</span>
                <input type="text" name="username" autocomplete="username" required autofocus maxlength="64"
                    data-testid="setup-username"/>
            </label>
            <label>
                <span>"Password"</span>
                <input type="password" name="password" autocomplete="new-password" required minlength="8"
                    data-testid="setup-password"/>
            </label>
            <button type="submit" class="button primary" data-testid="setup-submit">"Create the admin"</button>
        </form>
    }
}
