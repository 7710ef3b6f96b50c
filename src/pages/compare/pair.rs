//! Two runs side by side: who they are, where they first differ, their
//! totals, their configurations, then one page each of aligned steps and
//! aligned messages. Every row says its change in words ("same", "changed",
//! "only in A", "only in B"); colour only repeats it.

use leptos::prelude::*;
use runlens_engine::model::{
    CallPair, CallSide, Change, ChangeCounts, CompareQuery, CompareSide, Comparison, FieldDiff, MessagePair,
    MessageRows, MessageSide, StepPair, StepRows, StepSide,
};

use super::diff::{json_text, ChangeBadge, DiffText, JsonChanges, Side};
use super::{compare_href, Place};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::Badge;
use crate::format;

#[component]
pub fn PairView(cmp: Comparison, query: CompareQuery) -> impl IntoView {
    let Comparison { a, b, equal, fork, config, totals, divergence, steps, messages } = cmp;
    let swap = compare_href(&CompareQuery { a: b.id.clone(), b: a.id.clone(), ..Default::default() });
    let verdict = match (equal, divergence) {
        (true, _) => view! {
            <div class="notice compare-equal" role="status" data-testid="compare-equal">
                <strong>"No differences."</strong>
                " Both runs have the same configuration, steps, tool calls, messages, status and result."
            </div>
        }
        .into_any(),
        (false, Some(d)) => {
            let href =
                d.step_row.map(|row| format!("#step-row-{row}")).or(d.message_row.map(|r| format!("#message-row-{r}")));
            view! {
                <div class="notice compare-divergence" role="status" data-testid="compare-divergence">
                    <strong>"First difference: "</strong>
                    <span data-testid="compare-divergence-summary">{d.summary}</span>
                    {href.map(|h| view! { " " <a href=h>"Show it"</a> })}
                </div>
            }
            .into_any()
        }
        (false, None) => ().into_any(),
    };
    let fork_note = fork.map(|f| {
        let ancestor = format!("/runs/{}", format::url_encode(&f.ancestor));
        view! {
            <p class="muted" data-testid="compare-fork">
                "Forked from a common history: the first " {f.shared_messages}
                {if f.shared_messages == 1 { " message" } else { " messages" }} " and " {f.shared_steps}
                {if f.shared_steps == 1 { " step are" } else { " steps are" }}
                " shared (run " <a class="mono" href=ancestor>{format::short_id(&f.ancestor)}</a>
                ") and folded below."
            </p>
        }
    });
    let (a_id, b_id) = (a.id.clone(), b.id.clone());
    view! {
        <div class="compare-sides">
            <SideCard side=a letter="A"/>
            <SideCard side=b letter="B"/>
        </div>
        <p class="compare-tools">
            <a href=swap data-testid="compare-swap">"Swap A and B"</a>
        </p>
        {verdict}
        {fork_note}
        <section class="section">
            <h2>"Totals"</h2>
            <TotalsTable totals/>
        </section>
        <section class="section">
            <h2>"Configuration"</h2>
            <ConfigTable fields=config/>
        </section>
        <StepsSection steps query=query.clone() a_id=a_id.clone() b_id=b_id.clone()/>
        <MessagesSection messages query/>
    }
}

#[component]
fn SideCard(side: CompareSide, letter: &'static str) -> impl IntoView {
    let href = format!("/runs/{}", format::url_encode(&side.id));
    let name = if side.name.trim().is_empty() { side.id.clone() } else { side.name.clone() };
    let testid = format!("compare-side-{}", letter.to_lowercase());
    view! {
        <div class="card compare-side" data-testid=testid data-run-id=side.id.clone()>
            <div class="label">"Run " {letter}</div>
            <h2 class="h3"><a href=href>{name}</a> " " <Badge status=side.status.as_str()/></h2>
            <div class="sub mono" title=side.id.clone()>{format::short_id(&side.id)} " · " {side.model.clone()}</div>
            {side.failure_reason.map(|r| view! { <div class="sub">"Failed: " {r}</div> })}
        </div>
    }
}

