//! The engine's layers, checked: each top-level module of `engine/src` may
//! use only the modules below it in [`LAYERS`], so the dependencies run one
//! way and no two modules import each other. (Files of one module may use
//! each other freely; tests inside a file are not counted.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The engine's modules from the bottom up; a module uses only those
/// before it. A new module goes where it belongs in this one list.
const LAYERS: &[&str] = &[
    // data: the serde model (also in the browser bundle) and pure functions of it
    "status", "model", "cost", "paging", "identity", "net", "error", "compare", "eval",
    // persistence, and the event log written through it
    "store", "events", // what a run calls: tools, models, and OpenTelemetry in and out
    "tools", "llm", "otel",   // the operator's config file, which puts the configurations above together
    "config", // running: the runtime a step uses, the loop, and the engine façade
    "runtime", "runner", "engine",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments and its `#[cfg(test)]` tail.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) if !l[..at].contains('"') => &l[..at],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::…` (paths and `use`
/// lists, nested braces included).
fn used_modules(code: &str) -> Vec<String> {
    let mut used = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = list
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(list.len(), |(i, _)| i);
            let (mut item, mut depth) = (String::new(), 0);
            for c in list[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        used.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            used.push(first_segment(rest));
        }
    }
    used.retain(|m| !m.is_empty());
    used
}

fn first_segment(path: &str) -> String {
    path.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

#[test]
fn engine_modules_use_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let module = relative.split('/').next().unwrap().trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue;
        }
        let Some(own) = rank(&module) else {
            panic!("engine/src/{relative}: the module `{module}` has no place in LAYERS (tests/engine/layers.rs)");
        };
        for used in used_modules(&code(&std::fs::read_to_string(file).unwrap())) {
            if used == module || used == "self" {
                continue;
            }
            match rank(&used) {
                Some(r) if r < own => {}
                _ => wrong.entry(format!("{module} → {used}")).or_default().push(relative.clone()),
            }
        }
    }
    for files in wrong.values_mut() {
        files.sort();
        files.dedup();
    }
    assert!(wrong.is_empty(), "imports from a lower layer to a higher one (the order is LAYERS): {wrong:#?}");
}

#[test]
fn the_scanner_reads_paths_and_nested_use_lists() {
    let code = code(
        "use crate::model::{A, B};\nuse crate::{store::{S, T}, tools};\n// crate::engine\nlet x = crate::llm::f();",
    );
    assert_eq!(used_modules(&code), ["model", "store", "tools", "llm"]);
}
