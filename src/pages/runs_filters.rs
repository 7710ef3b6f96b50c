//! The runs list's filters (see `runs`): as read from the URL query, the
//! URLs and server query they make, and the plain GET form that sets them.

use leptos::prelude::*;
use runlens_engine::model::{OutcomeFilter, RunStatus};

use crate::api::{AgentChoice, RunsQuery};
use crate::format;

/// The filters as read from the query string; empty string means "any".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filters {
    pub(crate) status: String,
    pub(crate) outcome: String,
    pub(crate) tag: String,
    pub(crate) q: String,
    pub(crate) agent: String,
    pub(crate) metadata: String,
    /// Runs of this session.
    pub(crate) session_id: String,
    /// Runs that served this end user.
    pub(crate) user: String,
    /// Runs with a score passing this test (`helpful<0.5`, `correct=no`…).
    pub(crate) score: String,
    /// Child runs too.
    pub(crate) all: bool,
    /// `agent` or `session`: group the page's runs by agent or by session.
    pub(crate) group: String,
    pub(crate) cursor: String,
}

impl Filters {
    pub(crate) fn is_filtered(&self) -> bool {
        !(self.status.is_empty()
            && self.outcome.is_empty()
            && self.tag.is_empty()
            && self.q.is_empty()
            && self.agent.is_empty()
            && self.metadata.is_empty()
            && self.session_id.is_empty()
            && self.user.is_empty()
            && self.score.is_empty())
    }

    /// What the page's runs are grouped by, if anything.
    pub(crate) fn grouping(&self) -> Option<Grouping> {
        match self.group.as_str() {
            "agent" => Some(Grouping::Agent),
            "session" => Some(Grouping::Session),
            _ => None,
        }
    }

    /// Query string for the same filters at another cursor.
    pub(crate) fn with_cursor(&self, cursor: &str) -> String {
        self.href(cursor, "")
    }

    /// The list's URL with these filters but `without` (a parameter name),
    /// at `cursor`.
    fn href(&self, cursor: &str, without: &str) -> String {
        let pairs = [
            ("status", self.status.as_str()),
            ("outcome", self.outcome.as_str()),
            ("tag", self.tag.as_str()),
            ("q", self.q.as_str()),
            ("agent", self.agent.as_str()),
            ("metadata", self.metadata.as_str()),
            ("session_id", self.session_id.as_str()),
            ("user", self.user.as_str()),
            ("score", self.score.as_str()),
            ("all", if self.all { "1" } else { "" }),
            ("group", self.group.as_str()),
            ("cursor", cursor),
        ];
        let qs = format::query_string(pairs.into_iter().filter(|(k, _)| *k != without));
        if qs.is_empty() {
            "/runs".to_string()
        } else {
            format!("/runs?{qs}")
        }
    }

    /// The JSON-lines export of the runs these filters select (every page).
    pub(crate) fn export_href(&self) -> String {
        let (tag, metadata) = (format::key_value(&self.tag), format::key_value(&self.metadata));
        let pairs = [
            ("status", self.status.as_str()),
            ("outcome", self.outcome.as_str()),
            ("tag", tag.as_str()),
            ("q", self.q.trim()),
            ("agent_id", self.agent.as_str()),
            ("metadata", metadata.as_str()),
            ("session_id", self.session_id.as_str()),
            ("user", self.user.as_str()),
            ("score", self.score.trim()),
            ("all", if self.all { "true" } else { "" }),
        ];
        format!("/api/exports/runs?{}", format::query_string(pairs)).trim_end_matches('?').to_owned()
    }

    pub(crate) fn query(&self) -> RunsQuery {
        RunsQuery {
            status: some(&self.status),
            outcome: some(&self.outcome),
            tag: some(&self.tag),
            q: some(&self.q),
            agent: some(&self.agent),
            metadata: some(&self.metadata),
            session_id: some(&self.session_id),
            user: some(&self.user),
            score: some(&self.score),
            all: self.all,
            cursor: some(&self.cursor),
        }
    }
}

