//! A trace's run, assembled span by span: [`Assembly`] holds a trace's
//! spans and the steps derived from them, and folds new spans in by
//! deriving again only the steps from the first one they change, so a span
//! sent after the others (as OpenTelemetry SDKs send them, when they end)
//! costs the same whether it is the 10th or the 10,000th of its trace. The
//! result is always the run [`derive`](super::derive) gives for all the
//! spans at once: a step depends on its spans, its index, the call ids of
//! the steps before it and whether a model step came before it, and the
//! run's fields on per-step totals kept as the steps are derived.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Bound;

use super::assemble::{role, Role};
use super::unit::{derive_unit, Unit, UnitOut};
use crate::model::Usage;
use crate::store::{RunChange, StoredSpan, TraceFold};

/// Greater than any span id (lowercase hex).
const AFTER_IDS: &str = "\u{10FFFF}";

/// A span's place: start (or end) time and id.
pub(super) type Key = (i64, String);

/// What the steps up to and including one add up to.
#[derive(Clone, Debug, Default)]
pub(super) struct Acc {
    /// Transcript entries.
    pub messages: usize,
    pub usage: Usage,
    /// The last step whose model span named its model.
    pub last_model: Option<usize>,
    pub model_seen: bool,
    /// The first step with a human turn.
    pub first_human: Option<usize>,
    /// The last step whose answer the summary may take.
    pub summary: Option<usize>,
}

#[derive(Clone, Debug)]
pub(super) struct Out {
    pub unit: UnitOut,
    pub acc: Acc,
}

/// One trace's spans and run, as assembled so far (see the module docs).
#[derive(Default)]
pub struct Assembly {
    pub(super) project: String,
    pub(super) trace_id: String,
    pub(super) version: Option<i64>,
    pub(super) spans: HashMap<String, (StoredSpan, Role)>,
    /// Every span by start, by end; the roots, agent spans and spans naming
    /// their service by start.
    pub(super) order: BTreeSet<Key>,
    pub(super) ends: BTreeSet<Key>,
    pub(super) roots: BTreeSet<Key>,
    pub(super) agents: BTreeSet<Key>,
    pub(super) serviced: BTreeSet<Key>,
    /// Spans that are agent, model or tool spans (none: the trace is no run).
    pub(super) runnable: usize,
    /// Model spans by (end, start, id); tool spans by start.
    models: BTreeSet<(i64, i64, String)>,
    tools: BTreeSet<Key>,
    /// The model span each tool span is on (`None`: a step of its own).
    assigned: HashMap<String, Option<String>>,
    /// The tool spans of each step, by the id of its model span (or of its
    /// one tool span).
    members: HashMap<String, BTreeSet<Key>>,
    /// The steps by (start, id) of their model span or tool span, and what
    /// each derived to.
    pub(super) keys: Vec<Key>,
    pub(super) outs: Vec<Out>,
    call_ids: HashSet<String>,
    /// Tool names in the order they first appear, with that step.
    pub(super) tool_first: Vec<(String, usize)>,
    tool_seen: HashSet<String>,
    /// The system prompt and the step that first had one.
    pub(super) system: Option<(usize, String)>,
    /// What the store holds of the transcript's start (see `finish`).
    pub(super) shown: Option<super::finish::Shown>,
    /// About how many bytes the spans hold.
    pub(super) bytes: usize,
}

/// Roughly the bytes a JSON value holds.
fn weight(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => s.len() + 8,
        Value::Array(l) => l.iter().map(weight).sum::<usize>() + 8,
        Value::Object(o) => o.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>() + 8,
        _ => 8,
    }
}

fn span_weight(s: &StoredSpan) -> usize {
    let events: usize = s
        .events
        .iter()
        .map(|e| e.name.len() + e.attributes.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>())
        .sum();
    256 + s.name.len() + s.attributes.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>() + events
}

/// What one fold changed, as it goes.
#[derive(Default)]
struct Touched {
    /// Steps (by model or tool span id) whose spans changed or that are new.
    units: HashSet<String>,
    /// Steps that are no more.
    gone: Vec<Key>,
    /// Tool spans whose step is to be found again.
    reassign: BTreeSet<String>,
}

impl Assembly {
    pub fn new(project: &str, trace_id: &str) -> Self {
        Self { project: project.to_owned(), trace_id: trace_id.to_owned(), ..Self::default() }
    }

