//! Pass 1, backend assignment: every node gets a backend and the [`Cause`] that decided it.
//!
//! Order (as ggml-backend's scheduler): pins first; then compute nodes in topological order go to
//! the only backend that supports them (and whose largest buffer holds each of their tensors), or
//! to a supporting backend where a weight source lives, or, when a weight source is not placed
//! yet, to the first supporting backend (ggml's loader puts weights on the GPU), or to the first
//! supporting backend (preference order) where one of their sources already lives, or else to the
//! first supporting backend. Leaves (inputs, params) are placed with their first
//! consumer unless pinned ("weights stay where they live"); views go with their storage.
//!
//! `set_rows` writes its destination's storage in place, so it runs where that storage lives (a
//! copy would lose the write). When the storage is a leaf not yet placed, the set_rows node is
//! assigned by the normal rules and the leaf follows it; when the storage already lives on a backend
//! that does not support the node (or the node is pinned elsewhere), planning fails with
//! [`SchedError::InPlace`] rather than silently copying.

use crate::backend::Backend;
use crate::error::SchedError;
use crate::plan::Cause;
use graph::{Graph, NodeId, Op};
use std::collections::BTreeMap;

/// Backend index and cause per node.
#[derive(Debug, Clone)]
pub(crate) struct Assignment {
    pub backend: Vec<usize>,
    pub cause: Vec<Cause>,
}

/// True for nodes that a backend computes (not leaves, not views).
pub(crate) fn is_compute(g: &Graph, id: NodeId) -> bool {
    let op = g.node(id).op;
    !matches!(op, Op::Input) && !op.is_view()
}

fn describe_srcs(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    if n.srcs.is_empty() {
        return "none".into();
    }
    n.srcs.iter().map(|&s| g.describe(s)).collect::<Vec<_>>().join(", ")
}

/// Runs the pass. `pins` maps nodes to backend indices.
pub(crate) fn assign(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    pins: &BTreeMap<NodeId, usize>,
) -> Result<Assignment, SchedError> {
    let _span = tracing::debug_span!("assign", nodes = g.len()).entered();
    let n = g.len();
    let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    let mut be: Vec<Option<usize>> = vec![None; n];
    let mut cause: Vec<Option<Cause>> = vec![None; n];

    for (&id, &b) in pins {
        let Some(node) = g.get(id) else {
            return Err(SchedError::UnknownNode { what: "pin", node: id, len: n });
        };
        if node.op.is_view() {
            return Err(SchedError::PinnedView {
                node: g.describe(id),
                op: node.op.name(),
                storage: g.describe(g.storage_of(id)),
            });
        }
        if is_compute(g, id) && !backends[b].supports(g, id) {
            return Err(SchedError::PinUnsupported {
                node: g.describe(id),
                op: node.op.to_string(),
                backend: names[b].to_string(),
            });
        }
        if node.op == Op::Input {
            be[id.index()] = Some(b);
            cause[id.index()] = Some(Cause::Pinned);
        }
    }

    for id in g.topo_order() {
        if !is_compute(g, id) {
            continue;
        }
        let node = g.node(id);
        let (b, c) = if node.op.inplace_src().is_some() {
            let st = g.storage_of(id);
            match be[st.index()] {
                Some(sb) => {
                    let reason = match pins.get(&id) {
                        Some(&p) if p != sb => Some(format!("it is pinned to {}", names[p])),
                        _ if !backends[sb].supports(g, id) => Some(format!("{} does not support it", names[sb])),
                        _ => None,
                    };
                    if let Some(reason) = reason {
                        return Err(SchedError::InPlace {
                            node: g.describe(id),
                            op: node.op.name(),
                            storage: g.describe(st),
                            backend: names[sb].to_string(),
                            reason,
                        });
                    }
                    (sb, Cause::InPlace(st))
                }
                None => match pins.get(&id) {
                    Some(&p) => (p, Cause::Pinned),
                    None => choose(g, backends, &be, id)?,
                },
            }
        } else if let Some(&p) = pins.get(&id) {
            (p, Cause::Pinned)
        } else {
            choose(g, backends, &be, id)?
        };
        be[id.index()] = Some(b);
        cause[id.index()] = Some(c);
        for &s in &node.srcs {
            let st = g.storage_of(s);
            if be[st.index()].is_none() {
                be[st.index()] = Some(b);
                cause[st.index()] = Some(Cause::FirstUse(id));
            }
        }
    }

    // Leaves nobody computes with, then views (their storage is placed by now).
    for id in g.topo_order() {
        let i = id.index();
        if be[i].is_some() {
            continue;
        }
        if g.node(id).op.is_view() {
            let st = g.storage_of(id);
            let sb = match be[st.index()] {
                Some(sb) => sb,
                None => {
                    // A leaf only ever viewed: the preferred backend.
                    be[st.index()] = Some(0);
                    cause[st.index()] = Some(Cause::Preferred);
                    0
                }
            };
            be[i] = Some(sb);
            cause[i] = Some(Cause::View(st));
        } else {
            be[i] = Some(0);
            cause[i] = Some(Cause::Preferred);
        }
    }
    let backend = be.into_iter().map(|b| b.expect("every node assigned")).collect();
    let cause = cause.into_iter().map(|c| c.expect("every node has a cause")).collect();
    Ok(Assignment { backend, cause })
}

