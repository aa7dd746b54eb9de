//! Pass 3, buffer allocation: a region for every storage and copy slot, per backend.
//!
//! Dedicated, never reused regions: params (a device buffer each, `backend.param.NAME`, so that a
//! re-plan can keep them), inputs and the storages of outputs (in `io`, host-visible memory, so the
//! CPU reads outputs without a staging copy). Everything else (intermediate storages and copy slots)
//! shares the `arena` by liveness: on a timeline of copy events and node executions (split by
//! split), a storage is allocated when its producer (or first copy) runs and freed after its last
//! reader (views and in-place results read and write their storage, so they extend its life; a copy
//! out of it is a read). A node's result is allocated before its dead sources are freed, so it never
//! aliases its own inputs. Offsets respect the backend's alignment; a region that would exceed
//! `max_buffer_size` opens another buffer.

use crate::arena::{Arena, Slot, align_up};
use crate::assign::{Assignment, is_compute};
use crate::backend::Backend;
use crate::error::SchedError;
use crate::plan::{BufferRole, PlanBuffer, Region};
use crate::split::RawSplit;
use graph::{Graph, NodeId};
use std::collections::{BTreeMap, HashMap};

/// The pass's result.
#[derive(Debug, Clone)]
pub(crate) struct Allocation {
    pub buffers: Vec<PlanBuffer>,
    /// Region of every storage owner on its own backend.
    pub regions: Vec<Option<Region>>,
    /// Region of every copy slot `(storage, backend)`.
    pub slots: HashMap<(NodeId, usize), Region>,
    pub arena_bytes: usize,
    pub no_reuse_bytes: usize,
}

type Holder = (NodeId, usize);