/// What the runs of a page can be grouped by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Grouping {
    Agent,
    Session,
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The filters: a plain GET form (it works without JavaScript).
#[component]
pub fn FilterForm(filters: Memo<Filters>, agents: Vec<AgentChoice>) -> impl IntoView {
    let status_options = RunStatus::ALL
        .into_iter()
        .map(|s| {
            let name = s.as_str();
            view! {
                <option value=name selected=move || filters.read().status == name>
                    {name}
                </option>
            }
        })
        .collect::<Vec<_>>();
    let outcome_options = [
        (OutcomeFilter::Clean, "clean"),
        (OutcomeFilter::Issues, "with issues"),
        (OutcomeFilter::Rejected, "a call rejected"),
        (OutcomeFilter::ToolError, "a tool error"),
    ]
    .into_iter()
    .map(|(o, text)| {
        let name = o.as_str();
        view! { <option value=name selected=move || filters.read().outcome == name>{text}</option> }
    })
    .collect::<Vec<_>>();
    let agent_options = agents
        .into_iter()
        .map(|a| {
            let id = a.id.clone();
            view! { <option value=a.id selected=move || filters.read().agent == id>{a.name}</option> }
        })
        .collect::<Vec<_>>();
    // The words the search box holds, checked as the server checks them.
    let q_error = Memo::new(move |_| {
        let filter = runlens_engine::model::RunFilter { q: Some(filters.read().q.clone()), ..Default::default() };
        // Said of the box, not of the API's parameter.
        filter.search_problem().map(|e| e.replacen("q has", "The search has", 1))
    });
    view! {
        <form method="get" action="/runs" class="filters" data-testid="runs-filter">
            <label>
                <span>"Status"</span>
                <select name="status" data-testid="filter-status">
                    <option value="" selected=move || filters.read().status.is_empty()>
                        "any"
                    </option>
                    {status_options}
                </select>
            </label>
            <label>
                <span>"Outcome"</span>
                <select name="outcome" data-testid="filter-outcome">
                    <option value="" selected=move || filters.read().outcome.is_empty()>"any"</option>
                    {outcome_options}
                </select>
            </label>
            <label>
                <span>"Agent"</span>
                <select name="agent" data-testid="filter-agent">
                    <option value="" selected=move || filters.read().agent.is_empty()>"any"</option>
                    {agent_options}
                </select>
            </label>
            <label>
                <span>"Tag"</span>
                <input type="text" name="tag" placeholder="key:value" data-testid="filter-tag"
                    value=move || filters.read().tag.clone()/>
            </label>
            <label>
                <span>"Metadata"</span>
                <input type="text" name="metadata" placeholder="key:value" data-testid="filter-metadata"
                    value=move || filters.read().metadata.clone()/>
            </label>
            <label>
                <span>"Score"</span>
                <input type="text" name="score" placeholder="helpful<0.5" data-testid="filter-score"
                    title="A score's name, or NAME=yes, NAME=no, NAME=LABEL, NAME<N, NAME>=N…"
                    value=move || filters.read().score.clone()/>
            </label>
            <label class="grow">
                <span>"Search"</span>
                <input type="search" name="q" placeholder="words in prompts, answers, tool calls, errors…"
                    data-testid="filter-q" value=move || filters.read().q.clone()
                    aria-invalid=move || q_error.get().is_some().then_some("true")
                    aria-describedby=move || q_error.get().is_some().then_some("filter-q-error")/>
                {move || q_error.get().map(|e| view! {
                    <span class="field-error" id="filter-q-error" data-testid="filter-q-error">{e}</span>
                })}
            </label>
            <label class="check">
                <input type="checkbox" name="all" value="1" checked=move || filters.read().all
                    data-testid="filter-all"/>
                "Show child runs"
            </label>
            <label>
                <span>"Group"</span>
                <select name="group" data-testid="filter-group">
                    <option value="" selected=move || filters.read().grouping().is_none()>"none"</option>
                    <option value="agent" selected=move || filters.read().grouping() == Some(Grouping::Agent)>
                        "by agent"
                    </option>
                    <option value="session" selected=move || filters.read().grouping() == Some(Grouping::Session)>
                        "by session"
                    </option>
                </select>
            </label>
            {move || scope_chips(&filters.read())}
            <button type="submit" class="button" data-testid="filter-submit">"Filter"</button>
            <a class="button subtle" href="/runs">"Clear"</a>
        </form>
    }
}

/// The session and end-user filters, when set (a run's chips set them):
/// kept by the form as hidden fields, each with a link that drops it.
fn scope_chips(f: &Filters) -> Vec<impl IntoView> {
    [("session_id", "session", &f.session_id), ("user", "user", &f.user)]
        .into_iter()
        .filter(|(_, _, value)| !value.is_empty())
        .map(|(name, label, value)| {
            let drop = f.href("", name);
            view! {
                <span class="tag scope" data-testid=format!("filter-{name}")>
                    <input type="hidden" name=name value=value.clone()/>
                    <span class="tag-key">{label}</span> " " <span class="tag-value">{value.clone()}</span>
                    " " <a href=drop aria-label=format!("Remove the {label} filter") data-testid="filter-drop">"×"</a>
                </span>
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_keep_every_field_across_pages() {
        let f = Filters {
            agent: "agent-1".into(),
            metadata: "customer:acme".into(),
            all: true,
            group: "agent".into(),
            ..Filters::default()
        };
        assert!(f.is_filtered() && f.grouping() == Some(Grouping::Agent));
        assert_eq!(f.with_cursor("c1"), "/runs?agent=agent-1&metadata=customer%3Aacme&all=1&group=agent&cursor=c1");
        let q = f.query();
        assert_eq!((q.agent.as_deref(), q.all, q.cursor), (Some("agent-1"), true, None));
        let by_session = Filters { session_id: "chat 1".into(), user: "ada".into(), group: "session".into(), ..f };
        assert_eq!(by_session.grouping(), Some(Grouping::Session));
        assert_eq!(
            by_session.href("", "user"),
            "/runs?agent=agent-1&metadata=customer%3Aacme&session_id=chat%201&all=1&group=session"
        );
        let q = by_session.query();
        assert_eq!((q.session_id.as_deref(), q.user.as_deref()), (Some("chat 1"), Some("ada")));
    }
}
