//! Tool selection for large tool sets: which of a run's attached tools one
//! turn offers the model when there are more than `[tool_selection] max`.
//!
//! Relevance is Okapi BM25 (k1 = 1.2, b = 0.75) of each tool's text against
//! the latest messages, computed here with no network and no model: a tool's
//! text is its name (split on `_`, `-`, `__` and camelCase, counted twice: a
//! name says most), its description, and its argument schema's property names,
//! titles and descriptions. Words are lower-cased, common English words
//! dropped and plural/-ing/-ed endings cut ([`tokens`]), the same way for tools
//! and query, so "converts currencies" meets `convert_currency`.
//!
//! A [`ToolIndex`] is built once for a set of tools (an inverted index:
//! term → the tools holding it, with counts); scoring a query then touches
//! only the postings of the query's own words. [`ToolIndex::select`] keeps
//! the tools the run already used first (most recent first), then the best
//! scoring ones, up to `max`; ties go by name, so a selection is the same
//! every time for the same tools and messages.

use std::collections::HashMap;

use serde_json::Value;

use crate::model::{OfferedTool, ToolInfo};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length normalisation.
pub const B: f64 = 0.75;
/// Words of one tool's text indexed at most (a huge schema does not drown its name).
const MAX_DOC_WORDS: usize = 2_000;
/// How deep a schema is read for property names and descriptions.
const MAX_SCHEMA_DEPTH: usize = 8;
/// Why a tool is offered: it was called earlier in the run.
pub const REASON_USED: &str = "used";
/// Why a tool is offered: its text matches the latest messages.
pub const REASON_RELEVANT: &str = "relevant";

/// Words that say nothing about which tool fits (sorted: binary search).
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "get", "give", "had", "has", "have",
    "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "like", "may",
    "me", "might", "more", "most", "much", "must", "my", "no", "not", "now", "of", "on", "one", "or", "our", "out",
    "please", "shall", "she", "should", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "to", "too", "up", "us", "use", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// The words of `text` as BM25 sees them: split on anything not a letter
/// or digit and at camelCase humps (`getWeather`, `HTTPServer` → `get`,
/// `weather`, `http`, `server`), lower-cased, one-letter and stop words
/// dropped, endings cut (see [`stem`]).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |word| {
        let lower = word.to_lowercase();
        // One letter says nothing (`today's` → `today`, `s`).
        if lower.chars().nth(1).is_some() && STOP_WORDS.binary_search(&lower.as_str()).is_err() {
            out.push(stem(&lower));
        }
    });
    out
}

/// Calls `f` with each word of `text`: runs of letters and digits, split
/// where a lower-case letter or digit meets an upper-case one (`getWeather`)
/// and before the last capital of a run followed by a lower-case letter
/// (`HTTPServer` → `HTTP`, `Server`).
fn for_each_word(text: &str, mut f: impl FnMut(&str)) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start: Option<usize> = None;
    for (i, &(at, c)) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                f(&text[s..at]);
            }
            continue;
        }
        if let Some(s) = start {
            let prev = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
            let hump =
                c.is_uppercase() && (prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower));
            if hump {
                f(&text[s..at]);
                start = Some(at);
            }
        } else {
            start = Some(at);
        }
    }
    if let Some(s) = start {
        f(&text[s..]);
    }
}

/// A light English stemmer: plural `-ies`/`-es`/`-s`, `-ing` and `-ed` cut,
/// so `converts`, `converting`, `converted` and `convert` are one word.
/// Short words are left alone.
pub fn stem(word: &str) -> String {
    let n = word.len();
    if !word.is_ascii() || n <= 3 {
        return word.to_owned();
    }
    if let Some(base) = word.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{base}y");
    }
    if word.ends_with("sses") || word.ends_with("xes") || word.ends_with("ches") || word.ends_with("shes") {
        return word[..n - 2].to_owned();
    }
    if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") && !word.ends_with("is") {
        return word[..n - 1].to_owned();
    }
    // A base needs a vowel (`string`, `shred` stay) and `-thing` stays a word.
    let stem_of = |base: &str| base.len() >= 3 && base.bytes().any(|b| b"aeiouy".contains(&b)) && !base.ends_with("th");
    if let Some(base) = word.strip_suffix("ing").filter(|b| stem_of(b)) {
        return undouble(base);
    }
    if let Some(base) = word.strip_suffix("ed").filter(|b| stem_of(b)) {
        return undouble(base);
    }
    word.to_owned()
}

/// `runn` → `run` (after `running`), leaving `ll`, `ss`, `zz` as they are.
fn undouble(base: &str) -> String {
    let b = base.as_bytes();
    let n = b.len();
    if n >= 2 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z') && !b"aeiou".contains(&b[n - 1]) {
        return base[..n - 1].to_owned();
    }
    base.to_owned()
}