    /// Spans held.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// About how many bytes the assembly holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Folds `spans` in (a span held already is replaced) and derives again
    /// the steps from the first one they change: that step's index.
    pub(super) fn add(&mut self, spans: &[StoredSpan]) -> usize {
        let mut t = Touched::default();
        for s in spans {
            self.remove(&s.span_id, &mut t);
            self.insert(s.clone(), &mut t);
        }
        for id in std::mem::take(&mut t.reassign) {
            self.assign(&id, &mut t);
        }
        let first_touched = t.units.iter().filter_map(|id| self.position(id)).min();
        let first_gone = t.gone.iter().map(|k| self.keys.partition_point(|x| x < k)).min();
        let from = first_touched.into_iter().chain(first_gone).min().unwrap_or(self.keys.len()).min(self.outs.len());
        self.rederive(from);
        from
    }

    /// The place of step `id` among the steps.
    fn position(&self, id: &str) -> Option<usize> {
        let start = self.spans.get(id)?.0.start_ns;
        self.keys.binary_search_by(|k| (k.0, k.1.as_str()).cmp(&(start, id))).ok()
    }

    fn insert_key(&mut self, key: Key) {
        let at = self.keys.partition_point(|k| *k < key);
        self.keys.insert(at, key);
    }

    fn remove_key(&mut self, key: &Key, t: &mut Touched) {
        if let Ok(at) = self.keys.binary_search(key) {
            self.keys.remove(at);
            t.gone.push(key.clone());
        }
    }

    fn remove(&mut self, id: &str, t: &mut Touched) {
        let Some((s, r)) = self.spans.remove(id) else { return };
        self.bytes = self.bytes.saturating_sub(span_weight(&s));
        let key = (s.start_ns, s.span_id.clone());
        self.order.remove(&key);
        self.ends.remove(&(s.end_ns, s.span_id.clone()));
        self.roots.remove(&key);
        self.agents.remove(&key);
        self.serviced.remove(&key);
        if r != Role::Other {
            self.runnable -= 1;
        }
        match r {
            Role::Model => {
                self.models.remove(&(s.end_ns, s.start_ns, s.span_id.clone()));
                self.remove_key(&key, t);
                for (_, tool) in self.members.remove(id).unwrap_or_default() {
                    t.reassign.insert(tool);
                }
            }
            Role::Tool => {
                self.tools.remove(&key);
                t.reassign.remove(id);
                match self.assigned.remove(id) {
                    Some(Some(m)) => {
                        if let Some(tools) = self.members.get_mut(&m) {
                            tools.remove(&key);
                            t.units.insert(m);
                        }
                    }
                    _ => {
                        self.members.remove(id);
                        self.remove_key(&key, t);
                    }
                }
            }
            Role::Agent | Role::Other => {}
        }
    }

    fn insert(&mut self, s: StoredSpan, t: &mut Touched) {
        let r = role(&s);
        self.bytes += span_weight(&s);
        let key = (s.start_ns, s.span_id.clone());
        self.order.insert(key.clone());
        self.ends.insert((s.end_ns, s.span_id.clone()));
        if s.parent_span_id.is_none() {
            self.roots.insert(key.clone());
        }
        if s.service_name.is_some() {
            self.serviced.insert(key.clone());
        }
        if r != Role::Other {
            self.runnable += 1;
        }
        match r {
            Role::Agent => {
                self.agents.insert(key.clone());
            }
            Role::Model => {
                let by_end = (s.end_ns, s.start_ns, s.span_id.clone());
                // The tool spans this model span may now ask for: those
                // that start after it ends, before the next one to end does.
                let next = self.models.range((Bound::Excluded(&by_end), Bound::Unbounded)).next().map(|m| m.0);
                let upper = next.map_or(Bound::Unbounded, |end| Bound::Excluded((end, String::new())));
                let lower = Bound::Included((s.end_ns, String::new()));
                t.reassign.extend(self.tools.range((lower, upper)).map(|k| k.1.clone()));
                self.models.insert(by_end);
                self.members.insert(s.span_id.clone(), BTreeSet::new());
                self.insert_key(key);
                t.units.insert(s.span_id.clone());
            }
            Role::Tool => {
                self.tools.insert(key);
                t.reassign.insert(s.span_id.clone());
            }
            Role::Other => {}
        }
        self.spans.insert(s.span_id.clone(), (s, r));
    }

