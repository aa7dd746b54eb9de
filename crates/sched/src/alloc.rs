//! Pass 3, buffer allocation: a region for every storage and copy slot, per backend, in five
//! named sub-passes.
//!
//! 1. [`roles`]: which storages get a dedicated, never reused region, and in which role: params
//!    and state tensors a device buffer each (`backend.param.NAME`, `backend.state.NAME`, so that a
//!    re-plan or another cached plan keeps them), inputs host-visible memory (`inputs`, written by
//!    the host every step), the storages of outputs device memory (`outputs`: a node on the same
//!    device that consumes an output reads it without crossing the bus), except small outputs no
//!    node reads (at most [`HOST_OUTPUT_MAX`] bytes: sampled tokens), which the device writes into
//!    host-visible memory (`host_outputs`: read in place, no copy back and no second round trip).
//! 2. [`place_dedicated`]: bump allocation of those regions.
//! 3. [`place_readback`]: every output storage in device memory, on a backend whose device memory
//!    is not host memory, gets a host-visible read-back region of the same size (`readback`),
//!    allocated once with the plan and reused every step: `Scheduler::read_rows` copies the
//!    requested rows there in one batch and reads them from it.
//! 4. [`liveness`]: on a timeline of copy events and node executions (split by split), each
//!    arena holder (an intermediate storage, or a copy slot) is defined when its producer (or its
//!    copy) runs and dies after its last reader (views and in-place results read and write their
//!    storage, so they extend its life; a copy out of it is a read).
//! 5. [`place_arena`]: holders share the `arena` by liveness: a node's result is allocated before
//!    its dead sources are freed, so it never aliases its own inputs.
//!
//! Offsets respect the backend's alignment; a region that would exceed `max_buffer_size` opens
//! another buffer. [`buffers`] turns the chunks into the plan's buffer list.

use crate::arena::{Arena, Slot, align_up};
use crate::assign::{Assignment, is_compute};
use crate::backend::Backend;
use crate::error::SchedError;
use crate::plan::{BufferRole, PlanBuffer, Region};
use crate::split::RawSplit;
use graph::{Graph, NodeId};
use std::collections::{BTreeMap, HashMap};

/// A leaf of a side plan that reads a base plan's storage in place: where that storage lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Linked {
    /// The leaf (in the side plan's graph).
    pub leaf: NodeId,
    /// The backend holding the storage.
    pub backend: usize,
    /// The size of the base plan's buffer holding it.
    pub buffer_size: usize,
    /// The memory kind of that buffer.
    pub kind: crate::MemoryKind,
    /// The storage's offset in that buffer.
    pub offset: usize,
}

/// The pass's result.
#[derive(Debug, Clone)]
pub(crate) struct Allocation {
    pub buffers: Vec<PlanBuffer>,
    /// Region of every storage owner on its own backend.
    pub regions: Vec<Option<Region>>,
    /// Read-back region of every output storage that needs one.
    pub readback: Vec<Option<Region>>,
    /// Region of every copy slot `(storage, backend)`.
    pub slots: HashMap<(NodeId, usize), Region>,
    pub arena_bytes: usize,
    pub no_reuse_bytes: usize,
}

/// An arena holder: a storage on a backend (its own, or a copy slot on another).
type Holder = (NodeId, usize);

/// A region placed in chunk `Slot::chunk` of `(backend, role)`.
type Placed = (usize, BufferRole, Slot);

/// Per-backend facts the sub-passes need.
struct Limits {
    align: Vec<usize>,
    max: Vec<usize>,
    names: Vec<String>,
    /// `Backend::device_memory_is_host`: outputs there need no read-back region.
    host_device: Vec<bool>,
}

impl Limits {
    fn too_large(&self, g: &Graph, b: usize, st: NodeId, what: &str) -> SchedError {
        SchedError::TooLarge {
            backend: self.names[b].clone(),
            what: format!("{what} {}", g.describe(st)),
            bytes: g.node(st).nbytes(),
            max: self.max[b],
        }
    }
}

/// Bump allocation of dedicated regions: `(backend, role)` -> the used size of each chunk.
#[derive(Default)]
struct Bump {
    chunks: BTreeMap<(usize, BufferRole), Vec<usize>>,
    /// The param or state leaf of each chunk that holds one.
    leaf_of: HashMap<(usize, BufferRole, usize), NodeId>,
}

impl Bump {
    /// Places `bytes` for `id` in `(b, role)`; params and state get a chunk of their own.
    fn place(&mut self, lim: &Limits, g: &Graph, b: usize, role: BufferRole, id: NodeId) -> Result<Slot, SchedError> {
        let size = align_up(g.node(id).nbytes(), lim.align[b]);
        if size > lim.max[b] {
            return Err(lim.too_large(g, b, id, role.name()));
        }
        let chunks = self.chunks.entry((b, role)).or_default();
        let own = role.per_leaf();
        if own || chunks.last().is_none_or(|&used| used + size > lim.max[b]) {
            chunks.push(0);
        }
        let chunk = chunks.len() - 1;
        if own {
            self.leaf_of.insert((b, role, chunk), id);
        }
        let offset = chunks[chunk];
        chunks[chunk] += size;
        Ok(Slot { chunk, offset, size })
    }
}

