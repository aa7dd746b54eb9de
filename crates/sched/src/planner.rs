//! The planning driver: runs the named passes (assign, split, alloc) and assembles the [`Plan`].

use crate::alloc::{Linked, allocate};
use crate::assign::assign;
use crate::backend::Backend;
use crate::error::SchedError;
use crate::plan::{NodePlan, Plan, Split, TensorCopy};
use crate::split::split;
use graph::{Graph, NodeId};
use std::collections::BTreeMap;

/// Plans `g` on `backends` (preference order) with `pins` (node -> backend index).
pub fn plan_graph(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    pins: &BTreeMap<NodeId, usize>,
) -> Result<Plan, SchedError> {
    plan_linked(g, backends, pins, &[])
}

/// [`plan_graph`] with `linked` leaves, which read another plan's storage in place (a side plan,
/// `Scheduler::plan_side`): each must be pinned to the backend holding that storage.
pub(crate) fn plan_linked(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    pins: &BTreeMap<NodeId, usize>,
    linked: &[Linked],
) -> Result<Plan, SchedError> {
    let _span = tracing::info_span!("plan", nodes = g.len(), backends = backends.len()).entered();
    if backends.is_empty() {
        return Err(SchedError::NoBackends);
    }
    let a = assign(g, backends, pins)?;
    let raw = split(g, &a);
    let mem = allocate(g, backends, &a, &raw, linked)?;
    let name = |b: usize| backends[b].name().to_string();
    let splits = raw
        .iter()
        .map(|s| Split {
            backend: s.backend,
            nodes: s.nodes.clone(),
            copies: s
                .copies
                .iter()
                .map(|&(st, from)| {
                    let label = g.node(st).name.clone().unwrap_or_else(|| st.to_string());
                    TensorCopy {
                        storage: st,
                        from,
                        to: s.backend,
                        name: format!("{label}@{}", name(s.backend)),
                        bytes: g.node(st).nbytes(),
                        src: mem.regions[st.index()].expect("copied storage has a region"),
                        dst: mem.slots[&(st, s.backend)],
                    }
                })
                .collect(),
        })
        .collect();
    let nodes = g
        .topo_order()
        .map(|id| NodePlan {
            backend: a.backend[id.index()],
            cause: a.cause[id.index()].clone(),
            region: if g.storage_of(id) == id { mem.regions[id.index()] } else { None },
            readback: mem.readback[id.index()],
        })
        .collect();
    let plan = Plan {
        topology: g.topology_hash(),
        backends: backends.iter().map(|b| b.name().to_string()).collect(),
        nodes,
        splits,
        buffers: mem.buffers,
        arena_bytes: mem.arena_bytes,
        no_reuse_bytes: mem.no_reuse_bytes,
    };
    tracing::debug!(
        splits = plan.splits.len(),
        copies = plan.n_copies(),
        arena = plan.arena_bytes,
        no_reuse = plan.no_reuse_bytes,
        "planned"
    );
    Ok(plan)
}