    /// Puts tool span `id` on the step of the latest model span that ended
    /// when it started, else on a step of its own.
    fn assign(&mut self, id: &str, t: &mut Touched) {
        let Some((s, _)) = self.spans.get(id) else { return };
        let key = (s.start_ns, s.span_id.clone());
        let upto = (s.start_ns, i64::MAX, AFTER_IDS.to_owned());
        let new = self.models.range(..=upto).next_back().map(|m| m.2.clone());
        let old = self.assigned.get(id).cloned();
        let held = match &new {
            Some(m) => self.members.get(m).is_some_and(|tools| tools.contains(&key)),
            None => self.keys.binary_search(&key).is_ok(),
        };
        if old.as_ref() == Some(&new) && held {
            return;
        }
        match old {
            Some(Some(m)) => {
                if let Some(tools) = self.members.get_mut(&m) {
                    tools.remove(&key);
                    t.units.insert(m);
                }
            }
            Some(None) => {
                self.members.remove(id);
                self.remove_key(&key, t);
            }
            None => {}
        }
        match &new {
            Some(m) => {
                self.members.entry(m.clone()).or_default().insert(key);
                t.units.insert(m.clone());
            }
            None => {
                self.members.insert(id.to_owned(), BTreeSet::from([key.clone()]));
                self.insert_key(key);
                t.units.insert(id.to_owned());
            }
        }
        self.assigned.insert(id.to_owned(), new);
    }

    /// Forgets what steps `from..` derived to, then derives them again.
    fn rederive(&mut self, from: usize) {
        for out in &self.outs[from..] {
            for c in &out.unit.step.tool_calls {
                self.call_ids.remove(&c.id);
            }
        }
        while self.tool_first.last().is_some_and(|(_, at)| *at >= from) {
            if let Some((name, _)) = self.tool_first.pop() {
                self.tool_seen.remove(&name);
            }
        }
        if self.system.as_ref().is_some_and(|(at, _)| *at >= from) {
            self.system = None;
        }
        self.outs.truncate(from);
        let run_id = super::run_id_for(&self.project, &self.trace_id);
        let mut call_ids = std::mem::take(&mut self.call_ids);
        for index in from..self.keys.len() {
            let before = self.outs.last().map(|o| o.acc.clone()).unwrap_or_default();
            let unit = self.unit(index);
            let has_model = unit.model.is_some();
            let out = derive_unit(&run_id, index as u32, &unit, before.model_seen, &mut call_ids);
            for name in &out.tool_names {
                if self.tool_seen.insert(name.clone()) {
                    self.tool_first.push((name.clone(), index));
                }
            }
            if self.system.is_none() {
                self.system = out.system_prompt.clone().map(|p| (index, p));
            }
            let mut usage = before.usage;
            usage.add(&out.step.usage);
            let acc = Acc {
                messages: before.messages + out.bodies.len(),
                usage,
                last_model: if out.model.is_some() { Some(index) } else { before.last_model },
                model_seen: before.model_seen || has_model,
                first_human: before.first_human.or(out.has_human.then_some(index)),
                summary: if out.summary.is_some() { Some(index) } else { before.summary },
            };
            self.outs.push(Out { unit: out, acc });
        }
        self.call_ids = call_ids;
    }

    /// Step `index`'s spans.
    fn unit(&self, index: usize) -> Unit<'_> {
        let (start_ns, id) = &self.keys[index];
        let span = |id: &str| self.spans.get(id).map(|(s, _)| s);
        let tools: Vec<&StoredSpan> = self.members.get(id).into_iter().flatten().filter_map(|(_, t)| span(t)).collect();
        let model = span(id).filter(|_| self.spans.get(id).is_some_and(|(_, r)| *r == Role::Model));
        Unit { start_ns: *start_ns, model, tools }
    }
}

impl TraceFold for Assembly {
    fn version(&self) -> Option<i64> {
        self.version
    }

    fn held_with(&self, spans: &[StoredSpan]) -> u64 {
        let new: HashSet<&str> =
            spans.iter().map(|s| s.span_id.as_str()).filter(|id| !self.spans.contains_key(*id)).collect();
        (self.spans.len() + new.len()) as u64
    }

    fn reset(&mut self, spans: Vec<StoredSpan>, version: i64) {
        *self = Self::new(&self.project, &self.trace_id);
        self.add(&spans);
        let _ = self.change(0);
        self.version = Some(version);
    }

    fn fold(&mut self, spans: &[StoredSpan], version: i64) -> Option<RunChange> {
        let from = self.add(spans);
        self.version = Some(version);
        self.change(from)
    }

    fn whole(&mut self) -> Option<RunChange> {
        self.shown = None;
        self.change(0)
    }

    fn forget(&mut self) {
        *self = Self::new(&self.project, &self.trace_id);
    }
}