/// The words of one tool: its name twice, its description, its schema's
/// property names and descriptions, at most [`MAX_DOC_WORDS`].
fn tool_words(tool: &ToolInfo) -> Vec<String> {
    let mut words = tokens(&tool.name);
    words.extend(words.clone());
    words.extend(tokens(&tool.description));
    schema_words(&tool.schema, 0, &mut words);
    words.truncate(MAX_DOC_WORDS);
    words
}

fn schema_words(schema: &Value, depth: usize, words: &mut Vec<String>) {
    if depth > MAX_SCHEMA_DEPTH || words.len() >= MAX_DOC_WORDS {
        return;
    }
    match schema {
        Value::Object(map) => {
            for key in ["title", "description"] {
                if let Some(Value::String(text)) = map.get(key) {
                    words.extend(tokens(text));
                }
            }
            if let Some(Value::Object(props)) = map.get("properties") {
                for (name, prop) in props {
                    words.extend(tokens(name));
                    schema_words(prop, depth + 1, words);
                }
            }
            for key in ["items", "anyOf", "oneOf", "allOf", "additionalProperties"] {
                if let Some(sub) = map.get(key) {
                    schema_words(sub, depth + 1, words);
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|s| schema_words(s, depth + 1, words)),
        _ => {}
    }
}

/// A BM25 index over a set of tools (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct ToolIndex {
    /// The tools' names, in the order given.
    names: Vec<String>,
    /// Each tool's length in words.
    lengths: Vec<u32>,
    avg_len: f64,
    /// Each word's postings: (tool, times it occurs in the tool's text).
    postings: HashMap<String, Vec<(u32, u32)>>,
}

impl ToolIndex {
    /// Indexes `tools` (their order is kept: [`Self::names`]).
    pub fn new(tools: &[ToolInfo]) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
            let words = tool_words(tool);
            lengths.push(words.len() as u32);
            let mut counts: HashMap<String, u32> = HashMap::new();
            for w in words {
                *counts.entry(w).or_default() += 1;
            }
            for (w, n) in counts {
                postings.entry(w).or_default().push((i as u32, n));
            }
        }
        let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
        let avg_len = if tools.is_empty() { 0.0 } else { total as f64 / tools.len() as f64 };
        let names = tools.iter().map(|t| t.name.clone()).collect();
        Self { names, lengths, avg_len, postings }
    }

    /// The indexed tools' names, in the order given.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Each tool's BM25 score against `query` (in the order of [`Self::names`]);
    /// a word repeated in the query counts once.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.names.len()];
        let mut words = tokens(query);
        words.sort_unstable();
        words.dedup();
        let n = self.names.len() as f64;
        for word in &words {
            let Some(posting) = self.postings.get(word) else { continue };
            let df = posting.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in posting {
                let tf = f64::from(tf);
                let norm = 1.0 - B + B * f64::from(self.lengths[doc as usize]) / self.avg_len.max(1.0);
                scores[doc as usize] += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        scores
    }

    /// What one turn offers: the tools of `used` that are indexed (most
    /// recent first, as given), then those scoring above zero against
    /// `query`, best first (ties by name), `max` in all. Scores are rounded
    /// to 4 decimals, as recorded.
    pub fn select(&self, query: &str, used: &[String], max: usize) -> Vec<OfferedTool> {
        let scores = self.scores(query);
        let position: HashMap<&str, usize> = self.names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let mut offered: Vec<OfferedTool> = Vec::new();
        let mut taken = vec![false; self.names.len()];
        for name in used {
            if offered.len() >= max {
                break;
            }
            if let Some(&i) = position.get(name.as_str()) {
                if !taken[i] {
                    taken[i] = true;
                    offered.push(OfferedTool {
                        name: name.clone(),
                        score: round(scores[i]),
                        reason: REASON_USED.into(),
                    });
                }
            }
        }
        let mut ranked: Vec<usize> = (0..self.names.len()).filter(|&i| !taken[i] && scores[i] > 0.0).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then_with(|| self.names[a].cmp(&self.names[b])));
        offered.extend(ranked.into_iter().take(max.saturating_sub(offered.len())).map(|i| OfferedTool {
            name: self.names[i].clone(),
            score: round(scores[i]),
            reason: REASON_RELEVANT.into(),
        }));
        offered
    }
}

