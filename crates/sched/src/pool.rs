//! The backend buffers that plans share: [`Pool`].
//!
//! Plans do not own buffers. Each plan buffer resolves to a pool buffer:
//! - a **shared** buffer per `(backend, role, chunk)` for the roles whose contents live at most
//!   one step (inputs, outputs, read-back regions, arenas): every cached plan uses the same ones,
//!   grown (freed and allocated again, larger) only when a plan needs more than they hold, so
//!   after `Scheduler::reserve` of the worst case, smaller plans allocate nothing. Side plans
//!   (`Scheduler::plan_side`, run after a base plan and reading its tensors in place) share a
//!   second set of their own, so that nothing they write touches what the base plan left;
//! - a **leaf** buffer per param or state tensor, identified by backend, role, name, dtype and
//!   shape: every plan that has the same weight or state shares it and its data, so a re-plan
//!   neither re-uploads weights nor loses a KV cache. A leaf buffer is freed when no cached plan
//!   uses it any more.
//!
//! A state leaf's buffer is allocated with the plan (state starts at zero). A param leaf gets its
//! storage when it is first given data, not when it is planned: a copy ([`Pool::owned`]: a buffer
//! allocated and written) or, where the backend can read the data where it lies, an *import*
//! ([`Pool::bind_shared`]: `Backend::import_host` wraps the caller's [`SharedBytes`] as a read-only
//! buffer, and no memory is allocated for it). An imported leaf is never written: writing a param
//! that was imported first gives it a buffer of its own holding the imported bytes (and releases the
//! import). The import's buffer holds the `SharedBytes`, so the memory it aliases stays alive until
//! the pool frees that buffer (no cached plan uses the leaf any more, or `clear`).
//!
//! A shared buffer that grows, and a leaf that gets or changes its storage, gets a new
//! [`BufferId`]; the pool's `generation` counts such changes so that cached plans re-resolve their
//! bindings before they run again (until a param has storage, plans bind it to [`UNBOUND`], which
//! no compute reaches: a compute first checks that every param was set).

use crate::backend::{Backend, BufferId};
use crate::error::SchedError;
use crate::plan::{BufferRole, PlanBuffer};
use crate::shared::SharedBytes;
use graph::{DType, Graph, Shape};
use std::collections::{BTreeSet, HashMap};

/// A param's or state tensor's buffer and what identifies it across graphs.
#[derive(Debug)]
struct Leaf {
    backend: usize,
    role: BufferRole,
    /// `None` for an unnamed leaf, which only the plan that made it uses.
    name: Option<String>,
    dtype: DType,
    ne: Shape,
    size: usize,
    /// The backend buffer; `None` for a param not yet given data.
    id: Option<BufferId>,
    /// The bytes an imported param's read-only buffer aliases (the buffer holds them too).
    imported: Option<SharedBytes>,
    /// Written since allocation (params must be, before a compute).
    set: bool,
    /// Cache keys of the plans that use it.
    users: BTreeSet<u64>,
}

/// Buffers shared by the cached plans (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Pool {
    shared: HashMap<SharedKey, (BufferId, usize)>,
    leaves: Vec<Option<Leaf>>,
    /// Bumped whenever a shared buffer is replaced.
    pub generation: u64,
}

/// The buffer id plans bind a param to before it has storage; never handed to a backend.
pub(crate) const UNBOUND: BufferId = BufferId(u32::MAX);

/// How [`Pool::bind_shared`] stored a param.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The backend reads the caller's bytes in place.
    Imported,
    /// Copied into a buffer of the pool's (`fresh`: allocated by this call).
    Copied { fresh: bool },
}

/// A shared buffer: backend, role, chunk, and whether side plans use it (else main plans).
type SharedKey = (usize, BufferRole, usize, bool);

/// What a plan buffer resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Shared(usize, BufferRole, usize, bool),
    Leaf(usize),
}

