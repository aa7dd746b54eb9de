//! Pass 2, splits and copies: maximal runs of consecutive compute nodes (topological order) on one
//! backend, and for each split the storages of sources that live on another backend.
//!
//! A copy is made of the whole owning storage (never a view of it) into one slot per (storage,
//! backend). A slot is filled once and reused by later splits on the same backend, unless an
//! in-place write (set_rows) changed the storage since: then the split copies it again. Copies of a
//! split are ordered by storage id, so plans are deterministic.

use crate::assign::{Assignment, is_compute};
use graph::{Graph, NodeId};
use std::collections::HashMap;

/// A split before allocation: backend, nodes, and the storages to copy in (with their backend).
#[derive(Debug, Clone)]
pub(crate) struct RawSplit {
    pub backend: usize,
    pub nodes: Vec<NodeId>,
    /// `(storage, from backend)`, sorted by storage id.
    pub copies: Vec<(NodeId, usize)>,
}

/// Runs the pass.
pub(crate) fn split(g: &Graph, a: &Assignment) -> Vec<RawSplit> {
    let _span = tracing::debug_span!("split").entered();
    let mut splits: Vec<RawSplit> = Vec::new();
    // Number of writes so far per storage (its producer, then each in-place write).
    let mut version = vec![0u32; g.len()];
    // Version last copied into the (storage, backend) slot.
    let mut copied: HashMap<(NodeId, usize), u32> = HashMap::new();
    for id in g.topo_order() {
        if !is_compute(g, id) {
            continue;
        }
        let b = a.backend[id.index()];
        if splits.last().is_none_or(|s| s.backend != b) {
            splits.push(RawSplit { backend: b, nodes: Vec::new(), copies: Vec::new() });
        }
        let cur = splits.last_mut().expect("a split was just pushed");
        cur.nodes.push(id);
        for &s in &g.node(id).srcs {
            let st = g.storage_of(s);
            let from = a.backend[st.index()];
            if from == b {
                continue;
            }
            let v = version[st.index()];
            if copied.get(&(st, b)) != Some(&v) {
                copied.insert((st, b), v);
                if !cur.copies.iter().any(|&(c, _)| c == st) {
                    cur.copies.push((st, from));
                }
            }
        }
        version[g.storage_of(id).index()] += 1;
    }
    for s in &mut splits {
        s.copies.sort_by_key(|&(st, _)| st);
    }
    splits
}