fn round(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            schema,
            requires_approval: false,
            source: "builtin".into(),
            idempotent: true,
        }
    }

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]), "binary search needs them sorted");
    }

    #[test]
    fn names_split_on_separators_and_humps() {
        assert_eq!(tokens("get_weather"), ["weather"], "`get` is a stop word");
        assert_eq!(tokens("everything__get-sum"), ["everything", "sum"]);
        assert_eq!(tokens("convertCurrency"), ["convert", "currency"]);
        assert_eq!(tokens("HTTPServerStatus"), ["http", "server", "status"]);
        assert_eq!(tokens("sha256Digest v2"), ["sha256", "digest", "v2"]);
        assert_eq!(tokens("The Stock-Prices, please!"), ["stock", "price"]);
        assert_eq!(tokens("today's rate: 2 x 3"), ["today", "rate"], "one-letter words say nothing");
        assert_eq!(tokens("élan Überweisung"), ["élan", "überweisung"]);
        assert!(tokens("").is_empty() && tokens("  -- __ ").is_empty());
    }

    #[test]
    fn endings_are_cut_alike() {
        for (word, stemmed) in [
            ("converts", "convert"),
            ("converting", "convert"),
            ("converted", "convert"),
            ("currencies", "currency"),
            ("boxes", "box"),
            ("running", "run"),
            ("status", "status"),
            ("class", "class"),
            ("bus", "bus"),
            ("calling", "call"),
            ("string", "string"),
            ("everything", "everything"),
        ] {
            assert_eq!(stem(word), stemmed, "{word}");
        }
    }

    #[test]
    fn bm25_scores_follow_the_formula() {
        // Two one-word tools and one that never matches: df = 1 of N = 3.
        let index =
            ToolIndex::new(&[tool("alpha", "", json!({})), tool("beta", "", json!({})), tool("gamma", "", json!({}))]);
        let scores = index.scores("alpha");
        // Each doc is `name name` (2 words), so avg_len = 2 and norm = 1.
        let idf = (1.0f64 + (3.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let expected = idf * 2.0 * (K1 + 1.0) / (2.0 + K1);
        assert!((scores[0] - expected).abs() < 1e-12, "{scores:?} vs {expected}");
        assert_eq!(&scores[1..], [0.0, 0.0]);
        assert_eq!(index.scores("alpha alpha alphas"), scores, "a repeated word counts once");
        assert!(index.scores("zeta").iter().all(|&s| s == 0.0));
    }

    #[test]
    fn rarer_words_and_shorter_texts_score_higher() {
        let index = ToolIndex::new(&[
            tool("send_email", "Sends an email message to a recipient.", json!({})),
            tool("send_sms", "Sends a text message to a phone number.", json!({})),
            tool("read_inbox", "Reads the newest email messages of the inbox, with their senders, subjects, dates and the full bodies of each.", json!({})),
        ]);
        let scores = index.scores("email the report to ada");
        assert!(scores[0] > scores[2] && scores[2] > 0.0, "{scores:?}");
        assert_eq!(scores[1], 0.0);
        let phone = index.scores("text my phone");
        assert!(phone[1] > 0.0 && phone[0] == 0.0, "{phone:?}");
    }

    #[test]
    fn schemas_count_property_names_and_descriptions() {
        let schema = json!({"type": "object", "properties": {
            "iban": {"type": "string", "description": "The account to pay into"},
            "amount": {"type": "object", "properties": {"currency": {"type": "string"}}}
        }});
        let index = ToolIndex::new(&[tool("transfer", "Moves money.", schema), tool("noop", "Nothing.", json!({}))]);
        assert!(index.scores("iban")[0] > 0.0);
        assert!(index.scores("which account")[0] > 0.0);
        assert!(index.scores("currencies")[0] > 0.0, "nested properties, stemmed");
    }

    #[test]
    fn selection_keeps_used_tools_then_the_best_up_to_max() {
        let tools: Vec<ToolInfo> = ["beta_weather", "alpha_weather", "stock_price", "translate_text", "zip_files"]
            .iter()
            .map(|n| tool(n, "Tool.", json!({})))
            .collect();
        let index = ToolIndex::new(&tools);
        let offered = index.select("what will the weather be tomorrow", &["zip_files".into()], 2);
        let names: Vec<(&str, &str)> = offered.iter().map(|o| (o.name.as_str(), o.reason.as_str())).collect();
        // Both weather tools score alike: the tie goes by name.
        assert_eq!(names, [("zip_files", "used"), ("alpha_weather", "relevant")]);
        assert_eq!(offered[0].score, 0.0);
        assert!(offered[1].score > 0.0);
        let all = index.select("weather", &[], 10);
        assert_eq!(all.len(), 2, "only tools that match are offered: {all:?}");
        assert!(index.select("nothing matches", &[], 10).is_empty());
        // Unknown used names are skipped; used tools never exceed max.
        let used: Vec<String> = ["gone".into(), "stock_price".into(), "zip_files".into()].into();
        let capped = index.select("weather", &used, 1);
        assert_eq!(capped.len(), 1);
        assert_eq!((capped[0].name.as_str(), capped[0].reason.as_str()), ("stock_price", "used"));
        // The same inputs give the same selection.
        assert_eq!(index.select("weather stock", &used, 3), index.select("weather stock", &used, 3));
    }
}