/// Runs the pass.
pub(crate) fn allocate(
    g: &Graph,
    backends: &[Box<dyn Backend>],
    a: &Assignment,
    splits: &[RawSplit],
    linked: &[Linked],
) -> Result<Allocation, SchedError> {
    let _span = tracing::debug_span!("alloc").entered();
    let lim = Limits {
        align: backends.iter().map(|b| b.alignment().max(1)).collect(),
        max: backends.iter().map(|b| b.max_buffer_size()).collect(),
        names: backends.iter().map(|b| b.name().to_string()).collect(),
        host_device: backends.iter().map(|b| b.device_memory_is_host()).collect(),
    };
    let mut roles = roles(g);
    for l in linked {
        roles[l.leaf.index()] = None;
    }
    let mut bump = Bump::default();
    let placed = place_dedicated(g, a, &lim, &roles, &mut bump)?;
    let readback = place_readback(g, a, &lim, &roles, &mut bump)?;
    let (defs, frees, end) = liveness(g, a, splits, &roles);
    let (arenas, slot_of, no_reuse_bytes) = place_arena(g, &lim, &defs, &frees, end)?;
    let (mut buffers, index, arena_bytes) = buffers(g, &lim, &bump, &arenas);
    let region = |b: usize, role: BufferRole, s: Slot| Region {
        buffer: index[&(b, role, s.chunk)],
        offset: s.offset,
        size: s.size,
    };
    let mut regions = vec![None; g.len()];
    for (i, p) in placed.iter().enumerate() {
        if let Some((b, role, s)) = *p {
            regions[i] = Some(region(b, role, s));
        }
    }
    for (chunk, l) in linked.iter().enumerate() {
        let label = g.node(l.leaf).name.clone().unwrap_or_else(|| l.leaf.to_string());
        let size = g.node(l.leaf).nbytes();
        regions[l.leaf.index()] = Some(Region { buffer: buffers.len(), offset: l.offset, size });
        buffers.push(PlanBuffer {
            backend: l.backend,
            role: BufferRole::Linked,
            chunk,
            size: l.buffer_size,
            kind: l.kind,
            name: format!("{}.linked.{label}", lim.names[l.backend]),
            leaf: None,
        });
    }
    let readback = readback.iter().map(|p| p.map(|(b, role, s)| region(b, role, s))).collect();
    let mut slots = HashMap::new();
    for (h, s) in &slot_of {
        let r = region(h.1, BufferRole::Arena, *s);
        if h.1 == a.backend[h.0.index()] {
            regions[h.0.index()] = Some(r);
        } else {
            slots.insert(*h, r);
        }
    }
    Ok(Allocation { buffers, regions, readback, slots, arena_bytes, no_reuse_bytes })
}

/// Sub-pass 1: the dedicated role of every storage owner that has one (`None`: the arena).
fn roles(g: &Graph) -> Vec<Option<BufferRole>> {
    let mut roles = vec![None; g.len()];
    for (id, n) in g.nodes() {
        if g.storage_of(id) != id {
            continue;
        }
        roles[id.index()] = if n.flags.param {
            Some(BufferRole::Params)
        } else if n.flags.state {
            Some(BufferRole::State)
        } else if n.flags.input || !is_compute(g, id) {
            Some(BufferRole::Inputs)
        } else {
            None
        };
    }
    let mut read = vec![false; g.len()];
    for (id, n) in g.nodes() {
        if is_compute(g, id) {
            for &s in &n.srcs {
                read[g.storage_of(s).index()] = true;
            }
        }
    }
    for o in g.outputs() {
        let st = g.storage_of(o);
        if roles[st.index()].is_none() {
            let small = g.node(st).nbytes() <= HOST_OUTPUT_MAX;
            roles[st.index()] =
                Some(if small && !read[st.index()] { BufferRole::HostOutputs } else { BufferRole::Outputs });
        }
    }
    roles
}

/// The largest output storage, in bytes, that goes into host-visible memory when no node reads it
/// (`BufferRole::HostOutputs`): a batch's token ids and candidate lists, not a logits row.
pub const HOST_OUTPUT_MAX: usize = 64 << 10;

/// Sub-pass 2: bump-allocates every dedicated storage, in topological order.
fn place_dedicated(
    g: &Graph,
    a: &Assignment,
    lim: &Limits,
    roles: &[Option<BufferRole>],
    bump: &mut Bump,
) -> Result<Vec<Option<Placed>>, SchedError> {
    let mut placed = vec![None; g.len()];
    for id in g.topo_order() {
        let Some(role) = roles[id.index()] else { continue };
        let b = a.backend[id.index()];
        placed[id.index()] = Some((b, role, bump.place(lim, g, b, role, id)?));
    }
    Ok(placed)
}