impl Pool {
    /// Makes sure every buffer of `buffers` (a plan's, cache key `key`; of a side plan: `side`)
    /// exists at its size, allocating or growing what is missing; returns each plan buffer's slot
    /// and how many buffers were allocated. On an allocation failure, what this call allocated for
    /// leaves is given back (grown shared buffers stay, larger) and the error is returned.
    pub fn ensure(
        &mut self,
        backends: &mut [Box<dyn Backend>],
        g: &Graph,
        buffers: &[PlanBuffer],
        key: u64,
        side: bool,
    ) -> Result<(Vec<Slot>, u64), SchedError> {
        let mut slots = Vec::with_capacity(buffers.len());
        let mut fresh = 0u64;
        let mut new_leaves = Vec::new();
        for pb in buffers {
            let r = match pb.leaf {
                Some(leaf) => {
                    let n = g.node(leaf);
                    let found = self.leaves.iter().position(|l| {
                        l.as_ref().is_some_and(|l| {
                            l.backend == pb.backend
                                && l.role == pb.role
                                && l.name.is_some()
                                && l.name == n.name
                                && l.dtype == n.dtype
                                && l.ne == n.layout.ne
                                && l.size == pb.size
                        })
                    });
                    match found {
                        Some(i) => {
                            self.leaves[i].as_mut().expect("found").users.insert(key);
                            Ok(Slot::Leaf(i))
                        }
                        None => {
                            // A param gets its storage when it is given data (see the module docs).
                            let id = if pb.role == BufferRole::Params {
                                Ok(None)
                            } else {
                                backends[pb.backend].alloc(pb.size, pb.kind).map(Some)
                            };
                            id.map(|id| {
                                fresh += u64::from(id.is_some());
                                let leaf = Leaf {
                                    backend: pb.backend,
                                    role: pb.role,
                                    name: n.name.clone(),
                                    dtype: n.dtype,
                                    ne: n.layout.ne,
                                    size: pb.size,
                                    id,
                                    imported: None,
                                    set: false,
                                    users: BTreeSet::from([key]),
                                };
                                let i = match self.leaves.iter().position(Option::is_none) {
                                    Some(i) => i,
                                    None => {
                                        self.leaves.push(None);
                                        self.leaves.len() - 1
                                    }
                                };
                                self.leaves[i] = Some(leaf);
                                new_leaves.push(i);
                                Slot::Leaf(i)
                            })
                        }
                    }
                }
                None => {
                    let k = (pb.backend, pb.role, pb.chunk, side);
                    match self.shared.get(&k) {
                        Some(&(_, size)) if size >= pb.size => Ok(Slot::Shared(k.0, k.1, k.2, k.3)),
                        old => {
                            // The larger buffer first: if it cannot be had, the old one (and every
                            // cached plan using it) stays as it was.
                            let old = old.map(|&(id, _)| id);
                            match backends[pb.backend].alloc(pb.size, pb.kind) {
                                Ok(id) => {
                                    fresh += 1;
                                    self.shared.insert(k, (id, pb.size));
                                    match old {
                                        Some(old) => {
                                            self.generation += 1;
                                            backends[pb.backend].free(old).map(|()| Slot::Shared(k.0, k.1, k.2, k.3))
                                        }
                                        None => Ok(Slot::Shared(k.0, k.1, k.2, k.3)),
                                    }
                                }
                                Err(e) => Err(e),
                            }
                        }
                    }
                }
            };
            match r {
                Ok(s) => slots.push(s),
                Err(e) => {
                    for i in new_leaves {
                        if let Some(Leaf { backend, id: Some(id), .. }) = self.leaves[i].take() {
                            let _ = backends[backend].free(id);
                        }
                    }
                    for l in self.leaves.iter_mut().flatten() {
                        l.users.remove(&key);
                    }
                    return Err(e.into());
                }
            }
        }
        Ok((slots, fresh))
    }

    /// The backend holding the state tensor `name` of this dtype and shape, if the pool has it.
    pub fn state_backend(&self, name: &str, dtype: DType, ne: Shape) -> Option<usize> {
        self.leaves.iter().flatten().find_map(|l| {
            (l.role == BufferRole::State && l.name.as_deref() == Some(name) && l.dtype == dtype && l.ne == ne)
                .then_some(l.backend)
        })
    }

    /// The backend buffer of a slot.
    pub fn buffer(&self, slot: Slot) -> BufferId {
        match slot {
            Slot::Shared(b, role, chunk, side) => self.shared[&(b, role, chunk, side)].0,
            Slot::Leaf(i) => self.leaves[i].as_ref().expect("live leaf").id.unwrap_or(UNBOUND),
        }
    }

    fn leaf_mut(&mut self, slot: Slot) -> &mut Leaf {
        match slot {
            Slot::Leaf(i) => self.leaves[i].as_mut().expect("live leaf"),
            Slot::Shared(..) => unreachable!("params and state are leaves"),
        }
    }

