//! Per-split [`Bindings`]: where every tensor a split touches lives on the split's backend (the
//! storage's own region, or the slot of its copy), resolved once per plan.

use crate::backend::{Bindings, BufferId, TensorLoc};
use crate::plan::{Plan, Region};
use graph::{Graph, NodeId};
use std::collections::BTreeMap;

/// Storage locations per split: every node of the split, its sources (and the views between them
/// and their storage), bound to the storage's region on the split's backend (its own, or the copy
/// slot).
pub(crate) fn bindings(g: &Graph, plan: &Plan, buffers: &[BufferId]) -> Vec<Bindings> {
    let mut slots: BTreeMap<(NodeId, usize), Region> = BTreeMap::new();
    for s in &plan.splits {
        for c in &s.copies {
            slots.insert((c.storage, c.to), c.dst);
        }
    }
    let loc_on = |id: NodeId, b: usize| -> TensorLoc {
        let st = g.storage_of(id);
        let r = if plan.nodes[st.index()].backend == b {
            plan.nodes[st.index()].region.expect("storage owners have regions")
        } else {
            slots[&(st, b)]
        };
        TensorLoc { buffer: buffers[r.buffer], offset: r.offset }
    };
    plan.splits
        .iter()
        .map(|s| {
            let mut bd = Bindings::new(g.len());
            for &id in &s.nodes {
                bd.bind(id, loc_on(id, s.backend));
                let mut stack: Vec<NodeId> = g.node(id).srcs.to_vec();
                while let Some(src) = stack.pop() {
                    if bd.get(src).is_some() {
                        continue;
                    }
                    bd.bind(src, loc_on(src, s.backend));
                    let st = g.storage_of(src);
                    if bd.get(st).is_none() {
                        bd.bind(st, loc_on(st, s.backend));
                    }
                    if g.node(src).op.is_view() {
                        stack.extend(g.node(src).srcs.iter().copied());
                    }
                }
            }
            bd
        })
        .collect()
}