/// Runs the pass.
pub(crate) fn allocate(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    a: &Assignment,
    splits: &[RawSplit],
) -> Result<Allocation, SchedError> {
    let _span = tracing::debug_span!("alloc").entered();
    let nb = backends.len();
    let align: Vec<usize> = backends.iter().map(|b| b.alignment().max(1)).collect();
    let max: Vec<usize> = backends.iter().map(|b| b.max_buffer_size()).collect();
    let too_large = |b: usize, st: NodeId, what: &str| SchedError::TooLarge {
        backend: backends[b].name().to_string(),
        what: format!("{what} {}", g.describe(st)),
        bytes: g.node(st).nbytes(),
        max: max[b],
    };

    // Dedicated storages: leaves and the storages of outputs.
    let mut dedicated = vec![None; g.len()];
    for (id, n) in g.nodes() {
        if g.storage_of(id) != id {
            continue;
        }
        if n.flags.param {
            dedicated[id.index()] = Some(BufferRole::Params);
        } else if n.flags.input || !is_compute(g, id) {
            dedicated[id.index()] = Some(BufferRole::Io);
        }
    }
    for o in g.outputs() {
        let st = g.storage_of(o);
        if dedicated[st.index()].is_none() {
            dedicated[st.index()] = Some(BufferRole::Io);
        }
    }

    // Bump allocation of dedicated regions: (backend, role) -> chunk sizes.
    let mut bump: BTreeMap<(usize, BufferRole), Vec<usize>> = BTreeMap::new();
    let mut placed: Vec<Option<(usize, BufferRole, Slot)>> = vec![None; g.len()];
    let mut param_of: HashMap<(usize, usize), NodeId> = HashMap::new();
    for id in g.topo_order() {
        let Some(role) = dedicated[id.index()] else { continue };
        let b = a.backend[id.index()];
        let size = align_up(g.node(id).nbytes(), align[b]);
        if size > max[b] {
            return Err(too_large(b, id, role.name()));
        }
        let chunks = bump.entry((b, role)).or_default();
        // Each param gets a buffer of its own, so a re-plan can keep it (see `Scheduler::plan`).
        if role == BufferRole::Params || chunks.last().is_none_or(|&used| used + size > max[b]) {
            chunks.push(0);
        }
        if role == BufferRole::Params {
            param_of.insert((b, chunks.len() - 1), id);
        }
        let ci = chunks.len() - 1;
        let offset = chunks[ci];
        chunks[ci] += size;
        placed[id.index()] = Some((b, role, Slot { chunk: ci, offset, size }));
    }

    // Liveness timeline of arena holders: (storage, backend) for originals and copy slots.
    let mut def: HashMap<Holder, usize> = HashMap::new();
    let mut last: HashMap<Holder, usize> = HashMap::new();
    let mut order: Vec<Holder> = Vec::new(); // first definition order (deterministic)
    let mut t = 0usize;
    {
        let mut touch = |h: Holder, t: usize, defines: bool| {
            if defines && !def.contains_key(&h) {
                def.insert(h, t);
                order.push(h);
            }
            let e = last.entry(h).or_insert(t);
            *e = (*e).max(t);
        };
        for s in splits {
            for &(st, from) in &s.copies {
                t += 1;
                touch((st, from), t, false);
                touch((st, s.backend), t, true);
            }
            for &id in &s.nodes {
                t += 1;
                for &src in &g.node(id).srcs {
                    touch((g.storage_of(src), s.backend), t, false);
                }
                let own = g.storage_of(id);
                touch((own, s.backend), t, own == id);
            }
        }
    }
    let is_arena = |h: &Holder| h.1 != a.backend[h.0.index()] || dedicated[h.0.index()].is_none();
    let mut frees: BTreeMap<usize, Vec<Holder>> = BTreeMap::new();
    let mut defs: BTreeMap<usize, Vec<Holder>> = BTreeMap::new();
    for h in order.iter().filter(|h| is_arena(h)) {
        defs.entry(def[h]).or_default().push(*h);
        frees.entry(last[h]).or_default().push(*h);
    }
    let mut arenas: Vec<Arena> = (0..nb).map(|b| Arena::new(align[b], max[b])).collect();
    let mut slot_of: HashMap<Holder, Slot> = HashMap::new();
    let mut no_reuse_bytes = 0;
    for time in 1..=t {
        for h in defs.get(&time).into_iter().flatten() {
            let bytes = g.node(h.0).nbytes();
            let slot = arenas[h.1].alloc(bytes).ok_or_else(|| too_large(h.1, h.0, "intermediate"))?;
            no_reuse_bytes += slot.size;
            slot_of.insert(*h, slot);
        }
        for h in frees.get(&time).into_iter().flatten() {
            arenas[h.1].free(slot_of[h]);
        }
    }

    // Buffers: per backend, params chunks, io chunks, arena chunks (empty ones omitted).
    let mut buffers = Vec::new();
    let mut index: HashMap<(usize, BufferRole, usize), usize> = HashMap::new();
    let mut arena_bytes = 0;
    for (b, arena) in arenas.iter().enumerate() {
        for role in [BufferRole::Params, BufferRole::Io, BufferRole::Arena] {
            let sizes = match role {
                BufferRole::Arena => arena.chunk_sizes(),
                _ => bump.get(&(b, role)).cloned().unwrap_or_default(),
            };
            for (ci, &size) in sizes.iter().enumerate() {
                if size == 0 {
                    continue;
                }
                if role == BufferRole::Arena {
                    arena_bytes += size;
                }
                let param = if role == BufferRole::Params { param_of.get(&(b, ci)).copied() } else { None };
                let name = if let Some(pid) = param {
                    let label = g.node(pid).name.clone().unwrap_or_else(|| pid.to_string());
                    format!("{}.param.{label}", backends[b].name())
                } else if ci == 0 {
                    format!("{}.{}", backends[b].name(), role.name())
                } else {
                    format!("{}.{}{ci}", backends[b].name(), role.name())
                };
                index.insert((b, role, ci), buffers.len());
                buffers.push(PlanBuffer { backend: b, role, chunk: ci, size, kind: role.kind(), name, param });
            }
        }
    }
    let region = |b: usize, role: BufferRole, s: Slot| Region {
        buffer: index[&(b, role, s.chunk)],
        offset: s.offset,
        size: s.size,
    };

    let mut regions = vec![None; g.len()];
    let mut slots = HashMap::new();
    for (i, p) in placed.iter().enumerate() {
        if let Some((b, role, s)) = *p {
            regions[i] = Some(region(b, role, s));
        }
    }
    for (h, s) in &slot_of {
        let r = region(h.1, BufferRole::Arena, *s);
        if h.1 == a.backend[h.0.index()] {
            regions[h.0.index()] = Some(r);
        } else {
            slots.insert(*h, r);
        }
    }
    Ok(Allocation { buffers, regions, slots, arena_bytes, no_reuse_bytes })
}