    /// The owned buffer of a leaf, for writing: allocated first for a param not yet given data;
    /// for an imported param, a buffer of its own holding the imported bytes (the import is freed).
    /// Returns it and whether a buffer was allocated.
    pub fn owned(&mut self, backends: &mut [Box<dyn Backend>], slot: Slot) -> Result<(BufferId, bool), SchedError> {
        let l = self.leaf_mut(slot);
        let (b, size, role) = (l.backend, l.size, l.role);
        if let (Some(id), None) = (l.id, &l.imported) {
            return Ok((id, false));
        }
        let id = backends[b].alloc(size, role.kind())?;
        if let Some(bytes) = &self.leaf_mut(slot).imported
            && let Err(e) = backends[b].upload(id, 0, bytes.bytes())
        {
            let _ = backends[b].free(id);
            return Err(e.into());
        }
        let l = self.leaf_mut(slot);
        let old = l.id.replace(id);
        l.imported = None;
        self.generation += 1;
        if let Some(old) = old {
            backends[b].free(old)?;
        }
        Ok((id, true))
    }

    /// Gives a param leaf `bytes` (its whole data, of `dtype`): imported where its backend can read
    /// them in place (the leaf's former storage, if any, is freed), else copied into its own buffer
    /// (allocated if it has none). The leaf counts as set.
    pub fn bind_shared(
        &mut self,
        backends: &mut [Box<dyn Backend>],
        slot: Slot,
        bytes: &SharedBytes,
        dtype: DType,
    ) -> Result<Bound, SchedError> {
        let b = self.leaf_mut(slot).backend;
        let bound = match backends[b].import_host(bytes, dtype) {
            Some(id) => {
                let l = self.leaf_mut(slot);
                let old = l.id.replace(id);
                l.imported = Some(bytes.clone());
                self.generation += 1;
                if let Some(old) = old {
                    backends[b].free(old)?;
                }
                Bound::Imported
            }
            None => {
                let (id, fresh) = self.owned(backends, slot)?;
                backends[b].upload(id, 0, bytes.bytes())?;
                Bound::Copied { fresh }
            }
        };
        self.mark_set(slot);
        Ok(bound)
    }

    /// Whether the leaf of `slot` has been written (always true for shared slots).
    pub fn leaf_set(&self, slot: Slot) -> bool {
        match slot {
            Slot::Leaf(i) => self.leaves[i].as_ref().is_some_and(|l| l.set),
            Slot::Shared(..) => true,
        }
    }

    /// Records that the leaf of `slot` was written.
    pub fn mark_set(&mut self, slot: Slot) {
        if let Slot::Leaf(i) = slot
            && let Some(l) = self.leaves[i].as_mut()
        {
            l.set = true;
        }
    }

    /// A plan left the cache: frees the leaves no other cached plan uses.
    pub fn release(&mut self, backends: &mut [Box<dyn Backend>], key: u64) -> Result<(), SchedError> {
        let mut r = Ok(());
        for slot in &mut self.leaves {
            // (a param never given data has no buffer to free)
            if let Some(l) = slot
                && l.users.remove(&key)
                && l.users.is_empty()
                && let Some(Leaf { backend, id: Some(id), .. }) = slot.take()
            {
                r = r.and(backends[backend].free(id));
            }
        }
        Ok(r?)
    }

    /// Frees every buffer.
    pub fn clear(&mut self, backends: &mut [Box<dyn Backend>]) -> Result<(), SchedError> {
        let mut r = Ok(());
        for ((b, ..), (id, _)) in self.shared.drain() {
            r = r.and(backends[b].free(id));
        }
        for l in self.leaves.drain(..).flatten() {
            if let Some(id) = l.id {
                r = r.and(backends[l.backend].free(id));
            }
        }
        self.generation += 1;
        Ok(r?)
    }

    /// Bytes allocated, per role (for stats and tests): imported params and params not yet given
    /// data hold none.
    pub fn bytes(&self, role: BufferRole) -> usize {
        let shared: usize = self.shared.iter().filter(|(k, _)| k.1 == role).map(|(_, v)| v.1).sum();
        let leaves: usize = self
            .leaves
            .iter()
            .flatten()
            .filter(|l| l.role == role && l.id.is_some() && l.imported.is_none())
            .map(|l| l.size)
            .sum();
        shared + leaves
    }

    /// Bytes of params read in place (imported), and how many.
    pub fn imported(&self) -> (usize, usize) {
        let mut out = (0, 0);
        for bytes in self.leaves.iter().flatten().filter_map(|l| l.imported.as_ref()) {
            out = (out.0 + bytes.len(), out.1 + 1);
        }
        out
    }
}
