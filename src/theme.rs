//! The colour theme: light, dark, or the system's setting (the default).
//!
//! The choice lives in the `runlens_theme` cookie. The server reads it when it
//! renders the `<html data-theme="…">` attribute (see [`crate::app::shell`]),
//! so a page never flashes in the wrong theme and works without JavaScript;
//! style/main.css picks its colour variables from that attribute (and, for
//! `system`, from `prefers-color-scheme`). The toggle in the top bar is a
//! plain form posting to `/theme`, which sets the cookie and redirects back;
//! once the page is hydrated it switches at once instead, writing the same
//! cookie from the browser.

use leptos::prelude::*;

/// The cookie that remembers the choice.
pub const COOKIE: &str = "runlens_theme";

/// How long the cookie lasts: a year.
pub const COOKIE_MAX_AGE_S: u64 = 365 * 24 * 3600;

/// A theme choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Theme {
    Light,
    Dark,
    /// Follow the system setting (`prefers-color-scheme`).
    #[default]
    System,
}

impl Theme {
    pub const ALL: [Theme; 3] = [Theme::Light, Theme::Dark, Theme::System];

    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Light => "light",
            Theme::Dark => "dark",
            Theme::System => "system",
        }
    }

    pub fn parse(value: &str) -> Option<Theme> {
        match value.trim() {
            "light" => Some(Theme::Light),
            "dark" => Some(Theme::Dark),
            "system" => Some(Theme::System),
            _ => None,
        }
    }

    /// The choice a `Cookie` header carries (`System` without one).
    pub fn from_cookie_header(header: &str) -> Theme {
        header
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .and_then(|(_, value)| Theme::parse(value))
            .unwrap_or_default()
    }

    /// The `Set-Cookie` value that remembers this choice.
    pub fn set_cookie(self) -> String {
        format!("{COOKIE}={}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; SameSite=Lax", self.as_str())
    }

    fn label(self) -> &'static str {
        match self {
            Theme::Light => "Light theme",
            Theme::Dark => "Dark theme",
            Theme::System => "Theme of the system",
        }
    }

    fn mark(self) -> &'static str {
        match self {
            Theme::Light => "☀",
            Theme::Dark => "☾",
            Theme::System => "◐",
        }
    }
}

/// The theme of the page being rendered: on the server from the request's
/// cookie, in the browser from the `<html>` element the server rendered.
pub fn current() -> Theme {
    #[cfg(feature = "ssr")]
    {
        use axum::http::{header, request::Parts};
        use_context::<Parts>()
            .and_then(|parts| {
                parts.headers.get(header::COOKIE).and_then(|v| v.to_str().ok()).map(Theme::from_cookie_header)
            })
            .unwrap_or_default()
    }
    #[cfg(not(feature = "ssr"))]
    {
        document()
            .document_element()
            .and_then(|html| html.get_attribute("data-theme"))
            .and_then(|v| Theme::parse(&v))
            .unwrap_or_default()
    }
}

/// Applies `theme` in the browser at once: the `<html>` attribute and the cookie.
#[cfg(feature = "hydrate")]
fn apply(theme: Theme) {
    let doc = document();
    if let Some(html) = doc.document_element() {
        let _ = html.set_attribute("data-theme", theme.as_str());
    }
    let _ = leptos::web_sys::js_sys::Reflect::set(&doc, &"cookie".into(), &theme.set_cookie().into());
}

/// The theme switch in the top bar: three buttons (light, dark, the
/// system's), the current one pressed. Without JavaScript a form post to
/// `/theme`; hydrated, it switches without leaving the page.
#[component]
pub fn ThemeToggle() -> impl IntoView {
    let location = leptos_router::hooks::use_location();
    let next = move || {
        let search = location.search.get();
        let path = location.pathname.get();
        if search.is_empty() {
            path
        } else {
            format!("{path}?{search}")
        }
    };
    let chosen = RwSignal::new(current());
    let buttons = Theme::ALL
        .into_iter()
        .map(|theme| {
            let on_click = move |ev: leptos::ev::MouseEvent| {
                ev.prevent_default();
                #[cfg(feature = "hydrate")]
                apply(theme);
                chosen.set(theme);
            };
            view! {
                <button type="submit" name="theme" value=theme.as_str() class="theme-option"
                    aria-label=theme.label() title=theme.label()
                    aria-pressed=move || if chosen.get() == theme { "true" } else { "false" }
                    on:click=on_click>
                    <span aria-hidden="true">{theme.mark()}</span>
                </button>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <form method="post" action="/theme" class="theme-switch" data-testid="theme-toggle">
            <input type="hidden" name="next" value=next/>
            <div class="theme-options" role="group" aria-label="Theme">{buttons}</div>
        </form>
    }
}

/// `POST /theme` (form: `theme`, `next`): remembers the choice in the
/// cookie and goes back to `next` (a path of this server). Like every unsafe
/// request it is refused when it comes from another site (see
/// `server::guard`).
#[cfg(feature = "ssr")]
pub async fn set_theme(axum::extract::Form(form): axum::extract::Form<ThemeForm>) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let Some(theme) = Theme::parse(&form.theme) else {
        return (StatusCode::BAD_REQUEST, "theme must be light, dark or system").into_response();
    };
    let back = crate::server::auth::local_target(form.next.as_deref());
    (StatusCode::SEE_OTHER, [(header::LOCATION, back), (header::SET_COOKIE, theme.set_cookie())]).into_response()
}

/// The form of `POST /theme`.
#[cfg(feature = "ssr")]
#[derive(serde::Deserialize)]
pub struct ThemeForm {
    pub theme: String,
    #[serde(default)]
    pub next: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_header_names_the_theme() {
        assert_eq!(Theme::from_cookie_header("a=b; runlens_theme=dark; c=d"), Theme::Dark);
        assert_eq!(Theme::from_cookie_header("runlens_theme=light"), Theme::Light);
        assert_eq!(Theme::from_cookie_header("runlens_theme=purple"), Theme::System);
        assert_eq!(Theme::from_cookie_header(""), Theme::System);
        assert_eq!(Theme::parse(Theme::Dark.as_str()), Some(Theme::Dark));
    }
}