/// Sub-pass 3: a read-back region for every output storage that lives in device memory the host
/// cannot read in place.
fn place_readback(
    g: &Graph,
    a: &Assignment,
    lim: &Limits,
    roles: &[Option<BufferRole>],
    bump: &mut Bump,
) -> Result<Vec<Option<Placed>>, SchedError> {
    let mut readback = vec![None; g.len()];
    let mut outputs: Vec<NodeId> = g.outputs().into_iter().map(|o| g.storage_of(o)).collect();
    outputs.sort();
    outputs.dedup();
    for st in outputs {
        let b = a.backend[st.index()];
        // (A linked leaf has no role: it is read where the base plan keeps it.)
        let Some(role) = roles[st.index()] else { continue };
        if role.kind() == crate::MemoryKind::Host || lim.host_device[b] {
            continue;
        }
        readback[st.index()] = Some((b, BufferRole::ReadBack, bump.place(lim, g, b, BufferRole::ReadBack, st)?));
    }
    Ok(readback)
}

/// The arenas, each holder's slot, and the bytes the arenas would need without reuse.
type ArenaPlacement = (Vec<Arena>, HashMap<Holder, Slot>, usize);

/// The plan's buffers, the index of each `(backend, role, chunk)` in them, and the arena bytes.
type BufferList = (Vec<PlanBuffer>, HashMap<(usize, BufferRole, usize), usize>, usize);

/// Holders defined and freed at each time of the timeline, and its last time.
type Timeline = (BTreeMap<usize, Vec<Holder>>, BTreeMap<usize, Vec<Holder>>, usize);

/// Sub-pass 4: the liveness of every arena holder on the timeline of copies and node executions.
fn liveness(g: &Graph, a: &Assignment, splits: &[RawSplit], roles: &[Option<BufferRole>]) -> Timeline {
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
    let is_arena = |h: &Holder| h.1 != a.backend[h.0.index()] || roles[h.0.index()].is_none();
    let mut frees: BTreeMap<usize, Vec<Holder>> = BTreeMap::new();
    let mut defs: BTreeMap<usize, Vec<Holder>> = BTreeMap::new();
    for h in order.iter().filter(|h| is_arena(h)) {
        defs.entry(def[h]).or_default().push(*h);
        frees.entry(last[h]).or_default().push(*h);
    }
    (defs, frees, t)
}

/// Sub-pass 5: places the arena holders by liveness; returns the arenas, each holder's slot and
/// the bytes the arenas would need without reuse.
fn place_arena(
    g: &Graph,
    lim: &Limits,
    defs: &BTreeMap<usize, Vec<Holder>>,
    frees: &BTreeMap<usize, Vec<Holder>>,
    end: usize,
) -> Result<ArenaPlacement, SchedError> {
    let mut arenas: Vec<Arena> = lim.align.iter().zip(&lim.max).map(|(&al, &mx)| Arena::new(al, mx)).collect();
    let mut slot_of: HashMap<Holder, Slot> = HashMap::new();
    let mut no_reuse_bytes = 0;
    for time in 1..=end {
        for h in defs.get(&time).into_iter().flatten() {
            let bytes = g.node(h.0).nbytes();
            let slot = arenas[h.1].alloc(bytes).ok_or_else(|| lim.too_large(g, h.1, h.0, "intermediate"))?;
            no_reuse_bytes += slot.size;
            slot_of.insert(*h, slot);
        }
        for h in frees.get(&time).into_iter().flatten() {
            arenas[h.1].free(slot_of[h]);
        }
    }
    Ok((arenas, slot_of, no_reuse_bytes))
}

/// The plan's buffers, per backend in role order (empty chunks omitted); returns them, the index
/// of each `(backend, role, chunk)` and the arena bytes.
fn buffers(g: &Graph, lim: &Limits, bump: &Bump, arenas: &[Arena]) -> BufferList {
    let mut buffers = Vec::new();
    let mut index = HashMap::new();
    let mut arena_bytes = 0;
    for (b, arena) in arenas.iter().enumerate() {
        for role in BufferRole::ALL {
            let sizes = match role {
                BufferRole::Arena => arena.chunk_sizes(),
                _ => bump.chunks.get(&(b, role)).cloned().unwrap_or_default(),
            };
            for (ci, &size) in sizes.iter().enumerate() {
                if size == 0 {
                    continue;
                }
                if role == BufferRole::Arena {
                    arena_bytes += size;
                }
                let leaf = bump.leaf_of.get(&(b, role, ci)).copied();
                let name = if let Some(id) = leaf {
                    let label = g.node(id).name.clone().unwrap_or_else(|| id.to_string());
                    format!("{}.{}.{label}", lim.names[b], role.leaf_prefix())
                } else if ci == 0 {
                    format!("{}.{}", lim.names[b], role.name())
                } else {
                    format!("{}.{}{ci}", lim.names[b], role.name())
                };
                index.insert((b, role, ci), buffers.len());
                buffers.push(PlanBuffer { backend: b, role, chunk: ci, size, kind: role.kind(), name, leaf });
            }
        }
    }
    (buffers, index, arena_bytes)
}