#[component]
fn TotalsTable(totals: runlens_engine::model::CompareTotals) -> impl IntoView {
    let (a, b, d) = (totals.a, totals.b, totals.delta);
    let signed = |v: i64| {
        if v > 0 {
            format!("+{}", thousands(v as u64))
        } else if v < 0 {
            format!("−{}", thousands(v.unsigned_abs()))
        } else {
            "0".into()
        }
    };
    let cost_delta = d.cost_usd.map(|c| {
        if c > 0.0 {
            format!("+{}", cost_text(Some(c)))
        } else if c < 0.0 {
            format!("−{}", cost_text(Some(-c)))
        } else {
            "0".into()
        }
    });
    let ms_delta = d.duration_ms.map(|m| {
        if m >= 0 {
            format!("+{}", format::duration_ms(m))
        } else {
            format!("−{}", format::duration_ms(-m))
        }
    });
    let rows = vec![
        ("Steps", a.steps.to_string(), b.steps.to_string(), signed(d.steps)),
        ("Tool calls", thousands(a.tool_calls), thousands(b.tool_calls), signed(d.tool_calls)),
        ("Input tokens", thousands(a.input_tokens), thousands(b.input_tokens), signed(d.input_tokens)),
        ("Output tokens", thousands(a.output_tokens), thousands(b.output_tokens), signed(d.output_tokens)),
        ("Total tokens", thousands(a.total_tokens), thousands(b.total_tokens), signed(d.total_tokens)),
        ("Cost", cost_text(a.cost_usd), cost_text(b.cost_usd), cost_delta.unwrap_or_else(|| "—".into())),
        (
            "Duration",
            format::opt_duration(a.duration_ms.map(|m| m as i64)),
            format::opt_duration(b.duration_ms.map(|m| m as i64)),
            ms_delta.unwrap_or_else(|| "—".into()),
        ),
    ];
    let rows = rows
        .into_iter()
        .map(|(label, a, b, d)| {
            view! { <tr data-testid="total-row"><th scope="row">{label}</th><td class="num">{a}</td><td class="num">{b}</td><td class="num">{d}</td></tr> }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table compare-totals" data-testid="compare-totals">
            <thead><tr><th scope="col">""</th><th scope="col" class="num">"A"</th><th scope="col" class="num">"B"</th><th scope="col" class="num">"B − A"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
}

#[component]
fn ConfigTable(fields: Vec<FieldDiff>) -> impl IntoView {
    let (differ, same): (Vec<FieldDiff>, Vec<FieldDiff>) = fields.into_iter().partition(|f| !f.equal);
    let row = |f: FieldDiff| {
        let detail = (!f.json.is_empty()).then(|| view! { <JsonChanges changes=f.json.clone()/> });
        let texts = |side: Side, value: &serde_json::Value| match value {
            serde_json::Value::String(s) => {
                view! { <DiffText words=f.words.clone() side text=Some(s.clone())/> }.into_any()
            }
            serde_json::Value::Null => view! { <span class="muted">"none"</span> }.into_any(),
            other => view! { <pre class="text mono">{format::pretty_json(other)}</pre> }.into_any(),
        };
        let (a, b) = (texts(Side::A, &f.a), texts(Side::B, &f.b));
        let change = if f.equal { Change::Equal } else { Change::Changed };
        view! {
            <tr data-testid="config-row" data-field=f.field.clone() data-equal=f.equal.to_string()>
                <th scope="row">{f.field.clone()} <div><ChangeBadge change/></div></th>
                <td>{a}</td>
                <td>{b}{detail}</td>
            </tr>
        }
    };
    let same_count = same.len();
    let differ_rows = differ.into_iter().map(row).collect::<Vec<_>>();
    let same_rows = same.into_iter().map(row).collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table compare-config" data-testid="compare-config">
            <thead><tr><th scope="col">"Field"</th><th scope="col">"A"</th><th scope="col">"B"</th></tr></thead>
            <tbody>{differ_rows}</tbody>
        </table></div>
        {(same_count > 0).then(|| view! {
            <details class="compare-same">
                <summary>{same_count} {if same_count == 1 { " field is the same" } else { " fields are the same" }}</summary>
                <table class="table compare-config"><tbody>{same_rows}</tbody></table>
            </details>
        })}
    }
}

/// "3 same · 1 changed · 1 only in B".
fn counts_text(c: ChangeCounts) -> String {
    let mut parts = vec![format!("{} same", c.equal)];
    if c.changed > 0 {
        parts.push(format!("{} changed", c.changed));
    }
    if c.deleted > 0 {
        parts.push(format!("{} only in A", c.deleted));
    }
    if c.inserted > 0 {
        parts.push(format!("{} only in B", c.inserted));
    }
    parts.join(" · ")
}

/// The earlier / later / first-row links of one list.
#[component]
fn Pager(
    query: CompareQuery,
    place: Place,
    from: u32,
    shown: u32,
    folded: u32,
    total: u32,
    next: Option<u32>,
    limit: u32,
) -> impl IntoView {
    let at = |row: u32| compare_href(&place.set(&query, row));
    let earlier = (from > folded).then(|| at(from.saturating_sub(limit).max(folded)));
    let first = (from > folded).then(|| at(folded));
    let later = next.map(at);
    let name = place.name();
    view! {
        <nav class="pager" aria-label=format!("{name} rows")>
            <span class="muted">
                "Rows " {if shown == 0 { 0 } else { from + 1 }} "–" {from + shown} " of " {total}
            </span>
            {first.map(|h| view! { <a class="button subtle" href=h data-testid=format!("{name}-first")>"⇤ First rows"</a> })}
            {earlier.map(|h| view! { <a class="button" href=h data-testid=format!("{name}-earlier")>"← Earlier"</a> })}
            {later.map(|h| view! { <a class="button" href=h data-testid=format!("{name}-later")>"Later →"</a> })}
        </nav>
    }
}

#[component]
fn StepsSection(steps: StepRows, query: CompareQuery, a_id: String, b_id: String) -> impl IntoView {
    let StepRows { total, folded, counts, from, rows, next_from } = steps;
    let limit = query.steps_limit.unwrap_or(runlens_engine::model::DEFAULT_COMPARE_ROWS);
    let shown = rows.len() as u32;
    let list =
        rows.into_iter().map(|row| view! { <StepRow row a_id=a_id.clone() b_id=b_id.clone()/> }).collect::<Vec<_>>();
    view! {
        <section class="section" data-testid="compare-steps">
            <h2>"Steps"</h2>
            <p class="muted" data-testid="compare-step-counts">{counts_text(counts)}
                {(folded > 0).then(|| format!(" · {folded} shared rows folded"))}</p>
            <Pager query=query.clone() place=Place::Steps from shown folded total next=next_from limit/>
            <div class="compare-rows">{list}</div>
            {(shown > 8).then(|| view! { <Pager query place=Place::Steps from shown folded total next=next_from limit/> })}
        </section>
    }
}

#[component]
fn StepRow(row: StepPair, a_id: String, b_id: String) -> impl IntoView {
    let StepPair { row: n, change, a, b, differences, text, calls } = row;
    let key = super::diff::change_key(change);
    let side = |s: Option<StepSide>, run: &str, which: Side| match s {
        None => view! { <div class="cmp-side empty-side"><span class="muted">"—"</span></div> }.into_any(),
        Some(s) => {
            let href = format!("/runs/{}?from={}#step-{}", format::url_encode(run), s.index, s.index);
            let tokens = s.usage.total_tokens;
            view! {
                <div class="cmp-side" data-testid=format!("step-side-{}", which.letter())>
                    <div class="cmp-side-head">
                        <a href=href>"Step " {s.index}</a> " " <Badge status=format!("{:?}", s.status).to_lowercase()/>
                        <span class="sub">" " {thousands(tokens)} " tokens · " {cost_text(s.cost_usd)} " · "
                            {format::opt_duration(s.duration_ms.map(|m| m as i64))}</span>
                    </div>
                    <DiffText words=text.clone() side=which text=s.text.clone()/>
                    {(!s.tools.is_empty()).then(|| view! { <div class="sub mono">"calls " {s.tools.join(", ")}</div> })}
                </div>
            }
            .into_any()
        }
    };
    let (left, right) = (side(a, &a_id, Side::A), side(b, &b_id, Side::B));
    let calls = (change != Change::Equal && !calls.is_empty()).then(|| {
        let list = calls.into_iter().map(|c| view! { <CallRow pair=c/> }).collect::<Vec<_>>();
        view! { <div class="cmp-calls">{list}</div> }
    });
    let what = (!differences.is_empty()).then(|| format!(" · differs in {}", differences.join(", ")));
    view! {
        <div class=format!("cmp-row cmp-{key}") id=format!("step-row-{n}") data-testid="step-pair" data-change=key>
            <div class="cmp-head">"Row " {n + 1} " " <ChangeBadge change/> <span class="sub">{what}</span></div>
            <div class="cmp-cols">{left}{right}</div>
            {calls}
        </div>
    }
}

#[component]
fn CallRow(pair: CallPair) -> impl IntoView {
    let CallPair { change, a, b, arguments, result_equal } = pair;
    let side = |c: Option<CallSide>| match c {
        None => view! { <div class="cmp-side empty-side"><span class="muted">"—"</span></div> }.into_any(),
        Some(c) => view! {
            <div class="cmp-side">
                <div><span class="mono">{c.tool_name}</span> " " <Badge status=c.status.as_str()/></div>
                <pre class="text mono">{json_text(&c.arguments)}</pre>
                {c.result.map(|r| view! { <div class="sub">"result"</div><pre class="text mono">{r}</pre> })}
                {c.error.map(|e| view! { <div class="sub">"error"</div><pre class="text">{e}</pre> })}
            </div>
        }
        .into_any(),
    };
    let key = super::diff::change_key(change);
    view! {
        <div class=format!("cmp-call cmp-{key}") data-testid="call-pair" data-change=key>
            <div class="cmp-head sub">"Tool call " <ChangeBadge change/>
                {(!result_equal && a.is_some() && b.is_some()).then_some(" · results differ")}</div>
            <div class="cmp-cols">{side(a)}{side(b)}</div>
            {(!arguments.is_empty()).then(|| view! {
                <div class="cmp-args" data-testid="argument-diff"><span class="sub">"Arguments"</span><JsonChanges changes=arguments/></div>
            })}
        </div>
    }
}

#[component]
fn MessagesSection(messages: MessageRows, query: CompareQuery) -> impl IntoView {
    let MessageRows { total, folded, counts, from, rows, next_from } = messages;
    let limit = query.messages_limit.unwrap_or(runlens_engine::model::DEFAULT_COMPARE_ROWS);
    let shown = rows.len() as u32;
    let list = rows.into_iter().map(|row| view! { <MessageRow row/> }).collect::<Vec<_>>();
    view! {
        <section class="section" data-testid="compare-messages">
            <h2>"Transcript"</h2>
            <p class="muted">{counts_text(counts)} {(folded > 0).then(|| format!(" · {folded} shared messages folded"))}</p>
            <Pager query place=Place::Messages from shown folded total next=next_from limit/>
            <div class="compare-rows">{list}</div>
        </section>
    }
}

#[component]
fn MessageRow(row: MessagePair) -> impl IntoView {
    let MessagePair { row: n, change, a, b, words } = row;
    let key = super::diff::change_key(change);
    let side = |m: Option<MessageSide>, which: Side| match m {
        None => view! { <div class="cmp-side empty-side"><span class="muted">"—"</span></div> }.into_any(),
        Some(m) => view! {
            <div class="cmp-side">
                <div class="sub">"#" {m.seq} " · " {m.kind.clone()}
                    {m.step_index.map(|i| format!(" · step {i}"))}</div>
                <DiffText words=words.clone() side=which text=Some(m.text)/>
            </div>
        }
        .into_any(),
    };
    let (left, right) = (side(a, Side::A), side(b, Side::B));
    view! {
        <div class=format!("cmp-row cmp-{key}") id=format!("message-row-{n}") data-testid="message-pair" data-change=key>
            <div class="cmp-head">"Message " {n + 1} " " <ChangeBadge change/></div>
            <div class="cmp-cols">{left}{right}</div>
        </div>
    }
}
