//! The assemblies of the traces sent to lately, kept between requests so a
//! span sent to a long trace is folded into its run without reading the
//! trace again (see [`Assembly`]). Bounded by count and by bytes: the least
//! recently sent to are dropped, and read again from the store when their
//! trace is sent to again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::limits::{MAX_ASSEMBLIES, MAX_ASSEMBLY_BYTES};
use super::Assembly;

type Key = (String, String);

struct Entry {
    assembly: Arc<tokio::sync::Mutex<Assembly>>,
    used: u64,
    bytes: usize,
}

#[derive(Default)]
struct Inner {
    tick: u64,
    entries: HashMap<Key, Entry>,
}

/// See the module docs.
#[derive(Default)]
pub struct Assemblies {
    inner: Mutex<Inner>,
}

impl Assemblies {
    /// The assembly of trace `trace_id` in `project` (an empty one when
    /// none is kept): lock it while its trace is ingested.
    pub fn get(&self, project: &str, trace_id: &str) -> Arc<tokio::sync::Mutex<Assembly>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.entry((project.to_owned(), trace_id.to_owned())).or_insert_with(|| Entry {
            assembly: Arc::new(tokio::sync::Mutex::new(Assembly::new(project, trace_id))),
            used: tick,
            bytes: 0,
        });
        entry.used = tick;
        entry.assembly.clone()
    }

    /// Notes that trace `trace_id`'s assembly now holds `bytes`, then drops
    /// the least recently used assemblies while the kept ones are too many
    /// or too large.
    pub fn done(&self, project: &str, trace_id: &str, bytes: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = inner.entries.get_mut(&(project.to_owned(), trace_id.to_owned())) {
            e.bytes = bytes;
        }
        let mut total: usize = inner.entries.values().map(|e| e.bytes).sum();
        while inner.entries.len() > MAX_ASSEMBLIES || total > MAX_ASSEMBLY_BYTES {
            let Some(oldest) = inner.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some(e) = inner.entries.remove(&oldest) {
                total -= e.bytes;
            }
        }
    }

    /// Assemblies kept.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