/// Whether every tensor node `id` computes or reads fits in one buffer of backend `b` (a source
/// counts with its whole storage, which the backend would hold): a backend whose largest buffer is
/// smaller (lavapipe's 128 MiB against a 262,144-token embedding table) leaves the node to another.
fn fits(g: &Graph, b: &dyn Backend, id: NodeId) -> bool {
    let max = b.max_buffer_size();
    g.node(id).nbytes() <= max && g.node(id).srcs.iter().all(|&s| g.node(g.storage_of(s)).nbytes() <= max)
}

/// The normal rules for an unpinned compute node.
fn choose(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    be: &[Option<usize>],
    id: NodeId,
) -> Result<(usize, Cause), SchedError> {
    let node = g.node(id);
    let supports: Vec<bool> = backends.iter().map(|b| b.supports(g, id) && fits(g, b.as_ref(), id)).collect();
    let supporters: Vec<usize> = (0..backends.len()).filter(|&b| supports[b]).collect();
    if supporters.is_empty() {
        return Err(SchedError::Unsupported {
            node: g.describe(id),
            op: node.op.to_string(),
            srcs: describe_srcs(g, id),
            backends: backends.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
        });
    }
    let refused_by = || supports.iter().position(|&s| !s).map(|b| backends[b].name().to_string()).unwrap_or_default();
    if supporters.len() == 1 && backends.len() > 1 {
        return Ok((supporters[0], Cause::OnlySupporter { refused_by: refused_by() }));
    }
    for &s in &node.srcs {
        let st = g.storage_of(s);
        if (g.node(st).flags.param || g.node(st).flags.state)
            && let Some(b) = be[st.index()]
            && supports[b]
        {
            return Ok((b, Cause::Weights(st)));
        }
    }
    // A weight not placed yet goes to the preferred supporting backend with its first consumer
    // (as ggml's model loader puts the weights in the GPU's buffers), rather than following an
    // input: one node left to another backend (an embedding table too large for the GPU's
    // buffers) must not pull every later block after it.
    // (A set_rows writing a weight in place is not a reader: it keeps following its inputs.)
    let unplaced_weight = node.op != Op::SetRows
        && node.srcs.iter().any(|&s| g.node(g.storage_of(s)).flags.param && be[g.storage_of(s).index()].is_none());
    if !unplaced_weight {
        for &b in &supporters {
            if let Some(&s) = node.srcs.iter().find(|&&s| be[g.storage_of(s).index()] == Some(b)) {
                return Ok((b, Cause::FollowsInput(s)));
            }
        }
    }
    if supporters[0] == 0 {
        Ok((0, Cause::Preferred))
    } else {
        Ok((supporters[0], Cause::Fallback { refused_by: refused_by() }))
    }
}
